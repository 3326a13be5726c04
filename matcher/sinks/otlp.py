"""Events as OpenTelemetry log records, POSTed as OTLP/HTTP protobuf to a Collector.

Each printed event is one `LogRecord` (docs/opentelemetry.md): its `time` is the log's own
timestamp when it parses (sglang's, read as this host's local time), else the time it was
observed; `severity_number`/`severity_text` follow the event's severity (critical → FATAL 21,
error → ERROR 17, warning → WARN 13, info → INFO 9); the body is the event's message; the
attributes follow the OpenTelemetry semantic conventions (`exception.type`,
`exception.message`, `exception.stacktrace`, `log.file.path`) and carry the rest as
`sglang.*`. The text comes from the redacted dicts every sink gets (`Batch.dicts`), so nothing
unredacted leaves. Messages are the official ones (`opentelemetry-proto`), not a hand-written
encoding.

Like the webhook, `emit` only appends to a bounded queue and returns: reading never waits for
the Collector. One thread sends batches of up to `max_batch` records, at most `batch_delay`
seconds after the first of them was queued; connection errors, timeouts, 429, 502, 503 and 504
are retried with exponential backoff and jitter, or after the `Retry-After` the answer gives
(seconds or an HTTP date), as the OTLP specification says; other answers give the batch up.
What is lost is counted (`sglang_matcher_otlp_*`): the oldest records when the queue is full
(`dropped`), a batch refused or out of retries (`failed{reason=…}`), records the Collector
says it rejected (`partial_success`), and what is still unsent when `close()`'s timeout ends.
"""

from __future__ import annotations

import http.client
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from matcher import __version__
from matcher.aggregate import log_time
from matcher.backoff import Backoff, parse_retry_after
from matcher.redact import Redactor
from matcher.telemetry import Telemetry
from matcher.types import Batch

SERVICE_NAME = "sglang-matcher"
# The Kubernetes resource attributes, from the environment variables the manifests set through
# the downward API (deploy/k8s): pod, namespace, node, pod UID; the container name is a literal.
K8S_ENV = {
    "k8s.pod.name": "POD_NAME",
    "k8s.namespace.name": "POD_NAMESPACE",
    "k8s.node.name": "NODE_NAME",
    "k8s.pod.uid": "POD_UID",
    "k8s.container.name": "CONTAINER_NAME",
}
# event severity → (SeverityNumber, the short name the OpenTelemetry log data model gives it)
SEVERITY = {
    "critical": (21, "FATAL"),
    "error": (17, "ERROR"),
    "warning": (13, "WARN"),
    "info": (9, "INFO"),
    "debug": (5, "DEBUG"),
}
RETRY_STATUS = frozenset({429, 502, 503, 504})  # OTLP/HTTP: the retryable answers
_Outcome = Literal["ok", "retry", "rejected"]


# -- configuration from the environment ---------------------------------------------------------

def _w3c_pairs(value: str, what: str) -> dict[str, str]:
    """`k1=v1,k2=v2` with percent-encoded values (W3C Baggage octets), as the OpenTelemetry
    environment variables write them; ValueError on a member that is not `key=value`."""
    out: dict[str, str] = {}
    for member in value.split(","):
        if not member.strip():
            continue
        key, eq, val = member.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{what}: {member.strip()!r} is not key=value")
        out[key.strip()] = unquote(val.strip(), errors="strict")
    return out


def resolve_endpoint(configured: str | None,
                     environ: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """The logs URL to POST to, and where it came from (for errors).

    The `otlp_endpoint` setting wins; without it, the OpenTelemetry variables:
    `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` is used as it is (the full URL), else
    `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/logs` appended — unless
    `OTEL_EXPORTER_OTLP_[LOGS_]PROTOCOL` names a protocol this exporter does not speak (`grpc`,
    `http/json`): then those variables are meant for another exporter and are left alone."""
    if configured:
        return configured, "setting 'otlp_endpoint'"
    env = os.environ if environ is None else environ
    protocol = env.get("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol.strip() != "http/protobuf":
        return None, ""
    if env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
        var = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
        return env[var], f"environment {var}"
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        base = env["OTEL_EXPORTER_OTLP_ENDPOINT"]
        return base.rstrip("/") + "/v1/logs", "environment OTEL_EXPORTER_OTLP_ENDPOINT"
    return None, ""


def env_headers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`OTEL_EXPORTER_OTLP_HEADERS`, overridden by `OTEL_EXPORTER_OTLP_LOGS_HEADERS`."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for var in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"):
        if env.get(var):
            out.update(_w3c_pairs(env[var], var))
    return out


def resource_attributes(environ: Mapping[str, str] | None = None,
                        ) -> tuple[dict[str, str], str | None]:
    """The resource every record is sent under, and why `OTEL_RESOURCE_ATTRIBUTES` was set
    aside (None: it was not).

    `service.name`, `service.version`, `host.name`, then the `k8s.*` attributes from `K8S_ENV`,
    then `OTEL_RESOURCE_ATTRIBUTES` over them (a value that does not decode is discarded whole,
    as the specification says), then `OTEL_SERVICE_NAME` over `service.name`."""
    env = os.environ if environ is None else environ
    attrs = {"service.name": SERVICE_NAME, "service.version": __version__,
             "host.name": socket.gethostname()}
    for key, var in K8S_ENV.items():
        if env.get(var):
            attrs[key] = env[var]
    problem = None
    if env.get("OTEL_RESOURCE_ATTRIBUTES"):
        try:
            attrs.update(_w3c_pairs(env["OTEL_RESOURCE_ATTRIBUTES"], "OTEL_RESOURCE_ATTRIBUTES"))
        except (ValueError, UnicodeDecodeError) as e:
            problem = str(e)
    if env.get("OTEL_SERVICE_NAME"):
        attrs["service.name"] = env["OTEL_SERVICE_NAME"]
    return attrs, problem


def check_url(url: str, redactor: Redactor) -> str | None:
    """Why `url` cannot be an OTLP/HTTP endpoint (None: it can)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as e:
        return f"{redactor.text(url)!r} is not a URL: {e}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{redactor.text(url)!r} is not an http:// or https:// URL with a host"
    if "@" in parts.netloc:
        return (f"{redactor.text(url)!r} has credentials in it: give them as a header "
                "(otlp_headers, OTEL_EXPORTER_OTLP_HEADERS)")
    return None


# -- events → log records -----------------------------------------------------------------------

def _value(v: Any) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, (list, tuple)):
        return AnyValue(array_value=ArrayValue(values=[_value(x) for x in v]))
    return AnyValue(string_value=str(v))


def _attributes(pairs: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_value(v)) for k, v in pairs.items() if v is not None]


def _nanos(seconds: float) -> int:
    """Nanoseconds, the whole seconds apart so that a float's 53 bits are not spent on them."""
    if seconds <= 0:
        return 0
    whole = int(seconds)
    return whole * 1_000_000_000 + round((seconds - whole) * 1e9)


def log_record(d: Mapping[str, Any]) -> LogRecord:
    """One event's emitted (redacted) dict → its `LogRecord`."""
    severity = str(d.get("severity") or "")
    number, text = SEVERITY.get(severity, (0, severity.upper()))
    observed = float(d.get("observed_ts") or time.time())
    when = log_time(d.get("log_ts"))
    error_class = d.get("error_class")
    message = str(d.get("message") or "")
    exc_message = message
    if error_class and message.startswith(f"{error_class}: "):
        exc_message = message[len(error_class) + 2:]
    rem = d.get("remediation") or {}
    solutions = rem.get("solutions") or []
    attrs: dict[str, Any] = {
        "exception.type": error_class,
        "exception.message": exc_message,
        "exception.stacktrace": d.get("traceback"),
        "log.file.path": d.get("source"),
        "sglang.event": d.get("event"),
        "sglang.severity": severity or None,
        "sglang.pattern_id": d.get("pattern_id"),
        "sglang.role": d.get("role"),
        "sglang.ranks": list(d.get("ranks") or []),
        "sglang.occurrences": d.get("occurrences"),
        "sglang.suppressed": d.get("suppressed"),
        "sglang.fingerprint": d.get("fingerprint"),
        "sglang.catalog_version": d.get("catalog_version") or None,
        "sglang.version": d.get("sglang_version"),
        "sglang.line": d.get("line"),
        "sglang.offset": d.get("offset"),
        "sglang.consequences": d.get("consequences"),
        "sglang.remediation.summary": rem.get("summary") or rem.get("documentation") or None,
        "sglang.remediation.first_fix": solutions[0] if solutions else None,
        "sglang.remediation.doc_url": rem.get("url") or None,
    }
    for name, value in (d.get("captures") or {}).items():
        attrs[f"sglang.capture.{name}"] = value
    for name, value in (d.get("labels") or {}).items():
        attrs[f"sglang.label.{name}"] = value
    return LogRecord(
        time_unix_nano=_nanos(when if when is not None else observed),
        observed_time_unix_nano=_nanos(observed),
        severity_number=number,  # type: ignore[arg-type]  # an int of the enum
        severity_text=text,
        body=AnyValue(string_value=message),
        attributes=_attributes(attrs),
        event_name=str(d.get("event") or ""),
    )




# -- the sink -----------------------------------------------------------------------------------

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class OtlpLogSink:
    """The OTLP `Sink`: a bounded queue of records in front of one exporting thread."""

    name = "otlp"
    # Like the webhook: what it cannot send is counted, never waited for, so read positions are
    # saved without it (stdout and the counters have every event).
    holds_checkpoint = False

    def __init__(
        self,
        url: str,
        *,
        redactor: Redactor,
        telemetry: Telemetry | None = None,
        headers: Mapping[str, str] | None = None,
        resource: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        max_batch: int = 512,
        batch_delay: float = 1.0,
        queue_size: int = 2048,
        max_retries: int = 8,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        problem = check_url(url, redactor)
        if problem:
            raise ValueError(problem)
        if queue_size < 1 or max_batch < 1 or max_retries < 0 or timeout <= 0 \
                or batch_delay < 0 or backoff_initial < 0:
            raise ValueError("otlp: needs queue_size ≥ 1, max_batch ≥ 1, max_retries ≥ 0, "
                             "timeout > 0 and delays ≥ 0")
        parts = urlsplit(url)
        self.url = url
        self.endpoint = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
        self.headers = dict(headers or {})
        self.resource = dict(resource) if resource is not None else resource_attributes()[0]
        self._telemetry = telemetry
        self._timeout = timeout
        self._max_batch = max_batch
        self._batch_delay = batch_delay
        self._max_retries = max_retries
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._retry_after_max = retry_after_max
        self._clock = clock
        self._rng = rng or random.Random()
        self._request_headers = {"Content-Type": "application/x-protobuf",
                                 "User-Agent": f"{SERVICE_NAME}/{__version__}", **self.headers}
        self._resource_pb = Resource(attributes=_attributes(self.resource))
        self._scope = InstrumentationScope(name=SERVICE_NAME, version=__version__)
        self._opener = urllib.request.build_opener(_NoRedirect)
        self._queue: deque[Mapping[str, Any]] = deque(maxlen=queue_size)
        self._first_at: float | None = None  # when the oldest queued record was queued
        self._cond = threading.Condition()
        self._in_flight = 0
        self._given_up_closing = 0  # records the worker gave up on because close() ended
        self._closing = False
        self._deadline: float | None = None
        if telemetry is not None:
            telemetry.otlp_configured()
        self._thread = threading.Thread(target=self._run, name="matcher-otlp", daemon=True)
        self._thread.start()

    # -- the Sink side: never blocks ------------------------------------------------------

    def emit(self, batch: Batch) -> None:
        if batch.dicts:
            self.accept(batch.dicts)

    def flush(self) -> None:
        pass  # delivery is the thread's; `close` waits for it

    def accept(self, dicts: tuple[Mapping[str, Any], ...] | list[Mapping[str, Any]]) -> None:
        """Queue the emitted (redacted) form of events; the oldest go when the queue is full."""
        dropped = 0
        with self._cond:
            if self._closing:
                dropped = len(dicts)
            else:
                if not self._queue:
                    self._first_at = self._clock()
                for d in dicts:
                    if len(self._queue) == self._queue.maxlen:
                        dropped += 1
                    self._queue.append(d)
                self._cond.notify()
            depth = len(self._queue)
        if self._telemetry is not None:
            if dropped:
                self._telemetry.otlp_dropped(dropped)
            self._telemetry.otlp_queue(depth)

    @property
    def pending(self) -> int:
        """Records queued or being sent."""
        with self._cond:
            return len(self._queue) + self._in_flight

    def close(self, timeout: float = 5.0) -> int:
        """Send what can be sent within `timeout` seconds, then stop; returns how many records
        were not."""
        with self._cond:
            self._closing = True
            self._deadline = self._clock() + timeout
            self._cond.notify_all()
        self._thread.join(max(0.0, timeout))
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            unsent = left + self._in_flight + self._given_up_closing
        if self._telemetry is not None:
            self._telemetry.otlp_failed("shutdown", left, endpoint=self.endpoint)
            self._telemetry.otlp_queue(0)
        return unsent

    # -- the worker -----------------------------------------------------------------------

    def _next_batch(self) -> list[Mapping[str, Any]] | None:
        """Wait for a batch to be due: `max_batch` records, `batch_delay` after the first, or
        closing; None when there is nothing more to send."""
        with self._cond:
            while True:
                if self._closing:
                    if not self._queue or self._past_deadline():
                        return None
                    break
                if len(self._queue) >= self._max_batch:
                    break
                if self._queue:
                    due = (self._first_at or 0.0) + self._batch_delay - self._clock()
                    if due <= 0:
                        break
                    self._cond.wait(due)
                else:
                    self._cond.wait()
            n = min(len(self._queue), self._max_batch)
            records = [self._queue.popleft() for _ in range(n)]
            self._in_flight = n
            depth = len(self._queue)
            if not self._queue:
                self._first_at = None
        if self._telemetry is not None:
            self._telemetry.otlp_queue(depth)
        return records

    def _run(self) -> None:
        while True:
            records = self._next_batch()
            if records is None:
                return
            try:
                self._deliver(records)
            except Exception as e:  # noqa: BLE001 - a bad record costs its batch, not the sink
                if self._telemetry is not None:
                    self._telemetry.pipeline_error("sink", e, sink=self.name)
                    self._telemetry.otlp_failed("rejected", len(records), endpoint=self.endpoint,
                                                detail=f"{type(e).__name__}: {e}")
            finally:
                with self._cond:
                    self._in_flight = 0

    def encode(self, dicts: list[Mapping[str, Any]]) -> bytes:
        request = ExportLogsServiceRequest(resource_logs=[ResourceLogs(
            resource=self._resource_pb,
            scope_logs=[ScopeLogs(scope=self._scope, log_records=[log_record(d) for d in dicts])],
        )])
        data: bytes = request.SerializeToString()
        return data

    def _deliver(self, records: list[Mapping[str, Any]]) -> None:
        body = self.encode(records)
        n = len(records)
        backoff = Backoff(self._backoff_initial, self._backoff_max)
        for attempt in range(self._max_retries + 1):
            outcome, detail, wait, rejected = self._post(body)
            if outcome == "ok":
                self._sent(n - rejected)
                if rejected:
                    self._failed("rejected", rejected, detail)
                return
            if outcome == "rejected":
                self._failed("rejected", n, detail)
                return
            if attempt == self._max_retries:
                self._failed("retries_exhausted", n, detail)
                return
            delay = backoff.next_delay()
            delay = delay / 2 + self._rng.uniform(0, delay / 2)  # jitter: half fixed, half random
            if wait is not None:
                delay = min(wait, self._retry_after_max)
            if not self._sleep(delay):
                self._failed("shutdown", n, detail)
                return
            if self._telemetry is not None:
                self._telemetry.otlp_retry(endpoint=self.endpoint, detail=detail,
                                           attempt=attempt + 1, records=n)

    def _post(self, body: bytes) -> tuple[_Outcome, str, float | None, int]:
        """One export: the outcome, what went wrong, `Retry-After` (s), records rejected."""
        request = urllib.request.Request(self.url, data=body, headers=self._request_headers,
                                         method="POST")
        timeout = self._timeout
        if self._deadline is not None:  # closing: no request outlives close()'s timeout
            timeout = max(0.1, min(timeout, self._deadline - self._clock()))
        try:
            with self._opener.open(request, timeout=timeout) as response:
                answer = response.read(1 << 20)
        except urllib.error.HTTPError as e:
            retry_after = parse_retry_after(e.headers.get("Retry-After") if e.headers else None)
            e.close()
            if e.code in RETRY_STATUS:
                return "retry", f"HTTP {e.code}", retry_after, 0
            return "rejected", f"HTTP {e.code}", None, 0
        except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets
            reason = getattr(e, "reason", None)
            return "retry", f"{type(e).__name__}: {reason if reason is not None else e}", None, 0
        try:
            reply = ExportLogsServiceResponse.FromString(answer)
        except Exception:  # noqa: BLE001 - an answer we cannot read is still a 2xx
            return "ok", "", None, 0
        if not reply.HasField("partial_success"):
            return "ok", "", None, 0
        partial = reply.partial_success
        return "ok", f"partial success: {partial.error_message}", None, partial.rejected_log_records

    def _sleep(self, seconds: float) -> bool:
        """Wait before a retry; False when `close()`'s deadline comes first."""
        end = self._clock() + seconds
        with self._cond:
            while True:
                if self._deadline is not None and end > self._deadline:
                    return False
                left = end - self._clock()
                if left <= 0:
                    return True
                self._cond.wait(left)

    def _past_deadline(self) -> bool:
        return self._deadline is not None and self._clock() >= self._deadline

    def _sent(self, n: int) -> None:
        if self._telemetry is not None and n > 0:
            self._telemetry.otlp_sent(n)

    def _failed(self, reason: str, n: int, detail: str = "") -> None:
        if reason == "shutdown":
            with self._cond:
                self._given_up_closing += n
        if self._telemetry is not None:
            self._telemetry.otlp_failed(reason, n, endpoint=self.endpoint, detail=detail)
