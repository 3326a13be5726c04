"""The webhook honours `Retry-After` and marks every try of one event with the same
`Idempotency-Key`, against a real daemon: a receiver that answers 429 with `Retry-After: 2`
gets the retry no sooner than it asked, and can tell it is the same event (before: retried
after 0.5 s, the receiver's word ignored, each try indistinguishable from a new event)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from faultkit import served_url, stderr_events
from watch_harness import DaemonProcess, wait_for


class _Busy:
    """Answers the first POST 429 `Retry-After: 2`, the next ones 200; keeps (time, key, body)."""

    def __init__(self) -> None:
        self.posts: list[tuple[float, str | None, bytes]] = []
        busy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                busy.posts.append((time.monotonic(), self.headers.get("Idempotency-Key"), body))
                if len(busy.posts) == 1:
                    self.send_response(429)
                    self.send_header("Retry-After", "2")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_the_webhook_waits_as_long_as_retry_after_says_with_one_key_per_event(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    receiver = _Busy()
    try:
        d = DaemonProcess(tmp_path, [str(log)], "--webhook-url", receiver.url,
                          "--metrics-addr", "127.0.0.1:0")
        with d:
            wait_for(lambda: served_url(d), 20)
            with open(log, "a") as f:
                f.write("[2026-01-01 12:00:00] injected failure seq=1 end\n")
            assert wait_for(lambda: len(receiver.posts) >= 2, 30)
            with open(log, "a") as f:
                f.write("[2026-01-01 12:00:00] injected failure seq=2 end\n")
            assert wait_for(lambda: len(receiver.posts) >= 3, 30)
            assert d.stop() == 0
    finally:
        receiver.server.shutdown()
    (t1, k1, b1), (t2, k2, b2), (_t3, k3, _b3) = receiver.posts[:3]
    assert t2 - t1 >= 1.9  # the receiver's 2 s, not the 0.5 s backoff
    assert b1 == b2 and k1 and k1 == k2  # the same event, the same key
    assert k3 and k3 != k1  # another event, another key
    assert len(stderr_events(d, "webhook_retry")) == 1
