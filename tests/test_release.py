"""Which release wrote a log: sets of releases, frames, and what a source learns."""

from __future__ import annotations

from pathlib import Path

from matcher.frames import all_frames
from matcher.framing import Framer
from matcher.release import Releases, Span, Tracker
from matcher.types import Line

REPO = Path(__file__).resolve().parents[1]


def test_ranges_are_read_and_compared_in_release_order():
    """`0.5.10` comes after `0.5.9`, `.post2` after its release; a bound at the catalog's
    oldest or newest release is left open (an unseen release may raise the same line)."""
    r = Releases.of(["0.5.9..0.5.10", "0.4.3.post2"], oldest="0.4.0", newest="0.5.23")
    assert r.spans == (Span("0.4.3.post2", "0.4.3.post2"), Span("0.5.9", "0.5.10"))
    assert [r.contains(v) for v in ("0.4.3.post2", "0.4.3", "0.5.9", "0.5.10", "0.5.11")] == \
        [True, False, True, True, False]
    open_ended = Releases.of(["0.5.20..0.5.23"], oldest="0.4.0", newest="0.5.23")
    assert open_ended.label() == "0.5.20.." and open_ended.contains("0.6.0")
    assert Releases.of(["0.4.0..0.5.23"], oldest="0.4.0", newest="0.5.23").label() == ""


def test_intersection_narrows_and_can_be_empty():
    a = Releases.of(["0.4.0..0.5.4"])
    b = Releases.of(["0.5.2..0.5.23"])
    assert a.intersect(b).label() == "0.5.2..0.5.4"
    assert not Releases.of(["0.4.0..0.4.9"]).intersect(b)
    assert Releases.of(["0.5.2"]).intersect(b).label() == "0.5.2"


def test_a_source_learns_by_intersection_and_starts_over_on_a_contradiction():
    """Two failures narrow what a log's server runs; a failure no release in that set can have
    written means the server changed (an upgrade writing to the same file)."""
    t = Tracker()
    t.learn("server.log", Releases.of(["0.4.0..0.5.4"]))
    t.learn("server.log", Releases.of(["0.5.2..0.5.23"]))
    assert t.known("server.log").label() == "0.5.2..0.5.4"
    t.learn("server.log", Releases.of(["0.5.20..0.5.23"]))
    assert t.known("server.log").label() == "0.5.20..0.5.23"
    assert t.known("other.log") is None


def test_frames_of_a_real_traceback():
    """The frames of a real sglang 0.5.23 launch failure, outermost first, the raise last."""
    framer = Framer()
    path = REPO / "examples/logs/int8-mamba-radix-cache.log"
    records = []
    offset = 0
    for text in path.read_text().splitlines():
        line = Line(text, "x", offset, offset + len(text) + 1)
        offset += len(text) + 1
        records += framer.feed(line, 0.0)
    records += framer.finish()
    [tb] = [r for r in records if r.kind == "traceback"]
    got = all_frames(tb)
    assert got[-1].path.endswith("sglang/srt/arg_groups/mamba_hook.py") and got[-1].line == 90
    assert len(got) == len([t for t in tb.lines if t.lstrip().startswith('File "')])


def _scan(*args: str) -> list[dict]:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "matcher", "scan", "--format", "json", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_auto_learns_the_release_of_real_launch_logs_from_their_tracebacks():
    """Real sglang 0.5.23 launch failures under the default `auto`, with the built-in catalog:
    the two that raise from generated records' sites (`validation_hook.py`) each learn from
    their own traceback that they are 0.5.23 — or a release newer than the catalog — and link
    0.5.23's source; the others (curated records, which claim no release) say nothing."""
    logs = REPO / "tests/fixtures/sglang/releases-launch/0.5.23"
    got = {Path(e["source"]).name: (e.get("sglang_version"),
                                    (e.get("remediation") or {}).get("url", ""))
           for e in _scan(*map(str, sorted(logs.glob("*.log"))))}  # each file learns alone
    for name in ("chunked_prefill_not_page_multiple.log", "moe_dense_tp_size.log"):
        version, url = got[name]
        assert version == "0.5.23.." and "/blob/v0.5.23/python/sglang/srt/" in url, (name, url)
    assert got["tp_not_divisible_by_nnodes.log"][0] is None


OLD = REPO / "tests/fixtures/sglang/releases-launch/0.4.6.post1"


def test_an_old_release_is_recognized_at_its_own_file_and_line():
    """A real sglang 0.4.6.post1 launch failure (`--enable-dp-attention` with dp-size 1): the
    generated layer recognizes it, `auto` learns from the frame `server_args.py, line 299`
    that only 0.4.6.post1 raises it there, and the event links that line of that release."""
    # (The optional `vllm._C` import that failed on this GPU-less host is a warning before it.)
    [e] = [x for x in _scan(str(OLD / "dp_attention_dp_size_1.log")) if x["event"] != "sglang_warning"]
    assert (e["event"], e["sglang_version"]) == ("sglang_error", "0.4.6.post1")
    assert e["remediation"]["url"].endswith(
        "/blob/v0.4.6.post1/python/sglang/srt/server_args.py#L299")


def test_a_message_of_older_releases_does_not_match_under_0_5_23(tmp_path):
    """The same real 0.4.6.post1 line under `--sglang-version 0.5.23`: the message was gone by
    then, so no record of it matches — the failure is reported as an unknown error, not as a
    0.5.23 failure."""
    import json

    log = str(OLD / "dp_attention_dp_size_1.log")
    # The shipped record of that message, alone (a catalog of one compiles at once).
    generated = REPO / "patterns/sglang/generated/sglang.jsonl"
    [line] = [x for x in generated.read_text().splitlines() if '"id":"e02cc6369949056b"' in x]
    assert json.loads(line)["sglangVersions"] == ["0.4.4.post1..0.5.1.post3"]
    one = tmp_path / "one.jsonl"
    one.write_text(line + "\n")
    alone = ["--no-builtin", "--catalog", str(one)]
    [e] = _scan("--sglang-version", "0.5.23", *alone, log)
    assert (e["event"], e["sglang_version"]) == ("sglang_unknown_error", "0.5.23")
    [e] = _scan("--sglang-version", "0.4.6.post1", *alone, log)
    assert (e["event"], e["sglang_version"], e["pattern_id"]) == (
        "sglang_error", "0.4.6.post1", "e02cc6369949056b")


def test_a_log_that_shows_no_release_gives_events_without_one():
    """A real argparse failure (no traceback, a curated record with no claim about releases):
    under `auto` the event carries no `sglang_version` at all, rather than a guess."""
    [e] = _scan(str(REPO / "tests/fixtures/sglang/launch/argparse_invalid_int.log"))
    assert e["event"] == "sglang_error" and "sglang_version" not in e


def test_the_layer_a_record_is_loaded_in_does_not_change_which_record_wins():
    """The curated catalog given as a user catalog (`--no-builtin --catalog patterns/sglang/
    curated`) recognizes every real log exactly as the built-in curated layer does: in
    particular a traceback's header record (`Scheduler hit an exception:`, raised in
    scheduler.py) never passes over its exception's own record because the traceback runs
    through scheduler.py."""
    import io
    import json

    from matcher.catalog import builtin_patterns_dir, load_catalog
    from matcher.commands.scan import cmd_scan

    logs = sorted(str(p) for p in (Path(__file__).parent / "fixtures" / "sglang").glob("*/*.log"))
    field = sorted(str(p) for p in (Path(__file__).parent / "fixtures" / "field").glob("*/*.log"))
    logs += field
    curated = builtin_patterns_dir() / "sglang" / "curated"

    def winners(catalog) -> list[tuple[str, str | None]]:
        out = []
        for log in logs:
            buf = io.StringIO()
            cmd_scan([log], "json", catalog, buf, err=io.StringIO())
            out += [(Path(log).name, json.loads(x).get("pattern_id")) for x in buf.getvalue().splitlines()]
        return out

    builtin = winners(load_catalog(generated=False))
    as_user = winners(load_catalog(builtin=False, user_paths=[curated]))
    assert as_user == builtin
    # The case that regressed: a header record and an exception record in one traceback.
    assert ("tp8_scheduler_crash.log", "0712139d4ca779ce") not in builtin
    assert sum(pid is not None for _, pid in builtin) > 40


def test_an_upgraded_server_s_failure_keeps_its_own_record_over_the_header_s(tmp_path):
    """A log that has shown sglang 0.4.6.post1 (a real launch failure of it), then a real
    0.5.x scheduler crash (sglang issue #8931, under `Scheduler hit an exception:`) whose
    message no 0.4 release has: the crash is its own record — the server was upgraded — not
    the generic record of the header, which fits any release."""
    import io
    import json

    from matcher.catalog import load_catalog
    from matcher.commands.scan import cmd_scan

    crash = REPO / "tests/fixtures/field/model-runtime/8931-swa-radix-sanity-check.log"
    # The generated layer and the curated record of the header: the crash's own record is then
    # the generated one of its message (a curated record may take it over in the built-in one).
    from matcher.catalog import Catalog
    from matcher.catalog.load import load_paths

    # Just the records these two logs need (a catalog of three compiles at once, where the
    # whole generated layer plus one record would be another 30-second compile in the suite):
    # the 0.4.6.post1 failure's, the crash's and the header's.
    header = load_catalog(generated=False).by_id("0712139d4ca779ce")  # scheduler-hit-an-exception
    wanted = {"e02cc6369949056b", "286e6eca2526ef19"}
    generated = [r for r in load_paths([REPO / "patterns/sglang/generated"], "generated").records
                 if r.id in wanted]
    assert len(generated) == 2
    catalog = Catalog(records=(*generated, header), issues=(), version="test", files=())

    def events(*texts: str) -> list[dict]:
        log = tmp_path / "server.log"
        log.write_text("".join(texts))
        out = io.StringIO()
        cmd_scan([str(log)], "json", catalog, out, err=io.StringIO())
        return [json.loads(x) for x in out.getvalue().splitlines()]

    # The scheduler's crash alone (its first line, the same message logged, would teach the
    # release before the traceback is picked).
    text = "".join(crash.read_text().splitlines(keepends=True)[1:])
    alone = [e for e in events(text) if e["event"] == "sglang_error"][-1]
    record = catalog.by_id(alone["pattern_id"])
    assert record.layer == "generated" and not record.in_version("0.4.6.post1")
    both = events((OLD / "dp_attention_dp_size_1.log").read_text(), text)
    assert [e["pattern_id"] for e in both if e["event"] == "sglang_error"][-1] == alone["pattern_id"]
