"""What `scan` reads: the paths it is given made into log files, and each opened as its text.

A post-mortem is seldom one file. A node's `/var/log/sglang` holds `server.log` and its
rotations, some compressed by logrotate (`server.log.2.gz`); `/var/log/pods/<pod>/<container>/`
holds kubelet's `0.log` and its rotations (`0.log.20261201-120000.gz`, all but the newest
compressed); a CI job's artifacts are a tree of logs beside wheels and images. So:

- A directory is walked (`discovery`: each directory once, symlink loops and listing failures
  said, hidden entries skipped). A file reached by two paths (a `/var/log/containers` symlink
  and its `/var/log/pods` target) is read once, by the first path the walk meets.
- The files of one directory are read in the order they were written: a log's rotations
  oldest first — `server.log.3.gz`, `server.log.2.gz`, `server.log.1`, then `server.log`;
  dated ones (`server.log-20261201`, `0.log.20261201-120000.gz`) by their date — so events
  come out in the order the log has them.
- gzip, bzip2 and xz files are read decompressed, told by their first bytes, not their names.
  Data that stops or is damaged part way (a copy cut short, a crash while compressing) gives
  what came before it, and the file is named as not read whole (`Decompressed.damaged`).
- A file found in a directory that is not text (an image, a wheel, a core dump: a tenth of
  its first 8 KiB neither text nor UTF-8, after any run of NUL bytes a `copytruncate` leaves
  at its start) is skipped and named, as ripgrep skips binary files it was not given by name.
  A file given by name is always read; zstd, which Python 3.11 cannot read, is named with
  the command that reads it.
- A zip or tar archive (a CI job's artifacts as downloaded) is not read, given by name or
  found: the message gives the command that unpacks it. Read as text, a zip's compressed
  members would give nothing, and "No sglang errors found" would be a false all-clear.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from matcher.source import discovery

# The first bytes of each compressed format Python reads (RFC 1952, bzip2, the xz format).
MAGIC = {"gzip": b"\x1f\x8b", "bzip2": b"BZh", "xz": b"\xfd7zXZ\x00"}
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
HEAD_BYTES = max(len(m) for m in (*MAGIC.values(), ZSTD_MAGIC))
# Archives, which are not read (`_archive`): a zip's first bytes (or an empty zip's), and the
# POSIX tar header's magic at its offset in the first block (ustar and GNU tar both).
ZIP_MAGIC, ZIP_EMPTY_MAGIC = b"PK\x03\x04", b"PK\x05\x06"
TAR_MAGIC, TAR_MAGIC_AT = b"ustar", 257
# How much of a file found in a directory is looked at to tell text from binary.
SAMPLE_BYTES = 8192
# Leading NUL bytes skipped before that sample (a `copytruncate` under a writer that does not
# append leaves its old size as a hole); a file that is all NULs this far is read.
MAX_LEADING_NULS = 64 << 20
# A read of compressed data: small, so that damage loses at most this much before it.
_STEP = 64 << 10

# A rotation's suffix after the log's own name: a date (logrotate's `dateext`, kubelet's,
# Python's TimedRotatingFileHandler) or a generation number (logrotate, RotatingFileHandler);
# then the compressor's extension, if any.
_ROTATED = re.compile(
    r"(?P<stem>.+?)(?:[.-](?P<date>\d{4}-?\d\d-?\d\d(?:[-_T]?\d\d(?:[-:]?\d\d){0,2})?)"
    r"|\.(?P<generation>\d{1,6}))(?:\.(?:gz|bz2|xz|zst))?")
_COMPRESSED_NAME = re.compile(r"(?P<stem>.+)\.(?:gz|bz2|xz|zst)")


class NotReadable(ValueError):
    """A file this program cannot read as text; the message says what reads it."""


@dataclass(frozen=True, slots=True)
class Found:
    """The files a `scan` reads, in order, and what it found but will not read."""

    paths: tuple[str, ...]
    skipped: tuple[str, ...] = ()  # found in a directory, not read: "PATH: why"
    unreadable: tuple[str, ...] = ()  # found, cannot be listed or opened: "PATH: why"


def find(inputs: Sequence[str]) -> Found:
    """`inputs` as `scan` reads them: files (and "-", stdin) as given, directories walked.
    A named file that does not exist is kept: opening it says what is wrong."""
    paths: list[str] = []
    skipped: list[str] = []
    unreadable: list[str] = []
    seen: set[tuple[int, int]] = set()
    for name in inputs:
        if name == "-" or not os.path.isdir(name):
            # (a pipe is not looked into: what is read from it would be gone; a file that
            # cannot be opened is said so when it is read)
            with contextlib.suppress(OSError):
                if os.path.isfile(name) and (why := _archive(name)) is not None:
                    raise NotReadable(f"{name}: {why}")
            paths.append(name)
            continue
        walk = discovery.expand(os.path.join(name, "**"))
        unreadable += walk.problems
        if walk.capped:
            unreadable.append(f"{name}: more than {discovery.DEFAULT_MAX_ENTRIES:,} entries; "
                              "the rest not listed (give its subdirectories)")
        for path in _in_written_order(walk.paths):
            try:
                st = os.stat(path)
                if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                why = _not_text(path)
            except FileNotFoundError:
                # A dangling symlink (/var/log/containers keeps them for deleted pods), or a
                # file removed since the walk: nothing there to read.
                skipped.append(f"{path}: {'dangling symlink' if os.path.islink(path) else 'gone'}")
                continue
            except OSError as e:
                unreadable.append(f"{path}: {e.strerror or e}")
                continue
            if why:
                skipped.append(f"{path}: {why}")
            else:
                paths.append(path)
    return Found(tuple(paths), tuple(skipped), tuple(unreadable))


def rotation_key(name: str) -> tuple[str, int, Any]:
    """Sorts a directory's file names so that each log's rotations come oldest first and the
    log itself last: (the log's name, 0 dated / 1 numbered / 2 the log, the order within)."""
    m = _ROTATED.fullmatch(name)
    if m is None:
        plain = _COMPRESSED_NAME.fullmatch(name)
        return (plain["stem"] if plain else name, 2, 0)
    if m["date"] is not None:
        return (m["stem"], 0, re.sub(r"\D", "", m["date"]))
    return (m["stem"], 1, -int(m["generation"]))


def _in_written_order(paths: Sequence[str]) -> list[str]:
    """The walk's paths with each directory's files in `rotation_key` order; the directories
    in the walk's order."""
    by_dir: dict[str, list[str]] = {}
    for path in paths:
        by_dir.setdefault(os.path.dirname(path), []).append(path)
    return [p for files in by_dir.values()
            for p in sorted(files, key=lambda p: rotation_key(os.path.basename(p)))]


def compression(head: bytes, path: str) -> str | None:
    """The compressed format of the file `path` whose first bytes are `head` (None: it is
    not compressed); NotReadable for zstd, which Python 3.11 cannot read."""
    for name, magic in MAGIC.items():
        if head.startswith(magic):
            return name
    if head.startswith(ZSTD_MAGIC):
        raise NotReadable(f"{path}: zstd-compressed, which this Python cannot read; read it "
                          f"with `zstd -dc {path} | sglang-matcher scan -`")
    return None


def _archive(path: str) -> str | None:
    """What to do with `path` if it is a zip or tar archive (a CI job's artifacts as
    downloaded): read as text, its members would run together between binary headers, and a
    zip's compressed members would read as nothing at all ("No sglang errors found")."""
    with open_log(path) as f:
        return _archive_head(path, f.read(SAMPLE_BYTES), isinstance(f, Decompressed))


def _archive_head(path: str, head: bytes, compressed: bool) -> str | None:
    """`_archive` from the file's first (decompressed) bytes: a zip's magic at its start (of a
    file as it is: a zip is not gzip), a tar header's at its offset in the first block."""
    if not compressed and head[:len(ZIP_MAGIC)] in (ZIP_MAGIC, ZIP_EMPTY_MAGIC):
        return (f"a zip archive, which scan does not unpack: `unzip -d DIR {path}`, then "
                "`sglang-matcher scan DIR`")
    if head[TAR_MAGIC_AT:TAR_MAGIC_AT + len(TAR_MAGIC)] == TAR_MAGIC:
        return (f"a tar archive, which scan does not unpack: `mkdir DIR && tar -xf {path} "
                "-C DIR`, then `sglang-matcher scan DIR`")
    return None


def _not_text(path: str) -> str | None:
    """Why a file found in a directory is not read, or None: it is text. (One open for both
    checks: a directory of 10,000 logs was opened three times over for them.)"""
    try:
        with open_log(path) as f:
            head = f.read(SAMPLE_BYTES)
            if (why := _archive_head(path, head, isinstance(f, Decompressed))) is not None:
                return why
            sample = _sample(f, head)
    except NotReadable as e:
        return str(e).removeprefix(f"{path}: ")
    return "binary; give it by name to read it anyway" if looks_binary(sample) else None


# Characters a text log does not hold: the C0 controls but tab, newline, CR, form feed,
# backspace and ESC (colours), and DEL; with U+FFFD, what invalid UTF-8 decodes to.
_ODD_BYTES = bytes(b for b in range(0x20) if chr(b) not in "\t\n\r\f\b\x1b") + b"\x7f"


def looks_binary(sample: bytes) -> bool:
    """Whether over a tenth of `sample`'s characters (decoded as UTF-8, invalid bytes replaced)
    are not text. Counted at C speed: a byte below 0x80 decodes to itself whatever surrounds
    it, so the controls are counted on the bytes (a loop over the characters took a
    millisecond a file: 11 of 12 s of `scan` of a directory of 10,000 logs)."""
    text = sample.decode("utf-8", "replace")
    odd = text.count("\ufffd") + len(sample) - len(sample.translate(None, _ODD_BYTES))
    return odd * 10 > len(text)


def _sample(f: io.BufferedReader | Decompressed, block: bytes) -> bytes:
    """The first `SAMPLE_BYTES` after any leading run of NUL bytes (up to `MAX_LEADING_NULS`),
    `block` being the file's first `SAMPLE_BYTES`, read already."""
    skipped = 0
    while skipped < MAX_LEADING_NULS:
        rest = block.lstrip(b"\0")
        if rest or not block:
            return rest + f.read(SAMPLE_BYTES - len(rest)) if rest else b""
        skipped += len(block)
        block = f.read(SAMPLE_BYTES)
    return b""


def open_log(path: str) -> io.BufferedReader | Decompressed:
    """`path` opened for reading its text: a plain file as it is, a gzip, bzip2 or xz file
    decompressed (`Decompressed`). OSError when it cannot be opened; NotReadable for zstd."""
    f = open(path, "rb")  # noqa: SIM115 - returned open
    try:
        kind = compression(f.peek(HEAD_BYTES)[:HEAD_BYTES], path)
    except BaseException:
        f.close()
        raise
    return f if kind is None else Decompressed(f, kind, path)


def open_stdin(stream: BinaryIO) -> BinaryIO | Decompressed:
    """Standard input, decompressed when what it starts with says it is compressed."""
    peek = getattr(stream, "peek", None)
    kind = compression(peek(HEAD_BYTES)[:HEAD_BYTES], "<stdin>") if peek else None
    return stream if kind is None else Decompressed(stream, kind, "<stdin>", owns_raw=False)


def on_disk(stream: object, read: int) -> int:
    """How much of its file `stream` has consumed, having given `read` bytes of log: the
    compressed bytes it took for a `Decompressed`, `read` itself otherwise."""
    return stream.consumed if isinstance(stream, Decompressed) else read


def shrank(stream: object, read: int) -> str | None:
    """Why a plain file whose reads came to an end was not read whole: it now holds fewer
    bytes than the `read` ones given — truncated while it was read (logrotate's
    `copytruncate` on a live node), so what followed them is gone. None when it is not so,
    and for what is compressed or not a regular file."""
    if isinstance(stream, Decompressed):
        return None
    try:
        st = os.fstat(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation is both)
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size >= read:
        return None
    return truncated(f"{read:,} bytes read", st.st_size)


def truncated(was: str, now: int) -> str:
    """What `scan` says of a file truncated while read (`was`: how much there was)."""
    return (f"truncated while read (logrotate's copytruncate?): {was}, {now:,} bytes there "
            "now; what followed was not read")


class Decompressed(io.RawIOBase):
    """A compressed file's text. `read(n)` gives n bytes until the end, as a file does, so
    that `scan -j 1` and a worker of `scan -j N` cut it into the same reads; where the data
    stops early or is damaged it ends there instead, keeping everything decompressed before,
    and `damaged` says what happened and after how many bytes."""

    def __init__(self, raw: BinaryIO, kind: str, name: str, *, owns_raw: bool = True) -> None:
        super().__init__()
        self.kind = kind
        self.name = name
        self.damaged: str | None = None
        self._raw = raw
        self._owns_raw = owns_raw  # not stdin's: closing this (or its collection) leaves it open
        self._stream, self._errors = _decompressor(kind, raw)
        self._offset = 0

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        """The compressed file's descriptor (what `os.fstat` tells apart from another file)."""
        return self._raw.fileno()

    @property
    def consumed(self) -> int:
        """The compressed bytes read from the file so far (the decompressor reads ahead)."""
        try:
            return int(self._raw.tell())
        except (OSError, ValueError):  # a pipe, or closed
            return 0

    def read(self, size: int | None = -1) -> bytes:
        parts: list[bytes] = []
        got = 0
        while (size is None or size < 0 or got < size) and self.damaged is None:
            want = _STEP if size is None or size < 0 else min(_STEP, size - got)
            try:
                data = self._stream.read1(want)
            except self._errors as e:
                self.damaged = (f"{self.kind} data {_why(e)} after {self._offset + got:,} "
                                "bytes of log; the rest was not read")
                break
            if not data:
                break
            parts.append(data)
            got += len(data)
        self._offset += got
        return b"".join(parts)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Only to where it is: a compressed file is read from its start to its end."""
        if (offset, whence) not in ((self._offset, io.SEEK_SET), (0, io.SEEK_CUR)):
            raise io.UnsupportedOperation("a compressed log is read in one pass")
        return self._offset

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            if self._owns_raw:
                self._raw.close()
            super().close()


def _decompressor(kind: str, raw: BinaryIO) -> tuple[Any, tuple[type[BaseException], ...]]:
    """The decompressing reader of `kind`, and what it raises on data that ends early or is
    damaged. Imported here: a scan of plain logs does not pay for them."""
    if kind == "gzip":
        import gzip
        import zlib
        return gzip.GzipFile(fileobj=raw, mode="rb"), (EOFError, OSError, zlib.error)
    if kind == "bzip2":
        import bz2
        return bz2.BZ2File(raw, "rb"), (EOFError, OSError)
    import lzma
    return lzma.LZMAFile(raw, "rb"), (EOFError, OSError, lzma.LZMAError)


def _why(e: BaseException) -> str:
    if isinstance(e, EOFError):
        return "ends early"
    return f"is damaged ({e})"
