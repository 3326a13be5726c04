"""Everything `watch` runs, built from one `Config` in one place.

`build` constructs the sources, the pipeline and the sinks — opening the events file, binding
the metrics port, compiling the redaction patterns and the catalog — and turns anything wrong
into one `ConfigError` (the setting, what is wrong, what to do) or `CatalogError`. Nothing is
read and no position is written until `Daemon.run`. So `watch --check` is `build` then
`close`: it rejects exactly what `watch` would, port in use included, and under systemd's
`ExecStartPre=… --check` a bad config fails once, with its reason, instead of crash-looping.

SIGHUP builds again with the running topology as `previous`: what did not change is kept
(the bound server, the webhook's queue, the open events file, a journal unit's reader), what
did is made anew, and what read positions, counters and held events depend on — the files
followed, the checkpoint state, the metrics registry — carries over. A new build that fails
leaves the running topology untouched. The settings declared not reloadable
(`config.NOT_RELOADABLE`: the state dir and its use, the labels) cannot change without a
restart, and a change to one is logged (`setting_not_reloaded`).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

import prometheus_client
import regex
from prometheus_client import CollectorRegistry

from matcher import __version__, limits
from matcher.address import parse_address
from matcher.catalog import Catalog, CatalogError, load_catalog
from matcher.config import NOT_RELOADABLE, Config, ConfigError
from matcher.engine import Engine
from matcher.http import HttpServer
from matcher.pipeline import Pipeline
from matcher.redact import Redactor
from matcher.release import catalog_version_setting
from matcher.selflog import OTLP_RESOURCE_ATTRIBUTES_IGNORED
from matcher.sinks.events import EventWriter
from matcher.sinks.metrics import MetricsSink
from matcher.sinks.otlp_config import (
    check_url,
    env_headers,
    resolve_endpoint,
    resource_attributes,
)
from matcher.sinks.ring import EventRing
from matcher.sinks.webhook import WebhookSink
from matcher.source.checkpoint import CheckpointState, CheckpointStore
from matcher.source.journal_unit import JournalUnit
from matcher.source.journald import JournalSource
from matcher.source.stdin import StdinSource
from matcher.source.tail import FileSource, descriptor_budget, own_identities
from matcher.telemetry import Logger, Telemetry
from matcher.types import Sink, Source

if TYPE_CHECKING:
    from matcher.sinks.otlp import OtlpLogSink


@dataclass(slots=True)
class Hooks:
    """How what `build` makes reaches the loop that will run it: `wake` cuts its sleep short
    (inotify's thread calls it), `should_stop` ends a long directory walk at SIGTERM."""

    wake: Callable[[], None] = lambda: None
    should_stop: Callable[[], bool] = lambda: False
    # `watch` (not `--check`): when the full catalog would have to be compiled, start with
    # the layers that are ready and compile it in a thread (`Compilation`).
    compile_later: bool = False


@dataclass(slots=True)
class Topology:
    """What one configuration runs: sources → pipeline → sinks, and what watches them."""

    config: Config
    catalog: Catalog
    redactor: Redactor
    pipeline: Pipeline
    registry: CollectorRegistry
    telemetry: Telemetry
    metrics: MetricsSink
    ring: EventRing
    http: HttpServer | None
    webhook: WebhookSink | None
    events_file: EventWriter | None
    stdout: EventWriter
    files: FileSource
    stdin: StdinSource | None
    journals: list[JournalUnit]
    store: CheckpointStore
    state: CheckpointState
    max_open_files: int
    nofile: tuple[int, int]
    not_reloaded: list[str] = field(default_factory=list)  # settings a reload left as they were
    otlp: OtlpLogSink | None = None
    # The full catalog still compiling (first start only); `catalog` and `pipeline` hold the
    # layers that were ready meanwhile.
    compilation: Compilation | None = None

    @property
    def sources(self) -> list[Source]:
        out: list[Source] = [self.files]
        if self.stdin is not None:
            out.append(self.stdin)
        out.extend(self.journals)
        return out

    @property
    def sinks(self) -> list[Sink]:
        """In the order they get each batch: counted first, then printed, then sent."""
        out: list[Sink] = [self.metrics, self.stdout]
        if self.events_file is not None:
            out.append(self.events_file)
        out.append(self.ring)
        if self.webhook is not None:
            out.append(self.webhook)
        if self.otlp is not None:
            out.append(self.otlp)
        return out

    def close(self) -> None:
        """Release everything without running: `--check`, or a build that is not used."""
        for sink in self.sinks:
            if sink is not self.stdout:
                sink.close()
        if self.http is not None:
            self.http.stop()
        for source in self.sources:
            source.close()


def output_format(setting: str, stream: TextIO) -> str:
    """`auto`: `human` for a person at a terminal, `json` for a program (a pipe, a file)."""
    if setting != "auto":
        return setting
    try:
        return "human" if stream.isatty() else "json"
    except (OSError, ValueError):  # closed
        return "json"


def load_checked_catalog(config: Config) -> Catalog:
    catalog = load_catalog(builtin=config.builtin_catalog, user_paths=list(config.catalogs),
                           generated=config.sglang_version != "none",
                           sglang_version=catalog_version_setting(config.sglang_version))
    if catalog.issues:
        raise CatalogError(list(catalog.issues))
    return catalog


class Compilation:
    """The full catalog loaded and compiled in a thread, while the daemon reads with the layers
    that were ready (curated and user): `reason` is what `/readyz` says meanwhile, `estimate`
    the seconds left. `result` (catalog, engine) or `error` once `finished`; `wake` is called
    then, and as the compile moves on."""

    def __init__(self, config: Config, why: str, wake: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.why = why  # why it compiles: the precompiled catalog's note
        self._wake = wake
        self._clock = clock
        self.started = clock()
        self.stage = "loading catalog"
        self.done = 0
        self.total = 0
        self._compile_started: float | None = None
        self.result: tuple[Catalog, Engine] | None = None
        self.error: BaseException | None = None
        self.finished = False
        self._thread = threading.Thread(target=self._run, name="catalog-compile", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            catalog = load_checked_catalog(self.config)
            self.stage = "compiling catalog"
            engine = Engine(catalog.records, progress=self._progress)
            self.result = (catalog, engine)
        except BaseException as e:  # noqa: BLE001 - the daemon says so and reads on as it is
            self.error = e
        finally:
            self.finished = True
            self._wake()

    def _progress(self, done: int, total: int) -> None:
        if self._compile_started is None:
            self._compile_started = self._clock()
        self.done, self.total = done, total

    @property
    def reason(self) -> str:
        if self.stage == "loading catalog" or not self.total:
            return "loading catalog"
        if self.done >= self.total:
            return f"compiling catalog: {self.total} of {self.total}, building databases"
        return f"compiling catalog: {self.done} of {self.total}"

    def estimate(self) -> float | None:
        """Seconds left, from the patterns' pace so far: their databases take about as long
        again as the patterns themselves (measured with the full catalog)."""
        if self._compile_started is None or self.done <= 0 or not self.total:
            return None
        spent = self._clock() - self._compile_started
        per = spent / min(self.done, self.total)
        total = per * self.total * (1 + _DATABASE_SHARE)
        return max(0.0, total - spent)


_DATABASE_SHARE = 1.8  # Hyperscan's databases after the patterns: 15 s after 8 s with the full catalog


def _needs_compiling(config: Config) -> str | None:
    """Why the full catalog must be compiled at this start (None: it is precompiled)."""
    from matcher.catalog import builtin_patterns_dir
    from matcher.precompiled import check

    if not config.builtin_catalog or config.sglang_version == "none":
        return None
    version = catalog_version_setting(config.sglang_version)
    if version != "all":
        return f"sglang_version {version}: the precompiled catalog holds every release"
    manifest, note = check(builtin_patterns_dir())
    return None if manifest is not None else f"the precompiled catalog is {note}"


def new_pipeline(config: Config, catalog: Catalog, redactor: Redactor,
                 engine: Engine | None = None) -> Pipeline:
    """The pipeline redacts before it cuts (a traceback, a message, a long line), with the
    same patterns as the sinks. `engine`: one made already (else one of `catalog`)."""
    return Pipeline(
        engine if engine is not None else Engine(catalog.records),
        catalog_version=catalog.version,
        labels=config.static_labels(),
        window=config.aggregate_window,
        max_line_bytes=config.max_line_bytes,
        flush_after=config.partial_line_flush,
        input_format=config.input_format,
        repeat_interval=config.repeat_interval,
        early=config.early_events,
        rank_grace=config.rank_grace,
        sglang_version=config.sglang_version,
        redactor=redactor,
    )


def build(
    config: Config,
    *,
    log: Logger,
    previous: Topology | None = None,
    stdout: TextIO | None = None,
    stdin: BinaryIO | None = None,
    hooks: Hooks | None = None,
    clock: Callable[[], float] | None = None,
    wall: Callable[[], float] | None = None,
) -> Topology:
    """Everything `config` describes, ready to run; `ConfigError`/`CatalogError` if not.

    `stdin`: read it as a source (`watch -`). `previous`: the running topology, at a reload —
    it is not changed unless the build succeeds up to the last step, which adopts what it kept
    (`retire` then closes what the new one no longer uses)."""
    clock = clock or time.monotonic
    wall = wall or time.time
    hooks = hooks or Hooks()
    undo: list[Callable[[], Any]] = []  # what this build opened, closed if a later step fails
    try:
        return _build(config, log=log, previous=previous, stdout=stdout or sys.stdout,
                      stdin=stdin, hooks=hooks, clock=clock, wall=wall, undo=undo)
    except BaseException:
        for close in reversed(undo):
            close()
        raise


def _build(config: Config, *, log: Logger, previous: Topology | None, stdout: TextIO,
           stdin: BinaryIO | None, hooks: Hooks, clock: Callable[[], float],
           wall: Callable[[], float], undo: list[Callable[[], Any]]) -> Topology:
    prev = previous
    # 1. What can be wrong and costs nothing to find out, checked before anything is opened.
    redactor = _redactor(config)
    address = _address(config)
    _check_webhook_url(config, redactor)
    otlp_url = _otlp_url(config, redactor)
    kept, not_reloaded = _reloadable_part(config, prev)

    # 2. The catalog: the slow part, and the one most often wrong after an edit.
    catalog, pipeline, compilation = _catalog_and_pipeline(kept, redactor, prev, hooks, clock)

    # 3. Counters: one registry for the process, so a reload keeps every count.
    registry, telemetry, metrics, nofile = _process_counters(kept, log, redactor, catalog, prev)

    # 4. Outputs that open something: each kept when its setting did not change.
    ring = _ring(config, prev)
    http = _http(config, address, registry, ring, log, telemetry, prev, undo)
    events_file = _events_file(config, redactor, telemetry, prev, undo)
    webhook = _webhook(config, redactor, telemetry, prev, undo)
    otlp = _otlp(config, otlp_url, redactor, telemetry, prev, undo)
    writer = EventWriter(stdout, redactor, output_format(config.log_format, stdout),
                         failed=telemetry.output_failed)

    # 5. Inputs, and where they were left.
    store, state = _checkpoints(kept, log, prev)
    max_open = kept.max_open_files or descriptor_budget(
        http.max_connections if http is not None else 0)
    journals = _journals(config, state, telemetry, prev, undo)
    stdin_source = prev.stdin if prev is not None else (
        StdinSource(stdin, config.read_chunk_bytes) if stdin is not None else None)

    # 6. Nothing below fails: adopt what was kept of `previous`.
    files = _file_source(kept, state, telemetry, max_open, prev, hooks, clock, wall)
    if prev is not None:
        metrics.reload(catalog, redactor=redactor)
        telemetry.use_redactor(redactor)
    writers = [w for w in (writer, events_file) if w is not None]
    files.files.own = own_identities(kept, lambda: [w.identity() for w in writers])
    return Topology(
        config=kept, catalog=catalog, redactor=redactor, pipeline=pipeline, registry=registry,
        telemetry=telemetry, metrics=metrics, ring=ring, http=http, webhook=webhook,
        events_file=events_file, stdout=writer, files=files, stdin=stdin_source,
        journals=journals, store=store, state=state, max_open_files=max_open, nofile=nofile,
        not_reloaded=not_reloaded, otlp=otlp, compilation=compilation)


def _catalog_and_pipeline(kept: Config, redactor: Redactor, prev: Topology | None,
                          hooks: Hooks, clock: Callable[[], float],
                          ) -> tuple[Catalog, Pipeline, Compilation | None]:
    """The catalog and the pipeline matching with it. When `watch` starts and the full catalog
    would have to be compiled, the layers that are ready, and the `Compilation` making the
    rest: the daemon reads meanwhile instead of waiting."""
    why = _needs_compiling(kept) if prev is None and hooks.compile_later else None
    if why is None:
        catalog = load_checked_catalog(kept)
        return catalog, new_pipeline(kept, catalog, redactor), None
    catalog = load_checked_catalog(dataclasses.replace(kept, sglang_version="none"))
    pipeline = new_pipeline(kept, catalog, redactor,
                            engine=Engine(catalog.records, messages_only=True))
    return catalog, pipeline, Compilation(kept, why, hooks.wake, clock)


def _process_counters(kept: Config, log: Logger, redactor: Redactor, catalog: Catalog,
                      prev: Topology | None,
                      ) -> tuple[CollectorRegistry, Telemetry, MetricsSink, tuple[int, int]]:
    """The registry, telemetry, metrics sink and descriptor limit of the process: the running
    ones at a reload (so every count carries on), else made, the limit raised first."""
    if prev is not None:
        return prev.registry, prev.telemetry, prev.metrics, prev.nofile
    # Before anything is opened: a systemd service starts with a soft limit of 1024.
    nofile = limits.raise_nofile_limit()
    registry, telemetry, metrics = _counters(log, kept.static_labels(), redactor, catalog)
    return registry, telemetry, metrics, nofile


def _checkpoints(kept: Config, log: Logger,
                 prev: Topology | None) -> tuple[CheckpointStore, CheckpointState]:
    """Where the inputs were left: the running store and state at a reload, else the store's
    file read, each problem with it logged."""
    if prev is not None:
        return prev.store, prev.state
    store = CheckpointStore(kept.state_dir, enabled=kept.checkpoints)
    state, problem = store.load()
    if problem:
        log.error("checkpoint_unreadable", detail=problem)
    for why in state.dropped[:20]:  # each such file is read as a new one, from its start
        log.error("checkpoint_entry_dropped", path=str(store.path), detail=why)
    if len(state.dropped) > 20:
        log.error("checkpoint_entry_dropped", path=str(store.path),
                  detail=f"and {len(state.dropped) - 20} more entries")
    return store, state


def _file_source(kept: Config, state: CheckpointState, telemetry: Telemetry, max_open: int,
                 prev: Topology | None, hooks: Hooks, clock: Callable[[], float],
                 wall: Callable[[], float]) -> FileSource:
    """The files followed: the running source reconfigured at a reload (its read positions
    carry over), else a new one starting from `state`."""
    if prev is not None:
        prev.files.reconfigure(kept, telemetry, max_open)
        return prev.files
    return FileSource(kept, state, telemetry, max_open_files=max_open, clock=clock,
                      wall=wall, wake=hooks.wake, should_stop=hooks.should_stop)


def retire(old: Topology, new: Topology) -> None:
    """After a reload: close what `old` had and `new` does not use."""
    if old.http is not None and old.http is not new.http:
        old.http.stop()
    if old.webhook is not None and old.webhook is not new.webhook:
        old.webhook.close()
    if old.otlp is not None and old.otlp is not new.otlp:
        old.otlp.close()
    if old.events_file is not None and old.events_file is not new.events_file:
        old.events_file.close()
    kept = {id(j) for j in new.journals}
    for journal in old.journals:
        if id(journal) not in kept:
            journal.close()
    old.stdout.flush()


def _reloadable_part(config: Config, prev: Topology | None) -> tuple[Config, list[str]]:
    """`config` with the running value of each setting a reload cannot apply, and the names
    of those that changed (each is logged as `setting_not_reloaded`)."""
    if prev is None:
        return config, []
    changed = [n for n in NOT_RELOADABLE if getattr(prev.config, n) != getattr(config, n)]
    if not changed:
        return config, []
    # Run on with the values the series were made with.
    return dataclasses.replace(config, **{n: getattr(prev.config, n) for n in changed}), changed


def _counters(log: Logger, labels: dict[str, str], redactor: Redactor,
              catalog: Catalog) -> tuple[CollectorRegistry, Telemetry, MetricsSink]:
    """The process's one registry, with the daemon's own counters and the catalog's."""
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    # process_* (CPU, memory, descriptors, start time) on our registry, as client_python
    # puts them on its default one: a sidecar's own cost is alertable.
    prometheus_client.ProcessCollector(registry=registry)
    try:
        telemetry = Telemetry(registry, log, labels, redactor=redactor)
        metrics = MetricsSink(registry, catalog=catalog, static_labels=labels,
                              build_version=__version__, catalog_version=catalog.version,
                              redactor=redactor)
    except ValueError as e:
        raise ConfigError(f"setting 'labels': {e}",
                          "label names are letters, digits and _; not one the matcher's "
                          "own series use") from e
    return registry, telemetry, metrics


# -- one function per setting that can be wrong -----------------------------------------------

def _redactor(config: Config) -> Redactor:
    for pattern in config.redact_patterns:
        try:
            regex.compile(pattern)
        except regex.error as e:
            raise ConfigError(f"setting 'redact_patterns': {pattern!r} is not a valid regular "
                              f"expression: {e}",
                              "fix the pattern; a named group (?P<secret>…) says which part "
                              "to mask") from e
    return Redactor(config.redact_patterns)


def _address(config: Config) -> tuple[str, int] | None:
    """The metrics address, checked by `load_config` (`Config.metrics_addr`'s check)."""
    return parse_address(config.metrics_addr) if config.metrics_addr else None


def _check_webhook_url(config: Config, redactor: Redactor) -> None:
    if not config.webhook_url:
        return
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(config.webhook_url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as e:
        raise ConfigError(f"setting 'webhook_url': {redactor.text(config.webhook_url)!r} is "
                          f"not a URL: {e}", "use http(s)://HOST[:PORT]/PATH") from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"setting 'webhook_url': {redactor.text(config.webhook_url)!r} is "
                          "not an http:// or https:// URL with a host",
                          "use http(s)://HOST[:PORT]/PATH")


def _otlp_url(config: Config, redactor: Redactor) -> str | None:
    """The OTLP logs URL: the setting, else the OpenTelemetry environment variables."""
    url, origin = resolve_endpoint(config.otlp_endpoint)
    if url is None:
        return None
    problem = check_url(url, redactor)
    if problem:
        raise ConfigError(f"{origin}: {problem}",
                          "use the collector's logs URL: http(s)://HOST[:PORT]/v1/logs")
    return url


def _otlp(config: Config, url: str | None, redactor: Redactor, telemetry: Telemetry,
          prev: Topology | None, undo: list[Callable[[], Any]]) -> OtlpLogSink | None:
    if url is None:
        return None
    try:
        headers = {**env_headers(), **config.otlp_headers}
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"OTLP headers: {e}",
                          "write them NAME=VALUE[,NAME=VALUE…], values percent-encoded") from e
    resource, problem = resource_attributes()
    if problem:
        telemetry.notice(OTLP_RESOURCE_ATTRIBUTES_IGNORED, detail=problem,
                         hint="OTEL_RESOURCE_ATTRIBUTES is key=value[,key=value…], values "
                              "percent-encoded")
    if prev is not None and prev.otlp is not None and prev.otlp.url == url \
            and prev.otlp.headers == headers and prev.otlp.resource == resource:
        return prev.otlp
    # The exporter, and the protobuf messages it encodes with (2 MB, 10 ms), only when exporting.
    from matcher.sinks.otlp import OtlpLogSink

    try:
        sink = OtlpLogSink(url, redactor=redactor, telemetry=telemetry.delivery("otlp"),
                           headers=headers, resource=resource)
    except ValueError as e:
        raise ConfigError(f"setting 'otlp_endpoint': {e}",
                          "use the collector's logs URL: http(s)://HOST[:PORT]/v1/logs") from e
    undo.append(sink.close)
    return sink


def _ring(config: Config, prev: Topology | None) -> EventRing:
    if prev is None:
        return EventRing(config.events_buffer)
    if prev.ring.maxlen == config.events_buffer:
        return prev.ring
    return prev.ring.resized(config.events_buffer)


def _http(config: Config, address: tuple[str, int] | None, registry: CollectorRegistry,
          ring: EventRing, log: Logger, telemetry: Telemetry, prev: Topology | None,
          undo: list[Callable[[], Any]]) -> HttpServer | None:
    if address is None:
        return None
    if prev is not None and prev.http is not None \
            and prev.config.metrics_addr == config.metrics_addr:
        prev.http.events = ring  # a resized ring is served from the next request on
        prev.http.events_access = config.events_access
        return prev.http
    host, port = address
    server = HttpServer(host, port, registry=registry, events=ring, log=log,
                        events_access=config.events_access, refused=telemetry.events_refused)
    try:
        server.start()
    except OSError as e:
        reason = e.strerror or str(e)
        hint = ("another process has this port: stop it or choose another port"
                if getattr(e, "errno", None) == 98 else
                "use an address of this host (0.0.0.0 or :PORT for every interface)")
        raise ConfigError(f"setting 'metrics_addr': cannot listen on "
                          f"{config.metrics_addr}: {reason}", hint) from e
    undo.append(server.stop)
    return server


def _events_file(config: Config, redactor: Redactor, telemetry: Telemetry,
                 prev: Topology | None, undo: list[Callable[[], Any]]) -> EventWriter | None:
    if config.events_file is None:
        return None
    if prev is not None and prev.events_file is not None \
            and prev.config.events_file == config.events_file \
            and prev.events_file.is_at(config.events_file):  # (else rotated: open the new)
        return prev.events_file
    try:
        stream: TextIO = open(config.events_file, "a", encoding="utf-8")  # noqa: SIM115
    except OSError as e:
        raise ConfigError(f"setting 'events_file': cannot open {config.events_file} for "
                          f"appending: {e.strerror}",
                          "create its directory, or give a path the matcher may write") from e
    writer = EventWriter(stream, redactor, "json", name="events_file", owns_stream=True,
                         failed=telemetry.output_failed, path=config.events_file)
    undo.append(writer.close)
    return writer


def _webhook(config: Config, redactor: Redactor, telemetry: Telemetry, prev: Topology | None,
             undo: list[Callable[[], Any]]) -> WebhookSink | None:
    if not config.webhook_url:
        return None
    if prev is not None and prev.webhook is not None \
            and prev.config.webhook_url == config.webhook_url:
        return prev.webhook  # it sends the dicts the daemon redacted: new patterns reach it
    try:
        sink = WebhookSink(config.webhook_url, redactor=redactor,
                           telemetry=telemetry.delivery("webhook"))
    except ValueError as e:
        raise ConfigError(f"setting 'webhook_url': {e}", "use http(s)://HOST[:PORT]/PATH") from e
    undo.append(sink.close)
    return sink


def _journals(config: Config, state: CheckpointState, telemetry: Telemetry,
              prev: Topology | None, undo: list[Callable[[], Any]]) -> list[JournalUnit]:
    running = {}
    if prev is not None and prev.config.journal_directory == config.journal_directory:
        running = {j.name: j for j in prev.journals}
    out: list[JournalUnit] = []
    for unit in config.journal_units:
        name = f"journal:{unit}"
        if name in running:
            running[name].telemetry = telemetry
            out.append(running[name])
            continue
        try:
            journal = JournalSource(
                [unit], name=name, directory=config.journal_directory,
                after_cursor=state.journal.get(name),
                from_beginning=config.journal_from_beginning or config.from_beginning)
        except ValueError as e:
            raise ConfigError(f"setting 'journal_units': {unit!r}: {e}",
                              "name a systemd unit, e.g. sglang.service") from e
        out.append(JournalUnit(journal, telemetry))
        undo.append(out[-1].close)
    return out
