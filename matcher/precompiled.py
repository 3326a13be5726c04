"""The built-in catalog, precompiled: what a warm start reads, shipped so that the first start
is one too.

Loading the built-in catalog from its sources means parsing 70 MB of records, checking 30,000
patterns and compiling the Hyperscan databases: ~40 s of CPU and ~400 MB at peak on a host
with an empty cache. `sglang-matcher catalog precompile` does that once, when the catalog is
built (the wheel's build hook, `hatch_build.py`, and the container image's build run it), and
writes into `matcher/_precompiled/`:

- `engine.bin`: the compiled engine of the merged built-in records (`stored_form.encode_form`: the
  Hyperscan databases as `hyperscan.dumpb` wrote them, each pattern's prefilter literal,
  capture names and head, and its compiled `regex` program, `compile.freeze`);
- `records.pickle`: the fields matching reads (id, pattern, class, severity, role, frame,
  releases …), one column each — the parsed, checked catalog in a compact form;
- `records.data`: the rest of each record (documentation, solutions, links, locations …),
  one pickled piece per record, read when something first asks for it (`StoredRecord`): an
  event's remediation, `explain`. 30,000 records' text is most of their memory;
- `manifest.json`: the key it was built for.

The key is a hash of the catalog's source files, of the code that parses, checks and compiles
them, of the Hyperscan and `regex` versions and of the machine's architecture. `load`
recomputes it (hashing 70 MB takes 50 ms; a file unchanged since it was last hashed keeps its
digest, `_file_rows`) and uses the artifact only when it agrees; otherwise — or when loading
fails (a database built for another CPU: `hyperscan.loadb` refuses it) — the catalog is loaded and
compiled from its sources as before, and `Catalog.precompiled` / `EngineStats.note` say why
(the daemon logs it). python-hyperscan compiles for the host it runs on (it passes no platform
to `hs_compile_multi`), and its wheels are built without Hyperscan's fat runtime, so their
databases use no AVX2/AVX-512 (`Database.info()` lists no features): the artifact built on one
x86-64 (or aarch64) host loads on every other of its family, and `loadb` checks that it does.

A user's catalog on top is not part of the artifact: the engine compiles only the user's
records, as a second part, and hides the built-in records they replace (`merge_layers`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import platform
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher import cache
from matcher.atomic import write_atomic
from matcher.catalog.load import catalog_files, code_fingerprint
from matcher.catalog.schema import _FIELDS, CatalogRecord, Layer
from matcher.compile import CompiledForm, compile_form
from matcher.stored_form import FORM_CODE, collector_paused, decode_form, encode_form

FORMAT = 2  # 2: records.pickle holds columns
ENV_DISABLE = "SGLANG_MATCHER_NO_PRECOMPILED"  # set (non-empty): load from the sources

# What matching, aggregating and counting read of every record: kept in memory. The rest is
# read from `records.data` on first use.
RESIDENT = ("id", "message_pattern", "layer", "origin", "index", "error_message", "error_class",
            "severity", "role", "literal_length", "raised_in", "consequence_of",
            "sglang_versions",
            # the site: a generated record matched on a traceback must be where it raised
            # (`engine._drop_contradicted_sites`)
            "file_path", "locations",
            # an import or lookup message has no site to contradict (its generator says so)
            "generator",
            # a message others make too is matched only at its frame
            # (`engine._lookalikes_at_their_frame`)
            "also_made_by",
            # a record of an API answer's own words is matched only inside an error body
            # (`engine.searched_in`)
            "error_type")
LAZY = tuple(f for f in _FIELDS if f not in RESIDENT)
_LAZY = frozenset(LAZY)
_RESIDENT = frozenset(RESIDENT)
_RAISED_IN = RESIDENT.index("raised_in")
_ORIGIN = RESIDENT.index("origin")
_RESIDENT_AT = {name: i for i, name in enumerate(RESIDENT)}
_CODE = ("matcher.precompiled", *FORM_CODE,
         "matcher.catalog", "matcher.catalog.load", "matcher.catalog.schema",
         "matcher.catalog.patterns", "matcher.catalog.wording", "matcher.catalog.versions")


def default_dir() -> Path:
    """`matcher/_precompiled`: in the installed package, or in a checkout."""
    return Path(__file__).resolve().parent / "_precompiled"


class StoredRecord(CatalogRecord):
    """A `CatalogRecord` from the precompiled catalog, its fields set when first read: those in
    `RESIDENT` from the columns loaded with the store (`Store.settle`), the others from the
    store's data file (`Store.fill`). A slot not yet set raises AttributeError, and Python then asks
    `__getattr__`.

    Setting every field of every record when the store loads would cost every start; a scan
    reads those of the few hundred records its log matches, and the engine's prefilter knows
    the rest by index."""

    __slots__ = ("_at", "_store")

    def peek(self, name: str) -> Any:
        if name in _RESIDENT:  # as the store's columns have it, set or not
            try:
                store: Store = object.__getattribute__(self, "_store")
            except AttributeError:  # made by `dataclasses.replace`: its fields are its own
                return getattr(self, name)
            return store.resident(object.__getattribute__(self, "_at"), name)
        return getattr(self, name)

    def __getattr__(self, name: str) -> Any:
        if name in _RESIDENT:
            store: Store = object.__getattribute__(self, "_store")
            store.settle(self)
        elif name in _LAZY:
            store = object.__getattribute__(self, "_store")
            store.fill(self)
        else:
            raise AttributeError(name)
        return object.__getattribute__(self, name)


class Store:
    """The loaded artifact: its records, and what the engine loads of it."""

    def __init__(self, directory: Path, manifest: dict[str, Any], base: Path) -> None:
        self.directory = directory
        self.manifest = manifest
        self.version: str = manifest["version"]
        self.files = tuple(str(base / rel) for rel, _size, _sha in manifest["files"])
        self._lock = threading.Lock()
        self.filled = 0  # records whose lazy fields were read (tests, memory)
        self.settled = 0  # records whose `RESIDENT` fields were read
        with collector_paused(), (directory / "records.pickle").open("rb") as f:
            columns, offsets = pickle.load(f)
            if len(columns) != len(RESIDENT):
                raise ValueError(f"{len(columns)} columns, not {len(RESIDENT)}")
            self._offsets = array("Q", offsets)
            # Per `RESIDENT` field, every record's value: one tuple each, which loads faster
            # than a row per record.
            self._columns: list[tuple[Any, ...]] = columns
            new = StoredRecord.__new__
            put = object.__setattr__
            records: list[StoredRecord] = []
            for at in range(len(offsets) - 1):
                r = new(StoredRecord)
                put(r, "_store", self)
                put(r, "_at", at)
                records.append(r)
            self.records: tuple[StoredRecord, ...] = tuple(records)
        # The engine's shipped part: the records searched in messages, in the artifact's order;
        # and those named by the frame that raises (`raisedIn`), looked up by frame.
        raised_in = columns[_RAISED_IN]
        self.matched_records = tuple(r for r, where in zip(records, raised_in, strict=True)
                                     if where is None)
        self.framed_records = tuple(r for r, where in zip(records, raised_in, strict=True)
                                    if where is not None)

    def settle(self, record: StoredRecord) -> None:
        """Set the record's `RESIDENT` fields from the columns. No lock: two threads settling one
        record set the same values, and one reading a field not yet set settles it itself
        (a lock, taken for each record a scan meets, would contend with the pool's threads in
        `scan -j`'s parent)."""
        at = object.__getattribute__(record, "_at")
        put = object.__setattr__
        for name, column in zip(RESIDENT, self._columns, strict=True):
            put(record, name, column[at])
        put(record, "origin", self.files[self._columns[_ORIGIN][at]])
        self.settled += 1  # approximate under threads: tests and memory

    def resident(self, at: int, name: str) -> Any:
        """A `RESIDENT` field of the record at `at`, as the columns have it."""
        value = self._columns[_RESIDENT_AT[name]][at]
        return self.files[value] if name == "origin" else value

    def column(self, name: str) -> tuple[Any, ...]:
        """A `RESIDENT` field of every record, in the store's order, as the columns have it."""
        column = self._columns[_RESIDENT_AT[name]]
        return tuple(self.files[i] for i in column) if name == "origin" else column

    def fill(self, record: StoredRecord) -> None:
        """Set the record's other fields from `records.data`: one read for an event's record;
        after `_BULK` of them (a command going through every record: `explain`, `stats`), every
        record's at once."""
        with self._lock:
            if _filled(record):
                return  # another thread did
            if self.filled >= _BULK:
                data = (self.directory / "records.data").read_bytes()
                for r in self.records:
                    if not _filled(r):
                        at = object.__getattribute__(r, "_at")
                        self._set(r, data[self._offsets[at]:self._offsets[at + 1]])
                return
            at = object.__getattribute__(record, "_at")
            lo, hi = self._offsets[at], self._offsets[at + 1]
            fd = os.open(self.directory / "records.data", os.O_RDONLY)
            try:
                self._set(record, os.pread(fd, hi - lo, lo))
            finally:
                os.close(fd)

    def _set(self, record: StoredRecord, data: bytes) -> None:
        for name, value in zip(LAZY, pickle.loads(data), strict=True):
            object.__setattr__(record, name, value)
        self.filled += 1

    def engine_form(self) -> CompiledForm:
        """The engine's compiled form, its 30 MB checked whole against their digest the first
        time only: the file's size, times and inode, as they were when it was checked, are
        kept with the catalog files' digests (`_file_rows`), and it is checked again when any
        of them changes: hashing it at every start would cost every start."""
        path = self.directory / "engine.bin"
        name = str(path.resolve())
        checked = [*_mark(path), self.manifest["key"]]
        known = _known_digests()
        unchecked = known.get(name) != checked
        form = decode_form(path, self.manifest["key"], len(self.matched_records),
                           verify=unchecked)
        if unchecked:
            _keep_digests({**known, name: checked})
        return form


_BULK = 4096


def _filled(record: StoredRecord) -> bool:
    try:
        object.__getattribute__(record, LAZY[0])
    except AttributeError:
        return False
    return True


def store_of(records: Sequence[CatalogRecord]) -> tuple[Store, set[int] | None] | None:
    """The store the records come from, and the ids (`id()`) of those that do; None for the
    ids when `records` are the store's own, all of them (the built-in catalog alone: known
    without reading 30,000 records)."""
    whole = _whole_store(records)
    if whole is not None:
        return whole, None
    store: Store | None = None
    kept: set[int] = set()
    for r in records:
        if type(r) is StoredRecord:
            try:
                s = object.__getattribute__(r, "_store")
            except AttributeError:  # made by `dataclasses.replace`: a record of its own
                continue
            if store is None:
                store = s
            if s is store:
                kept.add(id(r))
    return (store, kept) if store is not None else None


def _whole_store(records: Sequence[CatalogRecord]) -> Store | None:
    """The store whose records `records` are, all of them in its order; else None."""
    if isinstance(records, tuple) and records and type(records[0]) is StoredRecord:
        first: Store = object.__getattribute__(records[0], "_store")
        if records is first.records:
            return first
    return None


def resident_columns(records: Sequence[Any], names: Sequence[str]) -> list[Sequence[Any]]:
    """Per field in `names`, every record's value, in the records' order. When `records` are a
    store's own (the built-in catalog alone) and the fields `RESIDENT`, its columns: reading
    the fields of 46,000 records one by one would settle each (`Store.settle`: 4 µs a record,
    0.2 s of every start that counts them)."""
    store = _whole_store(records)
    if store is not None and _RESIDENT.issuperset(names):
        return [store.column(name) for name in names]
    return [[getattr(r, name) for r in records] for name in names]


# -- which files, which key -------------------------------------------------------------------

def source_files(base: Path) -> list[tuple[Layer, list[Path]]]:
    """The built-in catalog's layers and their files under `base` (`patterns/`), as
    `load_catalog` reads them for every release."""
    generated = sorted((base / "sglang" / "generated").glob("*.jsonl"))
    curated = catalog_files(base / "sglang" / "curated")
    layers: list[tuple[Layer, list[Path]]] = []
    if generated:
        layers.append(("generated", generated))
    layers.append(("curated", curated))
    return layers


def _file_rows(base: Path) -> list[tuple[str, int, str]]:
    """(path under `base`, size, SHA-256) of each catalog source file.

    A file hashed before keeps its digest while its size, modification and change times and
    inode are what they were then: any write changes its change time, which no one sets by
    hand. The digests are kept in the cache directory, when the application chose one
    (`matcher.cache`): hashing the built-in catalog's files at every start would cost each
    start."""
    known = _known_digests()
    seen: dict[str, list[Any]] = {}
    rows = []
    for _layer, paths in source_files(base):
        for path in paths:
            st = path.stat()
            mark = _mark(path, st)
            name = str(path.resolve())
            entry = known.get(name)
            if isinstance(entry, list) and entry[:4] == mark and len(entry) == 5:
                digest = str(entry[4])
            else:
                with path.open("rb") as f:
                    digest = hashlib.file_digest(f, "sha256").hexdigest()
            seen[name] = [*mark, digest]
            rows.append((path.relative_to(base).as_posix(), st.st_size, digest))
    if any(known.get(name) != entry for name, entry in seen.items()):
        _keep_digests({**known, **seen})
    return rows


_DIGESTS = "precompiled-digests.json"


def _mark(path: Path, st: os.stat_result | None = None) -> list[int]:
    """What changes when a file is written or replaced: size, modification and change times,
    inode."""
    st = st if st is not None else path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _known_digests() -> dict[str, Any]:
    directory = cache.directory()
    if directory is None:
        return {}
    try:
        known = json.loads((directory / _DIGESTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or damaged: hash again
    return known if isinstance(known, dict) else {}


def _keep_digests(digests: dict[str, Any]) -> None:
    directory = cache.directory()
    if directory is None:
        return
    try:
        write_atomic(directory / _DIGESTS, json.dumps(digests))
    except OSError:
        pass  # an unwritable cache: hashed again at the next start, as without one


def _key(files: list[tuple[str, int, str]]) -> str:
    try:
        import hyperscan

        hs_version = str(getattr(hyperscan, "__version__", "?"))
    except ImportError:
        hs_version = ""
    import regex  # its compiled programs are kept (`compile.freeze`): they are its version's

    h = hashlib.sha256(json.dumps([FORMAT, code_fingerprint(*_CODE), hs_version,
                                   regex.__version__, platform.machine(), files]).encode())
    return h.hexdigest()[:32]


# -- build ------------------------------------------------------------------------------------

def build(out: Path, base: Path, records: Sequence[CatalogRecord], version: str
          ) -> dict[str, Any]:
    """Write the artifact for the built-in catalog under `base` into `out`: `records` are its
    merged records as `load_catalog` made them from the sources (`version` its version); the
    manifest."""
    files = _file_rows(base)
    matched = [r for r in records if r.raised_in is None]
    form = compile_form(matched, True)
    if form.hs_db is None:
        raise RuntimeError("Hyperscan is not installed: nothing to precompile")
    key = _key(files)
    origins = {rel: i for i, (rel, _size, _sha) in enumerate(files)}
    rows = []
    offsets = [0]
    pieces = []
    for r in records:
        rel = Path(r.origin).resolve().relative_to(base.resolve()).as_posix()
        rows.append(tuple(origins[rel] if name == "origin" else getattr(r, name)
                          for name in RESIDENT))
        piece = pickle.dumps(tuple(getattr(r, name) for name in LAZY),
                             protocol=pickle.HIGHEST_PROTOCOL)
        pieces.append(piece)
        offsets.append(offsets[-1] + len(piece))
    manifest = {"format": FORMAT, "key": key, "files": files, "records": len(records),
                "matched": len(matched), "version": version,
                "hyperscan_info": form.hs_db.info().decode(errors="replace"),
                "machine": platform.machine()}
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".partial"
    tmp.mkdir(exist_ok=True)
    (tmp / "engine.bin").write_bytes(encode_form(key, form))
    shared: dict[tuple[type, Any], Any] = {}
    columns = [_one_of_each(column, shared) for column in zip(*rows, strict=True)] if rows \
        else [() for _ in RESIDENT]
    (tmp / "records.pickle").write_bytes(pickle.dumps((columns, array("Q", offsets)),
                                                      protocol=pickle.HIGHEST_PROTOCOL))
    (tmp / "records.data").write_bytes(b"".join(pieces))
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for name in ("engine.bin", "records.pickle", "records.data", "manifest.json"):
        os.replace(tmp / name, out / name)  # the manifest last: it vouches for the rest
    tmp.rmdir()
    return manifest


def _one_of_each(values: Sequence[Any], shared: dict[Any, Any]) -> tuple[Any, ...]:
    """`values`, each string, and each tuple of strings, one object per value (the first met,
    kept in `shared`): pickle writes an object once however often it is referred to, and so
    loads it once. 46,000 records share a third of their patterns and most of their version
    lists: 4 MB at every start as separate copies."""
    out = []
    for value in values:
        if type(value) is str or (type(value) is tuple
                                  and all(type(v) is str for v in value)):
            value = shared.setdefault((type(value), value), value)
        out.append(value)
    return tuple(out)


# -- load -------------------------------------------------------------------------------------

def check(base: Path, directory: Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """Whether the artifact fits the built-in catalog under `base`: (manifest, "used"), else
    (None, why not). Hashes the catalog's files that changed (50 ms for 70 MB), loads nothing."""
    if os.environ.get(ENV_DISABLE) and directory is None:
        return None, f"not used ({ENV_DISABLE} is set)"
    directory = directory or default_dir()
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"absent ({directory}): run `sglang-matcher catalog precompile`"
    except (OSError, ValueError) as e:
        return None, f"unreadable manifest ({e})"
    try:
        if manifest.get("format") != FORMAT:
            return None, "stale (another format)"
        files = _file_rows(base)
        if [list(f) for f in files] != [list(f) for f in manifest["files"]]:
            return None, "stale (the catalog's files changed since it was built)"
        if _key(files) != manifest["key"]:
            return None, "stale (built by other code, Hyperscan, regex or machine)"
    except Exception as e:  # noqa: BLE001 - damaged or foreign: load from the sources
        return None, f"unusable ({type(e).__name__}: {e})"
    return manifest, "used"


def load(base: Path, directory: Path | None = None) -> tuple[Store | None, str]:
    """The artifact for the built-in catalog under `base`, if there is one that fits: (store,
    "used"), else (None, why not)."""
    manifest, note = check(base, directory)
    if manifest is None:
        return None, note
    try:
        return Store(directory or default_dir(), manifest, base), note
    except Exception as e:  # noqa: BLE001 - damaged: load from the sources
        return None, f"unusable ({type(e).__name__}: {e})"
