"""The OTLP logs sink against a real HTTP receiver on 127.0.0.1 that decodes every request with
the official protobuf definitions (`opentelemetry-proto`): every field, retries, refusals, the
bounded queue; and the real daemon on a real sglang failure log, across a SIGTERM restart."""

from __future__ import annotations

import dataclasses
import email.utils
import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from prometheus_client import CollectorRegistry
from structlog.testing import CapturingLogger
from watch_harness import REPO, DaemonProcess, wait_for

from matcher import __version__
from matcher.aggregate import log_time
from matcher.backoff import parse_retry_after
from matcher.redact import Redactor
from matcher.sinks.events import event_dict
from matcher.sinks.otlp import (
    OtlpLogSink,
    env_headers,
    resolve_endpoint,
    resource_attributes,
)
from matcher.telemetry import Telemetry
from matcher.types import Batch, Event

SECRET = "sk-live-SECRET0123456789abcdef"
FAILURE_LOG = REPO / "examples" / "logs" / "scheduler-crash-unknown-architecture.log"


class Receiver:
    """An OTLP/HTTP logs endpoint: answers with the scripted (status, headers) (then 200) and
    keeps each request decoded, with the time it came."""

    def __init__(self, script: tuple[tuple[int, dict[str, str]], ...] = (),
                 gate: threading.Event | None = None, partial: int = 0) -> None:
        self.script = list(script)
        self.requests: list[tuple[float, str, dict[str, str], ExportLogsServiceRequest]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportLogsServiceRequest.FromString(body)
                receiver.requests.append((time.monotonic(), self.path, dict(self.headers),
                                          request))
                if gate is not None:
                    gate.wait(10)
                status, headers = receiver.script.pop(0) if receiver.script else (200, {})
                reply = ExportLogsServiceResponse()
                if status == 200 and partial:
                    reply.partial_success.rejected_log_records = partial
                    reply.partial_success.error_message = "too old"
                data = reply.SerializeToString() if status == 200 else b"no"
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1/logs"

    def records(self) -> list:
        return [r for _, _, _, req in list(self.requests)
                for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records]

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def attrs(kvs) -> dict:
    out = {}
    for kv in kvs:
        v = kv.value
        kind = v.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [getattr(x, x.WhichOneof("value")) for x in v.array_value.values]
        else:
            out[kv.key] = getattr(v, kind)
    return out


def make_event(n: int = 0, **kw) -> Event:
    fields = {
        "event": "sglang_error", "error_class": "ValueError",
        "message": f"ValueError: Cannot find model module {n}. api_key={SECRET}",
        "source": "/var/log/sglang/server.log", "severity": "error",
        "log_ts": "2026-12-02 14:35:46", "observed_ts": 1_800_000_000.25,
        "ranks": ("TP0", "TP1"), "occurrences": 2,
        "traceback": f"Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                     f"ValueError: Cannot find model module {n}. api_key={SECRET}",
        "pattern_id": "4d3fbd98d88af19d", "role": "cause",
        "captures": {"architecture": "FooForCausalLM"},
        "remediation": {"documentation": "sglang has no implementation of it.",
                        "solutions": ["Upgrade sglang", "Check config.json"],
                        "example_fix": None,
                        "url": "https://github.com/sgl-project/sglang/blob/v0.5.23/x.py#L155"},
        "catalog_version": "1e1f3c62e3f1", "labels": {"pod": "sglang-0", "node": "gpu-1"},
        "consequences": ("Received sigquit from a child process.",), "offset": 100,
        "lineno": 35, "sglang_version": "0.5.23"}
    fields.update(kw)
    return Event(**fields)


def batch(events: list[Event], redactor: Redactor | None = None) -> Batch:
    redactor = redactor or Redactor()
    return Batch(tuple(events), tuple(events), tuple(event_dict(e, redactor) for e in events))


def sink_for(receiver: Receiver, registry: CollectorRegistry | None = None, **kw) -> OtlpLogSink:
    telemetry = Telemetry(registry or CollectorRegistry(), CapturingLogger()).delivery("otlp")
    kw.setdefault("batch_delay", 0.05)
    kw.setdefault("resource", {"service.name": "sglang-matcher"})
    return OtlpLogSink(receiver.url, redactor=Redactor(), telemetry=telemetry, **kw)


def test_every_field_of_a_record_and_its_resource():
    env = {"POD_NAME": "sglang-0", "POD_NAMESPACE": "llm", "NODE_NAME": "gpu-1",
           "POD_UID": "0b5c-11", "CONTAINER_NAME": "sglang",
           "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=prod,team=ml%20infra"}
    resource, problem = resource_attributes(env)
    assert problem is None
    events = [make_event(0), make_event(1, severity="critical", ranks=(), traceback=None,
                                        log_ts="not a time", fingerprint="ab12",
                                        pattern_id=None, event="sglang_unknown_error"),
              make_event(2, severity="warning", event="sglang_warning", remediation=None),
              make_event(3, severity="info", event="sglang_warning")]
    with Receiver() as rx:
        sink = sink_for(rx, headers={"Authorization": "Bearer t0k"}, resource=resource)
        sink.emit(batch(events))
        assert sink.close(timeout=5) == 0
    assert len(rx.requests) == 1  # one batch
    _, path, headers, request = rx.requests[0]
    assert path == "/v1/logs"
    assert headers["Content-Type"] == "application/x-protobuf"
    assert headers["Authorization"] == "Bearer t0k"
    (rl,) = request.resource_logs
    import socket
    assert attrs(rl.resource.attributes) == {
        "service.name": "sglang-matcher", "service.version": __version__,
        "host.name": socket.gethostname(), "k8s.pod.name": "sglang-0",
        "k8s.namespace.name": "llm", "k8s.node.name": "gpu-1", "k8s.pod.uid": "0b5c-11",
        "k8s.container.name": "sglang", "deployment.environment.name": "prod",
        "team": "ml infra"}
    (sl,) = rl.scope_logs
    assert (sl.scope.name, sl.scope.version) == ("sglang-matcher", __version__)
    r0, r1, r2, _r3 = sl.log_records
    assert [(r.severity_number, r.severity_text) for r in sl.log_records] == [
        (17, "ERROR"), (21, "FATAL"), (13, "WARN"), (9, "INFO")]
    # time: the log's own (local time), else the observed time
    assert r0.time_unix_nano == int(log_time("2026-12-02 14:35:46") * 1e9)
    assert r0.observed_time_unix_nano == 1_800_000_000_250_000_000
    assert r1.time_unix_nano == r1.observed_time_unix_nano == 1_800_000_000_250_000_000
    assert r0.event_name == "sglang_error" and r1.event_name == "sglang_unknown_error"
    # nothing unredacted leaves
    assert SECRET not in request.SerializeToString().decode("utf-8", "replace")
    assert r0.body.string_value.startswith("ValueError: Cannot find model module 0. api_key=")
    a0 = attrs(r0.attributes)
    assert a0 == {
        "exception.type": "ValueError",
        "exception.message": a0["exception.message"],
        "exception.stacktrace": a0["exception.stacktrace"],
        "log.file.path": "/var/log/sglang/server.log",
        "sglang.event": "sglang_error",
        "sglang.severity": "error",
        "sglang.pattern_id": "4d3fbd98d88af19d",
        "sglang.role": "cause",
        "sglang.ranks": ["TP0", "TP1"],
        "sglang.occurrences": 2,
        "sglang.catalog_version": "1e1f3c62e3f1",
        "sglang.version": "0.5.23",
        "sglang.line": 35,
        "sglang.offset": 100,
        "sglang.consequences": ["Received sigquit from a child process."],
        "sglang.remediation.summary": "sglang has no implementation of it.",
        "sglang.remediation.first_fix": "Upgrade sglang",
        "sglang.remediation.doc_url":
            "https://github.com/sgl-project/sglang/blob/v0.5.23/x.py#L155",
        "sglang.capture.architecture": "FooForCausalLM",
        "sglang.label.pod": "sglang-0",
        "sglang.label.node": "gpu-1",
    }
    assert a0["exception.message"].startswith("Cannot find model module 0. api_key=")
    assert a0["exception.stacktrace"].startswith("Traceback (most recent call last):")
    assert a0["exception.stacktrace"].endswith(a0["exception.message"])
    a1 = attrs(r1.attributes)
    assert a1["sglang.fingerprint"] == "ab12" and "sglang.pattern_id" not in a1
    assert "exception.stacktrace" not in a1 and a1["sglang.ranks"] == []
    assert not any(k.startswith("sglang.remediation") for k in attrs(r2.attributes))


def test_a_503_with_retry_after_is_retried_after_it_then_sent():
    registry = CollectorRegistry()
    with Receiver(script=((503, {"Retry-After": "1"}),)) as rx:
        sink = sink_for(rx, registry, backoff_initial=0.01)
        sink.emit(batch([make_event(0), make_event(1)]))
        assert wait_for(lambda: value(registry, "sglang_matcher_otlp_sent_total") == 2, 10)
        sink.close()
    (t0, *_), (t1, *_) = rx.requests
    assert t1 - t0 >= 0.95  # Retry-After, not the 10 ms backoff
    assert len(rx.records()) == 4  # the same batch twice: refused, then accepted
    assert value(registry, "sglang_matcher_otlp_retries_total") == 1
    assert value(registry, "sglang_matcher_otlp_failed_total", reason="rejected") == 0


@pytest.mark.parametrize("status", [429, 502, 504])
def test_retryable_statuses_back_off_with_jitter(status):
    registry = CollectorRegistry()
    with Receiver(script=((status, {}), (status, {}))) as rx:
        sink = sink_for(rx, registry, backoff_initial=0.2)
        sink.emit(batch([make_event(0)]))
        assert wait_for(lambda: value(registry, "sglang_matcher_otlp_sent_total") == 1, 10)
        sink.close()
    t = [req[0] for req in rx.requests]
    assert len(t) == 3
    assert t[1] - t[0] >= 0.09 and t[2] - t[1] >= 0.19  # 0.2 then 0.4, each half jittered
    assert value(registry, "sglang_matcher_otlp_retries_total") == 2


def test_a_400_is_given_up_and_counted():
    registry = CollectorRegistry()
    with Receiver(script=((400, {}),)) as rx:
        sink = sink_for(rx, registry, backoff_initial=0.01)
        sink.emit(batch([make_event(n) for n in range(3)]))
        assert wait_for(lambda: value(registry, "sglang_matcher_otlp_failed_total",
                                      reason="rejected") == 3, 10)
        sink.close()
    assert len(rx.requests) == 1  # never retried
    assert value(registry, "sglang_matcher_otlp_sent_total") == 0
    assert value(registry, "sglang_matcher_otlp_retries_total") == 0


def test_a_partial_success_counts_the_rejected_records():
    registry = CollectorRegistry()
    with Receiver(partial=1) as rx:
        sink = sink_for(rx, registry)
        sink.emit(batch([make_event(n) for n in range(3)]))
        assert sink.close(timeout=5) == 0
    assert value(registry, "sglang_matcher_otlp_sent_total") == 2
    assert value(registry, "sglang_matcher_otlp_failed_total", reason="rejected") == 1


def test_connection_errors_are_retried_then_given_up():
    registry = CollectorRegistry()
    with Receiver() as rx:
        url = rx.url
    sink = OtlpLogSink(url, redactor=Redactor(), telemetry=Telemetry(registry, CapturingLogger()).delivery("otlp"),
                       batch_delay=0, max_retries=2, backoff_initial=0.01, resource={})
    sink.emit(batch([make_event(0)]))
    assert wait_for(lambda: value(registry, "sglang_matcher_otlp_failed_total",
                                  reason="retries_exhausted") == 1, 10)
    assert value(registry, "sglang_matcher_otlp_retries_total") == 2
    sink.close()


def test_a_full_queue_drops_the_oldest_and_counts_them_and_never_blocks():
    registry = CollectorRegistry()
    gate = threading.Event()
    with Receiver(gate=gate) as rx:
        sink = sink_for(rx, registry, queue_size=3, max_batch=1, batch_delay=0)
        sink.emit(batch([make_event(0)]))
        assert wait_for(lambda: len(rx.requests) == 1, 5)  # 0 is in flight, held by the gate
        started = time.monotonic()
        for n in range(1, 6):
            sink.emit(batch([make_event(n)]))
        assert time.monotonic() - started < 0.5  # emit never waits for the endpoint
        assert value(registry, "sglang_matcher_otlp_dropped_total") == 2  # 1 and 2
        assert value(registry, "sglang_matcher_otlp_queue_records") == 3
        gate.set()
        assert sink.close(timeout=5) == 0
    bodies = [r.body.string_value for r in rx.records()]
    assert [b.split(".")[0][-1] for b in bodies] == ["0", "3", "4", "5"]
    assert value(registry, "sglang_matcher_otlp_sent_total") == 4


def test_close_sends_what_is_queued_and_counts_what_it_cannot():
    registry = CollectorRegistry()
    with Receiver(script=((503, {"Retry-After": "30"}),)) as rx:
        sink = sink_for(rx, registry, batch_delay=10)
        sink.emit(batch([make_event(0), make_event(1)]))
        started = time.monotonic()
        assert sink.close(timeout=1) == 2  # the batch waits on a Retry-After past the timeout
        assert time.monotonic() - started < 3
    assert value(registry, "sglang_matcher_otlp_failed_total", reason="shutdown") == 2
    with Receiver() as rx:
        sink = sink_for(rx, batch_delay=10)
        sink.emit(batch([make_event(0), make_event(1)]))
        assert sink.close(timeout=5) == 0  # not held for the 10 s batch delay
    assert len(rx.records()) == 2


def test_retry_after_as_seconds_or_an_http_date():
    assert parse_retry_after("7") == 7.0
    now = time.time()
    assert parse_retry_after(email.utils.formatdate(now + 20, usegmt=True), now) == \
        pytest.approx(20, abs=1)
    assert parse_retry_after(email.utils.formatdate(now - 20, usegmt=True), now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_endpoint_headers_and_resource_from_the_environment():
    assert resolve_endpoint("http://c:4318/v1/logs", {}) == (
        "http://c:4318/v1/logs", "setting 'otlp_endpoint'")
    assert resolve_endpoint(None, {}) == (None, "")
    assert resolve_endpoint(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"})[0] == \
        "http://c:4318/v1/logs"
    assert resolve_endpoint(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                   "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://l:9/x"})[0] == \
        "http://l:9/x"
    # an endpoint meant for a gRPC exporter is not ours to POST to
    assert resolve_endpoint(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
                                   "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == (None, "")
    assert env_headers({"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20eA==,x-a=1",
                        "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-a=2"}) == {
        "Authorization": "Basic eA==", "x-a": "2"}
    resource, problem = resource_attributes({"OTEL_RESOURCE_ATTRIBUTES": "a=1,broken",
                                             "OTEL_SERVICE_NAME": "matcher-gpu"})
    assert problem and "broken" in problem and "a" not in resource  # discarded whole
    assert resource["service.name"] == "matcher-gpu"


def test_the_daemon_builds_it_from_the_flag_and_the_environment(tmp_path):
    from matcher.config import load_config
    from matcher.topology import build, retire

    log = CapturingLogger()
    with Receiver() as rx:
        config = load_config(environ={}, flags={"paths": [str(tmp_path / "x.log")],
                                                "state_dir": tmp_path / "s",
                                                "otlp_endpoint": rx.url,
                                                "otlp_headers": "Authorization=Bearer a"})
        topo = build(config, log=log)
        try:
            assert topo.otlp is not None and topo.sinks[-1] is topo.otlp
            assert topo.otlp.headers == {"Authorization": "Bearer a"}
            again = build(config, log=log, previous=topo)  # a reload keeps it
            assert again.otlp is topo.otlp
            moved = dataclasses.replace(config, otlp_endpoint=rx.url.replace("/v1/", "/v2/"))
            new = build(moved, log=log, previous=topo)  # … or makes it anew, retiring the old
            assert new.otlp is not None and new.otlp is not topo.otlp
            retire(topo, new)
            assert not topo.otlp.delivery.alive
            topo = new
        finally:
            topo.close()


# -- the real daemon on a real sglang failure ----------------------------------------------------

def _stdout_events(d: DaemonProcess) -> list[tuple]:
    return [(e.get("pattern_id"), e["message"]) for e in d.events()]


def _received(rx: Receiver) -> list[tuple]:
    out = []
    for r in rx.records():
        a = attrs(r.attributes)
        out.append((a.get("sglang.pattern_id"), r.body.string_value))
    return out


def test_a_real_failure_is_one_record_per_printed_event_across_a_sigterm_restart(tmp_path):
    """The daemon on sglang's own log of a scheduler crash (an unknown architecture: several
    events, a traceback among them): each event printed on stdout is one LogRecord, in order;
    SIGTERM, more of the failure appended, restart: nothing lost, nothing twice."""
    text = FAILURE_LOG.read_text()
    log = tmp_path / "server.log"
    shutil.copy(FAILURE_LOG, log)
    with Receiver() as rx:
        d = DaemonProcess(tmp_path, [str(log)], "--from-beginning", "--otlp-endpoint", rx.url,
                          builtin=True)
        with d:
            assert wait_for(lambda: len(d.events()) >= 5, 60), d.err.read_text()[-3000:]
            first = len(d.events())
            assert wait_for(lambda: len(rx.records()) >= first, 10)
            assert d.stop() == 0
        run1 = _stdout_events(d)
        assert any(e["event"] == "sglang_error" and e["traceback"] for e in d.events())
        assert _received(rx) == run1
        with open(log, "a") as f:  # the failure again while the daemon is down …
            f.write(text)
        with d:
            assert wait_for(lambda: len(d.events()) >= 2 * len(run1), 60)
            with open(log, "a") as f:  # … and once more while it runs
                f.write(text)
            assert wait_for(lambda: len(d.events()) >= 3 * len(run1), 60)
            assert d.stop() == 0
        printed = _stdout_events(d)
        assert printed[:len(run1)] == run1
        assert len(printed) == 3 * len(run1)
        assert _received(rx) == printed  # nothing lost, nothing duplicated, in order
        stderr = d.err.read_text()
        assert "otlp_failed" not in stderr and "otlp_dropped" not in stderr
        for r in rx.records():
            assert attrs(r.attributes)["log.file.path"] == str(log)
        kinds = json.dumps([e["event"] for e in d.events()])
        assert "sglang_error" in kinds


def test_a_daemon_without_an_endpoint_loads_no_protobuf_messages():
    """The exporter and its protobuf messages (2 MB, 10 ms of every start) are loaded when an
    endpoint is set, not by the daemon's modules."""
    import subprocess
    import sys

    code = ("import sys, matcher.cli, matcher.daemon, matcher.topology; "
            "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'google'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=REPO)
    assert done.stdout.strip() == "[]"
