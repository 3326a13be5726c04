"""Model-based: random writes, partial lines, rotations, truncations, deletions and restarts of a
real daemon process; every completed line is delivered exactly once."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from watch_harness import DaemonProcess

from matcher.testing import line_for


class WatchedLog(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="watch-model-"))
        self.log = self.tmp / "server.log"
        self.log.touch()
        # Rotated names are in the glob: a file renamed away before a poll saw it is still found.
        self.daemon = DaemonProcess(self.tmp, [str(self.tmp / "server.log*")]).start()
        self.next_seq = 0
        self.completed: list[int] = []
        self.partial: str | None = None  # the rest of a line written in half
        self.generation = 0

    def _append(self, text: str) -> None:
        with open(self.log, "a") as f:
            f.write(text)

    def _sync(self) -> None:
        """Wait until the daemon has everything completed so far (before destroying data)."""
        self.daemon.wait_seqs(set(self.completed))

    @rule(n=st.integers(min_value=1, max_value=40))
    def write_lines(self, n: int) -> None:
        text = ""
        if self.partial is not None:
            text += self.partial
            self.completed.append(self.next_seq - 1)
            self.partial = None
        for _ in range(n):
            text += line_for(self.next_seq) + "\n"
            self.completed.append(self.next_seq)
            self.next_seq += 1
        self._append(text)

    @precondition(lambda self: self.partial is None)
    @rule()
    def write_partial_line(self) -> None:
        line = line_for(self.next_seq) + "\n"
        self.next_seq += 1
        cut = len(line) // 2
        self._append(line[:cut])
        self.partial = line[cut:]

    @precondition(lambda self: self.partial is None)
    @rule()
    def rotate_rename(self) -> None:
        self.generation += 1
        os.replace(self.log, self.tmp / f"server.log.{self.generation}")
        self.log.touch()

    @precondition(lambda self: self.partial is None)
    @rule()
    def truncate(self) -> None:
        self._sync()
        with open(self.log, "r+b") as f:
            f.truncate(0)

    @precondition(lambda self: self.partial is None)
    @rule()
    def delete_and_recreate(self) -> None:
        self._sync()
        self.log.unlink()
        self.log.touch()

    @rule()
    def restart(self) -> None:
        assert self.daemon.stop() == 0
        self.daemon.start()

    @invariant()
    def nothing_delivered_twice(self) -> None:
        seqs = self.daemon.seqs()
        assert [s for s, c in seqs.items() if c > 1] == []

    def teardown(self) -> None:
        try:
            if self.partial is not None:
                self._append(self.partial)
                self.completed.append(self.next_seq - 1)
            self._sync()
            assert self.daemon.stop() == 0
            seqs = self.daemon.seqs()
            assert sorted(seqs) == sorted(self.completed)
            assert all(c == 1 for c in seqs.values())
        finally:
            if self.daemon.proc is not None:
                self.daemon.proc.kill()
            shutil.rmtree(self.tmp, ignore_errors=True)


WatchedLog.TestCase.settings = settings(
    max_examples=int(os.environ.get("WATCH_MODEL_EXAMPLES", "6")),
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
test_watched_log_model = WatchedLog.TestCase
