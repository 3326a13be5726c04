"""What the daemon read while the full catalog compiled, kept to be read again by it.

The daemon starts reading with the catalog layers that are ready (`topology.Compilation`) and
hands each step to that pipeline as it comes. Each step is also kept here, in order: once the
full catalog is in, `replay` hands the same steps, in the same order, to a pipeline with the
full catalog, and keeps only the events the partial one did not emit (by where their record
starts). Unknown errors are held back meanwhile (`emitted`): the full catalog may know them.

Bounded by the bytes kept (`full`): past the limit the daemon stops reading until the compile
is done, so nothing is lost and memory stays bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

from matcher.pipeline import Pipeline
from matcher.types import Chunk, Event, Line


@dataclass(frozen=True, slots=True)
class ChunkRead:
    chunk: Chunk
    now: float

    def replay(self, pipeline: Pipeline) -> list[Event]:
        return pipeline.feed(self.chunk, self.now).events


@dataclass(frozen=True, slots=True)
class LinesRead:
    source: str
    lines: tuple[Line, ...]
    now: float

    def replay(self, pipeline: Pipeline) -> list[Event]:
        return pipeline.feed_lines(self.source, self.lines, self.now).events


@dataclass(frozen=True, slots=True)
class SourceEnded:
    source: str
    now: float

    def replay(self, pipeline: Pipeline) -> list[Event]:
        return pipeline.end_of_source(self.source, self.now)


@dataclass(frozen=True, slots=True)
class PartialFlushed:
    source: str
    now: float

    def replay(self, pipeline: Pipeline) -> list[Event]:
        return pipeline.flush_partial(self.source, self.now)


@dataclass(frozen=True, slots=True)
class Ticked:
    now: float

    def replay(self, pipeline: Pipeline) -> list[Event]:
        return pipeline.tick(self.now)


CatchUpStep = ChunkRead | LinesRead | SourceEnded | PartialFlushed | Ticked


class CatchUp:
    """The steps read while the full catalog compiles, and the events already emitted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit  # bytes kept before reading waits for the compile
        self.steps: list[CatchUpStep] = []
        self.bytes = 0
        self._told: set[tuple[str, int]] = set()  # (source, offset) of each event emitted

    @property
    def full(self) -> bool:
        return self.bytes >= self.limit

    @property
    def told(self) -> int:
        return len(self._told)

    def add(self, step: CatchUpStep) -> None:
        self.steps.append(step)
        if isinstance(step, ChunkRead):
            self.bytes += len(step.chunk.data)
        elif isinstance(step, LinesRead):
            self.bytes += sum(len(line.text) for line in step.lines)

    def emitted(self, events: list[Event]) -> list[Event]:
        """What of the partial pipeline's events is emitted now: the known failures (each
        remembered, so that the replay does not emit it again); what no record of these layers
        knows is held back for the full catalog."""
        known = [e for e in events if e.pattern_id is not None]
        self._told.update((e.source, e.offset) for e in known)
        return known

    def replay(self, pipeline: Pipeline) -> list[Event]:
        """Every step handed to `pipeline` (the full catalog's) in order: the events not
        emitted before."""
        events: list[Event] = []
        for step in self.steps:
            events += step.replay(pipeline)
        return [e for e in events if (e.source, e.offset) not in self._told]
