"""The pipeline's reports about itself: each one is logged and counted here, and nowhere else.

A file rotated, a line cut at the length cap, a reload that failed, a webhook that is down: the
caller says what happened once, and this module writes the log entry (a typed `Notice` of
`selflog`, through its rate-limit and redaction processors) and moves the matching
`sglang_matcher_*` series. Keeping both in one place means a log line an operator sees always has
a counter they can alert on.

Callers depend on the narrow protocol next to them, not on this class: the file and journal
sources on `source.events.FileEvents`/`SourceEvents`, the HTTP sinks on
`sinks.delivery.DeliveryEvents` (one `DeliveryTelemetry` per sink, from `delivery(prefix)`).

Label values are bounded: `source` is the short name the caller gives (a configured name or a
display name, never a raw path), and only the first `max_sources` distinct names get a series of
their own, later ones count as `other`; `stage` and `error_type` come from fixed sets, anything
else counts as `other`. What is lost: only log lines — notices that could flood the log (webhook
drops and failures) are logged at most once per `quiet_for` seconds with the number held back,
while their counters always count every one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from matcher import selflog
from matcher.http import RefusedReason
from matcher.redact import Redactor
from matcher.selflog import Logger, Notice, OwnLog
from matcher.sinks.delivery import FAIL_REASONS, FailReason
from matcher.sinks.metrics import OTHER, BoundedValues, check_static_labels

__all__ = ["DeliveryTelemetry", "Logger", "Telemetry"]

MAX_SOURCES = 64
# Event latency: a plain line is out in milliseconds, a traceback after its end (a grace or the
# next line), a failure waiting on its ranks after rank_grace, a lone last line after seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

STAGES = ("discover", "read", "decode", "frame", "match", "aggregate", "sink", "checkpoint",
          "reload", "webhook", "http")
ERROR_TYPES = (
    "OSError", "PermissionError", "FileNotFoundError", "IsADirectoryError", "UnicodeDecodeError",
    "ValueError", "TypeError", "KeyError", "RuntimeError", "TimeoutError", "MemoryError",
    "ConnectionError", "URLError", "HTTPError", "JSONDecodeError", "CheckpointError",
    "CatalogError", "ConfigError", "RegexTimeout",
)
ReloadResult = Literal["ok", "failed"]


class _Series:
    """Declares families on one registry, each with the static label names after its own."""

    def __init__(self, registry: CollectorRegistry, static: Mapping[str, str]) -> None:
        self.registry = registry
        self.static = dict(static)
        self.names = tuple(static)

    def counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
        return Counter(name, doc, (*labels, *self.names), registry=self.registry)

    def gauge(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, (*labels, *self.names), registry=self.registry)

    def child(self, metric: Any, **labels: str) -> Any:
        """The child for these labels plus the static ones (the metric itself if it has none)."""
        labels.update(self.static)
        return metric.labels(**labels) if labels else metric


# -- an HTTP sink's series ----------------------------------------------------------------------

@dataclass(frozen=True)
class DeliverySeries:
    """The names and help of one HTTP sink's families; `unit` names its items in log lines."""

    prefix: str
    unit: str
    accepted: tuple[str, str]
    retries: str
    failed: str
    dropped: str
    queue: tuple[str, str]


DELIVERY_SERIES = {
    "webhook": DeliverySeries(
        "webhook", "events",
        accepted=("delivered", "Events the webhook endpoint accepted (2xx)."),
        retries="Webhook POSTs retried after a connection error, timeout, 429 or 5xx.",
        failed="Events given up: rejected (4xx), retries exhausted, or still unsent at shutdown.",
        dropped="Events dropped, oldest first, because the webhook queue was full.",
        queue=("queue_events", "Events waiting to be POSTed.")),
    "otlp": DeliverySeries(
        "otlp", "records",
        accepted=("sent", "Log records the OTLP endpoint accepted."),
        retries="OTLP exports retried after a connection error, timeout, 429, 502, 503 or 504.",
        failed="Log records given up: rejected (other answers, or rejected in a partial "
               "success), retries exhausted, or still unsent at shutdown.",
        dropped="Log records dropped, oldest first, because the OTLP queue was full.",
        queue=("queue_records", "Log records waiting to be exported.")),
}


class DeliveryTelemetry:
    """`DeliveryEvents` of one HTTP sink: `sglang_matcher_<prefix>_*`, created at 0 when the
    sink is configured (a process without that sink does not export them)."""

    def __init__(self, spec: DeliverySeries, series: _Series, log: OwnLog,
                 pipeline_error: Callable[..., None]) -> None:
        self._log = log
        self._pipeline_error = pipeline_error
        self._unit = spec.unit
        self._endpoint_notices = selflog.delivery_notices(spec.prefix)
        base = f"sglang_matcher_{spec.prefix}"
        self._accepted = series.child(series.counter(f"{base}_{spec.accepted[0]}_total",
                                                     spec.accepted[1]))
        self._retries = series.child(series.counter(f"{base}_retries_total", spec.retries))
        failed = series.counter(f"{base}_failed_total", spec.failed, ("reason",))
        self._failed = {reason: series.child(failed, reason=reason) for reason in FAIL_REASONS}
        self._dropped = series.child(series.counter(f"{base}_dropped_total", spec.dropped))
        self._queued = series.child(series.gauge(f"{base}_{spec.queue[0]}", spec.queue[1]))

    def delivered(self, n: int) -> None:
        if n > 0:
            self._accepted.inc(n)

    def retry(self, **fields: Any) -> None:
        self._retries.inc()
        fields[self._unit] = fields.pop("items", 1)
        self._log.log(self._endpoint_notices[0], **fields)

    def failed(self, reason: FailReason, n: int, **fields: Any) -> None:
        if reason not in self._failed:
            raise ValueError(f"failure reason must be one of {FAIL_REASONS}")
        if n <= 0:
            return
        self._failed[reason].inc(n)
        self._log.log(self._endpoint_notices[1], reason=reason, **{self._unit: n}, **fields)

    def dropped(self, n: int) -> None:
        self._dropped.inc(n)
        self._log.log(self._endpoint_notices[2], **{self._unit: n})

    def queue(self, depth: int) -> None:
        self._queued.set(depth)

    def error(self, error: BaseException, **fields: Any) -> None:
        self._pipeline_error("sink", error, **fields)


# -- everything else ----------------------------------------------------------------------------

class Telemetry:
    """Logs and counts the pipeline's own events on an injected registry and logger.

    `static_labels` (from config) are added to every series; `redactor`, when given, cleans every
    logged field; `clock` (monotonic seconds) paces the notices that are logged at most once per
    `quiet_for` seconds.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        logger: Logger,
        static_labels: Mapping[str, str] | None = None,
        *,
        redactor: Redactor | None = None,
        max_sources: int = MAX_SOURCES,
        stages: Iterable[str] = STAGES,
        error_types: Iterable[str] = ERROR_TYPES,
        quiet_for: float = 10.0,
        checkpoint_log_every: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._wall = wall
        static = check_static_labels(
            static_labels or {}, ("source", "result", "stage", "error_type", "reason", "sink"))
        self._s = _Series(registry, static)
        self._static = self._s.static
        self._log = OwnLog(logger, redactor, quiet_for=quiet_for, clock=clock)
        self._sources = BoundedValues(max_sources, pinned=(OTHER,))
        self._stages = frozenset(stages)
        self._error_types = frozenset(error_types)
        self._checkpoint_log_every = checkpoint_log_every
        # Checkpoint write failures: when one was last logged, and how many since (a read-only
        # state dir fails every turn — once a second — and must not log every time).
        self._checkpoint_logged: float | None = None
        self._checkpoint_unlogged = 0
        self._clock = clock
        self._lock = threading.Lock()
        self._deliveries: dict[str, DeliveryTelemetry] = {}
        self._declare_reading()
        self._declare_state()

    def _declare_reading(self) -> None:
        s = self._s
        self._lines = s.counter("sglang_matcher_lines_total", "Log lines read, by source.",
                                ("source",))
        self._bytes = s.counter("sglang_matcher_bytes_total", "Log bytes read, by source.",
                                ("source",))
        self._lag = s.gauge("sglang_matcher_read_lag_bytes",
                            "Bytes written to a source and not yet read (file size minus offset).",
                            ("source",))
        self._rotations = s.counter("sglang_matcher_rotations_total",
                                    "Files that were rotated away (renamed or replaced), by source.",
                                    ("source",))
        self._truncations = s.counter("sglang_matcher_truncations_total",
                                      "Files truncated in place (copytruncate), by source.",
                                      ("source",))
        self._lines_truncated = s.counter("sglang_matcher_lines_truncated_total",
                                          "Lines longer than the line cap, cut, by source.",
                                          ("source",))
        self._malformed = s.counter(
            "sglang_matcher_malformed_input_total",
            "Input read despite being malformed, by source and reason (invalid_utf8 sequences "
            "replaced, nul_byte bytes kept, container_format lines read as plain text).",
            ("source", "reason"))
        self._followed = s.gauge(
            "sglang_matcher_files_followed",
            "Files each configured path or glob follows now (0: it matches nothing — alert on "
            "it), by source.", ("source",))
        # These two get their series at their first report, not at 0 from the start.
        self._parked = s.gauge(
            "sglang_matcher_files_parked",
            "New files not read yet because they may be a copytruncate copy of a followed file "
            "(read as new files unless the original shrinks within rotate_wait).")
        self._slept = s.counter(
            "sglang_matcher_files_closed_idle_total",
            "Idle files whose descriptor was closed to stay under max_open_files (each is "
            "reopened by identity when it grows).")

    def _declare_state(self) -> None:
        s = self._s
        self._checkpoint_writes = s.child(s.counter("sglang_matcher_checkpoint_writes_total",
                                                    "Checkpoints of read positions written."))
        self._checkpoint_failures = s.child(s.counter(
            "sglang_matcher_checkpoint_failures_total",
            "Checkpoints of read positions that could not be written."))
        self._reloads = s.counter("sglang_matcher_reloads_total",
                                  "Config and catalog reloads (SIGHUP), by result.", ("result",))
        self._suppressed = s.child(s.counter(
            "sglang_matcher_events_suppressed_total",
            "Repeated events not printed because of the repeat rate limit."))
        self._output_dropped = s.counter(
            "sglang_matcher_events_output_dropped_total",
            "Events an output (stdout, the events file) could not write — a full disk, an I/O "
            "error — and dropped there, by output.", ("sink",))
        self._events_refused = s.counter(
            "sglang_matcher_events_requests_refused_total",
            "/events requests refused, by reason: forbidden (403, a client events_access does "
            "not allow) or busy (503, the bytes of /events answers being written at their cap).",
            ("reason",))
        self._errors = s.counter("sglang_matcher_errors_total",
                                 "Errors inside the matcher itself, by pipeline stage and type.",
                                 ("stage", "error_type"))
        # Timestamps, not counters, so that an alert reads `time() - x > limit` (deploy/prometheus).
        self._heartbeat = s.child(s.gauge(
            "sglang_matcher_heartbeat_timestamp_seconds",
            "Unix time of the main loop's last turn; stops moving when the loop hangs (the HTTP "
            "thread still answers scrapes then)."))
        self._checkpoint_last = s.child(s.gauge(
            "sglang_matcher_last_checkpoint_success_timestamp_seconds",
            "Unix time read positions were last saved, or found unchanged, without error."))
        self._latency = s.child(Histogram(
            "sglang_matcher_event_latency_seconds",
            "From reading the line an event starts at to emitting the event: a traceback waits "
            "for its end, ranks for each other (rank_grace), a window for its repeats.",
            s.names, registry=s.registry, buckets=LATENCY_BUCKETS))
        self._heartbeat.set(self._wall())
        # Start counts as the last success: nothing has failed yet, and the first save may wait
        # (the full catalog compiling holds positions back) — the alert on "no success for 5
        # minutes" must not read a 0 and fire at once.
        self._checkpoint_last.set(self._wall())
        for result in ("ok", "failed"):
            self._reloads.labels(result=result, **self._static)
        for reason in get_args(RefusedReason):
            self._events_refused.labels(reason=reason, **self._static)

    def use_redactor(self, redactor: Redactor) -> None:
        """A reload's redaction patterns apply to every field logged from now on."""
        self._log.redact.redactor = redactor

    def delivery(self, prefix: str) -> DeliveryTelemetry:
        """The series of the HTTP sink `prefix` (`webhook`, `otlp`), created on first use."""
        with self._lock:
            made = self._deliveries.get(prefix)
            if made is None:
                made = DeliveryTelemetry(DELIVERY_SERIES[prefix], self._s, self._log,
                                         self.pipeline_error)
                self._deliveries[prefix] = made
            return made

    # -- reading --------------------------------------------------------------------------

    def lines(self, source: str, n: int, nbytes: int) -> None:
        """Lines and bytes read; called per chunk, so it counts and never logs."""
        s = self._sources(source)
        self._lines.labels(source=s, **self._static).inc(n)
        self._bytes.labels(source=s, **self._static).inc(nbytes)

    def read_lag(self, source: str, lag_bytes: int) -> None:
        self._lag.labels(source=self._sources(source), **self._static).set(max(0, lag_bytes))

    def event_latency(self, seconds: float) -> None:
        self._latency.observe(max(0.0, seconds))

    def files_followed(self, source: str, n: int) -> None:
        """Set each poll, per configured glob (a glob is a bounded label: it is config)."""
        self._followed.labels(source=self._sources(source), **self._static).set(n)

    def files_parked(self, n: int) -> None:
        self._s.child(self._parked).set(n)

    def files_slept(self, n: int, **fields: Any) -> None:
        """Descriptors of idle files closed for the budget: counted, logged at most every
        `quiet_for` seconds (a host with more files than descriptors does this all day)."""
        self._s.child(self._slept).inc(n)
        self._log.log(selflog.FILES_CLOSED_IDLE, closed=n, **fields)

    def rotated(self, source: str, **fields: Any) -> None:
        self._rotations.labels(source=self._sources(source), **self._static).inc()
        self._log.log(selflog.FILE_ROTATED, source=source, **fields)

    def truncated(self, source: str, **fields: Any) -> None:
        self._truncations.labels(source=self._sources(source), **self._static).inc()
        self._log.log(selflog.FILE_TRUNCATED, source=source, **fields)

    def lines_truncated(self, source: str, n: int = 1, **fields: Any) -> None:
        self._lines_truncated.labels(source=self._sources(source), **self._static).inc(n)
        self._log.log(selflog.LINE_TRUNCATED, source=source, lines=n, **fields)

    def malformed_input(self, source: str, path: str = "", **counts: int) -> None:
        """Input that was read anyway: invalid UTF-8 (replaced), NUL bytes (kept), container
        lines not in their format (read as text). Counted by reason; logged at most every
        `quiet_for` seconds, so a binary file cannot flood the log."""
        s = self._sources(source)
        seen = {reason: n for reason, n in counts.items() if n > 0}
        for reason, n in seen.items():
            self._malformed.labels(source=s, reason=reason, **self._static).inc(n)
        if seen:
            self._log.log(selflog.MALFORMED_INPUT, source=source, path=path, **seen)

    # -- state and lifecycle --------------------------------------------------------------

    def checkpoint_written(self) -> None:
        self._checkpoint_writes.inc()
        self._checkpoint_last.set(self._wall())
        with self._lock:
            unlogged, self._checkpoint_unlogged = self._checkpoint_unlogged, 0
            self._checkpoint_logged = None
        if unlogged:  # failures held back since the last log line: say they ended, and how many
            self._log.log(selflog.CHECKPOINT_RECOVERED, failures=unlogged)

    def heartbeat(self) -> None:
        """The main loop went round once; called every turn, so it only sets a gauge."""
        self._heartbeat.set(self._wall())

    def checkpoint_failed(self, reason: str, **fields: Any) -> None:
        """A checkpoint write failed. Counted every time; logged the first time, then at most once
        per `checkpoint_log_every` seconds (and always for the final save at shutdown), with
        `failures`: how many failed since the previous log line, this one included."""
        self._checkpoint_failures.inc()
        now = self._clock()
        with self._lock:
            self._checkpoint_unlogged += 1
            last = self._checkpoint_logged
            if last is not None and now - last < self._checkpoint_log_every \
                    and not fields.get("final"):
                return
            self._checkpoint_logged = now
            failures, self._checkpoint_unlogged = self._checkpoint_unlogged, 0
        self._log.log(selflog.CHECKPOINT_FAILED,
                      **{"detail": reason, "failures": failures, **fields})  # fields win

    def reload(self, result: ReloadResult, **fields: Any) -> None:
        if result not in ("ok", "failed"):
            raise ValueError(f"reload result must be 'ok' or 'failed', not {result!r}")
        self._reloads.labels(result=result, **self._static).inc()
        self._log.log(selflog.RELOADED if result == "ok" else selflog.RELOAD_FAILED, **fields)

    def events_refused(self, reason: RefusedReason) -> None:
        """An /events request answered 403 or 503 (`HttpServer`): counted, not logged (a
        client polling a forbidden endpoint would flood the log)."""
        self._events_refused.labels(reason=reason, **self._static).inc()

    def events_suppressed(self, n: int) -> None:
        if n > 0:
            self._suppressed.inc(n)

    def pipeline_error(self, stage: str, error_type: str | BaseException, **fields: Any) -> None:
        """An error inside the matcher. `error_type` is a class name or the exception itself."""
        name = error_type if isinstance(error_type, str) else type(error_type).__name__
        if isinstance(error_type, BaseException) and "detail" not in fields:
            fields["detail"] = str(error_type)
        self._errors.labels(stage=stage if stage in self._stages else OTHER,
                            error_type=name if name in self._error_types else OTHER,
                            **self._static).inc()
        self._log.log(selflog.PIPELINE_ERROR, stage=stage, error_type=name, **fields)

    def regex_timeouts(self, n: int, quarantined: Iterable[str] = ()) -> None:
        """Pattern searches cut by the regex timeout; each newly quarantined pattern logged once.

        A catastrophic pattern costs at most `timeout` per line it is tried on, and only until it
        is quarantined: the counter says it happened, the log says which pattern to fix."""
        if n > 0:
            self._errors.labels(stage="match", error_type="RegexTimeout", **self._static).inc(n)
            self._log.log(selflog.REGEX_TIMEOUT, count=n)
        for pattern_id in quarantined:
            self._log.log(selflog.PATTERN_QUARANTINED, pattern_id=pattern_id,
                          detail="timed out repeatedly; not tried again until the next reload")

    def output_failed(self, sink: str, error: OSError, events: int) -> None:
        """Events an output could not write (`EventWriter`): dropped there and counted; said
        at most every `quiet_for` s. The daemon goes on: the other outputs, the metrics and
        later writes (once there is room again) do not wait for that one."""
        self._output_dropped.labels(sink=sink, **self._static).inc(events)
        self._log.log(selflog.EVENTS_OUTPUT_FAILED, sink=sink, events=events,
                      detail=f"cannot write: {error.strerror or error}; these events are "
                             "dropped there (the other outputs have them), and it is "
                             "tried again with the next ones")

    def notice(self, notice: Notice, **fields: Any) -> None:
        """Something worth a log line and no counter, as one of `selflog`'s notices."""
        self._log.log(notice, **fields)
