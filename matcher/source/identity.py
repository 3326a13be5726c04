"""Which file is this? Device and inode, confirmed by a checksum of the file's first bytes.

A path is not a file: rotation gives the path a new file, and the old file lives on under another
name (`server.log.1`) that may match the same glob. Device + inode name a file while it exists,
but the kernel reuses an inode number once a file is deleted, so a checkpoint written for a
deleted file could be applied to an unrelated new one. The checksum of the first
`fingerprint_bytes` bytes (1 KiB by default) tells them apart: a new file with a reused inode has
other first bytes. A file shorter than that is fingerprinted over what it has, and the length is
kept, so the same file still matches once it has grown.

The checksum of the `TAIL_BYTES` before a position (the tail hash) says whether a position
still lies in the content it was taken in: a checkpoint resumes only where it matches.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

DEFAULT_FINGERPRINT_BYTES = 1024
TAIL_BYTES = 1024


@dataclass(frozen=True, slots=True)
class FileIdentity:
    dev: int
    ino: int
    fp_len: int
    fp_hash: str

    @property
    def inode_key(self) -> tuple[int, int]:
        return (self.dev, self.ino)

    @property
    def key(self) -> str:
        return f"{self.dev}:{self.ino}:{self.fp_len}:{self.fp_hash}"

    @property
    def head_key(self) -> tuple[int, str]:
        """What `fingerprint` returns for a file that still has these first bytes."""
        return (self.fp_len, self.fp_hash)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def fingerprint(fd: int, length: int) -> tuple[int, str]:
    """Checksum of the first `length` bytes (fewer if the file is shorter): (bytes read, hash)."""
    data = os.pread(fd, length, 0)
    return len(data), _digest(data)


def identify(fd: int, length: int = DEFAULT_FINGERPRINT_BYTES) -> tuple[FileIdentity, bytes]:
    """The open file's identity over its first `length` bytes, and those bytes (a copy still
    being written is a prefix of them)."""
    head = os.pread(fd, length, 0)
    st = os.fstat(fd)
    return FileIdentity(st.st_dev, st.st_ino, len(head), _digest(head)), head


def holds_head(fd: int, identity: FileIdentity) -> bool:
    """The open file still has the first bytes `identity` was taken over."""
    return fingerprint(fd, identity.fp_len) == identity.head_key


def bytes_before(fd: int, offset: int, length: int) -> bytes:
    """Up to `length` bytes just before `offset`."""
    start = max(0, offset - length)
    return os.pread(fd, offset - start, start)


def tail_hash(fd: int, offset: int) -> str:
    """Checksum of the bytes just before `offset`: a checkpoint resumes only where they match."""
    return _digest(bytes_before(fd, offset, TAIL_BYTES))


def same_bytes(a: int, b: int, length: int, block: int = 1 << 20) -> bool:
    """The first `length` bytes of two open files are equal (read a block at a time)."""
    pos = 0
    while pos < length:
        n = min(block, length - pos)
        if os.pread(a, n, pos) != os.pread(b, n, pos):
            return False
        pos += n
    return True
