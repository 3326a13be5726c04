"""The pure middle of the pipeline: chunks in, events out — shared by `scan` and the daemon.

split (per source) → decode (per source: plain | cri | docker) → frame (per source) → match →
aggregate. Nothing here reads files or clocks: callers pass chunks and `now`, and take the
events to their sinks. A source that yields lines already (the journal) enters at the framer
through `feed_lines`; one source name is fed one way only.

For at-least-once delivery the caller checkpoints `checkpoint_offset(source)` after its sinks
accepted the events returned so far: every byte below it has become an emitted event or was
found to need none. What is still held — a partial line, a CRI/docker partial, a traceback
waiting for its end, a group inside the aggregation window — keeps the checkpoint at its
start, so a crash re-reads it (and may repeat events emitted after that start) but never loses
it. After `end_of_source` it is the ended stream's end (or the start of its records still in
the aggregation window) until the source is fed again. Offsets of a stream that ended and of
the one that follows under the same source name (a truncated file read again from 0) are not
told apart: the old stream's records in the window can only hold the new checkpoint back,
never move it forward.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from matcher import bare_keys, changed_line, release, skipped_weights
from matcher.aggregate import DEFAULT_RANK_GRACE, DEFAULT_WINDOW, Aggregator
from matcher.catalog.schema import CatalogRecord
from matcher.decode import (
    DEFAULT_MAX_LINE_BYTES,
    INPUT_FORMATS,
    LineDecoder,
    LineSplitter,
    cap_line,
    cri_skippable,
    docker_skippable,
)
from matcher.engine import Engine, of_a_dependency
from matcher.framing import Framer
from matcher.redact import Redactor, without_cut_value
from matcher.types import Chunk, Event, Fed, Line, Match, Record

# Which lines of a container format a sparse read may pass over (plain text: any).
_SKIPPABLE = {"cri": cri_skippable, "docker": docker_skippable}


@dataclass(slots=True)
class PipelineStats:
    lines: int = 0  # content lines, after decoding
    bytes: int = 0
    records: int = 0
    lines_truncated: int = 0
    lines_malformed: int = 0  # not in the source's container format: read as plain text
    by_source_lines: dict[str, int] = field(default_factory=dict)
    by_source_malformed: dict[str, int] = field(default_factory=dict)
    by_source_format: dict[str, str] = field(default_factory=dict)  # as decided for each source

    def snapshot(self) -> PipelineStats:
        """A copy that later counting leaves as it is."""
        return dataclasses.replace(self, by_source_lines=dict(self.by_source_lines),
                                   by_source_malformed=dict(self.by_source_malformed),
                                   by_source_format=dict(self.by_source_format))

    def added_since(self, before: PipelineStats, source: str) -> dict[str, Any]:
        """What was counted since `before` (a `snapshot`), `source`'s own counts among it: the
        counts of a step read elsewhere (a worker of `matcher.parallel`), for `add`."""
        lines = self.by_source_lines.get(source)
        return {"lines": self.lines - before.lines, "bytes": self.bytes - before.bytes,
                "truncated": self.lines_truncated - before.lines_truncated,
                "malformed": self.lines_malformed - before.lines_malformed,
                "source_lines": None if lines is None
                else lines - before.by_source_lines.get(source, 0),
                "source_malformed": self.by_source_malformed.get(source, 0)
                - before.by_source_malformed.get(source, 0),
                "format": self.by_source_format.get(source)}

    def add(self, source: str, counts: dict[str, Any]) -> None:
        """`added_since`'s counts added, and `dropped` records."""
        self.records += counts["dropped"]
        self.lines += counts["lines"]
        self.bytes += counts["bytes"]
        self.lines_truncated += counts["truncated"]
        self.lines_malformed += counts["malformed"]
        if counts["source_lines"] is not None:
            self.by_source_lines[source] = self.by_source_lines.get(source, 0) \
                + counts["source_lines"]
        if counts["source_malformed"]:
            self.by_source_malformed[source] = self.by_source_malformed.get(source, 0) \
                + counts["source_malformed"]
        if counts["format"] is not None:
            self.by_source_format[source] = counts["format"]


@dataclass(slots=True)
class _Counts:
    """What the current `feed` counted (`Fed`)."""

    lines: int = 0
    truncated: int = 0
    malformed: int = 0


class Pipeline:
    def __init__(
        self,
        engine: Engine,
        *,
        catalog_version: str = "",
        labels: dict[str, str] | None = None,
        window: float = DEFAULT_WINDOW,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        flush_after: float = 5.0,
        input_format: str = "auto",
        repeat_interval: float = 0.0,
        early: bool = False,
        rank_grace: float = DEFAULT_RANK_GRACE,
        sglang_version: str = "all",
        redactor: Redactor | None = None,
    ) -> None:
        if input_format not in INPUT_FORMATS:
            raise ValueError(f"input format {input_format!r} is not one of "
                             f"{', '.join(INPUT_FORMATS)}")
        self.engine = engine
        self.aggregator = Aggregator(window=window, catalog_version=catalog_version, labels=labels,
                                     repeat_interval=repeat_interval, early=early,
                                     rank_grace=rank_grace, redactor=redactor)
        # Text is redacted before every cut that could split a secret: a traceback's at 8 KiB
        # (the aggregator), a message's (the framer); a line cut at `max_line_bytes` loses the
        # value at its cut (`_drop_cut_value`), and is redacted with its record.
        self.redactor = self.aggregator.redactor
        self.max_line_bytes = max_line_bytes
        self.flush_after = flush_after
        self.input_format = input_format
        self.stats = PipelineStats()
        self._step = _Counts()  # what the current `feed` or `feed_lines` counted
        self._splitters: dict[str, LineSplitter] = {}
        self._decoders: dict[str, LineDecoder] = {}
        self._framers: dict[str, Framer] = {}
        self._positions: dict[str, int] = {}  # source → end of the last line taken in
        # Which release wrote each source: fixed by the setting, learned from tracebacks under
        # "auto", not asked under "all" (`matcher.release`).
        self.sglang_version = sglang_version
        self._tracker = release.Tracker()

    @property
    def _releases(self) -> release.ReleaseTable:
        return release.table_of(self.engine)

    @property
    def _by_id(self) -> dict[str, CatalogRecord]:
        return self.engine.record_by_id

    # -- input -------------------------------------------------------------------------------

    def feed(self, chunk: Chunk, now: float = 0.0) -> Fed:
        """A chunk of a source's bytes read: its events, and what its lines counted (the
        daemon's per-source series)."""
        self._step = _Counts()
        return self._fed(self._feed(chunk, now))

    def feed_lines(self, source: str, lines: Iterable[Line], now: float = 0.0) -> Fed:
        """Lines already decoded by their source (the journal): they enter at the framer."""
        self._step = _Counts()
        taken = [cap_line(line, self.max_line_bytes) for line in lines]
        self._count(source, taken)
        if taken:
            self._positions[source] = taken[-1].end_offset
        return self._fed(self._frame(source, taken, now))

    def _fed(self, events: list[Event]) -> Fed:
        return Fed(events, self._step.lines, self._step.truncated, self._step.malformed)

    def _feed(self, chunk: Chunk, now: float) -> list[Event]:
        source = chunk.source
        decoder = self._decoder(source)
        splitter = self._splitter(source, decoder)
        self.stats.bytes += len(chunk.data)
        prefilter = self.engine.chunk_prefilter
        if decoder.detected is None and not splitter.pending_bytes:
            decoder.detect(chunk.data)  # so that a first chunk of plain text is read sparsely
        if prefilter is not None and decoder.detected == "docker":
            prefilter = self.engine.docker_prefilter
        if prefilter is not None and decoder.detected is not None:
            return self._feed_sparse(chunk, splitter, decoder, prefilter.hits, now)
        lines = self._decode(source, decoder, splitter.feed(chunk))
        self._positions[source] = splitter.position
        events = self._frame(source, lines, now)
        self._line_growing(source, splitter, now)
        return events

    def _feed_sparse(self, chunk: Chunk, splitter: LineSplitter, decoder: LineDecoder,
                     hits: Callable[[bytes], list[int]], now: float) -> list[Event]:
        """Only the lines the chunk prefilter points at are framed and matched while no record
        is open (`matcher.prefilter` says why that loses nothing).

        Container lines go through their decoder as in `feed`; only whole lines in the format's
        own shape are ever passed over (`cri_skippable`, `docker_skippable`), and none while a
        partial line is open, so each line skipped is one content line that `feed` would have
        framed to nothing.
        """
        source = chunk.source
        framer = self._framer(source)
        skipped = splitter.skipped
        records: list[Record] = []
        fmt = decoder.detected or "plain"  # decided before the sparse path is taken
        before = decoder.malformed
        taken: list[Line] = []
        # Plain text is decoded too: there `decode` is the cap `feed` applies, and nothing is
        # ever pending or malformed.
        for raw in splitter.feed_sparse(
                chunk, hits, lambda: framer.idle() and decoder.pending_offset is None,
                _SKIPPABLE.get(fmt)):
            for line in decoder.decode(raw):
                taken.append(line)
                records.extend(framer.feed(self._drop_cut_value(line), now))
        self._count_malformed(source, decoder.malformed - before)
        self.stats.by_source_format[source] = fmt
        self._count(source, taken)
        self._count_skipped(source, splitter.skipped - skipped)
        self._positions[source] = splitter.position
        self._line_growing(source, splitter, now)
        return self._records(records, now)

    def _line_growing(self, source: str, splitter: LineSplitter, now: float) -> None:
        """A chunk that ends inside a line (a slow writer's bytes): the record that line may
        continue is not idle (`Framer.line_growing`)."""
        framer = self._framers.get(source)
        if splitter.partial_offset is not None and framer is not None and not framer.idle():
            framer.line_growing(now)

    def flush_partial(self, source: str, now: float = 0.0) -> list[Event]:
        """Hand on a last line still waiting for its end (the caller saw it idle long enough).

        Both the bytes after the last newline and a CRI/docker partial are flushed; what the
        source writes after that starts a new line.
        """
        splitter = self._splitters.get(source)
        decoder = self._decoders.get(source)
        if splitter is None or decoder is None:
            return []
        lines = self._decode(source, decoder, splitter.finish())
        tail = decoder.finish()
        self._count(source, tail)
        self._positions[source] = splitter.position
        return self._frame(source, lines + tail, now)

    def end_of_source(self, source: str, now: float = 0.0) -> list[Event]:
        """The source ended (end of a scanned file, a rotated file read to its end)."""
        events = self.flush_partial(source, now)
        self._splitters.pop(source, None)
        self._decoders.pop(source, None)
        framer = self._framers.get(source)
        if framer is not None:
            events += self._records(framer.finish(), now)
            del self._framers[source]
        return events

    def tick(self, now: float) -> list[Event]:
        records: list[Record] = []
        for framer in self._framers.values():
            records.extend(framer.tick(now))
        return self._records(records, now) + self._versioned(self.aggregator.tick(now))

    def finish(self, now: float = 0.0) -> list[Event]:
        events: list[Event] = []
        for source in list({**self._splitters, **self._framers}):
            events.extend(self.end_of_source(source, now))
        return events + self._versioned(self.aggregator.finish())

    def drain(self, now: float = 0.0) -> list[Event]:
        """Shutdown: every open record and aggregation window becomes an event; a partial last
        line is left unread, so the final checkpoint stays at its start and the line is read
        once, complete, after a restart."""
        records: list[Record] = []
        for framer in self._framers.values():
            records.extend(framer.finish())
        return self._records(records, now) + self._versioned(self.aggregator.finish())

    def carry_over(self, old: Pipeline) -> None:
        """SIGHUP: take over what `old` holds, so a reload changes the catalog and settings but
        not what is being read.

        A line half-written at the reload (the sidecar's `tee` writes in arbitrary pieces), a
        CRI partial, a traceback still open and a group waiting for its ranks or its repeat
        interval continue here: finishing them instead cut the line in two and turned the
        known failure into a fragment counted as an unknown error. Groups already formed keep
        the record that matched them under the old catalog; records still open are matched by
        this pipeline's engine when they end.
        """
        self._splitters, self._decoders = old._splitters, old._decoders
        self._framers, self._positions = old._framers, old._positions
        for framer in self._framers.values():
            framer.redactor = self.redactor  # the reloaded patterns, before the next cut
        self.stats = old.stats
        if self.sglang_version == old.sglang_version:
            self._tracker = old._tracker  # what each source taught stays learned
        settings = self.aggregator
        self.aggregator = old.aggregator
        for name in ("window", "early", "rank_grace", "repeat_interval", "catalog_version",
                     "labels", "redactor"):
            setattr(self.aggregator, name, getattr(settings, name))

    # -- positions ---------------------------------------------------------------------------

    def partial_line_start(self, source: str) -> int | None:
        """Start of a line of `source` begun but not ended (raw bytes, or a CRI/docker partial)."""
        starts = []
        splitter = self._splitters.get(source)
        if splitter is not None and splitter.partial_offset is not None:
            starts.append(splitter.partial_offset)
        decoder = self._decoders.get(source)
        if decoder is not None and decoder.pending_offset is not None:
            starts.append(decoder.pending_offset)
        return min(starts, default=None)

    def checkpoint_offset(self, source: str) -> int | None:
        """The offset below which every byte of `source` is emitted as events or needs none.

        None if nothing of `source` was taken in yet.
        """
        position = self._positions.get(source)
        if position is None:
            return None
        held = [position, *self.aggregator.open_offsets(source)]
        decoder = self._decoders.get(source)
        if decoder is not None and decoder.pending_offset is not None:
            held.append(decoder.pending_offset)
        framer = self._framers.get(source)
        if framer is not None:
            held.extend(framer.open_offsets())
        return min(held)

    def holding(self) -> bool:
        """Something waits on the clock: an open record, an aggregation window, a partial line."""
        return (
            self.aggregator.holding()
            or any(not f.idle() for f in self._framers.values())
            or any(s.partial_offset is not None for s in self._splitters.values())
            or any(d.pending_offset is not None for d in self._decoders.values())
        )

    def due_in(self, now: float) -> float | None:
        """Seconds until `tick` would close a record or emit an event (None: nothing held)."""
        waits = [w for w in (self.aggregator.due_in(now),
                             *(f.due_in(now) for f in self._framers.values())) if w is not None]
        return min(waits) if waits else None

    def reader(self, source: str) -> tuple[LineSplitter, LineDecoder, Framer]:
        """What `source` is being read with (made if new): its splitter, decoder and framer —
        all that the lines read so far leave behind for the next chunk."""
        decoder = self._decoder(source)
        return self._splitter(source, decoder), decoder, self._framer(source)

    def set_reader(self, source: str, splitter: LineSplitter, decoder: LineDecoder,
                   framer: Framer) -> None:
        """Go on reading `source` with these (`matcher.parallel`: a worker read up to here)."""
        self._splitters[source], self._decoders[source] = splitter, decoder
        self._framers[source] = framer
        framer.redactor = self.redactor
        self._positions[source] = splitter.position

    def forget_reader(self, source: str) -> None:
        """`source` was ended elsewhere (`matcher.parallel`: the worker that read its last part
        ran `end_of_source`, and its events are in): what it was read with here goes without
        being ended again, which would give its open traceback or last line a second time."""
        self._splitters.pop(source, None)
        self._decoders.pop(source, None)
        self._framers.pop(source, None)

    def detected_format(self, source: str) -> str | None:
        """The container format `source` is read as (None until its first non-empty line)."""
        decoder = self._decoders.get(source)
        return decoder.detected if decoder is not None else None

    # -- internals ---------------------------------------------------------------------------

    def _decode(self, source: str, decoder: LineDecoder, raw: list[Line]) -> list[Line]:
        before = decoder.malformed
        lines: list[Line] = []
        for line in raw:
            lines.extend(decoder.decode(line))
        if decoder.detected is not None:
            self.stats.by_source_format[source] = decoder.detected
        self._count_malformed(source, decoder.malformed - before)
        self._count(source, lines)
        return lines

    def _count_malformed(self, source: str, bad: int) -> None:
        if bad:
            self._step.malformed += bad
            self.stats.lines_malformed += bad
            self.stats.by_source_malformed[source] = \
                self.stats.by_source_malformed.get(source, 0) + bad

    def _frame(self, source: str, lines: list[Line], now: float) -> list[Event]:
        if not lines:
            return []
        framer = self._framer(source)
        records: list[Record] = []
        for line in lines:
            records.extend(framer.feed(self._drop_cut_value(line), now))
        return self._records(records, now)

    @staticmethod
    def _drop_cut_value(line: Line) -> Line:
        """A line cut at `max_line_bytes` lost its end unseen: what may be the head of a secret
        cut there goes too (`without_cut_value`). The rest is redacted once, with the record it
        joins, before any later cut (the framer's, the aggregator's) or by the sinks."""
        if not line.truncated:
            return line
        return dataclasses.replace(line, text=without_cut_value(line.text))

    def _records(self, records: list[Record], now: float) -> list[Event]:
        return self.aggregate(records, [self.matches(r) for r in records], now)

    def matches(self, record: Record) -> list[Match]:
        """The stateless half of matching: every match of `record`, most specific first, the
        records raised in the file its traceback shows raising ahead of their equals
        (`release.by_raising_file`). A pure function of the record: `matcher.parallel`
        computes it in worker processes."""
        return release.by_raising_file(record, self.engine.match_all(record))

    def aggregate(self, records: list[Record], found: list[list[Match]],
                  now: float = 0.0) -> list[Event]:
        """The stateful half of turning one step's records into events: each record's match
        picked from `found` (its `matches`), then aggregated and versioned."""
        events: list[Event] = []
        self.stats.records += len(records)
        for record, matches in zip(records, found, strict=True):
            framer = self._framers.get(record.source)
            expected = framer.ranks_seen if framer is not None else ()
            match = self._pick(record, matches)
            events.extend(self.aggregator.add(record, match, now, expected))
        return self._versioned(events)

    def _pick(self, record: Record, matches: list[Match]) -> Match | None:
        """Of `matches` (as `matches` ranks them), the most specific — under "auto", the most
        specific of the releases this source is known to run, if any is; and what it says of
        the release is learned."""
        if not matches:
            return None
        if self.sglang_version not in release.UNNAMED and self.sglang_version != release.AUTO:
            # A fixed release: a record that says where its message is raised matches only
            # there (the loader already left out other releases' generated records).
            fixed = release.Releases.of((self.sglang_version,))
            for m in matches:
                where = self._releases.releases(m.pattern, exact=True)
                if where is None or where.intersect(fixed):
                    return m
            return None
        if self.sglang_version != release.AUTO:
            return matches[0]
        known = self._tracker.known(record.source)
        chosen = matches[0]
        if known is not None:
            for m in matches:
                if m.on_header and not chosen.on_header:
                    # No record of the exception fits what this log has shown so far: the
                    # server changed (an upgrade). Its exception's record still beats a record
                    # of the traceback's header, and what it says is learned instead.
                    break
                where = self._releases.releases(m.pattern)
                if where is None or where.intersect(known):
                    chosen = m
                    break
        self._tracker.learn(record.source, self._releases.evidence(chosen))
        return chosen

    def _versioned(self, events: list[Event]) -> list[Event]:
        """Events carry the release that wrote them when it is known, and their source link
        points into that release (the newest of a range); a dependency at the wrong version
        gets the `pip install` for that release (`mismatched`), a model type transformers does
        not know the release that knows it (`bare_keys`), an unknown exception whose message
        says what to install that install (`install_stated`), an exit code or errno what it
        means (`vocabulary_answered`)."""
        events = changed_line.answered(
            self._labelled(events), self._by_id.get(changed_line.RECORD_ID), self._known,
            unfixed=self._unfixed_dependency_event)
        events = skipped_weights.answered(bare_keys.answered(events, self._by_id.get),
                                          self._by_id.get)
        if any(e.event == "sglang_unknown_error" for e in events):
            from matcher import install_stated  # its vocabulary, once an event needs it

            events = install_stated.answered(events, self._by_id.get(install_stated.RECORD_ID))
        return vocabulary_answered(mismatched(events))

    def _unfixed_dependency_event(self, e: Event) -> bool:
        """An event of a dependency's record that says no way to fix it."""
        rec = self._by_id.get(e.pattern_id or "")
        return rec is not None and of_a_dependency(rec) and not (e.remediation or {}).get(
            "solutions")

    def _known(self, source: str) -> release.Releases | None:
        """The release the setting names for every log; None under "auto" too: the line the
        traceback prints says more of its release than what was learned from other lines, and
        an answer must not hang on what was read before it (a catch-up reads less)."""
        if self.sglang_version == release.AUTO or self.sglang_version in release.UNNAMED:
            return None
        return release.Releases.of((self.sglang_version,))

    def _labelled(self, events: list[Event]) -> list[Event]:
        if self.sglang_version in release.UNNAMED:
            return events
        out = []
        for e in events:
            if self.sglang_version == release.AUTO:
                known = self._tracker.known(e.source)
                label = (known.label() or None) if known else None
                at = known.newest() if known else ""
            else:
                label = at = self.sglang_version
            if label is None:
                out.append(e)
                continue
            remediation = e.remediation
            pattern = self._by_id.get(e.pattern_id or "")
            if remediation is not None and pattern is not None and at \
                    and hasattr(pattern, "location_for"):
                url = pattern.location_for(at)[2]
                if label == at:
                    url = release.agreeing_url(url, at, e.raised_at)
                if url:
                    remediation = {**remediation, "url": url}
            fixed = None
            if pattern is not None and isinstance(pattern, CatalogRecord):
                known_releases = (self._tracker.known(e.source)
                                  if self.sglang_version == release.AUTO
                                  else release.Releases.of((self.sglang_version,)))
                if known_releases:
                    fixed = self._releases.fixed_in(pattern, known_releases)
            if fixed is not None and remediation is not None:
                remediation = {**remediation, "solutions": [
                    *remediation.get("solutions", ()), fixed.solution()]}
            raised = e.raised_at
            if raised is not None and label == at and raised.path.startswith("sglang/"):
                raised = dataclasses.replace(raised, url=release.source_url(at, raised.path,
                                                                            raised.line))
            out.append(dataclasses.replace(e, sglang_version=label, remediation=remediation,
                                           fixed_in=fixed, raised_at=raised))
        return out

    def _count(self, source: str, lines: list[Line]) -> None:
        truncated = sum(1 for line in lines if line.truncated)
        self._step.lines += len(lines)
        self._step.truncated += truncated
        self.stats.lines += len(lines)
        self.stats.by_source_lines[source] = self.stats.by_source_lines.get(source, 0) + len(lines)
        self.stats.lines_truncated += truncated

    def _count_skipped(self, source: str, n: int) -> None:
        if n:
            self._step.lines += n
            self.stats.lines += n
            self.stats.by_source_lines[source] = self.stats.by_source_lines.get(source, 0) + n

    def _decoder(self, source: str) -> LineDecoder:
        d = self._decoders.get(source)
        if d is None:
            d = self._decoders[source] = LineDecoder(self.input_format,
                                                     max_line_bytes=self.max_line_bytes)
        return d

    def _splitter(self, source: str, decoder: LineDecoder) -> LineSplitter:
        s = self._splitters.get(source)
        if s is None:
            s = self._splitters[source] = LineSplitter(
                source, max_line_bytes=decoder.raw_max_line_bytes)
        return s

    def _framer(self, source: str) -> Framer:
        f = self._framers.get(source)
        if f is None:
            f = self._framers[source] = Framer(flush_after=self.flush_after,
                                               redactor=self.redactor)
        return f


def _captured(*names: str) -> Callable[[Mapping[str, str]], bool]:
    return lambda captures: not captures.keys().isdisjoint(names)


# The captures the vocabularies read (named here so that none is imported before an event
# needs it; their tests check each module reads these).
_EXIT_STATUS = frozenset({"exit_code", "exitcode", "returncode", "return_code"})
_OS_ERRNO = "os_errno"
# a glog line's captures: Mooncake's lines get their component's answer
_NATIVE_LINE = frozenset({"date", "time", "file", "message"})
# The closed vocabularies, each a module of `matcher.catalog` with `remediation(captures,
# remediation)`, and the captures that make an event theirs; the first that applies answers.
_VOCABULARIES: tuple[tuple[Callable[[Mapping[str, str]], bool], str], ...] = (
    (_captured(*_EXIT_STATUS), "exit_status"),
    (_captured(_OS_ERRNO), "errno_vocab"),
    (_captured("http_status"), "http_status"),
    (_captured("gpu_arch", "cuda_sm", "cc_major"), "gpu_arch"),
    (_captured("nvml_error"), "nvml_status"),
    (lambda captures: captures.keys() >= _NATIVE_LINE, "native_components"),
    (_captured("template_message", "template_field"), "template_rules"),
)


def vocabulary_answered(events: list[Event]) -> list[Event]:
    """Events whose captures a closed vocabulary knows say what they mean and what to do, ahead
    of their record's solutions: a process's exit status (`matcher.catalog.exit_status`), an OS
    error number (`errno_vocab`), an HTTP status (`http_status`), a GPU architecture — which GPU
    it is (`gpu_arch`) —, an NVML error — the driver's state (`nvml_status`) —, a Mooncake glog
    line (`native_components`), a chat template's complaint — the rule the request broke
    (`template_rules`)."""
    out = events
    for i, e in enumerate(events):
        if e.pattern_id is None or not e.captures:
            continue
        name = next((module for applies, module in _VOCABULARIES if applies(e.captures)), None)
        if name is None:
            continue
        vocabulary = importlib.import_module(f"matcher.catalog.{name}")
        answered = vocabulary.remediation(e.captures, e.remediation)
        if answered is not None:
            if out is events:
                out = list(events)
            out[i] = dataclasses.replace(e, remediation=answered)
    return out


_MISMATCH_CLASSES = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "TypeError",
                               "NameError"})


def mismatched(events: list[Event]) -> list[Event]:
    """Events of a dependency at the wrong version (`cannot import name 'X' from 'P.mod'` …)
    get the `pip install` that fixes it, computed for their message and sglang release from the
    shipped symbol index (`matcher.catalog.mismatch`), ahead of the record's own solutions."""
    out = events
    for i, e in enumerate(events):
        if e.pattern_id is None or not _mismatch_shaped(e.error_class, e.message):
            continue
        answer = _mismatch_answer(e.message, e.sglang_version, e.traceback)
        if answer is None:
            continue
        if out is events:
            out = list(events)
        out[i] = dataclasses.replace(e, remediation=answer.remediation(e.remediation))
    return out


def _mismatch_shaped(error_class: str, message: str) -> bool:
    """An exception of a mismatch's classes, or a message of a shape `matcher.catalog.abi`
    answers whatever prints it (an undefined symbol, a package's own version check), or
    transformers' lazy importer's RuntimeError around an import's message, or a message that
    says what to install (`matcher.catalog.stated_install`) or names a library transformers
    did not find (`matcher.catalog.backend_libraries`), or pip's line of a requirement the
    environment does not meet (`matcher.catalog.pip_conflicts`), or uv's sentence of the
    requirements that clash (`matcher.catalog.uv_resolution`)."""
    if error_class.rsplit(".", 1)[-1] in _MISMATCH_CLASSES:
        return True
    from matcher.catalog import (
        abi,
        backend_libraries,
        mismatch,
        pip_conflicts,
        stated_install,
        uv_resolution,
    )

    return (abi.computes(message) or mismatch.lazy_wrapped(message)
            or stated_install.requirements(message) is not None
            or backend_libraries.MESSAGE.search(message) is not None
            or pip_conflicts.MESSAGE.search(message) is not None
            or ("we can conclude that" in message and uv_resolution.answer(message) is not None))


@functools.lru_cache(maxsize=256)
def _mismatch_answer(message: str, sglang_version: str | None, traceback: str | None) -> Any:
    from matcher.catalog import (
        abi,
        backend_libraries,
        dataclass_order,
        mismatch,
        pip_conflicts,
        signature,
        stated_install,
        uv_resolution,
    )

    if abi.computes(message):  # an undefined symbol, a package's own version check
        return abi.remedy(message, sglang_version)
    return (backend_libraries.answer(message) or pip_conflicts.answer(message)
            or uv_resolution.answer(message)
            or stated_install.answer(message)
            or dataclass_order.answer(message, traceback)
            or mismatch.remedy(message, sglang_version, traceback=traceback)
            or signature.remedy(message, sglang_version, traceback=traceback))
