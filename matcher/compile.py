"""Catalog records to their compiled form: what matching needs of each pattern, built once.

Compiling is the slow part of a cold start: `regex`'s parser for each pattern and Hyperscan's
compiler for the prefilter databases. `compile_form` makes, per pattern in the records' order,
its required literal (the prefilter without Hyperscan), its capture names, its head (what a cut
line must hold) and its compiled `regex` program as a pickle (`freeze`), and, with Hyperscan,
the prefilter database, the literal and head databases and the chunk prefilter. The form is
what `matcher.stored_form` writes to disk and `matcher.engine` matches with.
"""

from __future__ import annotations

import io
import pickle
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from matcher.catalog.patterns import (
    analyze,
    cut_head,
    json_safe_piece,
    literal_cover,
    positional_capture_names,
)
from matcher.catalog.schema import LAYER_RANK, CatalogRecord
from matcher.framing import DOCKER_RECORD_START_SIGNS, RECORD_START_SIGNS
from matcher.prefilter import ChunkPrefilter

hs: Any  # the `hyperscan` module, or None where it is not installed
try:  # optional: wheels for x86-64, aarch64 and macOS
    import hyperscan as hs
except ImportError:  # pragma: no cover - exercised on platforms without wheels
    hs = None

MIN_PREFILTER_LITERAL = 3


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
class CompiledForm:
    """What compiling records yields, indexed by their position: what the cache and the
    precompiled catalog keep. `regex` objects are kept as their pickles (`freeze`), made into
    patterns on first use."""

    literal: list[str | None]
    names: list[list[str]]
    literal_always: list[int]
    always: list[int]
    heads: list[str | None]
    # Literals one of which every match holds, for patterns with no single required literal
    # (an alternation: one per branch; `literal_cover`): they take the literal prefilter too.
    covers: dict[int, list[str]] = field(default_factory=dict)
    hs_db: Any = None
    chunk: ChunkPrefilter | None = None
    literal_db: Any = None
    head_db: Any = None
    regexes: Sequence[bytes] = ()  # `freeze` of each pattern; empty: none kept



def compile_form(records: Sequence[CatalogRecord], use_hyperscan: bool, *,
                 progress: Callable[[int, int], None] | None = None) -> CompiledForm:
    """Compile `records` (none framed): the slow part of a cold start."""
    total = len(records)
    patterns = []
    for n, r in enumerate(records):
        patterns.append(compile_pattern(r))
        if progress is not None and n % 500 == 0:
            progress(n, total)
    # Each pattern's literal cover, made once: the literal prefilter takes those of patterns
    # with no single required literal, the chunk prefilter every one.
    chunked = use_hyperscan and hs is not None and bool(patterns)
    plain_covers = [literal_cover(p.record.message_pattern) if chunked or p.literal is None
                    else None for p in patterns]
    covers = {i: list(cover) for i, (p, cover) in enumerate(zip(patterns, plain_covers))
              if p.literal is None and cover is not None and _case_sensitive(p)}
    literal_always = [i for i, p in enumerate(patterns)
                      if (p.literal is None and i not in covers)
                      or p.compiled.flags & regex.IGNORECASE]
    heads = [None if _INLINE_CASELESS.search(p.record.message_pattern)
             else cut_head(p.record.message_pattern) for p in patterns]
    form = CompiledForm([p.literal for p in patterns],
                        [[p.capture_names[i] for i in sorted(p.capture_names)] for p in patterns],
                        literal_always, [], heads, covers,
                        regexes=[freeze(p.compiled) for p in patterns])
    if chunked:
        form.hs_db, always = _build_hyperscan(patterns)
        form.always = list(always)
        form.chunk = build_chunk_prefilter([p.record.message_pattern for p in patterns],
                                            heads=heads, covers=plain_covers,
                                            classes=[p.record.bound_class for p in patterns])
        form.literal_db = _build_literal_db(literal_table(zip(*literal_columns(form))))
        form.head_db = _build_literal_db(literal_table((i, h) for i, h in enumerate(heads) if h))
    if progress is not None:
        progress(total, total)
    return form



def literal_columns(form: CompiledForm) -> tuple[list[int], list[str]]:
    """Every literal the literal prefilter looks for, and whose pattern (its index) each is, in
    the order its database is built: each pattern's required literal, then the covers'
    literals. Two columns, not pairs: a start makes them for 35,000 literals."""
    skip = set(form.literal_always)
    ids = [i for i, lit in enumerate(form.literal) if lit is not None and i not in skip]
    texts: list[str] = [form.literal[i] for i in ids]  # type: ignore[misc]
    for i, cover in sorted(form.covers.items()):
        ids += [i] * len(cover)
        texts += cover
    return ids, texts


def _case_sensitive(p: CompiledPattern) -> bool:
    """Whether `p` is matched with case everywhere (a caseless one is always confirmed)."""
    return not (p.compiled.flags & regex.IGNORECASE
                or _INLINE_CASELESS.search(p.record.message_pattern))


def literal_table(pairs: Iterable[tuple[int, str]]) -> tuple[tuple[int, bytes], ...]:
    return tuple((i, text.encode("utf-8", "surrogatepass")) for i, text in pairs)


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

    `regex` parses a pattern in Python, which is nearly all of compiling one (a scan of a large
    log confirms a few hundred patterns, and every worker of `scan -j` does so again); its
    pickle holds the program the parser made, and loading it skips the parser. The cache key
    names `regex`'s version, whose programs these are.
    """
    try:
        compiled = _CompiledRegexUnpickler(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001 - damaged or foreign: compile instead
        return None
    if not isinstance(compiled, regex.Pattern) or compiled.pattern != pattern:
        return None
    return compiled


def compile_pattern(record: CatalogRecord) -> CompiledPattern:
    compiled = regex.compile(record.message_pattern)
    facts = analyze(record.message_pattern)
    literal = next((lit for lit in facts.required_literals if len(lit) >= MIN_PREFILTER_LITERAL),
                   None)
    return CompiledPattern(record, compiled, positional_capture_names(compiled), literal)


_INLINE_CASELESS = re.compile(r"\(\?[a-zA-Z^-]*i")


def build_chunk_prefilter(patterns: Sequence[str], *, json_safe: bool = False,
                           heads: Sequence[str | None] = (),
                           covers: Sequence[tuple[str, ...] | None] | None = None,
                           classes: Sequence[str | None] = ()) -> ChunkPrefilter | None:
    """`patterns`: the message patterns, in the engine's order; `covers`: their
    `literal_cover`s when the caller made them already (not `json_safe`); `classes`: the class
    each record is bound to (`CatalogRecord.bound_class`), if any."""
    assert covers is None or not json_safe
    chunk_covers = []
    for i, pattern in enumerate(patterns):
        cover = covers[i] if covers is not None else literal_cover(pattern, json_safe=json_safe)
        cover = class_cover(cover, classes[i] if i < len(classes) else None)
        # A line cut before its cover may still hold the pattern's head: read it too.
        head = heads[i] if i < len(heads) else None
        if cover is not None and head is not None:
            piece = json_safe_piece(head) if json_safe else head
            if piece is not None and piece not in cover:
                cover = (*cover, piece)
        # An inline `i` flag anywhere (global or scoped) is read as caseless: more hits, no loss.
        caseless = _INLINE_CASELESS.search(pattern) is not None
        chunk_covers.append(None if cover is None else (cover, caseless))
    return ChunkPrefilter.build(chunk_covers, DOCKER_RECORD_START_SIGNS if json_safe
                                else RECORD_START_SIGNS)



def class_cover(cover: tuple[str, ...] | None, bound_class: str | None
                ) -> tuple[str, ...] | None:
    """The chunk prefilter's cover of a record bound to its exception class: the class's name,
    when the message's own cover is missing or has a shorter literal. The record matches only
    an exception of that class, whose line names it (`searched_in`): a line opening such a record
    holds the name or a record-start sign, and the lines after it are read while it is open."""
    if bound_class is None or (cover is not None and min(map(len, cover)) >= len(bound_class)):
        return cover
    return (bound_class,)


HS_FLAGS = 0
if hs is not None:
    HS_FLAGS = (
        hs.HS_FLAG_PREFILTER | hs.HS_FLAG_SINGLEMATCH | hs.HS_FLAG_DOTALL
        | hs.HS_FLAG_ALLOWEMPTY
    )


def _build_hyperscan(patterns: Sequence[CompiledPattern]) -> tuple[object, tuple[int, ...]]:
    """One Hyperscan database for all patterns; those it cannot take are always confirmed."""
    assert hs is not None
    pending = list(range(len(patterns)))
    rejected: list[int] = []

    def try_compile(ids: list[int]) -> object | None:
        db = hs.Database()
        exprs = [patterns[i].record.message_pattern.encode("utf-8") for i in ids]
        try:
            db.compile(expressions=exprs, ids=ids, elements=len(ids), flags=HS_FLAGS)
        except hs.error:
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


def _build_literal_db(table: Sequence[tuple[int, bytes]]) -> Any:
    """`table`'s literals as one Hyperscan literal database (id = position in the table): under
    a second with the full catalog."""
    if hs is None or not table:
        return None
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(expressions=[lit for _, lit in table], ids=list(range(len(table))),
               elements=len(table), flags=hs.HS_FLAG_SINGLEMATCH, literal=True)
    return db
