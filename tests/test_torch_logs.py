"""torch's own C++ log lines (`matcher.catalog.torch_log_sites`, `matcher.catalog.torch_logs`)
and their records.

The reader is checked on torch's source as the 2.6.0 release holds it (the snippets below are
copied from the files named); the shipped records on lines users pasted into public threads,
with their URLs (all of the field corpus's train split or the healthy corpus).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import regex
from generated_layer import engine_of, scan

from matcher.catalog.cpp_checks import Hole
from matcher.catalog.torch_log_sites import log_sites
from matcher.catalog.torch_logs import in_scope, searched_parts

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "patterns" / "sglang" / "generated" / "torch-logs.jsonl"

# torch 2.6.0, torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:606 (`checkTimeout`, abridged)
# and :1575 (`terminateProcess` and its one caller's message, abridged).
NCCL_2_6_0 = r"""
bool ProcessGroupNCCL::WorkNCCL::checkTimeout(
    std::optional<std::chrono::milliseconds> timeout) {
  std::string exceptionMsg = c10::str(
      logPrefix(),
      "Watchdog caught collective operation timeout: ",
      *this,
      " ran for ",
      timeElapsed.count(),
      " milliseconds before timing out.");

  LOG(ERROR) << exceptionMsg;
  return true;
}
void ProcessGroupNCCL::terminateProcess(const std::string& errMsg) {
  LOG(FATAL) << logPrefix() << errMsg;
}
std::string ProcessGroupNCCL::getNCCLWatchdogTimeoutExitMsg(
    const std::string& exitReason) {
  return c10::str(
      logPrefix(),
      "Terminating the process after attempting to dump debug info, due to ",
      exitReason,
      ".");
}
void ProcessGroupNCCL::heartbeatMonitor() {
  std::string exitReason;
  exitReason = "collective timeout or exception";
  terminateProcess(getNCCLWatchdogTimeoutExitMsg(exitReason));
}
"""

# torch 2.6.0, torch/csrc/distributed/c10d/ProcessGroupGloo.cpp:142 and :799 (abridged)
GLOO_2_6_0 = r"""
void logAndThrow(
    const std::string& logMessage,
    const std::string& errorMessage) {
  LOG(ERROR) << logMessage;
  TORCH_CHECK(false, errorMessage);
}
void ProcessGroupGloo::ProcessGroupGloo() {
    try {
      context->connectFullMesh(store, options_->devices[i]);
    } catch (const std::runtime_error& e) {
      auto err = e.what();
      auto msg = c10::str("Gloo connectFullMesh failed with ", err);
      logAndThrow(msg, msg);
    }
}
"""

# torch 2.6.0, torch/csrc/distributed/c10d/TCPStore.cpp:121 and socket.cpp:517, :573
C10D_2_6_0 = r"""
  template <typename T>
  T receiveValue() {
    try {
      return tcputil::recvValue<T>(socket_.handle());
    } catch (const std::exception& e) {
      C10D_WARNING("recvValue failed on {}: {}", socket_.repr(), e.what());
      throw;
    }
  }
  template <typename... Args>
  void recordError(fmt::string_view format, Args&&... args) {
    auto msg = fmt::vformat(format, fmt::make_format_args(args...));

    C10D_WARNING(msg);

    errors_.emplace_back(std::move(msg));
  }
  bool SocketListenOp::tryListen(int family) {
    if (err != 0) {
      recordError(
          "The server socket has failed to bind to {} {}.", addr, err);
    }
  }
"""


def _texts(sites) -> dict[str, object]:  # type: ignore[no-untyped-def]
    return {"".join(p if isinstance(p, str) else "{}" for p in s.parts): s for s in sites}


def test_a_message_made_before_its_log_statement_is_read_where_it_is_made() -> None:
    found = _texts(log_sites(NCCL_2_6_0, "ProcessGroupNCCL.cpp"))
    timeout = found["{}Watchdog caught collective operation timeout: {} ran for {} milliseconds "
                    "before timing out."]
    assert (timeout.level, timeout.severity, timeout.function) == (  # type: ignore[attr-defined]
        "ERROR", "error", "checkTimeout")
    # A parameter, from what the file's one call passes: a function's one `return`.
    fatal = found["{}{}Terminating the process after attempting to dump debug info, due to "
                  "collective timeout or exception."]
    assert fatal.level == "FATAL" and fatal.line == 16  # type: ignore[attr-defined]


def test_a_helper_that_logs_its_argument_gives_its_callers_messages() -> None:
    (site,) = log_sites(GLOO_2_6_0, "ProcessGroupGloo.cpp")
    assert site.parts == ("Gloo connectFullMesh failed with ", Hole("e.what()"))
    assert site.function == "logAndThrow" and site.macro == "LOG(ERROR)"


def test_c10d_macros_format_their_arguments() -> None:
    sites = log_sites(C10D_2_6_0, "TCPStore.cpp")
    assert [s.parts for s in sites] == [
        ("recvValue failed on ", Hole("socket_.repr()"), ": ", Hole("e.what()")),
        ("The server socket has failed to bind to ", Hole("value"), " ", Hole("value"), "."),
    ]
    assert {s.severity for s in sites} == {"warning"}


# torch 2.6.0, torch/csrc/distributed/c10d/FlightRecorder.cpp:117
FLIGHT_RECORDER_2_6_0 = r"""
  if (!file.is_open()) {
    LOG(ERROR) << "Error opening file for writing NCCLPG debug info: "
               << filename_;
    return;
  }
  LOG(INFO) << "Finished writing NCCLPG debug info to " << filename_;
"""


def test_info_lines_are_not_read() -> None:
    (site,) = log_sites(FLIGHT_RECORDER_2_6_0, "FlightRecorder.cpp")
    assert site.parts == ("Error opening file for writing NCCLPG debug info: ", Hole("filename_"))
    assert (site.line, site.level) == (3, "ERROR")


def test_what_is_searched_starts_at_a_long_literal() -> None:
    parts = ("Rank ", Hole("rank_"), " Failed to retrieve TORCH_NCCL_DESYNC_DEBUG report. ",
             Hole("e.what()"))
    assert searched_parts(parts) == (parts[2].lstrip(), parts[3])
    assert searched_parts(("Out of range: ", Hole("e.what()"))) is None  # too little to tell
    assert searched_parts(("Stack trace of the failed collective: \n", Hole("tb"))) == (
        "Stack trace of the failed collective:",)


def test_the_tree_read_is_the_distributed_and_cuda_runtime() -> None:
    assert in_scope("pytorch-v2.6.0/torch/csrc/distributed/c10d/TCPStore.cpp")
    assert in_scope("pytorch-v2.6.0/c10/cuda/CUDACachingAllocator.cpp")
    assert in_scope("pytorch-v2.6.0/torch/csrc/CudaIPCTypes.cpp")
    assert in_scope("pytorch-v2.6.0/torch/csrc/distributed/c10d/ProcessGroupUCC.cpp") is None
    assert in_scope("pytorch-v2.6.0/torch/csrc/jit/runtime/interpreter.cpp") is None


def _records() -> list[dict[str, object]]:
    return [json.loads(line) for line in GENERATED.read_text(encoding="utf-8").splitlines()]


def test_the_shipped_records_are_log_records_of_torch() -> None:
    records = _records()
    assert len(records) > 80
    assert {r["generator"] for r in records} == {"matcher.catalog.torch_logs"}
    assert {r["errorType"] for r in records} == {"log"}
    assert {r["severity"] for r in records} == {"error", "warning"}
    assert all(str(r["githubUrl"]).startswith("https://github.com/pytorch/pytorch/blob/v2.6.0/")
               for r in records)
    assert len({r["messagePattern"] for r in records}) == len(records)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return engine_of(tmp_path_factory.mktemp("torch-logs"), ("torch-logs.jsonl",))


# Lines users pasted, with the thread each is from.
PASTED = {
    # https://github.com/gpustack/gpustack/issues/3383
    "recv": "[rank1]:[W1119 17:59:26.271588084 TCPStore.cpp:125] [c10d] recvValue failed on "
            "SocketImpl(fd=61, addr=[localhost]:33850, remote=[localhost]:30005): Failed to "
            "recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or "
            "crash?",
    # https://github.com/sgl-project/sglang/issues/3226
    "gloo": "[rank10]:[E130 18:11:34.707542570 ProcessGroupGloo.cpp:143] Gloo connectFullMesh "
            "failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
    # https://github.com/sgl-project/sglang/issues/10216
    "trace": "[rank1]:[E909 08:45:30.126354868 ProcessGroupNCCL.cpp:732] Stack trace of the "
             "failed collective not found, potentially because FlightRecorder is disabled. You "
             "can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.",
    # https://github.com/sgl-project/sglang/issues/2561 (the healthy corpus: start-up retries)
    "ipv6": "[W1226 15:35:11.626067741 socket.cpp:752] [c10d] The client socket cannot be "
            "initialized to connect to [sws-8h100grid-05.mpi-sws.org]:8000 (errno: 97 - Address "
            "family not supported by protocol).",
    # https://github.com/sgl-project/sglang/issues/7478 (a curated record speaks for it)
    "wait": "[rank1]:[W623 15:37:01.824135523 socket.cpp:485] [c10d] waitForInput: socket "
            "SocketImpl(fd=100, addr=[node-0.company.net]:43590, remote=[node-0.company.net]:"
            "20000) timed out after 1800000ms",
}


def _one(engine, key: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    (event,) = scan(engine, PASTED[key] + "\n")
    return event


def test_a_store_peer_that_went_away_is_torch_s_warning(engine) -> None:  # type: ignore[no-untyped-def]
    event = _one(engine, "recv")
    assert event["severity"] == "warning"
    assert event["remediation"]["url"].endswith("torch/csrc/distributed/c10d/TCPStore.cpp#L125")
    assert event["captures"]["e"].startswith("Failed to recv, got 0 bytes.")
    assert event["remediation"]["solutions"] == []


def test_a_message_that_names_its_setting_carries_it(engine) -> None:  # type: ignore[no-untyped-def]
    event = _one(engine, "trace")
    assert event["severity"] == "error"
    assert "`printTraceback()`" in event["remediation"]["documentation"]
    assert any("TORCH_NCCL_TRACE_BUFFER_SIZE" in s for s in event["remediation"]["solutions"])


def test_a_start_up_retry_is_a_warning_not_an_alarm(engine) -> None:  # type: ignore[no-untyped-def]
    event = _one(engine, "ipv6")
    assert event["severity"] == "warning"
    assert event["remediation"]["url"].endswith("socket.cpp#L759")


@pytest.mark.parametrize(("key", "curated"), [("wait", "0a3d73d9be6f0b31"),
                                             ("gloo", "f070de8edbead7fb")])
def test_a_curated_record_speaks_for_a_line_torch_s_record_also_matches(  # type: ignore[no-untyped-def]
        engine, key: str, curated: str) -> None:
    # torch's records have more literal text (and match: `Gloo connectFullMesh failed with`,
    # logged by `logAndThrow()`); the curated record, written for sglang, says what to do.
    event = _one(engine, key)
    assert event["pattern_id"] == curated
    torch_record = next(r for r in _records() if str(r["errorMessage"]).startswith(
        "Gloo connectFullMesh" if key == "gloo" else "[c10d] waitForInput: socket "))
    assert torch_record["severity"] == ("error" if key == "gloo" else "warning")
    assert regex.search(str(torch_record["messagePattern"]), PASTED[key])
