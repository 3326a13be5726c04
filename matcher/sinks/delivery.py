"""Delivery over HTTP for the sinks that POST events elsewhere (the webhook, OTLP): one core.

A sink gives an `Exporter` — how a batch of its items is encoded and how an answer is read —
and the core does the rest, the same way for both:

- `accept()` only appends to a bounded queue and returns: a slow or dead endpoint never slows
  reading. When the queue is full the *oldest* items go (`dropped`): the newest say most about
  the current state.
- One worker thread sends batches (up to `max_batch` items, at most `batch_delay` seconds after
  the first was queued), in order, each POST within a deadline of its own (`timeout` seconds
  from connecting to the last byte of the answer; past it the POST counts as a timeout).
- Connection errors, timeouts and the answers the exporter calls retryable are tried again after
  a doubling backoff (`RetryPolicy`, with jitter when the sink asks for it), or after the answer's
  `Retry-After` when that is longer (up to `retry_after_max`). Every try of one batch carries the
  same `Idempotency-Key` header, so a receiver that took it and answered after our deadline can
  drop the retry.
- Redirects are never followed: a body never goes to a host nobody configured; the 3xx answer
  reaches the exporter like any other.
- `close(timeout)` sends what it can before its deadline, then stops; a POST still running then
  is cut.

Every accepted item ends counted exactly once through `DeliveryEvents`: `delivered`, `dropped`,
or `failed` with a reason (`rejected`, `retries_exhausted`, `shutdown`).
"""

from __future__ import annotations

import functools
import http.client
import math
import random
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar
from urllib.parse import urlsplit

from matcher.backoff import Backoff, parse_retry_after

Outcome = Literal["ok", "retry", "rejected"]
FailReason = Literal["rejected", "retries_exhausted", "shutdown"]
FAIL_REASONS: tuple[FailReason, ...] = ("rejected", "retries_exhausted", "shutdown")
Item = TypeVar("Item")
Item_contra = TypeVar("Item_contra", contravariant=True)


class DeliveryEvents(Protocol):
    """What the core reports, counted and logged by `telemetry.DeliveryTelemetry`."""

    def delivered(self, n: int) -> None: ...
    def retry(self, **fields: Any) -> None: ...
    def failed(self, reason: FailReason, n: int, **fields: Any) -> None: ...
    def dropped(self, n: int) -> None: ...
    def queue(self, depth: int) -> None: ...
    def error(self, error: BaseException, **fields: Any) -> None: ...


class _Unreported:
    """`DeliveryEvents` for a sink made without telemetry: nothing is counted."""

    def delivered(self, n: int) -> None: ...
    def retry(self, **fields: Any) -> None: ...
    def failed(self, reason: FailReason, n: int, **fields: Any) -> None: ...
    def dropped(self, n: int) -> None: ...
    def queue(self, depth: int) -> None: ...
    def error(self, error: BaseException, **fields: Any) -> None: ...


@dataclass(frozen=True)
class Answer:
    """What one answer means for its batch; `rejected` counts items refused inside an accepted
    answer (OTLP's partial success)."""

    outcome: Outcome
    detail: str = ""
    rejected: int = 0


class Exporter(Protocol[Item_contra]):
    """The part of an HTTP sink the core does not do: its encoding and its reading of answers."""

    def encode(self, items: Sequence[Item_contra]) -> bytes: ...
    def answer(self, status: int, body: bytes) -> Answer: ...


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 60.0  # a receiver asking for an hour is not waited for
    jitter: bool = False  # half of each backoff delay fixed, half random

    def check(self) -> None:
        if self.max_retries < 0 or self.backoff_initial < 0 or self.backoff_max < 0:
            raise ValueError("needs max_retries ≥ 0 and backoff delays ≥ 0")


def endpoint_of(host: str | None, port: int | None, scheme: str) -> str:
    """`host:port` of a URL, as logs name it."""
    return f"{host}:{port or (443 if scheme == 'https' else 80)}"


# -- one POST within its deadline ---------------------------------------------------------------

class _Deadline:
    """When the POST under way must be done, and its socket, so each wait is bounded by what is
    left (not by a fresh `timeout` per read, which a trickling answer could renew forever)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.at = math.inf
        self.sock: socket.socket | None = None

    def left(self) -> float:
        left = self.at - self._clock()
        if left <= 0:
            raise TimeoutError("the POST's deadline passed")
        return left

    def arm(self) -> None:
        if self.sock is not None:
            self.sock.settimeout(self.left())

    def cut(self) -> None:
        """End the POST under way now (from another thread)."""
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = self._deadline.left()
        super().connect()
        self._deadline.sock = self.sock

    def getresponse(self) -> http.client.HTTPResponse:
        self._deadline.arm()
        return super().getresponse()


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = self._deadline.left()
        super().connect()
        self._deadline.sock = self.sock

    def getresponse(self) -> http.client.HTTPResponse:
        self._deadline.arm()
        return super().getresponse()


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_HTTPConnection, deadline=self._deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_HTTPSConnection, deadline=self._deadline), req,
                            context=self._context)  # type: ignore[attr-defined]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# -- the core -----------------------------------------------------------------------------------

class Delivery(Generic[Item]):
    """A bounded queue in front of one thread that POSTs batches of it to `url`."""

    def __init__(
        self,
        name: str,
        url: str,
        exporter: Exporter[Item],
        *,
        events: DeliveryEvents | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        queue_size: int = 1000,
        max_batch: int = 1,
        batch_delay: float = 0.0,
        retry: RetryPolicy = RetryPolicy(),
        answer_limit: int = 1 << 20,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if queue_size < 1 or max_batch < 1 or timeout <= 0 or batch_delay < 0:
            raise ValueError("needs queue_size ≥ 1, max_batch ≥ 1, timeout > 0 and delays ≥ 0")
        retry.check()
        parts = urlsplit(url)
        self.name = name
        self.url = url
        self.endpoint = endpoint_of(parts.hostname, parts.port, parts.scheme)
        self._exporter = exporter
        self._events: DeliveryEvents = events if events is not None else _Unreported()
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._max_batch = max_batch
        self._batch_delay = batch_delay
        self._retry = retry
        self._answer_limit = answer_limit
        self._clock = clock
        self._rng = rng or random.Random()
        self._post_deadline = _Deadline(clock)
        self._opener = urllib.request.build_opener(
            _HTTPHandler(self._post_deadline), _HTTPSHandler(self._post_deadline), _NoRedirect)
        self._queue: deque[Item] = deque(maxlen=queue_size)
        self._first_at: float | None = None  # when the oldest queued item was queued
        self._cond = threading.Condition()
        self._in_flight = 0
        self._abandoned = False  # close() counted the batch in flight: the worker must not
        self._given_up_closing = 0  # items the worker gave up on because close() ends
        self._closing = False
        self._deadline: float | None = None  # close()'s
        self._thread = threading.Thread(target=self._run, name=f"matcher-{name}", daemon=True)
        self._thread.start()

    # -- the sink's side: never blocks ------------------------------------------------------

    def accept(self, items: Sequence[Item]) -> None:
        """Queue items; the oldest go when the queue is full (all of them once closing)."""
        dropped = 0
        with self._cond:
            if self._closing:
                dropped = len(items)
            else:
                if not self._queue:
                    self._first_at = self._clock()
                for item in items:
                    if len(self._queue) == self._queue.maxlen:
                        dropped += 1
                    self._queue.append(item)
                self._cond.notify()
            depth = len(self._queue)
        if dropped:
            self._events.dropped(dropped)
        self._events.queue(depth)

    @property
    def queued(self) -> int:
        """Items waiting in the queue (not counting those being sent)."""
        with self._cond:
            return len(self._queue)

    @property
    def pending(self) -> int:
        """Items queued or being sent."""
        with self._cond:
            return len(self._queue) + self._in_flight

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> int:
        """Send what can be sent within `timeout` seconds, then stop; returns how many items
        were not sent (each counted as `failed{reason="shutdown"}`)."""
        with self._cond:
            self._closing = True
            self._deadline = self._clock() + timeout
            self._cond.notify_all()
        self._thread.join(max(0.0, timeout))
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            in_flight = 0 if self._abandoned else self._in_flight
            self._abandoned = self._abandoned or in_flight > 0
            unsent = left + in_flight + self._given_up_closing
        if in_flight:
            self._post_deadline.cut()
        self._events.failed("shutdown", left + in_flight, endpoint=self.endpoint)
        self._events.queue(0)
        return unsent

    # -- the worker -------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self._deliver(batch)
            except Exception as e:  # noqa: BLE001 - a bad item costs its batch, not the sink
                self._events.error(e, sink=self.name)
                self._end(len(batch), Answer("rejected", f"{type(e).__name__}: {e}"),
                          "rejected")
            finally:
                with self._cond:
                    self._in_flight = 0
                    self._abandoned = False

    def _next_batch(self) -> list[Item] | None:
        """Wait for a batch to be due: `max_batch` items, `batch_delay` after the first, or
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
            batch = [self._queue.popleft() for _ in range(n)]
            self._in_flight = n
            depth = len(self._queue)
            if not self._queue:
                self._first_at = None
        self._events.queue(depth)
        return batch

    def _deliver(self, batch: list[Item]) -> None:
        body = self._exporter.encode(batch)
        n = len(batch)
        backoff = Backoff(self._retry.backoff_initial, self._retry.backoff_max)
        # One key for every try of this batch: a receiver that took it and answered too late
        # (past the deadline here, so a retry) can tell the retry is the same batch.
        key = uuid.uuid4().hex
        for attempt in range(self._retry.max_retries + 1):
            answer, retry_after = self._post(body, key)
            if answer.outcome != "retry":
                self._end(n, answer, "rejected")
                return
            if attempt == self._retry.max_retries:
                self._end(n, answer, "retries_exhausted")
                return
            if not self._sleep(self._delay(backoff, retry_after)):
                self._end(n, answer, "shutdown")
                return
            self._events.retry(endpoint=self.endpoint, detail=answer.detail, attempt=attempt + 1,
                               items=n)

    def _delay(self, backoff: Backoff, retry_after: float | None) -> float:
        delay = backoff.next_delay()
        if self._retry.jitter:
            delay = delay / 2 + self._rng.uniform(0, delay / 2)
        if retry_after is not None:  # the receiver's word, within reason
            delay = max(delay, min(retry_after, self._retry.retry_after_max))
        return delay

    def _post(self, payload: bytes, key: str) -> tuple[Answer, float | None]:
        """One POST within its deadline: what the answer means, and its `Retry-After` (s)."""
        request = urllib.request.Request(self.url, data=payload,
                                         headers={**self._headers, "Idempotency-Key": key},
                                         method="POST")
        deadline = self._clock() + self._timeout
        with self._cond:
            if self._deadline is not None:  # closing: no POST outlives close()'s deadline
                deadline = min(deadline, self._deadline)
        self._post_deadline.at = deadline
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                body = self._read(response)
                status = response.status
        except urllib.error.HTTPError as e:  # every answer but 2xx, redirects included
            retry_after = parse_retry_after(e.headers.get("Retry-After") if e.headers else None)
            e.close()
            answer = self._exporter.answer(e.code, b"")
            return answer, (retry_after if answer.outcome == "retry" else None)
        except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets
            reason = getattr(e, "reason", None)
            detail = f"{type(e).__name__}: {reason if reason is not None else e}"
            return Answer("retry", detail), None
        finally:
            self._post_deadline.sock = None
            self._post_deadline.at = math.inf
        return self._exporter.answer(status, body), None

    def _read(self, response: http.client.HTTPResponse) -> bytes:
        """The answer's body, up to `answer_limit` bytes, each read bounded by the deadline."""
        chunks: list[bytes] = []
        size = 0
        while size < self._answer_limit:
            self._post_deadline.arm()
            chunk = response.read1(min(65536, self._answer_limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)

    def _end(self, n: int, answer: Answer, reason: FailReason) -> None:
        """Count the batch in flight once: delivered (less what an accepted answer refused), or
        failed for `reason`. Under the lock, so that close() and the worker never both count
        it; not at all when close() already has."""
        with self._cond:
            if self._abandoned:
                return
            self._in_flight = 0
            if answer.outcome == "ok":
                self._events.delivered(n - answer.rejected)
                n, reason = answer.rejected, "rejected"
            if reason == "shutdown":
                self._given_up_closing += n
            if n > 0:
                self._events.failed(reason, n, endpoint=self.endpoint, detail=answer.detail)

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
