"""One failure, one event, when it is printed as several records: a kernel's failed device-side
assertion (one line per GPU thread) and the CUDA error torch raises for it (`consequenceOf`)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from matcher.aggregate import Aggregator
from matcher.catalog import load_catalog
from matcher.catalog.check import frame_text
from matcher.cli import cmd_scan
from matcher.engine import Engine

FIELD = Path(__file__).parent / "fixtures" / "field"
KERNEL_ASSERT = "49a7087dddb6d3e7"
DEVICE_ASSERT = "1a82f3a24264b677"


@pytest.fixture(scope="module")
def curated():
    return load_catalog(generated=False)


def scan(catalog, path: Path) -> list[dict]:
    out = io.StringIO()
    cmd_scan([str(path)], "json", catalog, out, err=io.StringIO())
    return [json.loads(x) for x in out.getvalue().splitlines()]


def test_the_kernel_assertion_each_gpu_thread_prints_is_one_event(curated):
    """sglang #271: two threads' assertion lines, then a traceback cut before its exception."""
    path = FIELD / "gpu" / "271-index-out-of-bounds-assert.log"
    lines = [x for x in path.read_text(encoding="utf-8").splitlines() if "Assertion `" in x]
    assert len(lines) == 2
    [event] = [e for e in scan(curated, path) if e.get("pattern_id") == KERNEL_ASSERT]
    assert event["occurrences"] == 2 and event["line"] == 1


def test_the_records_name_what_they_follow(curated):
    assert curated.by_id(DEVICE_ASSERT).consequence_of == (KERNEL_ASSERT,)
    assert curated.by_id(KERNEL_ASSERT).consequence_of == (KERNEL_ASSERT,)


@pytest.mark.parametrize("early", [False, True])
def test_a_cuda_error_after_its_kernel_assertion_is_that_failure(curated, early):
    """The records of a real kernel assertion and of a real device-side-assert traceback (from
    the curated examples, themselves from sglang issues), read in that order within the window:
    one failure, the CUDA error its consequence; read alone, the CUDA error is a failure."""
    engine = Engine(curated.records, cache=None)
    assertion = curated.by_id(KERNEL_ASSERT).examples_match[0]
    cuda_error = curated.by_id(DEVICE_ASSERT).examples_match[0]
    records = frame_text(assertion + "\n" + cuda_error)
    matches = [engine.match(r) for r in records]
    assert [m.pattern.id for m in matches if m] == [KERNEL_ASSERT, DEVICE_ASSERT]
    agg = Aggregator(early=early)
    events = [e for r, m in zip(records, matches, strict=True)
              for e in agg.add(r, m, now=1.0)] + agg.finish()
    [event] = [e for e in events if e.pattern_id]
    assert event.pattern_id == KERNEL_ASSERT
    if not early:  # emitted at once when early: a late consequence folds in unprinted
        assert any("device-side assert triggered" in c for c in event.consequences)
    alone = Aggregator(early=early)
    [record] = [r for r in frame_text(cuda_error) if r.exceptions]
    events = alone.add(record, engine.match(record), now=1.0) + alone.finish()
    assert [e.pattern_id for e in events] == [DEVICE_ASSERT]


def test_an_event_names_the_frame_its_traceback_says_raised_it(curated):
    """sglang #1556: an `IndexError` Python raised on a line of sglang's (indexing a vocab
    mask) is reported at that line, with the line's source; with the release known, the line
    on GitHub. The resource tracker's `KeyError` after it is raised in Python's own code."""
    path = FIELD / "sglang-b" / "1556-constrained-vocab-mask-indexerror.log"
    events = scan(curated, path)
    by_class = {e["error_class"]: e for e in events}
    assert by_class["IndexError"]["raised_at"] == {
        "path": "sglang/srt/sampling/sampling_batch_info.py", "line": 123,
        "function": "update_regex_vocab_mask", "source_line": "self.vocab_mask[i].fill_(1)",
        "url": None}
    assert by_class["KeyError"]["raised_at"]["path"] == (
        "/usr/lib/python3.11/multiprocessing/resource_tracker.py")
    out = io.StringIO()
    cmd_scan([str(path)], "json", curated, out, err=io.StringIO(), sglang_version="0.3.2")
    known = [json.loads(x) for x in out.getvalue().splitlines()]
    [index_error] = [e for e in known if e["error_class"] == "IndexError"]
    assert index_error["raised_at"]["url"] == (
        "https://github.com/sgl-project/sglang/blob/v0.3.2/python/sglang/srt/sampling/"
        "sampling_batch_info.py#L123")
