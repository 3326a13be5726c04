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


def test_a_caseless_alternation_is_found_in_non_ascii_text(use_hs):
    """A caseless pattern, or one with no single literal (an alternation), is found by one
    literal per branch in any ASCII case, not tried on every non-ASCII text."""
    p = rec("npu", r"(?i)(?:\bACL_ERROR_X\b|(?:NPU|OPS) function error)")
    k = rec("kernel", r"(?i)kernel launch failed: (?P<why>\w+)")
    e = Engine([p, k], use_hyperscan=use_hs)
    assert not e._literal_always
    assert e.match(one("RuntimeError: 模型 npu FUNCTION ERROR")).pattern.id == "npu"
    assert e.match(one("RuntimeError: Ops Function Error 😀")).pattern.id == "npu"
    assert e.match(one("RuntimeError: acl_error_x — 模型")).pattern.id == "npu"
    assert e._candidates("模型 acl_error function 😀") == []
    # `regex` takes the KELVIN SIGN for k and the LONG S for s when it ignores case.
    m = e.match(one("RuntimeError: \u212aernel launch failed: 模型"))
    assert m.pattern.id == "kernel" and m.captures == {"why": "模型"}
    assert e.match(one("RuntimeError: NPU function error \u017f")).pattern.id == "npu"
    assert e.match(one("RuntimeError: OP\u017f function error")).pattern.id == "npu"


def test_ascii_folds_are_every_non_ascii_letter_regex_takes_for_an_ascii_one():
    import regex

    from matcher.compile import ASCII_FOLDS
    folds = {}
    for cp in range(0x80, 0x110000):
        if not 0xD800 <= cp < 0xE000 and regex.match("[a-zA-Z]", chr(cp), regex.IGNORECASE):
            folds[cp] = chr(cp)
    assert set(folds) == set(ASCII_FOLDS)
    for cp, letter in ASCII_FOLDS.items():
        assert regex.match(f"[{letter}{letter.upper()}]", chr(cp), regex.IGNORECASE)


def test_non_ascii_candidates_hold_every_pattern_that_matches_on_the_builtin_catalog():
    """Soundness of the literal prefilter's covers: every built-in record's examples and
    messages, with non-ASCII text before or after them (and, for a caseless pattern, with its
    k and s as `regex`'s caseless look-alikes), must have among their candidates each pattern
    that the literal prefilter once tried on every non-ASCII text and that matches them."""
    import copy

    from matcher.catalog import load_catalog
    from matcher.catalog.check import frame_text as ft
    catalog = load_catalog()
    db = Engine(catalog.records)
    covered = sorted({part.offset + i for part in db._parts for i, _, _ in part.literals.covers})
    assert len(covered) > 1000 and len(db._literal_always) < 200
    records = [db.patterns[i].record for i in covered]
    texts = [x for r in catalog.records for x in (*r.examples_match, *r.examples_no_match)]
    texts += [r.error_message for r in records if r.error_message]
    others = [r.error_message for r in catalog.records if r.error_message]
    texts += others[::max(1, len(others) // 1500)]
    caseless = [x for r in records if "(?i" in r.message_pattern for x in r.examples_match]
    texts += [x.replace("k", "\u212a").replace("s", "\u017f") for x in caseless]
    assert len(texts) > 3000
    wrapped = [("こんにちは — " + x, x + " 😀", "模型 " + x + " 模型")[n % 3]
               for n, x in enumerate(texts)]
    patterns = [(i, db.patterns[i].compiled) for i in covered]
    picked = 0
    for text in wrapped:
        found = set(db._candidates(text))
        picked += len(found) > len(db._literal_always)
        missed = [db.patterns[i].record.id for i, compiled in patterns
                  if i not in found and compiled.search(text)]
        assert not missed, (text, missed)
    assert picked > 1000
    # and so the same matches as with every one of those patterns tried
    every = copy.copy(db)
    every._literal_always = db._literal_always | set(covered)
    for text in wrapped[:: max(1, len(wrapped) // 400)]:
        for r in ft(text):
            a, b = db.match(r), every.match(r)
            assert (a and (a.pattern.id, a.captures)) == (b and (b.pattern.id, b.captures)), text


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
