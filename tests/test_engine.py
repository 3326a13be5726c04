"""The engine: the right record wins, deterministically, with captures; bad patterns cannot stall it."""

from __future__ import annotations

import dataclasses
import time

import pytest

from matcher.catalog.check import frame_text
from matcher.catalog.load import validate_record
from matcher.engine import Engine


def rec(rid, pattern, layer="curated", **extra):
    raw = {"id": rid, "messagePattern": pattern, **extra}
    r = validate_record(raw, "t.json", 0, layer)
    assert not isinstance(r, list), r
    return r


def one(text):
    (r,) = frame_text(text)
    return r


@pytest.fixture(params=[True, False], ids=["hyperscan", "literal-prefilter"])
def use_hs(request):
    return request.param


def test_most_literal_text_wins_then_curated_then_id(use_hs):
    general = rec("b-general", r"CUDA out of memory\. Tried to allocate")
    specific = rec("a-specific", r"CUDA out of memory\. Tried to allocate (?P<size>[\d.]+ [GM]iB)")
    line = one("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    for order in ([general, specific], [specific, general]):
        m = Engine(order, use_hyperscan=use_hs).match(line)
        assert (m.pattern.id, m.captures) == ("a-specific", {"size": "2.00 GiB"})
    gen = dataclasses.replace(specific, id="0-generated", layer="generated")
    assert Engine([gen, specific], use_hyperscan=use_hs).match(line).pattern.id == "a-specific"
    twin = dataclasses.replace(specific, id="0-twin")
    assert Engine([specific, twin], use_hyperscan=use_hs).match(line).pattern.id == "0-twin"


def test_error_class_must_agree_when_both_name_one(use_hs):
    p = rec("oom", r"CUDA out of memory\. Tried", errorClass="OutOfMemoryError")
    e = Engine([p], use_hyperscan=use_hs)
    assert e.match(one("torch.OutOfMemoryError: CUDA out of memory. Tried 1")).pattern.id == "oom"
    assert e.match(one("RuntimeError: CUDA out of memory. Tried 1")) is None
    # a plain log line has no class: the message alone decides
    assert e.match(one("[2026-01-01 12:00:00 TP0] warn: CUDA out of memory. Tried 1")) is not None


def test_named_and_positional_groups_become_captures(use_hs):
    p = rec("seed", r"--radix-cache-backend=(.+?) is not int8-aware\. (?P<advice>Omit [-a-z]+)")
    m = Engine([p], use_hyperscan=use_hs).match(one(
        "ValueError: x; --radix-cache-backend='lru' is not int8-aware. Omit --radix-cache-backend."))
    assert m.captures == {"arg1": "'lru'", "advice": "Omit --radix-cache-backend"}


def test_chained_cause_matches_and_exception_line_beats_header(use_hs):
    header = rec("sched", r"Scheduler hit an exception")
    cause = rec("keyerr", r"model\.layers\.\d+", errorClass="KeyError")
    tb = one(
        "[2026-01-01 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "KeyError: 'model.layers.0.mlp'\n\nDuring handling of the above exception, another "
        "exception occurred:\n\nTraceback (most recent call last):\nRuntimeError: load failed")
    e = Engine([header, cause], use_hyperscan=use_hs)
    m = e.match(tb)
    assert (m.pattern.id, m.on_header, m.error_class) == ("keyerr", False, "KeyError")
    assert [x.pattern.id for x in e.match_all(tb)] == ["keyerr", "sched"]
    plain = one("[2026-01-01 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                "RuntimeError: something nobody catalogued")
    assert Engine([header, cause], use_hyperscan=use_hs).match(plain).pattern.id == "sched"


def test_pathological_pattern_times_out_and_is_quarantined():
    """`(a+)+$`-style backtracking is cut by the timeout; after 3 timeouts it is not tried again."""
    evil = rec("evil", r"Capture failed: (?:x+x+)+y")
    good = rec("good", r"Capture failed: xxxxxxxx")
    e = Engine([evil, good], timeout=0.05, quarantine_after=3, use_hyperscan=False)
    line = one("Capture failed: " + "x" * 5000 + "!")
    started = time.monotonic()
    assert e.match(line).pattern.id == "good"
    assert e.take_timeouts() == (1, [])  # what the daemon counts each turn: news only
    for _ in range(4):
        assert e.match(line).pattern.id == "good"
    assert e.take_timeouts() == (2, ["evil"])
    assert e.take_timeouts() == (0, [])
    assert e.stats.timeouts == 3
    assert e.stats.quarantined == {"evil"}
    assert time.monotonic() - started < 5  # bounded: 3 timeouts of 0.05 s, not minutes


def test_hyperscan_prefilter_never_runs_a_pattern_that_cannot_match():
    """Hyperscan's automaton rejects the line before backtracking `regex` would see it."""
    evil = rec("evil", r"Capture failed: (?:x+x+)+y")
    e = Engine([evil], timeout=0.05)
    assert e.prefilter == "hyperscan"
    assert e.match(one("Capture failed: " + "x" * 5000 + "!")) is None
    assert e.stats.timeouts == 0
    # Its head is in the line, so the line is tried as a cut one too: no prefilter can vouch
    # for that, so it gets 5 ms, and no more tries after three timeouts.
    for _ in range(5):
        assert e.match(one("Capture failed: " + "x" * 5000 + "!")) is None
    assert e.stats.cut_timeouts <= 3 and e.stats.cut_quarantined <= {"evil"}


def test_hyperscan_and_literal_prefilters_agree_on_the_builtin_catalog():
    from matcher.catalog import load_catalog
    from matcher.catalog.check import frame_text as ft
    from matcher.catalog.patterns import literal_cover

    catalog = load_catalog()
    examples = [x for r in catalog.records for x in (*r.examples_match, *r.examples_no_match)]
    examples.append("ValueError: --enable-int8-mamba-checkpoint only supports the built-in mamba "
                    "radix cache; --radix-cache-backend='lru' is not int8-aware. Omit --radix-cache-backend.")
    # The literal engine compiles every pattern with `regex` (a minute for the whole catalog):
    # it gets the records that can match some example — all but those with a literal cover
    # none of whose literals is in the examples, in any case.
    text = "\n".join(examples).lower()

    def can_match(r) -> bool:
        cover = literal_cover(r.message_pattern)
        return cover is None or any(literal.lower() in text for literal in cover)

    hs = Engine(catalog.records)
    lit = Engine([r for r in catalog.records if can_match(r)], use_hyperscan=False)
    assert hs.prefilter == "hyperscan" and lit.prefilter == "literal"
    assert len(lit.records) < len(hs.records) // 2
    for text in examples:
        for r in ft(text):
            a, b = hs.match(r), lit.match(r)
            assert (a and (a.pattern.id, a.captures)) == (b and (b.pattern.id, b.captures)), text


def test_non_ascii_text_is_matched_like_ascii_text():
    """Hyperscan sees ASCII only; other text takes the literal prefilter, with the same result."""
    p = rec("w", r"Cannot load model (?P<name>\w+) from disk")
    e = Engine([p])
    assert e.match(one("RuntimeError: Cannot load model 模型 from disk")).captures == {"name": "模型"}
    assert e.match(one("RuntimeError: Cannot load model llama from disk")).captures == {"name": "llama"}


def test_non_ascii_text_leaves_out_alternations_none_of_whose_branches_it_holds():
    """A pattern with no single required literal (an alternation, as the native vocabularies
    write them) is looked for by one literal per branch: a long non-ASCII line holding none of
    them does not try it (1,400 such patterns took 0.1 s a 40 KB line), one holding a branch's
    literal finds it."""
    alternation = rec("alt", r"(?:\bCUDA_ERROR_OUT_OF_MEMORY\b|CUresult error\s+result=2\b)")
    caseless = rec("caseless", r"(?i)(?:out of memory|OOM killer)")
    e = Engine([alternation, caseless, rec("w", r"Cannot load model (?P<name>\w+)")])
    literals = e._parts[0].literals
    assert [t for i, t in zip(literals.ids, literals.texts) if i == 0] == \
        ["CUDA_ERROR_OUT_OF_MEMORY", "CUresult error"]
    long_line = "Receive: " + "模型" * 20_000
    assert e._candidates(long_line) == [1]  # the caseless one only: it has no cover
    line = "RuntimeError: 模型 CUresult error result=2 at ops.cu:12"
    assert e._candidates(line) == [0, 1]
    assert e.match(one(line)).pattern.id == "alt"


def test_the_literal_database_finds_what_the_literal_loop_finds():
    """Non-ASCII targets (a user's prompt on a `Receive:` line) take the literal prefilter: its
    Hyperscan database must pick exactly the patterns a substring test of every literal picks."""
    import copy
    import dataclasses

    from matcher.catalog import load_catalog
    catalog = load_catalog()
    db = Engine(catalog.records)
    assert all(part.literals.db is not None for part in db._parts)
    loop = copy.copy(db)
    loop._parts = [dataclasses.replace(part, literals=part.literals.one_by_one())
                   for part in db._parts]
    texts = [r.error_message for r in catalog.records
             if r.error_message and not r.error_message.isascii()][:150]
    examples = [x for r in catalog.records for x in r.examples_match]
    # spread over the whole catalog, not its first files only
    texts += ["こんにちは — " + x for x in examples[::max(1, len(examples) // 150)]]
    assert len(texts) > 150
    picked = 0
    for text in texts:
        assert db._candidates(text) == loop._candidates(text), text
        picked += len(db._candidates(text)) > len(db._literal_always)
    assert picked > 100
