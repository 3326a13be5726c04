"""The native failures' records (`matcher.catalog.native`): the library strings they come from,
the catalog they make, and real lines they recognize.

Real text only: the status strings were read by calling the libraries (`native_vocab`; where a
library is on this machine, a test calls it again), and the log lines are lines users pasted in
public threads of the field corpus' train split (each with its URL)."""

from __future__ import annotations

import ctypes
import glob
import json
from pathlib import Path

import pytest
import regex
from generated_layer import engine_of, scan

from matcher.catalog import load_catalog, native
from matcher.catalog.check import frame_text
from matcher.catalog.native_vocab import Entry, cuda_runtime, read_tsv
from matcher.catalog.stats import render, summarize
from matcher.engine import Engine

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "patterns" / "sglang" / "generated"
FIELD = ROOT / "tests" / "fixtures" / "field"


@pytest.fixture(scope="module")
def vocab() -> list[Entry]:
    return read_tsv(GENERATED / "native.vocab.tsv")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """The curated layer and the native records, as the built-in catalog holds them."""
    return engine_of(tmp_path_factory.mktemp("builtin"), ("native.jsonl",))


def by_slug(engine: Engine) -> dict[str, str]:
    return {r.id: r.slug for r in engine.records}


# -- the vocabulary ------------------------------------------------------------------------------

def test_the_vocabulary_holds_what_the_libraries_return(vocab: list[Entry]) -> None:
    """Strings obtained by calling cudaGetErrorString, ncclGetErrorString, cublasGetStatusName
    and cudnnGetErrorString of the packages named, at their codes."""
    rows = {(e.family, e.version, e.code): (e.name, e.text) for e in vocab}
    assert rows["cuda", "12.4", 700] == ("cudaErrorIllegalAddress",
                                         "an illegal memory access was encountered")
    assert rows["cuda", "11.8", 209][1] == \
        "no kernel image is available for execution on the device"
    assert rows["cuda", "13.0", 802] == ("cudaErrorSystemNotReady", "system not yet initialized")
    assert ("cuda", "11.8", 226) not in rows  # cudaErrorContained came with CUDA 12
    assert rows["nccl", "2.21.5", 2][1] == \
        "unhandled system error (run with NCCL_DEBUG=INFO for details)"
    assert rows["cublas", "12.8.4", 13][0] == "CUBLAS_STATUS_EXECUTION_FAILED"
    assert rows["cudnn", "8.9.2", 9][0] == "CUDNN_STATUS_NOT_SUPPORTED"
    assert rows["cudnn", "9.10.2", 3000][0] == "CUDNN_STATUS_NOT_SUPPORTED"
    texts = {(e.family, e.text) for e in vocab}
    assert ("hip", "no ROCm-capable device is detected") in texts
    assert ("nccl-warn", "Call to ibv_modify_qp failed with error %s errno %d") in texts
    assert ("nvshmem", "ibv_modify_qp failed") in texts


def _libcudart() -> str | None:
    found = sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so.[0-9]*"))
    return found[-1] if found else None


@pytest.mark.skipif(_libcudart() is None, reason="no CUDA runtime library on this machine")
def test_the_cuda_runtime_here_says_what_the_vocabulary_says(vocab: list[Entry]) -> None:
    path = _libcudart()
    assert path is not None
    try:
        here = cuda_runtime(path)
    except (OSError, RuntimeError) as e:  # a runtime that needs a driver to tell its version
        pytest.skip(str(e))
    version = here[0].version
    ours = {(e.code, e.name, e.text) for e in vocab if e.family == "cuda" and e.version == version}
    if not ours:
        pytest.skip(f"CUDA {version} is not among the versions read")
    assert {(e.code, e.name, e.text) for e in here} == ours
    lib = ctypes.CDLL(path)
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    assert lib.cudaGetErrorString(700) == b"an illegal memory access was encountered"


# -- the catalog ---------------------------------------------------------------------------------

def test_the_committed_catalog_is_what_the_generator_writes(tmp_path: Path) -> None:
    records, left = native.build()
    out = tmp_path / "native.jsonl"
    native.write(records, out)
    assert out.read_bytes() == (GENERATED / "native.jsonl").read_bytes(), \
        "run `python -m matcher.catalog.native` and commit its output"
    # Strings a curated record recognizes are left to it.
    assert "cuda: an illegal memory access was encountered" in left


def test_every_record_is_attributed_and_says_what_happened() -> None:
    for line in (GENERATED / "native.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert rec["generator"] == "matcher.catalog.native"
        assert rec["sourcePackage"]
        assert rec["documentation"]
        if rec["sourcePackage"] in ("cuda-runtime", "nccl", "cublas", "cudnn", "hip-runtime"):
            assert rec["sourceVersions"], rec["slug"]


def test_a_status_is_attributed_to_the_versions_that_print_it() -> None:
    records = {r["slug"]: r for r in native.build()[0]}
    # cudaErrorContained (226) is not in 12.6's runtime, and is in 12.8's
    contained = records["cuda-invalid-access-of-peer-gpu-memory-over-nvlink-or"]
    assert contained["sourceVersions"] == ["12.8..13.0"]
    assert records["cuda-invalid-argument"]["sourceVersions"] == ["11.8..13.0"]
    assert records["cudnn-cudnn-status-alloc-failed"]["sourceVersions"] == ["8.9.2"]


def test_stats_count_records_per_source_and_generator() -> None:
    catalog = load_catalog(builtin=False, user_paths=[GENERATED / "native.jsonl"])
    summary = summarize(catalog.records)
    n, span = summary.by_source["cuda-runtime"]
    assert span == "11.8..13.0" and n > 100
    assert summary.by_source["nccl"][1] == "2.21.5..2.27.3"
    assert summary.by_generator == {"matcher.catalog.native": len(catalog.records)}
    text = render(summary)
    assert "records per source" in text and "matcher.catalog.native" in text


# -- real lines ----------------------------------------------------------------------------------

def test_a_glog_error_line_is_recognized_with_its_place(engine: Engine) -> None:
    # https://github.com/vllm-project/vllm-ascend/issues/4866 (train)
    line = ("E1210 03:24:54.778028 2548307 ascend_direct_transport.cpp:820] Failed to connect to "
            "target: 172.16.100.99:25389, status: 103900")
    [event] = scan(engine, line + "\n")
    assert by_slug(engine)[event["pattern_id"]] == "glog-error-line"
    assert event["severity"] == "error"
    assert event["captures"]["file"] == "ascend_direct_transport.cpp"
    assert event["captures"]["line"] == "820"
    assert event["captures"]["message"].startswith("Failed to connect to target")
    # The same line at level I is no failure.
    assert scan(engine, "I" + line[1:] + "\n") == []


def test_nvshmem_ibv_modify_qp_is_recognized_with_what_to_do(engine: Engine) -> None:
    lines = [
        # https://github.com/sgl-project/sglang/issues/9813 (train)
        ("/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status: 22 "
        "ibv_modify_qp failed"),
        # https://github.com/NVIDIA/nvshmem/issues/42 (train)
        ("main_nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status: 22 "
        "ibv_modify_qp failed."),
    ]
    for line in lines:
        [event] = scan(engine, line + "\n")
        assert by_slug(engine)[event["pattern_id"]] == "nvshmem-ibv-modify-qp-failed"
        assert event["captures"]["line"] == "420" and event["captures"]["status"] == "22"
        assert any("NVSHMEM_IB_GID_INDEX" in s for s in event["remediation"]["solutions"])
    # https://github.com/sgl-project/sglang/issues/9813 (train)
    [event] = scan(engine, "/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:1511: "
                           "non-zero status: 7 ep_connect failed\n")
    assert by_slug(engine)[event["pattern_id"]] == "nvshmem-ep-connect-failed"


def test_an_uncaught_cpp_exception_is_one_record_with_its_what_line(engine: Engine) -> None:
    # https://github.com/sgl-project/sglang/issues/7639 (train)
    text = (
        'terminate called after throwing an instance of \'xgrammar::LoggingError\'\n'
        '  what():  [05:18:39] /project/cpp/support/recursion_guard.h:33: RecursionGuard: '
        'Maximum recursion depth exceeded. Current depth: 1025, Max allowed: 1024\n'
        '\n'
        'Fatal Python error: Aborted\n'
        '\n'
        'Thread 0x00007fe473fff640 (most recent call first):\n'
        '  File "/usr/local/lib/python3.10/dist-packages/xgrammar/compiler.py", line 135 in '
        'compile_json_schema\n'
    )
    records = [r for r in frame_text(text) if r.header or r.exceptions]
    terminate = records[0]
    assert terminate.header.startswith("terminate called after throwing")
    [exc] = terminate.exceptions
    assert exc.error_class == "xgrammar.LoggingError"
    assert "RecursionGuard: Maximum recursion depth exceeded" in exc.message
    assert "Fatal Python error" not in exc.message
    events = scan(engine, text)
    slugs = [by_slug(engine)[e["pattern_id"]] for e in events]
    # xgrammar's own terminate record; faulthandler's abort line is the end of that failure
    assert slugs == ["cpp-terminate-xgrammar-exception"]
    assert events[0]["consequences"] == ["Fatal Python error: Aborted"]
    assert events[0]["error_class"] == "xgrammar.LoggingError"
    assert "RecursionGuard" in events[0]["traceback"]


def test_a_terminate_line_without_its_what_line_closes_at_the_next_line() -> None:
    text = ("terminate called after throwing an instance of 'c10::Error'\n"
            "Fatal Python error: Aborted\n")
    records = frame_text(text)
    assert records[0].exceptions == ()
    assert records[1].header == "Fatal Python error: Aborted"


def test_the_watchdog_cause_inside_what_still_wins(engine: Engine) -> None:
    """A curated record of the exception's message ranks ahead of the terminate family, which
    matched only the record's first line."""
    path = ROOT / "tests/fixtures/field/distributed-build/1693-watchdog-allgather-timeout.log"
    events = scan(engine, path.read_text())
    slugs = {by_slug(engine)[e["pattern_id"]] for e in events if e.get("pattern_id")}
    assert "cpp-terminate-uncaught-exception" not in slugs
    assert any(e["error_class"].endswith("DistBackendError") for e in events)


def test_a_rust_panic_is_recognized_with_its_place_and_message(engine: Engine) -> None:
    # https://github.com/aarroyoc/scryer-playground/issues/45 (train)
    text = ("thread 'main' panicked at src/machine/system_calls.rs:4033:26:\n"
            "we should only get valid values != YF here\n"
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n")
    [event] = scan(engine, text)
    assert by_slug(engine)[event["pattern_id"]] == "rust-thread-panicked"
    assert event["captures"] == {"thread": "main", "file": "src/machine/system_calls.rs",
                                 "line": "4033", "column": "26"}
    [record] = frame_text(text)[:1]
    assert record.exceptions[0].message == "we should only get valid values != YF here"


def test_a_panic_with_the_threads_id_and_a_backtrace_is_one_record(engine: Engine) -> None:
    # sglang-router 0.3.2 run here (tests/fixtures/router-runs/0.3.2/prometheus-host-not-local.log):
    # newer Rust prints the thread's id after its name, and the launcher sets RUST_BACKTRACE
    text = ("\nthread '<unnamed>' (14157) panicked at /home/runner/" + "work/sglang/sglang/src/"
            "observability/metrics.rs:360:10:\n"
            "failed to install Prometheus metrics exporter: FailedToCreateHTTPListener("
            "\"Cannot assign requested address (os error 99)\")\n"
            "stack backtrace:\n"
            "   0: __rustc::rust_begin_unwind\n"
            "   3: smg::observability::metrics::start_prometheus\n"
            "  11: method_vectorcall_NOARGS\n"
            "             at /tmp/python-build/Python-3.11.7/Objects/descrobject.c:453:24\n"
            "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose "
            "backtrace.\n")
    [record] = frame_text(text)
    assert record.exceptions[0].message == (
        "failed to install Prometheus metrics exporter: FailedToCreateHTTPListener("
        "\"Cannot assign requested address (os error 99)\")")
    # one event: the message's own record (curated) wins over the header's shape
    [event] = scan(engine, text)
    assert by_slug(engine)[event["pattern_id"]] == "router-prometheus-listener-failed"
    header = text.splitlines()[1]
    [shape] = [r for r in engine.records if r.slug == "rust-thread-panicked"]
    found = regex.search(shape.message_pattern, header)
    assert found and found.group("thread") == "<unnamed>" and found.group("line") == "360"


def test_a_c_assertion_is_recognized_with_its_place(engine: Engine) -> None:
    # https://github.com/triton-lang/triton/issues/613 (train)
    line = ("fbcode/third-party-buck/platform010/build/libgcc/include/c++/trunk/bits/stl_vector.h"
            ":1045: std::vector::reference std::vector<triton::codegen::analysis::align::cst_info>"
            "::operator[](std::vector::size_type) [_Tp = triton::codegen::analysis::align::"
            "cst_info, _Alloc = std::allocator<triton::codegen::analysis::align::cst_info>]: "
            "Assertion '__n < this->size()' failed.")
    [event] = scan(engine, line + "\n")
    assert by_slug(engine)[event["pattern_id"]] == "c-assertion-failed"
    assert event["captures"]["line"] == "1045"
    assert event["captures"]["condition"] == "__n < this->size()"


def test_xid_and_amdgpu_kernel_lines(engine: Engine) -> None:
    # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151 (train): behind syslog's
    # prefix, which the wrappers take off with `NVRM: `.
    [event] = scan(engine, "May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has "
                           "fallen off the bus.\n")
    assert by_slug(engine)[event["pattern_id"]] == "nvidia-xid-79"
    assert event["severity"] == "critical" and event["remediation"]["solutions"]
    # https://github.com/ROCm/amdgpu/issues/172 (train)
    text = ("[ 4778.915423] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 "
            "ring:24 vmid:3 pasid:32769)\n"
            "[ 4778.917054] amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031\n")
    slugs = [by_slug(engine)[e["pattern_id"]] for e in scan(engine, text)]
    assert slugs == ["amdgpu-page-fault", "amdgpu-vm-l2-protection-fault"]


def test_cuda_status_strings_as_the_field_prints_them(engine: Engine) -> None:
    # https://github.com/sgl-project/sglang/issues/… in tests/fixtures/field/gpu (train): the
    # custom all-reduce's runtime check
    line = ("Exception: Capture cuda graph failed: Runtime check failed at /sgl-workspace/sglang/"
            "python/sglang/jit_kernel/include/sgl_kernel/distributed/custom_all_reduce.cuh:37: "
            "CUDA error: invalid argument")
    [event] = scan(engine, line + "\n")
    assert event["pattern_id"] is not None
    # torch's own form of the same status (c10's `CUDA error: ` + cudaGetErrorString)
    [event] = scan(engine, "RuntimeError: CUDA error: invalid argument\n")
    assert by_slug(engine)[event["pattern_id"]] == "cuda-invalid-argument"
    # The generic string alone, with no CUDA caller in front, is not a CUDA error.
    assert scan(engine, "ValueError: invalid argument\n")[0].get("pattern_id") is None


def test_tritons_lead_is_a_caller_in_front_of_a_cuda_status(engine: Engine) -> None:
    """triton's launcher prints `Triton Error [CUDA]: ` + cuGetErrorString; no word boundary
    follows its `]` (https://github.com/sgl-project/sglang/issues/10570, train)."""
    [event] = scan(engine, "RuntimeError: Triton Error [CUDA]: unspecified launch failure\n")
    assert by_slug(engine)[event["pattern_id"]] == "cuda-unspecified-launch-failure"
    assert event["remediation"]["solutions"]


def test_a_status_left_to_a_curated_record_is_matched_by_it(engine: Engine) -> None:
    slugs = by_slug(engine)
    layers = {r.id: r.layer for r in engine.records}
    [event] = scan(engine, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert layers[event["pattern_id"]] == "curated"
    [event] = scan(engine, "RuntimeError: CUDA error: misaligned address\n")
    assert slugs[event["pattern_id"]] == "cuda-misaligned-address"
    assert {"op": "env", "name": "CUDA_LAUNCH_BLOCKING", "value": "1"} in \
        event["remediation"]["fix_actions"][0]


def test_printf_formats_become_patterns() -> None:
    pattern = native.printf_pattern("Call to ibv_modify_qp failed with error %s errno %d")
    import regex
    m = regex.search(pattern, "NCCL WARN Call to ibv_modify_qp failed with error No such device "
                              "errno 19")
    assert m is not None and m.groups() == ("No such device", "19")


def test_an_nccl_warn_line_the_record_calls_an_error_is_an_error(engine: Engine) -> None:
    """NCCL prints its fatal connection failures at WARN: a native record's severity stands."""
    # https://github.com/sgl-project/sglang/issues/3820 (train, tests/fixtures/field/sglang-a)
    line = ("node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to "
            "10.0.0.4<56849> returned 113(No route to host) errno 115(Operation now in progress)")
    [event] = scan(engine, line + "\n")
    # The curated record of this line says more than the status would: the status is left to it.
    assert by_slug(engine)[event["pattern_id"]] == "nccl-socket-connect-failed"
    assert event["event"] == "sglang_error" and event["severity"] in ("error", "critical")
    assert event["captures"]["address"] == "10.0.0.4"
    assert any("NCCL_SOCKET_IFNAME" in s for s in event["remediation"]["solutions"])
    # The status record is kept for the lines the curated one does not read; on this line a
    # curated record speaks for a dependency's record whatever their lengths (engine).
    assert any(r["slug"].startswith("nccl-warn-socketpollconnect-connect")
               for r in native.build()[0])


def test_lines_from_more_train_threads(engine: Engine) -> None:
    slugs = by_slug(engine)
    # https://github.com/gpustack/gpustack/issues/5553 (train): two ranks' lines interleaved
    [event] = scan(engine, "Fatal Python error: Fatal Python error: Segmentation faultSegmentation "
                           "fault\n")
    assert slugs[event["pattern_id"]] == "python-fatal-error-segmentation-fault"
    # https://github.com/sgl-project/sglang/issues/7450 (train)
    [event] = scan(engine, "/sgl-workspace/nvshmem/src/host/team/team.cu:nvshmem_team_split_"
                           "strided:63: NVSHMEM API called before NVSHMEM initialization has "
                           "completed\n")
    assert slugs[event["pattern_id"]].startswith("nvshmem-msg-nvshmem-api-called-before")
    assert event["remediation"]["solutions"]
    # https://github.com/sgl-project/sglang/issues/6694 (train)
    [event] = scan(engine, "[ubuntu-GPU-L40S-4802111:12796:1:13303] Caught signal 11 "
                           "(Segmentation fault: invalid permissions for mapped object at address "
                           "0x7fbd60001400)\n")
    assert slugs[event["pattern_id"]] == "ucx-caught-signal"
    assert event["captures"]["signal"] == "11"


def test_a_hip_line_gets_rocms_tools_and_a_cuda_line_nvidias(engine: Engine) -> None:
    """The texts HIP prints as CUDA does: `HIP error: …` is ROCm's record, whose fix names the
    gfx architecture and PYTORCH_ROCM_ARCH; `CUDA error: …` keeps the compute capability."""
    slugs = by_slug(engine)
    # https://github.com/verl-project/verl/issues/3163 (train): an AMD Radeon AI PRO R9700
    path = FIELD / "sglang-h" / "verl-3163-r9700-hip-invalid-device-function.log"
    [event] = scan(engine, path.read_text())
    assert slugs[event["pattern_id"]] == "hip-invalid-device-function"
    solutions = " ".join(event["remediation"]["solutions"])
    assert "rocminfo" in solutions and "PYTORCH_ROCM_ARCH" in solutions
    assert "TORCH_CUDA_ARCH_LIST" not in solutions
    [event] = scan(engine, "RuntimeError: CUDA error: invalid device function\n")
    assert slugs[event["pattern_id"]] == "cuda-invalid-device-function"
    assert "TORCH_CUDA_ARCH_LIST" in " ".join(event["remediation"]["solutions"])


def test_memfabrics_error_lines_under_the_ascend_transfer_engine(engine: Engine) -> None:
    """sglang#10748 (train): PD disaggregation on Ascend; MemFabric Hybrid's first error line is
    why sglang's Ascend transfer engine did not start."""
    path = FIELD / "sglang-h" / "10748-ascend-pd-memfabric-svm-advise-failed.log"
    events = scan(engine, path.read_text())
    first = events[0]
    assert by_slug(engine)[first["pattern_id"]] == "memfabric-error-line"
    assert first["captures"]["module"] == "BM"
    assert first["captures"]["file"] == "devmm_ioctl.cpp"
    assert first["captures"]["message"].startswith("svm advise failed")
