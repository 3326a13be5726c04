"""An unknown exception raised at an sglang line a later release dropped becomes an event of
`sglang-changed-line` with the release to upgrade to; anything else stays as it was.

Real text: tracebacks pasted into public threads (the train split of the field corpus), and the
shipped line history read from sglang's 151 wheels."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from matcher import changed_line
from matcher.catalog import load_catalog
from matcher.catalog.line_history import History, Run, build
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.release import Releases
from matcher.types import Chunk

FIELD = Path(__file__).resolve().parent / "fixtures" / "field"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_catalog().records)


def _events(engine: Engine, path: Path, version: str = "all") -> list:
    pipeline = Pipeline(engine, sglang_version=version)
    data = path.read_bytes()
    events = pipeline.feed(Chunk(data, str(path), len(data))).events
    return events + pipeline.end_of_source(str(path)) + pipeline.finish()


def test_the_shipped_history_knows_when_a_line_left() -> None:
    history = History.load()
    assert len(history.releases) >= 151 and history.releases[0] == "0.1.3"
    # PR 1556's traceback: the vocab mask line was reworked by its follow-up (0.3.5).
    assert history.runs("sglang/srt/sampling/sampling_batch_info.py",
                        "self.vocab_mask[i].fill_(1)") == [Run("0.2.15", "0.3.4.post2", "0.3.5")]
    # Kept with every run when one of them ended: this one is back and in the newest release.
    runs = history.runs("sglang/srt/layers/linear.py",
                        "assert param_data.shape == loaded_weight.shape")
    assert len(runs) == 2 and runs[-1].after is None
    assert history.lone_run("sglang/srt/layers/linear.py",
                            "assert param_data.shape == loaded_weight.shape") is None
    assert history.runs("sglang/srt/layers/linear.py", "no such line in sglang") == []


def test_an_unknown_key_error_at_a_reworked_line_is_an_event_of_the_record(engine: Engine) -> None:
    path = FIELD / "projects" / "slime-1514-serving-chat-weight-version-keyerror.log"
    events = [e for e in _events(engine, path) if e.error_class == "KeyError"]
    assert len(events) == 1
    e = events[0]
    assert (e.event, e.pattern_id) == ("sglang_error", changed_line.RECORD_ID)
    assert e.fixed_in is not None and e.remediation is not None
    assert e.remediation["solutions"][0].startswith(f"Upgrade sglang to {e.fixed_in.release}")


def test_torch_refusing_an_index_at_a_reworked_line_keeps_its_record_and_gains_the_upgrade(
        engine: Engine) -> None:
    path = FIELD / "sglang-b" / "1556-constrained-vocab-mask-indexerror.log"
    events = [e for e in _events(engine, path) if e.error_class == "IndexError"]
    assert len(events) == 1
    e = events[0]
    assert e.event == "sglang_error" and e.pattern_id != changed_line.RECORD_ID
    record = next(r for r in engine.records if r.id == e.pattern_id)
    assert record.generator == "matcher.catalog.torch_native"
    assert "In torch 2.6.0" in e.remediation["documentation"]
    assert e.message.splitlines()[0] == (
        "IndexError: index 2 is out of bounds for dimension 0 with size 2")
    assert e.fixed_in is not None and (e.fixed_in.release, e.fixed_in.last) == ("0.3.5",
                                                                                "0.3.4.post2")
    assert e.fixed_in.line == "self.vocab_mask[i].fill_(1)"
    assert e.fixed_in.compare_url.startswith(
        "https://github.com/sgl-project/sglang/compare/v0.3.4.post2...v0.3.5#diff-")
    first = e.remediation["solutions"][0]
    assert first.startswith("Upgrade sglang to 0.3.5 or later: the line that raised")
    assert "not known until it runs" in first


def test_the_release_the_log_is_from_picks_the_run(engine: Engine) -> None:
    # The same traceback said to come from a release after the line left: not its line, no answer.
    path = FIELD / "sglang-b" / "1556-constrained-vocab-mask-indexerror.log"
    events = [e for e in _events(engine, path, version="0.4.0") if e.error_class == "IndexError"]
    assert [e.event for e in events] == ["sglang_error"]  # torch's record, with no way out
    assert events[0].fixed_in is None and events[0].remediation["solutions"] == []


def test_a_line_that_came_back_has_no_answer_without_the_release() -> None:
    back = [Run("0.1.22", "0.2.11", "0.2.12"), Run("0.3.1.post3", "0.5.23", None)]
    assert changed_line._holding(back, Releases.of(("0.2.5",))) == back[0]
    assert changed_line._holding(back, Releases.of(("0.4.0",))) is None  # still there


def test_without_the_record_nothing_changes(engine: Engine) -> None:
    path = FIELD / "sglang-b" / "1556-constrained-vocab-mask-indexerror.log"
    events = [e for e in _events(engine, path) if e.error_class == "IndexError"]
    unknown = [e.__class__(**{**{f: getattr(e, f) for f in e.__slots__},
                              "event": "sglang_unknown_error", "pattern_id": None,
                              "fixed_in": None}) for e in events]
    assert changed_line.answered(unknown, None, lambda source: None) == unknown


def test_build_keeps_lines_that_left_with_all_their_runs(tmp_path: Path) -> None:
    def wheel(version: str, text: str) -> tuple[str, Path]:
        path = tmp_path / f"sglang-{version}-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("sglang/srt/x.py", text)
            z.writestr("sglang/test/t.py", "assert something_only_tests_do\n")
        return version, path

    data = build([wheel("0.1.0", "x = table[key]\nkept_everywhere()\n"),
                  wheel("0.2.0", "kept_everywhere()\nback_again(1)\n"),
                  wheel("0.3.0", "kept_everywhere()\n"),
                  wheel("0.4.0", "kept_everywhere()\nback_again(1)\n")])
    out = tmp_path / "lines.bin"
    out.write_bytes(data)
    history = History.load(out)
    assert history.releases == ("0.1.0", "0.2.0", "0.3.0", "0.4.0")
    assert history.runs("sglang/srt/x.py", "x  =  table[key]") == [Run("0.1.0", "0.1.0", "0.2.0")]
    assert history.runs("sglang/srt/x.py", "back_again(1)") == [
        Run("0.2.0", "0.2.0", "0.3.0"), Run("0.4.0", "0.4.0", None)]
    assert history.runs("sglang/srt/x.py", "kept_everywhere()") == []
    assert history.runs("sglang/test/t.py", "assert something_only_tests_do") == []


def test_a_paste_cut_inside_a_frame_line_still_names_the_frame(engine: Engine) -> None:
    # Issue 4431's paste starts in the middle of its frame line: the bare assert is identified.
    path = FIELD / "sglang-b" / "4431-bnb-lora-weight-loader-assert.log"
    events = [e for e in _events(engine, path) if e.error_class == "AssertionError"]
    assert len(events) == 1 and events[0].event == "sglang_error"
    assert events[0].raised_at is not None
    assert events[0].raised_at.path == "sglang/srt/layers/linear.py"
    assert events[0].raised_at.function == "weight_loader"


def test_the_report_keeps_two_changed_lines_apart(engine: Engine) -> None:
    from matcher.redact import Redactor
    from matcher.report import group_events
    from matcher.sinks.events import event_dict

    paths = [FIELD / "sglang-b" / "1556-constrained-vocab-mask-indexerror.log",
             FIELD / "projects" / "slime-1514-serving-chat-weight-version-keyerror.log"]
    events = [event_dict(e, Redactor()) for p in paths for e in _events(engine, p)
              if e.fixed_in is not None]
    assert len(events) == 2 and "fingerprint" not in events[0]
    assert len(group_events(events)) == 2


def test_catalog_test_proves_the_record_by_its_example_and_refuses_another(engine: Engine) -> None:
    import json

    from matcher.catalog.check import check_examples
    from matcher.catalog.load import validate_record

    frames = Path(__file__).resolve().parents[1] / "patterns" / "sglang" / "curated" / "frames.json"
    raw = next(r for r in json.loads(frames.read_text()) if r["id"] == changed_line.RECORD_ID)
    record = validate_record(raw, str(frames), 0, "curated")
    assert check_examples(engine, [record]) == []
    # A traceback whose line the newest release still has is not an example of it.
    kept = (FIELD / "sglang-b" / "4431-bnb-lora-weight-loader-assert.log").read_text()
    other = validate_record({**raw, "examples": {"match": [kept]}}, str(frames), 0, "curated")
    assert [f.kind for f in check_examples(engine, [other])] == ["match"]
