"""Events POSTed as JSON to a webhook (a chat bridge, an incident tool), from a thread of its own.

Each printed event is one POST of its emitted dict (`Batch.dicts`: redacted once by the daemon
for every sink, not again here), through the delivery core (`sinks/delivery.py`): a bounded
queue, one worker, a deadline per POST (`timeout`), retries with exponential backoff
(`backoff_initial`, doubling, at most `backoff_max` seconds between tries, `max_retries`
retries; a `Retry-After` in the answer is honoured, up to a minute), one `Idempotency-Key` for
every try of an event, no redirects. This module keeps what is the webhook's own: the JSON
encoding and the reading of answers — 2xx delivered; connection errors, timeouts, 408, 429 and
5xx retried; other answers (4xx, and 3xx: redirects are not followed, so a body never goes to a
host nobody configured) give the event up as `rejected`. Credentials in the URL
(`https://user:pass@host/path`) are sent as HTTP Basic auth (an `Authorization` header given in
`headers` wins); `url` keeps the URL without them, and the one in errors is redacted.

What can be lost, and is counted (`sglang_matcher_webhook_*`, via `DeliveryEvents`): when the
queue is full the *oldest* event is dropped (`dropped`) — the newest says most about the current
state; an event whose retries run out (`failed{reason="retries_exhausted"}`); and at `close()`
whatever could not be sent before its timeout (`failed{reason="shutdown"}`). The webhook is a
notification, not the record: stdout and the counters have every event.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from matcher import __version__
from matcher.redact import Redactor
from matcher.sinks.delivery import Answer, Delivery, DeliveryEvents, RetryPolicy
from matcher.types import Batch

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


class _JsonExporter:
    """The webhook's encoding (one event's dict per POST) and its reading of answers."""

    def encode(self, items: Sequence[Mapping[str, Any]]) -> bytes:
        (event,) = items
        return json.dumps(event, ensure_ascii=False, default=str).encode("utf-8")

    def answer(self, status: int, body: bytes) -> Answer:
        if 200 <= status < 300:
            return Answer("ok")
        if status >= 500 or status in _RETRY_STATUS:
            return Answer("retry", f"HTTP {status}")
        return Answer("rejected", f"HTTP {status}")


class WebhookSink:
    """The webhook `Sink`: each printed event's dict, POSTed by the delivery core."""

    name = "webhook"
    # A notification, not the record: what it cannot send is counted, never waited for, so
    # positions are saved without it (stdout and the counters have every event).
    holds_checkpoint = False

    def __init__(
        self,
        url: str,
        *,
        redactor: Redactor,
        telemetry: DeliveryEvents | None = None,
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
        self.delivery: Delivery[Mapping[str, Any]] = Delivery(
            "webhook", self.url, _JsonExporter(), events=telemetry,
            headers={"Content-Type": "application/json",
                     "User-Agent": f"sglang-matcher/{__version__}",
                     **({"Authorization": auth} if auth else {}), **(headers or {})},
            timeout=timeout, queue_size=queue_size, answer_limit=65536,
            retry=RetryPolicy(max_retries, backoff_initial, backoff_max, RETRY_AFTER_MAX))
        self.endpoint = self.delivery.endpoint

    def emit(self, batch: Batch) -> None:
        self.accept(batch.dicts)

    def flush(self) -> None:
        pass  # delivery is the core's thread's; `close` waits for it

    def accept(self, dicts: Sequence[Mapping[str, Any]]) -> None:
        """Queue emitted (already redacted) event dicts; never blocks."""
        self.delivery.accept(dicts)

    @property
    def queued(self) -> int:
        """Events waiting in the queue (not counting one being POSTed)."""
        return self.delivery.queued

    @property
    def pending(self) -> int:
        """Events queued or being POSTed."""
        return self.delivery.pending

    def close(self, timeout: float = 5.0) -> int:
        """Send what can be sent within `timeout` seconds, then stop; returns how many were not."""
        return self.delivery.close(timeout)
