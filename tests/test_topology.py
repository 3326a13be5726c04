"""`watch --check` builds exactly what `watch` runs; SIGHUP builds again and every setting moves.

Each bad configuration is given to both `watch --check` and `watch`, as real processes: both
must refuse it the same way — exit 2, one line naming the setting and what to do (after the
subcommand's usage when a flag was wrong), no traceback — before `watch` reads anything. (On the revision before the topology, `--check`
said "configuration ok" to most of these and `watch` then died with a traceback and exit 1:
under systemd's `ExecStartPre=… --check` that is a crash loop.)
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import ClassVar

import pytest
from prom_harness import free_port
from watch_harness import DaemonProcess, wait_for

from matcher.testing import SEQ_RECORD, line_for

REPO = Path(__file__).resolve().parents[1]


def _watch(tmp: Path, args: list[str], env: dict[str, str], *, check: bool,
           stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    catalog = tmp / "catalog.json"
    catalog.write_text(json.dumps(SEQ_RECORD))
    argv = [sys.executable, "-m", "matcher", "watch", "--state-dir", str(tmp / "state"),
            "--no-builtin", "--catalog", str(catalog), *args]
    if check:
        argv.insert(4, "--check")
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                          input=stdin.decode(), env={**os.environ, **env})


# (id, flags, environment, config file text, what the one line must name)
BAD = [
    ("label-without-value", ["--label", "foo"], {}, None, "--label"),
    ("label-name-invalid", ["--label", "bad-name=x"], {}, None, "bad-name"),
    ("label-name-reserved", ["--label", "pattern_id=x"], {}, None, "pattern_id"),
    ("label-from-env-reserved", [], {"SGLANG_MATCHER_LABELS_FROM_ENV": "severity=HOSTNAME"},
     None, "severity"),
    ("webhook-not-a-url", ["--webhook-url", "notaurl"], {}, None, "webhook_url"),
    ("webhook-bad-port", ["--webhook-url", "http://host:port/x"], {}, None, "webhook_url"),
    ("webhook-ftp", [], {"SGLANG_MATCHER_WEBHOOK_URL": "ftp://host/x"}, None, "webhook_url"),
    ("otlp-not-http", ["--otlp-endpoint", "ftp://collector/v1/logs"], {}, None, "otlp_endpoint"),
    ("otlp-env-without-scheme", [], {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, None,
     "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ("ipv6-without-brackets", ["--metrics-addr", "::1:9400"], {}, None, "metrics_addr"),
    ("unresolvable-host", ["--metrics-addr", "no-such-host.invalid:9400"], {}, None,
     "metrics_addr"),
    ("port-in-use", ["--metrics-addr", "127.0.0.1:{busy}"], {}, None, "metrics_addr"),
    ("address-not-of-this-host", ["--metrics-addr", "192.0.2.1:9400"], {}, None,
     "metrics_addr"),
    ("redaction-pattern", [], {}, 'redact_patterns = ["(unclosed"]\n', "redact_patterns"),
    ("events-file-directory-missing", [], {}, 'events_file = "/nonexistent/dir/e.jsonl"\n',
     "events_file"),
    ("unknown-config-key", [], {}, 'pol_interval = 1\n', "pol_interval"),
    ("env-not-a-number", [], {"SGLANG_MATCHER_POLL_INTERVAL": "fast"}, None,
     "SGLANG_MATCHER_POLL_INTERVAL"),
    ("env-bad-input-format", [], {"SGLANG_MATCHER_INPUT_FORMAT": "xml"}, None, "input_format"),
    ("negative-interval", ["--poll-interval", "-1"], {}, None, "poll_interval"),
]


@pytest.fixture(scope="module")
def busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize("name,flags,env,config,names", BAD, ids=[b[0] for b in BAD])
def test_check_rejects_what_watch_rejects(tmp_path, busy_port, name, flags, env, config, names):
    flags = [f.replace("{busy}", str(busy_port)) for f in flags]
    if config is not None:
        path = tmp_path / "matcher.toml"
        path.write_text(config)
        flags = ["--config", str(path), *flags]
    log = tmp_path / "server.log"
    log.write_text(line_for(1) + "\n")
    args = [*flags, str(log)]
    checked = _watch(tmp_path, args, env, check=True)
    ran = _watch(tmp_path, args, env, check=False)
    for result in (checked, ran):
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        # One line says it; a flag's mistake comes after the subcommand's usage, as argparse
        # gives it.
        *usage, said = lines
        assert names in said and said.startswith("sglang-matcher"), lines
        assert all(x.startswith(("usage:", " ")) for x in usage), lines
    assert checked.stderr == ran.stderr  # the same build said the same thing
    assert ran.stdout == ""  # nothing was read: the failure came before any event
    assert not (tmp_path / "state").exists()  # and no position was written


def test_check_accepts_a_good_config_and_releases_the_port(tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    log.touch()
    checked = _watch(tmp_path, ["--metrics-addr", f"127.0.0.1:{port}", str(log)], {},
                     check=True)
    assert checked.returncode == 0, checked.stderr
    assert "configuration ok" in checked.stdout
    with socket.socket() as s:  # --check bound the port and let it go
        s.bind(("127.0.0.1", port))


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _metric(port: int, name: str) -> float | None:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    except (urllib.error.URLError, ConnectionError):
        return None
    for line in text.decode().splitlines():
        if line.startswith(name + "{") and 'pattern_id="injected-failure"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_sighup_reloads_outputs_redaction_and_webhook_keeping_counts(tmp_path):
    """Every output setting changes at SIGHUP: the events file, the metrics address, the
    redaction patterns, the webhook; the counters carry over; a label change is said, not
    applied (the series carry the labels by name)."""
    log = tmp_path / "server.log"
    log.touch()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    port_a, port_b = free_port(), free_port()
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    config = tmp_path / "matcher.toml"
    config.write_text(f'events_file = "{first}"\nmetrics_addr = "127.0.0.1:{port_a}"\n'
                      'labels = {{cluster = "a"}}\n'.replace("{{", "{").replace("}}", "}"))
    d = DaemonProcess(tmp_path, [str(log)], "--config", str(config))
    try:
        with d:
            with open(log, "a") as f:
                f.write(line_for(1) + "\n")
            assert wait_for(lambda: first.exists() and "seq=1" in first.read_text(), 30)
            assert wait_for(lambda: _metric(port_a, "sglang_log_errors_total") == 1.0, 30)
            config.write_text(
                f'events_file = "{second}"\nmetrics_addr = "127.0.0.1:{port_b}"\n'
                'redact_patterns = ["seq=\\\\d+"]\n'
                f'webhook_url = "http://127.0.0.1:{receiver.server_port}/hook"\n'
                'labels = {cluster = "b"}\n')
            d.proc.send_signal(signal.SIGHUP)
            assert wait_for(lambda: b'"reloaded"' in d.err.read_bytes(), 60), \
                d.err.read_text()[-2000:]
            with open(log, "a") as f:
                f.write(line_for(2) + "\n")
            assert wait_for(lambda: second.exists() and second.read_text().strip(), 30)
            assert wait_for(lambda: _Receiver.bodies, 30)
            count_b = wait_for(lambda: _metric(port_b, "sglang_log_errors_total") == 2.0, 30)
            count_a = _metric(port_a, "sglang_log_errors_total")
            assert d.stop() == 0
    finally:
        receiver.shutdown()
    (moved,) = [json.loads(x) for x in second.read_text().splitlines()]
    assert "seq=2" not in json.dumps(moved) and "***" in moved["message"]  # new redaction
    assert "seq=2" not in first.read_text()  # the old file got nothing after the reload
    assert _Receiver.bodies[0]["message"] == moved["message"]  # the new webhook, redacted
    assert count_b and count_a is None  # the new port counts both; the old one is closed
    assert moved["labels"] == {"cluster": "a"}  # labels: not reloaded ...
    err = d.err.read_text()
    assert '"setting_not_reloaded"' in err and '"labels"' in err  # ... and said so


def _events_file_daemon(tmp_path: Path) -> tuple[str, Path, Path, DaemonProcess]:
    """Debian's logrotate, and a daemon (not started) writing `events.jsonl` for `server.log`."""
    from debian import require_tool

    events = tmp_path / "events.jsonl"
    log = tmp_path / "server.log"
    log.write_text("")
    config = tmp_path / "matcher.toml"
    config.write_text(f'events_file = "{events}"\n')
    return (require_tool("logrotate"), events, log,
            DaemonProcess(tmp_path, [str(log)], "--config", str(config)))


def test_the_events_file_rotated_by_logrotate_create_is_reopened_on_sighup(tmp_path):
    """Debian's logrotate rotates the events file with `create` and a `postrotate` that sends
    SIGHUP, as for any daemon's own file: the reload opens the new file, and the events after
    it go there (they went on into the rotated file, and the new one stayed empty). Without a
    rotation a reload keeps the file it has."""
    logrotate, events, log, d = _events_file_daemon(tmp_path)
    with d:
        conf = tmp_path / "logrotate.conf"
        conf.write_text(f"{events} {{\n  rotate 3\n  create\n  nocompress\n  postrotate\n"
                        f"    kill -HUP {d.proc.pid}\n  endscript\n}}\n")
        state = tmp_path / "logrotate.state"

        def reloads() -> int:
            return d.err.read_bytes().count(b'"reloaded"')

        with open(log, "a") as f:
            f.write(line_for(1) + "\n")
        assert wait_for(lambda: "seq=1" in events.read_text(), 30)
        d.proc.send_signal(signal.SIGHUP)  # no rotation: the same file kept
        assert wait_for(lambda: reloads() == 1, 60), d.err.read_text()[-2000:]
        with open(log, "a") as f:
            f.write(line_for(2) + "\n")
        assert wait_for(lambda: "seq=2" in events.read_text(), 30)
        subprocess.run([logrotate, "-f", "-s", str(state), str(conf)], check=True)
        assert wait_for(lambda: reloads() == 2, 60), d.err.read_text()[-2000:]
        with open(log, "a") as f:
            f.write(line_for(3) + "\n")
        assert wait_for(lambda: "seq=3" in events.read_text(), 30), \
            f"the new events file: {events.read_text()!r}"
        assert d.stop() == 0
    rotated = (tmp_path / "events.jsonl.1").read_text()
    assert "seq=1" in rotated and "seq=2" in rotated and "seq=3" not in rotated
    assert "seq=1" not in events.read_text()


def test_the_events_file_rotated_without_a_sighup_is_followed(tmp_path):
    """logrotate's `create` with no `postrotate` at all: the next event sees that the path
    names another file now and opens it (the events went on into the rotated file, and the
    new one stayed empty)."""
    logrotate, events, log, d = _events_file_daemon(tmp_path)
    conf = tmp_path / "logrotate.conf"
    conf.write_text(f"{events} {{\n  rotate 3\n  create\n  nocompress\n}}\n")
    with d:
        with open(log, "a") as f:
            f.write(line_for(1) + "\n")
        assert wait_for(lambda: "seq=1" in events.read_text(), 30)
        subprocess.run([logrotate, "-f", "-s", str(tmp_path / "logrotate.state"), str(conf)],
                       check=True)
        with open(log, "a") as f:
            f.write(line_for(2) + "\n")
        assert wait_for(lambda: "seq=2" in events.read_text(), 30), \
            f"the new events file: {events.read_text()!r}"
        assert d.stop() == 0
    assert "seq=2" not in (tmp_path / "events.jsonl.1").read_text()


def test_the_events_file_deleted_by_hand_is_made_again(tmp_path):
    """`rm events.jsonl` (a full disk cleaned by hand): the next event finds the file it
    writes to deleted and makes the path's file anew. (The events went on into the deleted
    file, which no one could read, until a reload.) A file only renamed away is left alone:
    logrotate's `create` makes the new one itself."""
    _, events, log, d = _events_file_daemon(tmp_path)
    with d:
        with open(log, "a") as f:
            f.write(line_for(1) + "\n")
        assert wait_for(lambda: "seq=1" in events.read_text(), 30)
        events.unlink()
        with open(log, "a") as f:
            f.write(line_for(2) + "\n")
        assert wait_for(lambda: events.exists() and "seq=2" in events.read_text(), 30), \
            "no events file made again"
        moved = tmp_path / "events.jsonl.old"
        events.rename(moved)  # renamed, no new file yet: written on where it is
        with open(log, "a") as f:
            f.write(line_for(3) + "\n")
        assert wait_for(lambda: "seq=3" in moved.read_text(), 30)
        assert not events.exists()
        assert d.stop() == 0
    assert "seq=1" not in moved.read_text() and "seq=2" in moved.read_text()


def test_the_events_file_beside_the_logs_is_not_read_back(tmp_path):
    """`events_file` in the directory the globs read (`/var/log/sglang/matcher.log` under
    `/var/log/sglang/*.log`): the daemon does not follow its own output. (It did, and each
    event it wrote came back as another, from the events file.)"""
    logs = tmp_path / "sglang"
    logs.mkdir()
    events = logs / "matcher-events.log"
    log = logs / "server.log"
    log.write_text("")
    config = tmp_path / "matcher.toml"
    config.write_text(f'events_file = "{events}"\n')
    with DaemonProcess(tmp_path, [str(logs / "*.log")], "--config", str(config)) as d:
        started = [json.loads(line) for line in d.err.read_text().splitlines()
                   if '"started"' in line]
        for seq in (1, 2):
            with open(log, "a") as f:
                f.write(line_for(seq) + "\n")
            assert wait_for(lambda seq=seq: f"seq={seq}" in events.read_text(), 30)
        assert d.stop() == 0
    assert started[0]["files_followed"] == 1
    assert {e["source"] for e in d.events()} == {str(log)}
