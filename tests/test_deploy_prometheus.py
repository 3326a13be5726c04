"""deploy/prometheus: the rules as promtool reads and tests them, and the series they need.

promtool comes from Debian's `prometheus` package (.ci/apt-packages).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml
from prom_harness import tool
from prometheus_client import CollectorRegistry
from structlog.testing import CapturingLogger

from matcher.telemetry import Telemetry

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "deploy" / "prometheus" / "sglang-matcher.rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "sglang-matcher.rules.test.yml"
GRAFANA_RULES = REPO / "deploy" / "grafana" / "alerting" / "alert-rules.yaml"


def alerts() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def test_promtool_checks_the_rules_and_passes_their_unit_tests():
    """`promtool check rules` (13 rules, no warning) and `promtool test rules`: SUCCESS."""
    checked = subprocess.run([tool("promtool"), "check", "rules", str(RULES)],
                             capture_output=True, text=True, timeout=60)
    assert (checked.returncode, checked.stderr) == (0, "")
    assert checked.stdout.strip().splitlines()[-1].strip() == "SUCCESS: 13 rules found"
    tested = subprocess.run([tool("promtool"), "test", "rules", RULE_TESTS.name],
                            capture_output=True, text=True, timeout=120, cwd=RULE_TESTS.parent)
    assert (tested.returncode, tested.stdout.split()[-1]) == (0, "SUCCESS"), (
        tested.stdout + tested.stderr)


def test_every_alert_is_tested_firing_and_not_firing():
    """Each alert of the rules file has at least one promtool case where it fires (with its
    labels and annotations spelled out) and one where it must not."""
    cases = [c for t in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for c in t.get("alert_rule_test", [])]
    seen = {(c["alertname"], bool(c.get("exp_alerts"))) for c in cases}
    for rule in alerts():
        assert {(rule["alert"], True), (rule["alert"], False)} <= seen, rule["alert"]
    for c in cases:
        for alert in c.get("exp_alerts") or []:
            assert alert["exp_annotations"]["summary"], c["alertname"]


# `(condition) * on (…) group_left (…) (info or on (…) group by (…) (counter))`: the right side
# is 1 for every series (an info series, or `group`), so the product is the condition's value.
INFO_JOIN = re.compile(
    r"^\( ?(?P<cond>.*?) ?\) \* on \((?P<on>[^)]*)\) group_left \((?P<copied>[^)]*)\) "
    r"\( ?sglang_error_pattern_info or on \((?P=on)\) group by \((?P=on)\) "
    r"\(sglang_log_errors_total\)\)$")


def test_every_alert_is_positive_exactly_when_it_fires():
    """Each `or` branch ends in `> N` (or is `absent(…)`, which is 1): Grafana's copy fires on
    `last() > 0`, which is only right if a firing series is never 0 or negative. A condition
    joined with sglang_error_pattern_info is checked as the condition: the join multiplies it by
    1, and (its `or … group by` half) never drops one of its series."""
    joined = set()
    for rule in alerts():
        expr = " ".join(str(rule["expr"]).split())
        if expr.startswith("absent("):
            continue
        join = INFO_JOIN.match(expr)
        if join is not None:
            joined.add(rule["alert"])
            assert join["on"] == "job, instance, pattern_id", rule["alert"]
            assert join["copied"] == "summary, fix, doc_url", rule["alert"]
            expr = join["cond"]
        assert "group_left" not in expr, rule["alert"]
        for branch in re.split(r"\)\s+or\s+\(", expr):
            assert re.search(r">\s*\d+\)*$", branch), (rule["alert"], branch)
    assert joined == {"SglangKnownFailure"}


def test_the_known_failure_alert_says_what_happened_and_the_fix():
    """Its annotations read the joined summary, fix and doc_url (with words of their own when
    a pattern has no info series); its runbook is that link, never the matcher's address."""
    [known] = [r for r in alerts() if r["alert"] == "SglangKnownFailure"]
    notes = known["annotations"]
    assert "$labels.summary" in notes["summary"] and "$labels.fix" in notes["fix"]
    assert notes["runbook_url"].startswith("{{ if $labels.doc_url }}{{ $labels.doc_url }}")
    assert "instance" not in notes["runbook_url"]


def test_the_rendered_copies_are_up_to_date_and_grafana_safe():
    """`deploy/render.py --check` finds the PrometheusRule and the Grafana rules current; each
    Grafana rule queries its alert's own expression, and no label holds a `$` (Grafana's file
    provisioning would expand it as an environment variable)."""
    out = subprocess.run([sys.executable, str(REPO / "deploy" / "render.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr) == (0, "")
    [group] = yaml.safe_load(GRAFANA_RULES.read_text())["groups"]
    by_title = {r["title"]: r for r in group["rules"]}
    assert list(by_title) == [a["alert"] for a in alerts()]
    for alert in alerts():
        rule = by_title[alert["alert"]]
        [query] = [d for d in rule["data"] if d["refId"] == "A"]
        assert query["model"]["expr"] == " ".join(str(alert["expr"]).split())
        assert rule["for"] == alert.get("for", "0s")
        assert "$" not in yaml.safe_dump(rule["labels"])
        assert "$value " not in str(rule["annotations"]) and "$value|" not in str(
            rule["annotations"])


def test_heartbeat_and_checkpoint_timestamps_are_series_the_alerts_can_read():
    """The stalled and checkpoint alerts read `time() - x`: the heartbeat is set at start and
    on every `heartbeat()`, the last checkpoint time at start and then at each success — not 0
    before the first one (an unlabelled gauge reads 0 until set, and `time() - 0 > 300` fired
    SglangMatcherCheckpointFailing while a fresh daemon compiled its catalog, holding positions)."""
    now = [1000.0]
    registry = CollectorRegistry()
    t = Telemetry(registry, CapturingLogger(), {"pod": "p"}, wall=lambda: now[0])
    def value(name: str) -> float | None:
        return registry.get_sample_value(name, {"pod": "p"})
    assert (value("sglang_matcher_heartbeat_timestamp_seconds"),
            value("sglang_matcher_last_checkpoint_success_timestamp_seconds")) == (1000.0, 1000.0)
    now[0] = 1005.0
    t.heartbeat()
    t.checkpoint_failed("disk full")
    assert value("sglang_matcher_last_checkpoint_success_timestamp_seconds") == 1000.0
    now[0] = 1007.0
    t.checkpoint_written()
    assert (value("sglang_matcher_heartbeat_timestamp_seconds"),
            value("sglang_matcher_last_checkpoint_success_timestamp_seconds")) == (1005.0, 1007.0)
