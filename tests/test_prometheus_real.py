"""Our /metrics as Prometheus itself sees it: Debian's `promtool` and a real `prometheus` server.

Both come from Debian's `prometheus` package (.ci/apt-packages). The server runs on 127.0.0.1
with a 1 s scrape interval and its storage in the test's tmp dir, and is stopped at the end.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prom_harness import Prometheus, fetch, poll, served_url, tool
from prometheus_client import CollectorRegistry
from structlog.testing import CapturingLogger

from matcher import __version__
from matcher.catalog import Catalog, load_catalog
from matcher.engine import Engine
from matcher.http import HttpServer
from matcher.pipeline import Pipeline
from matcher.sinks.metrics import MetricsSink
from matcher.sinks.ring import EventRing
from matcher.telemetry import Telemetry
from matcher.types import Chunk, Event

FIXTURES = Path(__file__).parent / "fixtures"
STATIC = {"cluster": "test", "model": "qwen"}


class Matcher:
    """The daemon's metrics side: catalog counters, self-telemetry and the HTTP endpoint."""

    def __init__(self) -> None:
        self.catalog: Catalog = load_catalog()
        self.registry = CollectorRegistry()
        self.metrics = MetricsSink(self.registry, catalog=self.catalog, static_labels=STATIC,
                                   build_version=__version__, catalog_version=self.catalog.version)
        self.telemetry = Telemetry(self.registry, CapturingLogger(), STATIC)
        self.telemetry.delivery("webhook")
        self.http = HttpServer("127.0.0.1", 0, registry=self.registry, events=EventRing(10))

    def crash_events(self) -> list[Event]:
        """The real TP=8 scheduler crash, through the real pipeline."""
        pipeline = Pipeline(Engine(self.catalog.records), catalog_version=self.catalog.version)
        data = (FIXTURES / "sglang/constructed/tp8_scheduler_crash.log").read_bytes()
        return pipeline.feed(Chunk(data, "server", len(data)), 0.0) + pipeline.finish(0.0)


@pytest.fixture
def matcher() -> Iterator[Matcher]:
    m = Matcher()
    m.http.start()
    try:
        yield m
    finally:
        m.http.stop()


def test_promtool_accepts_a_real_scrape(matcher):
    """`promtool check metrics` on /metrics as served, with every family populated: no problem."""
    events = matcher.crash_events()
    matcher.metrics.accept(events)
    matcher.metrics.accept([Event(event="sglang_unknown_error", error_class="torch.WeirdError",
                                  message="m", source="server", severity="error", log_ts=None,
                                  observed_ts=0.0, ranks=(), occurrences=1, traceback=None,
                                  fingerprint="f")])
    t = matcher.telemetry
    t.lines("server", 10, 1000)
    t.read_lag("server", 10)
    t.rotated("server")
    t.truncated("server")
    t.lines_truncated("server")
    t.checkpoint_written()
    t.checkpoint_failed("disk full")
    t.reload("ok")
    t.events_suppressed(3)
    t.pipeline_error("read", "OSError")
    t.delivery("webhook").dropped(1)
    status, body = fetch(matcher.http.url + "/metrics")
    assert status == 200 and b"sglang_matcher_webhook_dropped_total" in body
    checked = subprocess.run([tool("promtool"), "check", "metrics"], input=body, check=False,
                             capture_output=True, timeout=30)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, b"", b"")


def test_real_prometheus_sees_a_running_daemons_counter_increase(tmp_path):
    """A real daemon follows a log; Prometheus scrapes it every second; after a TP=8 crash is
    appended to the log, `increase(sglang_log_errors_total{…}[1m]) > 0` holds in its query API,
    and `promtool check metrics` accepts the daemon's own scrape."""
    from watch_harness import DaemonProcess

    log = tmp_path / "server.log"
    log.touch()
    env = {"SGLANG_MATCHER_LABELS": "cluster=test,model=qwen"}
    daemon = DaemonProcess(tmp_path, [str(log)], "--metrics-addr", "127.0.0.1:0", env=env,
                           builtin=True)
    daemon.start()
    try:
        url = poll("daemon serving", lambda: served_url(daemon), 20)
        _prometheus_sees_increase(tmp_path, url, log, daemon)
    finally:
        if daemon.proc is not None:
            daemon.stop()


def _prometheus_sees_increase(tmp_path: Path, url: str, log: Path, daemon: Any) -> None:
    catalog = load_catalog()
    pattern_id = next(r.id for r in catalog.records
                      if r.slug == "transformers-backend-model-class-not-found")
    target = url.split("//", 1)[1]
    series = f'sglang_log_errors_total{{pattern_id="{pattern_id}"}}'
    with Prometheus(tmp_path, [target]) as prom:
        query, alive = prom.query, prom.alive
        # The zero series is scraped before the first error: that is what makes increase() work.
        zero = poll("first scrape of the zero series", lambda: query(series), 30, alive)
        assert [r["value"][1] for r in zero] == ["0"]
        with open(log, "a") as f:
            f.write((FIXTURES / "sglang/constructed/tp8_scheduler_crash.log").read_text())
        [result] = poll("increase() > 0", lambda: query(f"increase({series}[1m]) > 0"), 60, alive)
        assert float(result["value"][1]) > 0
        labels = {k: v for k, v in result["metric"].items() if k not in ("instance", "job")}
        record = catalog.by_id(pattern_id)
        assert record is not None
        assert labels == {"pattern_id": pattern_id, "error_class": record.error_class,
                          "severity": record.severity, **STATIC}
        assert [(t["health"], t["lastError"]) for t in prom.targets()] == [("up", "")]
        status, body = fetch(url + "/metrics")
        checked = subprocess.run([tool("promtool"), "check", "metrics"], input=body, check=False,
                                 capture_output=True, timeout=30)
        assert (status, checked.returncode, checked.stdout, checked.stderr) == (200, 0, b"", b"")
