"""Descriptors under attack (issue 12): hundreds of slow HTTP clients against a real daemon.

The issue: ~1,000 slow connections each held a thread and a descriptor for as long as they kept
sending a byte within every 10 s; /healthz timed out and the log reader ran out of descriptors.
On that code this test fails on the descriptor bound: the daemon's connections only grow (117
descriptors after the 14 s here, 121 after 90 s; its 5-deep listen queue is all that slows the
growth). (Idle connections and huge bodies: `test_security.py`; the caps themselves, in
process: `tests/test_http.py`.)
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
import time
import urllib.request
from collections import Counter

from faultkit import figure, served_url
from watch_harness import DaemonProcess, wait_for

from matcher.http import MAX_CONNECTIONS
from matcher.testing import line_for

ATTACKERS = 300
NOFILE = 256  # the daemon's descriptor limit here: fewer than the attackers
HALF_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: slow"
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class SlowClients:
    """`n` connections that each send half a request head, then one more byte every `dribble`
    seconds (which a per-read timeout never cuts); every connection the server closes is opened
    again at once. Connects are non-blocking, all `n` in flight at once, so a short listen
    backlog does not slow the attack down."""

    def __init__(self, host: str, port: int, n: int, dribble: float = 4.0) -> None:
        self.address = (host, port)
        self.n = n
        self.dribble = dribble
        self.opened = 0  # connections that got their half head sent
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SlowClients:
        self._thread.start()
        wait_for(lambda: self.opened >= self.n, 30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _connect(self, sel: selectors.BaseSelector) -> None:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(self.address)
        sel.register(s, selectors.EVENT_WRITE)

    def _run(self) -> None:
        last_dribble = time.monotonic()
        with selectors.DefaultSelector() as sel:
            while not self._stop.is_set():
                for _ in range(self.n - len(sel.get_map())):
                    self._connect(sel)
                for key, events in sel.select(0.05):
                    s = key.fileobj
                    try:
                        # connected (or failed)
                        if events & selectors.EVENT_WRITE \
                                and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                            s.send(HALF_HEAD)
                            sel.modify(s, selectors.EVENT_READ)
                            self.opened += 1
                            continue
                        # readable: closed by the server (or answered): open another
                    except OSError:
                        pass
                    sel.unregister(s)
                    s.close()
                if time.monotonic() - last_dribble >= self.dribble:
                    last_dribble = time.monotonic()
                    for key in list(sel.get_map().values()):
                        if key.events == selectors.EVENT_READ:
                            try:
                                key.fileobj.send(b"w")
                            except OSError:
                                sel.unregister(key.fileobj)
                                key.fileobj.close()
            for key in list(sel.get_map().values()):
                key.fileobj.close()


def test_slow_clients_cannot_starve_health_descriptors_or_the_reader(tmp_path):
    """300 slow connections (half a request head, then a byte every 4 s), reopened as soon as
    the daemon closes them, for longer than the 10 s request deadline, against a daemon allowed
    256 descriptors: /healthz answers 200 within 2 s every time it is asked (twice a second),
    the daemon's open descriptors stay within the connection cap of its baseline, and a log
    file created meanwhile is opened and its line delivered."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").touch()
    d = DaemonProcess(tmp_path, [str(logs / "*.log")], "--metrics-addr", "127.0.0.1:0")
    d.prefix = ["prlimit", f"--nofile={NOFILE}", "--"]
    with d:
        url = wait_for(lambda: served_url(d), 20)
        host, port = url.removeprefix("http://").split(":")
        baseline = _fds(d.proc.pid)
        answers: Counter[int | str] = Counter()
        slowest = 0.0
        peak = baseline
        with SlowClients(host, int(port), ATTACKERS) as attack:
            # Under way once the daemon holds a cap's worth of them (the kernel queues the rest).
            assert wait_for(lambda: _fds(d.proc.pid) >= baseline + MAX_CONNECTIONS, 60)
            began = time.monotonic()
            written = False
            while time.monotonic() - began < 14:
                t0 = time.monotonic()
                try:
                    with OPENER.open(url + "/healthz", timeout=2) as r:
                        answers[r.status] += 1
                except OSError as e:
                    answers[type(e).__name__] += 1
                slowest = max(slowest, time.monotonic() - t0)
                peak = max(peak, _fds(d.proc.pid))
                if not written and time.monotonic() - began > 3:
                    with open(logs / "b.log", "a") as f:
                        f.write(line_for(0) + "\n")
                    written = True
                time.sleep(0.5)
            delivered = d.wait_seqs({0}, timeout=30)
            opened = attack.opened
        assert wait_for(lambda: _fds(d.proc.pid) <= baseline + 2, 30)
        assert d.stop() == 0
    figure(f"{ATTACKERS} slow HTTP clients ({opened} connections over ~14 s): /healthz "
           f"{dict(answers)}, slowest {slowest:.2f} s; daemon descriptors {baseline} → peak "
           f"{peak} (limit {NOFILE}, HTTP cap {MAX_CONNECTIONS}); a log file created "
           f"during the attack was read")
    assert set(answers) == {200}, answers
    assert peak <= baseline + MAX_CONNECTIONS + 16, (baseline, peak)
    assert delivered[0] == 1
    assert opened > ATTACKERS  # the server did close them (the cap), and they came back
