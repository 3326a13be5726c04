"""Log files by glob, each followed across rotation, truncation and restarts.

What can be lost, first:
- **copytruncate**: lines written between logrotate's copy and its truncate exist only in the
  copy. If the copy matches no glob they are never read (the window is the copy's duration);
  exclude nothing the copy is named, or prefer `create` rotation.
- **rotation faster than reading while the old file is deleted**: a file rotated away is kept
  open and read to its end for `rotate_wait` seconds after its last growth, then closed so its
  space can be freed. Lines written to it later than that are not read.
- **a file closed for the descriptor budget** (`budget.py`) and renamed out of every glob or
  deleted before it grows again: the lines written to it after it was closed.
- **a line longer than `max_line_bytes`**: its head is kept, the rest dropped and counted.

How a file is followed. Files are tracked by identity (device + inode + checksum of the first
bytes, `identity.py`), not by path. Each walk of the globs (`discovery.py`; a watchdog event
wakes it early):
- a path whose inode is already tracked updates that file's name: `server.log` renamed to
  `server.log.1` is the same file and is not read again;
- a new inode at a path is a new file: rename + create rotation, delete and recreate, a symlink
  retargeted (`/var/log/containers`), a file that appears later. The old file goes on being
  read to its end, so nothing it received before the switch is lost;
- a file whose size drops below our offset, or whose first bytes change, or whose bytes before
  our offset are no longer the ones we read, was truncated in place (copytruncate): reading
  restarts at 0;
- a new file may be a copytruncate copy of a followed one (`copies.py`): it waits, then is read
  from where the original was left, or from its start.
Positions come from the checkpoint when the identity matches. A file present at the very first
start (no checkpoint state at all) starts at the end of its last complete line unless
`from_beginning`; a file that appears later — or while we were down — is read from the start.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable

from matcher.selflog import (
    FILE_CLOSED,
    FILE_OPENED,
    FILE_POLLED,
    FILE_RECOVERED,
    FILE_ROTATED,
    FILE_TRUNCATED,
    FILE_UNREADABLE,
)
from matcher.source.budget import DescriptorBudget
from matcher.source.checkpoint import CheckpointState, FileCheckpoint
from matcher.source.copies import Copies, Start
from matcher.source.discovery import DEFAULT_MAX_ENTRIES, Discovery, Finder
from matcher.source.identity import FileIdentity, fingerprint, identify, tail_hash
from matcher.source.openfile import (
    FileState,
    OpenFile,
    Parked,
    SourceNotice,
    Wait,
    display_name,
    source_id,
)

__all__ = ["FileSet", "OpenFile", "SourceNotice", "display_name"]

END_SCAN_BYTES = 64 * 1024

Ids = set[tuple[int, int]]


def _start_of_last_line(fd: int, size: int) -> int:
    """The offset just after the last newline before `size` (0 if none in the last 64 KiB)."""
    start = max(0, size - END_SCAN_BYTES)
    tail = os.pread(fd, size - start, start)
    nl = tail.rfind(b"\n")
    return start + nl + 1 if nl >= 0 else (0 if start == 0 else size)


def _in_dirs(path: str, dirs: Ids) -> bool:
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
        self.clock = clock
        self.state = state
        self.from_beginning = from_beginning
        self.finder = Finder(globs, exclude, max_entries=max_walk_entries,
                             should_stop=should_stop)
        self.files: dict[tuple[int, int], OpenFile] = {}
        self.notices: list[SourceNotice] = []
        self.copies = Copies(self.files, self._notify, fingerprint_bytes=fingerprint_bytes,
                             rotate_wait=rotate_wait)
        self.budget = DescriptorBudget(self.files, max_open)
        self._first_scan = True
        self._deferred_at_start: set[str] = set()  # found at the first start, no descriptor yet
        self._unreadable: dict[str, str] = {}
        # What the daemon writes, as (files, directories) by (device, inode): never followed,
        # however a glob spells its path (a symlinked directory, `..`, a hard link).
        self.own: Callable[[], tuple[Ids, Ids]] = lambda: (set(), set())

    # -- settings (SIGHUP changes them between walks) ------------------------------------------

    @property
    def globs(self) -> tuple[str, ...]:
        return self.finder.globs

    @property
    def fingerprint_bytes(self) -> int:
        return self.copies.fingerprint_bytes

    @property
    def rotate_wait(self) -> float:
        return self.copies.rotate_wait

    @property
    def max_open(self) -> int:
        return self.budget.max_open

    def configure(self, globs: tuple[str, ...], exclude: tuple[str, ...], *,
                  fingerprint_bytes: int, rotate_wait: float, max_walk_entries: int,
                  max_open: int) -> None:
        self.finder.globs, self.finder.exclude = globs, exclude
        self.finder.max_entries = max_walk_entries
        self.copies.fingerprint_bytes, self.copies.rotate_wait = fingerprint_bytes, rotate_wait
        self.budget.max_open = max_open

    # -- discovery ----------------------------------------------------------------------------

    @property
    def discoveries(self) -> dict[str, Discovery]:
        return self.finder.discoveries

    @property
    def deferred(self) -> int:
        return self.budget.deferred

    def paths(self) -> dict[str, str]:
        """Matching paths, each with the configured glob that found it (`Finder.find`)."""
        return self.finder.find()

    def followed(self) -> dict[str, int]:
        """Files followed per configured glob (0 for a glob that matches none)."""
        counts = dict.fromkeys(self.globs, 0)
        for f in self.files.values():
            if f.pattern in counts:
                counts[f.pattern] += 1
        return counts

    def discover(self) -> list[OpenFile]:
        """Re-evaluate the globs; open new files; return files that are done (to be closed).

        A glob whose walk was incomplete (a directory that could not be listed — descriptors
        exhausted, permission removed — or the entry cap) vouches for nothing: files it found
        before keep their state instead of being taken for rotated away.
        """
        now = self.clock()
        found = self.paths()
        self.budget.deferred = 0
        incomplete = self.finder.incomplete()
        for f in self.files.values():
            f.seen_at_path = f.pattern in incomplete and f.gone_since is None
        new, waking = self._place(found)
        # Dormant files that grew get descriptors first, the longest-waiting first, as many as
        # the budget allows; the rest wait for the next walk (the daemon closes idle ones).
        room = max(0, self.budget.room())
        for f in sorted(waking, key=lambda f: f.last_growth)[:room]:
            self._reopen(f, now)
        self.budget.deferred += max(0, len(waking) - room)
        # New files are judged after every followed file's place is known: a copy needs an
        # original still at its path (logrotate's copytruncate leaves it there).
        for path, pattern in new:
            try:
                self._open(path, pattern, now)
            except (OSError, ValueError, OverflowError, MemoryError) as e:
                # One file that cannot be judged (a read that fails, a position the kernel
                # refuses) never stops the discovery of the others: said, tried again next walk.
                self._open_failed(path, e if isinstance(e, OSError) else OSError(0, repr(e)))
        self._first_scan = False
        self.judge(now)
        return self._done(now)

    def _place(self, found: dict[str, str]) -> tuple[list[tuple[str, str]], list[OpenFile]]:
        """Match the walk's paths with the followed files: the new paths (with their glob),
        and the dormant files that changed since they were closed."""
        new: list[tuple[str, str]] = []
        waking: list[OpenFile] = []
        own_files, own_dirs = self.own()
        for path, pattern in found.items():
            try:
                st = os.stat(path)
            except OSError:
                continue  # vanished between listing and stat
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in own_files:
                continue
            tracked = self.files.get((st.st_dev, st.st_ino))
            if tracked is None:
                if not (own_dirs and _in_dirs(path, own_dirs)):  # the checkpoint, the lock
                    new.append((path, pattern))
                continue
            if tracked.path != path and not tracked.seen_at_path:
                tracked.path = path
                tracked.locate()
            tracked.seen_at_path = True
            tracked.gone_since = None
            if tracked.dormant and (st.st_size != tracked.state.offset or (
                    st.st_mtime_ns, st.st_ctime_ns) != tracked.seen_times):
                waking.append(tracked)
        return new, waking

    def _done(self, now: float) -> list[OpenFile]:
        """Files no longer at their path that are read to their end and quiet for
        `rotate_wait` (or dormant: nothing left to read them by), taken out of the set."""
        done: list[OpenFile] = []
        for key, f in list(self.files.items()):
            if f.seen_at_path:
                continue
            if f.dormant:
                done.append(f)
                del self.files[key]
                continue
            if f.gone_since is None:
                f.gone_since = now
                self.notices.append(SourceNotice(FILE_ROTATED, f.path, "no longer at its path; "
                                                 "reading it to its end", f.pattern))
            if now - max(f.gone_since, f.last_growth) >= self.rotate_wait \
                    and f.state.offset >= f.size():
                done.append(f)
                del self.files[key]
        return done

    def judge(self, now: float) -> None:
        """Decide what the files waiting to be judged are, as far as they can be now
        (`Copies.judge`)."""
        self.copies.judge(now)

    def decision_due(self, now: float) -> float | None:
        """Seconds until time alone may decide a waiting file (None: none waits): the daemon
        wakes for it, so a lookalike is read when its wait ends, not at the next poll."""
        return self.copies.decision_due(now)

    def undecided(self) -> bool:
        """A new file waits to be judged a copy or not: that takes polls, not events."""
        return any(f.parked is not None for f in self.files.values())

    # -- a new file -----------------------------------------------------------------------------

    def _open(self, path: str, pattern: str, now: float) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            self._open_failed(path, e)
            return
        if path in self._unreadable:
            del self._unreadable[path]
            self.notices.append(SourceNotice(FILE_RECOVERED, path, "readable again"))
        try:
            ident, head = identify(fd, self.fingerprint_bytes)
            st = os.fstat(fd)
            first = self._first_scan or path in self._deferred_at_start
            start = self._start(fd, ident, st.st_size, now, first, path)
        except BaseException:
            os.close(fd)
            raise
        over_budget = self.budget.full()
        if over_budget and (start.offset < st.st_size or start.wait is not None):
            # Something to read and no descriptor to spare: not followed yet, opened again at a
            # later walk once idle files are closed (nothing of it is read before then).
            os.close(fd)
            if self._first_scan:
                self._deferred_at_start.add(path)
            self.budget.deferred += 1
            return
        self._deferred_at_start.discard(path)
        f = OpenFile(fd=fd, state=FileState(ident, head, 0), path=path,
                     source_id=source_id(path, ident), pattern=pattern, last_growth=now,
                     seen_size=st.st_size, seen_times=(st.st_mtime_ns, st.st_ctime_ns))
        if start.wait is not None:
            f.parked = Parked(start.wait, st.st_size, now, start.original)
        f.start_at(start.offset)
        self.files[ident.inode_key] = f
        self.notices.append(SourceNotice(FILE_OPENED, path,
                                         f"{start.how} at offset {start.offset}"))
        if f.hard_linked:
            self.notices.append(SourceNotice(
                FILE_POLLED, path, "also named elsewhere (a hard link): writes through that name "
                "are no inotify event here, so it is read every poll"))
        if over_budget:
            self.sleep(f, self.wall())  # at its end: followed, without a descriptor until it grows

    def _start(self, fd: int, ident: FileIdentity, size: int, now: float, first: bool,
               path: str) -> Start:
        """Where reading a file found by a walk begins: its checkpoint, a copy's place, or by
        the start rules (its end at the very first start, its beginning otherwise)."""
        for cp in self.state.entries_for(ident.inode_key):
            if cp.identity.fp_len == 0:
                # Saved while its file was empty: no bytes to tell that file from a new one
                # with its inode (a copytruncate copy made after the empty log was deleted
                # would be resumed at 0 instead of judged a copy, and read again in full).
                continue
            n, h = fingerprint(fd, cp.identity.fp_len)
            if n != cp.identity.fp_len or h != cp.identity.fp_hash:
                continue  # the inode was reused by another file
            if cp.offset > size:
                return Start(0, "truncated while stopped: from the beginning")
            if cp.tail_hash and tail_hash(fd, cp.offset) != cp.tail_hash:
                continue  # same first bytes, different content before the offset
            return Start(cp.offset, "resumed from checkpoint")
        copy = self.copies.copy_of(fd, size, now)
        if copy is not None:
            return copy
        if not first and self.copies.may_become_copy(fd, size):
            return Start(0, "new, maybe a copy still being written: waiting", Wait.MAYBE_COPY)
        if first and not self.from_beginning and not self.state.loaded_from_disk:
            return Start(_start_of_last_line(fd, size), "new at start: from the end")
        if first and not self.from_beginning \
                and self.state.dropped_for(ident.inode_key, path):
            # Its checkpoint entry was unusable (dropped): as after a corrupt checkpoint.
            return Start(_start_of_last_line(fd, size),
                         "checkpoint entry dropped: from the end, as at a first start")
        return Start(0, "new file: from the beginning")

    # -- reading ------------------------------------------------------------------------------

    def check_truncation(self, f: OpenFile, just_read: int = 0) -> bool:
        """Copytruncate: the file shrank below our offset or its first bytes changed.

        Called before each read and after it (`just_read` bytes): a file truncated and written
        again while we read is caught by its first bytes, and what we just read is dropped.
        """
        s = f.state
        size = f.size()
        if size < s.offset or (s.identity.fp_len and size >= s.identity.fp_len
                               and fingerprint(f.fd, s.identity.fp_len)[1] != s.identity.fp_hash):
            truncated = True
        else:
            # Truncated and rewritten past our offset between two reads, with the same first
            # bytes (a restart printing the same banner): the bytes before our offset differ
            # from the ones we read there.
            before = s.offset - just_read
            tail = s.prev_tail if just_read else s.tail
            truncated = bool(tail) and before > 0 and f.bytes_before(before, len(tail)) != tail
        if not truncated:
            return False
        s.offset -= just_read
        if just_read:
            s.tail = s.prev_tail  # what we just read is the new content's, not this file's
        self.copies.truncated(f, self.clock())
        f.start_at(0)
        s.identity, s.head = identify(f.fd, self.fingerprint_bytes)
        self.notices.append(SourceNotice(FILE_TRUNCATED, f.path, "restarting at offset 0",
                                         f.pattern))
        return True

    def refresh_identity(self, f: OpenFile) -> None:
        """Grow a short fingerprint once the file has more bytes (checkpoints keep the longest)."""
        s = f.state
        if s.identity.fp_len < self.fingerprint_bytes and f.size() > s.identity.fp_len:
            _n, h = fingerprint(f.fd, s.identity.fp_len)
            if h == s.identity.fp_hash:
                s.identity, s.head = identify(f.fd, self.fingerprint_bytes)

    # -- positions ----------------------------------------------------------------------------

    def saved_at(self, f: OpenFile, offset: int) -> bool:
        """The checkpoint already holds `f` at `offset` (and its fingerprint cannot grow)."""
        ident = f.state.identity
        return self.state.current(ident.key, offset, f.path) and (
            ident.fp_len >= self.fingerprint_bytes or f.seen_size <= ident.fp_len)

    def checkpoint(self, f: OpenFile, offset: int, now: float) -> None:
        """Put `f`'s position in the checkpoint state (the store decides what changed)."""
        if f.parked is not None or f.dormant:
            # Parked: nothing read from it yet, and its offset is where it would be read from
            # if it proves a copy — a restart judges it again (saved there, a lookalike was
            # resumed past its head). Dormant: checkpointed when it was put to sleep.
            return
        if self.saved_at(f, offset):
            return  # unchanged: an idle file costs nothing here (thousands of files, each turn)
        self.refresh_identity(f)
        self.state.put(FileCheckpoint(f.state.identity, offset, f.path, now,
                                      tail_hash(f.fd, offset)))

    # -- descriptors ----------------------------------------------------------------------------

    def open_count(self) -> int:
        return self.budget.open_count()

    def sleep(self, f: OpenFile, now: float) -> None:
        """Close an idle file's descriptor (it stays followed, by identity, at its offset, and
        its checkpoint is taken here, while the bytes before the offset can still be read).
        The caller chooses only files read to their end with nothing held by the pipeline."""
        if f.dormant:
            return
        self.checkpoint(f, f.state.offset, now)
        self.budget.close(f)

    def wake(self, paths: set[str], now: float) -> None:
        """inotify says these paths were written: reopen the closed idle files among them that
        changed, as the budget allows (the rest wait for the next walk)."""
        room = self.budget.room()
        if room <= 0:
            return
        for f in self.budget.written(paths):
            self._reopen(f, now)
            room -= 0 if f.dormant else 1
            if room <= 0:
                break

    def _reopen(self, f: OpenFile, now: float) -> None:
        try:
            self.budget.reopen(f, now)
        except OSError as e:
            self._open_failed(f.path, e)

    # -- notices and closing --------------------------------------------------------------------

    def _notify(self, notice: SourceNotice) -> None:
        self.notices.append(notice)

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
        self.notices.append(SourceNotice(FILE_UNREADABLE, path, why))

    def close(self, f: OpenFile) -> None:
        self.budget.close(f)
        self.notices.append(SourceNotice(FILE_CLOSED, f.path, f"at offset {f.state.offset}"))

    def close_all(self) -> None:
        for f in list(self.files.values()):
            self.close(f)
        self.files.clear()

    def take_notices(self) -> list[SourceNotice]:
        out, self.notices = self.notices, []
        return out
