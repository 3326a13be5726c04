"""Frame identity: records that name the frame raising them (`raisedIn`), matched on real
tracebacks users pasted into sglang issues, whose messages say nothing (a bare
`AssertionError`, `KeyError: '<request id>'`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from matcher.aggregate import fingerprint, raising_frame
from matcher.catalog.check import frame_text
from matcher.catalog.load import validate_record
from matcher.catalog.schema import CatalogRecord
from matcher.engine import Engine
from matcher.frames import frames_by_exception, identifying
from matcher.types import Record

FIELD = Path(__file__).parent / "fixtures" / "field"
MAMBA_ASSERT = FIELD / "model-runtime" / "14527-mamba-radix-cache-assert.log"
SWA_ASSERT = FIELD / "model-runtime" / "24972-unified-hicache-swa-assert.log"
WAIT_KEYERROR = FIELD / "model-runtime" / "29256-wait-one-response-keyerror.log"
WAIT_KEYERROR_PR = FIELD / "model-runtime" / "29529-wait-one-response-keyerror.log"
DETOKENIZER_KEYERROR = FIELD / "model-runtime" / "2812-detokenizer-keyerror.log"
LAUNCH = Path(__file__).parent / "fixtures" / "sglang" / "launch"


def record(raw: dict[str, Any], layer: str = "curated") -> CatalogRecord:
    rec = validate_record({"id": raw.pop("id", "r"), **raw}, "test.json", 0, layer)  # type: ignore[arg-type]
    assert isinstance(rec, CatalogRecord), rec
    return rec


def tracebacks(path: Path) -> list[Record]:
    return [r for r in frame_text(path.read_text(encoding="utf-8")) if r.exceptions]


# The frames these excerpts show, read off the excerpts by eye.
MAMBA = {"path": "sglang/srt/mem_cache/mamba_radix_cache.py", "function": "__init__",
         "source": "assert isinstance(params.token_to_kv_pool_allocator, TokenToKVPoolAllocator)"}
SWA = {"path": "sglang/srt/mem_cache/unified_cache_components/swa_component.py",
       "function": "build_hicache_transfers",
       "source": "assert cd.host_value is not None or cd.value is not None"}


def test_the_innermost_sglang_frame_of_each_exception_of_a_chained_traceback():
    """A real launch on a machine without a GPU: NotImplementedError, then during its handling
    a RuntimeError, each raised by its own frame; runpy's frozen frames print no source."""
    [tb] = tracebacks(LAUNCH / "no_accelerator.log")
    first, last = frames_by_exception(tb)
    seen = [[(f.package_path, f.function, f.source) for f in identifying(frames)]
            for frames in (first, last)]
    assert seen == [[("sglang/srt/platforms/device_mixin.py", "get_device",
                      "raise NotImplementedError")],
                    [("sglang/srt/utils/common.py", "get_device", "raise RuntimeError(")]]
    frozen = [f for f in last if f.path.startswith("<frozen")]
    assert len(frozen) == 2 and all(f.source == "" and not f.ours for f in frozen)
    assert last[2].source.startswith("run_server(")  # the line after two source-less frames


def test_a_bare_assert_is_its_frames_record_and_not_another_frames():
    engine = Engine([record({"id": "mamba", "errorClass": "AssertionError",
                             "messagePattern": "^$", "raisedIn": MAMBA}),
                     record({"id": "swa", "errorClass": "AssertionError",
                             "messagePattern": "^$", "raisedIn": SWA})], cache=None)
    got = {path.name: {m.pattern.id for r in tracebacks(path) if (m := engine.match(r))}
           for path in (MAMBA_ASSERT, SWA_ASSERT)}
    assert got == {MAMBA_ASSERT.name: {"mamba"}, SWA_ASSERT.name: {"swa"}}


@pytest.mark.parametrize("change", [{"function": "load_back"}, {"source": "assert cd.value"},
                                    {"path": "sglang/srt/mem_cache/radix_cache.py"}])
def test_every_part_of_the_frame_must_agree(change):
    engine = Engine([record({"errorClass": "AssertionError", "messagePattern": "^$",
                             "raisedIn": {**SWA, **change}})], cache=None)
    assert [engine.match(r) for r in tracebacks(SWA_ASSERT)] == [None] * len(tracebacks(SWA_ASSERT))


def test_the_class_and_the_message_must_agree_too():
    engine = Engine([record({"id": "value", "errorClass": "ValueError", "raisedIn": SWA}),
                     record({"id": "message", "errorClass": "AssertionError",
                             "messagePattern": "^.+$", "raisedIn": SWA})], cache=None)
    assert all(engine.match(r) is None for r in tracebacks(SWA_ASSERT))


def test_a_frame_record_wins_over_the_header_record_of_its_traceback():
    """14527: `Scheduler hit an exception:` has a generic record; the assert's frame is what
    the operator needs to know."""
    header = record({"id": "header", "errorClass": None,
                     "messagePattern": "Scheduler hit an exception:"})
    frame = record({"id": "mamba", "errorClass": "AssertionError", "messagePattern": "^$",
                    "raisedIn": MAMBA})
    engine = Engine([header, frame], cache=None)
    [tb] = tracebacks(MAMBA_ASSERT)
    assert [m.pattern.id for m in engine.match_all(tb)] == ["mamba", "header"]


def test_a_request_id_keyerror_is_one_record_whatever_the_id_and_the_traceback_cut_off():
    """29256 pastes only the last frame (the `Traceback` line cut off); 2812 is another
    KeyError on a request id, raised elsewhere."""
    wait = record({"id": "wait", "errorClass": "KeyError", "messagePattern": r"^'[0-9a-f]{32}'$",
                   "raisedIn": {"path": "sglang/srt/managers/tokenizer_manager.py",
                                "function": "_wait_one_response"}})
    engine = Engine([wait], cache=None)
    hits = [m for p in (WAIT_KEYERROR, WAIT_KEYERROR_PR) for r in tracebacks(p)
            if (m := engine.match(r)) is not None]
    assert hits and {m.pattern.id for m in hits} == {"wait"}
    assert all(engine.match(r) is None for r in tracebacks(DETOKENIZER_KEYERROR))


def test_unknown_errors_are_fingerprinted_by_their_frame_not_their_values():
    [wait] = tracebacks(WAIT_KEYERROR)
    [detok] = [r for r in tracebacks(DETOKENIZER_KEYERROR) if r.exceptions[-1].error_class
               == "KeyError"]
    assert raising_frame(wait) == "managers/tokenizer_manager.py:_wait_one_response"
    assert raising_frame(detok) == "managers/detokenizer_manager.py:event_loop"
    # the same place and another id: one fingerprint; another place: another
    same = fingerprint("KeyError", "'0123456789abcdef0123456789abcdef'", raising_frame(wait))
    assert fingerprint("KeyError", wait.exceptions[-1].message, raising_frame(wait)) == same
    assert fingerprint("KeyError", detok.exceptions[-1].message, raising_frame(detok)) != same


def test_a_faulthandler_dump_does_not_open_a_traceback():
    """`File "x", line N in f` (no comma) is faulthandler's, printed without an exception line
    (sglang's watchdog and SIGQUIT dumps); only Python's `, in f` frame opens a traceback cut
    before its first line."""
    script = ("import faulthandler, sys\n"
              "def stuck():\n    faulthandler.dump_traceback(sys.stdout)\n"
              "stuck()\n")
    dump = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    frame_lines = [line for line in dump.splitlines() if line.lstrip().startswith('File "')]
    assert len(frame_lines) == 2 and all(", in " not in line for line in frame_lines)
    assert all(r.kind == "line" for r in frame_text(dump))
    [opened] = frame_text(WAIT_KEYERROR.read_text(encoding="utf-8"))
    assert opened.kind == "traceback" and opened.header == ""


@pytest.mark.parametrize(("raised_in", "field", "says"), [
    ({"function": "f"}, "raisedIn", "a function name alone is no frame"),
    ({"path": "/usr/lib/python3/dist-packages/sglang/srt/x.py"}, "raisedIn.path",
     "from the package on"),
    ({"path": "sglang/x.py", "line": 3}, "raisedIn", "expected"),
    ("sglang/x.py", "raisedIn", "expected"),
])
def test_a_bad_frame_is_an_error_that_names_the_field(raised_in, field, says):
    issues = validate_record({"id": "x", "errorClass": "KeyError", "raisedIn": raised_in},
                             "cat.json", 4, "user")
    assert isinstance(issues, list)
    [issue] = [i for i in issues if i.field == field]
    assert says in issue.problem and issue.file == "cat.json" and issue.index == 4


def test_a_framed_record_needs_no_literal_text_but_a_plain_one_does():
    framed = validate_record({"id": "x", "messagePattern": "^$", "errorClass": "AssertionError",
                              "raisedIn": SWA}, "c.json", 0, "user")
    plain = validate_record({"id": "x", "messagePattern": "^$", "errorClass": "AssertionError"},
                            "c.json", 0, "user")
    assert isinstance(framed, CatalogRecord) and isinstance(plain, list)


def test_a_records_frames_are_read_once_and_never_anothers(monkeypatch):
    """Frames are kept for the records read last, by identity: the same record gives the same
    frames without reading its lines again, and another record — even one equal to it, or one
    made after the memo emptied — is read on its own."""
    from matcher import frames

    reads: list[Record] = []
    real = frames._read_frames

    def counting(record: Record):
        reads.append(record)
        return real(record)

    monkeypatch.setattr(frames, "_read_frames", counting)
    monkeypatch.setattr(frames, "_READ", {})
    monkeypatch.setattr(frames, "_READ_MAX", 3)
    tbs = [*tracebacks(LAUNCH / "no_accelerator.log"), *tracebacks(MAMBA_ASSERT),
           *tracebacks(SWA_ASSERT), *tracebacks(WAIT_KEYERROR)]
    assert len(tbs) >= 4
    first = frames_by_exception(tbs[0])
    assert frames_by_exception(tbs[0]) is first and reads == [tbs[0]]
    twin = frame_text((LAUNCH / "no_accelerator.log").read_text(encoding="utf-8"))
    [copy] = [r for r in twin if r.exceptions]
    assert copy == tbs[0] and copy is not tbs[0]
    assert frames_by_exception(copy) == first and reads == [tbs[0], copy]
    for tb in tbs:  # past `_READ_MAX`: the memo empties, and every answer is still its own
        assert frames_by_exception(tb) == real(tb)
    assert all(frames_by_exception(tb) == real(tb) for tb in reversed(tbs))


def test_the_frames_of_a_traceback_given_as_text() -> None:
    """An event's `traceback` text (a run here: tests/fixtures/dataclass/): each frame, outermost
    first, with the source line printed under it."""
    from matcher.frames import frames_of_text

    text = (Path(__file__).parent / "fixtures" / "dataclass" / "own-dataclass-run-here.log"
            ).read_text(encoding="utf-8")
    frames = frames_of_text(text)
    assert [(f.path.rsplit("/", 1)[-1], f.line, f.function) for f in frames] == [
        ("own_config.py", 4, "<module>"), ("dataclasses.py", 1230, "dataclass"),
        ("dataclasses.py", 1220, "wrap"), ("dataclasses.py", 1027, "_process_class"),
        ("dataclasses.py", 545, "_init_fn")]
    assert frames[0].source == "@dataclass"
    assert frames[-1].source == "raise TypeError(f'non-default argument {f.name!r} '"
