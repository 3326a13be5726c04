"""Hostile bytes in the logs of a real daemon: each handled and counted, memory bounded.

One daemon follows several files; each test appends a kind of garbage followed by a failure
line, and checks that the failure still comes out, the garbage is counted, and the daemon's
peak RSS stays under `RSS_BOUND_MIB` (docs/reliability.md's figure; an idle daemon takes about 45 MiB).
"""

from __future__ import annotations

import json
import os
import random

import pytest
from faultkit import figure, peak_rss_mib, sample, served_url
from watch_harness import DaemonProcess, wait_for

from matcher.testing import line_for

RSS_BOUND_MIB = 100
TS = "2026-01-01T00:00:00.000000000Z"


@pytest.fixture
def daemon(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("plain.log", "cri.log", "docker.log"):
        (logs / name).touch()
    with DaemonProcess(tmp_path, [str(logs / "*.log")], "--metrics-addr", "127.0.0.1:0") as d:
        d.url = wait_for(lambda: served_url(d), 20)
        d.logs = logs
        yield d
        assert d.stop() == 0


def _append(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _malformed(d, reason: str) -> float:
    return sum(v for (name, labels), v in _all(d).items()
               if name == "sglang_matcher_malformed_input_total" and ("reason", reason) in labels)


def _all(d):
    from faultkit import metrics

    return metrics(d.url)


def _bounded(d, what: str) -> None:
    rss = peak_rss_mib(d.proc.pid)
    figure(f"{what}: peak RSS {rss:.0f} MiB (bound {RSS_BOUND_MIB})")
    assert rss < RSS_BOUND_MIB


def test_invalid_utf8_and_nul_bytes(daemon):
    """A megabyte of random bytes (invalid UTF-8, NULs, stray newlines): replaced, counted."""
    rng = random.Random(1)
    _append(daemon.logs / "plain.log", rng.randbytes(1 << 20) + b"\n" + line_for(0).encode() + b"\n")
    daemon.wait_seqs({0})
    assert wait_for(lambda: _malformed(daemon, "invalid_utf8") > 1000 and
                    _malformed(daemon, "nul_byte") > 1000, 10)
    _bounded(daemon, "1 MiB of random bytes")


def test_a_100_mb_line_without_newline(daemon, scale):
    """A line of 100 MB: its first 1 MiB is kept, the rest dropped and counted; the next line
    is matched as usual."""
    block = b"x" * (1 << 20)
    with open(daemon.logs / "plain.log", "ab") as f:
        for _ in range(scale.long_line_mb):
            f.write(block)
    _append(daemon.logs / "plain.log", b"\n" + line_for(1).encode() + b"\n")
    daemon.wait_seqs({1}, timeout=120)
    assert sample(daemon.url, "sglang_matcher_lines_truncated_total", source=str(daemon.logs / "*.log")) == 1
    _bounded(daemon, f"a {scale.long_line_mb} MB line")


def test_a_huge_traceback(daemon, scale):
    """A traceback of a million frames (CI: 100,000) is one record, capped, and its final
    exception line is still recognized."""
    frame = '  File "/opt/sglang/srt/managers/scheduler.py", line 1234, in event_loop_normal\n' \
            "    result = self.run_batch(batch)\n"
    with open(daemon.logs / "plain.log", "a") as f:
        f.write("Traceback (most recent call last):\n")
        for start in range(0, scale.traceback_lines, 10_000):
            f.write(frame * min(10_000, scale.traceback_lines - start))
        f.write("RuntimeError: injected failure seq=2 end\n")
    daemon.wait_seqs({2}, timeout=180)
    _bounded(daemon, f"a traceback of {scale.traceback_lines} frames")


def test_ansi_garbage(daemon):
    """Escape sequences, broken ones included, around and inside lines: the coloured failure
    line is recognized."""
    rng = random.Random(3)
    junk = "".join(rng.choice(["\x1b[", "\x1b[31m", "\x1b[0m", "\x1b]0;t\x07", "\x1b[38;5;",
                               "\x1b[?25l", "m", ";", "9", "\x1b", "text "]) for _ in range(100_000))
    _append(daemon.logs / "plain.log",
            (junk + "\n\x1b[31m" + line_for(3) + "\x1b[0m\n").encode())
    daemon.wait_seqs({3})
    _bounded(daemon, "ANSI garbage")


def test_cri_lines_with_broken_timestamps(daemon):
    """A CRI log whose later lines lost their timestamp or stream: read as plain text, counted
    as not in the container format, and the good lines still decoded."""
    lines = [f"{TS} stdout F {line_for(4)}",
             f"garbage-ts stdout F {line_for(5)}",
             f"{TS} nostream F half",
             "",
             f"{TS} stdout F {line_for(6)}"]
    _append(daemon.logs / "cri.log", ("\n".join(lines) + "\n").encode())
    daemon.wait_seqs({4, 5, 6})
    assert wait_for(lambda: _malformed(daemon, "container_format") >= 2, 10)


def test_docker_json_that_does_not_parse(daemon):
    """docker json-file lines cut or broken: read as text, counted; valid ones decoded."""
    good = [json.dumps({"log": line_for(i) + "\n", "stream": "stdout", "time": TS})
            for i in (7, 9)]
    bad = ['{"log": "cut in the mid', '{"log": 42}', "[1, 2", f'{{"log": "{line_for(8)}\\n"']
    _append(daemon.logs / "docker.log", ("\n".join([good[0], *bad, good[1]]) + "\n").encode())
    daemon.wait_seqs({7, 9})
    assert wait_for(lambda: _malformed(daemon, "container_format") >= 3, 10)


def test_a_burst_of_lines_at_once(tmp_path, scale):
    """A million lines (CI: 200,000) written in one go, one in 1,000 a failure: every line is
    read and counted, every failure reported once, memory bounded (the reader never runs ahead of
    the pipeline by more than one chunk)."""
    import subprocess
    import sys
    from pathlib import Path

    log = tmp_path / "server.log"
    log.touch()
    n = scale.burst_lines
    with DaemonProcess(tmp_path, [str(log)], "--metrics-addr", "127.0.0.1:0") as d:
        url = wait_for(lambda: served_url(d), 20)
        subprocess.run([sys.executable, str(Path(__file__).with_name("writers.py")), "burst",
                        "--path", str(log), "--lines", str(n), "--error-every", "1000"],
                       check=True, timeout=300)
        expected = set(range(0, n, 1000))
        d.wait_seqs(expected, timeout=300)
        assert wait_for(lambda: sample(url, "sglang_matcher_lines_total", source=str(log)) == n, 60)
        rss = peak_rss_mib(d.proc.pid)
        assert d.stop() == 0
    seqs = d.seqs()
    figure(f"burst of {n} lines ({os.path.getsize(log) >> 20} MiB) at once: "
           f"{len(seqs)}/{len(expected)} failures, peak RSS {rss:.0f} MiB (bound {RSS_BOUND_MIB})")
    assert set(seqs) == expected and max(seqs.values()) == 1
    assert rss < RSS_BOUND_MIB
