"""The field corpus (`tests/fixtures/field/`): real excerpts from public sglang threads, each
with its thread, its family and the root-cause line a person names — checked as data here;
`bench/field_recall.py` scores the matcher on it."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

FIELD = Path(__file__).parent / "fixtures" / "field"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from field_recall import corpus, is_root_cause  # noqa: E402


def test_every_excerpt_is_indexed_with_its_thread_and_a_whole_root_cause_line():
    excerpts = corpus(FIELD)
    assert len(excerpts) >= 80
    assert len(Counter(e.family for e in excerpts)) >= 6
    indexed = {e.path for e in excerpts}
    assert indexed == set(FIELD.glob("*/*.log"))  # no excerpt without an entry, none missing
    for e in excerpts:
        assert re.fullmatch(r"https://github\.com/sgl-project/sglang/(issues|pull)/\d+", e.url), e.url
        assert e.path.name.split("-")[0] == e.url.rsplit("/", 1)[1], e.path.name
        assert e.root_cause in e.path.read_text(encoding="utf-8").splitlines(), e.path.name
    for index in FIELD.glob("*/index.json"):
        files = [x["file"] for x in json.loads(index.read_text())]
        assert len(files) == len(set(files))


def test_a_root_cause_is_the_matched_exception_not_the_header_or_another_line():
    cause = "KeyError: 'dc49ad867dc144249f59f4e85c7229cd'"
    event = {"event": "sglang_error", "role": "cause", "error_class": "KeyError",
             "message": cause, "traceback": "Traceback (most recent call last):\n" + cause}
    assert is_root_cause(event, "[2025-01-01 12:00:00] " + cause)
    assert not is_root_cause({**event, "role": "consequence"}, cause)
    assert not is_root_cause({**event, "event": "sglang_unknown_error"}, cause)
    header = {**event, "message": "Scheduler hit an exception:", "error_class": "KeyError"}
    assert not is_root_cause(header, cause)
    assert not is_root_cause(event, "RuntimeError: NCCL error")
    bare = {"event": "sglang_error", "role": "cause", "error_class": "AssertionError",
            "message": "AssertionError",
            "traceback": "Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n"
                         "    assert self.req_to_token_pool is not None\nAssertionError"}
    assert is_root_cause(bare, "    assert self.req_to_token_pool is not None")
    assert not is_root_cause(bare, "    assert other is not None")
