"""`watch` started with stdout closed (`>&-`) runs without printing, says so once, and sends its
events to its other outputs; before, it stopped at start with an AttributeError traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from watch_harness import REPO, DaemonProcess, wait_for


def test_a_daemon_started_with_stdout_closed_runs_without_it(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    events_file = tmp_path / "events.jsonl"
    d = DaemonProcess(tmp_path, [str(log)])  # for its catalog and paths
    with open(d.err, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "matcher", "watch", "--state-dir", str(d.state),
             "--catalog", str(d.catalog), "--no-builtin", "--poll-interval", "0.05", str(log)],
            stdout=subprocess.DEVNULL, stderr=err, cwd=REPO,
            preexec_fn=lambda: os.close(1),  # noqa: PLW1509 - the closed stdout under test
            env={**os.environ, "SGLANG_MATCHER_EVENTS_FILE": str(events_file),
                 "SGLANG_MATCHER_REPEAT_INTERVAL": "0"})
    try:
        assert wait_for(lambda: b'"event": "started"' in d.err.read_bytes()
                        or proc.poll() is not None, 60)
        assert proc.poll() is None, d.err.read_text()[-2000:]
        with open(log, "a") as f:
            f.write("[2026-01-01 12:00:00] injected failure seq=7 end\n")
        assert wait_for(lambda: events_file.exists() and "seq" in events_file.read_text(), 20)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = [json.loads(line) for line in d.err.read_text().splitlines()
            if '"stdout_closed"' in line]
    assert len(said) == 1 and said[0]["level"] == "warning"
    assert "Traceback" not in d.err.read_text()
    assert json.loads(events_file.read_text().splitlines()[0])["captures"]["seq"] == "7"
