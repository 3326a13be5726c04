"""Aggregation: one event per real failure across ranks; consequences follow their cause."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_framing import _eight_rank_log

from matcher.aggregate import Aggregator, fingerprint, mask_message
from matcher.catalog.check import frame_text
from matcher.engine import Engine
from matcher.types import ExceptionLine

NCCL = {
    "id": "nccl-test",
    "messagePattern": r"NCCL error in: (?P<where>\S+), unhandled system error",
    "errorClass": "RuntimeError",
    "severity": "critical",
}
SIGQUIT = {
    "id": "sigquit-test",
    "messagePattern": r"Received sigquit from a child process",
    "role": "consequence",
}


def engine_with(*raws):
    from matcher.catalog.load import validate_record
    return Engine([validate_record(r, "t.json", i, "curated") for i, r in enumerate(raws)])


def run(text, engine, window=5.0):
    agg = Aggregator(window=window)
    events = []
    for r in frame_text(text):
        events += agg.add(r, engine.match(r))
    return events + agg.finish()


def test_eight_ranks_one_event_and_sigquit_attached_to_it():
    """TP0–TP7 printing the same NCCL error: one event listing every rank; sigquit is its consequence."""
    events = run(_eight_rank_log(), engine_with(NCCL, SIGQUIT))
    assert len(events) == 1
    (e,) = events
    assert (e.event, e.pattern_id, e.occurrences, e.severity) == ("sglang_error", "nccl-test", 8, "critical")
    assert e.ranks == tuple(f"TP{i}" for i in range(8))
    assert e.consequences == ("Received sigquit from a child process. It usually means the child failed.",)


def test_same_rank_twice_is_two_occurrences():
    line = "[2026-01-01 12:00:0{s} TP0] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
    events = run(line.format(s=0) + line.format(s=1), engine_with(NCCL))
    assert [(e.ranks, e.occurrences) for e in events] == [(("TP0",), 1), (("TP0",), 1)]


def test_outside_the_window_is_a_new_event():
    a = "[2026-01-01 12:00:00 TP0] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
    b = "[2026-01-01 12:00:09 TP1] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
    assert [e.ranks for e in run(a + b, engine_with(NCCL))] == [("TP0",), ("TP1",)]
    assert [e.ranks for e in run(a + b, engine_with(NCCL), window=10)] == [("TP0", "TP1")]
    # A jump back in log time separates too (scan has only the log's time to go by).
    assert sorted(e.ranks for e in run(b + a, engine_with(NCCL))) == [("TP0",), ("TP1",)]


CRASHED = {
    "id": "crashed-test",
    "messagePattern": r"Subprocess (?P<process>\S+) \(pid=\d+\) crashed with exit code (?P<exit_code>-?\d+)",
    "role": "consequence",
}
SIGQUIT_LINE = "[2026-01-01 12:00:0{s}] Received sigquit from a child process. It usually means the child failed.\n"
CRASHED_LINE = ("[2026-01-01 12:00:0{s}] Subprocess scheduler_0 (pid=4187) crashed with exit code -9. "
                "Triggering SIGQUIT for cleanup...\n")
NCCL_AT = "[2026-01-01 12:00:0{s} TP0] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"


def test_consequence_that_follows_no_failure_is_the_cause_and_takes_the_consequences_after_it():
    """A child killed from outside prints nothing: the parent's line is the first fact known."""
    (e,) = run(SIGQUIT_LINE.format(s=0), engine_with(SIGQUIT))
    assert (e.pattern_id, e.role) == ("sigquit-test", "cause")
    (e,) = run(CRASHED_LINE.format(s=0) + SIGQUIT_LINE.format(s=0), engine_with(SIGQUIT, CRASHED))
    assert (e.pattern_id, e.role, e.captures["exit_code"]) == ("crashed-test", "cause", "-9")
    assert e.consequences == ("Received sigquit from a child process. It usually means the child failed.",)


def test_consequence_before_a_failure_of_its_source_within_the_window_stays_a_consequence():
    """Child and parent write to one stream: the failure may be printed just after."""
    events = run(SIGQUIT_LINE.format(s=0) + NCCL_AT.format(s=1), engine_with(NCCL, SIGQUIT))
    assert sorted((e.pattern_id, e.role) for e in events) == [
        ("nccl-test", "cause"), ("sigquit-test", "consequence")]
    # outside the window, or in another source's log, the failure is not the one it follows
    events = run(SIGQUIT_LINE.format(s=0) + NCCL_AT.format(s=9), engine_with(NCCL, SIGQUIT))
    assert sorted((e.pattern_id, e.role) for e in events) == [("nccl-test", "cause"), ("sigquit-test", "cause")]
    agg = Aggregator()
    engine = engine_with(NCCL, SIGQUIT)
    for text, source in ((SIGQUIT_LINE.format(s=0), "a"), (NCCL_AT.format(s=1), "b")):
        for r in frame_text(text, source):
            agg.add(r, engine.match(r))
    assert sorted((e.source, e.role) for e in agg.finish()) == [("a", "cause"), ("b", "cause")]


def test_a_failure_seen_before_a_consequence_it_did_not_take_keeps_it_a_consequence():
    """Pod a fails, then pod b: a's sigquit is not joined to a's failure (the last one
    followed is b's), yet it follows a failure of its own source: a consequence."""
    engine = engine_with(NCCL, SIGQUIT)
    agg = Aggregator()
    for text, source in ((NCCL_AT.format(s=0), "a"), (NCCL_AT.format(s=0), "b"),
                         (SIGQUIT_LINE.format(s=1), "a")):
        for r in frame_text(text, source):
            agg.add(r, engine.match(r))
    assert sorted((e.source, e.pattern_id, e.role) for e in agg.finish()) == [
        ("a", "nccl-test", "cause"), ("a", "sigquit-test", "consequence"), ("b", "nccl-test", "cause")]


def test_early_a_lone_consequence_waits_its_grace_for_the_failure_it_follows():
    engine = engine_with(NCCL, SIGQUIT)
    agg = Aggregator(early=True, rank_grace=0.1)
    (sigquit,) = frame_text(SIGQUIT_LINE.format(s=0))
    assert agg.add(sigquit, engine.match(sigquit), 10.0) == []
    assert agg.due_in(10.0) == pytest.approx(0.1)
    (nccl,) = frame_text("[2026-01-01 12:00:00] RuntimeError: NCCL error in: x.cpp:1, unhandled system error")
    [cause] = agg.add(nccl, engine.match(nccl), 10.05)
    assert (cause.pattern_id, cause.role) == ("nccl-test", "cause")
    [late] = agg.tick(10.2)
    assert (late.pattern_id, late.role) == ("sigquit-test", "consequence")
    agg = Aggregator(early=True, rank_grace=0.1)
    assert agg.add(sigquit, engine.match(sigquit), 10.0) == []
    [alone] = agg.tick(10.2)
    assert (alone.pattern_id, alone.role) == ("sigquit-test", "cause")


def test_unknown_exception_gets_a_stable_fingerprint():
    a = "Traceback (most recent call last):\nRuntimeError: shard 3 of /data/m1/w.bin at 0x7f00aa is bad\n"
    b = "Traceback (most recent call last):\nRuntimeError: shard 12 of /data/m2/w.bin at 0x7f11bb is bad\n"
    c = "Traceback (most recent call last):\nRuntimeError: tokenizer missing\n"
    events = run(a + b + c, engine_with(NCCL))
    assert [e.event for e in events] == ["sglang_unknown_error"] * 3
    assert events[0].fingerprint == events[1].fingerprint != events[2].fingerprint
    assert mask_message("shard 3 of /data/m1/w.bin at 0x7f00aa from 10.0.0.1:5000 'x'") == \
        "shard <num> of <path> at <hex> from <ip> <str>"
    assert fingerprint("torch.OutOfMemoryError", "x 1") == fingerprint("OutOfMemoryError", "x 2")


def test_plain_lines_that_match_nothing_make_no_event():
    assert run("[2026-01-01 12:00:00 TP0] Decode batch. #running-req: 1\n", engine_with(NCCL)) == []


def test_open_offsets_name_each_sources_first_record_in_groups_not_yet_emitted():
    """A group holds the first record of its source, consequences included; the same failure
    in another source is a group of its own (another server), and a consequence attaches only
    to a cause of its own source."""
    engine = engine_with(NCCL, SIGQUIT)
    line = ("[2026-01-01 12:00:0{s} TP{r}] "
            "RuntimeError: NCCL error in: x.cpp:1, unhandled system error")
    agg = Aggregator()
    records = [
        (frame_text(line.format(s=0, r=0), "a")[0], 30),
        (frame_text(line.format(s=0, r=1), "a")[0], 10),
        (frame_text(line.format(s=1, r=1), "b")[0], 70),
        (frame_text("[2026-01-01 12:00:02] Received sigquit from a child process.", "b")[0], 75),
    ]
    for record, offset in records:
        assert agg.add(replace(record, offset=offset), engine.match(record)) == []
    assert [agg.open_offsets(s) for s in ("a", "b", "c")] == [[10], [70], []]
    events = agg.finish()
    assert [(e.source, e.ranks, e.consequences) for e in events] == [
        ("a", ("TP0", "TP1"), ()),
        ("b", ("TP1",), ("Received sigquit from a child process.",))]
    assert agg.open_offsets("a") == []


def test_the_same_failure_on_two_pods_is_two_events_and_ranks_never_merge_across_sources():
    """TP0 of pod A and TP1 of pod B fail alike within the window: two events, each with its
    own rank, not one event of pod A listing both."""
    engine = engine_with(NCCL)
    line = ("[2026-01-01 12:00:00 TP{r}] "
            "RuntimeError: NCCL error in: x.cpp:1, unhandled system error")
    for early in (False, True):
        agg = Aggregator(early=early)
        events = []
        for source, r in (("pod-a.log", 0), ("pod-b.log", 1)):
            for rec in frame_text(line.format(r=r), source):
                events += agg.add(rec, engine.match(rec), 0.0, [f"TP{r}"])
        events += agg.finish()
        assert sorted((e.source, e.ranks) for e in events) == [
            ("pod-a.log", ("TP0",)), ("pod-b.log", ("TP1",))], early


def test_another_captured_value_is_a_new_failure_printed_at_once():
    """`--flag-b` five seconds after `--flag-a` is printed, not held as a repeat of it; a
    true repeat is still quiet, and its count comes with the next print of that identity."""
    flag = {"id": "flag-test", "messagePattern": r"unrecognized arguments: (?P<flag>\S+)"}
    engine = engine_with(flag)
    agg = Aggregator(window=5.0, early=True, repeat_interval=60.0)
    events = []
    for now, name in ((0.0, "--flag-a"), (5.0, "--flag-b"), (6.0, "--flag-c"),
                      (7.0, "--flag-b"), (100.0, "--flag-b")):
        for rec in frame_text(f"launch_server.py: error: unrecognized arguments: {name}"):
            events += agg.add(rec, engine.match(rec), now)
    events += agg.finish()
    assert [(e.captures["flag"], e.quiet, e.suppressed) for e in events] == [
        ("--flag-a", False, 0), ("--flag-b", False, 0), ("--flag-c", False, 0),
        ("--flag-b", True, 0), ("--flag-b", False, 1)]


def test_crash_loop_prints_once_per_interval_and_counts_every_repeat():
    """100 repeats of one error within a minute (of arrival time: the interval runs on it): the
    first is printed, the rest are quiet; after the interval the next printed event says how
    many were held back."""
    agg = Aggregator(window=5.0, repeat_interval=60.0)
    engine = engine_with(NCCL)
    events = []
    for i in range(100):
        text = f"[2026-01-01 12:00:{i % 60:02d} TP0] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
        for r in frame_text(text):
            events += agg.add(r, engine.match(r), now=i * 0.5)
    late = "[2026-01-01 12:01:30 TP0] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
    for r in frame_text(late):
        events += agg.add(r, engine.match(r), now=200.0)
    events += agg.finish()
    assert len(events) == 101
    printed = [e for e in events if not e.quiet]
    assert [(e.log_ts, e.suppressed) for e in printed] == [
        ("2026-01-01 12:00:00", 0), ("2026-01-01 12:01:30", 99)]


def test_without_a_repeat_interval_every_event_is_printed():
    agg = Aggregator(window=5.0)
    engine = engine_with(NCCL)
    text = "[2026-01-01 12:00:0{s} TP0] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
    events = []
    for s in range(3):
        for r in frame_text(text.format(s=s)):
            events += agg.add(r, engine.match(r))
    events += agg.finish()
    assert [e.quiet for e in events] == [False, False, False]


# -- early events (the daemon): emitted once nothing more can join ------------------------------

NCCL_LINE = ("[2026-01-01 12:00:{s:02d} TP{r}] RuntimeError: NCCL error in: x.cpp:1, "
             "unhandled system error\n")


def early_steps(lines, engine, expected):
    """Feed records one at a time; the events each `add` returned, in order."""
    agg = Aggregator(window=5.0, early=True)
    steps = []
    for r in frame_text("".join(lines)):
        steps.append([(e.pattern_id, e.ranks) for e in agg.add(r, engine.match(r), 0.0, expected)])
    steps.append([(e.pattern_id, e.ranks) for e in agg.finish()])
    return steps


def test_early_event_leaves_once_every_rank_the_source_showed_has_reported():
    ranks = [f"TP{i}" for i in range(4)]
    steps = early_steps([NCCL_LINE.format(s=0, r=i) for i in range(4)], engine_with(NCCL), ranks)
    assert steps == [[], [], [], [("nccl-test", tuple(ranks))], []]


def test_early_event_without_ranks_leaves_at_once_and_its_sigquit_folds_into_it():
    lines = ["RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n",
             ("[2026-01-01 12:00:00] Received sigquit from a child process. It usually means the "
             "child failed.\n")]
    steps = early_steps(lines, engine_with(NCCL, SIGQUIT), [])
    assert steps == [[("nccl-test", ())], [], []]


def test_early_late_rank_folds_into_the_emitted_event_until_its_window_ends():
    """TP0 was the only rank shown when it reported: emitted; TP1 within 5 s adds nothing; TP1
    again after the window is a failure of its own."""
    lines = [NCCL_LINE.format(s=0, r=0), NCCL_LINE.format(s=2, r=1), NCCL_LINE.format(s=9, r=1)]
    steps = early_steps(lines, engine_with(NCCL), ["TP0"])
    assert steps == [[("nccl-test", ("TP0",))], [], [], [("nccl-test", ("TP1",))]]


def test_without_early_the_group_waits_for_its_window():
    lines = [NCCL_LINE.format(s=0, r=i) for i in range(2)]
    agg = Aggregator(window=5.0)
    records = frame_text("".join(lines))
    assert [agg.add(r, engine_with(NCCL).match(r), 0.0, ["TP0", "TP1"]) for r in records] == [[], []]
    assert [e.ranks for e in agg.finish()] == [("TP0", "TP1")]


def test_early_event_on_one_rank_of_many_leaves_after_the_grace_and_others_fold_in():
    """An OOM on TP3 of eight: the others never print it. It leaves `rank_grace` after arrival,
    not at the window's end; TP5 printing it later within the window adds no event."""
    agg = Aggregator(window=5.0, early=True, rank_grace=0.1)
    engine = engine_with(NCCL)
    ranks = [f"TP{i}" for i in range(8)]
    first, later = frame_text(NCCL_LINE.format(s=0, r=3) + NCCL_LINE.format(s=1, r=5))
    assert agg.add(first, engine.match(first), 10.0, ranks) == []
    assert agg.due_in(10.0) == pytest.approx(0.1)
    assert agg.tick(10.05) == []
    assert agg.due_in(10.05) == pytest.approx(0.05)
    [event] = agg.tick(10.1)
    assert (event.pattern_id, event.ranks, event.occurrences) == ("nccl-test", ("TP3",), 1)
    assert agg.due_in(10.1) is None
    assert agg.add(later, engine.match(later), 10.2, ranks) == []
    assert agg.finish() == []


def test_without_early_due_in_is_the_window_end():
    agg = Aggregator(window=5.0, rank_grace=0.1)
    [record] = frame_text(NCCL_LINE.format(s=0, r=3))
    agg.add(record, engine_with(NCCL).match(record), 10.0, ["TP3", "TP4"])
    assert agg.due_in(11.0) == pytest.approx(4.0)
    assert agg.tick(11.0) == []


def test_the_same_error_in_another_source_is_printed_not_held_as_a_repeat():
    """Two servers' logs (a DaemonSet reads many) fail alike within the interval: each source
    gets its event; a repeat within one source is still quiet."""
    agg = Aggregator(window=5.0, repeat_interval=60.0)
    engine = engine_with(NCCL)
    text = "[2026-01-01 12:00:0{s} TP0] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
    events = []
    for s, source in enumerate(["pod-a.log", "pod-b.log", "pod-a.log"]):
        for r in frame_text(text.format(s=s), source):
            events += agg.add(r, engine.match(r))
    events += agg.finish()
    assert [(e.source, e.quiet) for e in events] == [
        ("pod-a.log", False), ("pod-b.log", False), ("pod-a.log", True)]


# -- time: windows run on arrival time; a wild log timestamp cannot steer ------------------------

NCCL_ERROR = "RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
FAR_FUTURE = "[2099-01-01 00:00:00 TP0] " + NCCL_ERROR
NOW_TP1 = "[2026-01-01 12:00:00 TP1] " + NCCL_ERROR


def daemon_aggregator(**kw) -> Aggregator:
    """The daemon's settings (config.py defaults)."""
    return Aggregator(**{"window": 5.0, "early": True, "repeat_interval": 60.0,
                         "rank_grace": 0.1, **kw})


@pytest.mark.parametrize("early", [True, False])
@pytest.mark.parametrize("gap", [30.0, 2.0, 0.01])
def test_a_far_future_line_does_not_swallow_a_later_failure_on_another_rank(early, gap):
    """TP0 prints a line stamped 2099 (a bad clock, a replayed log); `gap` seconds later TP1
    fails with the same error, stamped now. Two failures, two events: 30 s apart in arrival
    they are in no window together, and 2 or 0.01 s apart their timestamps still part them. (The
    log's time bounded the window: 2026 − 2099 is negative, "within", so TP1 was folded into
    TP0's event; and the repeat limit, on log time too, printed TP1's as news.)"""
    agg = daemon_aggregator(early=early)
    engine = engine_with(NCCL)
    [wild], [later] = frame_text(FAR_FUTURE), frame_text(NOW_TP1)
    events = agg.add(wild, engine.match(wild), 100.0, ["TP0", "TP1"])
    events += agg.tick(100.0 + gap / 2)  # the daemon ticks meanwhile
    events += agg.add(later, engine.match(later), 100.0 + gap, ["TP0", "TP1"])
    events += agg.finish()
    # The second is a repeat within the interval: counted by the metrics, not printed.
    assert [(e.log_ts[:4], e.ranks, e.quiet) for e in events] == [
        ("2099", ("TP0",), False), ("2026", ("TP1",), True)]


def test_a_wild_timestamp_does_not_end_the_windows_open_around_it():
    """TP0 fails; a line of another error stamped 2099 comes between; TP1 reports TP0's failure
    a moment later. One event lists both ranks: the wild line ended no window."""
    agg = daemon_aggregator()
    engine = engine_with(NCCL)
    records = frame_text(NOW_TP1.replace("TP1", "TP0")
                         + "[2099-01-01 00:00:00 TP2] ValueError: unexpected state\n" + NOW_TP1)
    events = []
    for i, r in enumerate(records):
        events += agg.add(r, engine.match(r), 100.0 + i * 0.01, ["TP0", "TP1", "TP2"])
    events += agg.tick(101.0) + agg.finish()
    assert sorted((e.pattern_id or e.error_class, e.ranks) for e in events) == [
        ("ValueError", ("TP2",)), ("nccl-test", ("TP0", "TP1"))]


def test_the_repeat_interval_runs_on_arrival_time_not_on_the_log_s():
    """Two occurrences stamped an hour apart but read 10 s apart are repeats; two stamped the
    same second but read two minutes apart are not."""
    engine = engine_with(NCCL)
    line = "[2026-01-01 {hm}:00 TP0] " + NCCL_ERROR

    def quiet(stamps_and_arrivals):
        agg = daemon_aggregator()
        out = []
        for hm, now in stamps_and_arrivals:
            [r] = frame_text(line.format(hm=hm))
            out += agg.add(r, engine.match(r), now, ["TP0"])
        return [e.quiet for e in out + agg.finish()]

    assert quiet([("12:00", 100.0), ("13:00", 110.0)]) == [False, True]
    assert quiet([("12:00", 100.0), ("12:00", 220.0)]) == [False, False]


# -- many distinct errors: bounded tables, O(1) a record -----------------------------------------

def _word(i: int) -> str:
    """A distinct string of letters for each i: fingerprints mask digits, not words."""
    out = ""
    i += 26 ** 3
    while i:
        i, r = divmod(i, 26)
        out += chr(ord("a") + r)
    return out


@pytest.mark.parametrize("ranks, expected", [((), ()), (("TP0",), ("TP0", "TP1"))],
                         ids=["emitted-at-once", "waiting-for-ranks"])
def test_tables_stay_bounded_under_many_distinct_errors_and_every_one_is_counted(ranks, expected):
    """50,000 distinct unknown errors (every fourth repeated once) read within 5 s, in the daemon's
    settings: no table — open groups, groups emitted early, the repeat table, its notes —
    ever holds more than `max_tracked` entries (they were rebuilt on every record past 10,000,
    which made 100,000 distinct errors take minutes), and every occurrence comes out as an event
    (printed or quiet), so the metrics count them all. With ranks that never all report and no
    tick, the oldest open groups are emitted as the table fills."""
    agg = daemon_aggregator()
    [template] = frame_text("[2026-01-01 12:00:00] ValueError: x\n")
    template = replace(template, ranks=ranks)
    n = 50_000
    bound = agg.max_tracked
    assert bound < n
    tables = {"open": "_open", "closed": "_closed", "repeats": "_last_printed",
              "notes": "_suppressed"}
    largest = dict.fromkeys(tables, 0)
    events = []
    for i in range(n):
        for j in (i, i - 100) if i >= 100 and i % 4 == 0 else (i,):  # a repeat 100 later
            record = replace(template, offset=i,
                             exceptions=(ExceptionLine("ValueError", f"unexpected {_word(j)}"),))
            events += agg.add(record, None, 1000.0 + i * 1e-4, expected)
        for name, attribute in tables.items():
            size = len(getattr(agg, attribute))
            largest[name] = max(largest[name], size)
            assert size <= bound, (name, i)
    events += agg.finish()
    filled = {name for name, most in largest.items() if most == bound}
    assert filled >= {"closed", "repeats"} | ({"open"} if ranks else set())  # the flood did
    assert len(events) == n + (n - 100) // 4
    assert len({e.fingerprint for e in events}) == n
    assert sum(not e.quiet for e in events) >= n  # every distinct error printed at least once


def test_unknown_errors_are_fingerprinted_by_the_place_that_raised_them():
    """Real KeyErrors from sglang issues (tests/fixtures/field/): the detokenizer's lookup of a
    request id (#2812) is one fingerprint whatever the id; the same class and message shape
    raised elsewhere is another."""
    from pathlib import Path

    from matcher.aggregate import raising_frame
    from matcher.catalog.check import frame_text

    field = Path(__file__).parent / "fixtures" / "field" / "model-runtime"
    text = (field / "2812-detokenizer-keyerror.log").read_text()
    record = [r for r in frame_text(text) if r.exceptions][-1]
    assert raising_frame(record) == "managers/detokenizer_manager.py:event_loop"
    other_id = text.replace("dc49ad867dc144249f59f4e85c7229cd", "0a1b2c3d4e5f60718293a4b5c6d7e8f9")
    again = [r for r in frame_text(other_id) if r.exceptions][-1]
    one = fingerprint("KeyError", record.exceptions[-1].message, raising_frame(record))
    assert one == fingerprint("KeyError", again.exceptions[-1].message, raising_frame(again))
    # #29256's KeyError on a request id, raised by the tokenizer manager: not the same failure.
    assert one != fingerprint("KeyError", "'5e25b243e77743e6b3711ae7206ffdf3'",
                              "managers/tokenizer_manager.py:_wait_one_response")
    assert one != fingerprint("KeyError", record.exceptions[-1].message)


def test_a_records_remediation_is_made_once_while_it_fires(monkeypatch):
    """Every event of a record carries its remediation; it is made once and shared (a fix text
    read from the catalog and its words built per event were a fifth of `scan -j`'s parent)."""
    from matcher.catalog.schema import CatalogRecord

    made: list[str] = []
    real = CatalogRecord.remediation

    def counting(self):
        made.append(self.id)
        return real(self)

    monkeypatch.setattr(CatalogRecord, "remediation", counting)
    engine = engine_with(NCCL, SIGQUIT)
    (nccl,) = [r for r in engine.records if r.id == "nccl-test"]
    line = "[2026-01-01 12:00:{s:02d} TP0] RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n"
    events = run("".join(line.format(s=10 * i) for i in range(4)), engine)
    assert len(events) == 4 and made == ["nccl-test"]
    assert [e.remediation for e in events] == [real(nccl)] * 4
