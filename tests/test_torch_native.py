"""torch's own C++ checks (`matcher.catalog.torch_native`) and their records.

The reader is checked on torch's source as the 2.6.0 release holds it (the snippets below are
copied from the files named); the shipped records on lines users pasted into public threads,
with their URLs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from generated_layer import engine_of, scan

from matcher.catalog.cpp_checks import Hole, checks
from matcher.catalog.torch_native import in_scope, shape_of, without_detail_tail

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "patterns" / "sglang" / "generated" / "torch-native.jsonl"

# torch 2.6.0, torch/csrc/distributed/c10d/HashStore.cpp:51 and ProcessGroupNCCL.cpp:2370
C10D_2_6_0 = r"""
void HashStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  if (!cv_.wait_for(lock, timeout, pred)) {
      C10_THROW_ERROR(DistStoreError, "Wait timeout");
  }
}
void ProcessGroupNCCL::checkAndSetException() {
  TORCH_CHECK_WITH(
      DistBackendError,
      ncclComm->getNcclCommFailureReason() == std::nullopt,
      "NCCL communicator was aborted on rank ", rank_, ".");
}
"""


def test_torch_own_raising_macros_give_their_python_class() -> None:
    found = {c.template: c for c in checks(C10D_2_6_0, "c10d.cpp", {}, classed=True)}
    assert found["Wait timeout"].error_class == "DistStoreError"
    aborted = found["NCCL communicator was aborted on rank {rank_}."]
    assert aborted.error_class == "DistBackendError"
    assert aborted.condition.startswith("ncclComm->getNcclCommFailureReason()")
    assert aborted.function == "checkAndSetException"
    # The kernel libraries' readers do not look for them: their records stay as they were.
    assert checks(C10D_2_6_0, "c10d.cpp", {}) == []


def test_the_tree_read_is_what_an_inference_server_runs() -> None:
    assert in_scope("pytorch-v2.6.0/aten/src/ATen/native/TensorShape.cpp") == \
        "aten/src/ATen/native/TensorShape.cpp"
    assert in_scope("pytorch-v2.6.0/aten/src/ATen/native/cuda/Blas.cpp")
    assert in_scope("pytorch-v2.6.0/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp")
    assert in_scope("pytorch-v2.6.0/aten/src/ATen/native/quantized/cpu/qconv.cpp") is None
    assert in_scope("pytorch-v2.6.0/aten/src/ATen/native/mps/operations/Copy.mm") is None
    assert in_scope("pytorch-v2.6.0/torch/csrc/jit/runtime/interpreter.cpp") is None
    assert in_scope("pytorch-v2.6.0/aten/src/ATen/native/Convolution.cpp") is None


def test_an_os_error_tail_is_left_out_of_the_pattern_and_nothing_else() -> None:
    shm = ("unable to open shared memory object <", Hole("filename_"),
           "> in read-write mode: ", Hole("c10::utils::str_error(errno)"), " (", Hole("errno"),
           ")")
    assert without_detail_tail(shm) == shm[:3][:2] + ("> in read-write mode",)
    shapes = ("mat1 and mat2 shapes cannot be multiplied (", Hole("a"), "x", Hole("b"), ")")
    assert without_detail_tail(shapes) == shapes
    got = ("expected device ", Hole("a"), ", got: ", Hole("b"))
    assert without_detail_tail(got) == got
    assert shape_of("a ({x.size(0)}x{y}) {{literal}}") == "a ({}x{}) {{literal}}"


def _records() -> list[dict[str, object]]:
    return [json.loads(line) for line in GENERATED.read_text(encoding="utf-8").splitlines()]


def test_the_shipped_records_say_where_torch_raises_them() -> None:
    records = _records()
    assert len(records) > 2000
    assert {r["sourcePackage"] for r in records} == {"torch"}
    assert {r["generator"] for r in records} == {"matcher.catalog.torch_native"}
    by_message = {r["errorMessage"]: r for r in records}
    cat = next(r for m, r in by_message.items() if m.startswith("Sizes of tensors must match"))
    assert cat["filePath"] == "aten/src/ATen/native/TensorShape.h"
    assert str(cat["githubUrl"]).startswith("https://github.com/pytorch/pytorch/blob/v2.6.0/")
    # No record's pattern can match an empty message (the loader refuses such a pattern).
    assert all(str(r["messagePattern"]).rstrip(")?") != "(?<=^\\s*(?:what\\(\\):\\s+" for r in
               records)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return engine_of(tmp_path_factory.mktemp("torch"), ("torch-native.jsonl",))


# Lines users pasted, with the thread each is from.
PASTED = {
    # https://github.com/TL-System/plato/issues/28 (a torch release before the errno tail)
    "shm": "RuntimeError: unable to open shared memory object </torch_68252_3878038395> in "
           "read-write mode",
    # https://github.com/pangeo-data/pangeo-docker-images/issues/258
    "write": "RuntimeError: unable to write to file </torch_1394_2747491098>",
    # https://github.com/bigscience-workshop/lm-evaluation-harness/pull/72
    "device": "RuntimeError: Expected all tensors to be on the same device, but found at least "
              "two devices, cuda:0 and cpu! (when checking argument for argument index in "
              "method wrapper__index_select)",
}


def test_a_shared_memory_failure_says_to_give_the_container_more(engine) -> None:  # type: ignore[no-untyped-def]
    for key in ("shm", "write"):
        (event,) = scan(engine, PASTED[key] + "\n")
        assert "aten/src/ATen/MapAllocator.cpp" in event["remediation"]["url"], event
        fix = " ".join(event["remediation"]["solutions"])
        assert "--shm-size" in fix and "/dev/shm" in fix


def test_a_device_mismatch_names_torch_and_its_values(engine) -> None:  # type: ignore[no-untyped-def]
    (event,) = scan(engine, PASTED["device"] + "\n")
    assert event["pattern_id"]
    assert event["captures"]["argName"] == "index"
    assert event["captures"]["methodName"] == "wrapper__index_select"
    assert "torch 2.6.0" in event["remediation"]["documentation"]
    assert event["remediation"]["solutions"] == []


def test_a_curated_record_speaks_for_a_failure_torch_also_words() -> None:
    # MinerU issue 3418: torch's allocator raised it (a torch record holds the whole sentence,
    # a longer literal than the curated record's); the curated record says what to do.
    from matcher.catalog import load_catalog
    from matcher.engine import Engine
    from matcher.pipeline import Pipeline
    from matcher.types import Chunk

    engine = Engine(load_catalog().records)
    path = ROOT / "tests" / "fixtures" / "field" / "projects" / "mineru-3418-sglang-siglip-oom.log"
    data = path.read_bytes()
    pipeline = Pipeline(engine)
    events = pipeline.feed(Chunk(data, "log", len(data))).events
    events += pipeline.end_of_source("log") + pipeline.finish()
    (oom,) = [e for e in events if e.error_class.endswith("OutOfMemoryError")]
    record = next(r for r in engine.records if r.id == oom.pattern_id)
    assert record.layer == "curated"
    assert any("--mem-fraction-static" in s for s in oom.remediation["solutions"])


# Lines of checks of the machine (`matcher.catalog.torch_check_remedies`), as users pasted them
MACHINE = {
    # https://github.com/kijai/ComfyUI-CogVideoXWrapper/issues/40 (train): an RTX 3090
    "fp8": "RuntimeError: torch._scaled_mm is only supported on CUDA devices with compute "
           "capability >= 9.0 or 8.9, or ROCm MI300+",
    # https://github.com/microsoft/MInference/issues/51 (train): a Tesla V100S (the words are
    # flash-attn's there, which are torch's)
    "flash": "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
    # https://github.com/bghira/SimpleTuner/issues/237 (train)
    "nogpu": "RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
}


def test_fp8_matmul_below_sm89_says_to_check_the_gpu_and_serve_without_fp8(engine) -> None:  # type: ignore[no-untyped-def]
    (event,) = scan(engine, MACHINE["fp8"] + "\n")
    rem = event["remediation"]
    assert "FP8 matrix multiplication needs a GPU of compute capability 8.9" in \
        rem["documentation"]
    [fix] = rem["solutions"]
    assert fix.startswith("First see the GPU's compute capability: nvidia-smi --query-gpu="
                          "name,compute_cap --format=csv")
    assert "without an FP8 `--quantization`" in fix


def test_flash_attention_on_an_older_or_newer_gpu_names_both(engine) -> None:  # type: ignore[no-untyped-def]
    (event,) = scan(engine, MACHINE["flash"] + "\n")
    [fix] = event["remediation"]["solutions"]
    assert "Below 8.0, run on an Ampere or newer GPU" in fix
    assert "10.0 or above" in fix


def test_an_nccl_group_without_a_gpu_says_to_make_them_visible() -> None:
    # torch 2.6 raises it as a ValueError, the paste's torch as a RuntimeError: the record's
    # pattern and words, not a scan (which keeps to the record's class)
    import regex

    message = MACHINE["nogpu"].split(": ", 1)[1]
    [record] = [r for r in _records() if regex.search(str(r["messagePattern"]), message)]
    assert record["errorClass"] == "ValueError"
    [fix] = record["solutions"]
    assert str(fix).startswith("Make the GPUs visible to the server: nvidia-smi inside its "
                               "container")


def test_the_machine_rules_name_only_their_checks() -> None:
    from matcher.catalog import torch_check_remedies as rules

    ruled = [r for r in _records() if rules.remedy_for(r["errorMessage"]) is not None]
    assert sorted(r["errorMessage"][:30] for r in ruled) == sorted([
        "CUDA is not available", "FlashAttention only supports A", ("ProcessGroupNCCL is only "
        "suppo"), "_convert_weight_to_int4pack_cu", "_weight_int4pack_mm_cuda is on",
        "torch._scaled_mm is only suppo"])
    # the CPU-only build's `CUDA is not available` (StorageSharing's `#else` of USE_CUDA) is no
    # shared-memory failure: the area's words are replaced
    cpu = next(r for r in ruled if r["errorMessage"] == "CUDA is not available")
    assert not any("--shm-size" in s for s in cpu["solutions"])
    # a written record is given the rule's words once
    again = dict(cpu)
    assert rules.apply(again) and again["documentation"] == cpu["documentation"]
