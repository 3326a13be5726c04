"""Grafana alerting file provisioning, checked as Grafana reads it, without a Grafana server.

No machine-readable schema of the file format is published, so the shape is a JSON Schema
written here from Grafana's own types (tests/fixtures/grafana/alerting-provisioning.schema.json
says which). What Grafana checks beyond shape when it provisions the files is `problems`:
non-blank names, unique uids, the root policy (a default receiver, no matchers), `group_by`
without duplicates, every policy naming a contact point that exists, and `$` only where an
environment variable is meant (Grafana expands `$NAME` in labels, settings and policies).

`receivers_for` walks a policy tree as Grafana's Alertmanager routes an alert: depth first,
the first matching child wins unless it says `continue`, and a node no child takes keeps it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA = Path(__file__).resolve().parent / "fixtures" / "grafana" / (
    "alerting-provisioning.schema.json")
ENV_REFERENCE = re.compile(r"\$(\w+|\{\w+\})")


def validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))


def problems(docs: list[dict[str, Any]], secrets: set[str]) -> list[str]:
    """What Grafana would refuse in these files, provisioned together (one directory).
    `secrets`: the environment variables the files may name."""
    check = validator()
    found = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
             for doc in docs for e in check.iter_errors(doc)]
    points = [p for doc in docs for p in doc.get("contactPoints", [])]
    uids = [r["uid"] for p in points for r in p.get("receivers", [])]
    found += [f"contact point uid {u!r} used twice" for u in sorted(set(uids))
              if uids.count(u) > 1]
    names = {p.get("name") for p in points}
    for doc in docs:
        for policy in doc.get("policies", []):
            found += _root_problems(policy)
            found += [f"policy names receiver {r!r}, which no contact point is"
                      for r in _receivers(policy) if r not in names]
    found += [f"{where}: ${name} is not one of the secrets {sorted(secrets)}"
              for where, name in _env_references(docs) if name.strip("{}") not in secrets]
    return found


def _root_problems(root: dict[str, Any]) -> list[str]:
    said = []
    if not str(root.get("receiver", "")).strip():
        said.append("root policy: root route must specify a default receiver")
    if any(root.get(k) for k in ("matchers", "object_matchers", "match", "match_re")):
        said.append("root policy: root route must not have any matchers")
    for node in _nodes(root):
        by = list(node.get("group_by", []))
        if "..." in by and len(by) > 1:
            said.append(f"group_by {by}: `...` and other labels at the same time")
        if len(set(by)) != len(by):
            said.append(f"group_by {by}: a label twice")
    return said


def _nodes(route: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield route
    for child in route.get("routes", []):
        yield from _nodes(child)


def _receivers(route: dict[str, Any]) -> set[str]:
    return {n["receiver"] for n in _nodes(route) if n.get("receiver")}


def _env_references(docs: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(where, NAME) of each `$NAME` Grafana would expand: in contact point settings, rule
    labels and policies. Queries and annotations are not expanded (annotations only
    `${NAME}`)."""
    for doc in docs:
        for p in doc.get("contactPoints", []):
            for r in p["receivers"]:
                yield from _refs_in(r.get("settings", {}), f"contact point {p['name']}")
        for policy in doc.get("policies", []):
            yield from _refs_in(policy, "policies")
        for group in doc.get("groups", []):
            for rule in group.get("rules", []):
                yield from _refs_in(rule.get("labels", {}), f"rule {rule.get('title')} labels")
                braced = [m for m in ENV_REFERENCE.findall(
                    json.dumps(rule.get("annotations", {}))) if m.startswith("{")]
                yield from ((f"rule {rule.get('title')} annotations", m) for m in braced)


def _refs_in(value: Any, where: str) -> Iterator[tuple[str, str]]:
    for name in ENV_REFERENCE.findall(json.dumps(value)):
        yield where, name


def receivers_for(route: dict[str, Any], labels: dict[str, str],
                  inherited: str | None = None) -> list[str]:
    """The receivers an alert with `labels` is sent to by the tree under `route`."""
    receiver = route.get("receiver") or inherited
    out: list[str] = []
    for child in route.get("routes", []):
        if not matches(child, labels):
            continue
        out += receivers_for(child, labels, receiver)
        if not child.get("continue"):
            break
    return out or ([receiver] if receiver else [])


def matches(route: dict[str, Any], labels: dict[str, str]) -> bool:
    triples = [tuple(m) for m in route.get("object_matchers", [])]
    triples += [_parse_matcher(m) for m in route.get("matchers", [])]
    return all(_holds(labels.get(name, ""), op, value) for name, op, value in triples)


def _parse_matcher(text: str) -> tuple[str, str, str]:
    """`name=~"value"` (Alertmanager's matcher syntax, quoted or not)."""
    m = re.fullmatch(r'\s*(\w+)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*', text)
    assert m, f"not a matcher: {text!r}"
    return m.group(1), m.group(2), m.group(3)


def _holds(actual: str, op: str, value: str) -> bool:
    if op in ("=~", "!~"):
        return bool(re.fullmatch(value, actual)) == (op == "=~")
    return (actual == value) == (op == "=")
