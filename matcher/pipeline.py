"""The pure middle of the pipeline: chunks in, events out — shared by `scan` and the daemon.

decode (per source) → frame (per source) → match → aggregate. Nothing here reads files or
clocks: callers pass chunks and `now`, and take the events to their sinks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from matcher.aggregate import DEFAULT_WINDOW, Aggregator
from matcher.decode import DEFAULT_MAX_LINE_BYTES, LineSplitter
from matcher.engine import Engine
from matcher.framing import Framer
from matcher.types import Chunk, Event, Record


@dataclass(slots=True)
class PipelineStats:
    lines: int = 0
    bytes: int = 0
    records: int = 0
    lines_truncated: int = 0
    by_source_lines: dict[str, int] = field(default_factory=dict)


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
    ) -> None:
        self.engine = engine
        self.aggregator = Aggregator(window=window, catalog_version=catalog_version, labels=labels)
        self.max_line_bytes = max_line_bytes
        self.flush_after = flush_after
        self.stats = PipelineStats()
        self._splitters: dict[str, LineSplitter] = {}
        self._framers: dict[str, Framer] = {}

    def feed(self, chunk: Chunk, now: float = 0.0) -> list[Event]:
        splitter = self._splitter(chunk.source)
        framer = self._framer(chunk.source)
        self.stats.bytes += len(chunk.data)
        records: list[Record] = []
        lines = splitter.feed(chunk)
        self._count(chunk.source, lines)
        for line in lines:
            records.extend(framer.feed(line, now))
        return self._records(records, now)

    def end_of_source(self, source: str, now: float = 0.0) -> list[Event]:
        """The source ended (end of a scanned file, a rotated file read to its end)."""
        records: list[Record] = []
        splitter = self._splitters.pop(source, None)
        framer = self._framers.pop(source, None)
        if splitter is not None and framer is not None:
            lines = splitter.finish()
            self._count(source, lines)
            for line in lines:
                records.extend(framer.feed(line, now))
            records.extend(framer.finish())
        return self._records(records, now)

    def tick(self, now: float) -> list[Event]:
        records: list[Record] = []
        for framer in self._framers.values():
            records.extend(framer.tick(now))
        return self._records(records, now) + self.aggregator.tick(now)

    def finish(self, now: float = 0.0) -> list[Event]:
        events: list[Event] = []
        for source in list(self._splitters):
            events.extend(self.end_of_source(source, now))
        return events + self.aggregator.finish()

    def _records(self, records: list[Record], now: float) -> list[Event]:
        events: list[Event] = []
        self.stats.records += len(records)
        for record in records:
            events.extend(self.aggregator.add(record, self.engine.match(record), now))
        return events

    def _count(self, source: str, lines: list) -> None:  # type: ignore[type-arg]
        self.stats.lines += len(lines)
        self.stats.by_source_lines[source] = self.stats.by_source_lines.get(source, 0) + len(lines)
        self.stats.lines_truncated += sum(1 for line in lines if line.truncated)

    def _splitter(self, source: str) -> LineSplitter:
        s = self._splitters.get(source)
        if s is None:
            s = self._splitters[source] = LineSplitter(source, max_line_bytes=self.max_line_bytes)
        return s

    def _framer(self, source: str) -> Framer:
        f = self._framers.get(source)
        if f is None:
            f = self._framers[source] = Framer(flush_after=self.flush_after)
        return f
