"""A long `scan`'s progress, on one line of a terminal: how much of its input is read.

A post-mortem of a node (`scan /var/log/pods`) can be tens of gigabytes and minutes of reading;
without a sign of life an operator cannot tell a slow scan from a stuck one. So, as `pv` and
`rsync --info=progress2` do: shown where someone watches (stderr a terminal, or `--progress`),
from the first second on (a scan of one log ends before anything is shown), once a second at
most, on one line drawn again in place, and erased at the end so that the report starts clean.

Bytes are counted as they are on disk: a compressed file's progress is how much of the file is
read, not how much log it held, so that the total is known before reading starts. With stdin
among the inputs the total is not known, and only what was read is shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

ERASE = "\r\x1b[K"


class Progress:
    """Counts what a scan has read and found, and draws it on `out` when `every` seconds passed
    since it was last drawn (the first time: since the scan began)."""

    def __init__(self, out: TextIO, *, total_bytes: int, files: int, every: float = 1.0,
                 redraw: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.redraw = redraw  # False (not a terminal: a file, a CI log): a line each time
        self.total_bytes = total_bytes
        self.files = files
        self.every = every
        self.clock = clock
        self.read_bytes = 0
        self.files_done = 0
        self.events = 0
        self.shown = False
        self._start = clock()
        self._drawn = self._start

    def advance(self, read_bytes: int = 0, *, events: int = 0, files: int = 0) -> None:
        """`read_bytes` more read (on disk), `events` more found, `files` more read to the end."""
        self.read_bytes += read_bytes
        self.events += events
        self.files_done += files
        now = self.clock()
        if now - self._drawn >= self.every:
            self._drawn = now
            self.out.write(ERASE + self.line(now) if self.redraw else self.line(now) + "\n")
            self.out.flush()
            self.shown = True

    def line(self, now: float) -> str:
        """`sglang-matcher: scan: 1.2 of 4.0 GB (30%), 3 of 12 files, 5 events, about 0:42 left`"""
        parts = [_size(self.read_bytes, self.total_bytes)]
        if self.files > 1:
            parts.append(f"{self.files_done} of {self.files} files")
        parts.append(f"{self.events} event{'' if self.events == 1 else 's'}")
        elapsed = now - self._start
        if self.total_bytes // 10 <= self.read_bytes < self.total_bytes and elapsed > 0:
            # (from a tenth on: before, the rate is mostly the start's)
            left = elapsed * (self.total_bytes - self.read_bytes) / self.read_bytes
            parts.append(f"about {int(left // 60)}:{int(left % 60):02d} left")
        return "sglang-matcher: scan: " + ", ".join(parts)

    def close(self) -> None:
        """Erases the line, if one was drawn on a terminal."""
        if self.shown and self.redraw:
            self.out.write(ERASE)
            self.out.flush()
            self.shown = False


def _size(done: int, total: int) -> str:
    """`1.2 of 4.0 GB (30%)`; `1.2 GB read` when the total is not known (stdin)."""
    unit, scale = next(((u, s) for u, s in (("GB", 1e9), ("MB", 1e6)) if (total or done) >= s),
                       ("kB", 1e3))
    if not total:
        return f"{done / scale:.1f} {unit} read"
    return f"{done / scale:.1f} of {total / scale:.1f} {unit} ({min(100, 100 * done // total)}%)"
