"""The compiled form on disk: its file format (`encode_form`, `decode_form`) and the cache of
such files in the application's cache directory (`EngineCache`).

A file is a header line, a head (plain data, pickled: the per-pattern literals, capture names and heads, and
where each section starts) and the sections: the Hyperscan databases as `hyperscan.dumpb`
wrote them, the chunk prefilter, and each pattern's compiled `regex` program, read when the
pattern is first confirmed (`FrozenRegexes`). The whole is checked against a digest before
anything is loaded. An unreadable, damaged or foreign file is ignored (the catalog is compiled
instead), and an unwritable cache directory only costs the next start its speed.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import os
import pickle
import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, overload

import regex

from matcher import cache
from matcher.atomic import write_atomic
from matcher.catalog.load import code_fingerprint, fields_text
from matcher.catalog.schema import CatalogRecord
from matcher.compile import HS_FLAGS, CompiledForm, hs
from matcher.prefilter import ChunkPrefilter

CACHE_FORMAT = 7  # 7: the head a pickle of plain data, not JSON
MAGIC = b"sglang-matcher engine\n"
KEEP_ENTRIES = 8
# The modules whose code the compiled form depends on (the cache key hashes them).
FORM_CODE = ("matcher.engine", "matcher.compile", "matcher.stored_form",
             "matcher.catalog.patterns", "matcher.prefilter", "matcher.framing")


def compile_key(records: Sequence[CatalogRecord], use_hyperscan: bool) -> str:
    """A hash of everything the compiled form depends on, in the records' order."""
    h = hashlib.sha256()
    version = getattr(hs, "__version__", "") if hs is not None else ""
    code = code_fingerprint(*FORM_CODE)
    h.update(json.dumps([CACHE_FORMAT, code, use_hyperscan, version, HS_FLAGS,
                         regex.__version__]).encode())
    h.update(fields_text((r.id, r.message_pattern, r.error_class, r.error_type, r.layer)
                            for r in records))
    return h.hexdigest()[:32]


class EngineCache:
    """One file per compiled catalog: `engine-<key>.bin`, written to a temp file and renamed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.last_corrupt = False

    @classmethod
    def default(cls) -> EngineCache | None:
        """In the application's cache directory (`matcher.cache`); None if it chose none."""
        chosen = cache.directory()
        return cls(chosen) if chosen is not None else None

    def path(self, key: str) -> Path:
        return self.directory / f"engine-{key}.bin"

    def has(self, key: str) -> bool:
        return self.path(key).is_file()

    def load(self, key: str, records: Sequence[CatalogRecord]) -> CompiledForm | None:
        """The cached compiled form, or None when absent, unreadable, corrupt or not this key's."""
        self.last_corrupt = False
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            form = decode_form(path, key, len(records))
        except OSError:
            return None
        except Exception:  # noqa: BLE001 - any damage means: rebuild
            self.last_corrupt = True
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used now: `_prune` keeps the entries used last
        return form

    def store(self, key: str, form: CompiledForm) -> bool:
        try:
            write_atomic(self.path(key), encode_form(key, form))
        except OSError:
            return False
        self._prune(keep=self.path(key))
        return True

    def _prune(self, keep: Path) -> None:
        """Keep the entries stored or loaded last only: each catalog version leaves one
        behind, and the built-in part outlives the user catalogs put on top of it."""
        try:
            entries = sorted(self.directory.glob("engine-*.bin"),
                             key=lambda p: p.stat().st_mtime, reverse=True)
            for old in [e for e in entries if e != keep][KEEP_ENTRIES - 1:]:
                old.unlink(missing_ok=True)
        except OSError:
            pass



class FrozenRegexes(Sequence[bytes]):
    """`CompiledForm.regexes` as a file holds them: a section of an offset table, then the
    pickles end to end. The table is read with the form; a pickle, when its pattern is first
    made, as a prefilter candidate (one `pread`): all the patterns' pickles would otherwise
    stay in every process's memory for the few hundred a log needs. A file replaced or gone
    since gives nothing, and the pattern is compiled instead (`thaw` checks what it is given)."""

    def __init__(self, path: Path, at: int, count: int, table: bytes) -> None:
        size = 8 * (count + 1)
        if len(table) != size:
            raise ValueError("truncated regex section")
        # An array, not a tuple of ints: 37,000 offsets are 1 MB less as 8 bytes each.
        self._offsets = array("Q", table)
        if sys.byteorder != "little":
            self._offsets.byteswap()  # written little-endian
        if self._offsets[0] != size or any(a > b for a, b in zip(self._offsets,
                                                                   self._offsets[1:])):
            raise ValueError("damaged regex section")
        self._path = path
        self._at = at  # where the section starts in the file

    @property
    def size(self) -> int:
        """The section's length: its table and pickles."""
        return self._offsets[-1]

    @staticmethod
    def encode(pieces: Sequence[bytes]) -> bytes:
        offsets = [8 * (len(pieces) + 1)]
        for piece in pieces:
            offsets.append(offsets[-1] + len(piece))
        return struct.pack(f"<{len(offsets)}Q", *offsets) + b"".join(pieces)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[bytes]: ...
    def __getitem__(self, i: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        lo, hi = self._offsets[i], self._offsets[i + 1]
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except OSError:
            return b""
        try:
            return os.pread(fd, hi - lo, self._at + lo)
        except OSError:
            return b""
        finally:
            os.close(fd)


def encode_form(key: str, form: CompiledForm) -> bytes:
    """The cache file's bytes: a header line, its head, the databases."""
    dump = hs.dumpb if hs is not None else None
    blob = dump(form.hs_db) if form.hs_db is not None and dump is not None else b""
    chunk_at = len(blob)
    if form.chunk is not None:
        blob += form.chunk.dumpb()
    literal_at = len(blob)
    if form.literal_db is not None and dump is not None:
        blob += dump(form.literal_db)
    head_at = len(blob)
    if form.head_db is not None and dump is not None:
        blob += dump(form.head_db)
    regex_at = len(blob)
    if form.regexes:
        blob += FrozenRegexes.encode(form.regexes)
    shared: dict[Any, Any] = {}
    head = _dump_data({
        "format": CACHE_FORMAT,
        "key": key,
        "n": len(form.literal),
        "literal": [_one_of_each(lit, shared) for lit in form.literal],
        "names": [_one_of_each(names, shared) for names in form.names],
        "literal_always": sorted(form.literal_always),
        "covers": [[i, list(cover)] for i, cover in sorted(form.covers.items())],
        "always": list(form.always),
        "hyperscan": form.hs_db is not None,
        "chunk_at": chunk_at,
        "literal_at": literal_at,
        "head_at": head_at,
        "regex_at": regex_at,
        "regexes": bool(form.regexes),
        "heads": [_one_of_each(h, shared) for h in form.heads],
        "blob_sha256": hashlib.sha256(blob).hexdigest(),
    })
    return MAGIC + struct.pack("<Q", len(head)) + head + blob


def _one_of_each(value: Any, shared: dict[Any, Any]) -> Any:
    """`value` (a string, None, or a list of strings), one object per equal value (the first
    met, kept in `shared`): pickle writes an object once however often it is referred to, and
    loads it once. Of the full catalog's 37,000 patterns, most heads are their literal and most
    share their capture names with others: 6 MB at every start as separate copies."""
    if isinstance(value, list):
        items = [_one_of_each(v, shared) for v in value]
        return shared.setdefault((list, tuple(items)), items)
    return value if value is None else shared.setdefault((str, value), value)


def _dump_data(head: dict[str, Any]) -> bytes:
    """The head's bytes: a pickle of plain data (`_DataUnpickler` loads nothing else)."""
    return pickle.dumps(head, protocol=pickle.HIGHEST_PROTOCOL)


class _DataUnpickler(pickle.Unpickler):
    """Loads dicts, lists, tuples, strings, numbers, booleans and None, and nothing else: a
    cache file is data, and no callable may come out of it."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: not data")


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection while a compiled catalog loads: it makes hundreds of thousands of
    objects and no cycle, and the collections they would set off cost time for nothing."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def decode_form(path: Path, key: str | None, n: int, *, verify: bool = True) -> CompiledForm:
    """`encode_form`'s bytes back from a file (`key` None: any key); ValueError (or worse)
    when damaged. Read a section at a time, and checked before any is loaded: the file is
    30 MB with the full catalog, and holding it whole beside the databases made from it set
    the start's peak memory. `verify` False: the caller knows this very file was checked
    whole before (`precompiled.Store.engine_form`), and its digest is not computed again."""
    with collector_paused(), path.open("rb") as f:
        head = _checked_head(f, key, n)
        at = f.tell()
        end = _blob_end(f, head["blob_sha256"] if verify else None)

        def section(lo: int, hi: int) -> bytes:
            f.seek(at + lo)
            data = f.read(hi - lo)
            if len(data) != hi - lo:
                raise ValueError("truncated")
            return data

        split, literal_at, head_at = head["chunk_at"], head["literal_at"], head["head_at"]
        regex_at = head["regex_at"]
        form = CompiledForm(head["literal"], head["names"], head["literal_always"],
                            head["always"], head["heads"],
                            dict(head["covers"]))
        if head["hyperscan"]:
            form.hs_db = _load_db(section(0, split))
        if split < literal_at:
            form.chunk = ChunkPrefilter.loadb(section(split, literal_at))
        if literal_at < head_at:
            form.literal_db = _load_db(section(literal_at, head_at))
        if head_at < regex_at:
            form.head_db = _load_db(section(head_at, regex_at))
        if head["regexes"]:
            form.regexes = FrozenRegexes(path, at + regex_at, n,
                                         section(regex_at, regex_at + 8 * (n + 1)))
            if regex_at + form.regexes.size != end - at:
                raise ValueError("damaged regex section")
    return form



def _checked_head(f: BinaryIO, key: str | None, n: int) -> dict[str, Any]:
    """The head of the engine cache file `f` (open at its start), `f` left at its blob;
    ValueError when it is not one, or is another catalog's (`key` None: any key)."""
    magic = f.read(len(MAGIC) + 8)
    if not magic.startswith(MAGIC) or len(magic) < len(MAGIC) + 8:
        raise ValueError("not an engine cache file")
    (head_len,) = struct.unpack_from("<Q", magic, len(MAGIC))
    data = f.read(head_len)
    if len(data) != head_len:
        raise ValueError("truncated")
    try:
        head = _DataUnpickler(io.BytesIO(data)).load()
    except Exception as e:  # any damage, whichever error the unpickler gave: not one
        raise ValueError("not an engine cache file") from e
    if not isinstance(head, dict):
        raise ValueError("not an engine cache file")
    if head["format"] != CACHE_FORMAT or (key is not None and head["key"] != key) \
            or head["n"] != n:
        raise ValueError("another catalog's entry")
    return head


def _blob_end(f: BinaryIO, sha256: str | None) -> int:
    """Where the file `f` ends, `f` being at its blob. With a `sha256` the blob is read to its
    end and its digest checked (ValueError: damaged); without, the file's size is taken."""
    if sha256 is None:
        return os.fstat(f.fileno()).st_size
    digest = hashlib.sha256()
    for piece in iter(lambda: f.read(1 << 20), b""):
        digest.update(piece)
    if digest.hexdigest() != sha256:
        raise ValueError("damaged")
    return f.tell()


def _load_db(data: bytes) -> Any:
    """A database as `hyperscan.dumpb` wrote it, with the scratch a loaded one comes without."""
    if hs is None:
        raise ValueError("hyperscan is not available")
    db = hs.loadb(data, hs.HS_MODE_BLOCK)
    db.scratch = hs.Scratch(db)
    return db


