"""The alert path, for real: daemon → Prometheus → Alertmanager → the on-call's receivers.

A running `sglang-matcher watch` follows a real sglang failure log; a real Prometheus (Debian's
`prometheus`) scrapes it every second with the shipped rules and sends its alerts to a real
Alertmanager (Debian's `prometheus-alertmanager`) that runs the shipped
deploy/alertmanager/alertmanager.yml — its Slack and PagerDuty URLs pointed at a receiver this
test serves on 127.0.0.1, plus a plain webhook. What each receiver is sent must say what
happened, the first fix, and link to the failing source. Everything on loopback, on free ports,
with short group waits.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from debian import require_tool
from prom_harness import Prometheus, ServerProcess, free_port, poll, scraped_daemon, served_url

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "deploy" / "prometheus" / "sglang-matcher.rules.yml"
ALERTMANAGER_CONFIG = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
LOG = REPO / "examples" / "logs" / "int8-mamba-radix-cache.log"  # real sglang 0.5.23
SEED = "4e2cdd4d6209ebbd"  # its curated pattern
SUMMARY = "--enable-int8-mamba-checkpoint only works with the built-in Mamba radix cache."
FIX = ("Remove --radix-cache-backend from the launch command so the built-in mamba radix cache "
       "is used")
SOURCE = ("https://github.com/sgl-project/sglang/blob/0132848349585cfe6aae51c4941cbae872505f8a/"
          "python/sglang/srt/server_args.py#L6800-L6836")


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every JSON body POSTed to it, by path."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, Any]] = []
        lock = threading.Lock()
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    posts.append((self.path, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def bodies(self, path: str) -> list[Any]:
        return [body for p, body in list(self.posts) if p == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


def routed_config(receiver_url: str) -> dict[str, Any]:
    """The shipped config, its secrets' files replaced by the loopback receiver's URLs, its
    waits made short, and a plain webhook receiver first (`continue`: the others still get it)."""
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    route = config["route"]
    route.update(group_wait="1s", group_interval="1s", repeat_interval="1h")
    route["routes"].insert(0, {"receiver": "test-webhook", "continue": True})
    for receiver in config["receivers"]:
        for slack in receiver.get("slack_configs", []):
            del slack["api_url_file"]
            slack["api_url"] = f"{receiver_url}/slack"
        for pagerduty in receiver.get("pagerduty_configs", []):
            del pagerduty["routing_key_file"]
            pagerduty.update(routing_key="test-routing-key", url=f"{receiver_url}/pagerduty")
    config["receivers"].append({"name": "test-webhook", "webhook_configs": [
        {"url": f"{receiver_url}/webhook", "send_resolved": False}]})
    return config


class Alertmanager(ServerProcess):
    """`prometheus-alertmanager` on 127.0.0.1 with `config`, no cluster, its data in `tmp`."""

    name = "alertmanager"

    def __init__(self, tmp: Path, config: dict[str, Any]) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.config = tmp / "alertmanager.yml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))
        self.log = tmp / "alertmanager.log"

    def __enter__(self) -> Alertmanager:
        binary = require_tool("prometheus-alertmanager")
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        self.launch([binary, f"--config.file={self.config}", f"--storage.path={self.tmp / 'am'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=",
                     "--log.level=warn"], env)
        return self


def test_the_shipped_alertmanager_config_is_valid():
    """`amtool check-config` (same package) accepts deploy/alertmanager/alertmanager.yml."""
    amtool = require_tool("amtool", "prometheus-alertmanager")
    out = subprocess.run([amtool, "check-config", str(ALERTMANAGER_CONFIG)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_real_failure_reaches_slack_pagerduty_and_a_webhook_with_its_fix(tmp_path, receiver):
    """The int8-mamba log appended to a followed file: SglangKnownFailure fires in Prometheus,
    Alertmanager routes it, and the webhook gets the alert with the summary, fix and source
    annotations; the Slack message (title, link, text) and the PagerDuty event (summary,
    details, link) the shipped receivers render carry the same."""
    log, daemon = scraped_daemon(tmp_path)
    with Alertmanager(tmp_path, routed_config(receiver.url)) as am, daemon:
        url = poll("daemon serving", lambda: served_url(daemon), 30)
        with Prometheus(tmp_path, [url.split("//", 1)[1]], rule_files=[RULES],
                        alertmanagers=[f"127.0.0.1:{am.port}"]) as prom:
            def alive() -> str:
                return prom.alive() or am.alive()

            poll("the seed's zero series scraped",
                 lambda: prom.query(f'sglang_log_errors_total{{pattern_id="{SEED}"}}'), 30, alive)
            with log.open("a") as f:
                f.write(LOG.read_text())

            def seed_alerts() -> list[dict[str, Any]]:
                return [a for body in receiver.bodies("/webhook") for a in body["alerts"]
                        if a["labels"].get("pattern_id") == SEED]

            [alert, *_] = poll("the webhook receives SglangKnownFailure", seed_alerts, 45, alive)
            slack = poll("Slack is sent it", lambda: receiver.bodies("/slack"), 15, alive)
            pagerduty = poll("PagerDuty is sent it", lambda: receiver.bodies("/pagerduty"), 15,
                             alive)
        assert daemon.stop() == 0

    assert (alert["status"], alert["labels"]["alertname"], alert["labels"]["severity"]) == (
        "firing", "SglangKnownFailure", "error")
    notes = alert["annotations"]
    instance = alert["labels"]["instance"]
    assert notes["summary"] == f"sglang ValueError on {instance}: {SUMMARY}"
    assert (notes["fix"], notes["runbook_url"]) == (FIX, SOURCE)
    assert not re.search(r"https?://(127\.0\.0\.1|localhost)", json.dumps(notes))

    [message] = [a for body in slack for a in body["attachments"]]
    assert message["title"] == f"SglangKnownFailure: {notes['summary']}"
    assert message["title_link"] == SOURCE
    assert message["text"].startswith(f"*Fix:* {FIX}\n") and message["text"].endswith(SOURCE)
    assert slack[0]["channel"] == "#sglang-oncall"

    [event] = pagerduty
    assert (event["routing_key"], event["event_action"]) == ("test-routing-key", "trigger")
    assert (event["payload"]["summary"], event["payload"]["severity"]) == (
        notes["summary"], "error")
    assert event["payload"]["custom_details"]["fix"] == FIX
    assert event["payload"]["custom_details"]["pattern_id"] == SEED
    assert [link["href"] for link in event["links"]] == [SOURCE]


def test_the_deploy_page_shows_the_shipped_receivers():
    """The Slack/PagerDuty snippet in docs/deploy.md is the shipped file's receivers, so what
    a reader copies is what the test above ran."""
    shipped = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())["receivers"]
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "deploy.md").read_text(), re.S)
    shown = [yaml.safe_load(b) for b in blocks if "slack_configs" in b]
    assert shown and all(isinstance(s, dict) for s in shown)
    assert [s["receivers"] for s in shown] == [shipped]
