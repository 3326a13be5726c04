"""The benchmark of issue 6: `sglang-matcher` side by side with grep and mtail, in one run.

Why one script and one run: the machine is shared, so absolute figures drift; ratios measured
minutes apart on the same file are what the targets are stated in. Every figure is the median of
`--runs` runs after one warm-up run (page cache and the compiled-catalog cache warm), whole
command wall time, start-up included. Peak RSS comes from `/usr/bin/time -v`.

And because a fast wrong answer is worth nothing, every tool's count is checked against the
generator's ground truth (`bench/genlog.py`): `scan` events per pattern, grep's matching lines,
mtail's counter per pattern. A mismatch is printed loudly and marked in the table and the JSON.

Then the daemon (`sglang-matcher watch`): write-to-event latency with 1,000 lines/s of traffic,
catch-up over a large backlog (`--from-beginning`, polled through `/metrics`), and idle CPU and
RSS with 16 files tailed, for the curated and the full catalog.

    python bench/run.py --quick          # 100k lines, 3 runs: minutes
    python bench/run.py                  # 1M lines, 5 runs, 1 GB catch-up: half an hour or more
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CURATED = ROOT / "patterns" / "sglang" / "curated"
# `--sglang-version all`: the generated log mixes failures of every release sglang's catalog
# knows (0.4.0 to 0.5.23) in one server's log, which no real server writes; `auto` would learn
# a release from one failure and let it decide between near-identical templates of the next.
SCAN = [sys.executable, "-m", "matcher", "scan", "--format", "json", "--sglang-version", "all"]
SCAN_CURATED = [*SCAN, "--no-builtin", "--catalog", str(CURATED)]
GREP = ["env", "LC_ALL=C", "grep", "-E", "-c", "-f"]
MB = 1e6
# The seed case: its capture (`arg1`) carries a per-error token in the latency test.
LATENCY_LINE = ("ValueError: --enable-int8-mamba-checkpoint only supports the built-in mamba radix "
                "cache; --radix-cache-backend='{token}' is not int8-aware. Omit --radix-cache-backend.")


@dataclass
class Timed:
    """One command measured: medians over runs, and what it printed on its last run."""

    name: str
    runs: list[float]
    rss_kb: list[int]
    stdout: str = ""
    lines: int = 0
    bytes: int = 0

    @property
    def wall(self) -> float:
        return statistics.median(self.runs)

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.wall

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.wall

    def row(self) -> dict[str, Any]:
        return {"name": self.name, "median_s": round(self.wall, 3), "runs_s": [round(x, 3) for x in self.runs],
                "lines_per_s": round(self.lines_per_s), "mb_per_s": round(self.mb_per_s, 2),
                "peak_rss_mb": round(max(self.rss_kb) / 1024, 1), "lines": self.lines,
                "bytes": self.bytes}


@dataclass
class Report:
    config: dict[str, Any]
    throughput: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    daemon: dict[str, Any] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)

    def check(self, what: str, expected: Any, got: Any) -> bool:
        ok = expected == got
        self.checks.append({"what": what, "ok": ok, **({} if ok else {"expected": expected, "got": got})})
        if not ok:
            print(f"\n!!!!! COUNT MISMATCH: {what}\n!!!!!   expected {_short(expected)}\n"
                  f"!!!!!   got      {_short(got)}\n", file=sys.stderr, flush=True)
        return ok

    def target(self, what: str, value: float, goal: str, ok: bool) -> None:
        self.targets.append({"target": what, "measured": round(value, 3), "goal": goal, "met": ok})


def _short(x: Any) -> str:
    text = json.dumps(x, sort_keys=True, default=str)
    return text if len(text) < 600 else text[:600] + "…"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- commands ---------------------------------------------------------------------------------

def run_timed(name: str, cmd: Sequence[str], runs: int, *, warm: bool = True, lines: int, size: int,
              timeout: float) -> Timed:
    """Wall time by Python's clock around the whole command; peak RSS from /usr/bin/time -v."""
    out = Timed(name, [], [], lines=lines, bytes=size)
    for i in range(runs + int(warm)):
        t0 = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, check=False)
        wall = time.perf_counter() - t0
        if done.returncode not in (0, 1):
            raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}")
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])  # type: ignore[index]
        if warm and i == 0:
            continue
        out.runs.append(wall)
        out.rss_kb.append(rss)
        out.stdout = done.stdout
        log(f"{name}: run {len(out.runs)}/{runs} {wall:.2f} s, {rss / 1024:.0f} MB")
    return out


def events_by_pattern(stdout: str) -> tuple[dict[str, int], int]:
    counts: collections.Counter[str] = collections.Counter()
    unknown = 0
    for line in stdout.splitlines():
        e = json.loads(line)
        if e["event"] in ("sglang_error", "sglang_warning"):  # a record's event, any severity
            counts[e["pattern_id"]] += 1
        else:
            unknown += 1
    return dict(sorted(counts.items())), unknown


def expected_events(truth: dict[str, Any], scope: str) -> dict[str, int]:
    return dict(sorted((pid, p["events"][scope]) for pid, p in truth["patterns"].items()
                       if p["events"][scope]))


def generate(path: Path, n: int, seed: int, error_every: int) -> dict[str, Any]:
    truth_path = path.with_name(path.name + ".truth.json")
    if path.exists() and truth_path.exists():
        truth = json.loads(truth_path.read_text())
        if (truth["lines"], truth["seed"], truth["error_every"]) == (n, seed, error_every) \
                and path.stat().st_size == truth["bytes"]:
            log(f"reusing {path} ({n} lines)")
            return truth
    log(f"generating {path}: {n} lines")
    subprocess.run([sys.executable, str(ROOT / "bench" / "genlog.py"), "-n", str(n), "-o", str(path),
                    "--seed", str(seed), "--error-every", str(error_every)], check=True, cwd=ROOT)
    return json.loads(truth_path.read_text())


UNTRANSLATED: dict[str, set[str]] = {}  # export file → ids the dialect cannot express


def compiled(tree: Path = ROOT) -> None:
    """The package's bytecode written, as pip writes it when it installs the wheel: where none
    is written (`PYTHONDONTWRITEBYTECODE`, set on this machine, or a read-only tree) a module
    edited since its `.pyc` is compiled from source at every start, and a fresh clone compiles
    the whole package each time: 0.56 s to import what a scan imports instead of 0.24 s,
    measured as its start-up."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "matcher")], check=True)


def export(dialect: str, dest: Path, *paths: Path) -> Path:
    """Export with the CLI; remember which patterns it could not translate (a tool cannot be
    expected to count the lines of a pattern it was never given)."""
    done = subprocess.run([sys.executable, "-m", "matcher", "catalog", "export", "--dialect",
                           dialect, *map(str, paths), "-o", str(dest)], check=True, cwd=ROOT,
                          capture_output=True, text=True)
    UNTRANSLATED[str(dest)] = set(re.findall(r"not translated: .*\(id ([^)]+)\)", done.stderr))
    return dest


def expected_lines(truth: dict[str, Any], scope: str, untranslated: set[str]) -> int:
    """Lines a line tool must count: the scope's total, less those of untranslated patterns."""
    return truth["totals"][scope]["lines"] - sum(
        p["lines"] for pid, p in truth["patterns"].items() if pid in untranslated)


def mtail_cmd(progs: Path, logfile: Path) -> list[str]:
    return ["mtail", "--one_shot", "--one_shot_format=json", "--progs", str(progs), "--logs",
            str(logfile), "--address", "127.0.0.1", "--port", "0", "--logtostderr=false",
            "--log_dir", str(progs.parent)]


def mtail_counters(stdout: str) -> dict[str, int]:
    out = {}
    for name, series in json.loads(stdout).items():
        out[name.removeprefix("pattern_")] = int(sum(v["Value"]["Value"] for s in series
                                                     for v in s.get("LabelValues", [])))
    return out


# -- the daemon -------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """`sglang-matcher watch` as a child process; its stdout lines timestamped on arrival."""

    def __init__(self, paths: Sequence[str], state: Path, *, curated: bool, env: dict[str, str],
                 from_beginning: bool = False, metrics: bool = False) -> None:
        self.port = free_port() if metrics else None
        cmd = [sys.executable, "-m", "matcher", "watch", *paths, "--state-dir", str(state)]
        cmd += ["--no-builtin", "--catalog", str(CURATED)] if curated else []
        cmd += ["--from-beginning"] if from_beginning else []
        cmd += ["--metrics-addr", f"127.0.0.1:{self.port}"] if self.port else []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                                     env={**os.environ, **env}, text=True, bufsize=1)
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.stderr: list[str] = []
        self.started = threading.Event()
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.time()
            try:
                self.events.append((now, json.loads(line)))
            except ValueError:
                pass

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            if '"started"' in line or "started" in line:
                self.started.set()

    def wait_started(self, timeout: float = 120) -> None:
        if not self.started.wait(timeout):
            self.stop()
            raise SystemExit("daemon did not start:\n" + "".join(self.stderr[-30:]))

    def metric(self, name: str) -> float:
        body = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5).read().decode()
        return sum(float(m[1]) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", body, re.M))

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> tuple[float, float]:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        get = lambda k: int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M)[1]) / 1024  # type: ignore[index]  # noqa: E731
        return get("VmRSS"), get("VmHWM")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def latency(work: Path, *, curated: bool, errors: int, rate: int, errors_per_s: float,
            env: dict[str, str]) -> dict[str, Any]:
    """A writer appends `rate` lines/s of traffic and, `errors_per_s` times a second, a traceback
    whose message carries a unique token; latency = the event's arrival on the daemon's stdout −
    the time the traceback's last line was written and flushed."""
    sys.path.insert(0, str(ROOT / "bench"))
    import random

    from genlog import Traffic  # type: ignore[import-not-found]

    daemon, logfile = _follow_new_log(work / ("lat-curated" if curated else "lat-full"),
                                      curated=curated, env=env)
    traffic = Traffic(random.Random(7))
    written: dict[str, float] = {}
    t0 = time.monotonic()
    every = rate / errors_per_s
    with open(logfile, "a", encoding="utf-8") as out:
        n = 0
        while len(written) < errors:
            target = t0 + n / rate
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            n += 1
            if n % int(every) == 0:
                token = f"tok{len(written):06d}"
                out.write(_token_traceback(token))
                out.flush()
                written[token] = time.time()
            else:
                out.write(traffic.line(time.strftime("%Y-%m-%d %H:%M:%S")) + "\n")
                out.flush()
        # the last traceback is closed by traffic that follows it
        for _ in range(rate):
            out.write(traffic.line(time.strftime("%Y-%m-%d %H:%M:%S")) + "\n")
        out.flush()
    deadline = time.time() + 30
    while time.time() < deadline and len(_arrivals(daemon)) < errors:
        time.sleep(0.2)
    daemon.stop()
    return {"catalog": "curated" if curated else "full", "errors_written": errors,
            **_latencies(daemon, written, method="exclusive"), "traffic_lines_per_s": rate,
            "errors_per_s": errors_per_s, "env": env}


def crash_latency(work: Path, *, curated: bool, crashes: int, env: dict[str, str]) -> dict[str, Any]:
    """The failure is the last thing a dying server writes: one traceback, its exception line
    last, and then nothing — no traffic, no next line to close it. Latency = the event's arrival
    on the daemon's stdout − the time the exception line was written and flushed. One crash at
    a time (the next only once the last one's event is out, or 10 s passed)."""
    daemon, logfile = _follow_new_log(work / ("crash-curated" if curated else "crash-full"),
                                      curated=curated, env=env)
    written: dict[str, float] = {}
    with open(logfile, "a", encoding="utf-8") as out:
        for i in range(crashes):
            token = f"tok{i:06d}"
            out.write(_token_traceback(token))
            out.flush()
            written[token] = time.time()
            deadline = time.time() + 10
            while token not in _arrivals(daemon) and time.time() < deadline:
                time.sleep(0.005)
            time.sleep(0.2)  # the server is gone; the next one starts later
    daemon.stop()
    # inclusive: with a few hundred samples the exclusive method puts p99 beyond the maximum
    return {"catalog": "curated" if curated else "full", "crashes": crashes,
            **_latencies(daemon, written, method="inclusive"), "env": env}


def _follow_new_log(d: Path, *, curated: bool, env: dict[str, str]) -> tuple[Daemon, Path]:
    """A daemon following `d/server.log`, new and empty, started and given a second to settle."""
    shutil.rmtree(d, ignore_errors=True)
    (d / "state").mkdir(parents=True)
    logfile = d / "server.log"
    logfile.write_text("")
    daemon = Daemon([str(logfile)], d / "state", curated=curated, env=env)
    daemon.wait_started()
    time.sleep(1.0)
    return daemon, logfile


def _token_traceback(token: str) -> str:
    """The seed's traceback, stamped now, its message carrying `token`, its exception line last."""
    sys.path.insert(0, str(ROOT / "bench"))
    from genlog import Failure  # type: ignore[import-not-found]

    f = Failure("4e2cdd4d6209ebbd", "curated", "ValueError",
                LATENCY_LINE.format(token=token).split(": ", 1)[1],
                "python/sglang/srt/arg_groups/mamba_hook.py", 90)
    ts = time.strftime("%Y-%m-%d %H:%M:%S")
    return "\n".join(f.lines(f"[{ts} TP0] ")[:-1]) + "\n"


def _latencies(daemon: Daemon, written: dict[str, float], *, method: str) -> dict[str, Any]:
    """p50, p99 and the maximum of each token's arrival − its write, in ms."""
    arrived = _arrivals(daemon)
    lat = sorted((arrived[t] - w) * 1000 for t, w in written.items() if t in arrived)
    q = statistics.quantiles(lat, n=100, method=method) if len(lat) >= 2 \
        else [float("nan")] * 99
    return {"events_seen": len(lat), "p50_ms": round(q[49], 1), "p99_ms": round(q[98], 1),
            "max_ms": round(max(lat), 1) if lat else None}


def _arrivals(daemon: Daemon) -> dict[str, float]:
    out = {}
    for t, e in list(daemon.events):
        m = re.search(r"tok\d{6}", e.get("message", ""))
        if m and m[0] not in out:
            out[m[0]] = t
    return out


def catch_up(work: Path, logfile: Path, size: int, *, env: dict[str, str]) -> dict[str, Any]:
    """The daemon from its start to having read every byte of a backlog (full catalog).

    Progress is read from `/metrics` every 0.25 s. Not faster: each scrape takes the GIL from a
    busy main loop, and at 20 scrapes/s the same catch-up measured 25% slower (a Prometheus
    scrape every 15 s costs nothing measurable)."""
    d = work / "catchup"
    shutil.rmtree(d, ignore_errors=True)
    (d / "state").mkdir(parents=True)
    t0 = time.perf_counter()
    daemon = Daemon([str(logfile)], d / "state", curated=False, env=env, from_beginning=True,
                    metrics=True)
    read = 0.0
    try:
        while read < size:
            if daemon.proc.poll() is not None:
                raise SystemExit("daemon died:\n" + "".join(daemon.stderr[-30:]))
            time.sleep(0.25)
            try:
                read = daemon.metric("sglang_matcher_bytes_total")
            except OSError:
                continue
        wall = time.perf_counter() - t0
        rss = daemon.rss_mb()
        events = len(daemon.events)
    finally:
        daemon.stop()
    return {"bytes": size, "wall_s": round(wall, 2), "mb_per_s": round(size / MB / wall, 2),
            "events_by_then": events, "peak_rss_mb": round(rss[1], 1)}


def idle(work: Path, *, curated: bool, seconds: float, env: dict[str, str],
         files: int = 16) -> dict[str, Any]:
    """`files` tailed files, nothing written: CPU (utime+stime from /proc) over wall, and RSS."""
    d = work / (f"idle-{files}-curated" if curated else f"idle-{files}-full")
    shutil.rmtree(d, ignore_errors=True)
    (d / "state").mkdir(parents=True)
    for i in range(files):
        (d / f"server-{i}.log").write_text(f"[2026-01-01 12:00:00 TP{i % 8}] Init torch distributed begin.\n")
    daemon = Daemon([str(d / "server-*.log")], d / "state", curated=curated, env=env)
    try:
        daemon.wait_started()
        time.sleep(5)  # settle: first discovery, first checkpoint
        c0, t0 = daemon.cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        cpu, wall = daemon.cpu_seconds() - c0, time.monotonic() - t0
        rss, hwm = daemon.rss_mb()
    finally:
        daemon.stop()
    return {"catalog": "curated" if curated else "full", "files": files, "seconds": round(wall, 1),
            "cpu_percent_of_core": round(100 * cpu / wall, 3), "rss_mb": round(rss, 1),
            "peak_rss_mb": round(hwm, 1)}


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def daemon_start(d: Path, one: Path, cache: Path, env: dict[str, str], *,
                 timeout: float = 600) -> dict[str, Any]:
    """`watch` of the full catalog from exec to `/readyz` 200: how long, what `/readyz` said
    meanwhile, when it logged `started` (reading), and its peak RSS (VmHWM a second after
    ready: the start's peak, loading and compiling included)."""
    shutil.rmtree(d / "state", ignore_errors=True)
    (d / "state").mkdir(parents=True)
    t0 = time.perf_counter()
    daemon = Daemon([str(one)], d / "state", curated=False, metrics=True,
                    env={**env, "SGLANG_MATCHER_CACHE_DIR": str(cache)})
    assert daemon.port is not None
    reasons: list[str] = []
    started = None
    try:
        while True:
            if started is None and daemon.started.is_set():
                started = time.perf_counter() - t0
            code, body = _readyz(daemon.port)
            if code == 200:
                ready = time.perf_counter() - t0
                break
            if code == 503:
                reason = json.loads(body).get("reason", "")
                if not reasons or reasons[-1] != reason:
                    reasons.append(reason)
            if daemon.proc.poll() is not None or time.perf_counter() - t0 > timeout:
                raise SystemExit("daemon did not become ready:\n" + "".join(daemon.stderr[-30:]))
            time.sleep(0.01)
        time.sleep(1.0)
        _, hwm = daemon.rss_mb()
        log_lines = "".join(daemon.stderr)
    finally:
        daemon.stop()
    progress = [x for x in reasons if x.startswith("compiling catalog")]
    return {"readyz_s": round(ready, 3), "started_s": round(started or ready, 3),
            "peak_rss_mb": round(hwm, 1),
            "precompiled": "used" if '"precompiled": "used"' in log_lines else "not used",
            "readyz_said": reasons[:2] + progress[-1:] if progress else reasons[:3]}


def start_up(work: Path, *, runs: int, env: dict[str, str]) -> dict[str, Any]:
    """The full catalog's start, side by side in one run (issue 18): the daemon from exec to
    `/readyz` 200 and its peak RSS, first with an empty cache directory (a new pod: what the
    shipped precompiled catalog is for), then warm (the cache as the cold runs left it) — the
    median of `runs` each, alternating; then one start with no precompiled catalog and an empty
    cache (SGLANG_MATCHER_NO_PRECOMPILED: the compile it avoids, during which the daemon reads
    with the curated layer), and `scan` of a one-line log cold and warm."""
    d = work / "start"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    one = d / "one.log"
    one.write_text("[2026-01-01 12:00:00] Init torch distributed begin.\n")
    # A checkout's artifact is built by `catalog precompile` (a wheel's by its build hook).
    done = subprocess.run([sys.executable, "-m", "matcher", "catalog", "precompile",
                           "--if-needed"], capture_output=True, text=True, cwd=ROOT, check=True)
    log(f"precompiled catalog: {done.stdout.strip().splitlines()[-1]}")
    cold: list[dict[str, Any]] = []
    warm: list[dict[str, Any]] = []
    for i in range(runs):
        cache = d / f"cache-{i}"
        cold.append(daemon_start(d, one, cache, env))
        warm.append(daemon_start(d, one, cache, env))
        log(f"start {i + 1}/{runs}: cold {cold[-1]['readyz_s']} s {cold[-1]['peak_rss_mb']} MB, "
            f"warm {warm[-1]['readyz_s']} s {warm[-1]['peak_rss_mb']} MB")
    med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
    log("start without the precompiled catalog, empty cache (compiles: a minute)")
    compiled = daemon_start(d, one, d / "cache-none", {**env, "SGLANG_MATCHER_NO_PRECOMPILED": "1"})
    scan_env = os.environ.get("SGLANG_MATCHER_CACHE_DIR")
    os.environ["SGLANG_MATCHER_CACHE_DIR"] = str(d / "cache-scan")  # run_timed runs with os.environ
    try:
        scan_cold = run_timed("cold start: scan one line, empty cache", [*SCAN, str(one)], 1,
                              warm=False, lines=1, size=one.stat().st_size, timeout=1800)
        scan_warm = run_timed("warm start: scan one line", [*SCAN, str(one)], runs, lines=1,
                              size=one.stat().st_size, timeout=600)
    finally:
        if scan_env is None:
            os.environ.pop("SGLANG_MATCHER_CACHE_DIR", None)
        else:
            os.environ["SGLANG_MATCHER_CACHE_DIR"] = scan_env
    out = {"catalog": "full",
           "cold_readyz_s": round(med(cold, "readyz_s"), 3),
           "cold_peak_rss_mb": round(med(cold, "peak_rss_mb"), 1),
           "warm_readyz_s": round(med(warm, "readyz_s"), 3),
           "warm_peak_rss_mb": round(med(warm, "peak_rss_mb"), 1),
           "cold_runs": cold, "warm_runs": warm,
           "precompiled": cold[0]["precompiled"],
           "compiling": compiled,
           "scan_cold_s": round(scan_cold.runs[0], 2),
           "scan_cold_peak_rss_mb": round(scan_cold.rss_kb[0] / 1024, 1),
           "scan_warm_s": round(statistics.median(scan_warm.runs), 3),
           "scan_warm_peak_rss_mb": round(max(scan_warm.rss_kb) / 1024, 1)}
    out["cold_to_warm_time"] = round(out["cold_readyz_s"] / out["warm_readyz_s"], 2)
    out["cold_to_warm_rss"] = round(out["cold_peak_rss_mb"] / out["warm_peak_rss_mb"], 2)
    return out


# -- the run ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100k lines, 3 runs, small daemon tests")
    ap.add_argument("--lines", type=int, help="log size for the throughput runs (default 1M)")
    ap.add_argument("--runs", type=int, help="timed runs per command (default 5; 3 with --quick)")
    ap.add_argument("--slow-runs", type=int, default=1,
                    help="runs for grep with the full catalog, which takes minutes per run "
                         "(default 1; its count is checked either way)")
    ap.add_argument("--mtail-lines", type=int, default=100_000,
                    help="mtail reads a smaller log of this many lines (ratio per line)")
    ap.add_argument("--backlog-lines", type=int,
                    help="catch-up backlog (default 6M lines, ~1 GB; with --quick the main log)")
    ap.add_argument("--catchup-runs", type=int, default=3,
                    help="daemon catch-up and scan runs over the backlog, alternating (median)")
    ap.add_argument("--latency-errors", type=int, help="errors injected (default 1000)")
    ap.add_argument("--crashes", type=int,
                    help="last-line crashes in the crash-latency run (default 200; 50 quick)")
    ap.add_argument("--idle-seconds", type=float, help="idle measurement (default 60)")
    ap.add_argument("--idle-many-files", type=int, default=2000,
                    help="files followed in the third idle run (curated catalog)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sglang-bench"))
    ap.add_argument("--out", type=Path, help="JSON results (default bench/results/<mode>.json)")
    ap.add_argument("--skip", action="append", default=[],
                    choices=("throughput", "mtail", "grep-full", "latency", "crash", "catchup",
                             "idle", "start"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    compiled()
    q = args.quick
    n = args.lines or (100_000 if q else 1_000_000)
    runs = args.runs or (3 if q else 5)
    backlog_lines = args.backlog_lines or (0 if q else 6_000_000)
    lat_errors = args.latency_errors or (100 if q else 1000)
    crashes = args.crashes or (50 if q else 200)
    idle_s = args.idle_seconds or (15 if q else 60)
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    # mtail is needed only by its own step: a run that skips it goes on without it.
    for tool in ("grep", "/usr/bin/time", *(() if "mtail" in args.skip else ("mtail",))):
        if not shutil.which(tool):
            raise SystemExit(f"needs {tool} (Debian: grep, mtail, time)")
    report = Report(config={
        "mode": "quick" if q else "full", "lines": n, "runs": runs, "slow_runs": args.slow_runs,
        "mtail_lines": args.mtail_lines, "backlog_lines": backlog_lines,
        "latency_errors": lat_errors, "idle_seconds": idle_s, "seed": args.seed,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "kernel": platform.release()},
        "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=ROOT, check=False).stdout.strip(),
        # the tree is shared: say which of the matcher's files differed from that commit
        "uncommitted": subprocess.run(["git", "status", "--porcelain", "matcher", "patterns"],
                                      capture_output=True, text=True, cwd=ROOT,
                                      check=False).stdout.split("\n")[:-1],
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    })
    env = {"SGLANG_MATCHER_REPEAT_INTERVAL": "0"}  # every injected error is printed
    logfile = work / f"sglang-{n}.log"
    truth = generate(logfile, n, args.seed, 1000)
    size, lines = truth["bytes"], truth["lines"]
    pats = work / "patterns"
    pats.mkdir(exist_ok=True)
    cur_grep = export("grep", pats / "curated.grep", CURATED)
    full_grep = export("grep", pats / "full.grep")
    progs = pats / "mtail"
    progs.mkdir(exist_ok=True)
    export("mtail", progs / "curated.mtail", CURATED)
    report.config["untranslated"] = {Path(k).name: sorted(v) for k, v in UNTRANSLATED.items()}
    timed: dict[str, Timed] = {}
    t = lambda name, cmd, r=runs, **kw: timed.setdefault(  # noqa: E731
        name, run_timed(name, cmd, r, lines=kw.pop("lines", lines), size=kw.pop("size", size),
                        timeout=7200, **kw))

    if "throughput" not in args.skip:
        t("scan curated", [*SCAN_CURATED, str(logfile)])
        t("grep curated", [*GREP, str(cur_grep), str(logfile)])
        t("scan full", [*SCAN, str(logfile)])
        if "grep-full" not in args.skip:
            t("grep full", [*GREP, str(full_grep), str(logfile)], args.slow_runs,
              warm=args.slow_runs > 1)
        for scope, name in (("curated", "scan curated"), ("full", "scan full")):
            got, unknown = events_by_pattern(timed[name].stdout)
            report.check(f"{name}: events per pattern", expected_events(truth, scope), got)
            report.check(f"{name}: unknown errors", truth["totals"][scope]["unknown_events"], unknown)
        report.check("grep curated: matching lines",
                     expected_lines(truth, "curated", UNTRANSLATED[str(cur_grep)]),
                     int(timed["grep curated"].stdout))
        if "grep full" in timed:
            report.check("grep full: matching lines",
                         expected_lines(truth, "full", UNTRANSLATED[str(full_grep)]),
                         int(timed["grep full"].stdout))
    if "mtail" not in args.skip:
        mlog = work / f"sglang-{args.mtail_lines}.log"
        mtruth = generate(mlog, args.mtail_lines, args.seed, 1000)
        m = t("mtail curated", mtail_cmd(progs, mlog), lines=mtruth["lines"], size=mtruth["bytes"])
        expected = {pid: p["lines"] for pid, p in mtruth["patterns"].items()
                    if p["layer"] == "curated"
                    and pid not in UNTRANSLATED[str(progs / "curated.mtail")]}
        got = {k: v for k, v in mtail_counters(m.stdout).items() if v}
        report.check("mtail curated: lines per pattern", dict(sorted(expected.items())),
                     dict(sorted(got.items())))
        if "scan curated" in timed and mlog != logfile:
            t("scan curated (mtail's log)", [*SCAN_CURATED, str(mlog)], lines=mtruth["lines"],
              size=mtruth["bytes"])
    report.throughput = [x.row() for x in timed.values()]

    if "latency" not in args.skip:
        for curated in (True, False):
            log(f"latency, {'curated' if curated else 'full'} catalog: {lat_errors} errors")
            report.daemon.setdefault("latency", []).append(
                latency(work, curated=curated, errors=lat_errors, rate=1000,
                        errors_per_s=10.0, env=env))
            log(f"  {report.daemon['latency'][-1]}")
    if "crash" not in args.skip:
        for curated in (True, False):
            log(f"last-line crash latency, {'curated' if curated else 'full'} catalog: "
                f"{crashes} crashes")
            report.daemon.setdefault("crash_latency", []).append(
                crash_latency(work, curated=curated, crashes=crashes, env=env))
            log(f"  {report.daemon['crash_latency'][-1]}")
    if "catchup" not in args.skip:
        blog = logfile
        if backlog_lines:
            blog = work / f"backlog-{backlog_lines}.log"
            btruth = generate(blog, backlog_lines, args.seed + 1, 1000)
        else:
            btruth = truth
        log(f"catch-up over {blog} ({btruth['bytes'] / MB:.0f} MB), "
            f"{args.catchup_runs} runs of each, alternating")
        cus: list[dict[str, Any]] = []
        s = Timed("scan full (backlog)", [], [], lines=btruth["lines"], bytes=btruth["bytes"])
        for _ in range(args.catchup_runs):  # side by side: a slow minute slows both
            cus.append(catch_up(work, blog, btruth["bytes"], env=env))
            log(f"  daemon: {cus[-1]}")
            one = run_timed("scan full (backlog)", [*SCAN, str(blog)], 1, warm=False,
                            lines=btruth["lines"], size=btruth["bytes"], timeout=7200)
            s.runs += one.runs
            s.rss_kb += one.rss_kb
            s.stdout = one.stdout
        got, _ = events_by_pattern(s.stdout)
        report.check("scan full (backlog): events per pattern", expected_events(btruth, "full"), got)
        cu = dict(sorted(cus, key=lambda c: c["wall_s"])[(len(cus) - 1) // 2])  # median (low)
        cu["runs_wall_s"] = [c["wall_s"] for c in cus]
        cu["scan_mb_per_s"] = round(s.mb_per_s, 2)
        cu["ratio_to_scan"] = round(cu["mb_per_s"] / s.mb_per_s, 3)
        report.daemon["catch_up"] = cu
        report.throughput.append(s.row())
        log(f"  {cu}")
        if backlog_lines:
            blog.unlink()
            blog.with_name(blog.name + ".truth.json").unlink()
    if "start" not in args.skip:
        log("start-up, full catalog: cold (empty cache), then warm")
        report.daemon["start"] = start_up(work, runs=runs, env=env)
        log(f"  {report.daemon['start']}")
    if "idle" not in args.skip:
        for curated, files in ((True, 16), (False, 16), (True, args.idle_many_files)):
            log(f"idle, {'curated' if curated else 'full'} catalog, {files} files, "
                f"{idle_s:.0f} s")
            report.daemon.setdefault("idle", []).append(
                idle(work, curated=curated, seconds=idle_s, env=env, files=files))
            log(f"  {report.daemon['idle'][-1]}")

    evaluate(report, timed)
    text = render(report)
    print(text)
    out = args.out or ROOT / "bench" / "results" / f"{'quick' if q else 'full'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(asdict(report), indent=1) + "\n")
    log(f"wrote {out}")
    return 0 if all(c["ok"] for c in report.checks) else 1


def evaluate(report: Report, timed: dict[str, Timed]) -> None:
    """The issue's targets, each a ratio (or a bound) from this run."""
    def ratio(a: str, b: str, per: Callable[[Timed], float] = lambda x: x.lines_per_s) -> float | None:
        return per(timed[a]) / per(timed[b]) if a in timed and b in timed else None

    if (r := ratio("scan full", "grep full")) is not None:
        report.target("scan full ÷ grep -E -c -f full (start-up included)", r, "≥ 1", r >= 1)
    mtail_scan = "scan curated (mtail's log)" if "scan curated (mtail's log)" in timed else "scan curated"
    if (r := ratio(mtail_scan, "mtail curated")) is not None:
        report.target("scan curated ÷ mtail curated (lines/s)", r, "≥ 20", r >= 20)
    if (r := ratio("scan curated", "grep curated")) is not None:
        report.target("scan curated ÷ grep curated", r, "≥ 0.5", r >= 0.5)
    if (r := ratio("scan full", "scan curated")) is not None:
        report.target("scan full ÷ scan curated", r, "≥ 0.5", r >= 0.5)
    d = report.daemon
    if "catch_up" in d:
        r = d["catch_up"]["ratio_to_scan"]
        report.target("daemon catch-up ÷ scan full (MB/s)", r, "≥ 0.8", r >= 0.8)
    for lat in d.get("latency", []):
        report.target(f"latency p99, {lat['catalog']} catalog (ms)", lat["p99_ms"], "< 250",
                      lat["p99_ms"] < 250 and lat["events_seen"] == lat["errors_written"])
    for lat in d.get("crash_latency", []):
        report.target(f"last-line crash latency p99, {lat['catalog']} catalog (ms)",
                      lat["p99_ms"], "< 250",
                      lat["p99_ms"] < 250 and lat["events_seen"] == lat["crashes"])
    if "start" in d:
        st = d["start"]
        report.target("first start, empty cache: exec → /readyz (s)", st["cold_readyz_s"],
                      "≤ 2", st["cold_readyz_s"] <= 2)
        report.target("first start, empty cache: peak RSS (MB)", st["cold_peak_rss_mb"],
                      "≤ 150", st["cold_peak_rss_mb"] <= 150)
        report.target("warm start: exec → /readyz (s)", st["warm_readyz_s"], "< 1",
                      st["warm_readyz_s"] < 1)
    for i in d.get("idle", []):
        files = i.get("files", 16)
        if files > 16:  # many files: the CPU goal only (RSS grows with the files followed)
            report.target(f"idle CPU, {files} files, {i['catalog']} (% of a core)",
                          i["cpu_percent_of_core"], "< 2", i["cpu_percent_of_core"] < 2)
            continue
        cap = 60 if i["catalog"] == "curated" else 150
        report.target(f"idle CPU, {i['catalog']} catalog (% of a core)", i["cpu_percent_of_core"],
                      "< 0.5", i["cpu_percent_of_core"] < 0.5)
        report.target(f"idle RSS, {i['catalog']} catalog (MB)", i["rss_mb"], f"< {cap}",
                      i["rss_mb"] < cap)


def render(report: Report) -> str:
    c = report.config
    out = [f"sglang-matcher benchmark ({c['mode']}): {c['lines']:,} lines, median of {c['runs']} runs "
           f"(grep full: {c['slow_runs']}), {c['machine']['cpus']} CPUs, git {c['git']}"
           + (" + uncommitted " + ", ".join(x[3:] for x in c.get("uncommitted", [])) if c.get("uncommitted") else ""), ""]
    out.append(f"{'command':<30} {'median s':>9} {'lines/s':>11} {'MB/s':>8} {'peak RSS MB':>12}")
    for r in report.throughput:
        out.append(f"{r['name']:<30} {r['median_s']:>9.3f} {r['lines_per_s']:>11,} "
                   f"{r['mb_per_s']:>8.1f} {r['peak_rss_mb']:>12.1f}")
    d = report.daemon
    if d:
        out.append("")
        for lat in d.get("latency", []):
            out.append(f"daemon latency, {lat['catalog']:<7} catalog: p50 {lat['p50_ms']} ms, p99 "
                       f"{lat['p99_ms']} ms, max {lat['max_ms']} ms ({lat['events_seen']}/"
                       f"{lat['errors_written']} events)")
        for lat in d.get("crash_latency", []):
            out.append(f"last-line crash, {lat['catalog']:<7} catalog: p50 {lat['p50_ms']} ms, "
                       f"p99 {lat['p99_ms']} ms, max {lat['max_ms']} ms ({lat['events_seen']}/"
                       f"{lat['crashes']} events)")
        if "catch_up" in d:
            cu = d["catch_up"]
            out.append(f"daemon catch-up: {cu['bytes'] / MB:,.0f} MB in {cu['wall_s']} s = "
                       f"{cu['mb_per_s']} MB/s (scan {cu['scan_mb_per_s']} MB/s), peak RSS "
                       f"{cu['peak_rss_mb']} MB")
        if "start" in d:
            st = d["start"]
            c = st["compiling"]
            out.append(f"daemon start, full catalog (precompiled {st['precompiled']}), exec → "
                       f"/readyz: empty cache {st['cold_readyz_s']} s, peak RSS "
                       f"{st['cold_peak_rss_mb']} MB; warm {st['warm_readyz_s']} s, "
                       f"{st['warm_peak_rss_mb']} MB (cold ÷ warm: {st['cold_to_warm_time']}× "
                       f"time, {st['cold_to_warm_rss']}× RSS)")
            out.append(f"daemon start without the precompiled catalog, empty cache: reading "
                       f"(curated layer) after {c['started_s']} s, /readyz after {c['readyz_s']} s "
                       f"(said {' / '.join(c['readyz_said'])}), peak RSS {c['peak_rss_mb']} MB")
            out.append(f"scan of one line: empty cache {st['scan_cold_s']} s "
                       f"({st['scan_cold_peak_rss_mb']} MB), warm {st['scan_warm_s']} s "
                       f"({st['scan_warm_peak_rss_mb']} MB)")
        for i in d.get("idle", []):
            out.append(f"daemon idle, {i['catalog']:<7} catalog, {i.get('files', 16)} files: "
                       f"{i['cpu_percent_of_core']}% "
                       f"of a core, RSS {i['rss_mb']} MB (peak {i['peak_rss_mb']} MB)")
    out += ["", f"{'target':<52} {'measured':>10} {'goal':>7}  met"]
    for tg in report.targets:
        out.append(f"{tg['target']:<52} {tg['measured']:>10} {tg['goal']:>7}  "
                   f"{'yes' if tg['met'] else 'NO'}")
    bad = [x for x in report.checks if not x["ok"]]
    out += ["", f"counts checked against the ground truth: {len(report.checks) - len(bad)} of "
                f"{len(report.checks)} agree" + ("" if not bad else "  <<< MISMATCH: " +
                                                 "; ".join(x["what"] for x in bad))]
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
