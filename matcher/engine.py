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

import bisect
import contextlib
import functools
import gc
import hashlib
import io
import json
import os
import pickle
import re
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import regex

from matcher import cache
from matcher.catalog.load import code_fingerprint, fields_text
from matcher.catalog.patterns import (
    analyze,
    cut_head,
    cut_prefix,
    json_safe_piece,
    literal_cover,
    positional_capture_names,
)
from matcher.catalog.schema import LAYER_RANK, CatalogRecord
from matcher.frames import frames_by_exception, identifying, message_sites
from matcher.framing import DOCKER_RECORD_START_SIGNS, RECORD_START_SIGNS
from matcher.prefilter import ChunkPrefilter
from matcher.types import Match, Record

_hs: Any
try:  # optional: wheels for x86-64, aarch64 and macOS
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised on platforms without wheels
    _hs = None

DEFAULT_TIMEOUT = 0.05
CUT_TIMEOUT = 0.005
_MIN_PREFILTER_LITERAL = 3
CACHE_FORMAT = 5
# Below this many patterns compiling costs less than reading a cache entry; the curated catalog
# alone (0.35 s to compile) is above it.
CACHE_MIN_PATTERNS = 50
AUTO_CACHE = object()  # Engine(cache=...) default: the application's cache dir (`matcher.cache`), for large catalogs


@dataclass(frozen=True, slots=True)
class Target:
    """A piece of a record that patterns are searched in."""

    error_class: str
    message: str
    on_header: bool


class CompiledPattern:
    """A record's pattern, ready to confirm. When the rest came from the cache, its `regex` is
    made on first use: from `pickled` (the compiled program, `thaw`) where the cache kept it,
    else compiled."""

    __slots__ = ("_compiled", "_pickled", "capture_names", "literal", "record")

    def __init__(self, record: CatalogRecord, compiled: regex.Pattern[str] | None,
                 capture_names: dict[int, str], literal: str | None,
                 pickled: bytes | None = None) -> None:
        self.record = record
        self.capture_names = capture_names
        self.literal = literal  # a literal every match contains, for the fallback prefilter
        self._compiled = compiled
        self._pickled = pickled

    @property
    def compiled(self) -> regex.Pattern[str]:
        if self._compiled is None:
            pattern = self.record.message_pattern
            thawed = thaw(self._pickled, pattern) if self._pickled is not None else None
            self._compiled = thawed if thawed is not None else regex.compile(pattern)
            self._pickled = None
        return self._compiled

    def sort_key(self, on_header: bool, cut: bool = False, literal: int | None = None
                 ) -> SortKey:
        """Smaller is more specific; `min()` over matches picks the winner. A match of a cut
        text comes after every whole match of the same kind of target. `literal`: the literal
        length to rank by, when not the record's own (a match at a named frame)."""
        r = self.record
        return (int(on_header), int(cut), -(r.literal_length if literal is None else literal),
                -LAYER_RANK[r.layer], r.id)


SortKey = tuple[int, int, int, int, str]


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


def _drop_contradicted_sites(record: Record, best: dict[int, tuple[SortKey, Match]]) -> None:
    """A generated record is a site of sglang's source: matched by its message on a traceback
    whose exception passed through sglang's frames, it must be where the traceback says the
    message was made (`frames.message_sites`), at some release that has the record. Else the
    message is a look-alike — the interpreter's own `'X' object has no attribute 'y'`, or
    the same words raised elsewhere — and the event would name a site the log contradicts:
    the match is dropped, and another record (or none) speaks for the exception."""
    sites: dict[tuple[str, str], tuple[str, ...]] | None = None
    for i, (_, m) in list(best.items()):
        rec = m.pattern
        if m.on_header or rec.peek("layer") != "generated" or rec.peek("raised_in") is not None:
            continue
        if sites is None:
            sites = {(exc.error_class, exc.message): message_sites(f) for exc, f in
                     zip(record.exceptions, frames_by_exception(record), strict=True)}
        shown = sites.get((m.error_class, m.message), ())
        if shown and not _sites(rec) & set(shown):
            del best[i]


def _sites(rec: CatalogRecord) -> set[str]:
    """The files (from `sglang/` on) that hold `rec` at any release."""
    paths = [rec.file_path or "", *(loc[1] or "" for loc in rec.sglang_locations)]
    return {p[p.rfind("sglang/"):] for p in paths if "sglang/" in p}


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
        # Records that name their frame (`raisedIn`) are not searched for in messages: they are
        # looked up by the frame that raised an exception, by its file name or its source line
        # (`_framed_index`, made at the first exception).
        use_hs = use_hyperscan and _hs is not None
        shipped = _shipped_part(records) if use_hs else None
        matched: Sequence[CatalogRecord]
        self.framed: tuple[CatalogRecord, ...]
        if shipped is not None and shipped[1] is None:  # the shipped catalog, all of it
            self.framed, matched = shipped[0].framed_records, shipped[0].matched_records
        else:
            self.framed = tuple(r for r in records if r.raised_in is not None)
            matched = [r for r in records if r.raised_in is None]
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
        # Which lines of a chunk can matter (None: every line is read; see `prefilter`).
        self.chunk_prefilter: ChunkPrefilter | None = None
        self._use_hs = use_hs = use_hs and bool(matched)
        rest = list(matched)
        chunks: list[ChunkPrefilter | None] = []
        if use_hs and shipped is not None:
            store, kept = shipped
            try:
                form = store.engine_form()
            except Exception as e:  # noqa: BLE001 - any problem: compile instead
                self.stats.note = f"precompiled engine unusable ({e}): compiled instead"
            else:
                stored = store.matched_records
                base = self._add_part(stored, form)
                chunks.append(form.chunk)
                if kept is not None:
                    self._masked = frozenset(base + i for i, r in enumerate(stored)
                                             if id(r) not in kept)
                    rest = [r for r in rest if id(r) not in kept]
                else:
                    rest = []
                self.stats.cache = "precompiled"
        if rest or not self._parts:
            # Where nothing shipped fits (a checkout), the built-in records and a user's layer
            # are still compiled and cached as parts of their own, as with the shipped catalog:
            # a user catalog on top then costs its own compile, not the whole catalog's again.
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
        if use_hs and chunks and all(c is not None for c in chunks):
            self.chunk_prefilter = ChunkPrefilter.union([c for c in chunks if c is not None])

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
        skip = frozenset(form.literal_always)
        literals = _Literals.of(form.literal_db, base, form.literal, [
            i for i, literal in enumerate(form.literal) if literal is not None and i not in skip])
        heads = _Literals.of(form.head_db, base, form.heads,
                             [i for i, h in enumerate(form.heads) if h])
        self._parts.append(_Part(base, form.hs_db, literals, heads))
        return base

    @property
    def records(self) -> tuple[CatalogRecord, ...]:
        """Every record of the catalog, the framed ones included."""
        return (*(r for i, r in enumerate(self.patterns.records()) if i not in self._masked),
                *self.framed)

    @functools.cached_property
    def docker_prefilter(self) -> ChunkPrefilter | None:
        """`chunk_prefilter` for docker json-file lines, whose text JSON may escape: every cover
        without such characters, and record-start signs as they look inside a JSON string.

        Built at the first docker source (about two seconds with the full catalog), not cached:
        most deployments read plain text or CRI and never pay for it.
        """
        if self.chunk_prefilter is None:
            return None
        return _build_chunk_prefilter([r.message_pattern for r in self.patterns.records()],
                                      json_safe=True, heads=self._heads)

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
                if not classes_agree(pattern.record.error_class, target.error_class):
                    continue
                captures = self._confirm(pattern, target.message)
                if captures is None:
                    continue
                key = pattern.sort_key(target.on_header)
                if i not in best or key < best[i][0]:
                    best[i] = (key, _match(pattern, captures, record, target, cut=False))
        if not self.messages_only and any(part.heads for part in self._parts):
            self._match_cut(record, targets, best)
        if record.kind == "traceback" and best:
            _drop_contradicted_sites(record, best)
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
                        pattern = self._framed_compiled[j] = _compile(rec)
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
                if not classes_agree(pattern.record.error_class, target.error_class):
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
        # is compiled without Unicode classes, which costs 15× less to build.
        # Its literals are matched as UTF-8 bytes (exact for any text: UTF-8 is
        # self-synchronizing), in one Hyperscan scan: a Python loop over 21,000 literals took
        # 5–10 ms a target, and sglang logs users' non-ASCII prompts on `Receive:` lines.
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


def _literal_table(pairs: Iterable[tuple[int, str]]) -> tuple[tuple[int, bytes], ...]:
    return tuple((i, text.encode("utf-8", "surrogatepass")) for i, text in pairs)


@dataclass(frozen=True, slots=True)
class _Literals:
    """Literals of a part's patterns, and which pattern each is (an index among the engine's):
    found in one scan of `db` (`_build_literal_db` of the same literals in the same order: a
    hit's id is its position), or — without Hyperscan — by testing each of `table` in turn."""

    db: Any
    ids: tuple[int, ...]
    texts: Sequence[str | None]  # the part's literals (by index in the part)
    base: int  # the part's first index
    table: tuple[tuple[int, bytes], ...] = ()  # only without `db`: only then are bytes read

    @classmethod
    def of(cls, db: Any, base: int, texts: Sequence[str | None], kept: Sequence[int]
           ) -> _Literals:
        """`texts` of a part's patterns, those at `kept` (indexes in the part) searched, in
        the order `db` was built from."""
        found = cls(db, tuple(base + i for i in kept) if base else tuple(kept), texts, base)
        return found if db is not None else found.one_by_one()

    def one_by_one(self) -> _Literals:
        """The same literals, tested one by one: what a scan of `db` must agree with."""
        return _Literals(None, self.ids, self.texts, self.base, _literal_table(
            (i, self.texts[i - self.base] or "") for i in self.ids))

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


def freeze(compiled: regex.Pattern[str]) -> bytes:
    """A compiled pattern as `regex` pickles it: the program its parser made (`thaw`)."""
    return pickle.dumps(compiled, protocol=pickle.HIGHEST_PROTOCOL)


class _CompiledRegexUnpickler(pickle.Unpickler):
    """Loads `regex`'s pickle of a compiled pattern and nothing else: a cache file is data, and
    no other callable may come out of it."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == _REGEX_PICKLE_GLOBAL:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name}: not a compiled pattern")


_REGEX_PICKLE_GLOBAL = ("regex._regex", "compile")


def thaw(data: bytes, pattern: str) -> regex.Pattern[str] | None:
    """`pattern` compiled, from `freeze`'s bytes; None when they are not that pattern's.

    `regex` parses a pattern in Python, which is nearly all of compiling one (0.4–0.7 ms each:
    a scan of a large log confirms a few hundred patterns, and every worker of `scan -j` did so
    again); its pickle holds the program the parser made, and loading it skips the parser —
    some 60× faster. The cache key names `regex`'s version, whose programs these are.
    """
    try:
        compiled = _CompiledRegexUnpickler(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001 - damaged or foreign: compile instead
        return None
    if not isinstance(compiled, regex.Pattern) or compiled.pattern != pattern:
        return None
    return compiled


def _compile(record: CatalogRecord) -> CompiledPattern:
    compiled = regex.compile(record.message_pattern)
    facts = analyze(record.message_pattern)
    literal = next((lit for lit in facts.required_literals if len(lit) >= _MIN_PREFILTER_LITERAL),
                   None)
    return CompiledPattern(record, compiled, positional_capture_names(compiled), literal)


_INLINE_CASELESS = re.compile(r"\(\?[a-zA-Z^-]*i")


def _build_chunk_prefilter(patterns: Sequence[str], *, json_safe: bool = False,
                           heads: Sequence[str | None] = ()) -> ChunkPrefilter | None:
    """`patterns`: the message patterns, in the engine's order."""
    covers = []
    for i, pattern in enumerate(patterns):
        cover = literal_cover(pattern, json_safe=json_safe)
        # A line cut before its cover may still hold the pattern's head: read it too.
        head = heads[i] if i < len(heads) else None
        if cover is not None and head is not None:
            piece = json_safe_piece(head) if json_safe else head
            if piece is not None and piece not in cover:
                cover = (*cover, piece)
        # An inline `i` flag anywhere (global or scoped) is read as caseless: more hits, no loss.
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
        compiled: object = db
        return compiled

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


def _load_db(data: bytes) -> Any:
    """A database as `hyperscan.dumpb` wrote it, with the scratch a loaded one comes without."""
    if _hs is None:
        raise ValueError("hyperscan is not available")
    db = _hs.loadb(data, _hs.HS_MODE_BLOCK)
    db.scratch = _hs.Scratch(db)
    return db


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
    h.update(json.dumps([CACHE_FORMAT, code, use_hyperscan, version, _HS_FLAGS,
                         regex.__version__]).encode())
    h.update(fields_text((r.id, r.message_pattern, r.error_class, r.layer) for r in records))
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
        data = encode_form(key, form)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".engine-", dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, self.path(key))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
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
            for old in [e for e in entries if e != keep][_KEEP_ENTRIES - 1:]:
                old.unlink(missing_ok=True)
        except OSError:
            pass


@dataclass(frozen=True, slots=True)
class _Part:
    """One compiled part of an engine, at `offset` among its patterns."""

    offset: int
    hs_db: Any
    literals: _Literals  # for non-ASCII text
    heads: _Literals  # for cut lines (`cut_head`)


class _Patterns(Sequence[CompiledPattern]):
    """The engine's patterns, each made the first time it is asked for.

    The full catalog has 21,000, and a scan confirms a few hundred: making them all took a
    fifth of every start (and of every `scan -j` before its workers could begin).
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


@dataclass(slots=True)
class CompiledForm:
    """What compiling records yields, indexed by their position: what the cache and the
    precompiled catalog keep. `regex` objects are kept as their pickles (`freeze`), made into
    patterns on first use."""

    literal: list[str | None]
    names: list[list[str]]
    literal_always: list[int]
    always: list[int]
    heads: list[str | None]
    hs_db: Any = None
    chunk: ChunkPrefilter | None = None
    literal_db: Any = None
    head_db: Any = None
    regexes: Sequence[bytes] = ()  # `freeze` of each pattern; empty: none kept


class FrozenRegexes(Sequence[bytes]):
    """`CompiledForm.regexes` as a file holds them: a section of an offset table, then the
    pickles end to end. The table is read with the form; a pickle, when its pattern is first
    made, as a prefilter candidate (one `pread`): the 21,000 patterns' 9 MB would otherwise
    stay in every process's memory for the few hundred a log needs. A file replaced or gone
    since gives nothing, and the pattern is compiled instead (`thaw` checks what it is given)."""

    def __init__(self, path: Path, at: int, count: int, table: bytes) -> None:
        size = 8 * (count + 1)
        if len(table) != size:
            raise ValueError("truncated regex section")
        self._offsets: tuple[int, ...] = struct.unpack_from(f"<{count + 1}Q", table)
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


def compile_form(records: Sequence[CatalogRecord], use_hyperscan: bool, *,
                 progress: Callable[[int, int], None] | None = None) -> CompiledForm:
    """Compile `records` (none framed): the slow part of a cold start."""
    total = len(records)
    patterns = []
    for n, r in enumerate(records):
        patterns.append(_compile(r))
        if progress is not None and n % 500 == 0:
            progress(n, total)
    literal_always = [i for i, p in enumerate(patterns)
                      if p.literal is None or p.compiled.flags & regex.IGNORECASE]
    heads = [None if _INLINE_CASELESS.search(p.record.message_pattern)
             else cut_head(p.record.message_pattern) for p in patterns]
    form = CompiledForm([p.literal for p in patterns],
                        [[p.capture_names[i] for i in sorted(p.capture_names)] for p in patterns],
                        literal_always, [], heads, regexes=[freeze(p.compiled) for p in patterns])
    if use_hyperscan and _hs is not None and patterns:
        form.hs_db, always = _build_hyperscan(patterns)
        form.always = list(always)
        form.chunk = _build_chunk_prefilter([p.record.message_pattern for p in patterns],
                                            heads=heads)
        skip = set(literal_always)
        form.literal_db = _build_literal_db(_literal_table(
            (i, p.literal) for i, p in enumerate(patterns) if p.literal is not None
            and i not in skip))
        form.head_db = _build_literal_db(_literal_table((i, h) for i, h in enumerate(heads) if h))
    if progress is not None:
        progress(total, total)
    return form


def encode_form(key: str, form: CompiledForm) -> bytes:
    """The cache file's bytes: a header line, a JSON head, the databases."""
    dump = _hs.dumpb if _hs is not None else None
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
    head = json.dumps({
        "format": CACHE_FORMAT,
        "key": key,
        "n": len(form.literal),
        "literal": form.literal,
        "names": form.names,
        "literal_always": sorted(form.literal_always),
        "always": list(form.always),
        "hyperscan": form.hs_db is not None,
        "chunk_at": chunk_at,
        "literal_at": literal_at,
        "head_at": head_at,
        "regex_at": regex_at,
        "regexes": bool(form.regexes),
        "heads": form.heads,
        "blob_sha256": hashlib.sha256(blob).hexdigest(),
    }, separators=(",", ":")).encode()
    return _MAGIC + struct.pack("<Q", len(head)) + head + blob


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection while a compiled catalog loads: it makes hundreds of thousands of
    objects and no cycle, and the collections they set off took a third of the load's time."""
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
        magic = f.read(len(_MAGIC) + 8)
        if not magic.startswith(_MAGIC) or len(magic) < len(_MAGIC) + 8:
            raise ValueError("not an engine cache file")
        (head_len,) = struct.unpack_from("<Q", magic, len(_MAGIC))
        head = json.loads(f.read(head_len))
        if head["format"] != CACHE_FORMAT or (key is not None and head["key"] != key) \
                or head["n"] != n:
            raise ValueError("another catalog's entry")
        at = f.tell()
        if verify:
            digest = hashlib.sha256()
            for piece in iter(lambda: f.read(1 << 20), b""):
                digest.update(piece)
            if digest.hexdigest() != head["blob_sha256"]:
                raise ValueError("damaged")
            end = f.tell()
        else:
            end = os.fstat(f.fileno()).st_size

        def section(lo: int, hi: int) -> bytes:
            f.seek(at + lo)
            data = f.read(hi - lo)
            if len(data) != hi - lo:
                raise ValueError("truncated")
            return data

        split, literal_at, head_at = head["chunk_at"], head["literal_at"], head["head_at"]
        regex_at = head["regex_at"]
        form = CompiledForm(head["literal"], head["names"], head["literal_always"],
                            head["always"], head["heads"])
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


def _shipped_part(records: Sequence[CatalogRecord]) -> tuple[Any, set[int] | None] | None:
    """The precompiled store the records come from (`matcher.precompiled`), and which of its
    records are here (by identity; None: all, and nothing else); None when none come from
    one."""
    from matcher.precompiled import store_of

    return store_of(records)
