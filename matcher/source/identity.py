"""Which file is this? Device and inode, confirmed by a checksum of the file's first bytes.

A path is not a file: rotation gives the path a new file, and the old file lives on under another
name (`server.log.1`) that may match the same glob. Device + inode name a file while it exists,
but the kernel reuses an inode number once a file is deleted, so a checkpoint written for a
deleted file could be applied to an unrelated new one. The checksum of the first
`fingerprint_bytes` bytes (1 KiB by default) tells them apart: a new file with a reused inode has
other first bytes. A file shorter than that is fingerprinted over what it has, and the length is
kept, so the same file still matches once it has grown.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

DEFAULT_FINGERPRINT_BYTES = 1024


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


def fingerprint(fd: int, length: int) -> tuple[int, str]:
    """Checksum of the first `length` bytes (fewer if the file is shorter): (bytes read, hash)."""
    data = os.pread(fd, length, 0)
    return len(data), hashlib.sha256(data).hexdigest()[:16]


def identify(fd: int, fingerprint_bytes: int = DEFAULT_FINGERPRINT_BYTES) -> FileIdentity:
    st = os.fstat(fd)
    n, h = fingerprint(fd, fingerprint_bytes)
    return FileIdentity(st.st_dev, st.st_ino, n, h)


def same_file(fd: int, known: FileIdentity) -> bool:
    """Is the open file the one `known` describes (same inode and same first bytes)?"""
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != known.inode_key:
        return False
    n, h = fingerprint(fd, known.fp_len)
    return n == known.fp_len and h == known.fp_hash
