"""Records to matches: which catalog record, if any, recognizes a record — fast, and always the same one.

Every record is searched in a few *targets*: the `Class: message` lines of a traceback (the final
exception and its chained causes), or a plain line's message, and the traceback's header. A
multi-pattern prefilter (Hyperscan in prefilter mode where installed, else required literals)
picks the few patterns that can match a target in one pass; `regex` then confirms and captures,
with a timeout so a pathological pattern cannot stall the pipeline. A pattern that times out is
quarantined after `quarantine_after` timeouts and is not tried again until the next compile.

The winner is the most specific match: on an exception line over on a header, then most
literal characters, then the later layer (curated over generated), then the smaller id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import regex

from matcher.catalog.patterns import analyze, positional_capture_names
from matcher.catalog.schema import LAYER_RANK, CatalogRecord
from matcher.types import Match, Record

try:  # optional: wheels for x86-64, aarch64 and macOS
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised on platforms without wheels
    _hs = None

DEFAULT_TIMEOUT = 0.05
_MIN_PREFILTER_LITERAL = 3


@dataclass(frozen=True, slots=True)
class Target:
    """A piece of a record that patterns are searched in."""

    error_class: str
    message: str
    on_header: bool


@dataclass(frozen=True, slots=True)
class CompiledPattern:
    record: CatalogRecord
    compiled: regex.Pattern[str]
    capture_names: dict[int, str]
    literal: str | None  # a literal every match contains, for the fallback prefilter

    def sort_key(self, on_header: bool) -> tuple[int, int, int, str]:
        """Smaller is more specific; `min()` over matches picks the winner."""
        r = self.record
        return (int(on_header), -r.literal_length, -LAYER_RANK[r.layer], r.id)


@dataclass(slots=True)
class EngineStats:
    """What the engine saw go wrong; the daemon turns these into counters."""

    timeouts: int = 0
    quarantined: set[str] = field(default_factory=set)


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
    ) -> None:
        self.timeout = timeout
        self.quarantine_after = quarantine_after
        self.stats = EngineStats()
        self._timeouts_by_id: dict[str, int] = {}
        self.patterns: tuple[CompiledPattern, ...] = tuple(_compile(r) for r in records)
        # Patterns the literal prefilter cannot vouch for: always confirmed with `regex`.
        self._literal_always = frozenset(
            i for i, p in enumerate(self.patterns)
            if p.literal is None or p.compiled.flags & regex.IGNORECASE
        )
        self._always: tuple[int, ...] = ()
        self._hs_db = None
        if use_hyperscan and _hs is not None and self.patterns:
            self._hs_db, self._always = _build_hyperscan(self.patterns)

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
        return [
            i for i, p in enumerate(self.patterns)
            if i in self._literal_always or (p.literal is not None and p.literal in text)
        ]

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
