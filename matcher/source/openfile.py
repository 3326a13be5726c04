"""One followed file: what is known of its content (`FileState`), apart from the open file
that is read (`OpenFile`: descriptor, path, turn-taking) and from a wait (`Parked`).

`FileState` is what survives a restart through the checkpoint: the identity, the offset and
the bytes just before it (their checksum is the saved tail hash). Everything else in
`OpenFile` is rebuilt when the file is found again.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field

from matcher.selflog import Notice
from matcher.source.identity import TAIL_BYTES, FileIdentity, bytes_before


@dataclass(frozen=True, slots=True)
class SourceNotice:
    """Something about a source the operator may want to know; the daemon logs and counts it."""

    notice: Notice  # one of `selflog`'s FILE_* notices
    path: str
    detail: str = ""
    pattern: str = ""


@dataclass(slots=True)
class FileState:
    """Which file, and how far it has been read."""

    identity: FileIdentity
    head: bytes  # the fingerprinted first bytes: recognizes a copy still being written
    offset: int  # the next byte to read
    tail: bytes = b""  # the last bytes read: recognizes a copy of this file
    prev_tail: bytes = b""  # `tail` before the last read: restored if that read is disowned

    def advance(self, data: bytes) -> None:
        self.prev_tail = self.tail
        self.offset += len(data)
        self.tail = (self.tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]


class Wait(enum.Enum):
    """Why a followed file is not read yet."""

    MAYBE_COPY = "maybe a copy still being written"  # empty, or a prefix of a followed file
    COPY = "a copy waiting for its original's truncation"


@dataclass(slots=True)
class Parked:
    why: Wait
    size: int  # its size when last looked at: a copy still being written grows
    since: float  # when it was parked, or last grew while parked
    original: tuple[int, int] | None = None  # COPY: the original's device and inode


@dataclass(slots=True)
class OpenFile:
    """A followed file. `fd` < 0: closed to stay under the descriptor budget (dormant)."""

    fd: int
    state: FileState
    path: str
    source_id: str  # unique per file: the pipeline keeps its per-source state under it
    pattern: str  # the configured glob that found it: the `source` label of its metrics
    last_growth: float
    parked: Parked | None = None
    seen_at_path: bool = True  # found at its path by the last walk
    gone_since: float | None = None  # first walk that did not find it
    pending_partial_since: float | None = None  # an unfinished last line waits since
    utf8_carry: bytes = b""  # an unfinished UTF-8 character at the end of the last read
    seen_size: int = 0  # its size when last looked at (read lag without another fstat)
    # (mtime, ctime) in ns when last looked at: an idle file whose times moved while its size
    # stayed at our offset may have been rewritten
    seen_times: tuple[int, int] = (0, 0)
    busy: bool = True  # read something at its last turn: it gets the next one too
    abspath: str = field(default="", init=False)  # what inotify's events name
    # inotify on its directory cannot vouch for its writes: it is reached through a symlink,
    # or also named elsewhere (a hard link written through the other name)
    unwatched: bool = field(default=False, init=False)
    hard_linked: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.locate()

    @property
    def dormant(self) -> bool:
        """Closed to stay under the descriptor budget; reopened by identity when it grows."""
        return self.fd < 0

    @property
    def maybe_copy(self) -> bool:
        return self.parked is not None and self.parked.why is Wait.MAYBE_COPY

    @property
    def candidate_copy(self) -> bool:
        return self.parked is not None and self.parked.why is Wait.COPY

    def locate(self) -> None:
        """Where inotify will name this file, and whether it can: not through a symlink, and
        not when the file has another name (writes through it are events of that directory)."""
        self.abspath = os.path.abspath(self.path)
        try:
            self.hard_linked = os.fstat(self.fd).st_nlink > 1 if self.fd >= 0 else self.hard_linked
        except OSError:
            pass
        self.unwatched = self.hard_linked or os.path.islink(self.path) or os.path.realpath(
            os.path.dirname(self.abspath)) != os.path.dirname(self.abspath)

    def read(self, max_bytes: int) -> bytes:
        data = os.pread(self.fd, max_bytes, self.state.offset)
        if data:
            self.state.advance(data)
        return data

    def bytes_before(self, offset: int, length: int) -> bytes:
        return bytes_before(self.fd, offset, length)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def start_at(self, offset: int) -> None:
        """Read from `offset` on, in the content that is there now."""
        self.state.offset = offset
        self.state.tail = self.bytes_before(offset, TAIL_BYTES) if offset else b""

    def look(self) -> bool:
        """One fstat: note the size; True when the file changed without growing past our
        offset (its times moved while its size is our offset: truncated and rewritten to the
        very length we had read, as a copytruncate of a log that is then refilled can be)."""
        st = os.fstat(self.fd)
        times = (st.st_mtime_ns, st.st_ctime_ns)
        moved, self.seen_times = times != self.seen_times, times
        self.seen_size = st.st_size
        return moved and st.st_size == self.state.offset


def source_id(path: str, identity: FileIdentity) -> str:
    return f"{path}#{identity.dev}:{identity.ino}"


def display_name(source_id: str) -> str:
    """The path part of a source id, for events and logs."""
    return source_id.rsplit("#", 1)[0]
