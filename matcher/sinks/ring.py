"""The `/events` ring: the most recent printed events, as the HTTP server serves them.

A `Sink` that keeps the last `events_buffer` redacted event dicts in memory. It is a window for
a person with curl or a dashboard's link, not a record: it is empty after a restart (stdout,
the events file and the counters are the record).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from matcher.types import Batch


class EventRing:
    """The most recent `maxlen` event dicts; the daemon appends, HTTP threads read."""

    def __init__(self, maxlen: int = 1000) -> None:
        if maxlen < 1:
            raise ValueError("EventRing maxlen must be at least 1")
        self.maxlen = maxlen
        self._items: deque[dict[str, Any]] = deque(maxlen=maxlen)
        self._lock = threading.Lock()

    def append(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._items.append(event)

    def extend(self, events: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self._items.extend(events)

    def recent(self, limit: int, pattern_id: str | None = None) -> list[dict[str, Any]]:
        """The last `limit` events (of `pattern_id` only, if given), oldest first (`limit`
        clamped to [1, maxlen])."""
        limit = min(max(1, limit), self.maxlen)
        with self._lock:
            items = list(self._items)
        if pattern_id is not None:
            items = [e for e in items if e.get("pattern_id") == pattern_id]
        return items[-limit:]

    def __len__(self) -> int:
        return len(self._items)

    # -- Sink: `/events` serves what was printed ----------------------------------------------

    name = "events_ring"
    holds_checkpoint = False  # memory only: nothing to make durable

    def emit(self, batch: Batch) -> None:
        self.extend(batch.dicts)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def resized(self, maxlen: int) -> EventRing:
        """A ring of another size holding the newest of these events (a reload)."""
        ring = EventRing(maxlen)
        ring.extend(self.recent(self.maxlen))
        return ring
