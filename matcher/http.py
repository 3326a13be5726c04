"""The daemon's HTTP endpoint: `/metrics`, `/healthz`, `/readyz` and `/events`, GET only.

A stdlib `ThreadingHTTPServer` in a daemon thread; the main loop never waits on it. It serves
four fixed paths and nothing else: no files, no directory listing, and no response ever repeats
the request's path, query or headers back (error bodies are fixed JSON). A request whose line
and headers exceed 8 KiB is refused (414/431), and requests are not logged. What the server
logs goes through the structlog logger it is given (`log`; default: JSON lines on stderr): a
client that resets or drops its connection is counted and logged at most once a minute with the
count, a failing handler as an error with its traceback in a field — never a raw traceback.

- `/metrics`: the injected registry, in Prometheus text format, or OpenMetrics when the
  `Accept` header asks for it (prometheus-client's own negotiation).
- `/healthz`: 200 while the main loop's `heartbeat()` is at most `stale_after` seconds old, 503
  with a JSON reason when it stalls (a liveness probe then restarts the process). The clock
  starts at `start()`, so a process gets `stale_after` seconds before its first beat.
- `/readyz`: 503 until `set_ready(True)` (catalog loaded, sources open), then 200.
- `/events?limit=N`: the last N emitted events (already redacted, each cut to the ring's
  bound) from an `EventRing`, oldest first, N clamped to [1, maxlen]; what fell out of the ring
  is gone (stdout has it). `&pattern_id=ID` keeps only that pattern's events: the alert rules'
  runbook link (deploy/prometheus) opens the failures an alert is about, each with its
  remediation. Served, by default, only to clients on this host (`events_access = "local"`: a
  loopback peer, as `kubectl port-forward` and `curl localhost` are); `"any"` serves every
  client (behind a network policy or an authenticating proxy: events carry log text),
  `"off"` none. The others get 403; `/metrics` and the probes are served to every client.

Memory (slow readers of `/events` must not each hold a rendered copy): a response is
the ring's kept JSON, joined as it is written, never rendered whole; what the responses being
written hold together is capped at `events_inflight_bytes` (default 64 MiB, counted at their
full size): past it a request gets 503 with `Retry-After`, unless it is the only one.

Slow and many clients (stalled connections must not take a thread and a descriptor each,
starve the log reader of descriptors or time /healthz out) meet two bounds, both
kept by the accept loop, so no slow client can stop them:

- At most `max_connections` (default 64) connections are open. At the cap, a new connection is
  taken and the oldest one still waiting for its request is closed to make room (when all are
  busy answering, the oldest of those). A probe sends its request as soon as it connects, so it
  is the newest, never the one closed: `/healthz` answers while the cap is full of clients that
  stall. Refusing the newcomer instead would hand the port to whoever connected first; a 503
  cannot be written reliably without first reading the request (closing a socket with unread
  input resets the connection), and reading is what a slow client stalls. Connects wait for
  accept() in a listen queue of `LISTEN_BACKLOG` (past it the kernel drops SYNs, retried after
  1 s): a probe waits behind the connects queued before it, about a millisecond each.
- Every request has a total deadline, `request_deadline` (default 10 s), from the connection's
  accept (or its previous answer, under keep-alive) to the end of its answer: a client that
  sends a byte every 9 s is cut at 10 s, not served forever by a per-read timeout. The accept
  loop checks it every 0.1 s and shuts the socket down, which ends the handler's thread.

What can be lost: an evicted or late client's request (no answer; it reconnects), and with a
slow reader of `/events`, the rest of the answer. Descriptors and threads stay at
`max_connections` plus the few being closed: the daemon budgets its files with that reserve
(`matcher.limits`).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self
from urllib.parse import parse_qs, urlsplit

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from matcher.config import EVENTS_ACCESS
from matcher.sinks.ring import EventRing

MAX_HEAD_BYTES = 8 * 1024
MAX_CONNECTIONS = 64  # Prometheus, a probe or two and people: far fewer at once
REQUEST_DEADLINE = 10.0  # seconds; Prometheus's default scrape timeout is 10 s too
LISTEN_BACKLOG = 1024  # connects waiting for accept(); past it, the kernel drops SYNs
DEFAULT_EVENTS_LIMIT = 100
EVENTS_INFLIGHT_BYTES = 64 * 1024 * 1024  # /events responses being written, together
# Why an /events request was refused: a client `events_access` does not allow (403), or the
# in-flight byte cap reached (503).
RefusedReason = Literal["forbidden", "busy"]
_WRITE_BLOCK = 64 * 1024  # a response is written in pieces of about this size
_JSON = "application/json; charset=utf-8"
CLIENT_ERRORS_EVERY = 60.0  # seconds: clients gone mid-request are logged at most this often


def default_log() -> Any:
    """The daemon's diagnostic logger: structlog JSON lines on stderr."""
    return structlog.wrap_logger(
        structlog.PrintLogger(sys.stderr),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
    )


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
        max_connections: int = MAX_CONNECTIONS,
        request_deadline: float = REQUEST_DEADLINE,
        log: Any | None = None,
        events_access: str = "local",
        events_inflight_bytes: int = EVENTS_INFLIGHT_BYTES,
        refused: Callable[[RefusedReason], None] | None = None,
    ) -> None:
        if max_connections < 1 or not request_deadline > 0:
            raise ValueError("max_connections must be at least 1 and request_deadline positive")
        if events_access not in EVENTS_ACCESS:
            raise ValueError(f"events_access must be one of {', '.join(EVENTS_ACCESS)}")
        self.events_access = events_access
        self.events_inflight_bytes = events_inflight_bytes
        self._inflight = 0  # bytes of /events responses being written
        self._inflight_lock = threading.Lock()
        self.events_refused = 0  # /events requests answered 503 for the byte cap
        # Told of each /events request refused (Telemetry counts them by reason).
        self.refused = refused if refused is not None else (lambda reason: None)
        self.max_connections = max_connections
        self.request_deadline = request_deadline
        self.host = host
        self.requested_port = port
        self.registry = registry
        self.events = events if events is not None else EventRing(1)
        self.stale_after = stale_after
        self.clock = clock
        # Everything the server has to say goes here, as structlog lines: the stdlib's own
        # stderr writers (request logging, `handle_error`'s traceback) are replaced.
        self.log = log if log is not None else default_log()
        self._beat = clock()
        self._ready = False
        self._not_ready_reason = "starting"
        self._matching_nothing: list[str] = []
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Bind and serve in a daemon thread; OSError (address in use, …) reaches the caller."""
        if self._httpd is not None:
            return
        server_cls = _Server6 if ":" in self.host else _Server
        httpd = server_cls((self.host, self.requested_port), _Handler,
                           max_connections=self.max_connections,
                           request_deadline=self.request_deadline)
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

    def set_watching(self, matching_nothing: list[str]) -> None:
        """Configured paths that follow no file now: /readyz lists them (still 200 — the log may
        appear later — but a probe's body and a human with curl see it)."""
        self._matching_nothing = list(matching_nothing)

    # -- responses (called from handler threads) ------------------------------------------

    def events_allowed(self, peer: str) -> bool:
        """`/events` for a client at `peer` (its IP address), as `events_access` says."""
        if self.events_access == "any":
            return True
        if self.events_access == "off":
            return False
        try:
            ip = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:
            return False
        mapped = getattr(ip, "ipv4_mapped", None)
        return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))

    def reserve(self, size: int) -> bool:
        """Room for an `/events` response of `size` bytes under the in-flight cap (always
        for a response when no other is being written: the ring's bound keeps it finite)."""
        with self._inflight_lock:
            if self._inflight and self._inflight + size > self.events_inflight_bytes:
                self.events_refused += 1
                return False
            self._inflight += size
            return True

    def release(self, size: int) -> None:
        with self._inflight_lock:
            self._inflight -= size

    @property
    def inflight_bytes(self) -> int:
        return self._inflight

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
            if self._matching_nothing:
                return 200, {"status": "ready", "matching_nothing": self._matching_nothing,
                             "warning": "configured paths follow no file"}
            return 200, {"status": "ready"}
        return 503, {"status": "not_ready", "reason": self._not_ready_reason}


@dataclass(slots=True)
class _Connection:
    since: float  # monotonic time its current wait for a request, or request, began
    busy: bool = False  # its request head is read; the answer is being made or written


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most `max_connections` of them, each request within
    `request_deadline` (see the module docstring). `_open` holds every connection whose socket
    is not closed yet; a socket is only ever shut down while in it, and only closed after
    leaving it, both under `_lock`, so a cut can never reach a descriptor number reused by a
    newer connection."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    app: HttpServer

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *,
                 max_connections: int, request_deadline: float) -> None:
        self.max_connections = max_connections
        self.request_deadline = request_deadline
        self._lock = threading.Lock()
        self._open: dict[socket.socket, _Connection] = {}
        self.evicted = 0  # connections closed to make room at the cap
        self.expired = 0  # connections closed at their request deadline
        self.client_errors = 0  # connections the client reset or dropped mid-request
        self._errors_logged = 0  # client_errors already logged
        self._errors_logged_at: float | None = None
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """In the accept loop: make room at the cap, then hand the connection to a thread."""
        with self._lock:
            if len(self._open) >= self.max_connections:
                oldest = min(self._open, key=lambda s: (self._open[s].busy, self._open[s].since))
                self._cut(oldest)
                self.evicted += 1
            self._open[request] = _Connection(time.monotonic())
        super().process_request(request, client_address)

    def service_actions(self) -> None:
        """In the accept loop, at least every poll interval: cut requests past their deadline."""
        now = time.monotonic()
        with self._lock:
            late = [s for s, c in self._open.items() if now - c.since >= self.request_deadline]
            for sock in late:
                self._cut(sock)
            self.expired += len(late)

    def request_began(self, request: socket.socket) -> None:
        with self._lock:
            if (conn := self._open.get(request)) is not None:
                conn.busy = True

    def request_ended(self, request: socket.socket) -> None:
        """Answered: under keep-alive, the wait for the next request starts a new deadline."""
        with self._lock:
            if (conn := self._open.get(request)) is not None:
                conn.busy, conn.since = False, time.monotonic()

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)
            super().shutdown_request(request)

    def server_close(self) -> None:
        """Cut every open connection first, so that joining their threads does not wait."""
        with self._lock:
            for sock in list(self._open):
                self._cut(sock)
        super().server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Through the app's structlog logger only, never the stdlib's traceback on stderr. A
        client gone, cut or too slow (an OSError: a reset, a broken pipe, a timeout) is counted
        and logged at most every `CLIENT_ERRORS_EVERY` seconds with the count; anything else is
        a bug in a handler, logged as an error with its traceback in a field."""
        error = sys.exc_info()[1]
        log = self.app.log
        if isinstance(error, OSError):
            with self._lock:
                self.client_errors += 1
                now = time.monotonic()
                last = self._errors_logged_at
                if last is not None and now - last < CLIENT_ERRORS_EVERY:
                    return
                count = self.client_errors - self._errors_logged
                self._errors_logged, self._errors_logged_at = self.client_errors, now
            log.info("http_client_gone", count=count, error=type(error).__name__,
                     detail=str(error))
            return
        log.error("http_handler_failed",
                  error=f"{type(error).__name__}: {error}" if error else "unknown",
                  traceback=traceback.format_exc())

    def _cut(self, sock: socket.socket) -> None:
        """Shut the socket down (its thread's read or write returns at once); its thread
        closes it. Called with `_lock` held."""
        del self._open[sock]
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # the peer is gone already


class _Server6(_Server):
    address_family = socket.AF_INET6


class _HeadLimit:
    """`rfile` while headers are parsed: raises LineTooLong once the head passes its budget;
    `cut_short` once a line ended without its newline (the client, or a cut, closed the
    connection mid-head: the stdlib would take what came as the whole head)."""

    def __init__(self, raw: Any, budget: int) -> None:
        self._raw = raw
        self._left = budget
        self.cut_short = False

    def readline(self, size: int = -1) -> bytes:
        cap = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line: bytes = self._raw.readline(cap)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.LineTooLong("request head")
        self.cut_short = self.cut_short or not line.endswith(b"\n")
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "sglang-matcher"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"  # so that even a garbled request gets a status line

    def setup(self) -> None:
        # Each read and write waits at most the whole deadline, even if the accept loop that
        # enforces the deadline itself were stopped.
        self.timeout = self.server.request_deadline  # type: ignore[misc]  # per connection
        super().setup()

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
            if not self.raw_requestline.endswith(b"\n"):
                self.close_connection = True  # closed mid-line: nobody to answer
                return
            raw, head = self.rfile, _HeadLimit(self.rfile,
                                               MAX_HEAD_BYTES - len(self.raw_requestline))
            self.rfile = head  # type: ignore[assignment]
            try:
                parsed = self.parse_request()
            finally:
                self.rfile = raw
            if head.cut_short:
                # An evicted or late client's half head parses as a whole request: answering
                # it would render /metrics for nobody, once per cut.
                self.close_connection = True
                return
            self.server.request_began(self.request)
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
            self.server.request_ended(self.request)
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
            if not app.events_allowed(str(self.client_address[0])):
                app.refused("forbidden")
                self._respond(403, _json_bytes({
                    "error": "forbidden", "reason": "/events is served to clients on this "
                    "host only (events_access); /metrics and the probes to every client"}),
                    _JSON)
                return
            pattern_id = parse_qs(url.query).get("pattern_id", [None])[-1]
            self._events(app.events.encoded(limit, pattern_id))
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

    def _events(self, items: list[bytes]) -> None:
        """The events as one JSON list, written a block at a time from the ring's own bytes
        (nothing rendered per client), within the in-flight byte cap."""
        app = self.server.app
        size = 2 + sum(len(data) for data in items) + 2 * max(0, len(items) - 1)
        if not app.reserve(size):
            app.refused("busy")
            self._respond(503, _json_bytes({"error": "service unavailable",
                                            "reason": "too many /events answers being written"}),
                          _JSON, [("Retry-After", "1")])
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", _JSON)
            self.send_header("Content-Length", str(size))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if self.command == "HEAD":
                return
            block: list[bytes] = [b"["]
            held = 1
            for i, data in enumerate(items):
                if i:
                    block.append(b", ")
                block.append(data)
                held += len(data) + 2
                if held >= _WRITE_BLOCK:
                    self.wfile.write(b"".join(block))
                    block, held = [], 0
            block.append(b"]")
            self.wfile.write(b"".join(block))
        finally:
            app.release(size)

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
