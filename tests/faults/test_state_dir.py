"""The state dir is one daemon's, and a daemon that cannot keep positions there says so at
start: a second daemon on the same state dir, and a state dir that is read-only or full, are
exit code 2 with one line before anything is read (`--no-checkpoints` runs without it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from watch_harness import REPO, DaemonProcess


def _lines(start: int, stop: int) -> str:
    return "".join(f"[2026-01-01 12:00:00] injected failure seq={n} end\n"
                   for n in range(start, stop))


def _start_refused(d: DaemonProcess, *extra: str, timeout: float = 30.0) -> tuple[int, str]:
    """Run `d`'s command and expect it to exit by itself before it starts reading: its exit
    code and stderr. A daemon that starts instead is stopped, and the test fails."""
    err = d.tmp / "refused.stderr.log"
    with open(err, "wb") as e:
        proc = subprocess.Popen(
            [*d.prefix, sys.executable, "-m", "matcher", "watch", "--state-dir", str(d.state),
             "--catalog", str(d.catalog), "--no-builtin", "--poll-interval", "0.05", *extra,
             *d.globs],
            stdout=subprocess.DEVNULL, stderr=e, cwd=REPO, env={**os.environ, **d.env})
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if b'"event": "started"' in err.read_bytes():
            break
        time.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        raise AssertionError(f"it started:\n{err.read_text()[-2000:]}")
    return proc.returncode, err.read_text()


def test_a_second_daemon_on_the_same_state_dir_exits_2_naming_the_holder(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    first = DaemonProcess(tmp_path, [str(log)])
    with first:
        code, err = _start_refused(first)
        assert code == 2
        assert err.count("\n") == 1, err
        assert str(first.state) in err and f"pid {first.proc.pid}" in err, err
        with open(log, "a") as f:
            f.write(_lines(0, 5))
        assert first.wait_seqs(set(range(5))) == dict.fromkeys(range(5), 1)
        first.kill()  # SIGKILL: the lock goes with the process, the lock file stays
    assert (first.state / "lock").exists()
    with open(log, "a") as f:
        f.write(_lines(5, 10))
    with first:  # the next start takes the state dir and resumes where the first one was
        assert set(first.wait_seqs(set(range(10)))) == set(range(10))
        assert first.stop() == 0


@pytest.mark.parametrize("how", ["read-only", "full"])
def test_an_unwritable_state_dir_is_a_startup_error_unless_checkpoints_are_off(tmp_path, how):
    log = tmp_path / "server.log"
    log.touch()
    state = tmp_path / "state"
    state.mkdir()
    d = DaemonProcess(tmp_path, [str(log)], honour_file_modes=True)
    try:
        if how == "full":
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(state)],
                           check=True)
            _fill(state)
        else:
            state.chmod(0o555)
        code, err = _start_refused(d)
        assert code == 2
        assert err.count("\n") == 1, err
        assert f"state dir {state} is not writable" in err and "--no-checkpoints" in err, err
        # Opting out: it runs, and reads what is written after its start.
        d.extra = ["--no-checkpoints"]
        with d:
            with open(log, "a") as f:
                f.write(_lines(0, 3))
            assert d.wait_seqs({0, 1, 2}) == {0: 1, 1: 1, 2: 1}
            assert d.stop() == 0
    finally:
        state.chmod(0o755)
        if how == "full":
            subprocess.run(["umount", str(state)], check=False)


def test_check_sees_an_unwritable_state_dir_and_ignores_a_running_daemon(tmp_path):
    """`--check` (ExecStartPre=) says what the start would say of an unwritable state dir, and
    does not take the lock: it passes while the daemon it checks for runs."""
    log = tmp_path / "server.log"
    log.touch()
    d = DaemonProcess(tmp_path, [str(log)])

    def check(state: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*d.prefix, sys.executable, "-m", "matcher", "watch", "--check", "--state-dir",
             str(state), "--catalog", str(d.catalog), "--no-builtin", str(log)],
            cwd=REPO, capture_output=True, text=True, timeout=60)

    with d:
        assert check(d.state).returncode == 0
        assert d.stop() == 0
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    refused = check(not_a_dir / "state")
    assert refused.returncode == 2 and "is not writable" in refused.stderr


def _fill(directory: Path) -> None:
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_bad_checkpoint_entries_are_dropped_and_the_others_resume(tmp_path):
    """A checkpoint whose entries hold fields out of range (`fp_len` 2**40 made every start
    fail for want of memory; -1 stopped every discovery): each bad entry is dropped and said,
    its file starts at its end as on a first start, and the good entry resumes where it was."""
    import json

    from matcher.source.identity import identify

    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b", "c")}
    for base, path in zip((0, 10, 20), logs.values(), strict=True):
        path.write_text(_lines(base, base + 3))
    idents = {}
    for name, path in logs.items():
        fd = os.open(path, os.O_RDONLY)
        try:
            idents[name] = identify(fd)[0]
        finally:
            os.close(fd)

    def entry(name: str, **over: object) -> dict:
        i = idents[name]
        e = {"dev": i.dev, "ino": i.ino, "fp_len": i.fp_len, "fp_hash": i.fp_hash,
             "offset": 0, "path": str(logs[name]), "updated": 1.0, "tail_hash": ""}
        return {**e, **over}

    resume_at = len(_lines(20, 22))  # c.log: seq 20 and 21 were read before the stop
    state = tmp_path / "state"
    state.mkdir()
    (state / "checkpoints.json").write_text(json.dumps({"version": 1, "journal": {}, "files": [
        entry("a", fp_len=2 ** 40), entry("b", fp_len=-1), entry("c", offset=resume_at),
        entry("a", dev=True), entry("b", offset=2 ** 70), entry("a", path="x\0y"),
    ]}))
    d = DaemonProcess(tmp_path, [str(tmp_path / "*.log")])
    with d:
        expected = {22}  # a.log and b.log from their end: their entries were dropped
        assert set(d.wait_seqs(expected, 20)) == expected, d.err.read_text()[-3000:]
        for base, path in zip((3, 13, 23), logs.values(), strict=True):
            with open(path, "a") as f:
                f.write(_lines(base, base + 2))
        expected |= {3, 4, 13, 14, 23, 24}
        assert d.wait_seqs(expected, 20) == dict.fromkeys(expected, 1)
        assert d.stop() == 0
    dropped = [line for line in d.err.read_text().splitlines()
               if '"checkpoint_entry_dropped"' in line]
    assert len(dropped) == 5, dropped
    assert any("fp_len 1099511627776 is out of range" in line for line in dropped)
    assert any("fp_len -1 is out of range" in line for line in dropped)
    assert "checkpoint_unreadable" not in d.err.read_text()  # the file itself was kept
