"""Many distinct errors under a real daemon (issue 12).

Before the fix, past 10,000 distinct unknown errors within the repeat interval every event
rebuilt the repeat table and the table of groups emitted early: 100,000 distinct errors took
over 200 s, /healthz failed and SIGTERM did not finish within 60 s. Here a daemon reads
`distinct` distinct unknown errors written at once (so all are read within the 60 s interval),
with the repeat limit on (the default, which the harness turns off) and, for comparison, off.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from faultkit import figure, metrics, peak_rss_mib, served_url, stderr_events
from test_aggregate import _word  # distinct letters: a fingerprint masks digits, not words
from watch_harness import DaemonProcess, wait_for

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
AT_SIGTERM = 5_000  # distinct errors written just before SIGTERM: the drain reads them
SIGTERM_BOUND = 5.0  # seconds, as the issue asks


def _errors(start: int, stop: int) -> bytes:
    """sglang-prefixed `ValueError: …` lines: a prefixed line closes the one before it (a bare
    exception line would take the next as its message's continuation)."""
    ts = time.strftime("%Y-%m-%d %H:%M:%S")
    return "".join(f"[{ts} TP0] ValueError: unexpected state {_word(i)}\n"
                   for i in range(start, stop)).encode()


def _unknown(url: str) -> float:
    return sum(v for (name, _), v in metrics(url).items()
               if name == "sglang_log_unknown_errors_total")


class HealthProbe:
    """Asks /healthz five times a second with a 2 s timeout, in a thread; every answer kept."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: Counter[int | str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with OPENER.open(self.url + "/healthz", timeout=2) as r:
                    self.answers[r.status] += 1
            except OSError as e:  # HTTPError (a 503) included
                self.answers[getattr(e, "code", None) or type(e).__name__] += 1
            self._stop.wait(0.2)


@dataclass(frozen=True)
class Run:
    counted: float  # sglang_log_unknown_errors_total once all were read
    events: int  # unknown-error events on stdout after the stop (printed: all distinct)
    took: float  # seconds from the write to the last one counted
    stop: float  # seconds from SIGTERM to exit
    health: Counter[int | str]
    rss: float  # peak resident MiB before the stop


def _read_them(tmp: Path, distinct: int, repeat_interval: int) -> Run:
    """A daemon reads `distinct` errors written at once; then AT_SIGTERM more are written and it
    is sent SIGTERM, which must read them too and exit within the bound."""
    tmp.mkdir()
    log = tmp / "server.log"
    log.touch()
    d = DaemonProcess(tmp, [str(log)], "--metrics-addr", "127.0.0.1:0",
                      env={"SGLANG_MATCHER_REPEAT_INTERVAL": str(repeat_interval)})
    with d:
        url = wait_for(lambda: served_url(d), 20)
        with HealthProbe(url) as probe:
            began = time.monotonic()
            with open(log, "ab") as f:
                f.write(_errors(0, distinct))
            wait_for(lambda: _unknown(url) >= distinct, 600, interval=0.1)
            took = time.monotonic() - began
            counted = _unknown(url)
            rss = peak_rss_mib(d.proc.pid)
        with open(log, "ab") as f:  # (the probe has stopped: the stop ends the server too)
            f.write(_errors(distinct, distinct + AT_SIGTERM))
        stopping = time.monotonic()
        assert d.stop(timeout=SIGTERM_BOUND) == 0  # TimeoutExpired past the bound
        stop = time.monotonic() - stopping
    events = sum(1 for e in d.events() if e["event"] == "sglang_unknown_error")
    assert stderr_events(d, "stopped")
    return Run(counted, events, took, stop, probe.answers, rss)


def test_many_distinct_errors_are_all_counted_with_health_and_a_prompt_stop(tmp_path, scale):
    """20,000 distinct unknown errors (100,000 with --full) read within one repeat interval:
    every one counted and printed, /healthz 200 every time it is asked, SIGTERM (with 5,000
    more just written, which its drain reads) done within 5 s — with the repeat limit on as with
    it off. The figure compares the two runs' read times: a ratio, not a duration."""
    distinct = 100_000 if scale.full else 20_000
    off = _read_them(tmp_path / "interval-0", distinct, 0)
    on = _read_them(tmp_path / "interval-60", distinct, 60)
    figure(f"{distinct} distinct unknown errors read within the repeat interval: counted "
           f"{on.counted:.0f}, printed {on.events} (with {AT_SIGTERM} written at SIGTERM); "
           f"/healthz {dict(on.health)}; SIGTERM done within {SIGTERM_BOUND:g} s; peak RSS "
           f"{on.rss:.0f} MiB; read time {on.took / off.took:.2f}x that with the repeat limit "
           f"off (peak RSS {off.rss:.0f} MiB)")
    for run in (off, on):
        assert run.counted == distinct
        assert run.events == distinct + AT_SIGTERM  # distinct: none is a repeat to hold back
        assert run.health and set(run.health) == {200}, run.health
        assert run.stop <= SIGTERM_BOUND
