"""SIGHUP while lines and tracebacks are half-written: a reload drains nothing early.

The sidecar's `tee` writes sglang's output in arbitrary pieces, so a reload (a catalog update
pushed by a ConfigMap, `systemctl reload`) lands mid-line as a matter of course. Before this
suite a reload finished the pipeline: the half line became a line of its own, the traceback a
fragment counted as an unknown error.
"""

from __future__ import annotations

import os
import random
import signal
import time

from faultkit import figure
from watch_harness import DaemonProcess


def _traceback(seq: int) -> bytes:
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2710, '
        "in run_scheduler_process\n"
        "    scheduler.event_loop_normal()\n"
        f"ValueError: injected failure seq={seq} end\n"
        "[2026-01-01 00:00:00 TP0] Decode batch. #running-req: 12, #token: 48213\n"
    ).encode()


def test_sighup_mid_line_keeps_lines_and_tracebacks_whole(tmp_path, scale):
    """Tracebacks written in random pieces with SIGHUPs in between: every failure is one known
    event, none is cut into an unknown error, none is lost."""
    log = tmp_path / "server.log"
    log.touch()
    total = 1500 if scale.full else 400
    reload_every = 20
    rng = random.Random(19)
    with DaemonProcess(tmp_path, [str(log)], "--from-beginning") as d:
        assert d.proc is not None
        reloads = 0
        with open(log, "ab", buffering=0) as f:
            for seq in range(total):
                data = _traceback(seq)
                cuts = sorted(rng.sample(range(1, len(data)), 3))
                pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
                for k, piece in enumerate(pieces):
                    f.write(piece)
                    if k == 1 and seq % reload_every == 0:
                        os.kill(d.proc.pid, signal.SIGHUP)  # mid-line, mid-traceback
                        reloads += 1
                        time.sleep(0.12)  # let the reload land before the rest arrives
                    else:
                        time.sleep(0.0005)
        seqs = d.wait_seqs(set(range(total)), timeout=60)
        unknown = [e for e in d.events() if e["event"] == "sglang_unknown_error"]
        assert d.stop() == 0
    reloaded = d.err.read_text().count('"event": "reloaded"')
    lost = total - len(seqs)
    doubled = sum(c - 1 for c in seqs.values())
    figure(f"{total} tracebacks written in random pieces, {reloads} SIGHUPs mid-line "
           f"({reloaded} reloads done): lost {lost}, duplicated {doubled}, "
           f"unknown errors {len(unknown)}")
    assert reloaded >= reloads // 2  # the reloads really happened while lines were open
    assert (lost, doubled, unknown) == (0, 0, [])
