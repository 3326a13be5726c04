"""Records to matches: which catalog record, if any, recognizes a record — fast, and always the same one.

Every record is searched in a few *targets*: the `Class: message` lines of a traceback (the final
exception and its chained causes), or a plain line's message, and the traceback's header. A
multi-pattern prefilter (Hyperscan in prefilter mode where installed, else required literals)
picks the few patterns that can match a target in one pass; `regex` then confirms and captures,
with a timeout so a pathological pattern cannot stall the pipeline. A pattern that times out is
quarantined after `quarantine_after` timeouts and is not tried again until the next compile.

The winner is the most specific match: on an exception line over on a header, then most
literal characters, then the later layer (curated over generated), then the smaller id.

Compiling the full catalog (curated + generated, over 15,000 patterns) takes some 15 seconds,
nearly all of it Hyperscan's compiler and `regex`'s parser. A large catalog's compiled form is
therefore cached on disk (`EngineCache`), keyed by a hash of the patterns and of the code that
compiles them: the Hyperscan database as `hyperscan.dumpb` wrote it, and per pattern its
prefilter literal and capture names. On a warm start nothing is compiled up front; a pattern's
`regex` is compiled the first time the prefilter picks it. This is the engine's only I/O: an
unreadable, damaged or foreign cache entry is ignored and rebuilt, and an unwritable cache
directory only costs the next start its speed (`stats.cache` says which happened).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import struct
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from matcher.catalog.load import code_fingerprint, default_cache_dir
from matcher.catalog.patterns import analyze, literal_cover, positional_capture_names
from matcher.catalog.schema import LAYER_RANK, CatalogRecord
from matcher.framing import DOCKER_RECORD_START_SIGNS, RECORD_START_SIGNS
from matcher.prefilter import ChunkPrefilter
from matcher.types import Match, Record

try:  # optional: wheels for x86-64, aarch64 and macOS
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised on platforms without wheels
    _hs = None

DEFAULT_TIMEOUT = 0.05
_MIN_PREFILTER_LITERAL = 3
CACHE_FORMAT = 3
# Below this many patterns compiling costs less than reading a cache entry; the curated catalog
# alone (0.35 s to compile) is above it.
CACHE_MIN_PATTERNS = 50
AUTO_CACHE = object()  # Engine(cache=...) default: the user's cache dir for large catalogs


@dataclass(frozen=True, slots=True)
class Target:
    """A piece of a record that patterns are searched in."""

    error_class: str
    message: str
    on_header: bool


class CompiledPattern:
    """A record's pattern, ready to confirm; its `regex` is compiled on first use when the rest
    came from the cache."""

    __slots__ = ("_compiled", "capture_names", "literal", "record")

    def __init__(self, record: CatalogRecord, compiled: regex.Pattern[str] | None,
                 capture_names: dict[int, str], literal: str | None) -> None:
        self.record = record
        self.capture_names = capture_names
        self.literal = literal  # a literal every match contains, for the fallback prefilter
        self._compiled = compiled

    @property
    def compiled(self) -> regex.Pattern[str]:
        if self._compiled is None:
            self._compiled = regex.compile(self.record.message_pattern)
        return self._compiled

    def sort_key(self, on_header: bool) -> tuple[int, int, int, str]:
        """Smaller is more specific; `min()` over matches picks the winner."""
        r = self.record
        return (int(on_header), -r.literal_length, -LAYER_RANK[r.layer], r.id)


@dataclass(slots=True)
class EngineStats:
    """What the engine saw go wrong; the daemon turns these into counters."""

    timeouts: int = 0
    quarantined: set[str] = field(default_factory=set)
    # "off" (small catalog or no cache), "hit", "miss" (built and stored), "rebuilt" (the
    # entry was corrupt), "unwritable" (built, could not be stored)
    cache: str = "off"


def targets_of(record: Record) -> list[Target]:
    out = [Target(e.error_class, e.message, False) for e in reversed(record.exceptions)]
    # A lone `Class: message` line is its exception; a traceback's header is a target of its own.
    if record.header and not (record.kind == "line" and record.exceptions):
        out.append(Target("", record.header, True))
    return out


def classes_agree(pattern_class: str | None, log_class: str) -> bool:
    """`OutOfMemoryError` agrees with `torch.OutOfMemoryError`; no class on either side agrees."""
    if not pattern_class or not log_class:
        return True
    return pattern_class.rsplit(".", 1)[-1] == log_class.rsplit(".", 1)[-1]


class Engine:
    """A compiled catalog. `match` is pure apart from the timeout bookkeeping in `stats`."""

    def __init__(
        self,
        records: Sequence[CatalogRecord],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        quarantine_after: int = 3,
        use_hyperscan: bool = True,
        cache: EngineCache | None | object = AUTO_CACHE,
    ) -> None:
        self.timeout = timeout
        self.quarantine_after = quarantine_after
        self.stats = EngineStats()
        self._timeouts_by_id: dict[str, int] = {}
        self._always: tuple[int, ...] = ()
        self._hs_db: Any = None
        # The literals of `_literal_table` in one Hyperscan database: non-ASCII targets.
        self._literal_db: Any = None
        # Which lines of a chunk can matter (None: every line is read; see `prefilter`).
        self.chunk_prefilter: ChunkPrefilter | None = None
        use_hs = use_hyperscan and _hs is not None and bool(records)
        if cache is AUTO_CACHE:
            cache = EngineCache.default() if len(records) >= CACHE_MIN_PATTERNS else None
        assert cache is None or isinstance(cache, EngineCache)
        key = compile_key(records, use_hs) if cache is not None else ""
        loaded = cache.load(key, records) if cache is not None else None
        if loaded is not None:
            (self.patterns, literal_always, self._always, self._hs_db,
             self.chunk_prefilter, self._literal_db) = loaded
            self._literal_always = frozenset(literal_always)
            self.stats.cache = "hit"
            return
        self.patterns = tuple(_compile(r) for r in records)
        # Patterns the literal prefilter cannot vouch for: always confirmed with `regex`.
        self._literal_always = frozenset(
            i for i, p in enumerate(self.patterns)
            if p.literal is None or p.compiled.flags & regex.IGNORECASE
        )
        if use_hs and self.patterns:
            self._hs_db, self._always = _build_hyperscan(self.patterns)
            self.chunk_prefilter = _build_chunk_prefilter(self.patterns)
            self._literal_db = _build_literal_db(self._literal_table)
        if cache is not None:
            stored = cache.store(key, self.patterns, self._literal_always, self._always,
                                 self._hs_db, self.chunk_prefilter, self._literal_db)
            self.stats.cache = ("rebuilt" if cache.last_corrupt else "miss") if stored \
                else "unwritable"

    @functools.cached_property
    def docker_prefilter(self) -> ChunkPrefilter | None:
        """`chunk_prefilter` for docker json-file lines, whose text JSON may escape: every cover
        without such characters, and record-start signs as they look inside a JSON string.

        Built at the first docker source (about two seconds with the full catalog), not cached:
        most deployments read plain text or CRI and never pay for it.
        """
        if self.chunk_prefilter is None:
            return None
        return _build_chunk_prefilter(self.patterns, json_safe=True)

    @property
    def prefilter(self) -> str:
        return "hyperscan" if self._hs_db is not None else "literal"

    def match(self, record: Record) -> Match | None:
        """The most specific match for a record, or None."""
        found = self.match_all(record)
        return found[0] if found else None

    def match_all(self, record: Record) -> list[Match]:
        """Every pattern that matches the record, most specific first (one per pattern)."""
        best: dict[int, tuple[tuple[int, int, int, str], Match]] = {}
        for target in targets_of(record):
            for i in self._candidates(target.message):
                pattern = self.patterns[i]
                if not classes_agree(pattern.record.error_class, target.error_class):
                    continue
                captures = self._confirm(pattern, target.message)
                if captures is None:
                    continue
                key = pattern.sort_key(target.on_header)
                if i not in best or key < best[i][0]:
                    best[i] = (key, Match(
                        pattern=pattern.record,
                        captures=captures,
                        record=record,
                        error_class=target.error_class or (pattern.record.error_class or ""),
                        message=target.message,
                        on_header=target.on_header,
                    ))
        return [m for _, m in sorted(best.values(), key=lambda km: km[0])]

    def _candidates(self, text: str) -> Iterable[int]:
        if self._hs_db is not None and text.isascii():
            hits: set[int] = set(self._always)

            def on_match(pid: int, _from: int, _to: int, _flags: int, _ctx: object) -> None:
                hits.add(pid)

            self._hs_db.scan(text.encode("ascii"), match_event_handler=on_match)
            return sorted(hits)
        # Non-ASCII text (rare in sglang's messages) takes the literal prefilter: the database
        # is compiled without Unicode classes, which costs 15× less to build.
        # Its literals are matched as UTF-8 bytes (exact for any text: UTF-8 is
        # self-synchronizing), in one Hyperscan scan: a Python loop over 21,000 literals took
        # 5–10 ms a target, and sglang logs users' non-ASCII prompts on `Receive:` lines.
        data = text.encode("utf-8", "surrogatepass")
        table = self._literal_table
        if self._literal_db is not None:
            found: set[int] = set(self._literal_always)

            def on_literal(pos: int, _from: int, _to: int, _flags: int, _ctx: object) -> None:
                found.add(table[pos][0])

            self._literal_db.scan(data, match_event_handler=on_literal)
            return sorted(found)
        return sorted(self._literal_always.union([i for i, lit in table if lit in data]))

    @functools.cached_property
    def _literal_table(self) -> tuple[tuple[int, bytes], ...]:
        """(index, UTF-8 literal) of the patterns the literal prefilter vouches for."""
        return tuple((i, p.literal.encode("utf-8", "surrogatepass"))
                     for i, p in enumerate(self.patterns)
                     if p.literal is not None and i not in self._literal_always)

    def _confirm(self, pattern: CompiledPattern, text: str) -> dict[str, str] | None:
        rid = pattern.record.id
        if rid in self.stats.quarantined:
            return None
        try:
            m = pattern.compiled.search(text, timeout=self.timeout)
        except TimeoutError:
            self.stats.timeouts += 1
            n = self._timeouts_by_id.get(rid, 0) + 1
            self._timeouts_by_id[rid] = n
            if n >= self.quarantine_after:
                self.stats.quarantined.add(rid)
            return None
        if m is None:
            return None
        return {
            name: m.group(num)
            for num, name in pattern.capture_names.items()
            if m.group(num) is not None
        }


def _compile(record: CatalogRecord) -> CompiledPattern:
    compiled = regex.compile(record.message_pattern)
    facts = analyze(record.message_pattern)
    literal = next((lit for lit in facts.required_literals if len(lit) >= _MIN_PREFILTER_LITERAL),
                   None)
    return CompiledPattern(record, compiled, positional_capture_names(compiled), literal)


_INLINE_CASELESS = re.compile(r"\(\?[a-zA-Z^-]*i")


def _build_chunk_prefilter(patterns: Sequence[CompiledPattern], *,
                           json_safe: bool = False) -> ChunkPrefilter | None:
    covers = []
    for p in patterns:
        pattern = p.record.message_pattern
        cover = literal_cover(pattern, json_safe=json_safe)
        # An inline `i` flag anywhere (global or scoped) is read as caseless: more hits, no loss.
        # Not `p.compiled`: a pattern from the cache compiles only when first confirmed.
        caseless = _INLINE_CASELESS.search(pattern) is not None
        covers.append(None if cover is None else (cover, caseless))
    return ChunkPrefilter.build(covers, DOCKER_RECORD_START_SIGNS if json_safe
                                else RECORD_START_SIGNS)



_HS_FLAGS = 0
if _hs is not None:
    _HS_FLAGS = (
        _hs.HS_FLAG_PREFILTER | _hs.HS_FLAG_SINGLEMATCH | _hs.HS_FLAG_DOTALL
        | _hs.HS_FLAG_ALLOWEMPTY
    )


def _build_hyperscan(patterns: Sequence[CompiledPattern]) -> tuple[object, tuple[int, ...]]:
    """One Hyperscan database for all patterns; those it cannot take are always confirmed."""
    assert _hs is not None
    pending = list(range(len(patterns)))
    rejected: list[int] = []

    def try_compile(ids: list[int]) -> object | None:
        db = _hs.Database()
        exprs = [patterns[i].record.message_pattern.encode("utf-8") for i in ids]
        try:
            db.compile(expressions=exprs, ids=ids, elements=len(ids), flags=_HS_FLAGS)
        except _hs.error:
            return None
        return db

    def find_bad(ids: list[int]) -> None:
        if try_compile(ids) is not None:
            return
        if len(ids) == 1:
            rejected.append(ids[0])
            return
        mid = len(ids) // 2
        find_bad(ids[:mid])
        find_bad(ids[mid:])

    db = try_compile(pending)
    if db is None:
        find_bad(pending)
        good = [i for i in pending if i not in set(rejected)]
        db = try_compile(good) if good else None
    return db, tuple(sorted(rejected))


def _build_literal_db(table: Sequence[tuple[int, bytes]]) -> Any:
    """`table`'s literals as one Hyperscan literal database (id = position in the table): under
    a second with the full catalog."""
    if _hs is None or not table:
        return None
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(expressions=[lit for _, lit in table], ids=list(range(len(table))),
               elements=len(table), flags=_hs.HS_FLAG_SINGLEMATCH, literal=True)
    return db


# --- the compiled form on disk ----------------------------------------------------------------

_MAGIC = b"sglang-matcher engine\n"
_KEEP_ENTRIES = 8


def compile_key(records: Sequence[CatalogRecord], use_hyperscan: bool) -> str:
    """A hash of everything the compiled form depends on, in the records' order."""
    h = hashlib.sha256()
    version = getattr(_hs, "__version__", "") if _hs is not None else ""
    code = code_fingerprint(__name__, "matcher.catalog.patterns", "matcher.prefilter",
                            "matcher.framing")
    h.update(json.dumps([CACHE_FORMAT, code, use_hyperscan, version, _HS_FLAGS]).encode())
    h.update(_fields_text((r.id, r.message_pattern, r.error_class, r.layer) for r in records))
    return h.hexdigest()[:32]


def _fields_text(rows: Iterable[tuple[str | None, ...]]) -> bytes:
    """Rows of strings as one unambiguous text (each value prefixed with its length): hashing
    it is cheap, where json.dumps per record cost 0.1 s of each start."""
    return "".join(f"{-1 if v is None else len(v)}:{v or ''}" for row in rows for v in row
                   ).encode()


class EngineCache:
    """One file per compiled catalog: `engine-<key>.bin`, written to a temp file and renamed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.last_corrupt = False

    @classmethod
    def default(cls) -> EngineCache:
        """`$SGLANG_MATCHER_CACHE_DIR`, else `$XDG_CACHE_HOME/sglang-matcher`, else ~/.cache/…"""
        return cls(default_cache_dir())

    def path(self, key: str) -> Path:
        return self.directory / f"engine-{key}.bin"

    def load(
        self, key: str, records: Sequence[CatalogRecord]
    ) -> tuple[tuple[CompiledPattern, ...], list[int], tuple[int, ...], object,
               ChunkPrefilter | None, object] | None:
        """The cached compiled form, or None when absent, unreadable, corrupt or not this key's."""
        self.last_corrupt = False
        try:
            data = self.path(key).read_bytes()
        except OSError:
            return None
        try:
            return self._decode(data, key, records)
        except Exception:  # noqa: BLE001 - any damage means: rebuild
            self.last_corrupt = True
            return None

    def _decode(
        self, data: bytes, key: str, records: Sequence[CatalogRecord]
    ) -> tuple[tuple[CompiledPattern, ...], list[int], tuple[int, ...], object,
               ChunkPrefilter | None, object]:
        if not data.startswith(_MAGIC):
            raise ValueError("not an engine cache file")
        (head_len,) = struct.unpack_from("<Q", data, len(_MAGIC))
        start = len(_MAGIC) + 8
        head = json.loads(data[start:start + head_len])
        blob = data[start + head_len:]
        if head["format"] != CACHE_FORMAT or head["key"] != key or head["n"] != len(records):
            raise ValueError("another catalog's entry")
        if hashlib.sha256(blob).hexdigest() != head["blob_sha256"]:
            raise ValueError("damaged")
        patterns = tuple(
            CompiledPattern(r, None, {i + 1: n for i, n in enumerate(names)}, literal)
            for r, literal, names in zip(records, head["literal"], head["names"], strict=True)
        )
        db = None
        chunk = None
        split, literal_at = head["chunk_at"], head["literal_at"]
        literal_db = None
        if head["hyperscan"]:
            if _hs is None:
                raise ValueError("hyperscan is not available")
            db = _hs.loadb(blob[:split], _hs.HS_MODE_BLOCK)
            db.scratch = _hs.Scratch(db)  # a loaded database comes without one
        if split < literal_at:
            chunk = ChunkPrefilter.loadb(blob[split:literal_at])
        if literal_at < len(blob):
            if _hs is None:
                raise ValueError("hyperscan is not available")
            literal_db = _hs.loadb(blob[literal_at:], _hs.HS_MODE_BLOCK)
            literal_db.scratch = _hs.Scratch(literal_db)
        return (patterns, list(head["literal_always"]), tuple(head["always"]), db, chunk,
                literal_db)

    def store(self, key: str, patterns: Sequence[CompiledPattern], literal_always: Iterable[int],
              always: Sequence[int], hs_db: object, chunk: ChunkPrefilter | None = None,
              literal_db: object = None) -> bool:
        blob = _hs.dumpb(hs_db) if hs_db is not None and _hs is not None else b""
        chunk_at = len(blob)
        if chunk is not None:
            blob += chunk.dumpb()
        literal_at = len(blob)
        if literal_db is not None and _hs is not None:
            blob += _hs.dumpb(literal_db)
        head = json.dumps({
            "format": CACHE_FORMAT,
            "key": key,
            "n": len(patterns),
            "literal": [p.literal for p in patterns],
            "names": [[p.capture_names[i] for i in sorted(p.capture_names)] for p in patterns],
            "literal_always": sorted(literal_always),
            "always": list(always),
            "hyperscan": hs_db is not None,
            "chunk_at": chunk_at,
            "literal_at": literal_at,
            "blob_sha256": hashlib.sha256(blob).hexdigest(),
        }, separators=(",", ":")).encode()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".engine-", dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_MAGIC + struct.pack("<Q", len(head)) + head + blob)
                os.replace(tmp, self.path(key))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return False
        self._prune(keep=self.path(key))
        return True

    def _prune(self, keep: Path) -> None:
        """Keep the most recent entries only: each catalog version leaves one behind."""
        try:
            entries = sorted(self.directory.glob("engine-*.bin"),
                             key=lambda p: p.stat().st_mtime, reverse=True)
            for old in [e for e in entries if e != keep][_KEEP_ENTRIES - 1:]:
                old.unlink(missing_ok=True)
        except OSError:
            pass
