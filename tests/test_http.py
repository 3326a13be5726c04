"""The HTTP endpoint, over real sockets on 127.0.0.1: what it serves, and everything it refuses."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from matcher.address import parse_address
from matcher.catalog.schema import CatalogRecord
from matcher.http import HttpServer
from matcher.sinks.metrics import MetricsSink
from matcher.sinks.ring import EventRing

CURATED = CatalogRecord(id="cur-a", message_pattern=r"failure (\w+)", layer="curated",
                        origin="test.json", index=0, error_class="ValueError")
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy


class Catalog:
    records = (CURATED,)
    version = "v1"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(clock):
    registry = CollectorRegistry()
    MetricsSink(registry, catalog=Catalog(), build_version="0.1.0", catalog_version="v1")
    ring = EventRing(5)
    srv = HttpServer("127.0.0.1", 0, registry=registry, events=ring, stale_after=30.0, clock=clock)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def get(srv: HttpServer, path: str, headers: dict[str, str] | None = None,
        method: str = "GET", data: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(srv.url + path, headers=headers or {}, method=method,
                                     data=data)
    try:
        with OPENER.open(request, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, dict(e.headers), e.read()


def raw(srv: HttpServer, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (no client-side normalisation); the status and the whole response."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    response = b"".join(chunks)
    return int(response.split(b" ", 2)[1]), response


def test_metrics_in_prometheus_text_format(server):
    """A plain scrape gets text format 0.0.4 with the curated series at 0."""
    status, headers, body = get(server, "/metrics")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name: f for f in parse_text(body.decode())}
    [sample] = families["sglang_log_errors"].samples
    assert (sample.name, sample.labels, sample.value) == (
        "sglang_log_errors_total", {"pattern_id": "cur-a", "error_class": "ValueError",
                                    "severity": "error"}, 0.0)


def test_metrics_in_openmetrics_when_asked(server):
    """Accept: application/openmetrics-text gets OpenMetrics 1.0.0 (ending in # EOF)."""
    status, headers, body = get(server, "/metrics",
                                {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    text = body.decode()
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in parse_openmetrics(text)}
    assert families["sglang_log_errors"].type == "counter"
    assert [s.value for s in families["sglang_log_errors"].samples
            if s.name == "sglang_log_errors_total"] == [0.0]


def test_healthz_follows_the_heartbeat(server, clock):
    """200 while the main loop beats; 503 with a reason once its beat is older than stale_after."""
    server.heartbeat()
    clock.now += 29.0
    assert get(server, "/healthz")[::2] == (200, b'{"status": "ok", "heartbeat_age_seconds": 29.0}')
    clock.now += 2.0
    status, headers, body = get(server, "/healthz")
    assert (status, headers["Content-Type"], json.loads(body)) == (
        503, "application/json; charset=utf-8",
        {"status": "stalled", "reason": "main loop heartbeat is 31.0 s old (limit 30 s)",
         "heartbeat_age_seconds": 31.0})
    server.heartbeat()
    assert get(server, "/healthz")[0] == 200


def test_readyz_after_set_ready(server):
    """503 until the daemon says it is ready, 200 after, 503 again when it says otherwise."""
    status, _, body = get(server, "/readyz")
    assert (status, json.loads(body)) == (503, {"status": "not_ready", "reason": "starting"})
    server.set_ready(True)
    assert get(server, "/readyz")[::2] == (200, b'{"status": "ready"}')
    server.set_ready(False, "reloading")
    assert json.loads(get(server, "/readyz")[2]) == {"status": "not_ready", "reason": "reloading"}


def test_events_returns_the_most_recent_oldest_first_with_limit_clamped(server):
    """/events?limit=N: the last N of a ring of 5; N below 1 is 1, above 5 is 5; junk is a 400."""
    server.events.extend({"event": "sglang_error", "n": i} for i in range(8))
    def ns(path: str) -> list[int]:
        status, _, body = get(server, path)
        assert status == 200
        return [e["n"] for e in json.loads(body)]
    assert ns("/events?limit=2") == [6, 7]
    assert ns("/events?limit=0") == [7]
    assert ns("/events?limit=-3") == [7]
    assert ns("/events?limit=1000") == [3, 4, 5, 6, 7]
    assert ns("/events") == [3, 4, 5, 6, 7]
    assert get(server, "/events?limit=<b>x</b>")[::2] == (
        400, b'{"error": "limit must be an integer"}')


def test_events_of_one_pattern_are_what_it_did_lately(server):
    """/events?pattern_id=ID (what an alert's pattern did lately): only that pattern's events,
    the last `limit` of them; an id with no events is an empty list, never an echo."""
    server.events.extend({"event": "sglang_error", "pattern_id": "ab"[i % 2], "n": i}
                         for i in range(4))
    server.events.append({"event": "sglang_unknown_error", "n": 4})
    def ns(path: str) -> list[int]:
        status, _, body = get(server, path)
        assert status == 200
        return [e["n"] for e in json.loads(body)]
    assert ns("/events?pattern_id=a") == [0, 2]
    assert ns("/events?pattern_id=b&limit=1") == [3]
    assert get(server, "/events?pattern_id=<script>")[::2] == (200, b"[]")


@pytest.mark.parametrize("target", [
    b"/../etc/passwd", b"/%2e%2e/etc/passwd", b"/?x=<script>alert(1)</script>",
    b"/metrics/../../etc/passwd", b"/metrics/", b"/events/x<script>", b"/", b"/healthz/",
])
def test_anything_else_is_404_without_echoing_the_request(server, target):
    """No files, no listing, and nothing of the path or query in the answer."""
    status, response = raw(server, b"GET " + target +
                           b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = response.partition(b"\r\n\r\n")[2]
    assert (status, body) == (404, b'{"error": "not found"}')
    for word in (b"passwd", b"script", b"etc", b"events/x"):
        assert word not in response


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
def test_only_get_is_allowed(server, method):
    """Every other method is 405 with Allow: GET, even on a path that exists."""
    status, headers, body = get(server, "/metrics", method=method,
                                data=b"x" * 1000 if method in ("POST", "PUT", "PATCH") else None)
    assert (status, headers["Allow"]) == (405, "GET")
    assert body == (b"" if method == "HEAD" else b'{"error": "method not allowed"}')


def test_an_unknown_method_and_a_malformed_request_get_fixed_bodies(server):
    """The stdlib's own errors (400, 501-ish) answer without repeating the request line."""
    status, response = raw(server, b"BREW /<script> HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 405 and b"script" not in response
    status, response = raw(server, b"GET /metrics HTTP/9<script>\r\n\r\n")
    assert status == 400 and b"script" not in response
    assert response.endswith(b'{"error": "bad request"}')


def test_oversized_request_heads_are_refused_and_the_server_keeps_serving(server):
    """Over 8 KiB of request line or headers: 414 / 431; just under the limit is served."""
    big = "a" * 9000
    assert raw(server, f"GET /{big} HTTP/1.1\r\nHost: x\r\n\r\n".encode())[0] == 414
    oversized = f"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n".encode()
    assert raw(server, oversized)[0] == 431
    many = "".join(f"X-H{i}: {'b' * 90}\r\n" for i in range(100))  # ~10 KiB in short lines
    assert raw(server, f"GET /metrics HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode())[0] == 431
    status, headers, _ = get(server, "/readyz", {"X-Fits": "c" * 7000})
    assert status == 503 and headers["Content-Type"] == "application/json; charset=utf-8"
    assert get(server, "/metrics")[0] == 200


def test_requests_are_not_logged(server, capfd):
    """A scrape every few seconds must not write a line to stderr (nor an error, nor a 404)."""
    for path in ("/metrics", "/healthz", "/nope", "/events?limit=x"):
        get(server, path)
    raw(server, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_keep_alive_serves_several_requests_on_one_connection(server):
    """Prometheus reuses its connection: two GETs, two answers, one socket."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rb")
        for _ in range(2):
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert f.readline() == b"HTTP/1.1 503 Service Unavailable\r\n"
            length = 0
            while (line := f.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert f.read(length) == b'{"status": "not_ready", "reason": "starting"}'


def test_parse_address():
    """--metrics-addr forms: host:port, [v6]:port, :port (all interfaces); others refused."""
    assert parse_address("127.0.0.1:9400") == ("127.0.0.1", 9400)
    assert parse_address("[::1]:0") == ("::1", 0)
    assert parse_address(":9400") == ("0.0.0.0", 9400)
    for bad in ("9400", "host:", "::1:9400", "h:70000"):
        with pytest.raises(ValueError):
            parse_address(bad)


# -- slow and many clients (issue 12) -----------------------------------------------------


def stalled(srv: HttpServer, n: int) -> list[socket.socket]:
    """n connections that send half a request head and then nothing."""
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        out.append(s)
    return out


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_at_the_cap_the_oldest_stalled_connection_makes_room_and_healthz_answers(clock, capfd):
    """max_connections=4, kept full of stalled clients (one more after each probe): /healthz
    answers every time, the server never holds more than 4 connections, the oldest stalled
    clients are the ones closed, and no cut is logged."""
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), clock=clock, max_connections=4)
    with srv:
        stall = stalled(srv, 4)
        try:
            for _ in range(6):
                assert get(srv, "/healthz")[0] == 200
                stall += stalled(srv, 1)
                assert len(srv._httpd._open) <= 4
            assert all(closed_by_server(s, 5) for s in stall[:6])
            assert not any(closed_by_server(s, 0.2) for s in stall[-3:])
            assert srv._httpd.evicted >= 6
        finally:
            for s in stall:
                s.close()
    assert capfd.readouterr() == ("", "")


def test_a_client_dribbling_its_request_is_cut_at_the_total_deadline(clock):
    """A byte every 0.25 s never trips a per-read timeout; the 1 s request deadline cuts it
    (generous bound: within 6 s), without an answer."""
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), clock=clock,
                     request_deadline=1.0)
    with srv, socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.setblocking(False)
        cut = False
        for byte in b"GET /metrics HTTP/1.1\r\nHost: x" * 2:
            try:
                s.send(bytes([byte]))
                cut = s.recv(1) == b""
            except BlockingIOError:
                pass
            except OSError:
                cut = True
            if cut:
                break
            time.sleep(0.25)
        assert cut, "still connected after 62 bytes at 4 per second"
        assert srv._httpd.expired == 1


def test_keep_alive_waits_get_a_fresh_deadline_after_each_answer(clock):
    """The deadline counts from the previous answer: a scraper reusing its connection for
    requests spread over twice the deadline is served every time."""
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), clock=clock,
                     request_deadline=2.0)
    with srv, socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        f = s.makefile("rb")
        for _ in range(8):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert f.readline() == b"HTTP/1.1 200 OK\r\n"
            length = 0
            while (line := f.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            f.read(length)
            time.sleep(0.5)


def test_stop_does_not_wait_for_stalled_clients(clock):
    """stop() cuts open connections instead of waiting out their deadline (60 s here)."""
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), clock=clock,
                     request_deadline=60.0)
    srv.start()
    stall = stalled(srv, 3)
    began = time.monotonic()
    srv.stop()
    assert time.monotonic() - began < 10
    assert all(closed_by_server(s, 5) for s in stall)
    for s in stall:
        s.close()


def test_caps_must_be_positive():
    for kwargs in ({"max_connections": 0}, {"request_deadline": 0.0}):
        with pytest.raises(ValueError):
            HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), **kwargs)


def _json_lines_only(err: str) -> list[dict]:
    lines = [line for line in err.splitlines() if line.strip()]
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            pytest.fail(f"stderr has a line that is not JSON: {line!r}\n--- all of it:\n{err}")
    return out


def _reset(srv: HttpServer, data: bytes) -> None:
    """Connect, send `data`, and reset the connection (SO_LINGER 0: RST instead of FIN)."""
    import struct
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.sendall(data)
    time.sleep(0.05)
    s.close()


def test_a_client_that_resets_mid_request_leaves_only_json_on_stderr(capfd, clock):
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), clock=clock)
    srv.start()
    try:
        for data in (b"GET /metr", b"GET /metrics HTTP/1.1\r\nHost: x\r\n", b"",
                     b"POST /x HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000):
            _reset(srv, data)
        assert get(srv, "/healthz")[0] == 200  # still serving
    finally:
        srv.stop()
    for entry in _json_lines_only(capfd.readouterr().err):
        assert entry["event"] == "http_client_gone" and entry["level"] == "info"


def test_a_failing_handler_is_one_json_error_line_not_a_raw_traceback(capfd, clock):
    """Before: socketserver's handle_error printed `Exception occurred during processing of
    request from …` and a traceback to stderr."""
    class Broken(EventRing):
        def encoded(self, limit, pattern_id=None):
            raise RuntimeError("ring broke")

    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), clock=clock, events=Broken(3))
    srv.start()
    try:
        with pytest.raises((urllib.error.URLError, ConnectionError, http_client_errors())):
            OPENER.open(srv.url + "/events", timeout=5).read()
        deadline, err = time.monotonic() + 5, ""
        while "during processing" not in err and "http_handler_failed" not in err \
                and time.monotonic() < deadline:
            time.sleep(0.02)
            err += capfd.readouterr().err
    finally:
        srv.stop()
    entries = _json_lines_only(err + capfd.readouterr().err)
    assert [(e["event"], e["level"]) for e in entries] == [("http_handler_failed", "error")]
    assert "RuntimeError: ring broke" in entries[0]["error"]
    assert "ring broke" in entries[0]["traceback"]


def http_client_errors() -> type[Exception]:
    import http.client
    return http.client.HTTPException


def test_the_logger_can_be_given():
    from structlog.testing import CapturingLogger
    log = CapturingLogger()
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), log=log)
    srv.start()
    try:
        _reset(srv, b"GET /met")
        deadline = time.monotonic() + 5
        while not log.calls and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        srv.stop()
    assert [c.args[0] for c in log.calls] == ["http_client_gone"]


# -- /events within bounds (issue 34, item 6) ----------------------------------------------


def test_a_long_event_is_kept_cut_with_a_marker_and_the_ring_is_bounded_by_bytes():
    """A 64K-character emoji message (256 KB of JSON) is kept cut, its marker saying how much
    went; short events are kept whole; the ring drops its oldest past its byte bound."""
    from matcher.sinks.ring import EVENT_MAX_BYTES

    ring = EventRing(1000, max_bytes=200_000)
    ring.append({"event": "sglang_error", "message": "\N{GRINNING FACE}" * 64_000,
                 "traceback": "x" * 100_000, "n": 0})
    [kept] = ring.recent(1)
    assert len(json.dumps(kept, ensure_ascii=False).encode()) <= EVENT_MAX_BYTES
    assert "more characters" in kept["message"] and "[cut for /events:" in kept["traceback"]
    assert kept["n"] == 0
    ring.extend({"event": "sglang_error", "message": "m" * 1000, "n": i} for i in range(1, 400))
    assert ring.nbytes <= 200_000
    assert ring.recent(1)[0] == {"event": "sglang_error", "message": "m" * 1000, "n": 399}
    assert len(ring) < 400


def test_events_answers_past_the_in_flight_cap_get_503_and_one_is_always_served(clock):
    """The bytes of /events answers being written are capped: past the cap a request gets
    503 with Retry-After; alone, an answer is served even when larger than the cap."""
    ring = EventRing(50)
    ring.extend({"event": "sglang_error", "message": "m" * 10_000, "n": i} for i in range(50))
    refusals: list[str] = []
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), clock=clock, events=ring,
                     events_inflight_bytes=100_000, refused=refusals.append)
    srv.start()
    try:
        status, _, body = get(srv, "/events?limit=50")  # ~500 KB, above the cap, alone
        assert status == 200 and len(json.loads(body)) == 50
        deadline = time.monotonic() + 5  # the handler releases its bytes after its last write
        while srv.inflight_bytes and time.monotonic() < deadline:
            time.sleep(0.01)
        assert srv.reserve(60_000)  # another answer being written
        status, headers, body = get(srv, "/events?limit=50")
        assert (status, headers["Retry-After"]) == (503, "1")
        assert refusals == ["busy"]  # counted (sglang_matcher_events_requests_refused_total)
        assert get(srv, "/events?limit=2")[0] == 200  # small enough to fit beside it
        assert get(srv, "/metrics")[0] == 200
        srv.release(60_000)
        assert get(srv, "/events?limit=50")[0] == 200
    finally:
        srv.stop()


@pytest.mark.parametrize(("access", "peer", "allowed"), [
    ("local", "127.0.0.1", True), ("local", "127.8.9.1", True), ("local", "::1", True),
    ("local", "::ffff:127.0.0.1", True), ("local", "10.0.0.7", False),
    ("local", "fd00::2", False), ("local", "not an ip", False),
    ("any", "10.0.0.7", True), ("off", "127.0.0.1", False),
])
def test_events_access_decides_by_the_peer(access, peer, allowed):
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), events_access=access)
    assert srv.events_allowed(peer) is allowed


def test_events_off_is_403_and_metrics_still_answer(clock):
    refusals: list[str] = []
    srv = HttpServer("127.0.0.1", 0, registry=CollectorRegistry(), clock=clock,
                     events_access="off", refused=refusals.append)
    srv.start()
    try:
        status, _, body = get(srv, "/events")
        assert status == 403 and json.loads(body)["error"] == "forbidden"
        assert get(srv, "/metrics")[0] == 200
        assert refusals == ["forbidden"]
    finally:
        srv.stop()


def test_an_event_too_large_even_cut_keeps_what_says_what_it_was():
    from matcher.sinks.ring import EVENT_MAX_BYTES

    ring = EventRing(3)
    ring.append({"event": "sglang_error", "pattern_id": "p", "message": "m" * 500,
                 "consequences": ["c" * 100] * 5000})
    [kept] = ring.recent(1)
    assert kept["event"] == "sglang_error" and kept["pattern_id"] == "p"
    assert "consequences" not in kept and "[cut for /events:" in kept["message"]
    assert len(json.dumps(kept, ensure_ascii=False).encode()) <= EVENT_MAX_BYTES
