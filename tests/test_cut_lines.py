"""Lines cut short — by a collector's line limit, a terminal, a paste — are still recognized once
they hold a record's head (`patterns.cut_head`), and what the cut removed is absent, never wrong."""

from __future__ import annotations

import pytest
import regex

from matcher.catalog import load_catalog
from matcher.catalog.check import frame_text
from matcher.catalog.patterns import cut_head, cut_prefix
from matcher.engine import Engine


@pytest.fixture(scope="module")
def curated():
    catalog = load_catalog(generated=False)
    return catalog, Engine(catalog.records)


def test_every_curated_example_cut_anywhere_after_its_head_is_its_record(curated):
    catalog, engine = curated
    tried = won = 0
    for rec in catalog.records:
        head = cut_head(rec.message_pattern)
        if head is None:
            continue
        for example in rec.examples_match:
            line = example.split("\n", 1)[0]  # a line is cut, not a message of several
            whole = engine.match(frame_text(line)[-1])
            if whole is None or whole.pattern.id != rec.id or head not in line:
                continue  # a multi-line example, or one taken by a more specific record
            # Cuts fall inside the pattern's part before its first unbounded wildcard.
            prefix = regex.compile(cut_prefix(rec.message_pattern)).search(line)
            if prefix is None:
                continue
            for end in range(line.index(head) + len(head), min(prefix.end(), len(line))):
                cut = line[:end]
                found = {x.pattern.id: x for x in engine.match_all(frame_text(cut)[-1])}
                assert rec.id in found, (rec.slug, cut)
                m = found[rec.id]
                # Records that share the text up to the cut (`error: argument ` of argparse's
                # messages) cannot be told apart until it goes on: then the most specific wins.
                won += engine.match(frame_text(cut)[-1]).pattern.id == rec.id
                # Captures: as the whole line gives them. A cut match leaves out any value the
                # cut may have shortened; a pattern that matches the cut line whole cannot know
                # it was cut, and may give the beginning of a value near the cut.
                for name, value in m.captures.items():
                    assert whole.captures.get(name) == value or (
                        not m.cut and whole.captures.get(name, "").startswith(value)
                        and len(cut) - cut.rindex(value) <= len(value) + 2), (rec.slug, cut, name)
                tried += 1
    assert tried > 1000
    assert won / tried > 0.9


def test_a_cut_line_before_the_head_is_not_matched(curated):
    """`GPU 0 has a total capacity of 79.` (the OOM record's head is whole) matches; the same
    line cut inside the head does not — a few words prove nothing."""
    _, engine = curated
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a "
            "total capacity of 79.10 GiB of which 1.2 GiB is free.")
    m = engine.match(frame_text(line[:line.index("79.") + 3])[-1])
    assert m is not None and m.pattern.slug == "torch-cuda-out-of-memory" and m.cut
    assert m.captures == {"tried": "1.50 GiB", "gpu": "0"}  # `total` was cut: absent
    assert engine.match(frame_text("torch.OutOfMemoryError: CUDA out of mem")[-1]) is None


def test_a_wildcard_does_not_take_a_whole_line_for_a_cut_one(curated):
    """`Model architectures (?P<architectures>\\[.*?\\]) are not supported for now` must not
    take the real line of another failure, whose rest its `.*?` could swallow, for a cut one."""
    _, engine = curated
    line = ("ValueError: Model architectures ['DeepseekV3ForCausalLM'] failed to be inspected. "
            "Please check the logs for more details.")
    assert all(m.pattern.slug != "unsupported-model-architecture"
               for m in engine.match_all(frame_text(line)[-1]))
    assert cut_prefix(r"Model architectures (?P<a>\[.*?\]) are not supported") == \
        "Model architectures "


def test_heads_are_the_first_long_literal_run():
    assert cut_head(r"(?<![\s\S])\s*Speculative decoding is currently not supported") == \
        "Speculative decoding is currently not supported"
    assert cut_head(r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout") == \
        "] Watchdog caught collective operation timeout"
    assert cut_head(r"(?i)cuda out of memory, tried to allocate") is None
    assert cut_head(r"(?P<a>\w+) x (?P<b>\w+)") is None


def test_catalog_lint_names_records_a_cut_line_cannot_match(tmp_path):
    import io
    import json

    from matcher.commands.catalog.lint import cmd_lint

    cat = tmp_path / "mine.jsonl"
    cat.write_text("\n".join(json.dumps(r) for r in [
        {"id": "short", "messagePattern": r"(?P<op>\w+) failed: (?P<why>.+) \(code (?P<code>\d+)\)"},
        {"id": "long", "messagePattern": r"Watchdog caught collective operation timeout"},
    ]) + "\n")
    out = io.StringIO()
    assert cmd_lint([cat], out) == 0  # a note, not a problem
    notes = [x for x in out.getvalue().splitlines() if x.startswith("note:")]
    assert len(notes) == 1 and "(id short)" in notes[0] and "cut short" in notes[0]
