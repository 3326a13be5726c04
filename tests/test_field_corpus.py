"""The field corpus (`tests/fixtures/field/`, train, and `tests/fixtures/field-test/`, test):
real excerpts from public threads, each with its thread, its family and the root-cause line a
person names — checked as data here; `bench/field_recall.py` scores the matcher on it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

FIELD = Path(__file__).parent / "fixtures" / "field"
FIELD_TEST = Path(__file__).parent / "fixtures" / "field-test"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from field_recall import corpus, is_pointer, is_root_cause  # noqa: E402
from field_split import FAMILIES, seen_threads, split_of, thread_key  # noqa: E402

_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|discussions)/\d+")


def test_every_excerpt_is_indexed_with_its_thread_and_a_whole_root_cause_line():
    excerpts = corpus(FIELD) + corpus(FIELD_TEST, "test")
    # The corpus discipline: ≥ 300 excerpts of ≥ 200 threads over ≥ 20 families, ≥ 30% test.
    assert len(excerpts) >= 300
    assert len({thread_key(e.url) for e in excerpts}) >= 200
    assert len({e.family for e in excerpts}) >= 20
    assert sum(e.split == "test" for e in excerpts) >= 0.3 * len(excerpts)
    indexed = {e.path for e in excerpts}
    # no excerpt without an entry, none missing
    assert indexed == set(FIELD.glob("*/*.log")) | set(FIELD_TEST.glob("*/*.log"))
    for e in excerpts:
        assert _URL.fullmatch(e.url), e.url
        assert e.family in FAMILIES, (e.path.name, e.family)
        number = e.url.rsplit("/", 1)[1]
        assert number in e.path.name.split("-"), e.path.name  # `N-slug` or `repo-N-slug`
        assert e.root_cause in e.path.read_text(encoding="utf-8").splitlines(), e.path.name
    for index in [*FIELD.glob("*/index.json"), *FIELD_TEST.glob("*/index.json")]:
        files = [x["file"] for x in json.loads(index.read_text())]
        assert len(files) == len(set(files))


def test_every_excerpt_is_in_the_split_the_rule_gives_its_thread():
    seen = seen_threads()
    for e in corpus(FIELD) + corpus(FIELD_TEST, "test"):
        assert split_of(e.url, seen) == e.split, (e.path, e.url)
    # A thread is in one split: its excerpts never straddle.
    train = {thread_key(e.url) for e in corpus(FIELD)}
    test = {thread_key(e.url) for e in corpus(FIELD_TEST, "test")}
    assert not train & test


def test_the_split_rule_keeps_seen_threads_in_train_and_hashes_the_rest():
    seen = frozenset({"sgl-project/sglang#1"})
    assert split_of("https://github.com/sgl-project/sglang/issues/1", seen) == "train"
    # Issue, pull request and discussion URLs of one thread land together; case does not matter.
    for n in range(200):
        a = split_of(f"https://github.com/sgl-project/sglang/issues/{n + 2}", seen)
        assert a == split_of(f"https://github.com/SGL-Project/sglang/pull/{n + 2}", seen)
    hashed = [split_of(f"https://github.com/o/r/issues/{n}", seen) for n in range(2000)]
    assert 0.45 < hashed.count("test") / len(hashed) < 0.55


def test_a_pointer_is_not_a_fix():
    assert is_pointer("Read the source at this release for what leads here: https://x.")
    assert is_pointer("Search sglang's issues for this message: https://github.com/x")
    assert is_pointer("sglang fails here when `x is None`: change what makes it true (the …)")
    assert not is_pointer("Lower --mem-fraction-static (now 0.9) to 0.8.")


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


def test_a_rust_panic_is_recognized_by_a_record_of_its_site_or_message_only():
    """A panic has no class: its header names the site, the next line the failure. The
    generic record of any `panicked at` says neither (https://github.com/sgl-project/sglang/
    pull/7619, train)."""
    header = ("thread '<unnamed>' panicked at /home/router/.cargo/registry/src/index.crates.io-"
              "1949cf8c6b5b557f/tokio-1.45.1/src/runtime/blocking/shutdown.rs:51:21:")
    message = ("Cannot drop a runtime in a context where blocking is not allowed. This happens "
               "when a runtime is dropped from within an asynchronous context.")
    on_message = {"event": "sglang_error", "role": "cause", "error_class": "UnclassifiedError",
                  "message": message, "traceback": header + "\n" + message}
    for label in (header, message):
        assert is_root_cause(on_message, label, specific=True)
        assert not is_root_cause(on_message, label)  # a generic record's event
    on_header = {**on_message, "message": header}
    assert is_root_cause(on_header, header, specific=True)  # a record of that frame
    assert not is_root_cause(on_header, header, specific=False)
    assert not is_root_cause(on_message, "thread 'main' panicked at src/main.rs:1:1:",
                             specific=True)
