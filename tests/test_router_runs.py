"""sglang-router's real output, run here (tests/fixtures/router-runs/index.json says how): the
lines a user sees are framed as one failure each and get the record that says what to do."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from matcher.catalog import load_catalog
from matcher.commands.scan import cmd_scan

RUNS = Path(__file__).resolve().parent / "fixtures" / "router-runs"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def scan(catalog, path: Path) -> list[dict]:
    out = io.StringIO()
    cmd_scan([str(path)], "json", catalog, out, err=io.StringIO())
    return [e for e in map(json.loads, out.getvalue().splitlines()) if "pattern_id" in e]


def slug(catalog, event: dict) -> str | None:
    record = catalog.by_id(event["pattern_id"]) if event["pattern_id"] else None
    return record.slug if record else None


@pytest.mark.parametrize("run", ["0.2.1/prometheus-port-in-use.log",
                                 "0.3.2/prometheus-port-in-use.log",
                                 "0.3.2/prometheus-host-not-local.log"])
def test_a_panic_with_its_backtrace_is_one_failure_with_its_fix(catalog, run):
    """`thread '<unnamed>' (3957) panicked at …/metrics.rs:360:10:` (0.3.2's Rust puts the
    thread's id after its name), the message on the next line, then `stack backtrace:` and its
    frames: one event, whose message is the panic's message alone; pyo3's `PanicException`
    line that ends the Python traceback gets the same record."""
    events = scan(catalog, RUNS / run)
    assert {slug(catalog, e) for e in events} == {"router-prometheus-listener-failed"}
    panic, raised = events
    assert panic["message"].startswith("failed to install Prometheus metrics exporter: ")
    assert "\n" not in panic["message"]
    assert raised["message"].startswith("pyo3_runtime.PanicException: failed to install")
    assert "--prometheus-port" in catalog.by_id(panic["pattern_id"]).solutions[0]


@pytest.mark.parametrize("version", ["0.1.4", "0.2.1", "0.3.2"])
def test_the_routers_port_in_use_is_the_routers_not_zmqs(catalog, version):
    """Rust's `Address already in use (os error 98)` behind the launcher's `Error starting
    router:` is the router's port, not one of sglang's ZMQ sockets."""
    events = scan(catalog, RUNS / version / "port-in-use.log")
    started = [e for e in events if e["message"].startswith("Error starting router: ")]
    assert [slug(catalog, e) for e in started] == ["router-port-in-use"]
    assert all(slug(catalog, e) != "zmq-address-already-in-use" for e in events)
    # the RuntimeError the launcher re-raises, at `self._router.start()`, is recognized too
    [raised] = [e for e in events if e["message"].startswith("RuntimeError: ")]
    assert slug(catalog, raised) in ("router-start-address-in-use", "failed-to-bind-to")
    assert catalog.by_id(raised["pattern_id"]).solutions


@pytest.mark.parametrize("run", ["0.2.1/bad-url.log", "0.3.2/bad-url.log", "0.3.2/bad-url-pd.log"])
def test_a_worker_url_without_scheme_says_to_write_the_scheme(catalog, run):
    """`--worker-urls notaurl` (or a prefill URL without `http://`): the launcher's line and
    the `ValueError` it re-raises get the record that says how to write the URL."""
    events = scan(catalog, RUNS / run)
    assert len(events) == 2
    assert {slug(catalog, e) for e in events} == {"router-worker-url-without-scheme"}
    assert "http://HOST:PORT" in catalog.by_id(events[0]["pattern_id"]).solutions[0]


@pytest.mark.parametrize("run", ["0.2.1/unreachable-worker.log", "0.3.2/rt-pd-unreachable.log"])
def test_coloured_tracing_lines_are_read_without_their_escapes(catalog, run):
    """0.2 on write tracing's ANSI colours even into a file; the `WARN …: Step failed …
    error="…Both HTTP and gRPC health checks failed for URL…"` lines are recognized with the
    worker's URL, and INFO lines stay quiet."""
    path = RUNS / run
    assert "\x1b[33m WARN\x1b[0m" in path.read_text()
    events = scan(catalog, path)
    assert events and all("\x1b" not in e["message"] for e in events)
    assert all(" INFO " not in e["message"] for e in events)
    failed = [e for e in events if "Both HTTP and gRPC health checks failed" in e["message"]]
    assert failed and failed[0]["captures"]["url"] in ("http://127.0.0.1:9", "http://127.0.0.1:10")
