"""The curated records of Triton's and torch.compile's failures (`patterns/sglang/curated/compile.json`):
each train excerpt and evidence paste it was written from (`tests/fixtures/field/s44-compile/`,
`tests/fixtures/compile/index.json`, real pastes with their threads) is scanned as
`sglang-matcher scan` scans it; its root-cause line must be that record's event, with a solution
that says what to do (`bench/field_recall.py`'s rule)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from field_recall import is_pointer, is_root_cause, scan

from matcher.catalog import load_catalog
from matcher.engine import Engine

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDS = Path(__file__).resolve().parents[1] / "patterns" / "sglang" / "curated" / "compile.json"


def _cases() -> list[tuple[Path, str, str]]:
    """(paste, root-cause line, slug of the record that must recognize it)."""
    cases = [(FIXTURES / "compile" / e["file"], e["root_cause"], e["record"])
             for e in json.loads((FIXTURES / "compile" / "index.json").read_text(encoding="utf-8"))]
    field = FIXTURES / "field" / "s44-compile"
    cases += [(field / e["file"], e["root_cause"], "triton-ascend-unknown-npu-target")
              for e in json.loads((field / "index.json").read_text(encoding="utf-8"))]
    lone = FIXTURES / "field" / "sglang-a" / "19573-piecewise-dynamo-logger-unsupported-qwen35.log"
    cases.append((lone, lone.read_text(encoding="utf-8").splitlines()[0],
                  "torch-compile-exception-line"))
    return cases


CASES = _cases()


def curated_id(slug: str) -> str:
    return hashlib.sha256(("sglang-matcher/curated/" + slug).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def catalog_engine():
    catalog = load_catalog()
    return catalog, Engine(catalog.records)


def test_every_record_is_named_by_its_slug():
    records = json.loads(RECORDS.read_text(encoding="utf-8"))
    assert {slug for _, _, slug in CASES} <= {r["slug"] for r in records}
    assert all(curated_id(r["slug"]) == r["id"] for r in records)


@pytest.mark.parametrize("paste,root_cause,slug", CASES, ids=[c[0].name for c in CASES])
def test_the_record_recognizes_its_paste_with_a_fix(catalog_engine, paste, root_cause, slug):
    catalog, engine = catalog_engine
    hit = next((e for e in scan(engine, catalog, paste) if is_root_cause(e, root_cause)), None)
    assert hit is not None and hit.get("pattern_id") == curated_id(slug)
    assert any(not is_pointer(s) for s in (hit.get("remediation") or {}).get("solutions") or [])



def test_a_cut_compilation_error_without_its_caret_line_is_not_claimed(catalog_engine, tmp_path):
    """The record needs the excerpt's caret line: a message cut before it is not told apart
    from any other text after `at L:C:` (kijai/ComfyUI-WanVideoWrapper#553, as cut)."""
    catalog, engine = catalog_engine
    paste = tmp_path / "cut.log"
    paste.write_text("triton.compiler.errors.CompilationError: at 37:20:\n"
                     "    K_ptrs = K + (off_z * stride_kz + (off_h // num_kv_groups) * stride_kh)"
                     " + offs_n[None, :] * stride_kn + offs_k[:, None]\n")
    ids = {e.get("pattern_id") for e in scan(engine, catalog, paste)}
    assert curated_id("triton-kernel-compilation-error") not in ids
