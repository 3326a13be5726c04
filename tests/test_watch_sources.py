"""The daemon on other inputs and on its lifecycle: the journal, container logs, SIGHUP, labels."""

from __future__ import annotations

import json
import signal
import urllib.request

from test_journald import ENTRIES, T1, UNIT, sglang, write_journal
from watch_harness import REPO, DaemonProcess, wait_for

LAUNCH = REPO / "tests" / "fixtures" / "sglang" / "launch"
TP8 = REPO / "tests" / "fixtures" / "sglang" / "constructed" / "tp8_scheduler_crash.log"


def slugs(d: DaemonProcess) -> list[str]:
    from matcher.catalog import load_catalog
    catalog = load_catalog()
    return [catalog.by_id(e["pattern_id"]).slug for e in d.events() if e.get("pattern_id")]


def test_journal_of_a_unit_is_followed_and_resumed_by_cursor(tmp_path):
    """A real journal (systemd-journal-remote), read by the real journalctl through the daemon."""
    jdir = tmp_path / "journal"
    jdir.mkdir()
    write_journal(jdir / "system.journal", ENTRIES)
    args = ["--journal-unit", UNIT, "--journal-directory", str(jdir), "--from-beginning"]
    d = DaemonProcess(tmp_path, [str(tmp_path / "no-files-*.log")], *args, builtin=True)
    with d:
        wait_for(lambda: "transformers-backend-model-class-not-found" in slugs(d), 30)
        assert d.stop() == 0
        first = slugs(d)
        assert first.count("transformers-backend-model-class-not-found") == 1
        # More of the unit's output while stopped: only that is read after the restart.
        write_journal(jdir / "system.journal", [sglang(
            b"[2026-12-02 14:36:00] Scheduler hit an exception: Traceback (most recent call last):\n"
            b'  File "/x/scheduler.py", line 1, in f\n'
            b"RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.",
            T1 + 100)], monotonic_base=1000)
        d.start()
        wait_for(lambda: "no-accelerator-available" in slugs(d), 30)
        assert d.stop() == 0
    assert slugs(d).count("transformers-backend-model-class-not-found") == 1
    assert slugs(d).count("no-accelerator-available") == 1


def test_cri_log_file_is_decoded_with_partial_lines_joined(tmp_path):
    """A kubelet (CRI) log of a real launch failure, long lines split in `P` pieces."""
    pods = tmp_path / "pods"
    pods.mkdir()
    out = []
    for line in (LAUNCH / "int8_mamba_radix_lru.log").read_text().splitlines():
        pieces = [line[i:i + 40] for i in range(0, len(line), 40)] or [""]
        for n, piece in enumerate(pieces):
            tag = "F" if n == len(pieces) - 1 else "P"
            out.append(f"2026-12-02T14:32:19.123456789Z stderr {tag} {piece}")
    d = DaemonProcess(tmp_path, [str(pods / "*.log")], builtin=True)
    with d:
        (pods / "0.log").write_text("\n".join(out) + "\n")
        wait_for(d.events, 30)
        assert d.stop() == 0
    (event,) = d.events()
    assert (event["pattern_id"], event["captures"]) == ("4e2cdd4d6209ebbd", {"arg1": "'lru'"})


def test_sighup_with_a_broken_catalog_keeps_the_running_one(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    extra = tmp_path / "mine.json"
    extra.write_text(json.dumps({"id": "mine", "messagePattern": "custom failure marker"}))
    d = DaemonProcess(tmp_path, [str(log)], "--catalog", str(extra))
    with d:
        extra.write_text("{broken")
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: b'"reload_failed"' in d.err.read_bytes() or b"reload" in d.err.read_bytes())
        with open(log, "a") as f:
            f.write("[2026-01-01 00:00:00] custom failure marker here\n")
        wait_for(lambda: [e for e in d.events() if e.get("pattern_id") == "mine"], 20)
        assert d.proc.poll() is None  # still running
        assert d.stop() == 0
    err = d.err.read_text()
    assert "mine.json" in err and "not valid JSON" in err
    assert [e["pattern_id"] for e in d.events()] == ["mine"]


def test_tp8_crash_one_event_counter_plus_one_labels_and_http(tmp_path):
    """A TP=8 crash appended to a watched log: one event with TP0–TP7, +1 on the counter,
    static labels from the environment on both, /events and /healthz answering."""
    log = tmp_path / "server.log"
    log.touch()
    env = {"SGLANG_MATCHER_LABELS_FROM_ENV": "pod=POD_NAME,namespace=POD_NAMESPACE",
           "POD_NAME": "sglang-0", "POD_NAMESPACE": "inference",
           "SGLANG_MATCHER_AGGREGATE_WINDOW": "5"}
    d = DaemonProcess(tmp_path, [str(log)], "--metrics-addr", "127.0.0.1:0", env=env, builtin=True)
    with d:
        url = wait_for(lambda: _served_url(d), 20)
        before = _counter(url, "transformers-backend-model-class-not-found")
        assert before == 0.0  # the curated series exists before the first error
        with open(log, "a") as f:
            f.write(TP8.read_text())
        wait_for(lambda: [e for e in d.events() if e["role"] == "cause"], 30)
        assert _counter(url, "transformers-backend-model-class-not-found") == 1.0
        recent = json.loads(urllib.request.urlopen(url + "/events?limit=5").read())
        health = urllib.request.urlopen(url + "/healthz").status
        assert d.stop() == 0
    causes = [e for e in d.events() if e["role"] == "cause" and e["severity"] != "info"]
    assert [(len(e["ranks"]), e["occurrences"], e["labels"]) for e in causes] == [
        (8, 8, {"pod": "sglang-0", "namespace": "inference"})]
    assert recent[-1]["pattern_id"] == causes[0]["pattern_id"] and health == 200


def _served_url(d: DaemonProcess) -> str | None:
    for line in d.err.read_text().splitlines():
        if '"serving"' in line:
            return json.loads(line)["url"].replace("0.0.0.0", "127.0.0.1")
    return None


def _counter(url: str, slug: str) -> float | None:
    from matcher.catalog import load_catalog
    rid = next(r.id for r in load_catalog().records if r.slug == slug)
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith("sglang_log_errors_total{") and f'pattern_id="{rid}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_crash_loop_counts_every_repeat_and_prints_at_most_two(tmp_path):
    """The same launch error 100 times within a minute: the counter rises by 100, one or two
    events are printed (the rest are rate-limited, counted in events_suppressed)."""
    log = tmp_path / "server.log"
    log.touch()
    d = DaemonProcess(tmp_path, [str(log)], "--metrics-addr", "127.0.0.1:0", builtin=True,
                      env={"SGLANG_MATCHER_REPEAT_INTERVAL": "60"})  # the default, which the harness turns off
    with d:
        url = wait_for(lambda: _served_url(d), 20)
        with open(log, "a") as f:
            for i in range(100):
                ms = i * 590
                f.write(f"[2026-01-01 12:00:{ms // 1000:02d}.{ms % 1000:03d}] RuntimeError: No accelerator "
                        "(CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.\n")
        assert wait_for(lambda: _counter(url, "no-accelerator-available") == 100.0, 30)
        text = urllib.request.urlopen(url + "/metrics").read().decode()
        assert d.stop() == 0
    printed = [e for e in d.events() if e["role"] == "cause"]
    assert 1 <= len(printed) <= 2
    assert "sglang_matcher_events_suppressed_total 99.0" in text


def test_planted_secrets_reach_no_output(tmp_path):
    """Secrets in sglang's start-up dump and in error lines: not on stdout, stderr, /events,
    /metrics or in webhook bodies."""
    import http.server
    import threading

    secrets = ["sk-live-PLANTEDkey0042xyz", "hf_PLANTEDhuggingfacetoken000000000", "PLANTEDpass99"]
    bodies: list[bytes] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    log = tmp_path / "server.log"
    log.touch()
    d = DaemonProcess(tmp_path, [str(log)], "--metrics-addr", "127.0.0.1:0",
                      "--webhook-url", f"http://127.0.0.1:{hook.server_address[1]}/events", builtin=True)
    try:
        with d:
            url = wait_for(lambda: _served_url(d), 20)
            with open(log, "a") as f:
                f.write(f"[2026-01-01 12:00:00] server_args={{'model_path': '/m', 'api_key': '{secrets[0]}', "
                        f"'hf_token': '{secrets[1]}'}}\n")
                f.write("Traceback (most recent call last):\n"
                        f"  File \"/x.py\", line 1, in f\n    connect('redis://app:{secrets[2]}@10.0.0.5:6379')\n"
                        f"RuntimeError: cannot connect to redis://app:{secrets[2]}@10.0.0.5:6379 "
                        f"with --api-key {secrets[0]} and token {secrets[1]}\n")
            wait_for(lambda: d.events() and bodies, 30)
            outputs = [urllib.request.urlopen(url + "/events").read(),
                       urllib.request.urlopen(url + "/metrics").read()]
            assert d.stop() == 0
    finally:
        hook.shutdown()
    outputs += [d.out.read_bytes(), d.err.read_bytes(), *bodies]
    assert d.events() and bodies  # the failure itself is reported
    for secret in secrets:
        assert not [o for o in outputs if secret.encode() in o], secret
