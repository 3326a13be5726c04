"""A traceback written slowly (a byte every 100 ms: a writer behind a slow pipe, `tee` under
load, a terminal multiplexer) is still one event with its traceback. The framer closes a
traceback left in its frames after `partial_line_flush` (5 s) without a next line; a frame line
takes longer than that to write at this pace, so the traceback was closed in its frames (its head
and first frames made no event) and what followed was framed anew without them."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from watch_harness import REPO, DaemonProcess

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/opt/sglang/srt/managers/scheduler.py", line 7, in run\n'  # 60 bytes: 6 s
    "    loop()\n"
    '  File "/opt/sglang/srt/managers/tp_worker.py", line 9, in loop\n'
    "    step()\n"
    "ValueError: injected failure seq=7 end\n"
)

# The writer: one byte at a time, 100 ms apart, each its own write(2).
SLOW_WRITE = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
for b in sys.stdin.buffer.read():
    os.write(fd, bytes([b]))
    time.sleep(0.1)
"""


def test_a_traceback_written_a_byte_at_a_time_is_one_event_with_its_traceback(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    with DaemonProcess(tmp_path, [str(log)]) as d:
        subprocess.run([sys.executable, "-c", SLOW_WRITE, str(log)], input=TRACEBACK.encode(),
                       cwd=REPO, check=True, timeout=120)
        assert d.wait_seqs({7}, 30)
        assert d.stop() == 0
    assert d.seqs() == Counter({7: 1})
    (event,) = [e for e in d.events() if e.get("captures", {}).get("seq") == "7"]
    # The event is the whole traceback, from its first line, with every frame.
    assert (event["offset"], event["line"]) == (0, 1), event
    traceback = event.get("traceback") or ""
    for frame in ('scheduler.py", line 7, in run', "loop()", 'tp_worker.py", line 9, in loop',
                  "step()"):
        assert frame in traceback, event
    # Nothing else came of it: no frame line alone, no traceback without its exception.
    assert len(d.events()) == 1, d.events()
