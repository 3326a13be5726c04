"""`sglang-matcher watch`: wiring and lifecycle. Sources in, events out, positions saved.

One thread reads every source in turn (a bounded amount per file per round, so one busy file
cannot starve the others), feeds the pure pipeline, hands events to the sinks and — only after
the sinks returned — checkpoints each source at `Pipeline.checkpoint_offset`: the position
before which every line has become an emitted event or was found to need none. A sink that
blocks therefore stops reading; nothing queues without bound.

Signals: SIGTERM/SIGINT stop reading, drain what is buffered (open tracebacks, the aggregation
window), write a final checkpoint and exit 0. SIGHUP reloads config and catalog; a catalog with
problems leaves the running one in place and says why. Guarantee: every completed line is
delivered at least once; after SIGTERM exactly once; after SIGKILL the lines since the last
checkpoint (at most `checkpoint_interval` seconds of input, plus lines still held in an open
traceback or aggregation window) are read again.
"""

from __future__ import annotations

import dataclasses
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import prometheus_client
import structlog
from prometheus_client import CollectorRegistry

from matcher import __version__, limits
from matcher.catalog import Catalog, CatalogError, load_catalog
from matcher.config import Config, ConfigError, load_config
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.release import catalog_version_setting
from matcher.redact import Redactor
from matcher.http import EventRing, HttpServer, parse_address
from matcher.notify import Notifier
from matcher.sinks.events import EventWriter, event_dict
from matcher.sinks.metrics import MetricsSink
from matcher.sinks.webhook import WebhookSink
from matcher.source.checkpoint import CheckpointError, CheckpointStore
from matcher.source.discovery import DiscoveryStopped, why_nothing
from matcher.source.files import FileSet, SourceNotice, TailedFile, display_name
from matcher.source.journald import JournalSource
from matcher.telemetry import Telemetry
from matcher.types import Chunk, Event
from matcher.utf8 import count_invalid

CHECKPOINT_RETENTION = 7 * 24 * 3600.0
NOTHING_REPORT_INTERVAL = 300.0  # a glob that matches nothing is said again this often
OWN_DESCRIPTORS = 64  # the daemon's own: inotify, pipes, journalctl, webhook, checkpoint writes
SWEEP_POLLS = 10  # with inotify, the globs are walked every this many polls (and on events)
MAX_TOUCHED = 10_000  # modified paths remembered between two turns; beyond: walk instead
MIN_OPEN_FILES = 16  # even under a tiny limit, follow this many at once (and say it is tight)


def load_checked_catalog(config: Config) -> Catalog:
    catalog = load_catalog(builtin=config.builtin_catalog, user_paths=list(config.catalogs),
                           generated=config.sglang_version != "none",
                           sglang_version=catalog_version_setting(config.sglang_version))
    if catalog.issues:
        raise CatalogError(list(catalog.issues))
    return catalog


class Wakeup:
    """Cuts the main loop's sleep short: watchdog's thread and signal handlers call `set()`.

    A pipe, not a `threading.Event`. A Python signal handler runs in the main thread between two
    bytecodes — possibly while that thread is inside `Event.wait()` holding the Event's lock —
    and `Event.set()` from the handler then waits for that lock forever: SIGTERM was ignored
    and the daemon had to be killed (seen once in CI). Writing a byte to a pipe takes no lock.
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
    def __init__(
        self,
        config: Config,
        *,
        config_file: Path | None = None,
        flags: dict[str, Any] | None = None,
        stdout: TextIO = sys.stdout,
        stderr: TextIO = sys.stderr,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        read_stdin: bool = False,
    ) -> None:
        self.config = config
        self.config_file = config_file
        self.flags = flags or {}
        self.clock = clock
        self.wall = wall
        self.read_stdin = read_stdin
        self.log = structlog.wrap_logger(
            structlog.PrintLogger(stderr),
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.JSONRenderer(),
            ],
        )
        # Before anything is opened: a systemd service starts with a soft limit of 1024.
        self.nofile = limits.raise_nofile_limit()
        self.redactor = Redactor(config.redact_patterns)
        self.sinks = [EventWriter(stdout, self.redactor, config.log_format)]
        if config.events_file is not None:
            self._events_file = open(config.events_file, "a", encoding="utf-8")  # noqa: SIM115
            self.sinks.append(EventWriter(self._events_file, self.redactor, "json"))
        self.catalog = load_checked_catalog(config)
        self.pipeline = self._new_pipeline(self.catalog)
        labels = config.static_labels()
        prometheus_client.disable_created_metrics()
        self.registry = CollectorRegistry()
        self.telemetry = Telemetry(self.registry, self.log, labels, redactor=self.redactor)
        self.metrics = MetricsSink(self.registry, catalog=self.catalog, static_labels=labels,
                                   build_version=__version__, catalog_version=self.catalog.version)
        self.ring = EventRing(config.events_buffer)
        self.http: HttpServer | None = None
        if config.metrics_addr:
            host, port = parse_address(config.metrics_addr)
            self.http = HttpServer(host, port, registry=self.registry, events=self.ring)
        self.webhook: WebhookSink | None = None
        if config.webhook_url:
            self.webhook = WebhookSink(config.webhook_url, redactor=self.redactor,
                                       telemetry=self.telemetry)
        self.store = CheckpointStore(config.state_dir)
        state, problem = self.store.load()
        if problem:
            self.log.error("checkpoint_unreadable", detail=problem)
        self.state = state
        self.files = FileSet(
            config.paths, config.exclude, state,
            from_beginning=config.from_beginning,
            fingerprint_bytes=config.fingerprint_bytes,
            rotate_wait=config.rotate_wait,
            clock=clock,
            max_walk_entries=config.max_walk_entries,
            should_stop=lambda: self._stop,
        )
        self.max_open_files = config.max_open_files or self._descriptor_budget()
        self.files.max_open = self.max_open_files
        self._discovery_said: dict[str, tuple[object, ...]] = {}
        self._nothing_said: dict[str, float] = {}
        self._structure_changed = False  # inotify saw a create/delete/rename
        self._touched: list[str] = []  # paths inotify saw modified since the last turn
        self._events_cover_all = False
        self._saved_changes = -1  # FileSet.changes at the last checkpoint written
        self._next_retention = 0.0
        self.journals: list[JournalSource] = []
        for unit in config.journal_units:
            name = f"journal:{unit}"
            self.journals.append(JournalSource(
                [unit], name=name, directory=config.journal_directory,
                after_cursor=state.journal.get(name),
                from_beginning=config.journal_from_beginning or config.from_beginning))
        self.wakeup = Wakeup()
        self.notifier = Notifier.from_env()  # systemd Type=notify; a no-op elsewhere
        self._stop = False
        self._reload = False
        self._observer: Any = None
        self._stdin_done = not read_stdin
        self._stdin_offset = 0
        self._regex_seen: tuple[object, int, frozenset[str]] = (None, 0, frozenset())

    # -- lifecycle ---------------------------------------------------------------------------

    def _descriptor_budget(self) -> int:
        """Files that may be open at once: the soft descriptor limit (raised to the hard one at
        start) less the daemon's own descriptors and the HTTP server's connection cap."""
        http_cap = self.http.max_connections if self.http is not None else 0
        return max(MIN_OPEN_FILES, limits.fd_budget(OWN_DESCRIPTORS + http_cap))

    def _new_pipeline(self, catalog: Catalog) -> Pipeline:
        return Pipeline(
            Engine(catalog.records),
            catalog_version=catalog.version,
            labels=self.config.static_labels(),
            window=self.config.aggregate_window,
            max_line_bytes=self.config.max_line_bytes,
            flush_after=self.config.partial_line_flush,
            input_format=self.config.input_format,
            repeat_interval=self.config.repeat_interval,
            early=self.config.early_events,
            rank_grace=self.config.rank_grace,
            sglang_version=self.config.sglang_version,
        )

    def request_stop(self, *_: object) -> None:
        self._stop = True
        self.wakeup.set()

    def request_reload(self, *_: object) -> None:
        self._reload = True
        self.wakeup.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGHUP, self.request_reload)

    def run(self) -> int:
        self._discover()  # files present now are "present at start"; "started" says it's done
        self.log.info("started", paths=list(self.config.paths), state_dir=str(self.config.state_dir),
                      catalog_version=self.catalog.version, patterns=len(self.catalog.records),
                      prefilter=self.pipeline.engine.prefilter,
                      files_followed=len(self.files.files), max_open_files=self.max_open_files,
                      nofile_limit=self.nofile[1])
        self._start_watchdog()
        if self.http is not None:
            self.http.start()
            self.log.info("serving", url=self.http.url)
        next_discovery = next_full_read = 0.0
        ready = False
        next_checkpoint = self.clock() + self.config.checkpoint_interval
        try:
            while not self._stop:
                now = self.clock()
                if self._reload:
                    self._reload = False
                    self.notifier.reloading()
                    try:
                        self.reload()
                    finally:
                        self.notifier.ready()  # new catalog or old one kept: serving either way
                if now >= next_discovery or self._structure_changed:
                    self._structure_changed = False
                    self._discover()
                    next_discovery = now + self._discovery_interval()
                    if not ready and self.http is not None:
                        self.http.set_ready(True)  # catalog loaded, sources opened
                    if not ready:
                        self.notifier.ready(f"following {len(self.files.files)} files")
                    ready = True
                if self.http is not None:
                    self.http.heartbeat()
                self.telemetry.heartbeat()
                self.notifier.watchdog(now)  # only a loop that gets here vouches for itself
                touched: set[str] = set()
                if self._touched:
                    batch, self._touched = self._touched, []
                    touched = {os.path.abspath(p) for p in batch}
                    self.files.wake(touched, now)  # closed idle files that grew
                    self._log_notices()
                if now >= next_full_read or not self._events_cover_all:
                    next_full_read = now + self.config.poll_interval * SWEEP_POLLS
                    progressed = self.read_round(now)
                else:  # inotify names what changed: only those, and files still being read
                    progressed = self.read_round(now, touched=touched)
                self._emit(self.pipeline.tick(now))
                self._count_regex_timeouts()
                if now >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = now + self.config.checkpoint_interval
                if self.read_stdin and self._stdin_done and not self.files.files:
                    break
                if not progressed:
                    # Idle: file events wake us; short naps only while something waits on a
                    # clock (an open traceback, a rank window, a partial line).
                    nap = 0.25 if self.pipeline.holding() else 1.0
                    due = self.pipeline.due_in(self.clock())
                    if due is not None:  # an event waits on its ranks' grace: wake for it
                        nap = min(nap, max(0.005, due))
                    self.wakeup.wait(self.notifier.max_nap(min(self.config.poll_interval, nap)))
        finally:
            self.shutdown()
        return 0

    def shutdown(self) -> None:
        """Drain: read what is there, flush open records and windows, final checkpoint."""
        self.notifier.stopping()
        if self._observer is not None:
            self._observer.stop()
        now = self.clock()
        for _ in range(1000):
            if not self.read_round(now):
                break
        self._emit(self.pipeline.drain(now))
        self.checkpoint(final=True)
        self.files.close_all()
        for journal in self.journals:
            journal.close()
        if self.webhook is not None:
            self.webhook.close()
        if self.http is not None:
            self.http.stop()
        self.log.info("stopped")

    def reload(self) -> None:
        try:
            config = load_config(file=self.config_file, flags=self.flags)
            catalog = load_checked_catalog(config)
        except (ConfigError, CatalogError) as e:
            self.telemetry.reload("failed", detail=str(e), kept_catalog=self.catalog.version)
            return
        self.config = dataclasses.replace(config, state_dir=self.config.state_dir)
        self.catalog = catalog
        pipeline = self._new_pipeline(catalog)
        pipeline.carry_over(self.pipeline)  # drain, don't finish: partial lines stay partial
        self.pipeline = pipeline
        self.metrics.reload(catalog)
        self.files.globs, self.files.exclude = config.paths, config.exclude
        self.telemetry.reload("ok", catalog_version=catalog.version, patterns=len(catalog.records))

    # -- the loop ----------------------------------------------------------------------------

    def _discovery_interval(self) -> float:
        """How long until the globs are walked again. With inotify covering every configured
        directory a walk follows each structural event (create, delete, rename) at once, and
        the periodic walk is only the safety net (a lost event, a network filesystem): every
        `SWEEP_POLLS` polls. Without it, or while a new file waits to be judged a copy or not,
        every poll."""
        if self._observer is None or not self._events_cover_all or self.files.undecided():
            return self.config.poll_interval
        return self.config.poll_interval * SWEEP_POLLS

    def _discover(self) -> None:
        try:
            done = self.files.discover()
        except DiscoveryStopped:
            return  # SIGTERM mid-walk: the loop ends, what is open is drained
        except OSError as e:
            self.telemetry.pipeline_error("discover", e)
            return
        for f in done:
            self._end_file(f)
        self._log_notices()
        self._report_discovery()

    def _report_discovery(self) -> None:
        """Say what each glob follows, and loudly when that is nothing or the walk failed."""
        now = self.clock()
        followed = self.files.followed()
        self.telemetry.files_parked(sum(1 for f in self.files.files.values()
                                        if f.parked_for is not None))
        for pattern, found in self.files.discoveries.items():
            self.telemetry.files_followed(pattern, followed.get(pattern, 0))
            said = (tuple(found.problems), found.capped)
            if said != self._discovery_said.get(pattern, ((), False)):
                self._discovery_said[pattern] = said
                if found.descriptors_exhausted:
                    self.telemetry.pipeline_error(
                        "discover", "OSError", path=pattern,
                        detail="too many open files while listing: " + "; ".join(found.problems),
                        hint="raise LimitNOFILE (ulimit -n) or lower max_open_files; files "
                             "already followed are kept, not taken for gone")
                elif found.problems:
                    self.telemetry.notice("listing_failed", level="warning", path=pattern,
                                          detail="; ".join(found.problems[:5]),
                                          hint="files already followed are kept; retried "
                                               "every poll")
                if found.capped:
                    self.telemetry.notice(
                        "discovery_capped", level="warning", path=pattern,
                        detail=f"stopped after {found.entries} directory entries",
                        hint="narrow the glob, or raise max_walk_entries")
            if followed.get(pattern, 0) == 0 and found.complete:
                last = self._nothing_said.get(pattern)
                if last is None or now - last >= NOTHING_REPORT_INTERVAL:
                    self._nothing_said[pattern] = now
                    self.telemetry.notice("path_matches_nothing", level="warning",
                                          path=pattern, detail=why_nothing(pattern))
            else:
                self._nothing_said.pop(pattern, None)
        if self.http is not None:
            self.http.set_watching([p for p in self.files.discoveries
                                    if followed.get(p, 0) == 0])

    def _end_file(self, f: TailedFile) -> None:
        if not f.dormant:
            self._drain_file(f, self.clock())
        self._emit(self.pipeline.end_of_source(f.source_id, self.clock()))
        self.files.checkpoint(f, f.offset, self.wall())
        self.files.close(f)

    def read_round(self, now: float, touched: set[str] | None = None) -> bool:
        """One fair pass over the sources; True if any bytes were read.

        `touched` (inotify's modified paths since the last turn) limits the pass to those
        files and to files that need turns anyway: read last turn (a backlog), waiting out a
        partial line, rotated away, or at a path inotify cannot vouch for (a symlink, whose
        target's writes are not events of its directory). None: every file (a sweep)."""
        progressed = False
        for f in list(self.files.files.values()):
            if f.dormant:
                continue
            if touched is not None and not self._needs_turn(f, touched):
                continue
            if self._read_file(f, now, self.config.read_chunk_bytes):
                progressed = True
                f.busy = True
            else:
                f.busy = False
        if self.files.open_count() > self.max_open_files * 0.9 or self.files.deferred:
            self._sleep_idle_files(now)
        if self.read_stdin and not self._stdin_done:
            progressed |= self._read_stdin(now)
        for journal in self.journals:
            for status in journal.poll():
                level = "info" if status.kind in ("started", "finished") else "warning"
                self.telemetry.notice(f"journal_{status.kind}", level=level, source=journal.name,
                                      detail=status.message)
            lines = journal.read(1024)
            if lines:
                progressed = True
                self.telemetry.lines(journal.name, len(lines), sum(len(x.text) for x in lines))
                self._emit(self.pipeline.feed_lines(journal.name, lines, now))
        return progressed

    @staticmethod
    def _needs_turn(f: TailedFile, touched: set[str]) -> bool:
        return (f.busy or f.abspath in touched or f.pending_partial_since is not None
                or f.gone_since is not None or not f.seen_at_path or f.behind_symlink)

    def _sleep_idle_files(self, now: float) -> None:
        """Near the descriptor budget, or files waiting for one: close the files idle longest
        (read to their end, nothing of them held by the pipeline), checkpointed first, down to
        half the budget — Filebeat's `close_inactive`, forced by the count, not a timer."""
        excess = self.files.open_count() - self.max_open_files // 2
        idle = sorted((f for f in self.files.files.values()
                       if not f.dormant and f.parked_for is None and f.seen_at_path
                       and f.gone_since is None
                       and self.pipeline.partial_line_start(f.source_id) is None
                       and self.pipeline.checkpoint_offset(f.source_id) in (None, f.offset)),
                      key=lambda f: f.last_growth)
        wall = self.wall()
        slept = 0
        for f in idle[:max(0, excess)]:
            try:
                if f.size() != f.offset:
                    continue
            except OSError:
                continue
            self.files.sleep(f, wall)
            slept += 1
        if slept:
            self.telemetry.files_slept(slept, open_files=self.files.open_count(),
                                       max_open_files=self.max_open_files)

    def _read_file(self, f: TailedFile, now: float, budget: int) -> bool:
        if f.parked_for is not None:
            return False
        try:
            # Idle is one fstat: truncation is checked (size, first bytes, the bytes before our
            # offset) whenever there is something to read, before and after reading it.
            f.seen_size = f.size()
            if f.seen_size == f.offset:
                data = b""
            elif self._truncated(f, now):
                return True
            else:
                data = f.read(budget)
                if data and self._truncated(f, now, len(data)):
                    return True  # rewritten while we read: what we read is not this file's now
        except OSError as e:
            self.telemetry.pipeline_error("read", e, path=f.path)
            return False
        if data:
            f.last_growth = now
            f.pending_partial_since = None
            if f.identity.fp_len < self.config.fingerprint_bytes:
                self.files.refresh_identity(f)  # a young file: its fingerprint grows with it
            stats = self.pipeline.stats
            lines, cut, malformed = stats.lines, stats.lines_truncated, stats.lines_malformed
            try:
                events = self.pipeline.feed(Chunk(data, f.source_id, f.offset), now)
            except Exception as e:  # a bug must cost a chunk, not the daemon: counted, logged
                self.telemetry.pipeline_error("match", e, path=f.path, offset=f.offset)
                events = []
            self._emit(events)
            self.telemetry.lines(f.pattern, stats.lines - lines, len(data))
            if stats.lines_truncated > cut:
                self.telemetry.lines_truncated(f.pattern, stats.lines_truncated - cut, path=f.path)
            bad_utf8, f.utf8_carry = count_invalid(f.utf8_carry, data)
            self.telemetry.malformed_input(f.pattern, path=f.path, invalid_utf8=bad_utf8,
                                           nul_byte=data.count(b"\0") if b"\0" in data else 0,
                                           container_format=stats.lines_malformed - malformed)
            return True
        partial_start = self.pipeline.partial_line_start(f.source_id)
        if partial_start is not None:
            if f.pending_partial_since is None:
                f.pending_partial_since = now
            elif now - f.pending_partial_since >= self.config.partial_line_flush:
                self._emit(self.pipeline.flush_partial(f.source_id, now))
                f.pending_partial_since = None
        return False

    def _truncated(self, f: TailedFile, now: float, just_read: int = 0) -> bool:
        if not self.files.check_truncation(f, just_read):
            return False
        self._emit(self.pipeline.end_of_source(f.source_id, now))
        self._log_notices()
        return True

    def _drain_file(self, f: TailedFile, now: float) -> None:
        while self._read_file(f, now, 1 << 20):
            pass

    def _read_stdin(self, now: float) -> bool:
        fd = sys.stdin.fileno()
        os.set_blocking(fd, False)
        try:
            data = os.read(fd, self.config.read_chunk_bytes)
        except BlockingIOError:
            return False
        if not data:
            self._stdin_done = True
            self._emit(self.pipeline.end_of_source("<stdin>", now))
            return False
        self._stdin_offset += len(data)
        self._emit(self.pipeline.feed(Chunk(data, "<stdin>", self._stdin_offset), now))
        return True

    def _emit(self, events: list[Event]) -> None:
        if not events:
            return
        wall = self.wall()
        shown = [dataclasses.replace(e, source=display_name(e.source), observed_ts=wall)
                 for e in events]
        self.metrics.accept(shown)  # every failure counts, printed or rate-limited
        printed = [e for e in shown if not e.quiet]
        if len(printed) < len(shown):
            self.telemetry.events_suppressed(len(shown) - len(printed))
        if not printed:
            return
        dicts = [event_dict(e, self.redactor) for e in printed]  # redacted once, here
        for sink in self.sinks:
            sink.write(dicts)
        self.ring.extend(dicts)
        if self.webhook is not None:
            self.webhook.accept(printed)

    def checkpoint(self, *, final: bool = False) -> None:
        wall = self.wall()
        for f in self.files.files.values():
            if f.checkpointed == (f.identity.key, f.offset, f.path):
                continue  # saved at its read position, nothing read since: nothing held either
            offset = self.pipeline.checkpoint_offset(f.source_id)
            self.files.checkpoint(f, f.offset if offset is None else offset, wall)
        lag: dict[str, int] = dict.fromkeys(self.config.paths, 0)
        for f in self.files.files.values():
            if f.dormant:
                continue  # it was read to its end when it was closed; growth wakes it
            lag[f.pattern] = lag.get(f.pattern, 0) + max(0, f.seen_size - f.offset)
        for pattern, behind in lag.items():  # one series per configured glob: the sum
            self.telemetry.read_lag(pattern, behind)
        journal_before = dict(self.state.journal)
        for journal in self.journals:
            offset = self.pipeline.checkpoint_offset(journal.name)
            cursor = journal.cursor_for_checkpoint(offset) if offset is not None else None
            if cursor is not None:
                self.state.journal[journal.name] = cursor
        changed = self.files.changes != self._saved_changes or final \
            or self.state.journal != journal_before
        if changed or wall >= self._next_retention:
            self._next_retention = wall + 3600.0
            tracked = {f.identity.key for f in self.files.files.values()}
            for key, cp in list(self.state.files.items()):
                if key not in tracked and wall - cp.updated > CHECKPOINT_RETENTION:
                    del self.state.files[key]
                    changed = True
        if not changed:  # nothing moved: an idle host with 2,000 files writes nothing
            self.telemetry.checkpoint_written()
            return
        changes = self.files.changes
        try:
            self.store.save(self.state)
        except CheckpointError as e:
            self.telemetry.checkpoint_failed("write", detail=str(e), final=final)
        else:
            self._saved_changes = changes
            self.telemetry.checkpoint_written()

    def _count_regex_timeouts(self) -> None:
        """The engine's timeout bookkeeping → counter and log (the engine itself never logs)."""
        stats = self.pipeline.engine.stats
        seen_engine, seen_timeouts, seen_quarantined = self._regex_seen
        if seen_engine is not stats:  # a reload compiled a new engine
            seen_timeouts, seen_quarantined = 0, frozenset()
        if stats.timeouts != seen_timeouts:
            self.telemetry.regex_timeouts(stats.timeouts - seen_timeouts,
                                          sorted(stats.quarantined - seen_quarantined))
        self._regex_seen = (stats, stats.timeouts, frozenset(stats.quarantined))

    def _log_notices(self) -> None:
        for n in self.files.take_notices():
            self._notice(n)

    def _notice(self, n: SourceNotice) -> None:
        """Each file event is logged and counted in one place: telemetry."""
        if n.kind == "rotated":
            self.telemetry.rotated(n.pattern, path=n.path, detail=n.detail)
        elif n.kind == "truncated":
            self.telemetry.truncated(n.pattern, path=n.path, detail=n.detail)
        else:
            level = "warning" if n.kind in ("unreadable", "released") else "info"
            self.telemetry.notice(f"file_{n.kind}", level=level, path=n.path, detail=n.detail)

    def _start_watchdog(self) -> None:
        """inotify (via watchdog) wakes discovery early; polling stays the ground truth."""
        if self.config.poll_only:
            return
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:  # pragma: no cover
            return
        wakeup = self.wakeup
        daemon = self

        class Handler(FileSystemEventHandler):  # type: ignore[misc]
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("created", "deleted", "moved"):
                    daemon._structure_changed = True  # a walk of the globs, at once
                elif event.event_type == "modified" and not event.is_directory:
                    touched = daemon._touched
                    if len(touched) < MAX_TOUCHED:
                        touched.append(event.src_path)  # list.append: atomic under the GIL
                    else:
                        daemon._structure_changed = True  # too many to list: walk instead
                wakeup.set()

        observer = Observer()
        watched: set[str] = set()
        covered = 0
        for pattern in self.config.paths:
            directory = _static_dir(pattern)
            if directory in watched:
                covered += 1
                continue
            if not os.path.isdir(directory):
                continue
            # Recursive when a directory part has a wildcard: a new pod's log is an event too.
            recursive = Path(pattern).parent != Path(directory)
            try:
                observer.schedule(Handler(), directory, recursive=recursive)
                watched.add(directory)
                covered += 1
            except OSError as e:
                self.log.warning("watch_failed", directory=directory, detail=str(e))
        if watched:
            observer.daemon = True
            observer.start()
            self._observer = observer
        self._events_cover_all = covered == len(self.config.paths)


def _static_dir(pattern: str) -> str:
    """The deepest directory of a glob that has no wildcard in it."""
    parts = Path(pattern).parts
    static: list[str] = []
    for part in parts[:-1]:
        if any(c in part for c in "*?["):
            break
        static.append(part)
    return str(Path(*static)) if static else "."
