"""Changes that size alone does not show, and new files that look like another's start.

Against real daemons and real files (issue 34, item 8):
- a copytruncate whose original is rewritten to exactly the length we had read: nothing to read
  by size, yet every line is new — the file's times moved, so its fingerprint is checked;
- a new file whose first line is another followed file's (a crash-looping launcher without
  timestamps): held as "maybe a copy" only as long as that can be true, then read in the same
  turn, not at the next sweep — its last line within 250 ms at the default poll interval.
"""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest
from faultkit import stderr_events
from watch_harness import DaemonProcess, wait_for

from matcher.testing import line_for

LATENCY = 0.25  # seconds from the last line's write to its event


def _block(first: int, count: int) -> str:
    return "".join(line_for(first + i) + "\n" for i in range(count))


@pytest.mark.parametrize("poll_only", [False, True], ids=["inotify", "poll-only"])
def test_a_copytruncate_rewritten_to_the_same_size_is_read(tmp_path, poll_only):
    """35 failures read; logrotate copies the file away (out of the glob) and truncates it, and
    the writer refills it with 35 other failures of exactly the same length before the daemon
    looks again (the daemon is stopped with SIGSTOP meanwhile, so the order is certain). Before:
    the size equalled our offset, an idle read stopped at that, and all 35 were lost."""
    log = tmp_path / "server.log"
    old = _block(100, 35)
    log.write_text(old)
    extra = ["--from-beginning", *(["--poll-only"] if poll_only else [])]
    with DaemonProcess(tmp_path, [str(log)], *extra) as d:
        d.wait_seqs(set(range(100, 135)))
        assert d.proc is not None
        shutil.copyfile(log, tmp_path / "server.log.1")
        new = _block(200, 35)
        assert len(new) == len(old)
        d.proc.send_signal(signal.SIGSTOP)
        try:
            with open(log, "r+") as f:
                f.truncate(0)
                f.write(new)
        finally:
            d.proc.send_signal(signal.SIGCONT)
        got = d.wait_seqs(set(range(200, 235)), timeout=20)
        lost = sorted(set(range(200, 235)) - set(got))
        assert lost == [], f"lost {len(lost)} of 35: {lost}"
        assert all(n == 1 for n in got.values()), got
        assert stderr_events(d, "file_truncated")
        assert d.stop() == 0


def _latency(d: DaemonProcess, seq: int, write) -> float:
    """Seconds from `write()` to the event of `seq` on the daemon's stdout."""
    t0 = time.monotonic()
    write()
    assert wait_for(lambda: seq in d.seqs(), 20, interval=0.005), d.err.read_text()[-3000:]
    return time.monotonic() - t0


def _opened(d: DaemonProcess, name: str, how: str) -> bool:
    return any(e.get("path", "").endswith(name) and how in e.get("detail", "")
               for e in stderr_events(d, "file_opened"))


def test_a_new_file_starting_like_another_is_read_at_once(tmp_path):
    """A launcher without timestamps prints the same first line at every start, into a new
    file: while it holds only that line it is a prefix of the other file's start (what a copy
    logrotate is still writing looks like). Its failure, written next, is read in the same turn
    — at the default 1 s poll. Before: judged at the next poll, then read at the next sweep
    (10 polls): seconds late."""
    banner = "launcher: starting sglang server with the configured arguments\n"
    first = tmp_path / "run-1.log"
    first.write_text(banner + line_for(1) + "\n")
    with DaemonProcess(tmp_path, [str(tmp_path / "*.log")], "--from-beginning",
                       "--poll-interval", "1") as d:
        d.wait_seqs({1})
        second = tmp_path / "run-2.log"
        second.write_text(banner)
        assert wait_for(lambda: _opened(d, "run-2.log", "maybe a copy"), 20)

        def fail() -> None:
            with open(second, "a") as f:
                f.write(line_for(2) + "\n")

        took = _latency(d, 2, fail)
        assert took < LATENCY, f"the failure came {took:.3f} s after it was written"
        assert d.seqs()[2] == 1


def test_a_new_file_that_is_a_prefix_of_another_is_read_within_the_latency(tmp_path):
    """The new file's whole content is the start of another followed file (the same banner
    and the same first failure): it stays a possible copy in progress only while it grows; once
    quiet for 0.1 s it is read — the daemon wakes for that moment, not at its next poll."""
    banner = "launcher: starting sglang server with the configured arguments\n"
    first = tmp_path / "run-1.log"
    failure = line_for(1) + "\n"  # the same bytes in both files (its timestamp too)
    first.write_text(banner + failure + line_for(5) + "\n")
    with DaemonProcess(tmp_path, [str(tmp_path / "*.log")], "--from-beginning",
                       "--poll-interval", "1") as d:
        d.wait_seqs({1, 5})
        second = tmp_path / "run-2.log"

        def write() -> None:
            second.write_text(banner + failure)

        def from_second() -> int:
            return sum(1 for e in d.events() if e.get("source", "").endswith("run-2.log"))

        t0 = time.monotonic()
        write()
        assert wait_for(from_second, 20, interval=0.005), d.err.read_text()[-3000:]
        took = time.monotonic() - t0
        assert _opened(d, "run-2.log", "maybe a copy")  # it was held, for a moment
        assert took < LATENCY, f"its failure came {took:.3f} s after it was written"


def test_a_released_lookalike_is_read_when_released(tmp_path):
    """A new file identical to a followed one is a candidate copy: its original must shrink
    within `rotate_wait` (here 1 s). It does not; the file is released and read at that moment,
    not at the next sweep (before: up to 10 polls later)."""
    first = tmp_path / "run-1.log"
    text = "launcher: starting\n" + line_for(7) + "\n"
    first.write_text(text)
    with DaemonProcess(tmp_path, [str(tmp_path / "*.log")], "--from-beginning",
                       "--poll-interval", "1", env={"SGLANG_MATCHER_ROTATE_WAIT": "1"}) as d:
        d.wait_seqs({7})

        def from_second() -> int:
            return sum(1 for e in d.events() if e.get("source", "").endswith("run-2.log"))

        t0 = time.monotonic()
        (tmp_path / "run-2.log").write_text(text)
        assert wait_for(from_second, 20, interval=0.005), d.err.read_text()[-3000:]
        took = time.monotonic() - t0
        assert wait_for(lambda: stderr_events(d, "file_released"), 5)
        assert took < 1.0 + LATENCY, f"read {took:.3f} s after it was written (rotate_wait 1 s)"
        os.unlink(tmp_path / "run-2.log")
