"""Read positions that survive restarts: written atomically, read defensively.

The file is versioned JSON (`{"version": 1, "files": [...], "journal": {...}}`), written to a
temporary file in the same directory, fsynced, renamed over the old one, and the directory
fsynced — a crash leaves either the old or the new checkpoint, never half of one. An offset is
only ever a position the pipeline has finished with (see `Pipeline.checkpoint_offset`), so after
a crash at most the lines since the last write are read again; none are skipped.

A checkpoint file that cannot be parsed (NUL bytes after a power loss, hand edits) is moved aside
as `checkpoints.json.corrupt-<time>`, reported, and the daemon starts as if on a first run for
the files it does not know: the safe choice that never silently skips a file's content is not
available without positions, so we choose the documented one — start at the end of files present
at start (no flood of history) and at the beginning of files that appear later.

Only a regular file of at most `MAX_BYTES` is read. Whatever else sits at the name — a FIFO (a
plain read would wait forever for a writer), a symlink (to /dev/zero, say: a plain read fills
memory), a device, a directory, a file over the cap — is moved aside the same way (a symlink
itself is renamed, never followed) and the start goes on as on a corrupt file. A name `lstat`
shows is not a regular file is never opened; one that is, is opened with O_NOFOLLOW | O_NONBLOCK
(a FIFO or device swapped in meanwhile opens at once) and judged again by `fstat` of what was
opened, before a byte is read. What is lost is what a corrupt file loses: the saved positions.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matcher.atomic import write_atomic
from matcher.source.identity import FileIdentity

FORMAT_VERSION = 1
FILE_NAME = "checkpoints.json"
# 10,000 followed files make a ~2 MB checkpoint; 16 MiB is ~80,000, far past any real host, and
# small enough that reading a wrong file costs little memory.
MAX_BYTES = 16 * 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class CheckpointError(Exception):
    """Reading or writing the checkpoint failed; the message says what and where."""


@dataclass(frozen=True, slots=True)
class FileCheckpoint:
    identity: FileIdentity
    offset: int
    path: str  # where it was last seen (for people; identity decides)
    updated: float
    tail_hash: str = ""  # checksum of the 1 KiB before `offset`, checked on resume


@dataclass(slots=True)
class CheckpointState:
    files: dict[str, FileCheckpoint] = field(default_factory=dict)  # by identity key
    journal: dict[str, str] = field(default_factory=dict)  # source name → cursor
    loaded_from_disk: bool = False
    dropped: list[str] = field(default_factory=list)  # entries not used, and why
    # Whose they were: files present at start with such an entry start at their end, as on a
    # first start (a corrupt checkpoint's rule); all of them when an entry named no file.
    dropped_inodes: set[tuple[int, int]] = field(default_factory=set)
    dropped_paths: set[str] = field(default_factory=set)
    dropped_unplaced: bool = False

    # Counts the entries put that changed a position (times aside): the daemon writes the
    # checkpoint only when it moved since the last write.
    revision: int = 0
    _by_inode: dict[tuple[int, int], set[str]] | None = field(default=None, repr=False)

    def dropped_for(self, inode: tuple[int, int], path: str) -> bool:
        return self.dropped_unplaced or inode in self.dropped_inodes or path in self.dropped_paths

    def _index(self) -> dict[tuple[int, int], set[str]]:
        """Entry keys by inode (entries deleted from `files` meanwhile are skipped by users)."""
        if self._by_inode is None:
            self._by_inode = {}
            for key, cp in self.files.items():
                self._by_inode.setdefault(cp.identity.inode_key, set()).add(key)
        return self._by_inode

    def entries_for(self, inode: tuple[int, int]) -> list[FileCheckpoint]:
        """The saved entries of a file with this device and inode (this file, or one that had
        the inode before: the fingerprint tells)."""
        found = (self.files.get(k) for k in self._index().get(inode, ()))
        return [c for c in found if c is not None]

    def current(self, key: str, offset: int, path: str) -> bool:
        """The entry for `key` already holds this position and path."""
        cp = self.files.get(key)
        return cp is not None and cp.offset == offset and cp.path == path

    def put(self, cp: FileCheckpoint) -> None:
        """Save a file's position; other entries for its inode (a shorter fingerprint of the
        same file, or a file that had the inode before) go: one entry per inode."""
        key = cp.identity.key
        keys = self._index().setdefault(cp.identity.inode_key, set())
        moved = False
        for old in keys - {key}:
            moved = self.files.pop(old, None) is not None or moved
        keys.intersection_update({key})
        keys.add(key)
        was = self.files.get(key)
        self.files[key] = cp
        if moved or was is None or (was.offset, was.path, was.tail_hash) != (
                cp.offset, cp.path, cp.tail_hash):
            self.revision += 1


LOCK_NAME = "lock"
# What a start writes to prove the state dir takes data (a full filesystem takes no block).
_PROBE_BYTES = 4096


class StateDirError(Exception):
    """The state dir cannot be used: held by another daemon, or not writable. One line."""


class StateLock:
    """`flock` on `<state dir>/lock`, held for the life of the process: a second daemon on the
    same state dir would write over the first one's positions (the last writer wins, the other
    resumes from stale offsets and prints again what it printed). The file holds the holder's
    pid, for the message of the one refused; the lock, not the file, decides (a daemon killed
    with SIGKILL leaves the file and no lock)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                               0o644)
        except OSError as e:
            raise StateDirError(_unwritable(state_dir, e)) from e
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(self._fd)
            os.close(self._fd)
            raise StateDirError(
                f"state dir {state_dir} is in use by another sglang-matcher watch (pid {holder}): "
                "give each daemon its own --state-dir (or stop that one)") from None
        except OSError as e:
            os.close(self._fd)
            raise StateDirError(f"cannot lock {self.path}: {e.strerror or e}") from e
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:
            os.close(self._fd)
            raise StateDirError(_unwritable(state_dir, e)) from e

    def close(self) -> None:
        os.close(self._fd)  # the lock goes with the descriptor


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return text if text.isdigit() else "unknown"


def _unwritable(state_dir: Path, e: OSError) -> str:
    return (f"state dir {state_dir} is not writable ({e.strerror or e}): read positions could "
            "not be kept, and lines written while the daemon is stopped would be lost; fix it, "
            "choose another --state-dir, or run with --no-checkpoints (every start a first start)")


def probe_writable(state_dir: Path, *, keep: bool = True) -> None:
    """StateDirError unless a block can be written, fsynced and removed in `state_dir`: not
    writable, read-only, full. A missing state dir is made (and, unless `keep`, removed again
    with the parents made for it: `--check` leaves nothing behind)."""
    made = [p for p in (state_dir, *state_dir.parents) if not p.exists()]
    try:
        _probe(state_dir)
    finally:
        if not keep:
            for p in made:  # deepest first
                with contextlib.suppress(OSError):
                    p.rmdir()


def _probe(state_dir: Path) -> None:
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(state_dir / f".probe-{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                     | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise StateDirError(_unwritable(state_dir, e)) from e
    try:
        data = memoryview(b"\0" * _PROBE_BYTES)
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    except OSError as e:
        raise StateDirError(_unwritable(state_dir, e)) from e
    finally:
        os.close(fd)
        try:
            os.unlink(state_dir / f".probe-{os.getpid()}")
        except OSError:
            pass


class CheckpointStore:
    def __init__(self, state_dir: Path, *, enabled: bool = True) -> None:
        self.state_dir = state_dir
        self.path = state_dir / FILE_NAME
        self._saved: str | None = None  # what the last successful save held, times aside
        # `checkpoints = false`: nothing read from or written to the state dir.
        self.enabled = enabled

    def load(self) -> tuple[CheckpointState, str | None]:
        """The saved state and, if the file was unusable, why (the file is moved aside)."""
        if not self.enabled:
            return CheckpointState(), None
        try:
            raw = _read_regular(self.path, MAX_BYTES)
        except FileNotFoundError:
            return CheckpointState(), None
        except _NotACheckpoint as e:
            return CheckpointState(), self._move_aside(str(e))
        except OSError as e:
            return CheckpointState(), f"cannot read {self.path}: {e.strerror}; starting without checkpoints"
        try:
            doc = json.loads(raw.decode("utf-8"))
            state = _parse(doc)
        except (ValueError, KeyError, TypeError, OverflowError) as e:  # 1e999 is JSON too
            return CheckpointState(), self._move_aside(str(e))
        state.loaded_from_disk = True
        return state, None

    def _move_aside(self, why: str) -> str:
        """Rename whatever is at `path` (a symlink itself, never its target) to a free
        `checkpoints.json.corrupt-<time>` name; the problem to report."""
        base = self.path.with_name(f"{FILE_NAME}.corrupt-{int(time.time())}")
        aside, n = base, 0
        while os.path.lexists(aside):  # never replace the evidence of an earlier bad start
            n += 1
            aside = base.with_name(f"{base.name}.{n}")
        try:
            os.rename(self.path, aside)
            moved = f"moved to {aside}"
        except OSError as err:
            moved = f"could not move it aside: {err.strerror}"
        return (f"checkpoint file {self.path} is unreadable ({why}); {moved}; "
                "files present now start at their end, new files at their beginning")

    def save(self, state: CheckpointState) -> None:
        if not self.enabled:
            return
        # Dicts written out by hand (not `asdict`): 2,000 followed files are saved in ~5 ms.
        files = [{"dev": c.identity.dev, "ino": c.identity.ino, "fp_len": c.identity.fp_len,
                  "fp_hash": c.identity.fp_hash, "offset": c.offset, "path": c.path,
                  "updated": c.updated, "tail_hash": c.tail_hash}
                 for c in state.files.values()]
        doc = {"version": FORMAT_VERSION, "files": files, "journal": state.journal}
        # An idle daemon would rewrite (and fsync) the same positions every second: skip a save
        # that changes nothing but the `updated` times.
        same = json.dumps([[(c.identity.key, c.offset, c.path, c.tail_hash)
                            for c in state.files.values()], state.journal])
        if same == self._saved:
            return
        data = json.dumps(doc, indent=1).encode()
        try:
            write_atomic(self.path, data, durable=True)
            self._saved = same
        except OSError as e:
            raise CheckpointError(f"cannot write {self.path}: {e.strerror or e}") from e


class _NotACheckpoint(Exception):
    """Something other than a regular file of at most the cap is at the checkpoint's name."""


def _read_regular(path: Path, cap: int) -> bytes:
    """The bytes of `path` if it is a regular file of at most `cap` bytes (at most cap + 1 bytes
    are ever read, even from a file that grows while it is read); _NotACheckpoint if it is
    anything else; FileNotFoundError, or OSError for a file that cannot be opened (EACCES).

    A special file is judged by `lstat` before any open: opening some devices does something
    (a watchdog device arms the watchdog). O_NOFOLLOW and `fstat` of the open descriptor then
    decide for a name swapped in between."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _NotACheckpoint(f"{_kind(st.st_mode)}, not a regular file")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _NotACheckpoint("a symbolic link, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _NotACheckpoint(f"{_kind(st.st_mode)}, not a regular file")
        if st.st_size > cap:
            raise _NotACheckpoint(f"{st.st_size} bytes, over the {cap}-byte limit")
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise _NotACheckpoint(f"over the {cap}-byte limit")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


# The ranges a checkpoint entry's fields must be in: what a file on Linux can have (an inode, a
# device number: 64 bits; an offset: `off_t`), a fingerprint no longer than a MiB (the setting
# is 1 KiB; reading `fp_len` bytes of every file at start must stay cheap), a path no longer
# than PATH_MAX.
_U64 = 1 << 64
_MAX_OFFSET = (1 << 63) - 1
MAX_FP_LEN = 1 << 20
_MAX_PATH = 4096
_HEX = frozenset("0123456789abcdef")


def _int(item: dict[str, Any], name: str, top: int) -> int:
    v = item.get(name)
    if type(v) is not int:  # not a bool, a float or a string
        raise ValueError(f"{name} {v!r} is not an integer")
    if not 0 <= v <= top:
        raise ValueError(f"{name} {v} is out of range 0..{top}")
    return v


def _hex(item: dict[str, Any], name: str, *, empty: bool) -> str:
    v = item.get(name, "" if empty else None)
    if not isinstance(v, str) or len(v) > 64 or not set(v) <= _HEX or (not v and not empty):
        raise ValueError(f"{name} {str(v)[:80]!r} is not a checksum")
    return v


def _entry(item: Any) -> FileCheckpoint:
    """One file's entry, every field checked; ValueError says the first that is wrong."""
    if not isinstance(item, dict):
        raise ValueError(f"{type(item).__name__}, not an object")
    ident = FileIdentity(_int(item, "dev", _U64 - 1), _int(item, "ino", _U64 - 1),
                         _int(item, "fp_len", MAX_FP_LEN), _hex(item, "fp_hash", empty=False))
    offset = _int(item, "offset", _MAX_OFFSET)
    path = item.get("path", "")
    if not isinstance(path, str) or len(path) > _MAX_PATH or "\0" in path:
        raise ValueError(f"path {str(path)[:80]!r} is not a path")
    updated = item.get("updated", 0)
    if type(updated) not in (int, float) or not math.isfinite(updated):
        raise ValueError(f"updated {str(updated)[:80]!r} is not a time")
    return FileCheckpoint(ident, offset, path, float(updated),
                          _hex(item, "tail_hash", empty=True))


def _place_drop(state: CheckpointState, item: Any) -> None:
    """Remember whose a dropped entry was: its inode, its path, or neither."""
    placed = False
    if isinstance(item, dict):
        dev, ino, path = item.get("dev"), item.get("ino"), item.get("path")
        if type(dev) is int and type(ino) is int:
            state.dropped_inodes.add((dev, ino))
            placed = True
        if isinstance(path, str) and path and "\0" not in path:
            state.dropped_paths.add(path)
            placed = True
    if not placed:
        state.dropped_unplaced = True


def _parse(doc: Any) -> CheckpointState:
    """The state a checkpoint document holds. A document of the wrong shape raises (the file is
    moved aside); an entry with a field out of range is dropped and said in `dropped`, and the
    others are used: one bad entry (`fp_len` 2**40 made every start fail for want of memory;
    -1 stopped every discovery) costs only its own file's position (that file starts at its
    end, as on a first start; every file present at start does when an entry names none)."""
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"not a version {FORMAT_VERSION} checkpoint")
    files = doc["files"]
    if not isinstance(files, list):
        raise ValueError("files is not a list")
    state = CheckpointState()
    for n, item in enumerate(files):
        try:
            cp = _entry(item)
        except ValueError as e:
            where = item.get("path") if isinstance(item, dict) else None
            state.dropped.append(f"entry {n}"
                                 + (f" ({str(where)[:200]})" if isinstance(where, str) else "")
                                 + f": {e}")
            _place_drop(state, item)
            continue
        state.files[cp.identity.key] = cp
    journal = doc.get("journal") or {}
    if not isinstance(journal, dict):
        raise ValueError("journal is not an object")
    state.journal = {str(k): str(v) for k, v in journal.items()}
    return state
