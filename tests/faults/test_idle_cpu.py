"""An idle daemon following one empty file costs no more CPU than one following a file with a
line (issue 34 reported 2.5× for the empty file). Both run side by side at the default poll
interval, so a busy machine slows them alike; their CPU time (user + system, from
/proc/PID/stat) is compared over the same ten seconds."""

from __future__ import annotations

import os
import time
from pathlib import Path

from faultkit import figure
from watch_harness import DaemonProcess, wait_for

SECONDS = 10.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def started(d: DaemonProcess) -> bool:
    return b'"event": "started"' in d.err.read_bytes()


def test_an_empty_file_costs_no_more_idle_cpu_than_a_written_one(tmp_path):
    empty_dir, written_dir = tmp_path / "empty", tmp_path / "written"
    empty_dir.mkdir()
    written_dir.mkdir()
    (empty_dir / "server.log").touch()
    (written_dir / "server.log").write_text("[2026-01-01 12:00:00] a line of traffic\n")
    empty = DaemonProcess(empty_dir, [str(empty_dir / "server.log")], "--poll-interval", "1",
                          "--from-beginning", name="empty")
    written = DaemonProcess(written_dir, [str(written_dir / "server.log")], "--poll-interval",
                            "1", "--from-beginning", name="written")
    with empty, written:
        assert wait_for(lambda: started(empty) and started(written), 60), \
            (empty.err.read_text()[-1000:], written.err.read_text()[-1000:])
        time.sleep(2)  # past the start's own work (the first walks, the first checkpoint)
        assert empty.proc is not None and written.proc is not None
        before = cpu_seconds(empty.proc.pid), cpu_seconds(written.proc.pid)
        time.sleep(SECONDS)
        after = cpu_seconds(empty.proc.pid), cpu_seconds(written.proc.pid)
        spent_empty, spent_written = after[0] - before[0], after[1] - before[1]
        figure(f"idle CPU over {SECONDS:.0f} s at poll_interval 1 s: one empty file "
               f"{spent_empty:.2f} s, one written file {spent_written:.2f} s")
        # one clock tick either way is measurement, not cost
        assert spent_empty <= 1.5 * spent_written + 2 / os.sysconf("SC_CLK_TCK")
        assert spent_empty < 0.05 * SECONDS  # under 5% of a core
        assert empty.stop() == 0 and written.stop() == 0
