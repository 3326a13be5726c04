"""The flashinfer generator (`matcher.catalog.flashinfer`, `flashinfer_sites`,
`flashinfer_remedies`, `flashinfer_python`) and its records.

The reader is checked on flashinfer's own source, as the sdists on PyPI hold it (the snippets
below are copied from the releases named); the shipped records on the lines flashinfer prints,
built the way `flashinfer::Error` builds them (`include/flashinfer/exception.h`: `Error in
function '<fn>' at <file>:<line>: <message>`), and on a line a user pasted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import regex
from generated_layer import engine_of, scan

from matcher.catalog.flashinfer import extract, in_scope, pattern_of, record_id
from matcher.catalog.flashinfer_remedies import FAMILY_PATTERN, area_of, remedy_for
from matcher.catalog.flashinfer_sites import code_of, sites
from matcher.catalog.versions import in_ranges

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "patterns" / "sglang" / "generated" / "flashinfer.jsonl"

# flashinfer-python 0.2.3, include/flashinfer/utils.cuh (the dispatch macro's default case)
DISPATCH_0_2_3 = r"""
#define DISPATCH_HEAD_DIM(head_dim, HEAD_DIM, ...)     \
  switch (head_dim) {                                  \
    case 512: {                                        \
      constexpr size_t HEAD_DIM = 512;                 \
      __VA_ARGS__                                      \
      break;                                           \
    }                                                  \
    default: {                                         \
      std::ostringstream err_msg;                      \
      err_msg << "Unsupported head_dim: " << head_dim; \
      FLASHINFER_ERROR(err_msg.str());                 \
    }                                                  \
  }
"""

# flashinfer-python 0.6.18, include/flashinfer/trtllm/fmha/fmhaRunner.cuh:37
FMHA_0_6_18 = r"""
class TllmGenFmhaRunner {
 public:
  explicit TllmGenFmhaRunner(Data_type dtypeQ, Data_type dtypeK, Data_type dtypeV,
                             Data_type dtypeOut)
      : mSM(getSMVersion()),
        mDtypeOut(dtypeOut) {
    FLASHINFER_CHECK(mSM == kSM_100 || mSM == kSM_103 || mSM == kSM_107,
                     "Unsupported architecture");
    FLASHINFER_CHECK(mDtypeQ == DATA_TYPE_E4M3 || mDtypeQ == DATA_TYPE_FP16,
                     "Unsupported Q data type: " + std::string(toStr(mDtypeQ)));
  }
};
"""

# flashinfer-python 0.5.3: include/flashinfer/comm/trtllm_allreduce.cuh (arguments written with
# a space between them), csrc/page.cu (a tvm-ffi check), include/flashinfer/attention/prefill.cuh
# (a device assert)
NEWER_0_5_3 = r"""
void allreduce_fusion_op(AllReduceFusionParams<T> const& params, bool launch_with_pdl) {
  static constexpr uint32_t VEC_SIZE = 16 / sizeof(T);
  FLASHINFER_CHECK(params.fusion_params.hidden_size % VEC_SIZE == 0,
                   "hidden_size must be a multiple of ", VEC_SIZE);
}
void append_paged_kv_cache(TensorView append_key) {
  TVM_FFI_ICHECK(success) << "AppendPagedKVCache failed to dispatch with dtype "
                          << append_key.dtype();
}
__device__ void kernel() {
#if (__CUDA_ARCH__ < 800)
  if constexpr (std::is_same_v<DTypeQ, nv_bfloat16>) {
    FLASHINFER_RUNTIME_ASSERT("Prefill kernels do not support bf16 on sm75.");
  }
#endif
}
"""


def test_macro_bodies_are_read_as_code_and_keep_their_line_numbers():
    code = code_of(DISPATCH_0_2_3)
    assert code.count("\n") == DISPATCH_0_2_3.count("\n")
    assert "#define" not in code and "FLASHINFER_ERROR(err_msg.str());" in code


def test_a_stream_message_is_read_back_from_its_chain():
    (s,) = sites(DISPATCH_0_2_3, "include/flashinfer/utils.cuh")
    assert (s.kind, s.template) == ("error", "Unsupported head_dim: {head_dim}")
    assert s.line == DISPATCH_0_2_3.splitlines().index(
        '      FLASHINFER_ERROR(err_msg.str());                 \\') + 1


def test_literal_and_concatenated_messages_and_the_function_that_throws():
    got = sites(FMHA_0_6_18, "include/flashinfer/trtllm/fmha/fmhaRunner.cuh")
    assert [(s.template, s.function) for s in got] == [
        ("Unsupported architecture", "TllmGenFmhaRunner"),
        ("Unsupported Q data type: {std::string(toStr(mDtypeQ))}", "TllmGenFmhaRunner")]
    assert got[0].condition.startswith("mSM == kSM_100")


def test_newer_checks_asserts_and_tvm_ffi_checks():
    got = {s.kind: s.template for s in sites(NEWER_0_5_3, "x.cuh")}
    assert got == {
        "error": "hidden_size must be a multiple of  {VEC_SIZE}",
        "tvm": "AppendPagedKVCache failed to dispatch with dtype {append_key.dtype()}",
        "assert": "Prefill kernels do not support bf16 on sm75.",
    }


def test_only_flashinfers_own_sources_are_read():
    assert in_scope("flashinfer_python-0.2.3/include/flashinfer/utils.cuh") == \
        "include/flashinfer/utils.cuh"
    assert in_scope("flashinfer/data/csrc/page.cu") == "csrc/page.cu"
    assert in_scope("flashinfer_python-0.2.3/3rdparty/cutlass/include/cutlass/array.h") is None
    assert in_scope("flashinfer_python-0.2.3/flashinfer/decode.py") is None


@pytest.mark.parametrize("path,area", [
    ("include/flashinfer/trtllm/fmha/fmhaRunner.cuh", "attention"),
    ("include/flashinfer/sampling.cuh", "sampling"),
    ("csrc/trtllm_fused_moe_kernel_launcher.cu", "moe"),
    ("include/flashinfer/comm/trtllm_allreduce.cuh", "allreduce"),
    ("include/flashinfer/gemm/bmm_fp8.cuh", "gemm"),
    ("include/flashinfer/norm.cuh", "other"),
])
def test_the_area_is_read_from_the_path(path, area):
    assert area_of(path).name == area


def test_remedies_say_what_the_words_and_the_area_support():
    arch = remedy_for("include/flashinfer/trtllm/fmha/fmhaRunner.cuh", "Unsupported architecture")
    assert "architectures" in arch.documentation
    assert arch.fix_actions == (({"op": "set", "flag": "--attention-backend", "value": "triton"},),)
    bf16 = remedy_for("include/flashinfer/attention/prefill.cuh",
                      "Prefill kernels do not support bf16 on sm75.")
    assert bf16.fix_actions[0] == ({"op": "set", "flag": "--dtype", "value": "float16"},)
    norm = remedy_for("include/flashinfer/norm.cuh", "Unsupported num_warps: {x}")
    assert norm.solutions == () and norm.fix_actions == ()


def test_extract_merges_releases_and_attributes_them():
    a = sites(FMHA_0_6_18, "include/flashinfer/trtllm/fmha/fmhaRunner.cuh")
    result = extract([("0.6.18", a), ("0.7.2", a), ("0.5.3", sites(NEWER_0_5_3, "x.cuh"))])
    by_message = {r["errorMessage"]: r for r in result.records}
    arch = by_message["Unsupported architecture"]
    assert arch["sourcePackage"] == "flashinfer-python"
    assert arch["sourceVersions"] == ["0.6.18..0.7.2"]
    assert "flashinfer-error-in-function" in {r["slug"] for r in result.records}


@pytest.fixture(scope="module")
def shipped() -> list[dict]:
    return [json.loads(x) for x in GENERATED.read_text(encoding="utf-8").splitlines() if x]


def _matching(records: list[dict], text: str) -> list[dict]:
    return [r for r in records if regex.search(r["messagePattern"], text)]


# The title of https://github.com/flashinfer-ai/flashinfer/issues/5445 (train split): the line
# sglang printed on an sm_120 GPU, cut by GitHub's title limit.
PASTED_5445 = ("tvm.error.InternalError: Error in function 'TllmGenFmhaRunner' at .sglang/lib/"
               "python3.12/site-packages/flashinfer/data/include/flashinfer/trtllm/fmha/"
               "fmhaRunner.cuh:37: Unsupported architectur")


def test_the_family_record_takes_a_pasted_line_cut_short(shipped):
    got = _matching(shipped, PASTED_5445.split(": ", 1)[1])
    assert [r["slug"] for r in got] == ["flashinfer-error-in-function"]
    assert any("--attention-backend triton" in s for s in got[0]["solutions"])


def test_shipped_records_match_what_flashinfer_error_prints(shipped):
    """`flashinfer::Error::what()` of the 0.6.18 check above (`fmhaRunner.cuh:37`, the place
    the pasted line names), built as `exception.h` builds it: the message record and the
    family record both match, and the message record says what to do."""
    line = PASTED_5445.split(": ", 1)[1].removesuffix("architectur") + "architecture"
    got = _matching(shipped, line)
    assert {r["slug"] for r in got} >= {"flashinfer-unsupported-architecture",
                                        "flashinfer-error-in-function"}
    arch = next(r for r in got if r["slug"] == "flashinfer-unsupported-architecture")
    assert in_ranges("0.6.18", arch["sourceVersions"])
    assert arch["fixActions"] == [[{"op": "set", "flag": "--attention-backend",
                                    "value": "triton"}]]


def test_every_shipped_pattern_compiles_and_has_literal_text(shipped):
    for r in shipped:
        regex.compile(r["messagePattern"])
        assert r["sourcePackage"] == "flashinfer-python" and r["generator"]
    assert regex.search(FAMILY_PATTERN, "Error in function 'f' at /x/flashinfer/a.cuh:3: m")


def test_pattern_of_heads_each_kind():
    (s,) = sites(DISPATCH_0_2_3, "include/flashinfer/utils.cuh")
    assert pattern_of(s).startswith("Error in function ")


# The end of the traceback pasted in https://github.com/flashinfer-ai/flashinfer/issues/5445
# (train split): its last sglang frames as the thread shows them, and the exception line as its
# title carries it (cut short by GitHub's title limit).
TRACEBACK_5445 = """\
Traceback (most recent call last):
  File "/home/admin2/.sglang/lib/python3.12/site-packages/sglang/srt/layers/radix_attention.py", line 290, in forward
    return get_attn_backend().forward(
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/admin2/.sglang/lib/python3.12/site-packages/sglang/srt/layers/attention/hybrid_linear_attn_backend.py", line 1327, in forward
    return self.forward_extend(
           ^^^^^^^^^^^^^^^^^^^^
  File "/home/admin2/.sglang/lib/python3.12/site-packages/sglang/srt/layers/attention/hybrid_linear_attn_backend.py", line 1276, in forward_extend
    return self.full_attn_backend.forward_extend(
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/admin2/.sglang/lib/python3.12/site-packages/sglang/srt/layers/attention/dsa_backend.py", line 1891, in forward_extend
    return self._forward_trtllm(
           ^^^^^^^^^^^^^^^^^^^^^
""" + PASTED_5445 + "\n"


def test_a_dependency_record_is_not_dropped_by_sglangs_frames(tmp_path):
    """sglang's frames call into flashinfer: they do not contradict a flashinfer record, which
    names no file of sglang's (`engine._drop_contradicted_sites`)."""
    engine = engine_of(tmp_path, ("flashinfer.jsonl",))
    events = [e for e in scan(engine, TRACEBACK_5445) if e.get("pattern_id")]
    assert [e["pattern_id"] for e in events][-1] == _family_id()


def _family_id() -> str:
    return record_id("family\nerror")


def test_an_architecture_check_outside_an_area_still_says_where_to_go():
    """flashinfer 0.3.1's `compilation_context.py`: a kernel asked for on a GPU of another
    major version (the line of sglang#13342, train split, is this message)."""
    got = remedy_for("flashinfer/compilation_context.py",
                     "No supported CUDA architectures found for major versions "
                     "{supported_major_versions}.")
    assert got.area == "other" and got.fix_actions == ()
    assert any("FLASHINFER_CUDA_ARCH_LIST" in s for s in got.solutions)
