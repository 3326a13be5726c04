"""`scan -j N`: saved logs read by N worker processes, with exactly the output of one.

Reading a log is a chain of per-source state — the splitter's partial line, the decoder's
CRI/docker partials, the framer's open tracebacks, the line before, the wrappers it learned —
and, across every source, the aggregator's groups and the release each source is learned to
run. Only the first chain is costly (the prefilter scan, framing, and matching each record,
which is a pure function of the record), so only it is spread:

- Each file is cut into tasks at multiples of the read size (`split_file`), so a task's reads
  are the very chunks `scan -j 1` reads. A worker runs a task with a fresh `Pipeline` over the
  chunk before its first one (a warm-up: the lines it frames there are dropped) and then its
  own, keeping each chunk's records with their matches (`Engine.match_all`) instead of
  aggregating them, and the reading state after its first chunks and every 16th after
  (`kept_state`).
- The parent takes the tasks in log order. It holds the true reading state at the start of a
  task (the previous task's end, or fresh at a file's start); where that equals the worker's
  state at the same chunk boundary, every chunk after it comes out of the same code from the
  same state and the same bytes, so the worker's records are the ones a single process makes
  there. Where it differs — a traceback, a CRI partial or a learned wrapper straddling the cut
  — the parent reads on itself from the true state, chunk by chunk, until the two states meet
  at a boundary where the worker kept its own.
- Line numbers are the one thing a worker cannot know: the lines before its task are read by
  others. It counts from its warm-up read, and states are compared with every line number
  taken relative to the splitter's (`state_of`); where they meet, the parent knows the true
  number there and moves the worker's records and reading state by the difference
  (`_renumber`): no task waits for a pass over the input before it to count its lines.
- The records then go, chunk by chunk as `Pipeline.feed` would hand them on, through the
  parent's one `Pipeline.aggregate`: the picking of a release under "auto", the grouping of
  ranks and consequences, the repeat windows, all in log order. Ends of files, the counts and
  the format warnings come from the parent's pipeline as they do with one process.
- Files of one read or less (a node's many small logs) go to the workers in batches
  (`batches`): one round trip each cost more than reading them. A file's last task also ends
  the file in the worker (`Pipeline.end_of_source`: its last line without a newline, the
  traceback still open) and ships what that makes (`_Done.ending`), taken with its steps;
  its reading state, ended, stays there, and the parent has nothing left to end.
- Events become dicts (redaction, the other costly step) in the workers, in order; and, for
  `scan --format json`, JSON lines there too (`encode`), so that the parent has little left
  to do after the last read.

So equal output is by construction, and the tests check it on every log in the repository,
whole and concatenated, at cuts chosen by hypothesis. What the state comparison leaves out:
counters (added up separately), the framer's `redactor` (the same patterns) and `ranks_seen`,
which the aggregator reads only with `early`, never set by `scan` (refused here otherwise);
line numbers count relative to the splitter's.
A pattern that times out (`Engine`'s quarantine) makes any run, one process or N, depend on
the machine's speed; that is the one way outputs can differ.

Workers are forked after the engine is loaded, so nothing is compiled again; where `fork` is
missing, or for stdin, the scan is the single-process one. A worker that dies (the OOM killer)
breaks the `ProcessPoolExecutor`, which fails what it had not done: the parent reads those
tasks itself (`_read_here`) and makes those dicts, so the output is still the same.
"""

from __future__ import annotations

import dataclasses
import gc
import io
import multiprocessing
import os
import signal
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from matcher import limits
from matcher.catalog.schema import CatalogRecord
from matcher.decode import LineDecoder, LineSplitter
from matcher.engine import Engine
from matcher.framing import Framer
from matcher.pipeline import Pipeline, PipelineStats
from matcher.redact import Redactor
from matcher.sinks.events import event_dict
from matcher.source import saved
from matcher.types import Chunk, Event, Match, Record
from matcher.worker_pool import DictBatches, Window, Workers

# Descriptors left free besides the held files: stdio, the executor's pipes (three, and a
# sentinel per worker: `_holdable` adds two a worker), the file a task or the parent opens, a
# redirected output, and what the interpreter itself holds now (counted at the plan).
OWN_DESCRIPTORS = 32
# A split file's tasks hold at least this many reads each (and read one more to warm up).
MIN_TASK_CHUNKS = 4
# Fewer reads than this in all (64 MiB at scan's read size) are read by one process: each
# worker starts cold (it compiles the patterns it confirms again), which a smaller input does
# not repay (docs/performance.md has the measurements).
MIN_PARALLEL_READS = 64
# How many times its size a compressed file is taken to hold, to judge whether workers pay:
# gzip makes sglang's logs 5–10 times smaller (5.6 times at `gzip -1` for the bench log).
COMPRESSED_RATIO = 5
# Files held open from the plan to the scan's end, so that every task reads the file it was
# cut from even once logrotate renamed it away (`Task.fd`); past them, a task opens its path
# and checks it is still that file (`_open`). At most this many, and no more than the
# descriptor limit leaves room for (`_holdable`; the soft limit is raised to the hard one,
# which systemd and container runtimes set at 524,288 or more). Each is held as its bare
# descriptor (`io.FileIO`, no buffer): a buffered file would hold a read buffer each.
HELD_FILES = 1 << 16
_FDS = "/proc/self/fd"  # a held file opened anew: its own offset, however it is named now
# Files of one read or less are handed to the workers this many reads' worth at a time (at most
# `BATCH_FILES` of them): one at a time, the executor's round trip and the parent's share
# would cost more than the reading.
BATCH_READS = 4
BATCH_FILES = 256
# Tasks per worker for a file that is cut: enough to even out the load, few enough that the
# warm-up read of each costs little.
TASKS_PER_JOB = 4
# A worker keeps its reading state (`state_of`, a deep copy) at each of a task's first
# `STATES_EVERY_READ` boundaries, where what straddles a cut (a traceback, a partial line)
# almost always ends, and at every `STATES_STRIDE`-th one after, not at every read (a deep copy
# is not free). Where the two states meet later, the
# parent reads on to the next boundary that has one: at most `STATES_STRIDE` - 1 reads more.
STATES_EVERY_READ = 16
STATES_STRIDE = 16

Reader = tuple[LineSplitter, LineDecoder, Framer]
Splitter = Callable[[int, int], Sequence[int]]


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, as `os.process_cpu_count`)."""
    count: Callable[[], int | None] | None = getattr(os, "process_cpu_count", None)
    if count is not None:
        return max(1, count() or 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def split_file(chunks: int, jobs: int) -> list[int]:
    """Where a file of `chunks` reads is cut into tasks: the first read of each, 0 first."""
    if jobs <= 1 or chunks < 2 * MIN_TASK_CHUNKS:
        return [0]
    n = min(jobs * TASKS_PER_JOB, chunks // MIN_TASK_CHUNKS)
    return sorted({chunks * i // n for i in range(n)})


@dataclass(frozen=True, slots=True)
class Task:
    path: str
    source: str
    first: int  # the first read whose records count
    stop: int | None  # the read after the last; None: to the end of the file
    detected: str | None  # the format the file's first read decided (None: not decided)
    disk_bytes: int = 0  # how much of the file it reads (for progress)
    last: bool = True  # the file's last task
    file: tuple[int, int] | None = None  # (device, inode) of the file it was cut from
    fd: int | None = None  # that file, held open by the parent since (workers inherit it)


@dataclass(slots=True)
class _Step:
    """One read's worth: its records, their matches, and what it added to the counts."""

    records: list[Record]
    matches: list[list[tuple[int, dict[str, Any]]]]
    counts: dict[str, Any]


@dataclass(slots=True)
class _Done:
    steps: list[_Step]
    # The reading state at each boundary from `first` on (`states[k]`: before read first + k);
    # None where it was not kept (`kept_state`), and at a file's start, which needs none.
    states: list[object]
    # The splitter's line number at each of those boundaries (counted from the warm-up read).
    linenos: list[int]
    # The reading state after the task's last read; None when the task ended the file
    # (`ending`): nothing reads on from it, and the parent has nothing left to end.
    end: Reader | None
    damaged: str | None = None  # compressed data that ended early or was damaged, or a file
    # truncated while read (`saved.shrank`): what and where
    short: bool = False  # the file ended before the task's last read: it shrank while read
    # A file's last task: what ending it makes (`Pipeline.end_of_source`: the last line if it
    # has no newline, the traceback still open), taken with its steps; the parent then forgets
    # the file instead of ending it and matching its last records again itself.
    ending: _Step | None = None


def state_of(reader: Reader) -> object:
    """What of a reading state decides what its next chunks make, comparable with `==`.

    Everything the three objects hold (so a field added later counts until said otherwise),
    less: counters, the framer's `redactor` and `ranks_seen` (see the module docstring), the
    key of the framer's current record while none is open (then nothing reads it), and line
    numbers as such: each is taken relative to the splitter's, which the state leaves out.
    """
    line = reader[0].lineno
    _renumber(reader, -line)
    try:
        splitter, decoder, framer = reader
        return (splitter.state(), decoder.state(), framer.state())
    finally:
        _renumber(reader, line)


def _renumber(reader: Reader, delta: int) -> None:
    """Move every line number a reading state holds by `delta`: the splitter's count, the
    first line of each partial container line and of each record being assembled."""
    for part in reader:
        part.renumber(delta)


# -- the workers ------------------------------------------------------------------------------

class _Front(Pipeline):
    """A worker's pipeline: reads, frames and matches, and keeps the records for the parent."""

    def __init__(self, engine: Engine, like: Pipeline) -> None:
        super().__init__(engine, input_format=like.input_format,
                         max_line_bytes=like.max_line_bytes, flush_after=like.flush_after,
                         redactor=like.redactor)
        self.taken: list[Record] = []

    def _records(self, records: list[Record], now: float) -> list[Event]:
        self.taken.extend(records)
        return []


@dataclass(slots=True)
class ParallelStats:
    """What a parallel scan did: its tasks, the batches they were handed out in (`batches`),
    reads whose records came from a worker, reads the parent made again because the worker's
    state was not the true one there, and reads the parent made in a worker's stead, the
    workers gone."""

    tasks: int = 0
    batches: int = 0
    reads_from_workers: int = 0
    reads_again: int = 0
    reads_here: int = 0


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What a worker reads and makes dicts with: the parent's engine and pipeline, which each
    worker inherits through fork (`_start_worker`), never pickled."""

    engine: Engine
    pipeline: Pipeline  # the settings a worker's own pipelines copy (`_Front`)
    read_size: int
    index: dict[int, int]  # `id()` of each of `engine.records`: its index (`_pack`)
    encode: Callable[[dict[str, Any]], Any] | None = None
    redactor: Redactor = dataclasses.field(default_factory=Redactor)

    def run(self, task: Task) -> _Done:
        """One task read: its steps, the reading states kept, and how it ended."""
        front = _Front(self.engine, self.pipeline)
        source, read_size = task.source, self.read_size
        reader = front.reader(source)
        if task.first > 0:
            reader[1].detected = task.detected
        steps: list[_Step] = []
        states: list[object] = [] if task.first > 0 else [None]
        linenos: list[int] = [] if task.first > 0 else [0]
        try:
            opened = _open(task, read_size)
        except _Replaced as e:
            return _Done([], [], [], reader, str(e), short=True)
        with opened as f:
            for c, data in _reads(f, max(task.first - 1, 0), task.stop, read_size):
                before = front.stats.snapshot()
                front.feed(Chunk(data, source, c * read_size + len(data)))
                if c >= task.first:
                    steps.append(self._step(front, before, source))
                else:
                    front.taken = []  # the warm-up read's records: not this task's
                # (A file's first task needs none: the parent's state there is a fresh one.)
                states.append(state_of(reader) if task.first and kept_state(c + 1 - task.first)
                              else None)
                linenos.append(reader[0].lineno)
            damaged, short = _ended(f, task, read_size)
        if task.stop is None and states:
            before = front.stats.snapshot()
            front.end_of_source(source)
            ending = self._step(front, before, source)
            return _Done(steps, states, linenos, None, damaged, short, ending)
        reader[2].redactor = None  # the parent's goes in
        return _Done(steps, states, linenos, reader, damaged, short or not states)

    def _step(self, front: _Front, before: PipelineStats, source: str) -> _Step:
        """The records `front` took since `before` was its stats, as one step."""
        records, front.taken = front.taken, []
        return _step(front, records, self.index, front.stats.added_since(before, source))

    def dicts(self, events: list[Event]) -> list[Any]:
        """`events` as dicts (redacted), or what `encode` makes of each."""
        made = [event_dict(e, self.redactor) for e in events]
        return made if self.encode is None else [self.encode(d) for d in made]


# This process's context when it is a worker: set once by `_start_worker`, never in the parent.
_worker_context: WorkerContext | None = None


def _context() -> WorkerContext:
    assert _worker_context is not None, "not a worker process"
    return _worker_context


def _run(task: Task) -> _Done:
    """A worker's task (what the executor calls by name)."""
    return _context().run(task)


def _run_batch(tasks: list[Task]) -> list[_Done]:
    """Several small files' tasks in one round trip (`batches`)."""
    return [_run(task) for task in tasks]


def _reads(f: io.BufferedReader | saved.Decompressed, first: int, stop: int | None,
           read_size: int) -> Iterator[tuple[int, bytes]]:
    """Reads `first` up to `stop` (None: to the end) of a task's file, with their numbers:
    the very chunks `scan -j 1` reads there."""
    if first:
        f.seek(first * read_size)
    c = first
    while stop is None or c < stop:
        data = f.read(read_size)
        if not data:
            return
        yield c, data
        c += 1


def _ended(f: io.BufferedReader | saved.Decompressed, task: Task,
           read_size: int) -> tuple[str | None, bool]:
    """Once a task's reads are done: what was damaged (compressed data) or truncated
    (`saved.shrank`), or None; and whether the file ended before the task's last read."""
    at = f.tell()
    why: str | None = getattr(f, "damaged", None) or saved.shrank(f, at)
    return why, task.stop is not None and at < task.stop * read_size


class _Replaced(Exception):
    """A task's path holds another file than the one its tasks were cut from, or none."""


def _open(task: Task, read_size: int) -> io.BufferedReader | saved.Decompressed:
    """The file a task was cut from, opened for it: `scan -j 1` holds its file open to the
    end, and so does the parent of `-j N` for the first it may hold (the task opens that
    descriptor anew: the same file, however it is named now, with an offset of its own).
    Past them the path is opened, and a file logrotate renamed away (`create`) and made anew
    meanwhile would give the new one's bytes at the old one's offsets: `_Replaced` instead,
    as for a file deleted meanwhile."""
    try:
        f = saved.open_log(task.path if task.fd is None else f"{_FDS}/{task.fd}")
    except FileNotFoundError:
        raise _Replaced(f"deleted while read: from byte {task.first * read_size:,} on it was "
                        "not read") from None
    st = os.fstat(f.fileno())
    if task.file is not None and (st.st_dev, st.st_ino) != task.file:
        f.close()
        raise _Replaced(f"replaced while read (renamed away by logrotate's `create`?): another "
                        f"file is at its path now; from byte {task.first * read_size:,} "
                        "on it was not read (scan its rotation, such as PATH.1, for the rest)")
    return f


def kept_state(boundary: int) -> bool:
    """Whether a worker keeps its reading state at this boundary of its task (0: its first
    read's start)."""
    return boundary < STATES_EVERY_READ or boundary % STATES_STRIDE == 0


def _step(front: _Front, records: list[Record], index: dict[int, int],
          counts: dict[str, Any]) -> _Step:
    """One read's records with their matches, less those neither matched nor holding an
    exception: two in three records of a bench log (lines near a prefilter hit that match no
    pattern) — `Aggregator.add` drops them, and with the clock `scan` gives it (0: a saved log
    has no arrival times, so no window ends by itself) they change nothing. They are counted
    (`dropped`), not shipped to the parent."""
    kept: list[Record] = []
    packed: list[list[tuple[int, dict[str, Any]]]] = []
    for r in records:
        found = front.matches(r)
        if found or r.exceptions:
            kept.append(r)
            packed.append([_pack(m, index) for m in found])
    return _Step(kept, packed, {**counts, "dropped": len(records) - len(kept)})


def _pack(m: Match, index: dict[int, int]) -> tuple[int, dict[str, Any]]:
    """A match without its record (the parent has it) and with its catalog record as an index
    into `engine.records`, which parent and workers share (a copy only when it is not there)."""
    fields = {f.name: getattr(m, f.name) for f in dataclasses.fields(m)
              if f.name not in ("record", "pattern")}
    i = index.get(id(m.pattern), -1)
    if i < 0:
        fields["pattern"] = m.pattern
    return i, fields


def _unpack(packed: tuple[int, dict[str, Any]], record: Record,
            records: Sequence[CatalogRecord]) -> Match:
    i, fields = packed
    pattern = fields.pop("pattern") if i < 0 else records[i]
    return Match(pattern=pattern, record=record, **fields)


def _dicts(events: list[Event]) -> list[Any]:
    """A batch of events made into dicts by a worker (what the executor calls by name)."""
    return _context().dicts(events)


# -- the parent -------------------------------------------------------------------------------

def batches(tasks: Sequence[Task], read_size: int) -> list[list[Task]]:
    """The tasks as the workers get them, in order: each alone, but for files of one read or
    less (a whole file's only task), which go together up to `BATCH_READS` reads' worth and
    `BATCH_FILES` files."""
    out: list[list[Task]] = []
    size = 0  # the last batch's bytes
    for task in tasks:
        joins = (out and _small(task, read_size) and _small(out[-1][-1], read_size)
                 and len(out[-1]) < BATCH_FILES
                 and size + task.disk_bytes <= BATCH_READS * read_size)
        if joins:
            out[-1].append(task)
            size += task.disk_bytes
        else:
            out.append([task])
            size = task.disk_bytes
    return out


def _small(task: Task, read_size: int) -> bool:
    return task.first == 0 and task.stop is None and task.disk_bytes <= read_size


def available() -> bool:
    """Whether workers can be forked here (they must inherit the loaded engine)."""
    return "fork" in multiprocessing.get_all_start_methods()


def worth_it(paths: Sequence[str], read_size: int) -> bool:
    """Whether workers can be forked and the files are large enough to gain by them:
    `MIN_PARALLEL_READS` reads in all, a compressed file counted as `COMPRESSED_RATIO` times
    its size."""
    if not available():
        return False
    total = 0
    enough = MIN_PARALLEL_READS * read_size
    for path in paths:
        if path == "-" or not _regular(path):
            continue  # (read by the parent, `read_alone`)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                head = f.read(saved.HEAD_BYTES) if size else b""
            total += size * (COMPRESSED_RATIO if saved.compression(head, path) else 1)
        except (OSError, saved.NotReadable):
            return True  # the scan says what is wrong with it, as with one process
        if total >= enough:
            return True  # (the rest of a directory of many logs need not be opened)
    return False


def _regular(path: str) -> bool:
    """Whether `path` is a regular file (or names none: opening it says what is wrong).

    Anything else is read once, by the parent, as one process reads it, and never opened
    before that: opening a named pipe waits for a writer, and reading one takes what it
    reads from the scan (`<(kubectl logs …)` is a pipe too)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


def _holdable(jobs: int) -> int:
    """How many files the plan may hold open: `HELD_FILES`, or fewer where the descriptor
    limit is lower (`ulimit -n 64`: holding 256 made the scan fail "Too many open files"). The
    soft limit is raised to the hard one first (`limits.raise_nofile_limit`); what is open now
    and `OWN_DESCRIPTORS` are kept free. Files past them are opened by path (`_open`)."""
    if not os.path.isdir(_FDS):
        return 0
    limits.raise_nofile_limit()
    try:
        open_now = len(os.listdir(_FDS))
    except OSError:
        return 0
    return min(HELD_FILES, limits.fd_budget(OWN_DESCRIPTORS + 2 * jobs + open_now))


def scan(pipeline: Pipeline, inputs: Sequence[tuple[str, str]], *, jobs: int, read_size: int,
         read_alone: Callable[[str, str], list[Event]], order: Callable[[Event], Any],
         split: Splitter = split_file,
         encode: Callable[[dict[str, Any]], Any] | None = None,
         damaged: Callable[[str, str], None] = lambda path, why: None,
         progress: Callable[..., None] | None = None,
         lost: Callable[[str], None] = lambda why: None) -> tuple[list[Any], ParallelStats]:
    """The event dicts of `inputs` ((path, source) pairs) in `order`, as `pipeline` makes them
    from reads of `read_size` bytes — `pipeline.finish()` included — read by `jobs` workers;
    or, given `encode`, what it makes of each dict, in the workers too (a JSON line).

    `read_alone(path, source)`: reads an input in the parent, as one process does (stdin, a
    pipe: what is not a regular file). `split(chunks, jobs)`: where a file of `chunks` reads
    is cut (`split_file`; tests choose their own). A compressed file (`saved.open_log`) is
    one task, read whole by a worker; `damaged(path, why)` is told of one whose data ended
    early or was damaged. An input that cannot be opened raises OSError (NotReadable: zstd)
    before anything is read. `progress(read_bytes, events=, files=)` (`Progress.advance`) is
    told of each task as the parent takes it. A worker that ends abruptly (the kernel's OOM
    killer, a `kill -9`) does not stop the scan: the parent reads what is left itself, with the
    same output, and `lost(why)` is told once (`worker_pool.Workers`). With the dicts, what the scan did.
    """
    if pipeline.aggregator.early:
        raise ValueError("a parallel scan aggregates without `early`")
    plan: list[list[Task]] = []  # per input: its tasks (none: read alone)
    held: list[io.FileIO] = []  # the files, open from here to the end (`Task.fd`)
    try:
        _plan(pipeline, inputs, jobs, read_size, split, plan, held)
        return _fork(pipeline, inputs, plan, jobs, read_size, read_alone, order, encode,
                     damaged, progress, lost)
    finally:
        for f in held:
            f.close()


def _plan(pipeline: Pipeline, inputs: Sequence[tuple[str, str]], jobs: int, read_size: int,
          split: Splitter, plan: list[list[Task]], held: list[io.FileIO]) -> None:
    """Each input's tasks into `plan`; the first files (`_holdable`) kept open in `held`."""
    holdable = _holdable(jobs)
    for path, source in inputs:
        plan.append([])
        if path == "-" or not _regular(path):
            continue
        f = open(path, "rb")  # noqa: SIM115 - kept open (`held`) or closed below
        try:
            st = os.fstat(f.fileno())
            head = f.peek(saved.HEAD_BYTES)[:saved.HEAD_BYTES]
            compressed = saved.compression(head, path) is not None
            chunks = -(-st.st_size // read_size)
            detected = pipeline.input_format if pipeline.input_format != "auto" else None
            if detected is None and not compressed:  # (a compressed file's worker decides)
                probe = LineDecoder(pipeline.input_format,
                                    max_line_bytes=pipeline.max_line_bytes)
                # What the peek buffered decides as the first read would, if it holds a whole
                # line; only else is the first read read (no read-sized buffer for each of a
                # directory's small logs).
                probe.detect(f.peek(read_size)[:read_size])
                if probe.detected is None:
                    probe.detect(f.read(read_size))
                detected = probe.detected
        except BaseException:
            f.close()
            raise
        fd: int | None = None
        if len(held) < holdable:
            raw = f.detach()  # (its buffer dropped: the tasks open it anew)
            assert isinstance(raw, io.FileIO)
            held.append(raw)
            fd = raw.fileno()
        else:
            f.close()
        # A file whose first read did not decide its format is read from its start only, and
        # so is a compressed one: its reads cannot be reached without those before.
        starts = [0] if detected is None or compressed \
            else sorted({0, *(c for c in split(chunks, jobs) if 0 < c < chunks)})
        for i, first in enumerate(starts):
            stop = starts[i + 1] if i + 1 < len(starts) else None
            end = st.st_size if stop is None else min(stop * read_size, st.st_size)
            plan[-1].append(Task(path, source, first, stop, detected,
                                 end - first * read_size, stop is None,
                                 (st.st_dev, st.st_ino), fd))


def _fork(pipeline: Pipeline, inputs: Sequence[tuple[str, str]], plan: list[list[Task]],
          jobs: int, read_size: int, read_alone: Callable[[str, str], list[Event]],
          order: Callable[[Event], Any], encode: Callable[[dict[str, Any]], Any] | None,
          damaged: Callable[[str, str], None], progress: Callable[..., None] | None,
          lost: Callable[[str], None]) -> tuple[list[Any], ParallelStats]:
    """`scan` once its tasks are planned: the workers forked, the scan, the workers ended."""
    docker = any(t.detected == "docker" for ts in plan for t in ts)
    engine = pipeline.engine
    if docker:
        _ = engine.docker_prefilter  # built once, before the workers are forked
    records = engine.records
    context = WorkerContext(engine, pipeline, read_size,
                            {id(r): i for i, r in enumerate(records)}, encode)
    # The workers share the parent's heap until they write to it; the collector would write to
    # every object it walks, so what exists now is left out of its walks. The parent then runs
    # without the collector until the scan is done: it makes no cycles, and the records and
    # events arriving from the workers would set off a collection every few hundred objects
    # (`gc.freeze` alone leaves the objects it unpickles to walk).
    # (The workers are forked at the first task handed out, after `gc.disable`: see
    # `_start_worker`.)
    gc.freeze()
    collecting = gc.isenabled()
    gc.disable()
    workers = Workers(ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"),
                                           initializer=_start_worker, initargs=(context,)),
                       lost)
    try:
        return _scan(workers, context, inputs, plan, read_alone, order, records, jobs,
                     damaged, progress or _nothing)
    finally:
        workers.stop()
        if collecting:
            gc.enable()
        gc.unfreeze()


def _scan(workers: Workers, context: WorkerContext, inputs: Sequence[tuple[str, str]],
          plan: list[list[Task]], read_alone: Callable[[str, str], list[Event]],
          order: Callable[[Event], Any], records: Sequence[CatalogRecord], jobs: int,
          damaged: Callable[[str, str], None], progress: Callable[..., None]
          ) -> tuple[list[Any], ParallelStats]:
    """`scan` once the workers are forked: the tasks in log order, read by them and taken by
    the parent, and the event dicts in `order`."""
    tasks = [t for ts in plan for t in ts]
    handed = batches(tasks, context.read_size)
    taking = _Taking(context, records, ParallelStats(tasks=len(tasks), batches=len(handed)),
                     Window(workers, handed, ahead=jobs + 1, run=_run, run_batch=_run_batch),
                     DictBatches(workers, jobs, in_worker=_dicts, make=context.dicts),
                     damaged, progress)
    for (path, source), own in zip(inputs, plan, strict=True):
        if own:
            taking.file(path, source, own)
        else:
            taking.dicts.add(read_alone(path, source))
    taking.dicts.add(context.pipeline.finish())
    return taking.dicts.ordered(order), taking.stats


@dataclass(slots=True)
class _Taking:
    """The parent taking the workers' results, file by file in log order."""

    context: WorkerContext
    records: Sequence[CatalogRecord]
    stats: ParallelStats
    done: Window
    dicts: DictBatches
    damaged: Callable[[str, str], None]
    progress: Callable[..., None]

    def file(self, path: str, source: str, own: list[Task]) -> None:
        """One file's tasks taken, and the file ended where no worker ended it."""
        pipeline = self.context.pipeline
        true: Reader | None = None  # the reading state at the boundary reached
        ended = False  # a worker ended the file, and the parent took that ending
        cut = False  # the file ended before a task's last read: it shrank while read
        for task in own:
            result = self.done.next()
            more: list[Event] = []
            why: str | None = None
            if not cut:  # (after a cut, what a task read is not what one process reads now)
                more, true, why, cut, ended = self._task(task, result, true)
                if cut and why is None and task is not own[-1]:
                    # shorter than when its tasks were cut: said once, at the task that ended
                    why = saved.truncated(f"{sum(t.disk_bytes for t in own):,} bytes when the "
                                          "scan began", _size(path))
            self.dicts.add(more)
            self.progress(task.disk_bytes, events=len(more), files=int(task.last))
            if why is not None:
                self.damaged(path, why)
        if ended:  # (a small file's only task, as a rule: the worker ended it, and its
            # reading state stayed there)
            pipeline.forget_reader(source)
            return
        if true is None:  # replaced before its first task was read: nothing was
            true = pipeline.reader(source)
        pipeline.set_reader(source, *true)
        self.dicts.add(pipeline.end_of_source(source))

    def _task(self, task: Task, result: _Done | None, true: Reader | None
              ) -> tuple[list[Event], Reader | None, str | None, bool, bool]:
        """One task's events, the true reading state after it, what was damaged (or None),
        whether the file ended before the task's last read, and whether the worker ended it."""
        pipeline, read_size = self.context.pipeline, self.context.read_size
        try:
            if result is None:  # the workers are gone: the parent reads it
                more, here, why, cut = _read_here(pipeline, task, true, read_size, self.stats)
                return more, here, why, cut, False
            if not result.states:  # the file ended, or was replaced, before it
                return [], true, result.damaged, True, False
            more, after = _take(pipeline, task, result, true, self.records, read_size,
                                self.stats)
            return more, after, result.damaged, result.short, after is None
        except _Replaced as e:
            return [], true, str(e), True, False


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _nothing(*args: Any, **kwargs: Any) -> None:
    pass


def _start_worker(context: WorkerContext) -> None:
    """A worker's first act: its context kept, its collector back on (forked from a parent
    that runs without), and Ctrl-C left to the parent, which ends the workers
    (`Workers.stop`): a worker stopped by it in the middle of a task would print a traceback
    of its own."""
    global _worker_context  # the one per-process slot (see `_context`)
    _worker_context = context
    gc.enable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _take(pipeline: Pipeline, task: Task, result: _Done, true: Reader | None,
          records: Sequence[CatalogRecord], read_size: int, stats: ParallelStats
          ) -> tuple[list[Event], Reader | None]:
    """The events of one task's reads, and the true reading state after them: the worker's
    from the boundary where its state is the true one (its line numbers moved to the true
    ones there); before it, the parent's own reading. None for the state: the worker ended
    the file (`_Done.ending`), and that ending is among the events."""
    source = task.source
    events: list[Event] = []
    k = 0  # reads done by the parent
    line = 0  # the true line number at boundary k
    if task.first > 0:
        assert true is not None
        line = true[0].lineno
        if state_of(true) != result.states[0]:
            pipeline.set_reader(source, *true)
            with _open(task, read_size) as f:  # (`_Replaced`: to the caller)
                f.seek(task.first * read_size)
                while k < len(result.steps):
                    data = f.read(read_size)
                    end = (task.first + k) * read_size + len(data)
                    events += pipeline.feed(Chunk(data, source, end)).events
                    k += 1
                    reader = pipeline.reader(source)
                    if result.states[k] is not None and state_of(reader) == result.states[k]:
                        line = reader[0].lineno
                        break
                else:
                    stats.reads_again += k
                    return events, pipeline.reader(source)
    stats.reads_again += k
    stats.reads_from_workers += len(result.steps) - k
    shift = line - result.linenos[k]
    more = result.steps[k:] if result.ending is None else [*result.steps[k:], result.ending]
    for step in more:
        pipeline.stats.add(source, step.counts)
        if shift:
            for r in step.records:
                # Set in place: the record was unpickled from the worker's result just now,
                # and nothing else holds it yet (`dataclasses.replace` would copy every record).
                object.__setattr__(r, "lineno", r.lineno + shift)
        found = [[_unpack(p, r, records) for p in packed]
                 for r, packed in zip(step.records, step.matches, strict=True)]
        events += pipeline.aggregate(step.records, found)
    if result.end is not None:
        _renumber(result.end, shift)
    return events, result.end


def _read_here(pipeline: Pipeline, task: Task, true: Reader | None,
               read_size: int, stats: ParallelStats
               ) -> tuple[list[Event], Reader, str | None, bool]:
    """A task read by the parent itself, as one process reads it (the workers are gone): from
    the true reading state at its first read, the reads a worker would have made. Its events,
    the reading state after them, what was damaged or truncated (or None), and whether the
    file ended before the task's last read (`_Done.short`)."""
    source = task.source
    if true is not None:
        pipeline.set_reader(source, *true)
    events: list[Event] = []
    with _open(task, read_size) as f:  # (`_Replaced`: to the caller)
        for c, data in _reads(f, task.first, task.stop, read_size):
            events += pipeline.feed(Chunk(data, source, c * read_size + len(data))).events
            stats.reads_here += 1
        damaged, short = _ended(f, task, read_size)
    return events, pipeline.reader(source), damaged, short
