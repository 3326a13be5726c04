"""Saved logs read to events, as `scan` reports them: by one process, or by N (`parallel`).

The command (`commands.scan.cmd_scan`) decides what to read (`source.saved.find`), shows
progress and turns the result into a report and an exit code; this module reads: each input opened as its
text (`source.saved.open_log`: compressed files decompressed), fed through one `Pipeline` in
reads of `READ_SIZE`, the events redacted into dicts in log order (or JSON lines, `json_line`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from matcher.catalog import Catalog
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.progress import Progress
from matcher.redact import Redactor
from matcher.release import AUTO
from matcher.report import exit_code
from matcher.sinks.events import event_dict
from matcher.source import saved
from matcher.types import Chunk, Event

if TYPE_CHECKING:
    from matcher.parallel import ParallelStats, Splitter

READ_SIZE = 1 << 20


class UnreadableInput(Exception):
    """An input that cannot be read (missing, unreadable, zstd): the message says which."""


def json_line(event: dict[str, Any]) -> tuple[str, bool]:
    """An event dict as `scan --format json` prints it, and whether it makes the exit code 1
    (`exit_code`): made where the dict is, in a worker of `scan -j N`."""
    return json.dumps(event, ensure_ascii=False) + "\n", exit_code([event]) == 1


@dataclass(frozen=True, slots=True)
class Scanned:
    """What `scan_events` read: the events, the lines, and the inputs not read whole."""

    events: list[Any]  # event dicts in log order, or what `encode` made of each
    lines: int
    not_read: tuple[str, ...] = ()  # "PATH: why" (compressed data that ends early or damaged)
    parallel: ParallelStats | None = None  # what the workers did; None: read by one process


def scan_events(inputs: Sequence[str], catalog: Catalog, *, input_format: str = "auto",
                err: TextIO | None = None, sglang_version: str = AUTO,
                engine: Engine | None = None, jobs: int = 1, read_size: int = READ_SIZE,
                split: Splitter | None = None,
                encode: Callable[[dict[str, Any]], Any] | None = None,
                progress: Progress | None = None) -> Scanned:
    """The events of saved logs (files, "-" for stdin; gzip, bzip2 and xz read decompressed),
    redacted, in log order. `engine`: one already built over `catalog.records` (a caller
    scanning many logs). `jobs` > 1: read by that many worker processes, with the same result
    (`matcher.parallel`; `split` chooses where a file is cut, for tests). `encode`: what each
    event dict becomes (`json_line`), made by those workers too. What was not read whole is
    said on `err` too; `progress` is told what is read and found as it is."""
    # The worker processes' module (multiprocessing, the pool): loaded by a scan, not by every
    # command that imports this one (`watch` reads with none of it).
    from matcher import parallel

    engine = engine if engine is not None else Engine(catalog.records)
    pipeline = Pipeline(engine, catalog_version=catalog.version, input_format=input_format,
                        sglang_version=sglang_version)
    order = event_order(inputs)
    named = [(name, "<stdin>" if name == "-" else name) for name in inputs]
    not_read: list[str] = []
    lost: list[str] = []  # (said after the scan, as the rest: a progress line may be drawn)

    def damaged(name: str, why: str) -> None:
        not_read.append(f"{name}: {why}")

    def read(name: str, source: str) -> list[Event]:
        return read_saved(pipeline, name, source, read_size, damaged, progress)

    workers: ParallelStats | None = None
    dicts: list[Any]
    try:
        if jobs > 1 and parallel.worth_it(inputs, read_size):
            dicts, workers = parallel.scan(
                pipeline, named, jobs=jobs, read_size=read_size, read_alone=read, order=order,
                split=split or parallel.split_file, encode=encode, damaged=damaged,
                progress=progress.advance if progress else None, lost=lost.append)
        else:
            dicts = _read_one_by_one(pipeline, named, read, order, encode)
    except OSError as e:
        raise UnreadableInput(f"cannot read {e.filename}: {e.strerror}") from e
    except saved.NotReadable as e:
        raise UnreadableInput(str(e)) from e
    _say_what_was_not_read(pipeline, input_format, not_read, lost, err or sys.stderr)
    return Scanned(dicts, pipeline.stats.lines, tuple(not_read), workers)


def _read_one_by_one(pipeline: Pipeline, named: list[tuple[str, str]],
                     read: Callable[[str, str], list[Event]],
                     order: Callable[[Event], tuple[int, int]],
                     encode: Callable[[dict[str, Any]], Any] | None) -> list[Any]:
    """The inputs read by this process, one after the other: their events as redacted dicts
    (or what `encode` makes of each) in log order."""
    events = [e for name, source in named for e in read(name, source)]
    events.extend(pipeline.finish())
    redactor = Redactor()
    dicts = [event_dict(e, redactor) for e in sorted(events, key=order)]
    return [encode(d) for d in dicts] if encode is not None else dicts


def _say_what_was_not_read(pipeline: Pipeline, input_format: str, not_read: list[str],
                           lost: list[str], err: TextIO) -> None:
    """On `err`, after the scan: lines not in their input's format (read as plain text), the
    inputs not read whole, and what the workers lost."""
    from matcher.report import escape_controls  # a file's name is the log's too

    for source, bad in pipeline.stats.by_source_malformed.items():
        fmt_name = pipeline.stats.by_source_format.get(source, input_format)
        print(escape_controls(f"sglang-matcher: {source}: {bad} lines not in the {fmt_name} "
                              "format, read as plain text"), file=err)
    for line in not_read:
        print(escape_controls(f"sglang-matcher: not read whole: {line}"), file=err)
    for why in lost:
        print(escape_controls(f"sglang-matcher: scan: {why}"), file=err)


def read_saved(pipeline: Pipeline, name: str, source: str, read_size: int,
               damaged: Callable[[str, str], None],
               progress: Progress | None = None) -> list[Event]:
    """One input read to its end through `pipeline` (stdin for "-"); compressed data that
    ends early or is damaged ends the input there, and `damaged` is told, as of a file that
    was truncated while it was read (`saved.shrank`)."""
    try:
        stream = saved.open_stdin(sys.stdin.buffer) if name == "-" else saved.open_log(name)
    except OSError as e:
        raise UnreadableInput(f"cannot read {name}: {e.strerror}") from e
    events = []
    offset = 0
    on_disk = 0
    with stream if name != "-" else contextlib.nullcontext(stream):
        try:
            while data := stream.read(read_size):
                offset += len(data)
                more = pipeline.feed(Chunk(data, source, offset)).events
                events.extend(more)
                if progress is not None:
                    now_on_disk = saved.on_disk(stream, offset)
                    progress.advance(now_on_disk - on_disk, events=len(more))
                    on_disk = now_on_disk
        except OSError as e:
            raise UnreadableInput(f"cannot read {name}: {e.strerror}") from e
        why = getattr(stream, "damaged", None) or saved.shrank(stream, offset)
    if progress is not None:
        progress.advance(files=1)
    if why is not None:
        damaged(name, why)
    events.extend(pipeline.end_of_source(source))
    return events


def event_order(inputs: Sequence[str]) -> Callable[[Event], tuple[int, int]]:
    order = {("<stdin>" if n == "-" else n): i for i, n in enumerate(inputs)}
    return lambda e: (order.get(e.source, 0), e.offset)
