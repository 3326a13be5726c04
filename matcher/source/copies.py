"""copytruncate: which new file is a copy of a followed one, and from where to read it.

logrotate's copytruncate creates the copy empty, fills it in one pass, then truncates the
original, while the writer keeps appending. A new file is judged here:
- **maybe a copy** (`Wait.MAYBE_COPY`): empty, or shorter than the fingerprint and a prefix of
  a followed (or just truncated) file's first bytes: what a copy looks like while logrotate is
  still writing it. Not read until it is a copy or something else (judged once it has not
  grown for `MAYBE_COPY_QUIET`);
- **a candidate copy** (`Wait.COPY`): its original's first bytes, and the same bytes before the
  point where the copy ends or where we stopped reading the original, whichever comes first.
  Parked until the original is truncated (then read from where the original was left, so lines
  written between our last read and the truncation are read from the copy, once), or read as a
  new file from its start when the original does not shrink within `rotate_wait` of the copy's
  last growth, or is no longer at its path (a crash loop recreating `server.log` with the same
  bytes, two replicas with the same banner, a log copied in for a post-mortem);
- **a copy of a file truncated** in the last `TRUNCATION_MEMORY` seconds: read from where the
  original was left (or not at all when it holds no more than was read).

What can come twice: a candidate whose original is truncated later than `rotate_wait` after
the copy was complete (read from its start, then taken for new).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from matcher.selflog import FILE_OPENED, FILE_RELEASED
from matcher.source.identity import (
    TAIL_BYTES,
    FileIdentity,
    bytes_before,
    fingerprint,
    holds_head,
    identify,
    same_bytes,
)
from matcher.source.openfile import OpenFile, Parked, SourceNotice, Wait

TRUNCATION_MEMORY = 60.0
# A new file that may still become a copy and has not grown for this long is no copy logrotate
# is still writing (it writes a copy in one pass, in blocks larger than the fingerprint).
MAYBE_COPY_QUIET = 0.1


@dataclass(frozen=True, slots=True)
class Truncation:
    """A followed file truncated in place: what we had read of it, to know its copy by."""

    identity: FileIdentity
    offset: int  # where we had read it to
    tail: bytes  # the bytes before `offset`, as we read them
    head: bytes  # its first bytes
    when: float


@dataclass(frozen=True, slots=True)
class Start:
    """Where reading a newly found file begins, why, and whether it waits first."""

    offset: int
    how: str
    wait: Wait | None = None
    original: tuple[int, int] | None = None


def _holds(f: OpenFile, length: int) -> bool:
    """`f` still has the first bytes it was identified by, and at least `length` bytes."""
    return holds_head(f.fd, f.state.identity) and f.size() >= length


def _could_be_original(f: OpenFile) -> bool:
    """copytruncate leaves the original at its path: a deleted or renamed file is no original
    (a crash loop recreating server.log with the same bytes)."""
    return not (f.maybe_copy or not f.seen_at_path or f.gone_since is not None or f.dormant)


class Copies:
    """The copytruncate judge over the followed files (`files`, shared with the file set)."""

    def __init__(self, files: dict[tuple[int, int], OpenFile],
                 notify: Callable[[SourceNotice], None], *, fingerprint_bytes: int,
                 rotate_wait: float) -> None:
        self.files = files
        self.notify = notify
        self.fingerprint_bytes = fingerprint_bytes
        self.rotate_wait = rotate_wait
        self.truncations: list[Truncation] = []

    def copy_of(self, fd: int, size: int, now: float, skip: OpenFile | None = None) -> Start | None:
        """Is this new file a copy of one we read? Then where to start."""
        for other in self.files.values():
            if other is skip or not _could_be_original(other):
                continue
            ident = other.state.identity
            if ident.fp_len == 0 or fingerprint(fd, ident.fp_len) != ident.head_key:
                continue
            m = min(size, other.state.offset)
            if m and self._same_before(fd, other, m):
                return Start(m, f"copy of {other.path}: parked until it is truncated",
                             Wait.COPY, ident.inode_key)
        self.truncations = [t for t in self.truncations if now - t.when < TRUNCATION_MEMORY]
        for t in self.truncations:
            if t.identity.fp_len == 0 or fingerprint(fd, t.identity.fp_len) != t.identity.head_key:
                continue
            if size < t.offset:
                return Start(size, "copy of a truncated file, already read in full")
            if bytes_before(fd, t.offset, len(t.tail)) == t.tail:
                return Start(t.offset, "copy of a truncated file: from where its original was read")
        return None

    @staticmethod
    def _same_before(fd: int, other: OpenFile, m: int) -> bool:
        """The copy `fd` has `other`'s bytes before `m` (`m` > 0: the copy's end or our offset
        in `other`, whichever comes first)."""
        if m == other.state.offset:  # compare with what we read, whatever the original holds now
            tail = other.state.tail
            same = bool(tail) and bytes_before(fd, m, len(tail)) == tail
            if same and _holds(other, m):  # the original not rewritten yet: all of it
                # ...unless logrotate's truncate lands during the comparison (it follows the
                # copy at once): then what we read decides, as when it came first.
                same = same_bytes(fd, other.fd, m) or not _holds(other, m)
            return same
        # the copy ends before where we are: the original may be rewritten already
        return (bytes_before(fd, m, TAIL_BYTES) == other.bytes_before(m, TAIL_BYTES)
                or not holds_head(other.fd, other.state.identity))

    def may_become_copy(self, fd: int, size: int) -> bool:
        """Empty, or shorter than a followed (or just truncated) file's first bytes and a prefix
        of them: what a copy looks like while logrotate is still writing it."""
        if size >= self.fingerprint_bytes:
            return False
        have = os.pread(fd, size, 0)
        heads = [f.state.head for f in self.files.values() if not f.maybe_copy and not f.dormant]
        heads += [t.head for t in self.truncations]
        return any(len(h) > len(have) and h.startswith(have) for h in heads)

    def judge(self, now: float) -> None:
        """Decide what the waiting files are, as far as they can be now. A file decided to be
        read is marked busy, so its next turn reads it at once."""
        for f in [f for f in self.files.values() if f.maybe_copy]:
            self._settle(f, now)
        for f in [f for f in self.files.values() if f.candidate_copy]:
            self._check_candidate(f, now)

    def decision_due(self, now: float) -> float | None:
        """Seconds until time alone may decide a waiting file (None: none waits)."""
        due: float | None = None
        for f in self.files.values():
            p = f.parked
            if p is None or (p.why is Wait.MAYBE_COPY and p.size == 0):
                continue  # an empty new file waits for its first bytes, not for a time
            wait = MAYBE_COPY_QUIET if p.why is Wait.MAYBE_COPY else self.rotate_wait
            left = p.since + wait - now
            due = left if due is None else min(due, left)
        return due

    def _settle(self, f: OpenFile, now: float) -> None:
        """Decide what a file that may be a copy in progress is, once it can no longer be."""
        assert f.parked is not None
        size = f.size()
        if size != f.parked.size:
            f.parked.size, f.parked.since = size, now  # still being written
        if size == 0 or (now - f.parked.since < MAYBE_COPY_QUIET
                         and self.may_become_copy(f.fd, size)):
            return
        f.state.identity, f.state.head = identify(f.fd, self.fingerprint_bytes)
        start = self.copy_of(f.fd, size, now, skip=f) or Start(0, "new file: from the beginning")
        f.parked = None if start.wait is None else Parked(start.wait, size, now, start.original)
        f.start_at(start.offset)
        f.busy = f.parked is None  # decided to be read: at its next turn
        self.notify(SourceNotice(FILE_OPENED, f.path, f"{start.how} at offset {start.offset}"))

    def _check_candidate(self, f: OpenFile, now: float) -> None:
        """A candidate copy is read as a new file, from its start, unless its original shrinks
        within `rotate_wait` of the copy's last growth, at its path (`truncated` then
        releases it at the original's offset)."""
        assert f.parked is not None
        original = self.files.get(f.parked.original) if f.parked.original else None
        size = f.size()
        if size != f.parked.size:
            f.parked.size, f.parked.since = size, now  # logrotate is still writing it
        why = ""
        if original is None or original.gone_since is not None or not original.seen_at_path:
            why = "its original is no longer at its path"
        elif now - f.parked.since >= self.rotate_wait:
            why = f"its original did not shrink within {self.rotate_wait:g} s"
        if why:
            f.parked = None
            f.start_at(0)
            f.busy = True  # read at its next turn, not at the next sweep
            self.notify(SourceNotice(
                FILE_RELEASED, f.path, f"looked like a copy of "
                f"{original.path if original else 'a followed file'}, but {why}: read as a new "
                f"file from its start", f.pattern))

    def truncated(self, original: OpenFile, now: float) -> None:
        """`original` was truncated (its state still says what we had read of it): remember it,
        and release its candidate copies at that offset."""
        s = original.state
        self.truncations.append(Truncation(s.identity, s.offset, s.tail, s.head, now))
        for copy in self._candidates_of(original.state.identity.inode_key):
            copy.parked = None
            copy.busy = True
            copy.start_at(min(s.offset, copy.size()))
            self.notify(SourceNotice(
                FILE_OPENED, copy.path, f"copy of truncated {original.path}: reading from "
                                        f"offset {copy.state.offset}"))

    def _candidates_of(self, inode: tuple[int, int]) -> Iterable[OpenFile]:
        return [f for f in self.files.values()
                if f.candidate_copy and f.parked is not None and f.parked.original == inode]
