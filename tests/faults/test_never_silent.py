"""The daemon never silently stops reading: crash loops, symlink loops, descriptor limits,
listings that fail, and globs that match nothing — each against a real daemon process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from faultkit import figure, metrics, sample, served_url, stderr_events
from watch_harness import REPO, DaemonProcess, wait_for

from matcher.testing import SEQ_RECORD, line_for

LAUNCH_ERROR = REPO / "tests/fixtures/sglang/launch/argparse_invalid_int.log"
ARGPARSE_PATTERN = "510f125ae05affc9"  # the curated record of that log's root cause


def test_a_crash_loop_of_one_launch_error_counts_every_crash(tmp_path):
    """A unit restarted after each failed launch recreates `server.log` with the same bytes
    (sglang's argparse errors carry no timestamp): four crashes are four failures."""
    log = tmp_path / "server.log"
    data = LAUNCH_ERROR.read_bytes()
    crashes = 4
    with DaemonProcess(tmp_path, [str(tmp_path / "server.log*")], "--sglang-version", "none",
                       "--metrics-addr", "127.0.0.1:0", builtin=True) as d:
        url = wait_for(lambda: served_url(d))
        for n in range(1, crashes + 1):
            if log.exists():
                log.unlink()  # the service's ExecStartPre, or sglang's own log setup
            log.write_bytes(data)
            assert wait_for(lambda n=n: _errors(url, ARGPARSE_PATTERN) >= n, 20), \
                f"crash {n} not counted:\n{d.err.read_text()[-2000:]}"
        parked = sample(url, "sglang_matcher_files_parked")
        assert d.stop() == 0
    events = [e for e in d.events() if e.get("pattern_id") == ARGPARSE_PATTERN]
    figure(f"crash loop of {crashes} identical launch failures: {len(events)} events")
    assert (len(events), parked) == (crashes, 0)


def _errors(url: str, pattern_id: str) -> float:
    return sum(v for (name, labels), v in metrics(url).items()
               if name == "sglang_log_errors_total" and ("pattern_id", pattern_id) in labels)


def _symlink_loops(root: Path) -> Path:
    """A tree with two symlink loops (a link to its own parent, two directories linking to
    each other) and one real log at the bottom."""
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    (root / "a" / "b" / "up").symlink_to("../..")
    (root / "a" / "to_c").symlink_to("../c")
    (root / "c" / "to_a").symlink_to("../a")
    log = root / "a" / "b" / "server.log"
    log.touch()
    return log


def test_a_glob_over_symlink_loops_starts_follows_and_stops(tmp_path):
    """`**` over a tree with two symlink loops: the daemon starts, follows the one real log
    (once, though many paths reach it), and SIGTERM ends it within 5 s."""
    log = _symlink_loops(tmp_path / "logs")
    with DaemonProcess(tmp_path, [str(tmp_path / "logs" / "**" / "*.log")]) as d:
        with open(log, "a") as f:
            f.write(line_for(1) + "\n")
        assert d.wait_seqs({1}, timeout=20) == {1: 1}
        assert d.proc is not None
        started = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        rc = d.proc.wait(10)
        took = time.monotonic() - started
        d.proc = None
    figure(f"symlink loops under **: followed 1 file once; SIGTERM took {took:.2f} s")
    assert rc == 0 and took < 5


def test_files_beyond_the_descriptor_limit_are_all_read(tmp_path):
    """With a hard descriptor limit of 256 (soft = hard: nothing to raise), a glob of 600
    files: the daemon starts, keeps under its budget by closing idle files, and reads a line
    appended to every one of them — twice over, so each file is reopened at least once."""
    n = 600
    logs = [tmp_path / f"w{k:03d}.log" for k in range(n)]
    for p in logs:
        p.touch()
    d = DaemonProcess(tmp_path, [str(tmp_path / "w*.log")], "--metrics-addr", "127.0.0.1:0")
    d.prefix = ["prlimit", "--nofile=256:256", "--"]
    with d:
        url = wait_for(lambda: served_url(d))
        for rnd in range(2):
            for k, p in enumerate(logs):
                with open(p, "a") as f:
                    f.write(line_for(rnd * n + k) + "\n")
            d.wait_seqs(set(range((rnd + 1) * n)), timeout=60)
        assert d.proc is not None
        fds = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
        followed = sample(url, "sglang_matcher_files_followed", source=str(tmp_path / "w*.log"))
        closed = sample(url, "sglang_matcher_files_closed_idle_total")
        assert d.stop() == 0
    seqs = d.seqs()
    figure(f"{n} files under a 256-descriptor limit: {len(seqs)}/{2 * n} lines, "
           f"{sum(seqs.values()) - len(seqs)} duplicated, {fds} descriptors open at the end, "
           f"{closed:.0f} idle closes")
    assert (set(seqs), max(seqs.values())) == (set(range(2 * n)), 1)
    assert followed == n and fds < 256 and closed > 0
    assert "Too many open files" not in d.err.read_text()


def test_a_listing_that_fails_for_lack_of_descriptors_drops_nothing(tmp_path):
    """Descriptors exhausted (by anything: HTTP clients, another thread) while the globs are
    walked: the walk says it is incomplete and the files followed stay followed, so a line
    appended meanwhile is read once descriptors are back."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for k in range(3):
        (logs / f"s{k}.log").write_text("boot\n")
    script = textwrap.dedent(f"""
        import os, resource, sys
        from matcher.source.checkpoint import CheckpointState
        from matcher.source.files import FileSet
        fs = FileSet(({str(logs / '*.log')!r},), (), CheckpointState(), from_beginning=True,
                     fingerprint_bytes=1024, rotate_wait=0.0, clock=lambda: 100.0)
        fs.discover()
        for f in fs.files.values():
            f.read(1 << 20)
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        hog = []
        try:
            while True:
                hog.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        done = fs.discover()  # no descriptor left to list the directory with
        found = fs.discoveries[{str(logs / '*.log')!r}]
        for fd in hog:
            os.close(fd)
        for k in range(3):
            with open({str(logs)!r} + f"/s{{k}}.log", "a") as w:
                w.write("appended while descriptors were out\\n")
        got = sum(f.read(1 << 20).count(b"appended") for f in fs.files.values())
        print(len(done), len(fs.files), found.complete, found.descriptors_exhausted, got)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "3", "False", "True", "3"]


def test_a_glob_that_matches_nothing_is_loud(tmp_path):
    """A mistyped path and a directory given instead of its files: each is logged with what to
    check, `sglang_matcher_files_followed` is 0 for it, `--check` warns, and `/readyz` says so."""
    real = tmp_path / "logs"
    real.mkdir()
    mistyped = str(tmp_path / "lgos" / "*.log")
    directory = str(real)
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(SEQ_RECORD))
    check = subprocess.run(
        [sys.executable, "-m", "matcher", "watch", "--check", "--no-builtin", "--catalog",
         str(catalog), "--state-dir", str(tmp_path / "state"), mistyped, directory],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    assert f"warning: {mistyped} matches no file" in check.stderr
    assert f"{directory} is a directory" in check.stderr
    with DaemonProcess(tmp_path, [mistyped, directory], "--metrics-addr", "127.0.0.1:0") as d:
        url = wait_for(lambda: served_url(d))
        said = wait_for(lambda: stderr_events(d, "path_matches_nothing")
                        if len(stderr_events(d, "path_matches_nothing")) >= 2 else None, 10)
        scraped = metrics(url)  # the series themselves, not `sample`'s 0 for a missing one
        followed = [scraped.get(("sglang_matcher_files_followed", (("source", p),)))
                    for p in (mistyped, directory)]
        ready = json.loads(urllib.request.urlopen(url + "/readyz", timeout=10).read())
        assert d.stop() == 0
    assert {e["path"] for e in said} == {mistyped, directory}
    assert any("is a directory" in e["detail"] for e in said)
    assert followed == [0, 0]
    assert ready["status"] == "ready" and set(ready["matching_nothing"]) == {mistyped, directory}


def test_a_far_future_timestamp_does_not_swallow_a_later_failure(tmp_path):
    """One line stamped 2099 (a bad clock, a replayed log) on TP0, then the same failure on TP1
    stamped now: two failures, two events — windows run on the time a line is read, and a log
    time that far off separates, never merges."""
    log = tmp_path / "server.log"
    log.touch()
    now = time.strftime("%Y-%m-%d %H:%M:%S")
    with DaemonProcess(tmp_path, [str(log)]) as d:
        with open(log, "a") as f:
            f.write("[2099-01-01 00:00:00 TP0] injected failure seq=7 end\n")
        d.wait_seqs({7}, timeout=20)
        with open(log, "a") as f:
            f.write(f"[{now} TP1] injected failure seq=7 end\n")
        wait_for(lambda: d.seqs()[7] >= 2, 10)
        assert d.stop() == 0
    events = [e for e in d.events() if e.get("pattern_id") == SEQ_RECORD["id"]]
    assert [e["ranks"] for e in events] == [["TP0"], ["TP1"]]


def test_an_event_output_whose_reader_went_away_stops_the_daemon_for_a_restart(tmp_path):
    """`watch | jq` and jq ended, or the pipe a supervisor gave for stdout broke: the daemon
    says so on stderr and exits 1, which `Restart=on-failure` restarts (it exited 0 without a
    word, and the unit stayed down). No position moves past the events it could not tell: the
    restart, with a stdout that reads, tells them."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for log in sorted((REPO / "examples" / "logs").glob("*.log")):
        (logs / log.name).write_bytes(log.read_bytes())
    cmd = [sys.executable, "-m", "matcher", "watch", "--state-dir", str(tmp_path / "state"),
           "--from-beginning", "--poll-interval", "0.05", str(logs / "*.log")]
    err = tmp_path / "stderr.log"
    with err.open("wb") as e:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=e, cwd=REPO)
        proc.stdout.close()  # the reader gone before the first event
        rc = proc.wait(timeout=90)
    said = [json.loads(line) for line in err.read_text().splitlines()
            if '"events_output_closed"' in line]
    assert (rc, len(said)) == (1, 1), err.read_text()[-3000:]
    assert said[0]["level"] == "error" and "restart" in said[0]["detail"]
    out = tmp_path / "restart.jsonl"
    with out.open("wb") as o, err.open("ab") as e:
        again = subprocess.Popen(cmd, stdout=o, stderr=e, cwd=REPO)
        told = wait_for(lambda: out.read_bytes().count(b'"pattern_id": "4e2cdd4d6209ebbd"'), 60)
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=60) == 0
    assert told, err.read_text()[-3000:]
    sources = {json.loads(line)["source"] for line in out.read_text().splitlines()}
    assert len(sources) == 4  # each log's failure, told after the restart


def test_a_daemon_whose_stderr_reader_went_away_goes_on(tmp_path):
    """`2>&1 | jq` and jq ended, or a supervisor's stderr pipe broke: diagnostics have nowhere
    to go, but events and metrics do not need them. The daemon goes on. (It stopped at its next
    log line — `file_opened` for the log a restarted server began — with exit 0, and that
    log's failure was never told.)"""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "server.log"
    log.write_bytes(b"")
    out = tmp_path / "events.jsonl"
    cmd = [sys.executable, "-m", "matcher", "watch", "--state-dir", str(tmp_path / "state"),
           "--poll-interval", "0.05", "--metrics-addr", "127.0.0.1:0", str(logs / "*.log")]
    with out.open("wb") as o:
        proc = subprocess.Popen(cmd, stdout=o, stderr=subprocess.PIPE, cwd=REPO)
        try:
            said = b""
            while b'"serving"' not in said and proc.poll() is None:
                said += proc.stderr.read1(65536)
            url = next(json.loads(line)["url"] for line in said.splitlines()
                       if b'"serving"' in line)
            proc.stderr.close()  # the reader of the diagnostics gone
            (logs / "server-restarted.log").write_bytes(
                (REPO / "examples/logs/int8-mamba-radix-cache.log").read_bytes())
            assert wait_for(lambda: b"4e2cdd4d6209ebbd" in out.read_bytes(), 30), \
                f"no event; the daemon {'ran' if proc.poll() is None else 'ended'}"
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=10) as r:
                    assert r.status == 200
            except OSError as e:
                raise AssertionError(f"/healthz: {e}; the daemon ended: {proc.poll()}") from e
            assert proc.poll() is None
        finally:
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=60)
    assert rc == 0


def test_an_events_file_on_a_full_disk_drops_there_and_the_daemon_goes_on(tmp_path):
    """`events_file` on a disk with no room left (`/dev/full`: every write is ENOSPC, as on a
    full /var/log). Each event the file cannot take is dropped there, counted and said (at
    most every few seconds); stdout and the metrics still have every one, and the daemon
    runs on. (It stopped with a traceback, its metrics with it, at the first event.)"""
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    real = sorted((REPO / "examples" / "logs").glob("*.log"))
    with DaemonProcess(tmp_path, [str(tmp_path / "*.log")], "--metrics-addr", "127.0.0.1:0",
                       builtin=True, env={"SGLANG_MATCHER_EVENTS_FILE": "/dev/full"}) as d:
        url = wait_for(lambda: served_url(d))
        for n, example in enumerate(real, 1):
            with log.open("ab") as f:
                f.write(example.read_bytes())
            assert wait_for(lambda n=n: sample(
                url, "sglang_matcher_events_output_dropped_total", sink="events_file") >= n,
                30), f"event {n} not counted:\n{d.err.read_text()[-2000:]}"
        told = len(d.events())
        assert d.proc.poll() is None
        assert d.stop() == 0
    said = stderr_events(d, "events_output_failed")
    assert said and said[0]["sink"] == "events_file" and "No space left" in said[0]["detail"]
    assert told >= len(real)  # on stdout, each


def test_a_non_blocking_stdout_pipe_that_fills_is_waited_for_and_no_line_is_torn():
    """A parent (Node.js, some supervisors) can hand over a non-blocking pipe for stdout: once
    full, a write fails with EAGAIN instead of waiting. The writer waits for room, as on a
    blocking pipe: every line arrives whole, none is counted as dropped."""
    import threading

    from matcher.redact import Redactor
    from matcher.sinks.events import EventWriter

    r, w = os.pipe()
    os.set_blocking(w, False)
    out = os.fdopen(w, "w", encoding="utf-8")
    dropped: list[tuple] = []
    writer = EventWriter(out, Redactor(), failed=lambda *a: dropped.append(a))
    got = bytearray()

    def read_late() -> None:
        time.sleep(0.3)  # the pipe fills meanwhile (64 KiB)
        while chunk := os.read(r, 65536):
            got.extend(chunk)

    reader = threading.Thread(target=read_late)
    reader.start()
    n = 500
    writer.write([{"event": "sglang_error", "seq": i, "message": "x" * 1000} for i in range(n)])
    writer.flush()
    out.close()
    reader.join(30)
    os.close(r)
    lines = bytes(got).splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(n))
    assert dropped == []


def test_every_configured_glob_has_a_files_followed_series_before_any_walk(tmp_path):
    """The series an alert on `files_followed == 0` reads exists for each configured glob as
    soon as the file source exists — before a walk has run, or when none ever completes."""
    from matcher.config import Config
    from matcher.source.checkpoint import CheckpointState
    from matcher.source.tail import FileSource

    class Recorder:
        def __init__(self) -> None:
            self.followed: dict[str, int] = {}

        def files_followed(self, source: str, n: int) -> None:
            self.followed[source] = n

        def __getattr__(self, name: str):
            return lambda *a, **k: None

    globs = (str(tmp_path / "a" / "*.log"), str(tmp_path / "missing" / "*.log"))
    seen = Recorder()
    FileSource(Config(paths=globs, state_dir=tmp_path / "state"), CheckpointState(), seen,
               max_open_files=64, clock=time.monotonic, wall=time.time, wake=lambda: None,
               should_stop=lambda: False)
    assert seen.followed == dict.fromkeys(globs, 0)


def test_the_file_source_says_everything_with_selflogs_typed_notices(tmp_path):
    """What the files source says — a file opened, released from its wait as a lookalike,
    closed once rotated away and quiet, a glob that matches nothing — goes out as one of
    `selflog`'s typed notices, its name and level declared once beside the others, not as a
    name and a level made up where it is said."""
    import shutil

    from matcher import selflog
    from matcher.config import Config
    from matcher.source.checkpoint import CheckpointState
    from matcher.source.tail import FileSource
    from matcher.types import Fed

    declared = {v for v in vars(selflog).values() if isinstance(v, selflog.Notice)}

    class Recorder:
        def __init__(self) -> None:
            self.said: list[object] = []

        def notice(self, notice, **fields) -> None:
            self.said.append(notice)

        def __getattr__(self, name: str):
            return lambda *a, **k: None

    class Intake:
        def chunk(self, chunk, now):
            return Fed([])

        def __getattr__(self, name: str):
            return lambda *a, **k: None

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text("".join(f"line {i}\n" for i in range(50)))
    told = Recorder()
    now = [100.0]
    config = Config(paths=(str(logs / "server.log*"), str(tmp_path / "none" / "*.log")),
                    state_dir=tmp_path / "state", from_beginning=True)
    source = FileSource(config, CheckpointState(), told, max_open_files=64,
                        clock=lambda: now[0], wall=lambda: now[0], wake=lambda: None,
                        should_stop=lambda: False)
    intake = Intake()
    source.read(now[0], intake)
    shutil.copyfile(logs / "server.log", logs / "server.log.replica")  # a lookalike
    for step in (0.1, config.rotate_wait, 0.1):
        now[0] += step
        source.discover(intake)
        source.read(now[0], intake)
    (logs / "server.log.replica").rename(tmp_path / "moved.log")  # out of the glob
    for step in (0.1, config.rotate_wait + 1, 0.1):
        now[0] += step
        source.discover(intake)
    names = [getattr(n, "name", n) for n in told.said]
    assert {"file_opened", "file_released", "file_closed", "path_matches_nothing"} <= set(names)
    assert [n for n in told.said if n not in declared] == []
    source.close()
