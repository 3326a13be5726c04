"""The daemon's HTTP endpoint: `/metrics`, `/healthz`, `/readyz` and `/events`, GET only.

A stdlib `ThreadingHTTPServer` in a daemon thread; the main loop never waits on it. It serves
four fixed paths and nothing else: no files, no directory listing, and no response ever repeats
the request's path, query or headers back (error bodies are fixed JSON). A request whose line
and headers exceed 8 KiB is refused (414/431), a request that sends nothing is cut off after
`REQUEST_TIMEOUT` seconds, and requests are not logged.

- `/metrics`: the injected registry, in Prometheus text format, or OpenMetrics when the
  `Accept` header asks for it (prometheus-client's own negotiation).
- `/healthz`: 200 while the main loop's `heartbeat()` is at most `stale_after` seconds old, 503
  with a JSON reason when it stalls (a liveness probe then restarts the process). The clock
  starts at `start()`, so a process gets `stale_after` seconds before its first beat.
- `/readyz`: 503 until `set_ready(True)` (catalog loaded, sources open), then 200.
- `/events?limit=N`: the last N emitted events (already redacted dicts) from an `EventRing`,
  oldest first, N clamped to [1, maxlen]; what fell out of the ring is gone (stdout has it).
  `&pattern_id=ID` keeps only that pattern's events: the alert rules' runbook link
  (deploy/prometheus) opens the failures an alert is about, each with its remediation.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

MAX_HEAD_BYTES = 8 * 1024
REQUEST_TIMEOUT = 10.0
DEFAULT_EVENTS_LIMIT = 100
_JSON = "application/json; charset=utf-8"


class EventRing:
    """The most recent `maxlen` event dicts; the daemon appends, HTTP threads read."""

    def __init__(self, maxlen: int = 1000) -> None:
        if maxlen < 1:
            raise ValueError("EventRing maxlen must be at least 1")
        self.maxlen = maxlen
        self._items: deque[dict[str, Any]] = deque(maxlen=maxlen)
        self._lock = threading.Lock()

    def append(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._items.append(event)

    def extend(self, events: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self._items.extend(events)

    def recent(self, limit: int, pattern_id: str | None = None) -> list[dict[str, Any]]:
        """The last `limit` events (of `pattern_id` only, if given), oldest first (`limit`
        clamped to [1, maxlen])."""
        limit = min(max(1, limit), self.maxlen)
        with self._lock:
            items = list(self._items)
        if pattern_id is not None:
            items = [e for e in items if e.get("pattern_id") == pattern_id]
        return items[-limit:]

    def __len__(self) -> int:
        return len(self._items)


def parse_address(addr: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT` or `:PORT` (all interfaces) → (host, port); ValueError if not."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"not an address of the form HOST:PORT: {addr!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"an IPv6 address needs brackets, as in [::1]:9400: {addr!r}")
    return host or "0.0.0.0", int(port_text)


class HttpServer:
    """Serves the registry, health, readiness and recent events on HOST:PORT (port 0: any)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        registry: CollectorRegistry,
        events: EventRing | None = None,
        stale_after: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.registry = registry
        self.events = events if events is not None else EventRing(1)
        self.stale_after = stale_after
        self.clock = clock
        self._beat = clock()
        self._ready = False
        self._not_ready_reason = "starting"
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Bind and serve in a daemon thread; OSError (address in use, …) reaches the caller."""
        if self._httpd is not None:
            return
        server_cls = _Server6 if ":" in self.host else _Server
        httpd = server_cls((self.host, self.requested_port), _Handler)
        httpd.app = self
        self._httpd = httpd
        self._beat = self.clock()
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="matcher-http", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for); only after `start()`."""
        if self._httpd is None:
            raise RuntimeError("HttpServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -- what the main loop tells it ------------------------------------------------------

    def heartbeat(self) -> None:
        self._beat = self.clock()

    def set_ready(self, ready: bool, reason: str = "not ready") -> None:
        """`reason` (a fixed phrase chosen by the caller) is what /readyz says while not ready."""
        self._ready = ready
        self._not_ready_reason = reason

    # -- responses (called from handler threads) ------------------------------------------

    def healthz(self) -> tuple[int, dict[str, Any]]:
        age = self.clock() - self._beat
        if age > self.stale_after:
            return 503, {"status": "stalled",
                         "reason": f"main loop heartbeat is {age:.1f} s old "
                                   f"(limit {self.stale_after:g} s)",
                         "heartbeat_age_seconds": round(age, 3)}
        return 200, {"status": "ok", "heartbeat_age_seconds": round(age, 3)}

    def readyz(self) -> tuple[int, dict[str, Any]]:
        if self._ready:
            return 200, {"status": "ready"}
        return 503, {"status": "not_ready", "reason": self._not_ready_reason}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: HttpServer


class _Server6(_Server):
    address_family = socket.AF_INET6


class _HeadLimit:
    """`rfile` while headers are parsed: raises LineTooLong once the head passes its budget."""

    def __init__(self, raw: Any, budget: int) -> None:
        self._raw = raw
        self._left = budget

    def readline(self, size: int = -1) -> bytes:
        cap = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line: bytes = self._raw.readline(cap)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.LineTooLong("request head")
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "sglang-matcher"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"  # so that even a garbled request gets a status line
    timeout = REQUEST_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: a scrape every few seconds is not news."""

    def handle_one_request(self) -> None:
        try:
            self.raw_requestline = self.rfile.readline(MAX_HEAD_BYTES + 1)
            if not self.raw_requestline:
                self.close_connection = True
                return
            if len(self.raw_requestline) > MAX_HEAD_BYTES:
                self.requestline, self.request_version, self.command = "", "", ""
                self._refuse(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            raw, self.rfile = self.rfile, _HeadLimit(self.rfile,  # type: ignore[assignment]
                                                     MAX_HEAD_BYTES - len(self.raw_requestline))
            try:
                parsed = self.parse_request()
            finally:
                self.rfile = raw
            if not parsed:
                self._discard_input()
                return
            if self.command != "GET":
                self._refuse(HTTPStatus.METHOD_NOT_ALLOWED, [("Allow", "GET")])
                return
            has_body = self.headers.get("Content-Length", "0") != "0"
            if has_body or "Transfer-Encoding" in self.headers:
                self._refuse(HTTPStatus.BAD_REQUEST)
                return
            self._get()
            self.wfile.flush()
        except TimeoutError:
            self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Every error the stdlib raises gets the same fixed body: nothing of the request in it."""
        self._respond(code, _error_body(code), _JSON, [("Connection", "close")])

    def _refuse(self, code: int, headers: list[tuple[str, str]] | None = None) -> None:
        self._respond(code, _error_body(code), _JSON, [*(headers or []), ("Connection", "close")])
        self._discard_input()

    def _get(self) -> None:
        app = self.server.app
        url = urlsplit(self.path)
        if url.path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            try:
                body = encoder(app.registry)
            except Exception:  # noqa: BLE001 — a failing collector must not kill the thread
                self._respond(500, _error_body(500), _JSON)
                return
            self._respond(200, body, content_type)
        elif url.path == "/healthz":
            self._respond(*_json(*app.healthz()))
        elif url.path == "/readyz":
            self._respond(*_json(*app.readyz()))
        elif url.path == "/events":
            limit = _limit(url.query)
            if limit is None:
                self._respond(400, _json_bytes({"error": "limit must be an integer"}), _JSON)
                return
            pattern_id = parse_qs(url.query).get("pattern_id", [None])[-1]
            self._respond(*_json(200, app.events.recent(limit, pattern_id)))
        else:
            self._respond(404, _error_body(404), _JSON)

    def _respond(self, code: int, body: bytes, content_type: str,
                 headers: Iterable[tuple[str, str]] = ()) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _discard_input(self) -> None:
        """After refusing a request, read (a bounded amount of) what the client is still sending,
        so that closing the socket does not reset the connection before it reads the answer."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.5)
            left = 1 << 20
            while left > 0:
                data = self.connection.recv(min(left, 65536))
                if not data:
                    break
                left -= len(data)
        except OSError:
            pass


def _limit(query: str) -> int | None:
    values = parse_qs(query).get("limit")
    if not values:
        return DEFAULT_EVENTS_LIMIT
    try:
        return int(values[-1])
    except ValueError:
        return None


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")


def _json(code: int, value: Any) -> tuple[int, bytes, str]:
    return code, _json_bytes(value), _JSON


def _error_body(code: int) -> bytes:
    try:
        phrase = HTTPStatus(code).phrase.lower()
    except ValueError:
        phrase = "error"
    return _json_bytes({"error": phrase})
