"""`watch` for a person (issue: the first hour of a real user): on a terminal it prints each
event as `scan` does and its own diagnostics as short lines; `--min-severity` leaves out what
is below it while the metrics count everything."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from watch_harness import DaemonProcess, wait_for

REPO = Path(__file__).resolve().parents[1]
CURATED = REPO / "patterns" / "sglang" / "curated"
LAUNCH = REPO / "tests" / "fixtures" / "sglang" / "launch"


def _read_until(fd: int, needles: tuple[str, ...], timeout: float = 60.0) -> str:
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            seen += chunk
            text = seen.decode(errors="replace")
            if all(n in text for n in needles):
                return text
    return seen.decode(errors="replace")


def test_on_a_terminal_watch_prints_events_as_scan_does_and_short_diagnostics(tmp_path):
    """A real launch log of sglang 0.5.23 (the seed's failure) followed by a daemon whose
    stdout and stderr are a pseudo-terminal: the event reads as scan's entry, no JSON."""
    log = tmp_path / "server.log"
    log.write_bytes((LAUNCH / "int8_mamba_radix_lru.log").read_bytes())
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "matcher", "watch", "--no-builtin", "--catalog", str(CURATED),
         "--from-beginning", "--state-dir", str(tmp_path / "state"), "--poll-interval", "0.05",
         str(log)],
        stdin=subprocess.DEVNULL, stdout=side, stderr=side, cwd=REPO)
    os.close(side)
    try:
        text = _read_until(main, ("How to fix:", "started"))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        os.close(main)
    assert "ERROR  ValueError  pattern 4e2cdd4d6209ebbd" in text, text[-2000:]
    assert "How to fix:" in text and "--radix-cache-backend" in text
    assert '{"' not in text  # neither the event nor the diagnostics are JSON
    started = next(line for line in text.splitlines() if " started" in line)
    assert started.split()[1] == "info", started


def test_min_severity_prints_only_what_is_above_it_and_the_metrics_count_all(tmp_path):
    """`--min-severity error` on a real launch log with three info-level lines (`Ignore import
    error when loading …`) before the failure: only the failure is printed; the metrics count
    the info ones too."""
    import urllib.request

    from prom_harness import served_url

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_bytes(
        (REPO / "examples" / "logs" / "scheduler-crash-unknown-architecture.log").read_bytes())
    with DaemonProcess(tmp_path, [str(logs / "*.log")], "--catalog", str(CURATED),
                       "--from-beginning", "--min-severity", "error", "--metrics-addr",
                       "127.0.0.1:0", writer_record=False) as daemon:
        url = wait_for(lambda: served_url(daemon), 30)
        assert wait_for(lambda: any(e.get("pattern_id") == "4d3fbd98d88af19d"
                                    for e in daemon.events()), 30)
        metrics = urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=5).read().decode()
        events = daemon.events()
    assert [e["pattern_id"] for e in events] == ["4d3fbd98d88af19d"]
    assert any(line.startswith("sglang_log_errors_total{") and "01da696bae8096d9" in line
               for line in metrics.splitlines())
