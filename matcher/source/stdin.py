"""Standard input as a `Source`: `tee`'d or piped logs (`sglang … 2>&1 | sglang-matcher watch -`).

Read without blocking, a bounded amount per turn; at EOF the source ends (its open traceback
and partial line are handed on) and says it is finished, so a `watch -` with no files exits
once its input is read. Nothing is checkpointed: a pipe cannot be read again.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from matcher.source.checkpoint import CheckpointState
from matcher.types import Chunk, Intake

STDIN = "<stdin>"


class StdinSource:
    name = STDIN

    def __init__(self, stream: BinaryIO, chunk_bytes: int) -> None:
        self._fd = stream.fileno()
        self.chunk_bytes = chunk_bytes
        self._offset = 0
        self._done = False

    @property
    def finished(self) -> bool:
        return self._done

    def read(self, now: float, intake: Intake) -> bool:
        if self._done:
            return False
        os.set_blocking(self._fd, False)
        try:
            data = os.read(self._fd, self.chunk_bytes)
        except BlockingIOError:
            return False
        if not data:
            self._done = True
            intake.end(STDIN, now)
            return False
        self._offset += len(data)
        intake.chunk(Chunk(data, STDIN, self._offset), now)
        return True

    def save(self, state: CheckpointState, intake: Intake, wall: float) -> bool:
        return False

    def close(self) -> None:
        pass  # not ours to close: the process's standard input
