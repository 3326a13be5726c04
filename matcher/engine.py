"""Records to matches: which catalog record, if any, recognizes a record — fast, and always the same one.

Every record is searched in a few *targets*: the `Class: message` lines of a traceback (the final
exception and its chained causes), or a plain line's message, and the traceback's header. A
multi-pattern prefilter (Hyperscan in prefilter mode where installed, else required literals)
picks the few patterns that can match a target in one pass; `regex` then confirms and captures,
with a timeout so a pathological pattern cannot stall the pipeline. A pattern that times out is
quarantined after `quarantine_after` timeouts and is not tried again until the next compile.

The winner is the most specific match: on an exception line over on a header, then most
literal characters, then the later layer (curated over generated), then the smaller id.

Compiling the full catalog (curated + generated) takes seconds, nearly all of it Hyperscan's
compiler and `regex`'s parser (`matcher.compile`). A large catalog's compiled form is
therefore cached on disk (`matcher.stored_form`) (`EngineCache`), keyed by a hash of the patterns and of the code that
compiles them: the Hyperscan database as `hyperscan.dumpb` wrote it, and per pattern its
prefilter literal and capture names. On a warm start nothing is compiled up front; a pattern's
`regex` is compiled the first time the prefilter picks it. This is the engine's only I/O: an
unreadable, damaged or foreign cache entry is ignored and rebuilt, and an unwritable cache
directory only costs the next start its speed (`stats.cache` says which happened).
"""

from __future__ import annotations

import bisect
import functools
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import regex

from matcher import api_error
from matcher.catalog.patterns import cut_prefix
from matcher.catalog.schema import EXCEPTION, CatalogRecord
from matcher.compile import (
    CompiledForm,
    CompiledPattern,
    SortKey,
    build_chunk_prefilter,
    compile_form,
    compile_pattern,
    hs,
    literal_columns,
    literal_table,
)
from matcher.frames import Frame, frames_by_exception, identifying, message_sites
from matcher.precompiled import Store, store_of
from matcher.prefilter import ChunkPrefilter
from matcher.stored_form import EngineCache, compile_key
from matcher.types import Match, Record
from matcher.wrappers import lazy_import_inner

DEFAULT_TIMEOUT = 0.05
CUT_TIMEOUT = 0.005
# Below this many patterns compiling costs less than reading a cache entry; the curated catalog
# alone is above it.
CACHE_MIN_PATTERNS = 50
AUTO_CACHE = object()  # Engine(cache=...) default: the application's cache dir (`matcher.cache`), for large catalogs


@dataclass(frozen=True, slots=True)
class Target:
    """A piece of a record that patterns are searched in."""

    error_class: str
    message: str
    on_header: bool
    in_body: bool = False  # the message of an API error body (`api_error`)


@dataclass(slots=True)
class EngineStats:
    """What the engine saw go wrong; the daemon turns these into counters."""

    timeouts: int = 0
    cut_timeouts: int = 0  # partial (cut-line) attempts that timed out, `CUT_TIMEOUT` each
    cut_quarantined: set[str] = field(default_factory=set)
    quarantined: set[str] = field(default_factory=set)
    # "off" (small catalog or no cache), "hit", "miss" (built and stored), "rebuilt" (the
    # entry was corrupt), "unwritable" (built, could not be stored), "precompiled" (the
    # shipped built-in catalog; "precompiled+miss" etc.: and a user's layer)
    cache: str = "off"
    note: str = ""  # why the precompiled catalog was not used, when it could have been


# The generator of the records whose message is made by whichever frame ran an import or a
# lookup — Python's import machinery, or transformers' lazy importer wrapping it: no site.
IMPORT_MESSAGES = "matcher.catalog.mismatch"


def _drop_contradicted_sites(record: Record, best: dict[int, tuple[SortKey, Match]]) -> None:
    """A generated record is a site of sglang's source: matched by its message on a traceback
    whose exception passed through sglang's frames, it must be where the traceback says the
    message was made (`frames.message_sites`), at some release that has the record. Else the
    message is a look-alike — the interpreter's own `'X' object has no attribute 'y'`, or
    the same words raised elsewhere — and the event would name a site the log contradicts:
    the match is dropped, and another record (or none) speaks for the exception. A message of
    an import or a lookup (`cannot import name …`, `module 'P' has no attribute …`, the records
    of `matcher.catalog.mismatch`) is made at whichever frame ran it: it has no site to
    contradict. A record of a dependency's source (no file in sglang: `deps`, `flashinfer`,
    `sgl-kernel`) is not a site of sglang's, and sglang's frames, which call into it, do not
    contradict it."""
    sites: dict[tuple[str, str], tuple[str, ...]] | None = None
    for i, (_, m) in list(best.items()):
        rec = m.pattern
        if m.on_header or rec.peek("layer") != "generated" or rec.peek("raised_in") is not None:
            continue
        if rec.peek("generator") == IMPORT_MESSAGES:
            continue
        if not _sites(rec):
            continue  # a dependency's site (flashinfer, torch): sglang's frames only call it
        if sites is None:
            sites = {(exc.error_class, exc.message): message_sites(f) for exc, f in
                     zip(record.exceptions, frames_by_exception(record), strict=True)}
        shown = sites.get((m.error_class, m.message), ())
        if shown and not _sites(rec) & set(shown):
            del best[i]


def _lookalikes_at_their_frame(record: Record, best: dict[int, tuple[SortKey, Match]]) -> None:
    """A record whose message others make too (`alsoMadeBy`: the interpreter's `'X' object has
    no attribute 'y'`, a dependency's `{name} must be contiguous`) matches only where the
    exception's traceback shows a frame at its site (`_frame_at_site`): on a lone line, or a
    traceback whose frames are elsewhere, the words say nothing of where they were made, and
    another record (a curated family's) or none speaks for the exception."""
    for i, (_, m) in list(best.items()):
        if not m.on_header and m.pattern.peek("also_made_by") and not _frame_at_site(record, m):
            del best[i]


def _frame_at_site(record: Record, m: Match) -> bool:
    """The frames of `m`'s exception in `record` put it at `m.pattern`'s site: for a site of
    sglang's, where they say the message was made (`frames.message_sites`); for a dependency's,
    the innermost frame in that package is in the record's file."""
    if record.kind != "traceback":
        return False
    rec = m.pattern
    for exc, frames in zip(record.exceptions, frames_by_exception(record), strict=True):
        if exc.message != m.message or not frames \
                or not classes_agree(exc.error_class, m.error_class):
            continue
        sites = _sites(rec)
        if sites:
            if sites & set(message_sites(frames)):
                return True
            continue
        path = rec.peek("file_path") or ""
        package = path.split("/", 1)[0] + "/"
        inner = [f.path for f in frames if package in f.path]
        if path and inner and inner[-1].endswith(path):
            return True
        if path and not path.endswith(".py") and _called_from(frames, package):
            return True  # the package's C++, raised under its own Python call
    return False


def _called_from(frames: tuple[Frame, ...], package: str) -> bool:
    """The innermost frame outside torch's dispatch (`torch.ops.…` calls a package's compiled
    op from torch/_ops.py) is the package's Python."""
    outside = [f.path for f in frames if "/torch/" not in f"/{f.path}"]
    return bool(outside) and "/sglang/" not in f"/{outside[-1]}" \
        and f"/{package}" in f"/{outside[-1]}"


def _curated_before_import_messages(best: dict[int, tuple[SortKey, Match]]) -> None:
    """On a traceback, a curated record that matches the same exception as an import or lookup
    message (`matcher.catalog.mismatch`) speaks for it: the pipeline computes the version answer for
    any record's event of that shape (`pipeline.mismatched`), and the curated record says
    what to do where that computes nothing."""
    curated = {(m.error_class, m.message) for _, m in best.values()
               if not m.on_header and m.pattern.peek("layer") == "curated"}
    if not curated:
        return
    for i, (_, m) in list(best.items()):
        if (m.error_class, m.message) in curated and m.pattern.peek("layer") == "generated" \
                and m.pattern.peek("generator") == IMPORT_MESSAGES:
            del best[i]


def _curated_before_dependency_records(best: dict[int, tuple[SortKey, Match]],
                                       chained: bool) -> None:
    """A curated record that matches the same exception, or the same plain line, as a record
    of a dependency's source (torch, flashinfer, sgl-kernel: a generated record with no file
    in sglang) speaks for it, however long each pattern's literal text: the dependency's
    record says where its check or log statement is, the curated one was written for how that
    failure shows in sglang and what to do (torch's `CUDA out of memory. Tried to allocate …`
    is the allocator's check; the curated record computes a new `--mem-fraction-static`).

    In a chain of exceptions (`chained`) a curated record of any of them speaks for the
    dependency records of the others: the dependency's exception is the cause the curated
    record was written around (huggingface_hub's `LocalEntryNotFoundError` under
    transformers' `We couldn't connect to 'https://huggingface.co'`, whose record says how to
    run offline)."""
    curated = {_target_of(m) for _, m in best.values() if m.pattern.peek("layer") == "curated"}
    if not curated:
        return
    on_exception = chained and any(not on_header for on_header, _, _ in curated)
    for i, (_, m) in list(best.items()):
        if not of_a_dependency(m.pattern):
            continue
        if _target_of(m) in curated or (on_exception and not m.on_header):
            del best[i]


# The generator of the native line shapes (a glog line `E0529 … rdma_context.cpp:203] msg`,
# NVSHMEM's `ibgda.cpp:2234: NULL value …`), and the source files they capture as `file`.
NATIVE_SHAPES = "matcher.catalog.native"
_NATIVE_SOURCE = regex.compile(r"\.(?:c|cc|cpp|cxx|cu|cuh|h|hh|hpp)$")


def _native_lines_before_sglang_sites(best: dict[int, tuple[SortKey, Match]]) -> None:
    """A plain line that a native shape matches with its C/C++ source file (`file`) was
    logged by that file, never by sglang's Python: a record of an sglang site whose message
    the line's text happens to hold (`Failed to register {desc}: {e}`, logged by sglang's
    NIXL storage backend, in Mooncake's `rdma_context.cpp:203] Failed to register memory …:
    Bad address`) does not speak for it."""
    native = {_target_of(m) for _, m in best.values()
              if m.on_header and m.pattern.peek("generator") == NATIVE_SHAPES
              and _NATIVE_SOURCE.search(m.captures.get("file") or "")}
    if not native:
        return
    for i, (_, m) in list(best.items()):
        path = m.pattern.peek("file_path") or ""
        if _target_of(m) in native and path.startswith("python/sglang/"):
            del best[i]


def _target_of(m: Match) -> tuple[bool, str, str]:
    """What a match was found in: an exception (its class and message) or a header's (a plain
    line's) text, whatever class each record names."""
    return (m.on_header, "" if m.on_header else m.error_class, m.message)


def of_a_dependency(rec: CatalogRecord) -> bool:
    """A generated record of a dependency's source (torch, flashinfer, sgl-kernel, the native
    vocabularies): no file in sglang, and not an import or lookup message (made anywhere)."""
    return rec.peek("layer") == "generated" and rec.peek("generator") != IMPORT_MESSAGES \
        and not _sites(rec)


def _sites(rec: CatalogRecord) -> set[str]:
    """The files (from `sglang/` on) that hold `rec` at any release."""
    paths = [rec.file_path or "", *(loc[1] or "" for loc in rec.sglang_locations)]
    return {p[p.rfind("sglang/"):] for p in paths if "sglang/" in p}


def targets_of(record: Record) -> list[Target]:
    out = [Target(e.error_class, e.message, False) for e in reversed(record.exceptions)]
    # A lone `Class: message` line is its exception; a traceback's header is a target of its own.
    if record.header and not (record.kind == "line" and record.exceptions):
        out.append(Target("", record.header, True))
    # The message of an API error body (`api_error`): the raising site's own text, in a
    # client's exception or a plain line, with no class of its own.
    for target in list(out):
        inner = api_error.message_of(target.message)
        if inner is not None:
            out.append(Target("", inner, False, in_body=True))
    # The import's own failure inside transformers' lazy importer's RuntimeError: its message
    # is what says what went wrong (`No module named …`, an undefined symbol), class unknown.
    for target in list(out):
        if not target.on_header and (wrapped := lazy_import_inner(target.message)) is not None:
            out.append(Target("", wrapped, False))
    return out


# A record of an answer's own message (`catalog.api_messages`, errorType `response`) says what
# sglang wrote into an error body: it recognizes a body's message, never another line that
# happens to open with the same words (`File not found`).
RESPONSE = "response"


def searched_in(rec: CatalogRecord, target: Target) -> bool:
    """Whether `rec` may match `target`: its class agrees, a response's only in a body, and one
    bound to its class (errorType `exception`) only in an exception that names a class."""
    kind = rec.error_type
    if kind == RESPONSE and not target.in_body:
        return False
    if kind == EXCEPTION and (not target.error_class or target.in_body):
        return False
    return classes_agree(rec.error_class, target.error_class)


def classes_agree(pattern_class: str | None, log_class: str) -> bool:
    """`OutOfMemoryError` agrees with `torch.OutOfMemoryError`; no class on either side agrees."""
    if not pattern_class or not log_class:
        return True
    return pattern_class.rsplit(".", 1)[-1] == log_class.rsplit(".", 1)[-1]


def _framed_and_matched(records: Sequence[CatalogRecord],
                        shipped: tuple[Store, set[int] | None] | None,
                        ) -> tuple[tuple[CatalogRecord, ...], Sequence[CatalogRecord]]:
    """The records that name their frame (`raisedIn`), and the others. The framed ones are not
    searched for in messages: they are looked up by the frame that raised an exception, by its
    file name or its source line (`Engine._framed_index`, made at the first exception). When
    `shipped` is the whole shipped catalog, its stored split is taken as it is."""
    if shipped is not None and shipped[1] is None:
        return shipped[0].framed_records, shipped[0].matched_records
    return (tuple(r for r in records if r.raised_in is not None),
            [r for r in records if r.raised_in is None])


class Engine:
    """A compiled catalog. `match` is pure apart from the timeout bookkeeping in `stats`."""

    # Which lines of a chunk can matter (None: every line is read; see `prefilter`).
    chunk_prefilter: ChunkPrefilter | None

    def __init__(
        self,
        records: Sequence[CatalogRecord],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        quarantine_after: int = 3,
        use_hyperscan: bool = True,
        cache: EngineCache | object | None = AUTO_CACHE,
        progress: Callable[[int, int], None] | None = None,
        messages_only: bool = False,
    ) -> None:
        """`progress(done, total)`: called while patterns are compiled (the daemon's log line
        and `/readyz` say how far a compile is). `messages_only`: no match of a traceback's
        header or of a cut line — the daemon's engine while the full catalog compiles: a
        record of the full catalog outranks such a match far more often than one of an
        exception's message."""
        self.timeout = timeout
        self.messages_only = messages_only
        self.quarantine_after = quarantine_after
        self._empty_state()
        use_hs = use_hyperscan and hs is not None
        shipped = store_of(records) if use_hs else None
        self.framed, matched = _framed_and_matched(records, shipped)
        use_hs = use_hs and bool(matched)
        rest = list(matched)
        chunks: list[ChunkPrefilter | None] = []
        if use_hs and shipped is not None:
            rest = self._add_shipped(*shipped, rest, chunks)
        if rest or not self._parts:
            self._add_compiled(rest, use_hs, cache, progress, chunks)
        if use_hs and chunks and all(c is not None for c in chunks):
            self.chunk_prefilter = ChunkPrefilter.union([c for c in chunks if c is not None])

    def _empty_state(self) -> None:
        """What the engine fills later, empty: the compiled parts (`_add_shipped`,
        `_add_compiled`), the index of the framed records (at the first exception) and the
        timeout bookkeeping (while matching)."""
        self._framed_compiled: dict[int, CompiledPattern] = {}
        self._framed_by: tuple[dict[str, list[int]], dict[str, list[int]]] | None = None
        self.stats = EngineStats()
        self._told_timeouts = 0  # stats.timeouts at the last `take_timeouts`
        self._untold_quarantined: list[str] = []
        self._timeouts_by_id: dict[str, int] = {}
        self._cut_timeouts_by_id: dict[str, int] = {}
        self._cut_patterns: dict[str, regex.Pattern[str]] = {}
        # The compiled parts: the precompiled built-in catalog as shipped (`matcher.precompiled`)
        # and the rest (a user's layer, or everything when nothing shipped fits), each with its
        # own databases; a pattern's index is global (`_Part.offset` + its index in the part).
        self._parts: list[_Part] = []
        self._always: tuple[int, ...] = ()  # patterns the Hyperscan databases cannot take
        self._literal_always: frozenset[int] = frozenset()
        # Each pattern's head (`cut_head`; None: a cut line cannot match it).
        self._heads: tuple[str | None, ...] = ()
        # Shipped patterns a later layer replaced (`merge_layers`): never candidates.
        self._masked: frozenset[int] = frozenset()
        self.patterns = _Patterns()
        self.chunk_prefilter = None

    def _add_shipped(self, store: Store, kept: set[int] | None, rest: list[CatalogRecord],
                     chunks: list[ChunkPrefilter | None]) -> list[CatalogRecord]:
        """Take the precompiled built-in catalog as a part (`kept`: which of its records are
        here, None: all); the records it does not hold, left to compile. Where its compiled
        form cannot be read, nothing is taken and `stats.note` says why."""
        try:
            form = store.engine_form()
        except Exception as e:  # noqa: BLE001 - any problem: compile instead
            self.stats.note = f"precompiled engine unusable ({e}): compiled instead"
            return rest
        stored = store.matched_records
        base = self._add_part(stored, form)
        chunks.append(form.chunk)
        self.stats.cache = "precompiled"
        if kept is None:
            return []
        self._masked = frozenset(base + i for i, r in enumerate(stored) if id(r) not in kept)
        return [r for r in rest if id(r) not in kept]

    def _add_compiled(self, rest: list[CatalogRecord], use_hs: bool,
                      cache: EngineCache | object | None,
                      progress: Callable[[int, int], None] | None,
                      chunks: list[ChunkPrefilter | None]) -> None:
        """Take `rest` as parts of their own, from the cache or compiled. Where nothing shipped
        fits (a checkout), the built-in records and a user's layer are parts of their own, as
        with the shipped catalog: a user catalog on top then costs its own compile, not the
        whole catalog's again."""
        shipped_in = bool(self._parts)
        groups = [rest] if shipped_in else _by_origin(rest)
        total = len(rest)
        statuses: list[str] = []
        done = 0
        for group in groups:
            status, loaded = self._compiled_part(
                group, use_hs, cache, progress and _offset_progress(progress, done, total))
            done += len(group)
            statuses.append(status)
            self._add_part(group, loaded)
            chunks.append(loaded.chunk)
        status = "+".join(statuses)
        self.stats.cache = f"precompiled+{status}" if shipped_in else status

    @staticmethod
    def _compiled_part(records: Sequence[CatalogRecord], use_hs: bool,
                       cache: EngineCache | object | None,
                       progress: Callable[[int, int], None] | None
                       ) -> tuple[str, CompiledForm]:
        """The compiled form of one part, from the cache or compiled (and then cached), and
        what happened: "hit", "miss", "rebuilt", "unwritable" or "off" (no cache)."""
        if cache is AUTO_CACHE:
            cache = EngineCache.default() if len(records) >= CACHE_MIN_PATTERNS else None
        assert cache is None or isinstance(cache, EngineCache)
        key = compile_key(records, use_hs) if cache is not None else ""
        loaded = cache.load(key, records) if cache is not None else None
        if loaded is not None:
            return "hit", loaded
        loaded = compile_form(records, use_hs, progress=progress)
        if cache is None:
            return "off", loaded
        if not cache.store(key, loaded):
            return "unwritable", loaded
        return ("rebuilt" if cache.last_corrupt else "miss"), loaded

    def _framed_index(self) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        """The framed records (their index in `framed`) by the file name their frame names,
        and, for those naming none, by its source line."""
        if self._framed_by is None:
            by_file: dict[str, list[int]] = {}
            by_source: dict[str, list[int]] = {}
            for j, r in enumerate(self.framed):
                raised_in = r.peek("raised_in")
                assert raised_in is not None
                if raised_in.computed:
                    continue
                name = raised_in.file_name
                if name is not None:
                    by_file.setdefault(name, []).append(j)
                else:
                    by_source.setdefault(raised_in.source or "", []).append(j)
            self._framed_by = (by_file, by_source)
        return self._framed_by

    def _add_part(self, records: Sequence[CatalogRecord], form: CompiledForm) -> int:
        """Take a compiled part for `records`; its offset among the engine's patterns."""
        base = self.patterns.add(records, form)
        self._always = (*self._always, *(base + i for i in form.always))
        self._literal_always = self._literal_always | {base + i for i in form.literal_always}
        self._heads = (*self._heads, *form.heads)
        literals = _Literals.of(form.literal_db, base, *literal_columns(form))
        heads = _Literals.of(form.head_db, base, [i for i, h in enumerate(form.heads) if h],
                             [h for h in form.heads if h])
        self._parts.append(_Part(base, form.hs_db, literals, heads))
        return base

    @property
    def records(self) -> tuple[CatalogRecord, ...]:
        """Every record of the catalog, the framed ones included."""
        return (*(r for i, r in enumerate(self.patterns.records()) if i not in self._masked),
                *self.framed)

    @functools.cached_property
    def record_by_id(self) -> dict[str, CatalogRecord]:
        """Every record by its id: made at the first event that needs it, once for every
        pipeline reading with this engine (45,000 records: 0.1 s)."""
        return {r.peek("id"): r for r in self.records}

    @functools.cached_property
    def docker_prefilter(self) -> ChunkPrefilter | None:
        """`chunk_prefilter` for docker json-file lines, whose text JSON may escape: every cover
        without such characters, and record-start signs as they look inside a JSON string.

        Built at the first docker source (seconds with the full catalog), not cached: most
        deployments read plain text or CRI and never pay for it.
        """
        if self.chunk_prefilter is None:
            return None
        records = list(self.patterns.records())
        return build_chunk_prefilter([r.message_pattern for r in records], json_safe=True,
                                      heads=self._heads, classes=[r.bound_class for r in records])

    @property
    def prefilter(self) -> str:
        return "hyperscan" if any(p.hs_db is not None for p in self._parts) else "literal"

    def match(self, record: Record) -> Match | None:
        """The most specific match for a record, or None."""
        found = self.match_all(record)
        return found[0] if found else None

    def match_all(self, record: Record) -> list[Match]:
        """Every pattern that matches the record, most specific first (one per pattern)."""
        best: dict[int, tuple[SortKey, Match]] = {}
        targets = targets_of(record)
        if self.messages_only:
            targets = [t for t in targets if not t.on_header]
        for target in targets:
            for i in self._candidates(target.message):
                pattern = self.patterns[i]
                if not searched_in(pattern.record, target):
                    continue
                captures = self._confirm(pattern, target.message)
                if captures is None:
                    continue
                key = pattern.sort_key(target.on_header)
                if i not in best or key < best[i][0]:
                    best[i] = (key, _match(pattern, captures, record, target, cut=False))
        if not self.messages_only and any(part.heads for part in self._parts):
            self._match_cut(record, targets, best)
        if best:
            _lookalikes_at_their_frame(record, best)
            _native_lines_before_sglang_sites(best)
            _curated_before_dependency_records(best, len(record.exceptions) > 1)
        if record.kind == "traceback" and best:
            _drop_contradicted_sites(record, best)
            _curated_before_import_messages(best)
        if self.framed and record.exceptions:
            self._match_framed(record, best)
        return [m for _, m in sorted(best.values(), key=lambda km: km[0])]

    def _match_framed(self, record: Record, best: dict[int, tuple[SortKey, Match]]) -> None:
        """Records that name the frame raising an exception (`raisedIn`), at the frames that
        identify each exception of the record (`frames.identifying`). Their keys in `best`
        are negative: they are not among `patterns`.

        A match at its frame ranks just ahead of the best match of the same exception's message
        alone (it says that, and where): by that match's literal length, plus one. An exception
        no message record recognized — a bare `assert` — ranks by its own pattern's literal
        text (none for `^$`): after every message recognized elsewhere in its chain.
        """
        by_file, by_source = self._framed_index()
        by_message: dict[tuple[str, str], int] = {}
        for _, m in best.values():
            if not m.on_header and not m.cut:
                key = (m.error_class, m.message)
                by_message[key] = max(by_message.get(key, 0), m.pattern.literal_length)
        for exc, frames in zip(record.exceptions, frames_by_exception(record), strict=True):
            target = Target(exc.error_class, exc.message, False)
            beaten = by_message.get((exc.error_class or "", exc.message))
            for frame in identifying(frames):
                name = frame.path.rsplit("/", 1)[-1]
                for j in (*by_file.get(name, ()), *by_source.get(frame.source, ())):
                    key = -1 - j
                    rec = self.framed[j]
                    assert rec.raised_in is not None
                    if key in best or not classes_agree(rec.error_class, exc.error_class) \
                            or not rec.raised_in.holds(frame.path, frame.function, frame.source):
                        continue
                    pattern = self._framed_compiled.get(j)
                    if pattern is None:
                        pattern = self._framed_compiled[j] = compile_pattern(rec)
                    captures = self._confirm(pattern, exc.message)
                    if captures is not None:
                        literal = rec.literal_length if beaten is None \
                            else max(rec.literal_length, beaten + 1)
                        best[key] = (pattern.sort_key(False, literal=literal),
                                     _match(pattern, captures, record, target, cut=False))

    def _match_cut(self, record: Record, targets: list[Target],
                   best: dict[int, tuple[SortKey, Match]]) -> None:
        """Matches of targets that end — cut by a collector, a terminal or a paste — inside a
        pattern after its head: `regex`'s partial matching says the text could have gone on
        to match. Captures the cut may have shortened are left out, never given wrong."""
        for target in targets:
            data = target.message.encode("utf-8", "surrogatepass")
            found = [i for part in self._parts for i in part.heads.scan(data)]
            for i in found:
                if i in best or i in self._masked:
                    continue
                pattern = self.patterns[i]
                if not searched_in(pattern.record, target):
                    continue
                captures = self._confirm(pattern, target.message, cut=self._heads[i] or "")
                if captures is None:
                    continue
                best[i] = (pattern.sort_key(target.on_header, cut=True),
                           _match(pattern, captures, record, target, cut=True))

    def _count_timeout(self, rid: str, counts: dict[str, int], quarantined: set[str]) -> None:
        counts[rid] = counts.get(rid, 0) + 1
        if counts[rid] >= self.quarantine_after:
            if rid not in quarantined and quarantined is self.stats.quarantined:
                self._untold_quarantined.append(rid)
            quarantined.add(rid)

    def take_timeouts(self) -> tuple[int, list[str]]:
        """Whole-pattern timeouts since the last call, and the patterns quarantined since: what
        the daemon counts and logs (the engine itself never logs)."""
        told = self._told_timeouts
        self._told_timeouts = self.stats.timeouts
        quarantined, self._untold_quarantined = self._untold_quarantined, []
        return self.stats.timeouts - told, sorted(quarantined)

    def _cut_compiled(self, pattern: CompiledPattern) -> regex.Pattern[str]:
        """The pattern up to its first unbounded wildcard (`cut_prefix`), compiled once: a cut
        must fall inside it — a wildcard would call any line's rest a cut."""
        compiled = self._cut_patterns.get(pattern.record.id)
        if compiled is None:
            compiled = regex.compile(cut_prefix(pattern.record.message_pattern))
            self._cut_patterns[pattern.record.id] = compiled
        return compiled

    def _candidates(self, text: str) -> Iterable[int]:
        if text.isascii() and self._parts and all(p.hs_db is not None for p in self._parts):
            hits: set[int] = set(self._always)
            for part in self._parts:
                base = part.offset

                def on_match(pid: int, _from: int, _to: int, _flags: int, _ctx: object,
                             base: int = base) -> None:
                    hits.add(base + pid)

                part.hs_db.scan(text.encode("ascii"), match_event_handler=on_match)
            return sorted(hits - self._masked) if self._masked else sorted(hits)
        # Non-ASCII text (rare in sglang's messages) takes the literal prefilter: the database
        # is compiled without Unicode classes, which makes it far cheaper to build.
        # Its literals are matched as UTF-8 bytes (exact for any text: UTF-8 is
        # self-synchronizing), in one Hyperscan scan rather than a Python loop over every
        # literal: sglang logs users' non-ASCII prompts on `Receive:` lines.
        data = text.encode("utf-8", "surrogatepass")
        found = self._literal_always.union(*(part.literals.scan(data) for part in self._parts))
        return sorted(found - self._masked)

    def _confirm(self, pattern: CompiledPattern, text: str, *, cut: str = ""
                 ) -> dict[str, str] | None:
        """The captures of `pattern`'s match in `text`, or None. `cut`: the pattern's head —
        accept only a match that the end of the text cut short, and that holds the head."""
        rid = pattern.record.id
        if rid in self.stats.quarantined:
            return None
        if cut and rid in self.stats.cut_quarantined:
            return None
        compiled = self._cut_compiled(pattern) if cut else pattern.compiled
        try:
            m = compiled.search(text, partial=bool(cut),
                                timeout=min(self.timeout, CUT_TIMEOUT) if cut else self.timeout)
        except TimeoutError:
            # No prefilter vouches for a cut attempt (the text need not match the whole
            # pattern), so it is given little time and quarantined on its own: the pattern's
            # whole matches go on.
            if cut:
                self.stats.cut_timeouts += 1
                self._count_timeout(rid, self._cut_timeouts_by_id, self.stats.cut_quarantined)
            else:
                self.stats.timeouts += 1
                self._count_timeout(rid, self._timeouts_by_id, self.stats.quarantined)
            return None
        if m is None:
            return None
        if cut:  # only a match the end of the text cut short, holding the whole head
            end = len(text)
            if not m.partial or m.end() != end or text.find(cut, m.start()) < 0:
                return None
            return {name: m.group(num) for num, name in pattern.capture_names.items()
                    if num <= compiled.groups and m.group(num) is not None and m.end(num) < end}
        return {
            name: m.group(num)
            for num, name in pattern.capture_names.items()
            if m.group(num) is not None
        }


@dataclass(frozen=True, slots=True)
class _Literals:
    """Literals of a part's patterns, and which pattern each is (an index among the engine's):
    found in one scan of `db` (`_build_literal_db` of the same literals in the same order: a
    hit's id is its position), or — without Hyperscan — by testing each of `table` in turn.
    A pattern may have several literals (a cover: one per branch of an alternation)."""

    db: Any
    # by position in the database: the pattern (an array: the full catalog's 60,000 indexes
    # as int objects were 2 MB)
    ids: Sequence[int]
    texts: Sequence[str]  # by position in the database: the literal
    table: tuple[tuple[int, bytes], ...] = ()  # only without `db`: only then are bytes read

    @classmethod
    def of(cls, db: Any, base: int, ids: Sequence[int], texts: Sequence[str]) -> _Literals:
        """`texts` and their patterns' `ids` (indexes in the part), in the order `db` was built
        from."""
        found = cls(db, array("q", [base + i for i in ids] if base else ids), tuple(texts))
        return found if db is not None else found.one_by_one()

    def one_by_one(self) -> _Literals:
        """The same literals, tested one by one: what a scan of `db` must agree with."""
        return _Literals(None, self.ids, self.texts, literal_table(zip(self.ids, self.texts)))

    def __bool__(self) -> bool:
        return bool(self.ids)

    def scan(self, data: bytes) -> list[int]:
        """The patterns whose literal `data` holds."""
        if self.db is None:
            return [i for i, literal in self.table if literal in data]
        found: list[int] = []
        ids = self.ids

        def on_literal(pos: int, _from: int, _to: int, _flags: int, _ctx: object) -> None:
            found.append(ids[pos])

        self.db.scan(data, match_event_handler=on_literal)
        return found


def _match(pattern: CompiledPattern, captures: dict[str, str], record: Record, target: Target,
           *, cut: bool) -> Match:
    return Match(
        pattern=pattern.record,
        captures=captures,
        record=record,
        error_class=target.error_class or (pattern.record.error_class or ""),
        message=target.message,
        on_header=target.on_header,
        cut=cut,
    )


@dataclass(frozen=True, slots=True)
class _Part:
    """One compiled part of an engine, at `offset` among its patterns."""

    offset: int
    hs_db: Any
    literals: _Literals  # for non-ASCII text
    heads: _Literals  # for cut lines (`cut_head`)


class _Patterns(Sequence[CompiledPattern]):
    """The engine's patterns, each made the first time it is asked for.

    The full catalog has tens of thousands, and a scan confirms a few hundred: making them all
    up front would cost every start (and every `scan -j` before its workers could begin).
    """

    def __init__(self) -> None:
        self._made: list[CompiledPattern | None] = []
        self._bases: list[int] = []  # each part's first index
        self._parts: list[tuple[Sequence[CatalogRecord], CompiledForm]] = []

    def add(self, records: Sequence[CatalogRecord], form: CompiledForm) -> int:
        """A part's records and their compiled form; the part's first index."""
        if len(form.literal) != len(records) or len(form.names) != len(records) \
                or (form.regexes and len(form.regexes) != len(records)):
            raise ValueError(f"a compiled form of {len(form.literal)} patterns "
                             f"for {len(records)} records")
        base = len(self._made)
        self._made.extend([None] * len(records))
        self._bases.append(base)
        self._parts.append((records, form))
        return base

    @property
    def made(self) -> int:
        """How many patterns were made so far (tests, memory)."""
        return len(self._made) - self._made.count(None)

    def records(self) -> Iterator[CatalogRecord]:
        """Every pattern's record, in index order, without making the patterns."""
        for records, _ in self._parts:
            yield from records

    def __len__(self) -> int:
        return len(self._made)

    @overload
    def __getitem__(self, i: int) -> CompiledPattern: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[CompiledPattern]: ...
    def __getitem__(self, i: int | slice) -> CompiledPattern | Sequence[CompiledPattern]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        made = self._made[i]
        if made is None:
            made = self._made[i] = self._make(i % len(self._made))
        return made

    def _make(self, i: int) -> CompiledPattern:
        part = bisect.bisect_right(self._bases, i) - 1
        records, form = self._parts[part]
        k = i - self._bases[part]
        return CompiledPattern(records[k], None,
                               {n + 1: name for n, name in enumerate(form.names[k])},
                               form.literal[k], form.regexes[k] if form.regexes else None)


def _by_origin(records: list[CatalogRecord]) -> list[list[CatalogRecord]]:
    """`records` as the built-in ones and a user's layer, when both are there (else one part).

    The built-in part is the built-in catalog less what the user's layer replaced: all of it
    (the same key, a cache hit) unless the user's records replace built-in ones."""
    mine = [r.peek("layer") == "user" for r in records]  # peeked: no stored record settles
    if all(mine) or not any(mine):
        return [records]
    return [[r for r, m in zip(records, mine, strict=True) if not m],
            [r for r, m in zip(records, mine, strict=True) if m]]


def _offset_progress(progress: Callable[[int, int], None], done: int, total: int
                     ) -> Callable[[int, int], None]:
    """A part's compile progress as progress through all parts (`done` compiled before it)."""
    return lambda d, _n: progress(done + d, total)
