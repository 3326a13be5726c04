"""Log files by glob, each followed across rotation, truncation and restarts.

What can be lost, first:
- **copytruncate**: lines written between logrotate's copy and its truncate exist only in the
  copy. If the copy matches no glob they are never read (the window is the copy's duration);
  exclude nothing the copy is named, or prefer `create` rotation.
- **rotation faster than reading while the old file is deleted**: a file rotated away is kept
  open and read to its end for `rotate_wait` seconds after its last growth, then closed so its
  space can be freed. Lines written to it later than that are not read.
- **a line longer than `max_line_bytes`**: its head is kept, the rest dropped and counted.

How a file is followed. Files are tracked by identity (device + inode + checksum of the first
bytes, `identity.py`), not by path. Each poll re-evaluates the globs (and a watchdog event wakes
the poll early):
- a path whose inode is already tracked updates that file's name: `server.log` renamed to
  `server.log.1` is the same file and is not read again;
- a new inode at a path is a new file: rename + create rotation, delete and recreate, a symlink
  retargeted (`/var/log/containers`), a file that appears later. The old file goes on being
  read to its end, so nothing it received before the switch is lost;
- a file whose size drops below our offset, or whose first bytes change, was truncated in place
  (copytruncate): reading restarts at 0;
- a new file whose bytes just before some offset equal the last bytes we read from a tracked
  file is a copy of it (logrotate's `copytruncate` copy, when the glob matches it). It is parked
  until the original is truncated, then read from where we had stopped reading the original — so
  lines written between our last read and the truncation are read from the copy, once.
  logrotate creates the copy empty and fills it: a new file that is empty, or shorter than the
  fingerprint and a prefix of a tracked file's first bytes, is not read until it has become
  either a copy or something else (or `rotate_wait` has passed).
Positions come from the checkpoint when the identity matches. A file present at the very first
start (no checkpoint state at all) starts at the end of its last complete line unless
`from_beginning`; a file that appears later — or while we were down — is read from the start.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from matcher.source.checkpoint import CheckpointState, FileCheckpoint
from matcher.source.discovery import DEFAULT_MAX_ENTRIES, Discovery, expand
from matcher.source.identity import FileIdentity, fingerprint

END_SCAN_BYTES = 64 * 1024
TAIL_BYTES = 1024
TRUNCATION_MEMORY = 60.0
PENDING = (-1, -1)  # `parked_for` of a new file that may still become a copy: not read yet
# A pending new file (a prefix of a followed file's first bytes) that has not grown for this
# long is no copy logrotate is still writing (it writes a copy in one pass, in blocks larger
# than the fingerprint): it is judged then, not `rotate_wait` later.
PENDING_QUIET = 0.1


@dataclass(frozen=True, slots=True)
class SourceNotice:
    """Something about a source the operator may want to know; the daemon logs and counts it."""

    kind: str  # rotated | truncated | opened | closed | unreadable | recovered
    path: str
    detail: str = ""
    pattern: str = ""


@dataclass(slots=True)
class TailedFile:
    fd: int
    identity: FileIdentity
    path: str
    source_id: str  # unique per file: the pipeline keeps its per-source state under it
    offset: int  # the next byte to read
    last_growth: float
    seen_at_path: bool = True
    gone_since: float | None = None
    pending_partial_since: float | None = None
    tail: bytes = b""  # the last bytes read: recognizes a copy of this file
    prev_tail: bytes = b""  # `tail` before the last read: restored if that read is disowned
    head: bytes = b""  # the fingerprinted first bytes: recognizes a copy still being written
    opened_at: float = 0.0
    utf8_carry: bytes = b""  # an unfinished UTF-8 character at the end of the last read
    parked_for: tuple[int, int] | None = None  # a copy waiting for its original's truncation
    parked_size: int = -1  # its size when last looked at: a copy still being written grows
    parked_since: float = 0.0  # when it was parked, or last grew while parked
    seen_size: int = 0  # its size when last looked at (read lag without another fstat)
    seen_times: tuple[int, int] = (0, 0)  # (mtime, ctime) in ns when last looked at: an idle
    # file whose times moved while its size stayed at our offset may have been rewritten
    busy: bool = True  # read something at its last turn: it gets the next one too
    abspath: str = ""  # `path` made absolute: what inotify's events name
    behind_symlink: bool = False  # its path is a symlink: its writes are no event we see
    checkpointed: tuple[str, int, str] | None = None  # (identity key, offset, path) last saved
    pattern: str = ""  # the configured glob that found it: the `source` label of its metrics

    @property
    def dormant(self) -> bool:
        """Closed to stay under the descriptor budget; reopened by identity when it grows."""
        return self.fd < 0

    def read(self, max_bytes: int) -> bytes:
        data = os.pread(self.fd, max_bytes, self.offset)
        if data:
            self.prev_tail = self.tail
            self.offset += len(data)
            self.tail = (self.tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]
        return data

    def bytes_before(self, offset: int, length: int) -> bytes:
        start = max(0, offset - length)
        return os.pread(self.fd, offset - start, start)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def look(self) -> bool:
        """One fstat: note the size; True when the file changed without growing past our
        offset (its times moved while its size is our offset: truncated and rewritten to the
        very length we had read, as a copytruncate of a log that is then refilled can be)."""
        st = os.fstat(self.fd)
        times = (st.st_mtime_ns, st.st_ctime_ns)
        moved, self.seen_times = times != self.seen_times, times
        self.seen_size = st.st_size
        return moved and st.st_size == self.offset


def _identify(fd: int, length: int) -> tuple[FileIdentity, bytes]:
    """`identify`, also returning the fingerprinted bytes (a copy in progress is a prefix)."""
    head = os.pread(fd, length, 0)
    st = os.fstat(fd)
    return FileIdentity(st.st_dev, st.st_ino, len(head),
                        hashlib.sha256(head).hexdigest()[:16]), head


def _source_id(path: str, ident: FileIdentity) -> str:
    return f"{path}#{ident.dev}:{ident.ino}"


def _bytes_before(fd: int, offset: int, length: int) -> bytes:
    start = max(0, offset - length)
    return os.pread(fd, offset - start, start)


def _locate(f: TailedFile) -> None:
    """Where inotify will name `f`, and whether it can (not through a symlink)."""
    f.abspath = os.path.abspath(f.path)
    f.behind_symlink = os.path.islink(f.path) or os.path.realpath(
        os.path.dirname(f.abspath)) != os.path.dirname(f.abspath)


def _holds(f: TailedFile, head: tuple[int, str], length: int) -> bool:
    """`f` still has the first bytes it was identified by, and at least `length` bytes."""
    return fingerprint(f.fd, f.identity.fp_len) == head and f.size() >= length


def _same_bytes(a: int, b: int, length: int, block: int = 1 << 20) -> bool:
    """The first `length` bytes of two open files are equal (read a block at a time)."""
    pos = 0
    while pos < length:
        n = min(block, length - pos)
        if os.pread(a, n, pos) != os.pread(b, n, pos):
            return False
        pos += n
    return True


def _tail_hash(fd: int, offset: int) -> str:
    """Checksum of the bytes just before `offset`: a checkpoint resumes only where they match."""
    return hashlib.sha256(_bytes_before(fd, offset, TAIL_BYTES)).hexdigest()[:16]


def display_name(source_id: str) -> str:
    """The path part of a source id, for events and logs."""
    return source_id.rsplit("#", 1)[0]


def _start_of_last_line(fd: int, size: int) -> int:
    """The offset just after the last newline before `size` (0 if none in the last 64 KiB)."""
    start = max(0, size - END_SCAN_BYTES)
    tail = os.pread(fd, size - start, start)
    nl = tail.rfind(b"\n")
    return start + nl + 1 if nl >= 0 else (0 if start == 0 else size)


def _in_dirs(path: str, dirs: set[tuple[int, int]]) -> bool:
    """Whether `path`'s directory is one of `dirs` (by device and inode)."""
    try:
        st = os.stat(os.path.dirname(path) or ".")
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in dirs


class FileSet:
    """Every file matched by the globs, tracked by identity. Not thread-safe: one caller polls."""

    def __init__(
        self,
        globs: tuple[str, ...],
        exclude: tuple[str, ...],
        state: CheckpointState,
        *,
        from_beginning: bool,
        fingerprint_bytes: int,
        rotate_wait: float,
        clock: Callable[[], float],
        max_walk_entries: int = DEFAULT_MAX_ENTRIES,
        should_stop: Callable[[], bool] = lambda: False,
        max_open: int = 1 << 30,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.wall = wall  # checkpoint times
        self.globs = globs
        self.max_walk_entries = max_walk_entries
        self.should_stop = should_stop
        # What the last walk found per glob: how many files each follows, and why it may be
        # incomplete (the daemon reports both; `source` metrics are labelled by the glob).
        self.discoveries: dict[str, Discovery] = {}
        self.exclude = exclude
        self.state = state
        self.from_beginning = from_beginning
        self.fingerprint_bytes = fingerprint_bytes
        self.rotate_wait = rotate_wait
        self.clock = clock
        self.files: dict[tuple[int, int], TailedFile] = {}
        self._first_scan = True
        self._keys_by_inode: dict[tuple[int, int], set[str]] = {}  # checkpoint entries by inode
        self._exclude_rx: tuple[tuple[str, ...], Callable[[str], object]] | None = None
        self.changes = 0  # checkpoint entries written: the daemon saves only when it moved
        for key, cp in state.files.items():
            self._keys_by_inode.setdefault(cp.identity.inode_key, set()).add(key)
        self._deferred_at_start: set[str] = set()  # found at the first start, no descriptor yet
        self.max_open = max_open
        self.deferred = 0  # files not opened yet for lack of a descriptor, at the last poll
        self._unreadable: dict[str, str] = {}
        self.notices: list[SourceNotice] = []
        # What the daemon writes, as (files, directories) by (device, inode): never followed,
        # however a glob spells its path (a symlinked directory, `..`, a hard link).
        self.own: Callable[[], tuple[set[tuple[int, int]], set[tuple[int, int]]]] = \
            lambda: (set(), set())
        # (identity, offset, tail bytes, when) of files truncated in place: to know their copy
        # (identity, offset read, tail before it, head, when): a truncated file, for a while
        self._truncations: list[tuple[FileIdentity, int, bytes, bytes, float]] = []

    def paths(self) -> dict[str, str]:
        """Matching paths, each with the configured glob that found it (a bounded label).

        Also keeps each glob's `Discovery` in `discoveries`. Raises `DiscoveryStopped` when
        `should_stop` says so mid-walk."""
        out: dict[str, str] = {}
        self.discoveries = {}
        for pattern in self.globs:
            found = expand(pattern, max_entries=self.max_walk_entries,
                           should_stop=self.should_stop)
            self.discoveries[pattern] = found
            excluded = self._excluded()
            for p in sorted(found.paths):
                if excluded(os.path.basename(p)) or excluded(p):
                    continue
                out.setdefault(p, pattern)
        return out

    def _excluded(self) -> Callable[[str], object]:
        """One compiled regex for every exclude pattern (fnmatch's rules): 2,000 paths a poll."""
        if self._exclude_rx is None or self._exclude_rx[0] != self.exclude:
            rx = re.compile("|".join(fnmatch.translate(x) for x in self.exclude) or "(?!)")
            self._exclude_rx = (self.exclude, rx.match)
        return self._exclude_rx[1]

    def followed(self) -> dict[str, int]:
        """Files followed per configured glob (0 for a glob that matches none)."""
        counts = dict.fromkeys(self.globs, 0)
        for f in self.files.values():
            if f.pattern in counts:
                counts[f.pattern] += 1
        return counts

    def discover(self) -> list[TailedFile]:
        """Re-evaluate the globs; open new files; return files that are done (to be closed).

        A glob whose walk was incomplete (a directory that could not be listed — descriptors
        exhausted, permission removed — or the entry cap) vouches for nothing: files it found
        before keep their state instead of being taken for rotated away.
        """
        now = self.clock()
        found = self.paths()
        self.deferred = 0
        incomplete = {p for p, d in self.discoveries.items() if not d.complete}
        for f in self.files.values():
            f.seen_at_path = f.pattern in incomplete and f.gone_since is None
        new: list[tuple[str, str]] = []
        waking: list[TailedFile] = []
        own_files, own_dirs = self.own()
        for path, pattern in found.items():
            try:
                st = os.stat(path)
            except OSError:
                continue  # vanished between listing and stat
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in own_files:
                continue
            tracked = self.files.get((st.st_dev, st.st_ino))
            if tracked is None and own_dirs and _in_dirs(path, own_dirs):
                continue  # the checkpoint, its temporary files, the lock
            if tracked is not None:
                if tracked.path != path and not tracked.seen_at_path:
                    tracked.path = path
                    _locate(tracked)
                tracked.seen_at_path = True
                tracked.gone_since = None
                if tracked.dormant and (st.st_size != tracked.offset or (
                        st.st_mtime_ns, st.st_ctime_ns) != tracked.seen_times):
                    waking.append(tracked)
                continue
            new.append((path, pattern))
        # Dormant files that grew get descriptors first, the longest-waiting first, as many as
        # the budget allows; the rest wait for the next poll (the daemon closes idle ones).
        room = self.max_open - self.open_count()
        for f in sorted(waking, key=lambda f: f.last_growth)[:max(0, room)]:
            self._wake(f, f.path, now)
        self.deferred += max(0, len(waking) - max(0, room))
        # New files are judged after every followed file's place is known: a copy needs an
        # original still at its path (logrotate's copytruncate leaves it there).
        for path, pattern in new:
            try:
                self._open(path, pattern, now)
            except (OSError, ValueError, OverflowError, MemoryError) as e:
                # One file that cannot be judged (a read that fails, a position the kernel
                # refuses) never stops the discovery of the others: said, tried again next poll.
                self._open_failed(path, e if isinstance(e, OSError) else OSError(0, repr(e)))
        self._first_scan = False
        self.judge(now)
        done: list[TailedFile] = []
        for key, f in list(self.files.items()):
            if f.seen_at_path:
                continue
            if f.dormant:  # no descriptor, no path: nothing left to read it by
                done.append(f)
                del self.files[key]
                continue
            if f.gone_since is None:
                f.gone_since = now
                self.notices.append(SourceNotice("rotated", f.path, "no longer at its path; "
                                                 "reading it to its end", f.pattern))
            if now - max(f.gone_since, f.last_growth) >= self.rotate_wait and f.offset >= f.size():
                done.append(f)
                del self.files[key]
        return done

    def judge(self, now: float) -> None:
        """Decide what the files waiting to be judged are, as far as they can be now: pending
        new files (maybe a copy still being written) and parked candidate copies. A file
        decided to be read is marked busy, so its next turn reads it at once."""
        for f in [f for f in self.files.values() if f.parked_for == PENDING]:
            self._settle(f, now)
        for f in [f for f in self.files.values() if f.parked_for not in (None, PENDING)]:
            self._check_parked(f, now)

    def decision_due(self, now: float) -> float | None:
        """Seconds until time alone may decide a waiting file (None: none waits): the daemon
        wakes for it, so a lookalike is read when its wait ends, not at the next poll."""
        due: float | None = None
        for f in self.files.values():
            if f.parked_for is None or (f.parked_for == PENDING and f.parked_size == 0):
                continue  # an empty new file waits for its first bytes, not for a time
            wait = PENDING_QUIET if f.parked_for == PENDING else self.rotate_wait
            left = f.parked_since + wait - now
            due = left if due is None else min(due, left)
        return due

    def _check_parked(self, f: TailedFile, now: float) -> None:
        """A parked copy is read as a new file, from its start, unless its original shrinks
        within `rotate_wait` of the copy's last growth, at its path.

        Same first bytes and same bytes before our offset make a file a candidate, not a copy:
        a crash loop that recreates `server.log` with the same launch error, two replicas with
        the same banner, a log copied in for a post-mortem all look like that. Only the
        original's truncation proves copytruncate (`check_truncation` then releases the copy at
        the original's offset).
        """
        original = self.files.get(f.parked_for) if f.parked_for is not None else None
        size = f.size()
        if size != f.parked_size:
            f.parked_size, f.parked_since = size, now  # logrotate is still writing it
        why = ""
        if original is None or original.gone_since is not None or not original.seen_at_path:
            why = "its original is no longer at its path"
        elif now - f.parked_since >= self.rotate_wait:
            why = f"its original did not shrink within {self.rotate_wait:g} s"
        if why:
            f.parked_for = None
            f.offset = 0
            f.tail = b""
            f.busy = True  # read at its next turn, not at the next sweep
            self.notices.append(SourceNotice(
                "released", f.path, f"looked like a copy of "
                f"{original.path if original else 'a followed file'}, but {why}: read as a new "
                f"file from its start", f.pattern))

    def _open(self, path: str, pattern: str, now: float) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            self._open_failed(path, e)
            return
        if path in self._unreadable:
            del self._unreadable[path]
            self.notices.append(SourceNotice("recovered", path, "readable again"))
        try:
            ident, head = _identify(fd, self.fingerprint_bytes)
            st = os.fstat(fd)
            size = st.st_size
            first = self._first_scan or path in self._deferred_at_start
            offset, how, parked_for = self._start_offset(fd, ident, size, now, first, path)
        except BaseException:
            os.close(fd)
            raise
        over_budget = self.open_count() >= self.max_open
        if over_budget and (offset < size or parked_for is not None):
            # Something to read and no descriptor to spare: not followed yet, opened again at a
            # later poll once idle files are closed (nothing of it is read before then).
            os.close(fd)
            if self._first_scan:
                self._deferred_at_start.add(path)
            self.deferred += 1
            return
        self._deferred_at_start.discard(path)
        f = TailedFile(fd=fd, identity=ident, path=path, source_id=_source_id(path, ident),
                       offset=offset, last_growth=now, parked_for=parked_for, pattern=pattern,
                       head=head, opened_at=now, parked_size=size, parked_since=now,
                       seen_size=size, seen_times=(st.st_mtime_ns, st.st_ctime_ns))
        f.tail = f.bytes_before(offset, TAIL_BYTES)
        _locate(f)
        self.files[ident.inode_key] = f
        self.notices.append(SourceNotice("opened", path, f"{how} at offset {offset}"))
        if over_budget:
            self.sleep(f, self.wall())  # at its end: followed, without a descriptor until it grows

    def _start_offset(
        self, fd: int, ident: FileIdentity, size: int, now: float, first: bool, path: str = ""
    ) -> tuple[int, str, tuple[int, int] | None]:
        entries = (self.state.files.get(k) for k in self._keys_by_inode.get(ident.inode_key, ()))
        for cp in [c for c in entries if c is not None]:
            n, h = fingerprint(fd, cp.identity.fp_len)
            if n != cp.identity.fp_len or h != cp.identity.fp_hash:
                continue  # the inode was reused by another file
            if cp.offset > size:
                return 0, "truncated while stopped: from the beginning", None
            if cp.tail_hash and _tail_hash(fd, cp.offset) != cp.tail_hash:
                continue  # same first bytes, different content before the offset
            return cp.offset, "resumed from checkpoint", None
        copy = self._copy_of(fd, size, now)
        if copy is not None:
            return copy
        if not first and self._may_become_copy(fd, size):
            return 0, "new, maybe a copy still being written: waiting", PENDING
        if first and not self.from_beginning and not self.state.loaded_from_disk:
            return _start_of_last_line(fd, size), "new at start: from the end", None
        if first and not self.from_beginning and self.state.dropped_for(ident.inode_key, path):
            # Its checkpoint entry was unusable (dropped): as after a corrupt checkpoint.
            return (_start_of_last_line(fd, size),
                    "checkpoint entry dropped: from the end, as at a first start", None)
        return 0, "new file: from the beginning", None

    def _copy_of(
        self, fd: int, size: int, now: float, skip: TailedFile | None = None
    ) -> tuple[int, str, tuple[int, int] | None] | None:
        """Is this new file a copy of one we read (copytruncate)? Then where to start.

        A copy has its original's first bytes, and the same bytes before the point where the
        copy ends or where we stopped reading the original, whichever comes first.
        """
        for other in self.files.values():
            if other is skip or other.parked_for == PENDING or not other.seen_at_path \
                    or other.gone_since is not None or other.dormant:
                continue  # copytruncate leaves the original at its path: a deleted or renamed
                # file is no original (a crash loop recreating server.log with the same bytes)
            head = (other.identity.fp_len, other.identity.fp_hash)
            if other.identity.fp_len == 0 or fingerprint(fd, other.identity.fp_len) != head:
                continue
            m = min(size, other.offset)
            if m == 0:
                continue
            if m == other.offset:  # compare with what we read, whatever the original holds now
                same = bool(other.tail) and _bytes_before(fd, m, len(other.tail)) == other.tail
                if same and _holds(other, head, m):  # the original not rewritten yet: all of it
                    # ...unless logrotate's truncate lands during the comparison (it follows the
                    # copy at once): then what we read decides, as when it came first.
                    same = _same_bytes(fd, other.fd, m) or not _holds(other, head, m)
            else:  # the copy ends before where we are: the original may be rewritten already
                same = (_bytes_before(fd, m, TAIL_BYTES) == other.bytes_before(m, TAIL_BYTES)
                        or fingerprint(other.fd, other.identity.fp_len) != head)
            if same:
                return m, f"copy of {other.path}: parked until it is truncated", \
                    other.identity.inode_key
        self._truncations = [t for t in self._truncations if now - t[4] < TRUNCATION_MEMORY]
        for ident, offset, tail, _head, _when in self._truncations:
            if ident.fp_len == 0 or fingerprint(fd, ident.fp_len) != (ident.fp_len, ident.fp_hash):
                continue
            if size < offset:
                return size, "copy of a truncated file, already read in full", None
            if _bytes_before(fd, offset, len(tail)) == tail:
                return offset, "copy of a truncated file: from where its original was read", None
        return None

    def _may_become_copy(self, fd: int, size: int) -> bool:
        """Empty, or shorter than a tracked (or just truncated) file's first bytes and a prefix of
        them: what a copy looks like while logrotate is still writing it."""
        if size >= self.fingerprint_bytes:
            return False
        have = os.pread(fd, size, 0)
        heads = [f.head for f in self.files.values() if f.parked_for != PENDING and not f.dormant]
        heads += [t[3] for t in self._truncations]
        return any(len(h) > len(have) and h.startswith(have) for h in heads)

    def _settle(self, f: TailedFile, now: float) -> None:
        """Decide what a pending new file is, once it is no longer a possible copy in progress."""
        size = f.size()
        if size != f.parked_size:
            f.parked_size, f.parked_since = size, now  # still being written
        if size == 0 or (now - f.parked_since < PENDING_QUIET
                         and self._may_become_copy(f.fd, size)):
            return
        f.identity, f.head = _identify(f.fd, self.fingerprint_bytes)
        decided = self._copy_of(f.fd, size, now, skip=f)
        offset, how, f.parked_for = decided or (0, "new file: from the beginning", None)
        f.parked_size, f.parked_since = size, now
        f.offset = offset
        f.tail = f.bytes_before(offset, TAIL_BYTES)
        f.busy = f.parked_for is None  # decided to be read: at its next turn
        self.notices.append(SourceNotice("opened", f.path, f"{how} at offset {offset}"))

    def check_truncation(self, f: TailedFile, just_read: int = 0) -> bool:
        """Copytruncate: the file shrank below our offset or its first bytes changed.

        Called before each read and after it (`just_read` bytes): a file truncated and written
        again while we read is caught by its first bytes, and what we just read is dropped.
        """
        size = f.size()
        if size < f.offset or (f.identity.fp_len and size >= f.identity.fp_len \
                and fingerprint(f.fd, f.identity.fp_len)[1] != f.identity.fp_hash):
            truncated = True
        else:
            # Truncated and rewritten past our offset between two reads, with the same first
            # bytes (a restart printing the same banner): the bytes before our offset differ
            # from the ones we read there.
            before = f.offset - just_read
            tail = f.prev_tail if just_read else f.tail
            truncated = bool(tail) and before > 0 and \
                f.bytes_before(before, len(tail)) != tail
        if truncated:
            f.offset -= just_read
            if just_read:
                f.tail = f.prev_tail  # what we just read is the new content's, not this file's
            self._truncations.append((f.identity, f.offset, f.tail, f.head, self.clock()))
            for copy in self.files.values():
                if copy.parked_for == f.identity.inode_key:
                    copy.parked_for = None
                    copy.busy = True
                    copy.offset = min(f.offset, copy.size())
                    copy.tail = copy.bytes_before(copy.offset, TAIL_BYTES)
                    self.notices.append(SourceNotice(
                        "opened", copy.path, f"copy of truncated {f.path}: reading from "
                                             f"offset {copy.offset}"))
            f.offset = 0
            f.tail = b""
            f.identity, f.head = _identify(f.fd, self.fingerprint_bytes)
            self.notices.append(SourceNotice("truncated", f.path, "restarting at offset 0",
                                             f.pattern))
        return truncated

    def refresh_identity(self, f: TailedFile) -> None:
        """Grow a short fingerprint once the file has more bytes (checkpoints keep the longest)."""
        if f.identity.fp_len < self.fingerprint_bytes and f.size() > f.identity.fp_len:
            _n, h = fingerprint(f.fd, f.identity.fp_len)
            if h == f.identity.fp_hash:
                f.identity, f.head = _identify(f.fd, self.fingerprint_bytes)

    def checkpoint(self, f: TailedFile, offset: int, now: float) -> None:
        if f.parked_for == PENDING or f.dormant:
            return  # nothing read from it yet / checkpointed when it was put to sleep
        if f.checkpointed == (f.identity.key, offset, f.path) \
                and (f.identity.fp_len >= self.fingerprint_bytes
                     or f.seen_size <= f.identity.fp_len) \
                and f.identity.key in self.state.files:
            return  # unchanged: an idle file costs nothing here (2,000 files, every second)
        self.refresh_identity(f)
        key = f.identity.key
        if f.checkpointed is None or f.checkpointed[0] != key:
            # Other entries for this inode (a shorter fingerprint of this file, or a file that
            # had the inode before) go: one entry per inode.
            keys = self._keys_by_inode.setdefault(f.identity.inode_key, set())
            for old in keys - {key}:
                self.state.files.pop(old, None)
            keys.intersection_update({key})
            keys.add(key)
        self.state.files[key] = FileCheckpoint(f.identity, offset, f.path, now,
                                               _tail_hash(f.fd, offset))
        f.checkpointed = (key, offset, f.path)
        self.changes += 1

    def open_count(self) -> int:
        return sum(1 for f in self.files.values() if not f.dormant)

    def sleep(self, f: TailedFile, now: float) -> None:
        """Close an idle file's descriptor (it stays followed, by identity, at its offset, and
        its checkpoint is taken here, while the bytes before the offset can still be read).

        The caller chooses only files read to their end with nothing held by the pipeline.
        What this costs: if the file is then renamed out of every glob or deleted before it
        grows again, lines written to it after this are not read.
        """
        if f.dormant:
            return
        self.checkpoint(f, f.offset, now)
        try:
            os.close(f.fd)
        except OSError:
            pass
        f.fd = -1

    def undecided(self) -> bool:
        """A new file waits to be judged a copy or not: that takes polls, not events."""
        return any(f.parked_for is not None for f in self.files.values())

    def wake(self, paths: set[str], now: float) -> None:
        """inotify says these paths were written: reopen the closed idle files among them that
        grew, as the budget allows (the rest wait for the next walk)."""
        room = self.max_open - self.open_count()
        for f in self.files.values():
            if room <= 0:
                break
            if f.dormant and (f.abspath in paths or f.behind_symlink):
                try:
                    st = os.stat(f.path)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == f.identity.inode_key and (
                        st.st_size != f.offset
                        or (st.st_mtime_ns, st.st_ctime_ns) != f.seen_times):
                    self._wake(f, f.path, now)
                    room -= 0 if f.dormant else 1

    def _wake(self, f: TailedFile, path: str, now: float) -> None:
        """Reopen a dormant file that changed size; the same inode at `path`, checked again."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            self._open_failed(path, e)
            return
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != f.identity.inode_key:
            os.close(fd)  # replaced between stat and open: the next poll sees the new file
            return
        f.fd = fd
        f.last_growth = now

    def _open_failed(self, path: str, e: OSError) -> None:
        why = e.strerror or str(e)
        if self._unreadable.get(path) == why:
            return
        self._unreadable[path] = why
        if e.errno in (errno.EACCES, errno.EPERM):
            why += " (grant read access; it is retried every poll)"
        elif e.errno in (errno.EMFILE, errno.ENFILE):
            why += (" (descriptors exhausted: raise LimitNOFILE / `ulimit -n`, or lower "
                    "max_open_files; it is retried every poll)")
        self.notices.append(SourceNotice("unreadable", path, why))

    def close(self, f: TailedFile) -> None:
        if not f.dormant:
            try:
                os.close(f.fd)
            except OSError:
                pass
        self.notices.append(SourceNotice("closed", f.path, f"at offset {f.offset}"))

    def close_all(self) -> None:
        for f in list(self.files.values()):
            self.close(f)
        self.files.clear()

    def take_notices(self) -> list[SourceNotice]:
        out, self.notices = self.notices, []
        return out
