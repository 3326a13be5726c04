"""Crashes and a damaged state directory under a real daemon: nothing lost, nothing fatal."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from faultkit import figure, sample, served_url, stderr_events
from watch_harness import REPO, DaemonProcess, wait_for

from matcher.testing import line_for


def _lines(a: int, b: int) -> str:
    return "".join(line_for(i) + "\n" for i in range(a, b))


def _seq_at(log: Path, offset: int) -> int:
    """How many complete lines lie before `offset` (the writer's seq of the next one)."""
    with open(log, "rb") as f:
        return f.read(offset).count(b"\n")


def _checkpoint_offset(state: Path, log: Path) -> int:
    p = state / "checkpoints.json"
    if not p.exists():
        return 0
    doc = json.loads(p.read_text())
    return max((e["offset"] for e in doc["files"] if e["path"] == str(log)), default=0)


def test_sigkill_at_random_points_loses_nothing(tmp_path, scale):
    """SIGKILLed at random moments while a writer appends, restarted each time: no line lost,
    and the lines delivered twice are exactly those read after the last checkpoint."""
    log = tmp_path / "server.log"
    log.touch()
    rng = random.Random(8)
    rate = 2000
    total = rate * 3 * scale.kills
    # --from-beginning: a kill before the very first checkpoint must not make the next start a
    # "first start" that skips what is already in the file.
    d = DaemonProcess(tmp_path, [str(log)], "--from-beginning",
                      env={"SGLANG_MATCHER_CHECKPOINT_INTERVAL": "1"})
    w = subprocess.Popen([sys.executable, "-m", "matcher.testing", "write", "--path", str(log),
                          "--lines", str(total), "--interval", str(1 / rate)], cwd=REPO)
    redelivered: list[int] = []
    try:
        for _ in range(scale.kills):
            before = d.seqs() if d.out.exists() else Counter()
            d.start()
            wait_for(lambda: False, rng.uniform(0.3, 2.0))  # a random moment to die
            d.kill()  # drops an event half-written at the kill; its line comes again
            ran = d.seqs() - before
            resume = _seq_at(log, _checkpoint_offset(d.state, log))
            redelivered.append(sum(1 for s in ran if s >= resume))
        assert w.wait(300) == 0
        before = d.seqs()
        d.start()
        d.wait_seqs(set(range(total)), timeout=120)
        assert d.stop() == 0
    finally:
        if w.poll() is None:
            w.kill()
        if d.proc is not None:
            d.kill()
    seqs = d.seqs()
    lost = total - len(seqs)
    doubled = sum(c - 1 for c in seqs.values())
    redelivered.sort()
    figure(f"SIGKILL x{scale.kills} while writing {total} lines at ~{rate}/s: lost {lost}, "
           f"duplicated {doubled}; per kill median {redelivered[len(redelivered) // 2]}, "
           f"max {redelivered[-1]} lines (checkpoint interval 1 s)")
    assert lost == 0
    # Every duplicate is a line a killed run delivered after its last checkpoint: nothing else.
    assert doubled == sum(redelivered)


BAD_CHECKPOINTS = {
    "nul-bytes": b"\0" * 4096,
    "half-written": b'{"version": 1, "files": [{"dev": 2049, "ino": 13, "fp_len": 10',
    "empty": b"",
    "wrong-version": b'{"version": 99, "files": []}',
    "not-utf8": b"\xff\xfe{\x00",
}
# A well-formed checkpoint whose only entry is unusable: that entry is dropped and said
# (`checkpoint_entry_dropped`), the file kept; it names no file, so every file present at
# start starts at its end, as on a first start.
BAD_ENTRIES = {
    "wrong-types": b'{"version": 1, "files": [{"dev": "x", "ino": [], "fp_len": {}}]}',
    "huge-number": b'{"version": 1, "files": [{"dev": 1e999, "ino": 1, "fp_len": 1, '
                   b'"fp_hash": "a", "offset": 1}]}',
}


def test_sigkill_before_the_first_checkpoint_loses_nothing(tmp_path):
    """Killed before its first periodic checkpoint (within `checkpoint_interval` of its start,
    here with the interval at an hour), the daemon comes back at the position it started
    from: every line written before and after the kill is delivered. Before, it came back with
    no saved position, followed the file from its end, and lost them (a CI run under load:
    2,473 of 4,000 lines)."""
    log = tmp_path / "server.log"
    log.touch()
    d = DaemonProcess(tmp_path, [str(log)], env={"SGLANG_MATCHER_CHECKPOINT_INTERVAL": "3600"})
    with d:
        log.write_text(_lines(0, 50))
        assert wait_for(lambda: len(d.seqs()) >= 50, 30)
        d.kill()
        with log.open("a") as f:
            f.write(_lines(50, 100))
        d.start()
        d.wait_seqs(set(range(100)))
    assert sorted(d.seqs()) == list(range(100))


@pytest.mark.parametrize("content", BAD_ENTRIES.values(), ids=BAD_ENTRIES)
def test_a_checkpoint_with_an_unusable_entry_drops_it_and_the_daemon_starts(tmp_path, content):
    log = tmp_path / "server.log"
    log.write_text(_lines(0, 50))
    d = DaemonProcess(tmp_path, [str(log)])
    d.state.mkdir()
    (d.state / "checkpoints.json").write_bytes(content)
    with d:
        with open(log, "a") as f:
            f.write(_lines(50, 80))
        d.wait_seqs(set(range(50, 80)))
        assert d.stop() == 0
    (report,) = stderr_events(d, "checkpoint_entry_dropped")
    assert "entry 0" in report["detail"]
    assert not list(d.state.glob("checkpoints.json.corrupt-*"))
    assert d.seqs() == Counter(range(50, 80))
    assert _checkpoint_offset(d.state, log) == log.stat().st_size


@pytest.mark.parametrize("content", BAD_CHECKPOINTS.values(), ids=BAD_CHECKPOINTS)
def test_corrupt_checkpoint_is_moved_aside_and_the_daemon_starts(tmp_path, content):
    """An unusable checkpoint file: reported, moved aside, and the daemon starts as on a first
    run — files present start at their end (their history is not replayed as new alerts), lines
    written after the start are delivered, and the next checkpoint is a good one."""
    log = tmp_path / "server.log"
    log.write_text(_lines(0, 50))
    d = DaemonProcess(tmp_path, [str(log)])
    d.state.mkdir()
    (d.state / "checkpoints.json").write_bytes(content)
    with d:
        with open(log, "a") as f:
            f.write(_lines(50, 80))
        d.wait_seqs(set(range(50, 80)))
        assert d.stop() == 0
    (report,) = stderr_events(d, "checkpoint_unreadable")
    assert "moved to" in report["detail"]
    assert len(list(d.state.glob("checkpoints.json.corrupt-*"))) == 1
    assert d.seqs() == Counter(range(50, 80))
    assert _checkpoint_offset(d.state, log) == log.stat().st_size


def _fill(directory: Path) -> Path:
    """Write a file until the filesystem is full."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("how", ["read-only", "full"])
def test_state_dir_unwritable_then_writable_again(tmp_path, how):
    """The state dir turns read-only (or its filesystem fills, a 64 KiB tmpfs): checkpoints fail,
    are counted and logged, reading goes on; once writable again the next checkpoint holds the
    current position."""
    log = tmp_path / "server.log"
    log.touch()
    state = tmp_path / "state"
    state.mkdir()
    if how == "full":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(state)], check=True)
    d = DaemonProcess(tmp_path, [str(log)], "--metrics-addr", "127.0.0.1:0",
                      honour_file_modes=True,
                      env={"SGLANG_MATCHER_CHECKPOINT_INTERVAL": "0.2"})
    try:
        with d:
            url = wait_for(lambda: served_url(d), 20)
            with open(log, "a") as f:
                f.write(_lines(0, 20))
            d.wait_seqs(set(range(20)))
            assert wait_for(lambda: _checkpoint_offset(state, log) == log.stat().st_size, 10)
            filler = None
            if how == "full":
                filler = _fill(state)
            else:
                state.chmod(0o555)
            with open(log, "a") as f:
                f.write(_lines(20, 60))
            d.wait_seqs(set(range(60)))  # reading goes on
            assert wait_for(lambda: sample(url, "sglang_matcher_checkpoint_failures_total") >= 2, 10)
            failures = sample(url, "sglang_matcher_checkpoint_failures_total")
            assert _checkpoint_offset(state, log) < log.stat().st_size  # the old one, intact
            if filler is not None:
                filler.unlink()
            else:
                state.chmod(0o755)
            assert wait_for(lambda: _checkpoint_offset(state, log) == log.stat().st_size, 10)
            with open(log, "a") as f:
                f.write(_lines(60, 70))
            d.wait_seqs(set(range(70)))
            assert d.stop() == 0
    finally:
        state.chmod(0o755)
        if how == "full":
            subprocess.run(["umount", str(state)], check=False)
    figure(f"state dir {how}: {failures:.0f} checkpoint failures counted, reading went on, "
           f"recovered")
    assert d.seqs() == Counter(range(70))
    logged = stderr_events(d, "checkpoint_failed")
    assert logged and ("Permission denied" in logged[0]["detail"]
                       or "No space left" in logged[0]["detail"])
