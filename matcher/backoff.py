"""How long to wait before trying again: doubling delays under a ceiling.

One shape for everything that retries — a webhook POST, a journalctl that exited — so a flapping
endpoint and a flapping subprocess back off alike and `reset()` after a success means the same.
"""

from __future__ import annotations

import email.utils
import time


class Backoff:
    """`next_delay()` gives `initial`, then twice that, … never above `maximum`."""

    def __init__(self, initial: float, maximum: float) -> None:
        if initial < 0 or maximum < 0:
            raise ValueError("backoff delays must be ≥ 0")
        self.initial = initial
        self.maximum = maximum
        self._next = initial

    def next_delay(self) -> float:
        delay = min(self._next, self.maximum)
        self._next = min(self._next * 2, self.maximum)
        return delay

    def reset(self) -> None:
        """It worked: the next failure waits `initial` again."""
        self._next = self.initial


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` in seconds from now: a number of seconds or an HTTP date; None without."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
