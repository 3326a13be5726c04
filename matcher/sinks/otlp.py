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

Delivery is the core's (`sinks/delivery.py`), as for the webhook: `emit` only appends to a
bounded queue and returns, so reading never waits for the Collector; one thread sends batches of
up to `max_batch` records, at most `batch_delay` seconds after the first of them was queued,
each POST within its deadline (`timeout`); connection errors, timeouts, 429, 502, 503 and 504
are retried with exponential backoff and jitter, or after the `Retry-After` the answer gives
(seconds or an HTTP date) when that is longer, as the OTLP specification says; other answers
give the batch up. This module keeps the encoding (`ExportLogsServiceRequest`) and the reading
of answers (a partial success's rejected records). What is lost is counted
(`sglang_matcher_otlp_*`): the oldest records when the queue is full (`dropped`), a batch
refused or out of retries (`failed{reason=…}`), records the Collector says it rejected
(`partial_success`), and what is still unsent when `close()`'s timeout ends.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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
from matcher.redact import Redactor
from matcher.sinks.delivery import Answer, Delivery, DeliveryEvents, RetryPolicy
from matcher.sinks.otlp_config import (  # noqa: F401 - the exporter's settings, as before
    K8S_ENV,
    SERVICE_NAME,
    check_url,
    env_headers,
    resolve_endpoint,
    resource_attributes,
)
from matcher.types import Batch

# event severity → (SeverityNumber, the short name the OpenTelemetry log data model gives it)
SEVERITY = {
    "critical": (21, "FATAL"),
    "error": (17, "ERROR"),
    "warning": (13, "WARN"),
    "info": (9, "INFO"),
    "debug": (5, "DEBUG"),
}
RETRY_STATUS = frozenset({429, 502, 503, 504})  # OTLP/HTTP: the retryable answers


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

class _ProtobufExporter:
    """OTLP/HTTP's encoding of a batch and its reading of answers."""

    def __init__(self, resource: Mapping[str, str]) -> None:
        self._resource = Resource(attributes=_attributes(resource))
        self._scope = InstrumentationScope(name=SERVICE_NAME, version=__version__)

    def encode(self, items: Sequence[Mapping[str, Any]]) -> bytes:
        request = ExportLogsServiceRequest(resource_logs=[ResourceLogs(
            resource=self._resource,
            scope_logs=[ScopeLogs(scope=self._scope, log_records=[log_record(d) for d in items])],
        )])
        data: bytes = request.SerializeToString()
        return data

    def answer(self, status: int, body: bytes) -> Answer:
        if status in RETRY_STATUS:
            return Answer("retry", f"HTTP {status}")
        if not 200 <= status < 300:
            return Answer("rejected", f"HTTP {status}")
        try:
            reply = ExportLogsServiceResponse.FromString(body)
        except Exception:  # noqa: BLE001 - an answer we cannot read is still a 2xx
            return Answer("ok")
        if not reply.HasField("partial_success"):
            return Answer("ok")
        partial = reply.partial_success
        return Answer("ok", f"partial success: {partial.error_message}",
                      partial.rejected_log_records)


class OtlpLogSink:
    """The OTLP `Sink`: each printed event's dict as a `LogRecord`, exported in batches by the
    delivery core."""

    name = "otlp"
    # Like the webhook: what it cannot send is counted, never waited for, so read positions are
    # saved without it (stdout and the counters have every event).
    holds_checkpoint = False

    def __init__(
        self,
        url: str,
        *,
        redactor: Redactor,
        telemetry: DeliveryEvents | None = None,
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
        self.url = url
        self.headers = dict(headers or {})
        self.resource = dict(resource) if resource is not None else resource_attributes()[0]
        self._exporter = _ProtobufExporter(self.resource)
        self.delivery: Delivery[Mapping[str, Any]] = Delivery(
            "otlp", url, self._exporter, events=telemetry,
            headers={"Content-Type": "application/x-protobuf",
                     "User-Agent": f"{SERVICE_NAME}/{__version__}", **self.headers},
            timeout=timeout, queue_size=queue_size, max_batch=max_batch, batch_delay=batch_delay,
            retry=RetryPolicy(max_retries, backoff_initial, backoff_max, retry_after_max,
                              jitter=True),
            clock=clock, rng=rng)
        self.endpoint = self.delivery.endpoint

    def emit(self, batch: Batch) -> None:
        if batch.dicts:
            self.accept(batch.dicts)

    def flush(self) -> None:
        pass  # delivery is the core's thread's; `close` waits for it

    def accept(self, dicts: Sequence[Mapping[str, Any]]) -> None:
        """Queue the emitted (redacted) form of events; the oldest go when the queue is full."""
        self.delivery.accept(dicts)

    @property
    def pending(self) -> int:
        """Records queued or being sent."""
        return self.delivery.pending

    def close(self, timeout: float = 5.0) -> int:
        """Send what can be sent within `timeout` seconds, then stop; returns how many records
        were not."""
        return self.delivery.close(timeout)
