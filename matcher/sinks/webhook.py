"""Events POSTed as JSON to a webhook (a chat bridge, an incident tool), from a thread of its own.

`accept()` only appends to a bounded queue and returns: a slow or dead endpoint never slows
reading. One background thread POSTs each event (the same redacted dict `events.event_dict`
prints), in order, with a timeout; connection errors, timeouts, 408, 429 and 5xx are retried
with exponential backoff (`backoff_initial`, doubling, at most `backoff_max` seconds between
tries, `max_retries` retries; a `Retry-After` in the answer is honoured, up to a minute);
every try of one event carries the same `Idempotency-Key` header, so a receiver that took it
and answered after our timeout can drop the retry; other answers (4xx, and 3xx: redirects are not followed, so a
body never goes to a host nobody configured) give the event up as `rejected`. Credentials in the
URL (`https://user:pass@host/path`) are sent as HTTP Basic auth (an `Authorization` header given
in `headers` wins); `url` keeps the URL without them, and the one in errors is redacted.

What can be lost, and is counted (`sglang_matcher_webhook_*`, via `Telemetry`): when the queue
is full the *oldest* event is dropped (`dropped`) — the newest says most about the current
state; an event whose retries run out (`failed{reason="retries_exhausted"}`); and at `close()`
whatever could not be sent before its timeout (`failed{reason="shutdown"}`). The webhook is a
notification, not the record: stdout and the counters have every event.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from matcher import __version__
from matcher.backoff import Backoff, parse_retry_after
from matcher.redact import Redactor
from matcher.sinks.events import event_dict
from matcher.telemetry import Telemetry
from matcher.types import Batch, Event

_Outcome = Literal["ok", "retry", "rejected"]
_RETRY_STATUS = frozenset({408, 429})
# A `Retry-After` is waited for up to this long (a receiver asking for an hour is not).
RETRY_AFTER_MAX = 60.0


def _without_userinfo(parts: SplitResult) -> str:
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _basic_auth(parts: SplitResult) -> str | None:
    """`Basic base64(user:password)` of the URL's userinfo (percent-decoded), None without."""
    userinfo, at, _ = parts.netloc.rpartition("@")
    if not at:
        return None
    user, _, password = userinfo.partition(":")
    pair = f"{unquote(user)}:{unquote(password)}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class WebhookSink:
    """The webhook `Sink`: a bounded queue in front of one POSTing thread."""

    def __init__(
        self,
        url: str,
        *,
        redactor: Redactor,
        telemetry: Telemetry | None = None,
        timeout: float = 5.0,
        max_retries: int = 5,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        queue_size: int = 1000,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"webhook URL must be http:// or https:// with a host: "
                             f"{redactor.text(url)!r}")
        if queue_size < 1 or max_retries < 0 or timeout <= 0 or backoff_initial < 0:
            raise ValueError("webhook: needs queue_size ≥ 1, max_retries ≥ 0, timeout > 0 "
                             "and backoff ≥ 0")
        # Credentials in the URL (https://user:pass@host/…) go as HTTP Basic auth: urllib
        # would take `user:pass@host` for the host. The URL kept, and so printed, has none.
        self.url = _without_userinfo(parts)
        auth = _basic_auth(parts)
        self.endpoint = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
        self._redactor = redactor
        self._telemetry = telemetry
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._headers = {"Content-Type": "application/json",
                         "User-Agent": f"sglang-matcher/{__version__}",
                         **({"Authorization": auth} if auth else {}), **(headers or {})}
        self._opener = urllib.request.build_opener(_NoRedirect)
        self._queue: deque[Event] = deque(maxlen=queue_size)
        self._cond = threading.Condition()
        self._in_flight = 0
        self._closing = False
        self._deadline: float | None = None
        if telemetry is not None:
            telemetry.webhook_configured()
        self._thread = threading.Thread(target=self._run, name="matcher-webhook", daemon=True)
        self._thread.start()

    # -- the Sink side: never blocks ------------------------------------------------------

    name = "webhook"
    # A notification, not the record: what it cannot send is counted, never waited for, so
    # positions are saved without it (stdout and the counters have every event).
    holds_checkpoint = False

    def emit(self, batch: Batch) -> None:
        self.accept(list(batch.printed))

    def flush(self) -> None:
        pass  # delivery is the thread's; `close` waits for it

    def accept(self, events: list[Event]) -> None:
        dropped = 0
        with self._cond:
            if self._closing:
                dropped = len(events)
            else:
                for e in events:
                    if len(self._queue) == self._queue.maxlen:
                        dropped += 1
                    self._queue.append(e)
                self._cond.notify()
            depth = len(self._queue)
        if self._telemetry is not None:
            if dropped:
                self._telemetry.webhook_dropped(dropped)
            self._telemetry.webhook_queue(depth)

    @property
    def queued(self) -> int:
        """Events waiting in the queue (not counting one being POSTed)."""
        with self._cond:
            return len(self._queue)

    @property
    def pending(self) -> int:
        """Events queued or being POSTed."""
        with self._cond:
            return len(self._queue) + self._in_flight

    def close(self, timeout: float = 5.0) -> int:
        """Send what can be sent within `timeout` seconds, then stop; returns how many were not."""
        with self._cond:
            self._closing = True
            self._deadline = time.monotonic() + timeout
            self._cond.notify_all()
        self._thread.join(max(0.0, timeout))
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            unsent = left + self._in_flight
        if self._telemetry is not None:
            self._telemetry.webhook_failed("shutdown", left, endpoint=self.endpoint)
            self._telemetry.webhook_queue(0)
        return unsent

    # -- the worker -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue or self._past_deadline():
                    return
                event = self._queue.popleft()
                self._in_flight = 1
                depth = len(self._queue)
            if self._telemetry is not None:
                self._telemetry.webhook_queue(depth)
            try:
                self._deliver(event)
            finally:
                with self._cond:
                    self._in_flight = 0

    def _deliver(self, event: Event) -> None:
        body = json.dumps(event_dict(event, self._redactor), ensure_ascii=False,
                          default=str).encode("utf-8")
        backoff = Backoff(self._backoff_initial, self._backoff_max)
        # One key for every try of this event: a receiver that took it and answered too late
        # (a timeout here, so a retry) can tell the retry is the same event.
        key = uuid.uuid4().hex
        for attempt in range(self._max_retries + 1):
            outcome, detail, retry_after = self._post(body, key)
            if outcome == "ok":
                self._count("delivered")
                return
            if outcome == "rejected":
                self._count("rejected", detail)
                return
            if attempt == self._max_retries:
                self._count("retries_exhausted", detail)
                return
            delay = backoff.next_delay()
            if retry_after is not None:  # the receiver's word, within reason
                delay = max(delay, min(retry_after, RETRY_AFTER_MAX))
            if not self._sleep(delay):
                self._count("shutdown", detail)
                return
            if self._telemetry is not None:
                self._telemetry.webhook_retry(endpoint=self.endpoint, detail=detail,
                                              attempt=attempt + 1)

    def _post(self, body: bytes, key: str) -> tuple[_Outcome, str, float | None]:
        """One POST: the outcome, what went wrong, and the answer's `Retry-After` (s)."""
        request = urllib.request.Request(self.url, data=body,
                                         headers={**self._headers, "Idempotency-Key": key},
                                         method="POST")
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                response.read(65536)
            return "ok", "", None
        except urllib.error.HTTPError as e:
            retry_after = parse_retry_after(e.headers.get("Retry-After") if e.headers else None)
            e.close()
            if e.code >= 500 or e.code in _RETRY_STATUS:
                return "retry", f"HTTP {e.code}", retry_after
            return "rejected", f"HTTP {e.code}", None
        except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets
            reason = getattr(e, "reason", None)
            return "retry", f"{type(e).__name__}: {reason if reason is not None else e}", None

    def _sleep(self, seconds: float) -> bool:
        """Wait before a retry; False when `close()`'s deadline comes first."""
        end = time.monotonic() + seconds
        with self._cond:
            while True:
                if self._deadline is not None and end > self._deadline:
                    return False
                left = end - time.monotonic()
                if left <= 0:
                    return True
                self._cond.wait(left)

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _count(self, outcome: str, detail: str = "") -> None:
        if self._telemetry is None:
            return
        if outcome == "delivered":
            self._telemetry.webhook_delivered()
        else:
            self._telemetry.webhook_failed(outcome, endpoint=self.endpoint, detail=detail)
