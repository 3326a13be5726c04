"""deploy/grafana/alerting: the Grafana-managed path end to end, as far as no Grafana server runs.

The directory is what a user mounts as Grafana's `provisioning/alerting`: the alert rules
(rendered from deploy/prometheus, their queries run on a real Prometheus in
tests/test_deploy_grafana.py), the contact points and the notification policy. Here every file
is checked against Grafana's provisioning format and the checks Grafana makes when it loads
them (tests/grafana_provisioning.py); the policy tree sends every alert the rules can raise to
the receivers deploy/alertmanager/alertmanager.yml sends it to; and the messages are that
file's, which tests/test_alertmanager.py proves in a real Alertmanager (Grafana's notifiers
execute the same Go templates over the same `.CommonLabels`/`.CommonAnnotations`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_provisioning import problems, receivers_for

REPO = Path(__file__).resolve().parents[1]
ALERTING = REPO / "deploy" / "grafana" / "alerting"
RULES = REPO / "deploy" / "prometheus" / "sglang-matcher.rules.yml"
ALERTMANAGER = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
SECRETS = {"SGLANG_MATCHER_SLACK_WEBHOOK_URL", "SGLANG_MATCHER_PAGERDUTY_ROUTING_KEY"}
# Catalog severities a known-failure alert carries (from the failing series).
SEVERITIES = ("critical", "error", "warning", "info")


def provisioned() -> dict[str, dict[str, Any]]:
    """Every file Grafana would read from the directory (it reads .yaml, .yml and .json)."""
    return {p.name: yaml.safe_load(p.read_text(encoding="utf-8"))
            for p in sorted(ALERTING.iterdir()) if p.suffix in (".yaml", ".yml", ".json")}


def test_the_directory_is_the_rules_the_contact_points_and_the_policy():
    assert set(provisioned()) == {"alert-rules.yaml", "contact-points.yaml",
                                  "notification-policies.yaml"}
    assert [p.name for p in ALERTING.iterdir()] and all(
        p.suffix == ".yaml" for p in ALERTING.iterdir())


def test_every_file_is_what_grafana_provisions():
    docs = list(provisioned().values())
    assert problems(docs, SECRETS) == []


def _doc(name: str) -> dict[str, Any]:
    return copy.deepcopy(provisioned()[name])


def _receiver(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [r] = [r for d in docs for p in d.get("contactPoints", []) for r in p["receivers"]
           if r["type"] == kind]
    return r


def _root(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [root] = [p for d in docs for p in d.get("policies", [])]
    return root


BROKEN: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "a policy names a missing contact point":
        lambda d: _root(d)["routes"][0].update(receiver="sglang-sms"),
    "slack without a webhook URL or token":
        lambda d: _receiver(d, "slack")["settings"].pop("url"),
    "pagerduty without its key":
        lambda d: _receiver(d, "pagerduty")["settings"].pop("integrationKey"),
    "a misspelled slack setting": lambda d: _receiver(d, "slack")["settings"].update(
        recepient="#x"),
    "a matcher on the root policy": lambda d: _root(d).update(
        object_matchers=[["a", "=", "b"]]),
    "a label twice in group_by": lambda d: _root(d)["routes"][0]["group_by"].append(
        "instance"),
    "an unknown matcher operator": lambda d: _root(d)["routes"][0].update(
        object_matchers=[["a", "==", "b"]]),
    "a `$` Grafana would expand in a message": lambda d: _receiver(d, "slack")[
        "settings"].update(title="{{ $labels.x }}"),
    "the same contact point uid twice": lambda d: _receiver(d, "pagerduty").update(
        uid="sglang-slack"),
    "a rule without queries": lambda d: d[0]["groups"][0]["rules"][0].update(data=[]),
    "a rule uid longer than 40": lambda d: d[0]["groups"][0]["rules"][0].update(uid="x" * 41),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_the_check_refuses_what_grafana_refuses(broken):
    docs = [_doc("alert-rules.yaml"), _doc("contact-points.yaml"),
            _doc("notification-policies.yaml")]
    BROKEN[broken](docs)
    assert problems(docs, SECRETS) != []


def _alert_labels() -> list[dict[str, str]]:
    """The label sets the rules' alerts can carry: each alert's own labels, and a known
    failure's severity (it comes from the failing series) in each of its values."""
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    out = []
    for rule in (r for g in rules["groups"] for r in g["rules"] if "alert" in r):
        labels = {"alertname": rule["alert"], **rule.get("labels", {})}
        if "severity" in labels:
            out.append(labels)
        else:
            out += [{**labels, "severity": s} for s in SEVERITIES]
    return out


def test_every_alert_reaches_the_receivers_alertmanager_sends_it_to():
    """Each alert the rules raise, with Grafana's folder label added, goes to the same
    receivers under the Grafana policy as under Alertmanager's route: PagerDuty and Slack for
    critical and error, Slack for the others."""
    root = _root([_doc("notification-policies.yaml")])
    [group] = _doc("alert-rules.yaml")["groups"]
    route = yaml.safe_load(ALERTMANAGER.read_text(encoding="utf-8"))["route"]
    seen = set()
    for labels in _alert_labels():
        grafana = receivers_for(root, {**labels, "grafana_folder": group["folder"]})
        assert grafana == receivers_for(route, labels), labels
        seen.add((labels["severity"], tuple(grafana)))
    assert ("error", ("sglang-pagerduty", "sglang-slack")) in seen
    assert ("warning", ("sglang-slack",)) in seen
    # An alert of another folder is left to the organization's default receiver.
    other = {"alertname": "SglangKnownFailure", "severity": "error", "grafana_folder": "x"}
    assert receivers_for(root, other) == [root["receiver"]]
    assert root["routes"][0]["object_matchers"] == [["grafana_folder", "=", group["folder"]]]


def test_the_messages_are_the_ones_alertmanager_sends():
    """Slack's title and text, PagerDuty's summary, severity and details are
    deploy/alertmanager's, whose rendering tests/test_alertmanager.py checks for real; the
    grouping is Alertmanager's, with Grafana's folder."""
    docs = [_doc("contact-points.yaml")]
    receivers = {r["name"]: r for r in yaml.safe_load(
        ALERTMANAGER.read_text(encoding="utf-8"))["receivers"]}
    [slack] = receivers["sglang-slack"]["slack_configs"]
    [pager] = receivers["sglang-pagerduty"]["pagerduty_configs"]
    grafana_slack = _receiver(docs, "slack")["settings"]
    grafana_pager = _receiver(docs, "pagerduty")["settings"]
    assert (grafana_slack["title"], grafana_slack["text"], grafana_slack["recipient"]) == (
        slack["title"], slack["text"], slack["channel"])
    assert (grafana_pager["summary"], grafana_pager["severity"], grafana_pager["details"]) == (
        pager["description"], pager["severity"], pager["details"])
    assert grafana_slack["url"] == "$SGLANG_MATCHER_SLACK_WEBHOOK_URL"
    assert grafana_pager["integrationKey"] == "$SGLANG_MATCHER_PAGERDUTY_ROUTING_KEY"
    am_route = yaml.safe_load(ALERTMANAGER.read_text(encoding="utf-8"))["route"]
    sglang = _root([_doc("notification-policies.yaml")])["routes"][0]
    for key in ("group_by", "group_wait", "group_interval", "repeat_interval"):
        assert sglang[key] == am_route[key], key
