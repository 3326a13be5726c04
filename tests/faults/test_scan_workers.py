"""A worker of `scan -j N` that dies — the kernel's OOM killer, a `kill -9` — does not stop
the scan, and does not hang it: the parent reads the rest itself, the output is `-j 1`'s, and
stderr says what happened. (With `multiprocessing.Pool`, the lost task's result was waited for
forever, without a word.)"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from matcher import parallel
from matcher.scan import scan_events

REPO = Path(__file__).resolve().parents[2]
SAID = "a worker process ended abruptly"

pytestmark = pytest.mark.skipif(not parallel.available(), reason="no fork here")


def _scan(loaded, paths, jobs, seen=None):
    catalog, engine = loaded
    err = io.StringIO()
    scanned = scan_events([str(p) for p in paths], catalog, engine=engine, jobs=jobs,
                          read_size=1024, err=err)
    if seen is not None:
        seen.append(scanned.parallel)
    return scanned.events, scanned.lines, err.getvalue()


@pytest.mark.parametrize("dies_in,inputs", [("_run", "one log"), ("_dicts", "one log"),
                                            ("_run", "small logs")])
def test_a_worker_killed_in_a_task_leaves_the_rest_to_the_parent(loaded, concatenated,
                                                                 real_logs, monkeypatch,
                                                                 dies_in, inputs):
    """A worker SIGKILLs itself in its second reading task, or in the first batch of events
    it makes into dicts: every task and batch not done then is the parent's (which makes
    dicts with the same function, so only a worker dies of it). With every real log as a file
    of its own, most of one read or less, the task it dies in is part of a batch of them
    (`parallel.batches`): the whole batch is the parent's."""
    paths = [concatenated] if inputs == "one log" else real_logs
    events, lines, err = _scan(loaded, paths, 1)
    assert events and not err
    real = getattr(parallel, dies_in)
    calls = parallel.__dict__.setdefault("_test_calls", [0])  # counted in each worker

    here = os.getpid()

    def dying(arg):
        calls[0] += 1
        if os.getpid() != here and (calls[0] == 2 or dies_in == "_dicts"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(arg)

    dying.__qualname__ = dies_in  # handed to the workers by name: theirs is this one too
    dying.__module__ = parallel.__name__
    monkeypatch.setattr(parallel, dies_in, dying)

    def hung(*_):
        pytest.fail("scan -j 2 still waits for its dead worker after 120 s")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        seen = []
        got_events, got_lines, got_err = _scan(loaded, paths, 2, seen)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
        del parallel.__dict__["_test_calls"]
    assert (got_events, got_lines) == (events, lines)
    assert got_err.count(SAID) == 1, got_err
    if dies_in == "_run":
        assert seen[0].reads_here > 0, seen[0]
    if inputs == "small logs":
        assert seen[0].batches < seen[0].tasks, seen[0]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


SCAN = [sys.executable, "-m", "matcher", "scan", "--format", "json", "--no-progress"]
ENV = {**os.environ, "SGLANG_MATCHER_REPEAT_INTERVAL": "0"}


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    """70 MB of the bench generator's log (sglang's own lines, a failure every 300): large
    enough for `scan -j 2` to fork its workers."""
    work = tmp_path_factory.mktemp("big")
    part = work / "part.log"
    subprocess.run([sys.executable, str(REPO / "bench" / "genlog.py"), "-n", "30000", "-o",
                    str(part), "--error-every", "300"], check=True, capture_output=True)
    one = part.read_bytes()
    log = work / "big.log"
    log.write_bytes(one * (70_000_000 // len(one) + 1))
    return log


def _workers(proc: subprocess.Popen, deadline: float) -> list[int]:
    """The command's workers, once they exist: forks of it, with its command line (the
    resource tracker, another child, has its own)."""
    while proc.poll() is None and time.monotonic() < deadline:
        found = [c for c in _children(proc.pid) if _cmdline(c) == _cmdline(proc.pid)]
        if found:
            return found
        time.sleep(0.005)
    return []


def test_a_real_scan_whose_worker_is_killed_ends_with_the_whole_output(big_log):
    """`sglang-matcher scan -j 2` of a 70 MB log, one of its workers killed with SIGKILL as
    soon as it exists: the command ends, by itself, with `-j 1`'s output and exit code, and
    says on stderr what happened."""
    alone = subprocess.run([*SCAN, "-j", "1", str(big_log)], capture_output=True, env=ENV,
                           timeout=300)
    assert alone.returncode == 1 and alone.stdout  # failures found

    proc = subprocess.Popen([*SCAN, "-j", "2", str(big_log)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    workers = _workers(proc, time.monotonic() + 60)
    killed = workers[0] if workers else None
    if killed is not None:
        os.kill(killed, signal.SIGKILL)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("scan -j 2 hung after its worker was killed")
    assert killed is not None, "no worker seen"
    assert SAID.encode() in err, err.decode()[-2000:]
    assert proc.returncode == alone.returncode
    assert out == alone.stdout


def test_ctrl_c_ends_a_scan_and_its_workers_at_once_without_a_traceback(big_log):
    """Ctrl-C at a terminal signals the whole process group, workers included: the command
    ends within seconds with 130 and one line, and no worker is left running."""
    # (SIGINT as a terminal leaves it, whatever this process does with it: an ignored signal
    # stays ignored across exec, and Python then never raises KeyboardInterrupt.)
    default_sigint = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                      "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")
    proc = subprocess.Popen([sys.executable, "-c", default_sigint, *SCAN[1:], "-j", "2",
                             str(big_log)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=ENV, start_new_session=True)
    workers = _workers(proc, time.monotonic() + 60)
    assert workers, "no worker seen"
    time.sleep(0.2)  # into the reading
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("scan -j 2 did not end on Ctrl-C")
    assert proc.returncode == 130, err.decode()[-2000:]
    assert err.decode().strip().splitlines()[-1] == "sglang-matcher: interrupted"
    assert b"Traceback" not in err, err.decode()[-2000:]
    time.sleep(0.5)
    left = [w for w in workers if Path(f"/proc/{w}").exists()
            and (Path(f"/proc/{w}") / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not left, f"workers still running: {left}"
