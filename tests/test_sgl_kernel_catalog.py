"""The sgl-kernel generator (`matcher.catalog.sgl_kernel`, `matcher.catalog.cpp_checks`) and its
records, checked against the text sgl-kernel really prints.

A failed `TORCH_CHECK` prints its message arguments one after another; each string literal is
in the compiled library as it is. `fixtures/sgl_kernel/sgl-kernel-0.3.7.post1.messages.txt` is
the printable text of the real sgl-kernel 0.3.7.post1 wheel's shared objects (x86_64,
`strings -n 8`) that reads like a check's message (`fixtures/sgl_kernel/README.md`): the
records must agree with it, and the extractor must spell conditions and macro arguments as the
compiler did. The generator itself needs a sglang clone; `SGLANG_REPO=PATH` runs it on one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import regex

from matcher.catalog import load_catalog
from matcher.catalog.cpp_checks import checks, lex
from matcher.catalog.sgl_kernel import (
    FAMILIES,
    FLASHINFER_MACROS,
    extract,
    read_tree,
    release_commits,
    remedy_for,
)
from matcher.catalog.versions import in_ranges

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "sgl_kernel"
STRINGS = FIXTURES / "sgl-kernel-0.3.7.post1.messages.txt"
GENERATED = ROOT / "patterns" / "sglang" / "generated" / "sgl-kernel.jsonl"
VERSION = "0.3.7.post1"


@pytest.fixture(scope="module")
def shipped():
    return load_catalog(builtin=False, user_paths=[GENERATED])


@pytest.fixture(scope="module")
def binary() -> list[str]:
    return [x for x in STRINGS.read_text(encoding="utf-8").splitlines() if len(x) >= 8]


def _macros() -> dict:
    table: dict = {}
    lex(FLASHINFER_MACROS, table)
    return table


def test_macro_arguments_and_conditions_are_spelled_as_the_compiler_did(binary):
    """sgl-kernel's own call sites, written the way its sources write them, give the very
    strings the 0.3.7.post1 build holds: flashinfer's CHECK_EQ stringizes its arguments, and a
    TORCH_CHECK without a message prints its condition."""
    source = (
        "void verify(at::Tensor accept_index, int64_t batch_size, at::Tensor inp) {\n"
        "  CHECK_EQ(batch_size, accept_index.size(0));\n"
        "  TORCH_CHECK(_is_weak_contiguous(inp));\n"
        "  CHECK_INPUT(inp);\n"
        "}\n")
    found = checks(source, "csrc/x.cu", _macros())
    eq, weak, cuda, contiguous = found
    assert eq.template.startswith("CHECK_EQ(batch_size, accept_index.size(0)) failed. ")
    assert "CHECK_EQ(batch_size, accept_index.size(0)) failed. " in binary
    assert weak.template in binary
    assert cuda.template == "inp must be a CUDA tensor" and cuda.line == 4
    assert contiguous.template == "inp must be contiguous"
    assert {c.function for c in found} == {"verify"}


def test_the_shipped_records_say_what_the_wheel_prints(shipped, binary):
    """Of the records whose message is plain text and that hold 0.3.7.post1 (CUDA kernels,
    not `csrc/cpu`), most are, for the most part, one string of that build: the others are
    multi-argument messages of short names (`alpha` + `must be a CUDA tensor`) or code an
    `#if` left out of that build."""
    agree = disagree = 0
    for r in shipped.records:
        message = r.error_message or ""
        if "family" in r.tags or "{" in message or "/csrc/cpu/" in f"/{r.file_path}":
            continue
        if not in_ranges(VERSION, r.source_versions):
            continue
        if not regex.search(r"must|support|Expected|expect|[Oo]nly|[Ii]nvalid|failed|mismatch|"
                            r"should|CHECK_|not ", message):
            continue
        best = max((len(s) for s in binary if s in message), default=0)
        if 2 * best >= len(message):
            agree += 1
        else:
            disagree += 1
    assert agree > 200
    assert agree >= 0.85 * (agree + disagree)


def test_every_check_without_a_message_in_sgl_kernels_own_code_is_recognized(shipped, binary):
    """Each `Expected … to be true, but got false.` of the build is matched by a record holding
    that release — except the ones compiled in from torch's headers and from the
    flash-attention sources sgl-kernel's build fetches."""
    foreign = ("size_bytes_is_heap_allocated_", "alibi_slopes", "block_count", "column_count",
               "column_index", "out.scalar_type() == out_type", "p_dropout", "params.",
               "ptr_->", "stream_.device_type()")
    records = [r for r in shipped.records if in_ranges(VERSION, r.source_versions)]
    patterns = [regex.compile(r.message_pattern) for r in records]
    expected = [s for s in binary if s.startswith("Expected ") and " to be true, but got false."
                in s and not any(f in s for f in foreign)]
    assert len(expected) > 30
    missed = [s for s in expected if not any(p.search(s) for p in patterns)]
    assert missed == []


def test_argument_checks_are_families_with_the_argument_captured(shipped, binary):
    by_name = {f.name: f for f in FAMILIES}
    cuda = [s for s in binary if s.endswith(" must be a CUDA tensor") and " " not in
            s[:-len(" must be a CUDA tensor")]]
    assert len(cuda) > 20
    pattern = regex.compile(by_name["cuda-tensor"].pattern)
    for s in cuda:
        m = pattern.search(s)
        assert m and s.startswith(m.group("tensor"))
    family = [r for r in shipped.records if r.slug == "sgl-kernel-cuda-tensor"]
    assert len(family) == 1 and in_ranges(VERSION, family[0].source_versions)


def test_every_shipped_record_is_attributed(shipped):
    assert len(shipped.records) > 300
    for r in shipped.records:
        assert r.source_package == "sgl-kernel"
        assert r.generator == "matcher.catalog.sgl_kernel"
        assert r.source_versions


def test_remedies_follow_the_words():
    gpus = remedy_for("custom allreduce only supports num gpus in (2,4,6,8). Actual num gpus = 3")
    assert gpus is not None and "--disable-custom-all-reduce" in gpus.solution
    dtype = remedy_for("gpt_marlin_gemm only supports bfloat16 and float16")
    assert dtype is not None and "--dtype bfloat16" in dtype.solution
    built = remedy_for("No compiled cutlass_fp4_group_mm kernel, sgl-kernel must be compiled with "
                       "ENABLE_NVFP4 for SM100+ and CUDA 12.8 or above.")
    assert built is not None and "wheel built for your" in built.solution
    assert remedy_for("Expected !enable_pdl to be true, but got false.") is None
    assert remedy_for("topk_indices and topk_weights must have the same shape") is None


def test_the_frame_line_torch_adds_is_the_checks(shipped):
    """With TORCH_SHOW_CPP_STACKTRACES=1 torch follows the message with `Exception raised from
    <function> at <file>:<line>`: the record of a check with few sites takes that line too."""
    [record] = [r for r in shipped.records if (r.error_message or "").startswith(
        "No implemented fp8_scaled_mm for current compute capability")]
    assert record.error_class == "NotImplementedError"
    spots = next(loc["sites"] for loc in record.raw["sourceLocations"]
                 if in_ranges(VERSION, [loc["versions"]]))
    path, line = spots[0].rsplit(":", 1)
    frame = (f"Exception raised from fp8_scaled_mm at /sgl-kernel/{path}:{line} "
             "(most recent call first):")
    assert regex.search(record.message_pattern, frame)
    assert not regex.search(record.message_pattern, frame.replace(f":{line} ", ":1 "))


@pytest.mark.skipif(not os.environ.get("SGLANG_REPO"), reason="SGLANG_REPO: a sglang clone")
def test_generator_on_a_sglang_clone():
    repo = Path(os.environ["SGLANG_REPO"])
    subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                   capture_output=True)
    releases = release_commits(repo, ["0.3.7", VERSION])
    assert [v for v, _ in releases] == ["0.3.7", VERSION]
    from matcher.catalog.sgl_kernel import Blobs

    result = extract([read_tree(repo, v, c) for v, c in releases], Blobs(repo))
    assert result.records
