"""The webhook sink against real HTTP servers on 127.0.0.1: delivery, retries, refusals."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import CapturingLogger

from matcher.redact import Redactor
from matcher.sinks.events import event_dict
from matcher.sinks.webhook import WebhookSink
from matcher.telemetry import Telemetry
from matcher.types import Event

SECRET = "sk-live-SECRET"


class Receiver:
    """A webhook endpoint: answers with the scripted statuses (then 200) and keeps what it got."""

    def __init__(self, statuses: tuple[int, ...] = (), location: str = "",
                 gate: threading.Event | None = None) -> None:
        self.statuses = list(statuses)
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((self.path, dict(self.headers), body))
                if gate is not None:
                    gate.wait(10)
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receivers():
    made: list[Receiver] = []

    def make(*statuses: int, location: str = "", gate: threading.Event | None = None) -> Receiver:
        made.append(Receiver(statuses, location, gate))
        return made[-1]

    yield make
    for r in made:
        r.close()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def make_sink(registry):
    sinks: list[WebhookSink] = []

    def make(url: str, **kw: object) -> WebhookSink:
        kw.setdefault("backoff_initial", 0.01)
        tel = Telemetry(registry, CapturingLogger(), redactor=Redactor())
        sink = WebhookSink(url, redactor=Redactor(), telemetry=tel.delivery("webhook"), **kw)  # type: ignore[arg-type]
        sinks.append(sink)
        return sinks[-1]

    yield make
    for s in sinks:
        s.close(timeout=0.1)


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        time.sleep(0.01)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def event(n: int = 0) -> Event:
    return Event(event="sglang_error", error_class="ValueError",
                 message=f"bad server_args={{'api_key': '{SECRET}'}} seq={n}", source="server.log",
                 severity="error", log_ts="2026-12-02 14:32:19", observed_ts=1.0, ranks=("TP0",),
                 occurrences=1, traceback=f"Traceback …\nValueError: --api-key {SECRET}",
                 pattern_id="cur-a", captures={"arg1": SECRET}, labels={"pod": "p"})


def emitted(n: int = 0) -> dict[str, object]:
    """The event's emitted dict, as the daemon hands it to every sink (`Batch.dicts`)."""
    return event_dict(event(n), Redactor())


def test_events_arrive_as_redacted_json_in_order(receivers, make_sink, registry):
    """Each event is one POST of the emitted dict, secrets masked, configured headers sent."""
    receiver = receivers()
    sink = make_sink(receiver.url, headers={"Authorization": "Bearer hook-token"})
    sink.accept([emitted(0), emitted(1), emitted(2)])
    wait_for(lambda: value(registry, "sglang_matcher_webhook_delivered_total") == 3)
    bodies = [body for _, _, body in receiver.requests]
    assert [json.loads(b) for b in bodies] == [event_dict(event(n), Redactor()) for n in range(3)]
    assert all(SECRET.encode() not in b for b in bodies)
    path, headers, _ = receiver.requests[0]
    assert (path, headers["Content-Type"], headers["Authorization"]) == (
        "/hook", "application/json", "Bearer hook-token")
    assert headers["User-Agent"].startswith("sglang-matcher/")


def test_server_errors_are_retried_and_the_event_delivered_once(receivers, make_sink, registry):
    """500, 500, then 200: three POSTs of the same body, one delivery, two retries counted."""
    receiver = receivers(500, 500)
    sink = make_sink(receiver.url)
    sink.accept([emitted()])
    wait_for(lambda: value(registry, "sglang_matcher_webhook_delivered_total") == 1)
    assert sink.close(timeout=5) == 0
    assert len(receiver.requests) == 3
    assert len({body for _, _, body in receiver.requests}) == 1
    assert value(registry, "sglang_matcher_webhook_retries_total") == 2
    assert value(registry, "sglang_matcher_webhook_failed_total", reason="retries_exhausted") == 0


def test_a_client_error_is_not_retried(receivers, make_sink, registry):
    """400 means the endpoint will never take it: given up at once as `rejected`."""
    receiver = receivers(400)
    sink = make_sink(receiver.url)
    sink.accept([emitted()])
    wait_for(lambda: value(registry, "sglang_matcher_webhook_failed_total", reason="rejected") == 1)
    sink.close(timeout=5)
    assert len(receiver.requests) == 1


def test_redirects_are_not_followed(receivers, make_sink, registry):
    """A 307 to another host is refused: the body never reaches a server nobody configured."""
    elsewhere = receivers()
    receiver = receivers(307, location=elsewhere.url)
    sink = make_sink(receiver.url)
    sink.accept([emitted()])
    wait_for(lambda: value(registry, "sglang_matcher_webhook_failed_total", reason="rejected") == 1)
    assert (len(receiver.requests), elsewhere.requests) == (1, [])


def test_connection_refused_is_retried_until_the_limit(make_sink, registry):
    """Nobody listening: max_retries retries with backoff, then `retries_exhausted`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = make_sink(f"http://127.0.0.1:{port}/hook", max_retries=3)
    sink.accept([emitted()])
    wait_for(lambda: value(registry, "sglang_matcher_webhook_failed_total",
                           reason="retries_exhausted") == 1)
    assert value(registry, "sglang_matcher_webhook_retries_total") == 3


def test_a_hanging_endpoint_never_blocks_accept_and_close_gives_up_at_its_timeout(make_sink,
                                                                                    registry):
    """The endpoint takes the connection and never answers: accept() stays instant, a full queue
    drops (counted), and close() returns at its timeout, counting what was never sent."""
    with socket.socket() as blackhole:
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(64)  # never accept()ed: connections complete, requests go unanswered
        sink = make_sink(f"http://127.0.0.1:{blackhole.getsockname()[1]}/hook", timeout=5.0,
                         queue_size=10)
        sink.accept([emitted(0)])
        wait_for(lambda: sink.pending == 1 and sink.queued == 0)  # the worker is stuck on event 0
        slowest = 0.0
        for n in range(1, 50):
            t = time.monotonic()
            sink.accept([emitted(n)])
            slowest = max(slowest, time.monotonic() - t)
        # Blocked, an accept() would wait out the stuck POST's 5 s: a second is "never".
        assert slowest < 1.0
        assert (sink.queued, value(registry, "sglang_matcher_webhook_dropped_total")) == (10, 39)
        t = time.monotonic()
        assert sink.close(timeout=0.3) == 11
        assert time.monotonic() - t < 2.0
        # the 10 queued and the one whose POST close() cut: each counted once, at close
        assert value(registry, "sglang_matcher_webhook_failed_total", reason="shutdown") == 11
        assert value(registry, "sglang_matcher_webhook_queue_events") == 0


def test_a_full_queue_drops_the_oldest_events(receivers, make_sink, registry):
    """While the endpoint is stuck on event 0, events 1–49 meet a queue of 10: 1–39 are dropped
    and, once it answers again, 40–49 arrive — the newest say most about the current state."""
    gate = threading.Event()
    receiver = receivers(gate=gate)
    sink = make_sink(receiver.url, queue_size=10)
    sink.accept([emitted(0)])
    wait_for(lambda: len(receiver.requests) == 1)
    sink.accept([emitted(n) for n in range(1, 50)])
    gate.set()
    wait_for(lambda: value(registry, "sglang_matcher_webhook_delivered_total") == 11)
    assert [json.loads(b)["message"].rsplit("=", 1)[1] for _, _, b in receiver.requests] == [
        str(n) for n in (0, *range(40, 50))]
    assert value(registry, "sglang_matcher_webhook_dropped_total") == 39


def test_close_drains_the_queue(receivers, make_sink, registry):
    """close() with time to spare sends everything still queued, in order."""
    receiver = receivers()
    sink = make_sink(receiver.url)
    sink.accept([emitted(n) for n in range(20)])
    assert sink.close(timeout=10) == 0
    assert [json.loads(b)["message"].rsplit("=", 1)[1] for _, _, b in receiver.requests] == [
        str(n) for n in range(20)]
    assert value(registry, "sglang_matcher_webhook_delivered_total") == 20


def test_only_http_urls_are_accepted_and_errors_do_not_leak_credentials():
    """file:// and friends are refused; the refusal masks a password in the URL."""
    for url in ("file:///etc/passwd", "ftp://user:hunter2secret@host/x", "http:///nohost"):
        with pytest.raises(ValueError) as e:
            WebhookSink(url, redactor=Redactor())
        assert "hunter2secret" not in str(e.value)


def test_retries_wait_doubling_delays_under_the_ceiling(make_sink, registry, monkeypatch):
    """0.01, 0.02, 0.04, then the 0.05 ceiling: a dead endpoint is not hammered."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = make_sink(f"http://127.0.0.1:{port}/hook", max_retries=5, backoff_max=0.05)
    waits: list[float] = []
    real_sleep = sink.delivery._sleep
    monkeypatch.setattr(sink.delivery, "_sleep", lambda s: waits.append(s) or real_sleep(s))
    sink.accept([emitted()])
    wait_for(lambda: value(registry, "sglang_matcher_webhook_failed_total",
                           reason="retries_exhausted") == 1)
    assert waits == [0.01, 0.02, 0.04, 0.05, 0.05]


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_printed(receivers, make_sink,
                                                                          registry):
    """`http://user:p@ss@host/hook` delivers (it never did: urllib took `user:p@ss@host` for
    the host), with the userinfo as an `Authorization: Basic` header, not in the request line."""
    import base64
    r = receivers()
    url = r.url.replace("http://", "http://hook%20user:pa@ss-W0RD@")
    sink = make_sink(url)
    assert "pa@ss-W0RD" not in sink.url and "hook" in sink.url and "@" not in sink.url
    sink.accept([emitted(0)])
    wait_for(lambda: len(r.requests) == 1)
    path, headers, _ = r.requests[0]
    assert path == "/hook"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"hook user:pa@ss-W0RD").decode()
    wait_for(lambda: value(registry, "sglang_matcher_webhook_delivered_total") == 1)


def test_a_refused_url_with_credentials_is_named_without_them():
    with pytest.raises(ValueError) as e:
        WebhookSink("ftp://user:hunter2secret@host/x", redactor=Redactor())
    assert "hunter2secret" not in str(e.value)


def test_a_real_daemon_masks_a_secret_once_for_the_webhook_as_for_stdout(receivers, tmp_path):
    """The daemon redacts each event once, for every sink; the webhook sends that dict as it is.
    A user pattern that also matches its own mask (`pin=` and the one character after it) tells
    one pass from two: `pin=4711` is `pin=***711` once, `pin=*****711` twice."""
    from watch_harness import DaemonProcess
    from watch_harness import wait_for as wait_until

    once = Redactor([r"(?P<keep>pin=)(?P<secret>\S)"])
    assert once.text("pin=4711") == "pin=***711" and \
        once.text(once.text("pin=4711")) == "pin=*****711"
    log = tmp_path / "server.log"
    log.touch()
    receiver = receivers()
    d = DaemonProcess(tmp_path, [str(log)], "--webhook-url", receiver.url,
                      env={"SGLANG_MATCHER_REDACT_PATTERNS": r"(?P<keep>pin=)(?P<secret>\S)"})
    with d:
        with open(log, "a") as f:
            f.write("[2026-01-01 12:00:00 TP0] pin=4711 injected failure seq=1 end\n")
        assert wait_until(lambda: len(receiver.requests) == 1 and len(d.events()) == 1, 30)
        assert d.stop() == 0
    (printed,) = d.events()
    sent = json.loads(receiver.requests[0][2])
    assert "pin=***711" in printed["message"] and "4711" not in json.dumps(printed)
    assert sent == printed
