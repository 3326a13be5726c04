"""How long to wait before trying again: doubling delays under a ceiling.

One shape for everything that retries — a webhook POST, a journalctl that exited — so a flapping
endpoint and a flapping subprocess back off alike and `reset()` after a success means the same.
"""

from __future__ import annotations


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
