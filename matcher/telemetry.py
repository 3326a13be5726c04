"""The pipeline's reports about itself: each one is logged and counted here, and nowhere else.

A file rotated, a line cut at the length cap, a reload that failed, a webhook that is down: the
caller says what happened once, and this module writes the log entry (structlog, snake_case
event names, every field redacted) and moves the matching `sglang_matcher_*` series. Keeping
both in one place means a log line an operator sees always has a counter they can alert on.

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
from typing import Any, Literal, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from matcher.redact import Redactor
from matcher.sinks.metrics import OTHER, BoundedValues, check_static_labels

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
WEBHOOK_FAILURES = ("rejected", "retries_exhausted", "shutdown")
OTLP_FAILURES = WEBHOOK_FAILURES  # refused (4xx, partial success), out of retries, at shutdown
ReloadResult = Literal["ok", "failed"]


class Logger(Protocol):
    """The part of a structlog bound logger this module uses."""

    def info(self, event: str, **kw: Any) -> Any: ...
    def warning(self, event: str, **kw: Any) -> Any: ...
    def error(self, event: str, **kw: Any) -> Any: ...


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
        self._static = check_static_labels(
            static_labels or {}, ("source", "result", "stage", "error_type", "reason", "sink"))
        self._names = names = tuple(self._static)
        self._registry = registry
        self._log = logger
        self._redactor = redactor
        self._sources = BoundedValues(max_sources, pinned=(OTHER,))
        self._stages = frozenset(stages)
        self._error_types = frozenset(error_types)
        self._quiet_for = quiet_for
        self._checkpoint_log_every = checkpoint_log_every
        # Checkpoint write failures: when one was last logged, and how many since (a read-only
        # state dir fails every turn — once a second — and must not log every time).
        self._checkpoint_logged: float | None = None
        self._checkpoint_unlogged = 0
        self._clock = clock
        self._held: dict[str, tuple[float, int]] = {}  # notice kind -> (last logged, held back)
        self._lock = threading.Lock()

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, (*labels, *names), registry=registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, (*labels, *names), registry=registry)

        self._lines = counter("sglang_matcher_lines_total", "Log lines read, by source.",
                              ("source",))
        self._bytes = counter("sglang_matcher_bytes_total", "Log bytes read, by source.",
                              ("source",))
        self._lag = gauge("sglang_matcher_read_lag_bytes",
                          "Bytes written to a source and not yet read (file size minus offset).",
                          ("source",))
        self._rotations = counter("sglang_matcher_rotations_total",
                                  "Files that were rotated away (renamed or replaced), by source.",
                                  ("source",))
        self._truncations = counter("sglang_matcher_truncations_total",
                                    "Files truncated in place (copytruncate), by source.",
                                    ("source",))
        self._lines_truncated = counter("sglang_matcher_lines_truncated_total",
                                        "Lines longer than the line cap, cut, by source.",
                                        ("source",))
        self._malformed = counter(
            "sglang_matcher_malformed_input_total",
            "Input read despite being malformed, by source and reason (invalid_utf8 sequences "
            "replaced, nul_byte bytes kept, container_format lines read as plain text).",
            ("source", "reason"))
        self._checkpoint_writes = counter("sglang_matcher_checkpoint_writes_total",
                                          "Checkpoints of read positions written.")
        self._checkpoint_failures = counter(
            "sglang_matcher_checkpoint_failures_total",
            "Checkpoints of read positions that could not be written.")
        self._reloads = counter("sglang_matcher_reloads_total",
                                "Config and catalog reloads (SIGHUP), by result.", ("result",))
        self._suppressed = counter("sglang_matcher_events_suppressed_total",
                                   "Repeated events not printed because of the repeat rate limit.")
        self._output_dropped = counter(
            "sglang_matcher_events_output_dropped_total",
            "Events an output (stdout, the events file) could not write — a full disk, an I/O "
            "error — and dropped there, by output.", ("sink",))
        self._errors = counter("sglang_matcher_errors_total",
                               "Errors inside the matcher itself, by pipeline stage and type.",
                               ("stage", "error_type"))
        # Timestamps, not counters, so that an alert reads `time() - x > limit` (deploy/prometheus).
        self._heartbeat = gauge(
            "sglang_matcher_heartbeat_timestamp_seconds",
            "Unix time of the main loop's last turn; stops moving when the loop hangs (the HTTP "
            "thread still answers scrapes then).")
        self._checkpoint_last = gauge(
            "sglang_matcher_last_checkpoint_success_timestamp_seconds",
            "Unix time read positions were last saved, or found unchanged, without error.")
        self._followed = gauge(
            "sglang_matcher_files_followed",
            "Files each configured path or glob follows now (0: it matches nothing — alert on "
            "it), by source.", ("source",))
        self._parked = gauge(
            "sglang_matcher_files_parked",
            "New files not read yet because they may be a copytruncate copy of a followed file "
            "(read as new files unless the original shrinks within rotate_wait).")
        self._slept = counter(
            "sglang_matcher_files_closed_idle_total",
            "Idle files whose descriptor was closed to stay under max_open_files (each is "
            "reopened by identity when it grows).")
        self._latency = Histogram(
            "sglang_matcher_event_latency_seconds",
            "From reading the line an event starts at to emitting the event: a traceback waits "
            "for its end, ranks for each other (rank_grace), a window for its repeats.",
            names, registry=registry, buckets=LATENCY_BUCKETS)
        self._latency_child = self._series(self._latency)
        self._webhook: dict[str, Any] | None = None
        self._otlp: dict[str, Any] | None = None
        self._checkpoint_writes_child = self._series(self._checkpoint_writes)
        self._heartbeat_child = self._series(self._heartbeat)
        self._heartbeat_child.set(wall())
        # Start counts as the last success: nothing has failed yet, and the first save may wait
        # (the full catalog compiling holds positions back) — the alert on "no success for 5
        # minutes" must not read a 0 and fire at once.
        self._series(self._checkpoint_last).set(wall())
        self._series(self._checkpoint_failures)
        self._suppressed_child = self._series(self._suppressed)
        for result in ("ok", "failed"):
            self._reloads.labels(result=result, **self._static)

    def use_redactor(self, redactor: Redactor) -> None:
        """A reload's redaction patterns apply to every field logged from now on."""
        self._redactor = redactor

    # -- reading --------------------------------------------------------------------------

    def lines(self, source: str, n: int, nbytes: int) -> None:
        """Lines and bytes read; called per chunk, so it counts and never logs."""
        s = self._source(source)
        self._lines.labels(source=s, **self._static).inc(n)
        self._bytes.labels(source=s, **self._static).inc(nbytes)

    def read_lag(self, source: str, lag_bytes: int) -> None:
        self._lag.labels(source=self._source(source), **self._static).set(max(0, lag_bytes))

    def source_closed(self, source: str) -> None:
        """A source that is gone has nothing left to read: its lag is 0, not its last value."""
        self._lag.labels(source=self._source(source), **self._static).set(0)

    def event_latency(self, seconds: float) -> None:
        self._latency_child.observe(max(0.0, seconds))

    def files_followed(self, source: str, n: int) -> None:
        """Set each poll, per configured glob (a glob is a bounded label: it is config)."""
        self._followed.labels(source=self._source(source), **self._static).set(n)

    def files_parked(self, n: int) -> None:
        self._series(self._parked).set(n)

    def files_slept(self, n: int, **fields: Any) -> None:
        """Descriptors of idle files closed for the budget: counted, logged at most every
        `quiet_for` seconds (a host with more files than descriptors does this all day)."""
        self._series(self._slept).inc(n)
        self._emit_quietly("warning", "files_closed_idle", closed=n, **fields)

    def rotated(self, source: str, **fields: Any) -> None:
        self._rotations.labels(source=self._source(source), **self._static).inc()
        self._emit("info", "file_rotated", source=source, **fields)

    def truncated(self, source: str, **fields: Any) -> None:
        self._truncations.labels(source=self._source(source), **self._static).inc()
        self._emit("warning", "file_truncated", source=source, **fields)

    def lines_truncated(self, source: str, n: int = 1, **fields: Any) -> None:
        self._lines_truncated.labels(source=self._source(source), **self._static).inc(n)
        self._emit("warning", "line_truncated", source=source, lines=n, **fields)

    def malformed_input(self, source: str, path: str = "", **counts: int) -> None:
        """Input that was read anyway: invalid UTF-8 (replaced), NUL bytes (kept), container
        lines not in their format (read as text). Counted by reason; logged at most every
        `quiet_for` seconds, so a binary file cannot flood the log."""
        s = self._source(source)
        seen = {reason: n for reason, n in counts.items() if n > 0}
        for reason, n in seen.items():
            self._malformed.labels(source=s, reason=reason, **self._static).inc(n)
        if seen:
            self._emit_quietly("warning", "malformed_input", source=source, path=path, **seen)

    # -- state and lifecycle --------------------------------------------------------------

    def checkpoint_written(self) -> None:
        self._checkpoint_writes_child.inc()
        self._series(self._checkpoint_last).set(self._wall())
        with self._lock:
            unlogged, self._checkpoint_unlogged = self._checkpoint_unlogged, 0
            self._checkpoint_logged = None
        if unlogged:  # failures held back since the last log line: say they ended, and how many
            self._emit("warning", "checkpoint_recovered", failures=unlogged)

    def heartbeat(self) -> None:
        """The main loop went round once; called every turn, so it only sets a gauge."""
        self._heartbeat_child.set(self._wall())

    def checkpoint_failed(self, reason: str, **fields: Any) -> None:
        """A checkpoint write failed. Counted every time; logged the first time, then at most once
        per `checkpoint_log_every` seconds (and always for the final save at shutdown), with
        `failures`: how many failed since the previous log line, this one included."""
        self._series(self._checkpoint_failures).inc()
        now = self._clock()
        with self._lock:
            self._checkpoint_unlogged += 1
            last = self._checkpoint_logged
            if last is not None and now - last < self._checkpoint_log_every \
                    and not fields.get("final"):
                return
            self._checkpoint_logged = now
            failures, self._checkpoint_unlogged = self._checkpoint_unlogged, 0
        self._emit("error", "checkpoint_failed",
                   **{"detail": reason, "failures": failures, **fields})  # fields win

    def reload(self, result: ReloadResult, **fields: Any) -> None:
        if result not in ("ok", "failed"):
            raise ValueError(f"reload result must be 'ok' or 'failed', not {result!r}")
        self._reloads.labels(result=result, **self._static).inc()
        if result == "ok":
            self._emit("info", "reloaded", **fields)
        else:
            self._emit("error", "reload_failed", **fields)

    def events_suppressed(self, n: int) -> None:
        if n > 0:
            self._suppressed_child.inc(n)

    def pipeline_error(self, stage: str, error_type: str | BaseException, **fields: Any) -> None:
        """An error inside the matcher. `error_type` is a class name or the exception itself."""
        name = error_type if isinstance(error_type, str) else type(error_type).__name__
        if isinstance(error_type, BaseException) and "detail" not in fields:
            fields["detail"] = str(error_type)
        self._errors.labels(stage=stage if stage in self._stages else OTHER,
                            error_type=name if name in self._error_types else OTHER,
                            **self._static).inc()
        self._emit("error", "pipeline_error", stage=stage, error_type=name, **fields)

    def regex_timeouts(self, n: int, quarantined: Iterable[str] = ()) -> None:
        """Pattern searches cut by the regex timeout; each newly quarantined pattern logged once.

        A catastrophic pattern costs at most `timeout` per line it is tried on, and only until it
        is quarantined: the counter says it happened, the log says which pattern to fix."""
        if n > 0:
            self._errors.labels(stage="match", error_type="RegexTimeout", **self._static).inc(n)
            self._emit_quietly("warning", "regex_timeout", count=n)
        for pattern_id in quarantined:
            self._emit("error", "pattern_quarantined", pattern_id=pattern_id,
                       detail="timed out repeatedly; not tried again until the next reload")

    def output_failed(self, sink: str, error: OSError, events: int) -> None:
        """Events an output could not write (`EventWriter`): dropped there and counted; said
        at most every `quiet_for` s. The daemon goes on: the other outputs, the metrics and
        later writes (once there is room again) do not wait for that one."""
        self._output_dropped.labels(sink=sink, **self._static).inc(events)
        self._emit_quietly("error", "events_output_failed", sink=sink, events=events,
                           detail=f"cannot write: {error.strerror or error}; these events are "
                                  "dropped there (the other outputs have them), and it is "
                                  "tried again with the next ones")

    def notice(self, kind: str, level: str = "info", **fields: Any) -> None:
        """Something worth a log line and no counter (started, file_opened, stopped)."""
        self._emit(level, kind, **fields)

    # -- webhook --------------------------------------------------------------------------

    def webhook_configured(self) -> None:
        """Create the webhook series (at 0) — only processes with a webhook export them."""
        with self._lock:
            if self._webhook is not None:
                return
            names = self._names
            reg = self._registry
            w: dict[str, Any] = {
                "delivered": Counter("sglang_matcher_webhook_delivered_total",
                                     "Events the webhook endpoint accepted (2xx).",
                                     names, registry=reg),
                "retries": Counter("sglang_matcher_webhook_retries_total",
                                   "Webhook POSTs retried after a connection error, timeout, "
                                   "429 or 5xx.", names, registry=reg),
                "failed": Counter("sglang_matcher_webhook_failed_total",
                                  "Events given up: rejected (4xx), retries exhausted, or still "
                                  "unsent at shutdown.", ("reason", *names), registry=reg),
                "dropped": Counter("sglang_matcher_webhook_dropped_total",
                                   "Events dropped, oldest first, because the webhook queue was "
                                   "full.", names, registry=reg),
                "queued": Gauge("sglang_matcher_webhook_queue_events",
                                "Events waiting to be POSTed.", names, registry=reg),
            }
            for key in ("delivered", "retries", "dropped", "queued"):
                self._series(w[key])
            for reason in WEBHOOK_FAILURES:
                w["failed"].labels(reason=reason, **self._static)
            self._webhook = w

    def webhook_delivered(self) -> None:
        self._series(self._w()["delivered"]).inc()

    def webhook_retry(self, **fields: Any) -> None:
        self._series(self._w()["retries"]).inc()
        self._emit_quietly("warning", "webhook_retry", **fields)

    def webhook_failed(self, reason: str, n: int = 1, **fields: Any) -> None:
        if reason not in WEBHOOK_FAILURES:
            raise ValueError(f"webhook failure reason must be one of {WEBHOOK_FAILURES}")
        if n <= 0:
            return
        self._w()["failed"].labels(reason=reason, **self._static).inc(n)
        self._emit_quietly("error", "webhook_failed", reason=reason, events=n, **fields)

    def webhook_dropped(self, n: int = 1) -> None:
        self._series(self._w()["dropped"]).inc(n)
        self._emit_quietly("warning", "webhook_dropped", events=n)

    def webhook_queue(self, depth: int) -> None:
        self._series(self._w()["queued"]).set(depth)

    # -- OpenTelemetry logs (sinks/otlp.py) -----------------------------------------------

    def otlp_configured(self) -> None:
        """Create the OTLP series (at 0) — only processes with an OTLP endpoint export them."""
        with self._lock:
            if self._otlp is not None:
                return
            names = self._names
            reg = self._registry
            o: dict[str, Any] = {
                "sent": Counter("sglang_matcher_otlp_sent_total",
                                "Log records the OTLP endpoint accepted.", names, registry=reg),
                "retries": Counter("sglang_matcher_otlp_retries_total",
                                   "OTLP exports retried after a connection error, timeout, 429, "
                                   "502, 503 or 504.", names, registry=reg),
                "failed": Counter("sglang_matcher_otlp_failed_total",
                                  "Log records given up: rejected (other answers, or rejected in "
                                  "a partial success), retries exhausted, or still unsent at "
                                  "shutdown.", ("reason", *names), registry=reg),
                "dropped": Counter("sglang_matcher_otlp_dropped_total",
                                   "Log records dropped, oldest first, because the OTLP queue was "
                                   "full.", names, registry=reg),
                "queued": Gauge("sglang_matcher_otlp_queue_records",
                                "Log records waiting to be exported.", names, registry=reg),
            }
            for key in ("sent", "retries", "dropped", "queued"):
                self._series(o[key])
            for reason in OTLP_FAILURES:
                o["failed"].labels(reason=reason, **self._static)
            self._otlp = o

    def otlp_sent(self, n: int) -> None:
        self._series(self._o()["sent"]).inc(n)

    def otlp_retry(self, **fields: Any) -> None:
        self._series(self._o()["retries"]).inc()
        self._emit_quietly("warning", "otlp_retry", **fields)

    def otlp_failed(self, reason: str, n: int = 1, **fields: Any) -> None:
        if reason not in OTLP_FAILURES:
            raise ValueError(f"otlp failure reason must be one of {OTLP_FAILURES}")
        if n <= 0:
            return
        self._o()["failed"].labels(reason=reason, **self._static).inc(n)
        self._emit_quietly("error", "otlp_failed", reason=reason, records=n, **fields)

    def otlp_dropped(self, n: int = 1) -> None:
        self._series(self._o()["dropped"]).inc(n)
        self._emit_quietly("warning", "otlp_dropped", records=n)

    def otlp_queue(self, depth: int) -> None:
        self._series(self._o()["queued"]).set(depth)

    # -- internals ------------------------------------------------------------------------

    def _series(self, metric: Any, **labels: str) -> Any:
        """The child for these labels plus the static ones (the metric itself if it has none)."""
        labels.update(self._static)
        return metric.labels(**labels) if labels else metric

    def _source(self, source: str) -> str:
        return self._sources(source)

    def _w(self) -> dict[str, Any]:
        if self._webhook is None:
            self.webhook_configured()
        assert self._webhook is not None
        return self._webhook

    def _o(self) -> dict[str, Any]:
        if self._otlp is None:
            self.otlp_configured()
        assert self._otlp is not None
        return self._otlp

    def _emit(self, level: str, event: str, **fields: Any) -> None:
        if self._redactor is not None:
            fields = self._redactor.value(fields)
        log = getattr(self._log, level, None) or self._log.info
        log(event, **fields)

    def _emit_quietly(self, level: str, event: str, **fields: Any) -> None:
        """Log the first of a kind, then at most one per `quiet_for` s saying how many were held."""
        now = self._clock()
        with self._lock:
            last, held = self._held.get(event, (None, 0))
            if last is not None and now - last < self._quiet_for:
                self._held[event] = (last, held + 1)
                return
            self._held[event] = (now, 0)
        if held:
            fields["held_back"] = held
        self._emit(level, event, **fields)
