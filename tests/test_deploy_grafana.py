"""deploy/grafana and deploy/prometheus against a real Prometheus that scrapes a real daemon.

No Grafana server runs here, so the dashboard is checked for what Grafana would do with it:
every panel's query, with the dashboard's variables filled in as Grafana would, is sent to a
real Prometheus (on 127.0.0.1, from Debian's `prometheus` package) that has scraped a running
`sglang-matcher watch --metrics-addr …` following a real sglang log with failures in it. The
same Prometheus evaluates deploy/prometheus's rules: the known-failure alert fires.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prom_harness import JOB, Prometheus, poll, scraped_daemon, served_url

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "deploy" / "grafana" / "sglang-matcher-dashboard.json"
GRAFANA_RULES = REPO / "deploy" / "grafana" / "alerting" / "alert-rules.yaml"
RULES = REPO / "deploy" / "prometheus" / "sglang-matcher.rules.yml"
# Real sglang 0.5.23 logs: the seed's ValueError (curated pattern 4e2cdd4d6209ebbd) and a
# scheduler crash.
LOGS = ("int8-mamba-radix-cache.log", "scheduler-crash-unknown-architecture.log")
SEED = "4e2cdd4d6209ebbd"
# What Grafana substitutes: the variables as a user picks them, and its own interval macros.
VARIABLES = {"$job": JOB, "$instance": ".*", "$__rate_interval": "1m", "$__range": "1h"}
# A query that may rightly return nothing here: no matcher error happened in this run.
MAY_BE_EMPTY = {"Checkpoint failures, reloads, internal errors/C"}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panel_queries(dash: dict[str, Any]) -> dict[str, str]:
    """'title/refId' → expr, for every query of every panel (rows included, in case)."""
    out = {}
    for panel in dash["panels"]:
        for child in [panel, *panel.get("panels", [])]:
            for target in child.get("targets", []):
                out[f"{child['title']}/{target['refId']}"] = target["expr"]
    return out


def substitute(expr: str) -> str:
    for name in sorted(VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, VARIABLES[name])
    return expr


def test_the_dashboard_is_well_formed():
    """Loads as JSON; unique panel ids; panels within the 24-column grid; every panel queries the
    `${datasource}` variable; every `$variable` a query uses is a dashboard variable or one of
    Grafana's macros; the panels the issue asks for are there."""
    dash = dashboard()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert p["gridPos"]["x"] >= 0 and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
    defined = {v["name"] for v in dash["templating"]["list"]}
    assert defined == {"datasource", "job", "instance"}
    used = {m for e in panel_queries(dash).values() for m in re.findall(r"\$\w+", e)}
    assert used <= {f"${v}" for v in defined} | {"$__rate_interval", "$__range"}
    titles = {p["title"] for p in dash["panels"]}
    assert {"Known failures by pattern", "Known failures by severity", "Last error per pattern",
            "Unknown errors by exception class", "Lines read /s", "Read lag", "Matcher up",
            "Main loop heartbeat age"} <= titles


def test_every_query_runs_on_a_prometheus_that_scraped_a_running_daemon(tmp_path):
    """A daemon with the built-in catalog follows a log; Prometheus scrapes it every second with
    deploy/prometheus's rules loaded; two real sglang logs are appended. Then: the
    known-failure alert fires for the seed's pattern with its fix and its source as runbook;
    every dashboard query and every Grafana alert query is valid PromQL, and each dashboard
    query returns data (except MAY_BE_EMPTY); Grafana's known-failure query sees the seed's
    failure."""
    log, daemon = scraped_daemon(tmp_path)
    with daemon:
        url = poll("daemon serving", lambda: served_url(daemon), 30)
        with Prometheus(tmp_path, [url.split("//", 1)[1]], rule_files=[RULES]) as prom:
            seed = f'sglang_log_errors_total{{pattern_id="{SEED}"}}'
            poll("the seed's zero series scraped", lambda: prom.query(seed), 30, prom.alive)
            with log.open("a") as f:
                for name in LOGS:
                    f.write((REPO / "examples" / "logs" / name).read_text())
            firing = poll("SglangKnownFailure firing", lambda: prom.query(
                f'ALERTS{{alertname="SglangKnownFailure",alertstate="firing",'
                f'pattern_id="{SEED}"}}'), 60, prom.alive)
            [alert] = firing
            assert (alert["metric"]["severity"], alert["metric"]["error_class"]) == (
                "error", "ValueError")
            rules = json.loads(_get(prom, "/api/v1/rules"))["data"]["groups"]
            [known] = [r for g in rules for r in g["rules"] if r["name"] == "SglangKnownFailure"]
            [active] = [a for a in known["alerts"] if a["labels"]["pattern_id"] == SEED]
            assert active["annotations"]["runbook_url"] == active["labels"]["doc_url"]
            assert active["annotations"]["runbook_url"].startswith(
                "https://github.com/sgl-project/sglang/blob/")
            assert active["annotations"]["fix"].startswith("Remove --radix-cache-backend")
            assert all(r["health"] == "ok" for g in rules for r in g["rules"]), rules

            queries = {k: substitute(v) for k, v in panel_queries(dashboard()).items()}
            assert set(queries) >= MAY_BE_EMPTY
            for key, expr in queries.items():
                answer = prom.api_query(expr)
                assert answer["status"] == "success", (key, expr, answer)
                if key not in MAY_BE_EMPTY:
                    poll(f"panel {key!r} has data: {expr}", lambda e=expr: prom.query(e), 30,
                         prom.alive)
            grafana = _grafana_queries()
            rules_file = yaml.safe_load((REPO / "deploy/prometheus/sglang-matcher.rules.yml")
                                        .read_text())
            alerts = {r["alert"] for g in rules_file["groups"] for r in g["rules"] if "alert" in r}
            assert set(grafana) == alerts  # every alert of the rules file, each one runs
            for title, expr in grafana.items():
                answer = prom.api_query(expr)
                assert answer["status"] == "success", (title, expr, answer)
            seen = prom.query(grafana["SglangKnownFailure"])
            assert SEED in {r["metric"]["pattern_id"] for r in seen}
        assert daemon.proc is not None
        assert daemon.stop() == 0


def _grafana_queries() -> dict[str, str]:
    import yaml

    [group] = yaml.safe_load(GRAFANA_RULES.read_text())["groups"]
    return {r["title"]: next(d["model"]["expr"] for d in r["data"] if d["refId"] == "A")
            for r in group["rules"]}


def _get(prom: Prometheus, path: str) -> bytes:
    from prom_harness import fetch

    status, body = fetch(prom.api + path)
    if status != 200:
        pytest.fail(f"GET {path}: HTTP {status}")
    return body
