"""Generated records whose words others make too (`alsoMadeBy`: the interpreter, a dependency)
match only where a traceback's frame is at their site (`matcher.catalog.lookalike`,
`engine._lookalikes_at_their_frame`): a lone line gives a curated family record or an unknown
exception, never a site the log does not show."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from matcher.catalog import load_catalog
from matcher.catalog.check import frame_text
from matcher.catalog.load import validate_record
from matcher.catalog.lookalike import FIELD, interpreter_messages, marks, remarked
from matcher.engine import Engine

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "patterns" / "sglang" / "generated"
FIELD_LOGS = Path(__file__).parent / "fixtures" / "field"
# `{type(self).__name__} has no attribute {key}`: a `logger.error` of
# `multimodal_gen/configs/sample/base.py` (0.5.5), in words any failed attribute read has.
LOG_SITE = "4d193a6541b83e17"
OWN_WORDS = "00016131fca64a7d"  # `image ({H}, {W}) not divisible by ({patch_h}, {patch_w})`


def _line(file: str, rid: str) -> str:
    with (GENERATED / file).open(encoding="utf-8") as f:
        return next(line for line in f if f'"id":"{rid}"' in line)


def _record(raw: dict, index: int = 0):
    found = validate_record(raw, "test", index, "generated")
    assert not isinstance(found, list), found
    return found


def _interpreters_line(code: str) -> str:
    """The last line of the traceback the interpreter prints for `code`, run here."""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return run.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_the_interpreters_messages_are_read_from_the_interpreter():
    found = {message: cls for cls, message in interpreter_messages()}
    assert found["list index out of range"] == "IndexError"
    assert found["type object 'int' has no attribute 'no_such_attribute'"] == "AttributeError"


def test_a_site_in_the_interpreters_words_is_marked_and_one_in_its_own_is_not():
    raws = [json.loads(_line("sglang.jsonl", rid)) for rid in (LOG_SITE, OWN_WORDS)]
    for raw in raws:
        raw.pop(FIELD, None)
    found = marks([_record(raw, i) for i, raw in enumerate(raws)])
    assert "python" in found[LOG_SITE]
    assert OWN_WORDS not in found


def test_the_catalog_carries_the_marks():
    assert "python" in json.loads(_line("sglang.jsonl", LOG_SITE))[FIELD]
    assert FIELD not in json.loads(_line("sglang.jsonl", OWN_WORDS))


def test_a_mark_is_written_in_the_style_of_the_line():
    line = _line("sglang.jsonl", OWN_WORDS)
    marked = remarked(line, ("python",))
    assert marked.startswith(line.rstrip("\n")[:-1]) and marked.endswith(',"alsoMadeBy":["python"]}\n')
    assert remarked(marked, ()) == line


def test_the_interpreters_message_on_a_lone_line_names_no_generated_site(catalog):
    """Before the marks, `type object 'ServerArgs' has no attribute 'x'` on a line was the
    `logger.error` of `multimodal_gen/configs/sample/base.py`."""
    line = _interpreters_line("class ServerArgs: pass\nServerArgs.encoder_only")
    assert line == "AttributeError: type object 'ServerArgs' has no attribute 'encoder_only'"
    [record] = frame_text(line + "\n")
    found = Engine(catalog.records).match_all(record)
    assert [m.pattern.id for m in found if m.pattern.layer == "generated"
            and m.pattern.file_path] == []


def test_a_marked_record_matches_at_its_frame_only():
    """sglang #5424: the interpreter's `'Parameter' object has no attribute 'weight_loader'`,
    raised in `srt/models/deepseek_v2.py`: a record of those words matches the traceback only
    at the file its innermost sglang frame is in, and a line of the words alone at none."""
    pattern = "'(?P<cls>[\\w.]+)' object has no attribute '(?P<name>\\w+)'"
    records = [_record({"id": f"{i:016x}", "messagePattern": pattern, "errorClass": "AttributeError",
                        "filePath": f"python/sglang/{path}", FIELD: ["python"]}, i)
               for i, path in enumerate(("srt/models/deepseek_v2.py",
                                         "multimodal_gen/configs/models/base.py"))]
    engine = Engine(records, cache=None)
    log = (FIELD_LOGS / "sglang-b" / "5424-fp8-update-weights-no-weight-loader.log").read_text()
    [tb] = [r for r in frame_text(log) if r.kind == "traceback"]
    assert [m.pattern.file_path for m in engine.match_all(tb)] == [
        "python/sglang/srt/models/deepseek_v2.py"]
    last = next(line for line in reversed(log.splitlines()) if line.startswith("AttributeError"))
    [lone] = frame_text(last + "\n")
    assert engine.match_all(lone) == []


# flashinfer's C++ checks of its GEMMs print torch's own `mat1 and mat2 shapes cannot be
# multiplied (AxB and CxD)` (at::mm's check): the words alone do not say flashinfer made them.
FLASHINFER_MAT1_MAT2 = "cad36d786b8ce072"  # csrc/fp8_gemm_cutlass.cu, flashinfer 0.2.11.post3..0.3.1
TORCH_MAT1_MAT2 = "db49f5c8ef4ef1c9"  # aten/src/ATen/native/LinearAlgebra.cpp


def test_a_flashinfer_cpp_check_in_torchs_words_is_marked():
    with (GENERATED / "flashinfer.jsonl").open(encoding="utf-8") as f:
        raw = next(json.loads(line) for line in f if FLASHINFER_MAT1_MAT2 in line)
    assert raw["id"] == FLASHINFER_MAT1_MAT2 and "torch" in raw[FIELD]


def test_torchs_words_under_sglangs_own_frames_are_torchs(catalog, tmp_path):
    # https://github.com/sgl-project/sglang/issues/26751 (train): a grayscale image reaching
    # Gemma-4's vision tower, `F.linear` in sglang's gemma4_vision.py; no flashinfer frame
    from matcher.scan import scan_events

    log = FIELD_LOGS.parent / "lookalike" / "sglang-26751-gemma4-vision-mat1-mat2.log"
    [e] = scan_events([str(log)], catalog).events
    assert e["pattern_id"] == TORCH_MAT1_MAT2


def test_a_packages_cpp_site_is_at_its_frame_under_the_packages_python():
    from matcher.engine import _called_from
    from matcher.frames import Frame

    def frames(*paths: str) -> tuple[Frame, ...]:
        return tuple(Frame(p, 1, "f", "") for p in paths)

    # a flashinfer op called through torch's dispatch (`torch.ops.…`), then flashinfer's wrapper
    assert _called_from(frames("/x/sglang/srt/layers/quantization/fp8_utils.py",
                               "/x/site-packages/flashinfer/gemm.py",
                               "/x/site-packages/torch/_ops.py"), "flashinfer/")
    # sglang's own call of torch: not flashinfer's
    assert not _called_from(frames("python/sglang/srt/models/gemma4_vision.py"), "flashinfer/")
