"""The `/events` ring: the most recent printed events, as the HTTP server serves them.

A `Sink` that keeps the last `events_buffer` redacted events in memory. It is a window for a
person with curl or a dashboard's link, not a record: it is empty after a restart (stdout, the
events file and the counters are the record).

Its memory is bounded by bytes, not only by count (issue 34: 1,500 failures with 64K-character
messages held 261 MB here, 599 MB in emoji):
- each event is kept as its JSON line, at most `EVENT_MAX_BYTES` (32 KiB): a longer one has its
  longest strings (a message, a traceback) cut — after redaction, which the event already went
  through — each ending in a marker that says how many characters were cut;
- the ring holds at most `RING_MAX_BYTES` (32 MiB) of them: past that the oldest go, even before
  `events_buffer` is reached.
Events are kept encoded, so a response is the kept bytes joined, never rendered again per client
(`http.py` streams them).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from matcher.types import Batch

EVENT_MAX_BYTES = 32 * 1024  # one event's JSON in the ring
RING_MAX_BYTES = 32 * 1024 * 1024  # the ring's events together
# The lengths (in characters) strings are cut to, tried in turn until the event fits.
CUT_TO = (8192, 2048, 512, 128)
CUT_MARKER = "… [cut for /events: {n} more characters; stdout and the events file have it whole]"


def encode(event: dict[str, Any]) -> bytes:
    """An event as the JSON `/events` serves (the same as `json.dumps` of the list's items)."""
    return json.dumps(event, ensure_ascii=False, default=str).encode("utf-8")


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return value[:limit] + CUT_MARKER.format(n=len(value) - limit)
    if isinstance(value, dict):
        return {k: _cut(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut(v, limit) for v in value]
    return value


def bounded(event: dict[str, Any], max_bytes: int = EVENT_MAX_BYTES) -> bytes:
    """The event's JSON, at most `max_bytes`: strings cut shorter and shorter until it fits;
    an event that still does not fit (thousands of fields) keeps only the fields that say what
    it was and where (schema fields all: no field is added)."""
    data = encode(event)
    if len(data) <= max_bytes:
        return data
    for limit in CUT_TO:
        data = encode(_cut(event, limit))
        if len(data) <= max_bytes:
            return data
    keep = ("event", "pattern_id", "error_class", "severity", "message", "source", "offset",
            "line", "log_ts", "observed_ts", "fingerprint")
    return encode(_cut({k: event[k] for k in keep if k in event}, CUT_TO[-1]))


class EventRing:
    """The most recent `maxlen` events (at most `max_bytes` of them); the daemon appends, HTTP
    threads read."""

    def __init__(self, maxlen: int = 1000, max_bytes: int = RING_MAX_BYTES,
                 event_max_bytes: int = EVENT_MAX_BYTES) -> None:
        if maxlen < 1:
            raise ValueError("EventRing maxlen must be at least 1")
        self.maxlen = maxlen
        self.max_bytes = max_bytes
        self.event_max_bytes = event_max_bytes
        # (pattern_id, the event's JSON): bytes are immutable, so a response can hold the ones
        # it serves without a copy while the ring moves on.
        self._items: deque[tuple[str | None, bytes]] = deque()
        self._bytes = 0
        self._lock = threading.Lock()

    def append(self, event: dict[str, Any]) -> None:
        self.extend((event,))

    def extend(self, events: Iterable[dict[str, Any]]) -> None:
        encoded = [(e.get("pattern_id"), bounded(e, self.event_max_bytes)) for e in events]
        with self._lock:
            for item in encoded:
                self._items.append(item)
                self._bytes += len(item[1])
            while self._items and (len(self._items) > self.maxlen
                                   or self._bytes > self.max_bytes):
                self._bytes -= len(self._items.popleft()[1])

    def encoded(self, limit: int, pattern_id: str | None = None) -> list[bytes]:
        """The JSON of the last `limit` events (of `pattern_id` only, if given), oldest first
        (`limit` clamped to [1, maxlen]). The bytes are the ring's own, not copies."""
        limit = min(max(1, limit), self.maxlen)
        with self._lock:
            items = list(self._items)
        if pattern_id is not None:
            items = [item for item in items if item[0] == pattern_id]
        return [data for _pid, data in items[-limit:]]

    def recent(self, limit: int, pattern_id: str | None = None) -> list[dict[str, Any]]:
        """The same events as dicts (as served, cuts included)."""
        return [json.loads(data) for data in self.encoded(limit, pattern_id)]

    @property
    def nbytes(self) -> int:
        """The bytes of JSON the ring holds now."""
        return self._bytes

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
        ring = EventRing(maxlen, self.max_bytes, self.event_max_bytes)
        with self._lock:
            items = list(self._items)[-maxlen:]
        with ring._lock:
            for item in items:
                ring._items.append(item)
                ring._bytes += len(item[1])
        return ring
