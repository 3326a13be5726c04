"""Ctrl-C while the full catalog compiles (the first start of a checkout, a fresh cache) ends
the daemon within a second or two, saying so; it waited up to 25 s for the compile with
nothing on the terminal. (A supervisor's SIGTERM still waits for it: exactly-once.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from watch_harness import REPO, wait_for


def test_ctrl_c_during_the_first_compile_stops_at_once(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    err = tmp_path / "stderr.log"
    with open(err, "wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "matcher", "watch", "--state-dir", str(tmp_path / "state"),
             "--poll-interval", "0.05", str(log)],
            stdout=subprocess.DEVNULL, stderr=e, cwd=REPO,
            env={**os.environ, "SGLANG_MATCHER_CACHE_DIR": str(tmp_path / "fresh-cache"),
                 "SGLANG_MATCHER_NO_PRECOMPILED": "1"})
    try:
        assert wait_for(lambda: b'"event": "catalog_compiling"' in err.read_bytes()
                        or proc.poll() is not None, 60), err.read_text()[-2000:]
        assert proc.poll() is None, err.read_text()[-2000:]
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, err.read_text()[-2000:]
    assert took < 3.0, took  # within a second of its own, on a loaded machine
    assert b'"stopping_while_compiling"' in err.read_bytes()
