"""A real Prometheus server for tests, on 127.0.0.1, scraping real daemons.

Debian's `prometheus` package (.ci/apt-packages) gives `prometheus` and `promtool`. The server
gets a 1 s scrape and evaluation interval, its storage in the test's tmp dir, optional rule
files, and is stopped (terminated, then killed) when the `with` block ends. Nothing here sleeps a
fixed time to decide an outcome: `poll` waits for a condition, with a deadline and a reason.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import pytest
from debian import require_tool

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
JOB = "sglang-matcher"  # the job name deploy/prometheus's alerts expect


def tool(name: str) -> str:
    """`prometheus` or `promtool` (Debian's `prometheus` package): skipped if absent, failed in CI."""
    return require_tool(name, "prometheus")


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    try:
        with OPENER.open(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()
    except OSError:
        return 0, b""


def poll(what: str, probe: Callable[[], Any], deadline_s: float,
         alive: Callable[[], str] = lambda: "") -> Any:
    """`probe()` until it returns something truthy; fail with `what` (and why) at the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        result = probe()
        if result:
            return result
        problem = alive()
        if problem or time.monotonic() > deadline:
            pytest.fail(f"{what}: {problem or f'not within {deadline_s:g} s'}")
        time.sleep(0.2)


def free_port() -> int:
    """A loopback port free now, for a daemon to listen on in a moment: taken at random below
    the kernel's ephemeral range, which it hands out to any connection (and to a `bind` to
    port 0) — a port from that range was taken by another test's connection between this
    pick and the daemon's start ("Address already in use" in a CI run under load)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, max(10001, low))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # nothing free down there: the kernel's choice
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scraped_daemon(tmp_path: Path) -> tuple[Path, Any]:
    """(its log, a `watch_harness.DaemonProcess` not yet started): the built-in catalog
    following `tmp_path/logs/*.log` — one empty file so far — with its metrics on a free
    loopback port (`served_url` says which, once it serves)."""
    from watch_harness import DaemonProcess

    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "server.log"
    log.touch()
    return log, DaemonProcess(tmp_path, [str(logs / "*.log")], "--metrics-addr", "127.0.0.1:0",
                              builtin=True)


def served_url(daemon: Any) -> str | None:
    """The URL a `watch_harness.DaemonProcess` started with `--metrics-addr` logged it serves."""
    for line in daemon.err.read_text().splitlines():
        if '"serving"' in line:
            return str(json.loads(line)["url"])
    return None


class ServerProcess:
    """A server the test starts on loopback: launched, polled until its `/-/ready` says 200,
    terminated at exit; `alive()` says why it stopped (for `poll`)."""

    name = "server"
    tmp: Path
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def launch(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.tmp, env=env)
        try:
            poll(f"{self.name} ready",
                 lambda: fetch(f"http://127.0.0.1:{self.port}/-/ready")[0] == 200, 30,
                 self.alive)
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc: object) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def alive(self) -> str:
        """'' while the server runs, else why it stopped."""
        if self.proc is not None and self.proc.poll() is None:
            return ""
        code = None if self.proc is None else self.proc.returncode
        return f"{self.name} exited with {code}:\n{self.log.read_text()[-3000:]}"


class Prometheus(ServerProcess):
    """`prometheus` scraping `targets` (HOST:PORT) as job `sglang-matcher`, with `rule_files`,
    sending its alerts to `alertmanagers` (HOST:PORT)."""

    name = "prometheus"

    def __init__(self, tmp_path: Path, targets: Sequence[str],
                 rule_files: Sequence[Path] = (), alertmanagers: Sequence[str] = ()) -> None:
        self.tmp = tmp_path
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        self.config = tmp_path / "prometheus.yml"
        rules = "".join(f"  - '{p}'\n" for p in rule_files)
        self.config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            + (f"rule_files:\n{rules}" if rules else "")
            + ("alerting:\n  alertmanagers:\n    - static_configs:\n"
               f"        - targets: {json.dumps(list(alertmanagers))}\n" if alertmanagers else "")
            + f"scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n"
            f"      - targets: {json.dumps(list(targets))}\n")
        self.log = tmp_path / "prometheus.log"

    def __enter__(self) -> Self:
        self.launch([tool("prometheus"), f"--config.file={self.config}",
                     f"--storage.tsdb.path={self.tmp / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"])
        return self

    def api_query(self, q: str) -> dict[str, Any]:
        """The whole answer of /api/v1/query (status, data or errorType/error)."""
        status, body = fetch(f"{self.api}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        try:
            return dict(json.loads(body))
        except ValueError:
            return {"status": "error", "error": f"HTTP {status}: {body[:200]!r}"}

    def query(self, q: str) -> list[dict[str, Any]]:
        """The result vector of an instant query (empty on any error)."""
        answer = self.api_query(q)
        return list(answer["data"]["result"]) if answer.get("status") == "success" else []

    def targets(self) -> list[dict[str, Any]]:
        return list(json.loads(fetch(f"{self.api}/api/v1/targets")[1])["data"]["activeTargets"])
