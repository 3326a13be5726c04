"""Statuses of the accelerators other than NVIDIA's and AMD's: Ascend NPUs
(`matcher.catalog.ascend`, from the torch-npu wheels) and Intel GPUs (`matcher.catalog.ur_result`,
from the intel-sycl-rt wheels): the headers they are read from, the catalogs they make, and real
lines from public threads they recognize (each with its URL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import regex
from generated_layer import engine_of

from matcher.catalog import ascend, ur_result
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.redact import Redactor
from matcher.sinks.events import event_dict
from matcher.types import Chunk

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "patterns" / "sglang" / "generated"
FIELD = ROOT / "tests" / "fixtures" / "field"


@pytest.fixture(scope="module")
def recs() -> list[dict[str, Any]]:
    return [json.loads(x) for x in (GENERATED / "ascend.jsonl").open()]


def hits(recs: list[dict[str, Any]], line: str) -> list[str]:
    return [r["slug"] for r in recs if regex.search(r["messagePattern"], line)]


# -- the sources ----------------------------------------------------------------------------------

def test_acl_codes_are_named_and_explained_from_the_wheels_headers() -> None:
    # torch-npu 2.14.0: include/acl/acl_base_rt.h, include/acl/error_codes/rt_error_codes.h and
    # include/torch_npu/csrc/core/npu/NPUErrorCodes.h, as published on PyPI (in part)
    base = "static const int ACL_SUCCESS = 0;\nstatic const int ACL_ERROR_INVALID_PARAM = 100000;\n"
    rt = "#define  ACL_ERROR_RT_DEV_SETUP_ERROR            507033 // device setup error\n"
    texts = '''      {100000,
       "Parameter verification failed.\\n\\
        Check whether the input parameter value of the interface is correct."},
      /* Warning: key logs in the fault mode library!!! */
      {507033,
       "Failed to start the device. \\n\\
        Rectify the fault based on the error information in the ascend log."},
'''
    files = {ascend.INCLUDE + "acl/acl_base_rt.h": base,
             ascend.INCLUDE + "acl/error_codes/rt_error_codes.h": rt,
             ascend.INCLUDE + ascend.ACL_TEXTS: texts}
    assert ascend.vocabulary(files) == [
        ("acl", "100000", "ACL_ERROR_INVALID_PARAM", "Parameter verification failed.",
         "Check whether the input parameter value of the interface is correct."),
        ("acl", "507033", "ACL_ERROR_RT_DEV_SETUP_ERROR", "Failed to start the device.",
         "Rectify the fault based on the error information in the ascend log.")]


def test_hccl_results_are_read_from_hccl_types() -> None:
    # torch-npu 2.14.0: include/third_party/hccl/inc/hccl/hccl_types.h (in part)
    source = ("    HCCL_SUCCESS = 0,               /**< success */\n"
              "    HCCL_E_PARA = 1,                /**< parameter error */\n"
              "    HCCL_E_TCP_CONNECT = 11,        /**< tcp connect fail */\n")
    assert ascend.hccl_results(source) == {1: ("HCCL_E_PARA", "parameter error"),
                                           11: ("HCCL_E_TCP_CONNECT", "tcp connect fail")}


def test_the_committed_catalog_is_what_the_generator_writes(tmp_path: Path) -> None:
    out = tmp_path / "ascend.jsonl"
    assert ascend.main(["-o", str(out)]) == 0
    assert out.read_bytes() == (GENERATED / "ascend.jsonl").read_bytes(), \
        "run `python -m matcher.catalog.ascend` and commit its output"


def test_every_record_is_attributed(recs: list[dict[str, Any]]) -> None:
    assert len(recs) > 200
    for r in recs:
        assert r["sourcePackage"] == "torch-npu" and r["sourceVersions"], r["slug"]
        assert r["generator"] == "matcher.catalog.ascend"
        assert regex.search(r["messagePattern"], r["examples"]["match"][0])
    names = {r["errorMessage"] for r in recs}
    assert "ACL_SUCCESS" not in names and "HCCL_SUCCESS" not in names


# -- real lines -----------------------------------------------------------------------------------

# (line as pasted, the record it is); the URL of each thread is in the comment above it.
LINES = [
    # https://github.com/vllm-project/vllm-ascend/issues/800
    (("ERROR 05-09 08:06:34 [engine.py:448] RuntimeError: GetDevice:build/CMakeFiles/torch_npu.dir/"
     "compiler_depend.ts:60 NPU function error: aclrtGetCurrentContext(&used_devices[local_device]),"
     " error code is 107002"), "ascend-acl-error-rt-context-null"),
    # https://github.com/vllm-project/vllm-ascend/issues/1558
    (("(EngineCore_1 pid=113803) (VllmWorker rank=0 pid=114020) ERROR 07-01 08:38:50 "
     "[multiproc_executor.py:492] RuntimeError: Initialize:torch_npu/csrc/core/npu/sys_ctrl/"
     "npu_sys_ctrl.cpp:146 NPU function error: c10_npu::SetDevice(device_id_), error code is "
     "507033"), "ascend-acl-error-rt-dev-setup-error"),
    # https://github.com/Ascend/pytorch/issues/66
    (("RuntimeError: operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:25 NPU function "
     "error: c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507035"),
     "ascend-acl-error-rt-vector-core-exception"),
    # https://github.com/vllm-project/vllm-ascend/issues/1443
    (("RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 "
     "NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048"),
     "ascend-acl-error-rt-ffts-plus-timeout"),
    # https://github.com/vllm-project/vllm-ascend/issues/8981
    (("(EngineCore pid=471424) RuntimeError: process_non_blocking_copy:build/CMakeFiles/torch_npu."
     "dir/compiler_depend.ts:246 NPU function error: aclrtPointerGetAttributes, error code is "
     "107000"), "ascend-acl-error-rt-param-invalid"),
    # https://github.com/hiyouga/LlamaFactory/issues/4372
    (("EH9999: 2024-06-19-23:19:23.433.674  wait for compute device to finish failed, runtime "
     "result = 507018.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]"),
     "ascend-acl-error-rt-aicpu-exception"),
    # https://github.com/vllm-project/vllm-ascend/issues/672
    (("[rank1]: RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:102 "
     "HCCL function error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, "
     "&(comm->hcclComm_)), error code is 15"), "ascend-hccl-e-runtime"),
    # https://github.com/vllm-project/vllm-ascend/issues/2712
    (("RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:148 HCCL "
     "function error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, "
     "&(comm->hcclComm_)), error code is 1"), "ascend-hccl-e-para"),
]


@pytest.mark.parametrize(("line", "slug"), LINES)
def test_a_real_line_is_its_status_and_no_other(recs: list[dict[str, Any]], line: str,
                                                slug: str) -> None:
    assert hits(recs, line) == [slug]


def test_a_device_that_cannot_start_says_how_to_make_it_reachable(
        recs: list[dict[str, Any]]) -> None:
    rec = next(r for r in recs if r["slug"] == "ascend-acl-error-rt-dev-setup-error")
    assert "npu-smi info" in rec["solutions"][0]
    assert "/dev/davinci_manager" in rec["solutions"][1]
    assert "Failed to start the device." in rec["documentation"]
    context = next(r for r in recs if r["slug"] == "ascend-acl-error-rt-context-null")
    assert context["solutions"][-1].startswith("torch_npu's advice: Check whether acl.rt.set_")


def test_an_operator_error_code_is_left_to_the_curated_record(recs: list[dict[str, Any]]) -> None:
    # aclnn's own codes (561103) are no ACL runtime status: the curated record names the operator.
    text = (FIELD / "sglang-a/vllm-ascend-3046-sglang-910c-aclnnarange-561103.log").read_text()
    assert not any(hits(recs, line) for line in text.splitlines())


# -- through the daemon's pipeline ---------------------------------------------------------------

@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("builtin"), ("ascend.jsonl",))


def test_a_pasted_failure_gives_one_event_with_what_to_do(engine: Engine) -> None:
    # https://github.com/vllm-project/vllm-ascend/issues/1558 (the worker's lines, in part)
    text = "\n".join([
        ('  File "/usr/local/python3.10.17/lib/python3.10/site-packages/torch_npu/npu/utils.py", '
        "line 80, in set_device"),
        "    torch_npu._C._npu_setDevice(device_id)",
        ("RuntimeError: Initialize:torch_npu/csrc/core/npu/sys_ctrl/npu_sys_ctrl.cpp:146 NPU "
        "function error: c10_npu::SetDevice(device_id_), error code is 507033"),
        ("[ERROR] 2025-07-01-08:38:50 (PID:114020, Device:-1, RankID:1) ERR00100 PTA call acl api "
        "failed"), ""])
    pipeline = Pipeline(engine, catalog_version="test")
    data = text.encode()
    events = pipeline.feed(Chunk(data, "log", len(data))).events
    events += pipeline.end_of_source("log") + pipeline.finish()
    found = [event_dict(e, Redactor()) for e in events]
    slugs = {r.id: r.slug for r in engine.records}
    ours = [e for e in found if slugs.get(e.get("pattern_id", "")) ==
            "ascend-acl-error-rt-dev-setup-error"]
    assert ours, found
    assert ours[0]["remediation"]["solutions"]


# -- Intel GPU (XPU): oneAPI Unified Runtime statuses ---------------------------------------------

def test_ur_statuses_are_read_from_the_sycl_runtimes_header() -> None:
    # intel-sycl-rt 2026.2.0: include/unified-runtime/ur_api.h, as published on PyPI (in part)
    header = ("typedef enum ur_result_t {\n  /// Success\n  UR_RESULT_SUCCESS = 0,\n"
              "  /// Device hung, reset, was removed, or adapter update occurred\n"
              "  UR_RESULT_ERROR_DEVICE_LOST = 20,\n"
              "  /// Unknown or internal error\n  UR_RESULT_ERROR_UNKNOWN = 0x7ffffffe,\n"
              "} ur_result_t;\n")
    assert ur_result.vocabulary(header) == [
        (0, "UR_RESULT_SUCCESS", "Success"),
        (20, "UR_RESULT_ERROR_DEVICE_LOST",
         "Device hung, reset, was removed, or adapter update occurred"),
        (0x7FFFFFFE, "UR_RESULT_ERROR_UNKNOWN", "Unknown or internal error")]


def test_the_committed_xpu_catalog_is_what_the_generator_writes(tmp_path: Path) -> None:
    out = tmp_path / "xpu.jsonl"
    assert ur_result.main(["-o", str(out)]) == 0
    assert out.read_bytes() == (GENERATED / "xpu.jsonl").read_bytes(), \
        "run `python -m matcher.catalog.ur_result` and commit its output"


XPU_LINES = [
    # https://github.com/pytorch/pytorch/issues/190972
    ("RuntimeError: level_zero backend failed with error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)",
     "xpu-error-out-of-resources"),
    # https://github.com/intel/intel-extension-for-pytorch/issues/780
    ("RuntimeError: Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
     "xpu-error-device-lost"),
    # https://github.com/ggml-org/llama.cpp/issues/25286
    ("level_zero backend failed with error: 39 [UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY]",
     "xpu-error-out-of-device-memory"),
]


@pytest.mark.parametrize(("line", "slug"), XPU_LINES)
def test_a_real_xpu_line_is_its_status_with_what_to_do(line: str, slug: str) -> None:
    recs = [json.loads(x) for x in (GENERATED / "xpu.jsonl").open()]
    hit = [r for r in recs if regex.search(r["messagePattern"], line)]
    assert [r["slug"] for r in hit] == [slug]
    assert hit[0]["solutions"] and hit[0]["sourcePackage"] == "intel-sycl-rt"
