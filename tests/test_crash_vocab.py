"""Closed vocabularies answered per event: the signal a child's exit status names
(`matcher.catalog.exit_status`) and the OS error number of `[Errno N] …`
(`matcher.catalog.errno_vocab`). The lines are real: sglang's watchdog messages formatted with
the exit codes of children killed here, and errno lines pasted in train-split threads
(tests/fixtures/crashvocab/README.md names them)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from field_recall import is_pointer, scan  # noqa: E402

from matcher.catalog import Catalog, errno_vocab, exit_status, load_catalog  # noqa: E402
from matcher.engine import Engine  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "crashvocab"
ERRNO_RECORD = "b9035291ac66c7d9"
WATCHDOG = "98ecd7edd5765c66"
TERMINATED = "9c27cac1c2012fae"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def engine(catalog: Catalog) -> Engine:
    return Engine(catalog.records)


def scanned(engine: Engine, catalog: Catalog, tmp_path: Path, text: str) -> list[dict[str, Any]]:
    path = tmp_path / "server.log"
    path.write_text(text)
    return scan(engine, catalog, path)


def _kill_self(signum: int) -> None:
    os.kill(os.getpid(), signum)


def _exitcode_of_child_killed_by(signum: int) -> int:
    """multiprocessing.Process.exitcode of a child that `signum` ended, as sglang reads it."""
    child = multiprocessing.get_context("spawn").Process(target=_kill_self, args=(signum,))
    child.start()
    child.join(60)
    assert child.exitcode is not None
    return child.exitcode


def test_the_pipeline_looks_for_the_captures_the_vocabularies_read():
    from matcher import pipeline

    assert set(exit_status.CAPTURES) == pipeline._EXIT_STATUS
    assert pipeline._OS_ERRNO == errno_vocab.CAPTURE


def test_python_and_shells_give_a_signal_as_the_vocabulary_reads_it():
    code = _exitcode_of_child_killed_by(signal.SIGKILL)
    assert code == -9 and exit_status.signal_of(str(code))[0] == 9
    shell = subprocess.run(["sh", "-c", "sh -c 'kill -9 $$'; exit $?"], check=False)
    assert shell.returncode == 137 and exit_status.signal_of("137")[0] == 9
    direct = subprocess.run(["sh", "-c", "kill -11 $$"], check=False)
    assert direct.returncode == -11 and exit_status.signal_of("-11")[0] == 11
    # a status a program chose says nothing general
    assert [exit_status.signal_of(s) for s in ("0", "1", "2", "128", "255", "x")] == [None] * 6


@pytest.mark.parametrize("status,name,says", [
    ("-9", "SIGKILL", "OOM killer"),
    ("137", "SIGKILL", "OOM killer"),
    ("-11", "SIGSEGV", "Fatal Python error: Segmentation fault"),
    ("-6", "SIGABRT", "terminate called after throwing"),
    ("-7", "SIGBUS", "--shm-size"),
    ("-15", "SIGTERM", "kubectl describe pod"),
])
def test_each_signal_says_its_name_and_what_to_do(status, name, says):
    meaning, what_to_do = exit_status.answer(status)
    assert name in meaning and says in what_to_do


def test_a_signal_without_general_advice_is_named_only():
    assert exit_status.answer("-10") == (("Exit status -10 (Python's way of saying signal 10 "
                                          "ended it): SIGUSR1."), None)


def test_a_watchdog_line_alone_is_the_cause_with_its_signal_answered(engine, catalog, tmp_path):
    """The child killed by SIGKILL prints nothing; the watchdog's line is the first fact."""
    code = _exitcode_of_child_killed_by(signal.SIGKILL)
    text = (f"[2026-01-01 12:00:00] Subprocess scheduler_0 (pid=4187) crashed with exit code {code}. "
            "Triggering SIGQUIT for cleanup...\n"
            "[2026-01-01 12:00:00] SIGQUIT received. signum=3, frame=<frame at 0x7f3c2c1e5a40, file "
            "'/usr/lib/python3.12/selectors.py', line 468, code select>. It usually means one child failed.\n")
    (event,) = scanned(engine, catalog, tmp_path, text)
    assert (event["pattern_id"], event["role"]) == (WATCHDOG, "cause")
    assert event["consequences"][0].startswith("SIGQUIT received.")
    remediation = event["remediation"]
    assert remediation["documentation"].startswith("Exit status -9 (Python's way")
    assert "SIGKILL" in remediation["documentation"]
    assert "dmesg" in remediation["solutions"][0] and not is_pointer(remediation["solutions"][0])


def test_a_status_that_is_no_signal_keeps_the_records_words(engine, catalog, tmp_path):
    text = "[2026-01-01 12:00:00] Scheduler or DataParallelController 4187 terminated with 1\n"
    (event,) = scanned(engine, catalog, tmp_path, text)
    assert event["pattern_id"] == TERMINATED
    assert event["remediation"]["solutions"] == catalog.by_id(TERMINATED).remediation()["solutions"]


@pytest.mark.parametrize("line,says", [
    (0, "HF_HOME"),
    (1, "chown"),
    (3, "ulimit -n"),
    (4, "HF_HUB_OFFLINE=1"),
])
def test_errno_lines_from_threads_get_their_numbers_answer(engine, catalog, tmp_path, line, says):
    text = (FIXTURES / "errno-lines.log").read_text().splitlines()[line] + "\n"
    (event,) = scanned(engine, catalog, tmp_path, text)
    assert (event["pattern_id"], event["role"]) == (ERRNO_RECORD, "cause")
    assert says in event["remediation"]["solutions"][0]


def test_errno_lines_with_a_record_of_their_own_keep_it(engine, catalog, tmp_path):
    # pip's own `Could not install packages due to an OSError: [Errno 28] …` (line 2) too
    pip = (FIXTURES / "errno-lines.log").read_text().splitlines()[2]
    text = ("OSError: [Errno 98] Address already in use\n"
            "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'\n" + pip + "\n")
    events = scanned(engine, catalog, tmp_path, text)
    assert ERRNO_RECORD not in {e["pattern_id"] for e in events}
    assert len(events) == 3


def test_an_errno_outside_the_vocabulary_is_recognized_without_a_made_up_fix(engine, catalog, tmp_path):
    line = f"OSError: {OSError(1234, os.strerror(1234))}\n"  # as Python prints it here
    (event,) = scanned(engine, catalog, tmp_path, line)
    assert event["pattern_id"] == ERRNO_RECORD
    assert event["remediation"]["solutions"] == []
    assert errno_vocab.answer("1234") is None and errno_vocab.answer("x") is None


def test_no_match_for_text_without_an_errno_or_quoting_one_in_a_retry(engine, catalog, tmp_path):
    text = "Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)\n"
    assert ERRNO_RECORD not in {e["pattern_id"] for e in scanned(engine, catalog, tmp_path, text)}
    launch = ROOT / "tests" / "fixtures" / "sglang" / "launch" / "model_path_hf_repo_offline.log"
    retries = [line for line in launch.read_text().splitlines() if "thrown while requesting" in line]
    assert len(retries) == 12  # huggingface_hub retried, then gave up: one failure, not twelve
    found = scanned(engine, catalog, tmp_path, "\n".join(retries) + "\n")
    assert ERRNO_RECORD not in {e["pattern_id"] for e in found}
