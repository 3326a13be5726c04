"""The descriptor budget: how many followed files may be open at once, and which are closed.

A host can have more logs than descriptors. A file read to its end with nothing of it held by
the pipeline can be closed (made dormant) and stays followed by identity at its offset; it is
reopened when a walk or inotify sees it change, the longest-waiting first, as the budget allows.
What this costs: a dormant file renamed out of every glob or deleted before it grows again
loses the lines written to it after it was closed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from matcher import limits
from matcher.source.openfile import OpenFile

OWN_DESCRIPTORS = 64  # the daemon's own: inotify, pipes, journalctl, webhook, checkpoint writes
MIN_OPEN_FILES = 16  # even under a tiny limit, follow this many at once (and say it is tight)


def descriptor_budget(http_connections: int) -> int:
    """Files that may be open at once: the soft descriptor limit (raised to the hard one at
    start) less the daemon's own descriptors and the HTTP server's connection cap."""
    return max(MIN_OPEN_FILES, limits.fd_budget(OWN_DESCRIPTORS + http_connections))


def changed_since_closed(f: OpenFile, st: os.stat_result) -> bool:
    """A dormant file's stat says it was written (or rewritten) since it was closed."""
    return st.st_size != f.state.offset or (st.st_mtime_ns, st.st_ctime_ns) != f.seen_times


class DescriptorBudget:
    """Open descriptors of the followed files (`files`, shared with the file set)."""

    def __init__(self, files: dict[tuple[int, int], OpenFile], max_open: int) -> None:
        self.files = files
        self.max_open = max_open
        self.deferred = 0  # files not opened yet for lack of a descriptor, at the last walk

    def open_count(self) -> int:
        return sum(1 for f in self.files.values() if not f.dormant)

    def room(self) -> int:
        return self.max_open - self.open_count()

    def full(self) -> bool:
        return self.open_count() >= self.max_open

    def reopen(self, f: OpenFile, now: float) -> None:
        """Give a dormant file its descriptor again, if its path still names the same inode
        (replaced between stat and open: the next walk sees the new file). OSError: cannot."""
        fd = os.open(f.path, os.O_RDONLY | os.O_CLOEXEC)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != f.state.identity.inode_key:
            os.close(fd)
            return
        f.fd = fd
        f.last_growth = now

    @staticmethod
    def close(f: OpenFile) -> None:
        """Close `f`'s descriptor (the caller checkpointed it first): it becomes dormant."""
        if f.dormant:
            return
        try:
            os.close(f.fd)
        except OSError:
            pass
        f.fd = -1

    def written(self, paths: set[str]) -> Iterator[OpenFile]:
        """Dormant files inotify named as written (or that it cannot name) that changed."""
        for f in list(self.files.values()):
            if f.dormant and (f.abspath in paths or f.unwatched):
                try:
                    st = os.stat(f.path)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == f.state.identity.inode_key \
                        and changed_since_closed(f, st):
                    yield f

    @staticmethod
    def idlest(files: Iterable[OpenFile], count: int) -> list[OpenFile]:
        """Of `files` (read to their end, nothing held), the `count` idle longest that are
        still at their offset: to close first."""
        out = []
        for f in sorted(files, key=lambda f: f.last_growth)[:max(0, count)]:
            try:
                if f.size() != f.state.offset:
                    continue
            except OSError:
                continue
            out.append(f)
        return out
