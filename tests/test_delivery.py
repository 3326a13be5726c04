"""The delivery core of the HTTP sinks (`matcher/sinks/delivery.py`) against real HTTP servers
on 127.0.0.1: the per-POST deadline, `Retry-After`, refused redirects, the bounded queue, close
with a deadline, one `Idempotency-Key` per batch, and every item counted exactly once."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import CapturingLogger

from matcher.sinks.delivery import Answer, Delivery, RetryPolicy
from matcher.telemetry import Telemetry

Respond = Callable[[BaseHTTPRequestHandler, int], None]  # (handler, index of the POST)


def ok(h: BaseHTTPRequestHandler, status: int = 200, headers: dict[str, str] | None = None
       ) -> None:
    h.send_response(status)
    for name, value in (headers or {}).items():
        h.send_header(name, value)
    h.send_header("Content-Length", "0")
    h.end_headers()


class Endpoint:
    """A server that records each POST (its headers and body) and answers with `respond`."""

    def __init__(self, respond: Respond = lambda h, n: ok(h)) -> None:
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.released = threading.Event()  # set at the end: whatever a handler waits on ends
        self.arrived = threading.Condition()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with endpoint.arrived:
                    endpoint.posts.append((dict(self.headers), body))
                    n = len(endpoint.posts) - 1
                    endpoint.arrived.notify_all()
                try:
                    respond(self, n)
                except OSError:
                    pass  # the client went away (its deadline, close())

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.endpoint = self  # type: ignore[attr-defined]  # for `endpoint_released`
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/in"

    def wait_posts(self, n: int, timeout: float = 10.0) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.posts) >= n, timeout), \
                f"{len(self.posts)} POSTs, not {n}"

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def endpoint_released(h: BaseHTTPRequestHandler) -> None:
    """Answer nothing until the endpoint is closed."""
    h.server.endpoint.released.wait(30)  # type: ignore[attr-defined]


class Items:
    """An exporter of strings, one JSON list per batch; 2xx ok, 429/5xx retried, else refused."""

    def encode(self, items: Sequence[str]) -> bytes:
        return json.dumps(list(items)).encode()

    def answer(self, status: int, body: bytes) -> Answer:
        if 200 <= status < 300:
            return Answer("ok")
        if status == 429 or status >= 500:
            return Answer("retry", f"HTTP {status}")
        return Answer("rejected", f"HTTP {status}")


@pytest.fixture
def endpoints() -> Iterator[Callable[..., Endpoint]]:
    made: list[Endpoint] = []

    def make(respond: Respond = lambda h, n: ok(h)) -> Endpoint:
        made.append(Endpoint(respond))
        return made[-1]

    yield make
    for e in made:
        e.close()


class Counts:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.log = CapturingLogger()
        self.events = Telemetry(self.registry, self.log).delivery("webhook")

    def __call__(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(f"sglang_matcher_webhook_{name}", labels)
        return value or 0.0

    def settled(self) -> float:
        """Items counted as delivered, dropped or failed (for any reason)."""
        return self("delivered_total") + self("dropped_total") + sum(
            self("failed_total", reason=r) for r in ("rejected", "retries_exhausted", "shutdown"))

    def wait(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < end, "not reached before the deadline"
            time.sleep(0.01)


@pytest.fixture
def counts() -> Counts:
    return Counts()


@pytest.fixture
def deliveries(counts: Counts) -> Iterator[Callable[..., Delivery[str]]]:
    made: list[Delivery[str]] = []

    def make(url: str, **kw: object) -> Delivery[str]:
        kw.setdefault("retry", RetryPolicy(max_retries=3, backoff_initial=0.01))
        made.append(Delivery("test", url, Items(), events=counts.events, **kw))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for d in made:
        d.close(timeout=0.1)


def test_a_server_slower_than_the_deadline_is_retried_with_the_same_key(endpoints, deliveries,
                                                                        counts):
    """A POST unanswered past its deadline is a timeout: retried, the same Idempotency-Key on
    each try, then given up — never counted as delivered."""
    slow = endpoints(lambda h, n: endpoint_released(h))
    d = deliveries(slow.url, timeout=0.3, retry=RetryPolicy(max_retries=1, backoff_initial=0.01))
    d.accept(["a"])
    counts.wait(lambda: counts("failed_total", reason="retries_exhausted") == 1)
    keys = [headers["Idempotency-Key"] for headers, _ in slow.posts]
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 32
    assert (counts("delivered_total"), counts("retries_total")) == (0, 1)


def test_the_deadline_bounds_the_whole_post_not_each_read(endpoints, deliveries, counts):
    """An answer that trickles one byte at a time, each well within `timeout`, still ends the
    POST at its deadline (a timeout per read would wait on it for ever)."""

    def trickle(h: BaseHTTPRequestHandler, n: int) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        h.wfile.flush()
        released = h.server.endpoint.released  # type: ignore[attr-defined]
        while not released.wait(0.05):
            h.wfile.write(b"x")
            h.wfile.flush()

    slow = endpoints(trickle)
    d = deliveries(slow.url, timeout=0.5, retry=RetryPolicy(max_retries=0))
    d.accept(["a"])
    counts.wait(lambda: counts("failed_total", reason="retries_exhausted") == 1)
    assert counts("delivered_total") == 0


def test_retry_after_is_honoured_within_its_ceiling(endpoints, deliveries, counts, monkeypatch):
    """429 `Retry-After: 3` waits 3 s (not the 10 ms backoff); `Retry-After: 3600` waits the
    ceiling; the waits are read where the core takes them, not timed."""
    answers = [(429, {"Retry-After": "3"}), (429, {"Retry-After": "3600"}), (200, {})]
    busy = endpoints(lambda h, n: ok(h, *answers[min(n, 2)]))
    d = deliveries(busy.url, retry=RetryPolicy(max_retries=3, backoff_initial=0.01,
                                               retry_after_max=20.0))
    waits: list[float] = []
    monkeypatch.setattr(d, "_sleep", lambda s: waits.append(s) or True)
    d.accept(["a"])
    counts.wait(lambda: counts("delivered_total") == 1)
    assert waits == [3.0, 20.0]
    assert counts("retries_total") == 2 and len(busy.posts) == 3


def test_a_redirect_is_refused_and_its_target_never_reached(endpoints, deliveries, counts):
    elsewhere = endpoints()
    mover = endpoints(lambda h, n: ok(h, 307, {"Location": elsewhere.url}))
    d = deliveries(mover.url)
    d.accept(["a"])
    counts.wait(lambda: counts("failed_total", reason="rejected") == 1)
    assert (len(mover.posts), elsewhere.posts) == (1, [])


def test_a_full_queue_drops_the_oldest_and_every_item_is_counted_once(endpoints, deliveries,
                                                                       counts):
    gate = threading.Event()
    held = endpoints(lambda h, n: (gate.wait(30), ok(h)))
    d = deliveries(held.url, queue_size=3)
    d.accept(["0"])
    held.wait_posts(1)  # "0" is in flight
    d.accept([str(n) for n in range(1, 11)])
    assert (d.queued, counts("dropped_total"), counts("queue_events")) == (3, 7, 3)
    gate.set()
    counts.wait(lambda: counts("delivered_total") == 4)
    assert [json.loads(body) for _, body in held.posts] == [["0"], ["8"], ["9"], ["10"]]
    assert counts.settled() == 11


def test_close_returns_by_its_deadline_and_counts_what_was_not_sent(endpoints, deliveries,
                                                                    counts):
    """The endpoint never answers: close(0.5) returns well within a generous bound, cuts the
    POST under way, and counts it and the queued items as `shutdown` — once each."""
    stuck = endpoints(lambda h, n: endpoint_released(h))
    d = deliveries(stuck.url, timeout=60.0)
    d.accept(["0"])
    stuck.wait_posts(1)
    d.accept(["1", "2"])
    started = time.monotonic()
    assert d.close(timeout=0.5) == 3
    assert time.monotonic() - started < 10
    assert counts("failed_total", reason="shutdown") == 3
    counts.wait(lambda: not d.alive)
    assert counts.settled() == 3 and counts("queue_events") == 0
    d.accept(["late"])  # after close: dropped, counted
    assert counts("dropped_total") == 1


def test_batches_keep_order_and_their_key_across_retries(endpoints, deliveries, counts):
    """Items go in batches of `max_batch`, in order; a 503 then 200 sends the same body with the
    same key twice; a new batch has a new key."""
    flaky = endpoints(lambda h, n: ok(h, 503 if n == 0 else 200))
    d = deliveries(flaky.url, max_batch=2, batch_delay=0.0)
    d.accept(["a", "b", "c"])
    counts.wait(lambda: counts("delivered_total") == 3)
    (h0, b0), (h1, b1), (h2, b2) = flaky.posts
    assert (json.loads(b0), json.loads(b1), json.loads(b2)) == (["a", "b"], ["a", "b"], ["c"])
    assert h0["Idempotency-Key"] == h1["Idempotency-Key"] != h2["Idempotency-Key"]
    retried = [c.kwargs for c in counts.log.calls if c.args[0] == "webhook_retry"]
    assert retried == [{"endpoint": d.endpoint, "detail": "HTTP 503", "attempt": 1, "events": 2}]
