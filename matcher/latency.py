"""When the line an event starts at was read: the event-latency histogram's other end.

An event leaves the pipeline seconds after its first line came in (a traceback waits for its
end, ranks for each other, a repeat for its window); the pipeline keeps no clock of its own.
The daemon notes, per source, where each chunk it read ends and when it read it; an event
starting at offset `o` of that source was read at the time of the first chunk ending after `o`.
Entries before the source's checkpoint offset are dropped — nothing before it is still held —
so each source keeps only the chunks of lines the pipeline has not finished with.
"""

from __future__ import annotations

import bisect
from collections import deque

MAX_CHUNKS = 4096  # per source; beyond it the oldest are dropped (their events go unmeasured)


class ReadTimes:
    def __init__(self) -> None:
        self._ends: dict[str, deque[int]] = {}
        self._times: dict[str, deque[float]] = {}

    def read(self, source: str, end_offset: int, at: float) -> None:
        """A chunk (or lines) of `source` ending at `end_offset` was read at `at`."""
        ends = self._ends.setdefault(source, deque())
        times = self._times.setdefault(source, deque())
        if ends and end_offset <= ends[-1]:
            ends.clear()  # the source starts over (truncated, or a new file under its name)
            times.clear()
        ends.append(end_offset)
        times.append(at)
        if len(ends) > MAX_CHUNKS:
            ends.popleft()
            times.popleft()

    def when(self, source: str, offset: int) -> float | None:
        """When the line starting at `offset` was read, if still known."""
        ends = self._ends.get(source)
        if not ends:
            return None
        i = bisect.bisect_right(ends, offset)
        return self._times[source][i] if i < len(ends) else None

    def forget_before(self, source: str, offset: int | None) -> None:
        """Lines before `offset` are done with (`None`: the whole source is)."""
        ends = self._ends.get(source)
        if not ends:
            return
        times = self._times[source]
        while ends and (offset is None or ends[0] <= offset):
            ends.popleft()
            times.popleft()
        if not ends:
            del self._ends[source], self._times[source]

    def sources(self) -> list[str]:
        return list(self._ends)
