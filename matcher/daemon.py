"""`sglang-matcher watch`: the loop that runs a `Topology`. Sources in, events out, positions saved.

`topology.build` made everything; this only runs it. One thread gives every source a turn (a
bounded amount each, so one busy file cannot starve the others), the `Intake` below feeds what
they read to the pure pipeline and hands its events to the sinks, and — only after the sinks
that hold up the checkpoint flushed — each source saves its position at
`Pipeline.checkpoint_offset`: the position before which every line has become an emitted event
or was found to need none. A sink that blocks therefore stops reading; nothing queues without
bound.

Signals: SIGTERM/SIGINT stop reading, drain what is buffered (open tracebacks, the aggregation
window), write a final checkpoint and exit 0. SIGHUP builds the topology again from the config
(`topology.build(previous=…)`); a config or catalog with problems leaves the running one in place
and says why. Guarantee: every completed line is delivered at least once; after SIGTERM exactly
once; after SIGKILL the lines since the last checkpoint (at most `checkpoint_interval` seconds
of input, plus lines still held in an open traceback or aggregation window) are read again.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any, Protocol, TextIO

import structlog

from matcher.catalog import CatalogError
from matcher.catchup import (
    CatchUp,
    ChunkRead,
    LinesRead,
    PartialFlushed,
    SourceEnded,
    Ticked,
)
from matcher.config import ConfigError, load_config
from matcher.latency import ReadTimes
from matcher.notify import Notifier
from matcher.selflog import SETTING_NOT_RELOADED
from matcher.sinks.events import OutputClosed, event_dict, stream_gone
from matcher.source.checkpoint import CheckpointError
from matcher.source.files import display_name
from matcher.telemetry import Logger
from matcher.topology import Compilation, Hooks, Topology, build, new_pipeline, retire
from matcher.types import SEVERITY_RANK, Batch, Chunk, Event, Fed, Line

CHECKPOINT_RETENTION = 7 * 24 * 3600.0
# While the full catalog compiles, what the pipeline was given is kept to be given again to
# the full one: at most this many bytes, then reading waits for the compile.
REPLAY_LIMIT = 64 << 20
PROGRESS_EVERY = 5.0  # seconds between `catalog_compiling` log lines
# A stop while the catalog compiles waits this long for it (within Kubernetes' default 30 s
# grace period), so that it stays exactly-once.
STOP_COMPILE_WAIT = 25.0


# Exit code of a stop that reached `stop_timeout` (or a second signal) before the daemon was
# done: something it writes to was blocked (a stdout nobody reads).
EXIT_STOP_DEADLINE = 3


class CheckpointEvents(Protocol):
    """What saving read positions reports (`Telemetry` counts and logs it)."""

    def checkpoint_written(self) -> None: ...
    def checkpoint_failed(self, reason: str, **fields: Any) -> None: ...


class StopDeadline(BaseException):
    """Raised in the main thread by SIGALRM `stop_timeout` seconds after SIGTERM/SIGINT, or by a
    second such signal: wherever it was — most often in a write to a stdout nobody reads, which
    a signal alone only interrupts for the write to be tried again (PEP 475) — the daemon stops.
    A BaseException, so that no `except Exception` on the way takes it for an error."""


class Diagnostics:
    """Where the daemon's diagnostics go (stderr), outliving its reader. A daemon started with
    `2>&1 | jq`, or under a supervisor whose stderr pipe broke, got BrokenPipeError from its
    next log line — "file_opened" as a log grew — and stopped (exit 0, the line's event never
    told): its events and metrics do not depend on stderr, so from the first broken pipe on the
    lines go nowhere and the daemon goes on."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._lose()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._lose()

    def _lose(self) -> None:
        self.gone = True
        stream_gone(self._stream)


def _deadline_reached(*_: object) -> None:
    raise StopDeadline()


def stderr_logger(stream: TextIO = sys.stderr, human: bool | None = None) -> Logger:
    """The daemon's own diagnostics on stderr, apart from the events on stdout: JSON lines, or
    (`human`; default: when stderr is a terminal) one short line each for a person."""
    if human is None:
        try:
            human = stream.isatty()
        except (OSError, ValueError):
            human = False
    logger: Logger = structlog.wrap_logger(
        structlog.PrintLogger(Diagnostics(stream)),  # type: ignore[arg-type]
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _diagnostic_line if human else structlog.processors.JSONRenderer(),
        ],
    )
    return logger


def _diagnostic_line(_logger: Any, _name: str, fields: MutableMapping[str, Any]) -> str:
    """`14:32:19 warning file_unreadable  path=/var/log/x.log detail=Permission denied`."""
    when = str(fields.pop("timestamp", ""))[11:19]
    level = str(fields.pop("level", "info"))
    event = str(fields.pop("event", ""))
    rest = "  ".join(f"{k}={_plain(v)}" for k, v in fields.items())
    return f"{when} {level:<7} {event}" + (f"  {rest}" if rest else "")


def _plain(value: Any) -> str:
    """A value as a person reads it: text as it is, lists joined, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ",".join(_plain(v) for v in value)
    return json.dumps(value, default=str)


class Wakeup:
    """Cuts the main loop's sleep short: watchdog's thread and signal handlers call `set()`.

    A pipe, not a `threading.Event`. A Python signal handler runs in the main thread between two
    bytecodes — possibly while that thread is inside `Event.wait()` holding the Event's lock —
    and `Event.set()` from the handler then waits for that lock forever, so that SIGTERM would
    be ignored. Writing a byte to a pipe takes no lock.
    """

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._poll = select.poll()  # poll, not select: no limit on the descriptor's number
        self._poll.register(self._read_fd, select.POLLIN)

    def set(self) -> None:
        try:
            os.write(self._write_fd, b"\0")
        except OSError:
            pass  # pipe full (a wake-up is pending anyway) or closed at exit

    def wait(self, timeout: float) -> None:
        """Sleep up to `timeout` seconds, less if `set()` was called since the last wait."""
        if self._poll.poll(max(0, math.ceil(timeout * 1000))):
            try:
                while os.read(self._read_fd, 4096):
                    pass
            except BlockingIOError:
                pass  # drained


class Daemon:
    """Runs a topology until SIGTERM (or, reading stdin only, until its end). It is the
    `Intake` its sources read into."""

    def __init__(
        self,
        topology: Topology,
        *,
        log: Logger,
        wakeup: Wakeup,
        config_file: Path | None = None,
        flags: Mapping[str, Any] | None = None,
        stdout: TextIO = sys.stdout,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.topo = topology
        self.log = log
        self.wakeup = wakeup
        self.config_file = config_file
        self.flags = dict(flags or {})
        self.stdout = stdout
        self.clock = clock
        self.wall = wall
        self.notifier = Notifier.from_env()  # systemd Type=notify; a no-op elsewhere
        self._stop = False
        self._reload = False
        self._next_retention = 0.0
        self._read_times = ReadTimes()  # for the event-latency histogram
        # While the full catalog compiles: what is read meanwhile, to be read again by it.
        self._catch_up: CatchUp | None = None
        self._next_checkpoint = 0.0
        self._notified_ready = False  # systemd told the daemon is serving
        self._ready_http: object = None  # the HTTP server told it is ready
        self._next_progress = 0.0
        self._output_closed: OutputClosed | None = None  # the event stream's reader went away
        self._deadline_armed = False  # SIGALRM set for `stop_timeout` after a stop signal
        self._signalled = False  # a stop signal reached `run`'s thread: the next one ends it
        self._runner: int | None = None  # the thread running `run`: signals are handled there
        self._interrupted = False  # the stop is a SIGINT: someone at a terminal waits for it

    @staticmethod
    def hooks(wakeup: Wakeup, stopping: Callable[[], bool]) -> Hooks:
        return Hooks(wake=wakeup.set, should_stop=stopping)

    # -- signals -----------------------------------------------------------------------------

    def request_stop(self, signum: int = signal.SIGTERM, *_: object) -> None:
        # Marked before anything else: a second signal whose handler runs nested in the
        # first's (Python runs handlers between any two bytecodes, a handler's own included)
        # is a second signal too, not a first one that arms the deadline again.
        if self._signalled:
            raise StopDeadline("a second signal")
        self._signalled = (threading.get_ident() == self._runner
                           and threading.current_thread() is threading.main_thread())
        self._interrupted = signum == signal.SIGINT
        self._stop = True
        self.wakeup.set()
        self._arm_deadline()

    def _arm_deadline(self) -> None:
        """`stop_timeout` from now, SIGALRM raises `StopDeadline` wherever the main thread is
        (signal handlers run there), a blocked write included. Only there: a stop asked from
        another thread (a test driving the loop) waits for the loop, with no deadline."""
        if threading.get_ident() != self._runner:
            return
        try:
            signal.signal(signal.SIGALRM, _deadline_reached)
            signal.setitimer(signal.ITIMER_REAL, max(0.001, self.topo.config.stop_timeout))
        except ValueError:  # not the main thread (a test driving the loop): no deadline
            return
        self._deadline_armed = True

    def _disarm_deadline(self) -> None:
        if self._deadline_armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            self._deadline_armed = False

    def request_reload(self, *_: object) -> None:
        self._reload = True
        self.wakeup.set()

    @property
    def stopping(self) -> bool:
        return self._stop

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGHUP, self.request_reload)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        self._runner = threading.get_ident()
        try:
            self._start()
            return self._run_loop()
        except StopDeadline as e:
            return self._stopped_at_deadline(e)
        finally:
            self._disarm_deadline()
            self._signalled = False

    def _start(self) -> None:
        topo = self.topo
        if topo.compilation is not None:
            self._catch_up = CatchUp(REPLAY_LIMIT)
            topo.compilation.start()
            self.log.warning("catalog_compiling", reason=topo.compilation.why,
                             reading_with=topo.catalog.count_by_layer(),
                             detail="reading with the layers that are ready; lines read "
                                    "meanwhile are matched again by the full catalog")
            self._next_progress = self.clock() + PROGRESS_EVERY
        topo.files.discover(self)  # files present now are "present at start"
        self.checkpoint(start=True)
        engine = topo.pipeline.engine
        self.log.info("started", paths=list(topo.config.paths),
                      state_dir=str(topo.config.state_dir),
                      catalog_version=topo.catalog.version, patterns=len(topo.catalog.records),
                      prefilter=engine.prefilter, precompiled=topo.catalog.precompiled,
                      engine_cache=engine.stats.cache,
                      files_followed=topo.files.followed, max_open_files=topo.max_open_files,
                      nofile_limit=topo.nofile[1])
        if engine.stats.note:
            self.log.warning("catalog_precompiled_unusable", detail=engine.stats.note)
        topo.files.start_watching()
        if topo.http is not None:
            self.log.info("serving", url=topo.http.url)

    def _stopped_at_deadline(self, why: StopDeadline) -> int:
        """Past `stop_timeout` (or at a second signal): stop where we are. Nothing more is
        saved: the last checkpoint was written after the events before it were (each save
        follows the flush of the outputs that hold it), so what was not written is read, and
        told, again after the restart — at least once, never lost. The one line said here may
        itself find stderr blocked: it gets a second of its own."""
        try:
            signal.signal(signal.SIGALRM, _deadline_reached)
            signal.setitimer(signal.ITIMER_REAL, 1.0)
            self.log.error("stop_deadline_reached", reason=str(why) or "stop_timeout",
                           stop_timeout=self.topo.config.stop_timeout,
                           detail="an output did not take the events in time (a stdout nobody "
                                  "reads?): stopping with exit code 3; the last checkpoint "
                                  "stands, so the events not written are told after a restart")
        except StopDeadline:
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return EXIT_STOP_DEADLINE

    def _run_loop(self) -> int:
        self._next_checkpoint = self.clock() + self.topo.config.checkpoint_interval
        try:
            while not self._stop and self._turn():
                pass
        except OutputClosed as e:
            self._output_closed = e
        except StopDeadline:
            raise  # no drain, no final checkpoint: see `_stopped_at_deadline`
        except BaseException:
            self.shutdown()
            raise
        self.shutdown()
        return 1 if self._output_closed is not None else 0

    def _turn(self) -> bool:
        """One turn of the loop; False when there is nothing left to read (`watch -` with
        nothing else to follow, its input read)."""
        now = self.clock()
        if self.topo.compilation is not None:
            self._follow_compilation(now)
        if self._reload and self.topo.compilation is None:  # after the compile
            self._reload_now()
        progressed = self._read(now)
        self._report_health(now)
        self._tick(now)
        if now >= self._next_checkpoint:
            self.checkpoint()
            self._next_checkpoint = now + self.topo.config.checkpoint_interval
        topo = self.topo
        if topo.stdin is not None and topo.stdin.finished and not topo.files.followed:
            return False
        if not progressed:
            self._nap()
        return True

    def _reload_now(self) -> None:
        self._reload = False
        self.notifier.reloading()
        try:
            self.reload()
        finally:
            self.notifier.ready()  # new topology or old one kept: serving either way

    def _read(self, now: float) -> bool:
        """Every source's turn (none while the catch-up is full: reading waits for the
        compile); whether any read something."""
        if self._catch_up is not None and self._catch_up.full:
            return False
        progressed = False
        for source in self.topo.sources:
            progressed = source.read(now, self) or progressed
        return progressed

    def _report_health(self, now: float) -> None:
        """Readiness to systemd and `/readyz` (once the files are discovered and the catalog
        is whole), what is watched, and the heartbeats: only a loop that gets here vouches
        for itself."""
        topo = self.topo
        if not self._notified_ready and topo.files.discovered:
            self._notified_ready = True  # serving: systemd need not wait for a compile
            self.notifier.ready(f"following {topo.files.followed} files")
        # A reload that moves `metrics_addr` makes a new HTTP server, which is told too.
        if self._ready_http is not topo.http and topo.files.discovered \
                and topo.compilation is None:
            self._ready_http = topo.http
            if topo.http is not None:
                topo.http.set_ready(True)  # catalog loaded, sources opened
        if topo.http is not None:
            topo.http.set_watching(topo.files.matching_nothing())
            topo.http.heartbeat()
        topo.telemetry.heartbeat()
        self.notifier.watchdog(now)

    def _tick(self, now: float) -> None:
        """The clock's turn: records and windows that waited long enough become events."""
        if self._catch_up is not None:
            self._catch_up.add(Ticked(now))
        self.emit(self.topo.pipeline.tick(now))
        self._count_regex_timeouts()

    def _nap(self) -> None:
        """Idle: file events wake us; short naps only while something waits on a clock (an
        open traceback, a rank window, a partial line, a new file's wait to be judged)."""
        topo = self.topo
        nap = 0.25 if topo.pipeline.holding() else 1.0
        for due in (topo.pipeline.due_in(self.clock()), topo.files.due_in(self.clock())):
            if due is not None:
                nap = min(nap, max(0.005, due))
        self.wakeup.wait(self.notifier.max_nap(min(topo.config.poll_interval, nap)))

    def _finish_compilation(self) -> None:
        """Stopping while the full catalog compiles: wait for it (up to `STOP_COMPILE_WAIT`)
        and take it, so that the stop is exactly-once as ever. Past that, stop without it:
        no position moves past what only the partial layers matched, and the next start reads
        it again (their events may then repeat: at least once)."""
        comp = self.topo.compilation
        if comp is None:
            return
        # Ctrl-C at a terminal: no one waits 25 s for a compile with nothing said. Stopped
        # without it (at least once, as past the wait); a supervisor's SIGTERM waits.
        wait = 0.0 if self._interrupted else STOP_COMPILE_WAIT
        deadline = self.clock() + wait
        while not comp.finished and self.clock() < deadline:
            time.sleep(0.05)
        if comp.finished:
            self._follow_compilation(self.clock())
            return
        self.log.warning("stopping_while_compiling", progress=comp.reason,
                         detail="the lines read since the start are read again at the next "
                                "start; events already emitted for them may repeat")

    def _follow_compilation(self, now: float) -> None:
        """While the full catalog compiles: say how far it is (`/readyz`, a log line every few
        seconds); once it is in, take it."""
        topo = self.topo
        comp = topo.compilation
        assert comp is not None
        if not comp.finished:
            if topo.http is not None:
                topo.http.set_ready(False, comp.reason)
            if now >= self._next_progress:
                self._next_progress = now + PROGRESS_EVERY
                eta = comp.estimate()
                self.log.info("catalog_compiling", progress=comp.reason, done=comp.done,
                              total=comp.total, elapsed_s=round(now - comp.started, 1),
                              estimate_s=None if eta is None else round(eta, 1),
                              replay_bytes=0 if self._catch_up is None
                              else self._catch_up.bytes)
            return
        if comp.result is None:
            self.log.error("catalog_compile_failed", detail=str(comp.error),
                           reading_with=topo.catalog.count_by_layer())
            topo.compilation = None
            self._catch_up = None
            return
        self._take_full_catalog(comp, now)

    def _take_full_catalog(self, comp: Compilation, now: float) -> None:
        """Feed what was read meanwhile, in the same steps, to a pipeline with the full catalog;
        emit the events the partial one did not: none for a record it already reported (by
        where the record starts), and the unknown errors it held back, now known or not. That
        pipeline reads on from here: every line is matched by the full catalog, once."""
        topo = self.topo
        catch_up = self._catch_up
        assert comp.result is not None and catch_up is not None
        catalog, engine = comp.result
        pipeline = new_pipeline(topo.config, catalog, topo.redactor, engine=engine)
        fresh = catch_up.replay(pipeline)
        self._catch_up = None
        topo.catalog, topo.pipeline, topo.compilation = catalog, pipeline, None
        topo.metrics.reload(catalog, catalog_version=catalog.version)
        self.emit(fresh)
        self.log.info("catalog_compiled", seconds=round(now - comp.started, 1),
                      catalog_version=catalog.version, patterns=len(catalog.records),
                      engine_cache=engine.stats.cache, replayed_steps=len(catch_up.steps),
                      events_already_emitted=catch_up.told, events_added=len(fresh))

    def shutdown(self) -> None:
        """Drain: read what is there, flush open records and windows, final checkpoint. With
        the event stream's reader gone (`OutputClosed`), none of that: what could not be told
        keeps its lines unsaved, for the restart to read again (the last checkpoint stands)."""
        self.notifier.stopping()
        if self._output_closed is not None:
            self.topo.files.stop_watching()
            self.topo.close()
            self.log.error("events_output_closed", sink=str(self._output_closed),
                           detail="the reader of the events went away (a broken pipe): "
                                  "stopping with exit code 1; a restart reads on from the "
                                  "last checkpoint, so the events not told are told then")
            return
        self._finish_compilation()
        topo = self.topo
        topo.files.stop_watching()
        now = self.clock()
        for _ in range(1000):
            progressed = False
            for source in topo.sources:
                progressed = source.read(now, self) or progressed
            if not progressed:
                break
        self.emit(topo.pipeline.drain(now))
        self.checkpoint(final=True)
        topo.close()
        self.log.info("stopped")

    def reload(self) -> None:
        old = self.topo
        try:
            config = load_config(file=self.config_file, flags=self.flags)
            new = build(config, log=self.log, previous=old, stdout=self.stdout,
                        hooks=self.hooks(self.wakeup, lambda: self._stop),
                        clock=self.clock, wall=self.wall)
        except (ConfigError, CatalogError) as e:
            old.telemetry.reload("failed", detail=str(e), kept_catalog=old.catalog.version)
            return
        new.pipeline.carry_over(old.pipeline)  # drain, don't finish: partial lines stay partial
        retire(old, new)
        self.topo = new
        for name in new.not_reloaded:
            new.telemetry.notice(SETTING_NOT_RELOADED, setting=name,
                                 hint="restart the matcher to apply it")
        new.telemetry.reload("ok", catalog_version=new.catalog.version,
                             patterns=len(new.catalog.records))

    # -- Intake: what sources read goes through here -----------------------------------------

    def chunk(self, chunk: Chunk, now: float) -> Fed:
        self._read_times.read(chunk.source, chunk.end_offset, self.clock())
        if self._catch_up is not None:
            self._catch_up.add(ChunkRead(chunk, now))
        try:
            fed = self.topo.pipeline.feed(chunk, now)
        except Exception as e:  # noqa: BLE001 - a bug must cost a chunk, not the daemon
            self.topo.telemetry.pipeline_error("match", e, path=display_name(chunk.source),
                                               offset=chunk.end_offset - len(chunk.data))
            return Fed([])
        self.emit(fed.events)
        return fed

    def lines(self, source: str, lines: list[Line], now: float) -> Fed:
        if lines:
            self._read_times.read(source, lines[-1].end_offset, self.clock())
        if self._catch_up is not None:
            self._catch_up.add(LinesRead(source, tuple(lines), now))
        fed = self.topo.pipeline.feed_lines(source, lines, now)
        self.emit(fed.events)
        return fed

    def end(self, source: str, now: float) -> None:
        if self._catch_up is not None:
            self._catch_up.add(SourceEnded(source, now))
        self.emit(self.topo.pipeline.end_of_source(source, now))

    def flush_partial(self, source: str, now: float) -> None:
        if self._catch_up is not None:
            self._catch_up.add(PartialFlushed(source, now))
        self.emit(self.topo.pipeline.flush_partial(source, now))

    def checkpoint_offset(self, source: str) -> int | None:
        return self.topo.pipeline.checkpoint_offset(source)

    def partial_line_start(self, source: str) -> int | None:
        return self.topo.pipeline.partial_line_start(source)

    # -- out ---------------------------------------------------------------------------------

    def emit(self, events: list[Event]) -> None:
        if self._catch_up is not None and events:
            events = self._catch_up.emitted(events)  # the full catalog is not in yet
        if not events:
            return
        topo = self.topo
        emitted_at = self.clock()
        for e in events:
            read_at = self._read_times.when(e.source, e.offset)
            if read_at is not None:
                topo.telemetry.event_latency(emitted_at - read_at)
        wall = self.wall()
        shown = tuple(dataclasses.replace(e, source=display_name(e.source), observed_ts=wall)
                      for e in events)
        printed = tuple(e for e in shown if not e.quiet)
        if len(printed) < len(shown):
            topo.telemetry.events_suppressed(len(shown) - len(printed))
        # Below `min_severity`: counted by the metrics (they read `events`), not printed or sent.
        floor = SEVERITY_RANK[topo.config.min_severity]
        printed = tuple(e for e in printed if SEVERITY_RANK.get(e.severity, 0) <= floor)
        # Redacted once, here, for every sink.
        batch = Batch(shown, printed, tuple(event_dict(e, topo.redactor) for e in printed))
        for sink in topo.sinks:
            sink.emit(batch)

    def checkpoint(self, *, final: bool = False, start: bool = False) -> None:
        """The read positions saved. `start`: the ones reading starts from, before anything is
        read (nothing to hold back then, even while the full catalog compiles). Without them a
        daemon killed before its first checkpoint — within `checkpoint_interval` of its start,
        or at any time while the full catalog compiles, when none is written — would come back
        with no position for the files it had found, follow them from their end, and lose every
        line written between its two starts."""
        topo = self.topo
        wall = self.wall()
        for sink in topo.sinks:
            if sink.holds_checkpoint:
                sink.flush()  # no position is saved ahead of the events of the lines before it
        if self._catch_up is not None and not start:
            # The lines read while the full catalog compiles are not done with until it has
            # matched them: no position moves past them (a stop now reads them again).
            return
        moved = [source.save(topo.state, self, wall) for source in topo.sources]
        for name in self._read_times.sources():  # lines the pipeline is done with
            self._read_times.forget_before(name, topo.pipeline.checkpoint_offset(name))
        changed = any(moved) or final
        if changed or wall >= self._next_retention:
            self._next_retention = wall + 3600.0
            tracked = topo.files.tracked_keys()
            for key, cp in list(topo.state.files.items()):
                if key not in tracked and wall - cp.updated > CHECKPOINT_RETENTION:
                    del topo.state.files[key]
                    changed = True
        if not changed:  # nothing moved: an idle host with 2,000 files writes nothing
            topo.telemetry.checkpoint_written()
            return
        self._save_positions(topo.telemetry, final=final)

    def _save_positions(self, events: CheckpointEvents, *, final: bool) -> None:
        topo = self.topo
        try:
            topo.store.save(topo.state)
        except CheckpointError as e:
            events.checkpoint_failed("write", detail=str(e), final=final)
        else:
            topo.files.saved()
            events.checkpoint_written()

    def _count_regex_timeouts(self) -> None:
        """The engine's timeouts since the last turn → counter and log."""
        timeouts, quarantined = self.topo.pipeline.engine.take_timeouts()
        if timeouts:
            self.topo.telemetry.regex_timeouts(timeouts, quarantined)
