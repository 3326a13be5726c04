"""SIGTERM ends the daemon within `stop_timeout`, whatever its outputs do. A stdout nobody reads
(a stuck `| jq`, a full pipe) left the daemon blocked in a write that each signal only
interrupted for it to be tried again: systemd and Kubernetes always had to SIGKILL it. Past the
deadline it stops with exit code 3 and keeps the last checkpoint, written after the events
before it were: the events not written are told after the restart, none is lost."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import threading
import time

from watch_harness import REPO, DaemonProcess, wait_for

from matcher.testing import SEQ_RECORD

FAILURES = 600


def _lines(start: int, stop: int) -> str:
    return "".join(f"[2026-01-01 12:00:00] injected failure seq={n} end\n"
                   for n in range(start, stop))


def _unread(fd: int) -> int:
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")


def _pending(pid: int, sig: int) -> bool:
    """Whether `sig` is still pending for the process (not yet delivered to its handler)."""
    status = open(f"/proc/{pid}/status").read()  # noqa: SIM115 - one read
    mask = 0
    for line in status.splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")):
            mask |= int(line.split()[1], 16)
    return bool(mask & (1 << (sig - 1)))


def _handled(pid: int, fd: int, sig: int) -> bool:
    """`sig` reached the daemon's Python handler, which it had blocked in its write to the pipe
    `fd`: the signal is no longer pending and the daemon is back in that write, which Python
    retries only after running the handler (PEP 475). Delivered alone is not enough: until the
    handler runs — the main thread waits for the GIL after the interrupted write, long under
    load — a second signal only sets the same flag again, one handler call for both."""
    return not _pending(pid, sig) and _blocked_on_pipe(pid, fd)


def _blocked_on_pipe(pid: int, fd: int) -> bool:
    """The pipe holds most of its 64 KiB and the process sleeps in the kernel's pipe write."""
    try:
        wchan = open(f"/proc/{pid}/wchan").read()  # noqa: SIM115 - one read
    except OSError:
        return False
    return _unread(fd) >= 32_768 and "pipe_write" in wchan


def test_sigterm_ends_a_daemon_whose_stdout_nobody_reads(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(SEQ_RECORD))
    state = tmp_path / "state"
    err_path = tmp_path / "first.stderr.log"
    read_end, write_end = os.pipe()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "matcher", "watch", "--state-dir", str(state),
             "--catalog", str(catalog), "--no-builtin", "--poll-interval", "0.05", str(log)],
            stdout=write_end, stderr=err, cwd=REPO,
            env={**os.environ, "SGLANG_MATCHER_REPEAT_INTERVAL": "0",
                 "SGLANG_MATCHER_AGGREGATE_WINDOW": "0.5", "SGLANG_MATCHER_STOP_TIMEOUT": "2",
                 "SGLANG_MATCHER_CHECKPOINT_INTERVAL": "0.2"})
    os.close(write_end)
    try:
        assert wait_for(lambda: b'"event": "started"' in err_path.read_bytes(), 60)
        with open(log, "a") as f:
            f.write(_lines(0, FAILURES))
        # The pipe is full: the daemon is blocked writing to it.
        assert wait_for(lambda: _blocked_on_pipe(proc.pid, read_end), 30), _unread(read_end)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("SIGTERM did not end a daemon blocked on its stdout") from None
        took = time.monotonic() - sent
        delivered = b""
        os.set_blocking(read_end, False)
        try:
            while chunk := os.read(read_end, 1 << 16):
                delivered += chunk
        except BlockingIOError:
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(read_end)
    assert code == 3, err_path.read_text()[-2000:]
    assert took < 2 + 5  # the deadline, and the interpreter's start of the end
    said = [json.loads(line) for line in err_path.read_text().splitlines()
            if '"stop_deadline_reached"' in line]
    assert len(said) == 1 and said[0]["level"] == "error"
    first = {int(json.loads(line)["captures"]["seq"])
             for line in delivered[: delivered.rfind(b"\n") + 1].splitlines()}
    assert 0 < len(first) < FAILURES
    # The restart tells what the stop could not: nothing lost.
    d = DaemonProcess(tmp_path, [str(log)], name="second")
    with d:
        d.wait_seqs(set(range(FAILURES)) - first, 30)
        assert d.stop() == 0
    assert first | set(d.seqs()) == set(range(FAILURES))


def test_a_second_sigterm_stops_at_once(tmp_path):
    """The operator's second Ctrl-C (or `kill` again) does not wait for the deadline."""
    log = tmp_path / "server.log"
    log.touch()
    read_end, write_end = os.pipe()
    d = DaemonProcess(tmp_path, [str(log)], env={"SGLANG_MATCHER_STOP_TIMEOUT": "600"})
    catalog = d.catalog
    with open(d.err, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "matcher", "watch", "--state-dir", str(d.state),
             "--catalog", str(catalog), "--no-builtin", "--poll-interval", "0.05", str(log)],
            stdout=write_end, stderr=err, cwd=REPO,
            env={**os.environ, "SGLANG_MATCHER_REPEAT_INTERVAL": "0",
                 "SGLANG_MATCHER_STOP_TIMEOUT": "600"})
    os.close(write_end)
    try:
        assert wait_for(lambda: b'"event": "started"' in d.err.read_bytes(), 60)
        with open(log, "a") as f:
            f.write(_lines(0, FAILURES))
        assert wait_for(lambda: _blocked_on_pipe(proc.pid, read_end), 30)
        proc.send_signal(signal.SIGTERM)
        assert wait_for(lambda: _handled(proc.pid, read_end, signal.SIGTERM), 60)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(read_end)
    assert code == 3
    assert '"reason": "a second signal"' in d.err.read_text()


def test_a_second_signal_whose_handler_runs_inside_the_first_s_stops_at_once():
    """Python runs a signal's handler between any two bytecodes, those of another handler
    included: a second SIGTERM can be handled while the first's handler is still arming the
    deadline. It is a second signal all the same (before: taken for a first, it armed the
    deadline again and the daemon waited all of it)."""
    from types import SimpleNamespace

    import pytest

    from matcher.daemon import Daemon, StopDeadline, stderr_logger

    class SecondSignalDuringTheFirst:
        def __init__(self) -> None:
            self.daemon: Daemon | None = None

        def set(self) -> None:  # the first handler wakes the loop: the second lands here
            if self.daemon is not None:
                daemon, self.daemon = self.daemon, None
                daemon.request_stop(signal.SIGTERM)

    wakeup = SecondSignalDuringTheFirst()
    topo = SimpleNamespace(config=SimpleNamespace(stop_timeout=600.0))
    daemon = Daemon(topo, log=stderr_logger(sys.stderr), wakeup=wakeup)  # type: ignore[arg-type]
    daemon._runner = threading.get_ident()  # as `run` sets it: signals are handled here
    wakeup.daemon = daemon
    try:
        with pytest.raises(StopDeadline, match="a second signal"):
            daemon.request_stop(signal.SIGTERM)
    finally:
        daemon._disarm_deadline()
        signal.setitimer(signal.ITIMER_REAL, 0)
