"""The reference in `docs/` says what the code does, and cannot drift from it.

- `docs/event.schema.json` validates every event the real `sglang-matcher scan --format json`
  prints for the real logs we ship and a spread of the test fixtures, and what the daemon
  prints on a real log; and it names every field `event_dict` can emit, no more.
- `docs/metrics.md` and `docs/configuration.md` are what `python -m matcher.reference` makes
  from the code now (a new metric, setting or flag fails here until the page is made again).
- No tracked file refers to a place outside the repository.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from matcher import reference, settings
from matcher.catalog import load as catalog_load
from matcher.catalog.schema import FIX_OPS, ROLES, SEVERITIES, CatalogRecord
from matcher.config import Config, load_config
from matcher.settings import ENV_PREFIX, Setting
from matcher.sinks import events as events_module
from matcher.types import Event

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FIXTURES = REPO / "tests" / "fixtures"
SCHEMA = json.loads((DOCS / "event.schema.json").read_text(encoding="utf-8"))
UPDATE = "run `python -m matcher.reference all --docs docs` to update it"


def _validator() -> Draft202012Validator:
    Draft202012Validator.check_schema(SCHEMA)
    return Draft202012Validator(SCHEMA)


def _invalid(events: list[dict]) -> list[str]:
    validator = _validator()
    out = []
    for e in events:
        for error in validator.iter_errors(e):
            out.append(f"{e.get('source')}:{e.get('line')} {e.get('pattern_id')}: "
                       f"{'/'.join(map(str, error.absolute_path))}: {error.message}")
    return out


def _matcher() -> list[str]:
    """`sglang-matcher` of this checkout (its entry point, `matcher.cli.main`, as the installed
    script runs it), whatever else is installed."""
    return [sys.executable, "-m", "matcher"]


def _logs() -> list[Path]:
    """Every shipped example, every real launch log, every field excerpt, the issue logs."""
    logs = sorted((REPO / "examples" / "logs").glob("*.log"))
    for folder in ("sglang/launch", "sglang/issues", "sglang/constructed", "field/*"):
        logs += sorted(FIXTURES.glob(f"{folder}/*.log"))
    return logs


@pytest.fixture(scope="module")
def scanned() -> list[dict]:
    logs = _logs()
    assert len(logs) > 150
    done = subprocess.run([*_matcher(), "scan", "--format", "json", *map(str, logs)],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_scanned_event_validates(scanned):
    assert len(scanned) > 200
    assert not _invalid(scanned)
    kinds = {e["event"] for e in scanned}
    assert kinds == {"sglang_error", "sglang_warning", "sglang_unknown_error"}
    seen = set().union(*scanned)
    # The real logs show every optional field but the daemon's rate limit's.
    assert {"sglang_version", "consequences", "remediation", "fingerprint"} <= seen
    steps = [step for e in scanned for way in e.get("remediation", {}).get("fix_actions", [])
             for step in way]
    assert {"remove", "add", "set", "env"} <= {s["op"] for s in steps}


def test_the_schema_rejects_what_events_never_are(scanned):
    known = next(e for e in scanned if e["event"] == "sglang_error" and "fix_actions"
                 in e["remediation"])
    unknown = next(e for e in scanned if e["event"] == "sglang_unknown_error")
    wrong = [
        {**known, "severity": "warning"},  # an sglang_error is critical or error
        {**known, "event": "sglang_warning"},  # …and a warning is not
        {**known, "error_class": ""},
        {**known, "extra": 1},
        {k: v for k, v in known.items() if k != "remediation"},
        {**known, "remediation": {**known["remediation"], "fix_actions": [[{"op": "delete"}]]}},
        {**known, "remediation": {**known["remediation"],
                                  "fix_actions": [[{"op": "set", "flag": "--x"}]]}},
        {**unknown, "pattern_id": "x"},
        {k: v for k, v in unknown.items() if k != "fingerprint"},
    ]
    validator = _validator()
    assert [validator.is_valid(e) for e in wrong] == [False] * len(wrong)


def test_a_suppressed_count_validates(scanned):
    """`suppressed` comes only from the daemon's repeat limit; the emitted form of a real
    event that carries one."""
    from matcher.redact import Redactor
    from matcher.sinks.events import event_dict

    real = scanned[0]
    event = Event(event=real["event"], error_class=real["error_class"], message=real["message"],
                  source=real["source"], severity=real["severity"], log_ts=real["log_ts"],
                  observed_ts=1.0, ranks=tuple(real["ranks"]), occurrences=1,
                  traceback=real["traceback"], pattern_id=real["pattern_id"],
                  remediation=real.get("remediation"), suppressed=3, lineno=real["line"] or 0)
    assert not _invalid([event_dict(event, Redactor())])


def _key(e: dict) -> str:
    return e.get("pattern_id") or e["fingerprint"]


def test_the_daemon_prints_events_that_validate(tmp_path):
    """`watch` on a real log, stopped by SIGTERM once its events are out. It prints a repeat of
    an error within `repeat_interval` once, so it is done when each error scan finds is out."""
    log = REPO / "examples" / "logs" / "scheduler-crash-unknown-architecture.log"
    expected = subprocess.run([*_matcher(), "scan", "--format", "json", str(log)],
                              capture_output=True, text=True, cwd=REPO, timeout=600)
    assert "Traceback" not in expected.stderr, expected.stderr
    want = {_key(json.loads(line)) for line in expected.stdout.splitlines()}
    assert len(want) >= 2

    def printed() -> list[dict]:
        return [json.loads(line) for line in out.read_text().splitlines()]

    out = tmp_path / "stdout"
    with open(out, "w") as stdout:
        daemon = subprocess.Popen(
            [*_matcher(), "watch", "--from-beginning", "--state-dir", str(tmp_path / "state"),
             str(log)], stdout=stdout, stderr=subprocess.DEVNULL, cwd=REPO)
        try:
            deadline = time.monotonic() + 180  # a cold start compiles the catalog first
            while time.monotonic() < deadline and {_key(e) for e in printed()} != want:
                assert daemon.poll() is None, "the daemon exited"
                time.sleep(0.1)
        finally:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=60) == 0
    events = printed()
    assert {_key(e) for e in events} == want
    assert {e["event"] for e in events} == {"sglang_error", "sglang_warning"}
    assert all(e["observed_ts"] > 1e9 for e in events)  # Unix time, in the daemon
    assert not _invalid(events)


# -- the schema names what the code emits -----------------------------------------------------

def _dict_keys(function: typing.Callable[..., object]) -> set[str]:
    """The string keys a function puts in dicts: `{"k": …}` literals and `d["k"] = …`."""
    tree = ast.parse(inspect.getsource(function).lstrip())
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys |= {k.value for k in node.keys
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                    keys.add(target.slice.value)
    return keys


def test_the_schema_names_every_field_event_dict_emits(scanned):
    emitted = _dict_keys(events_module.event_dict)
    assert {"event", "pattern_id", "remediation", "suppressed"} <= emitted
    assert set(SCHEMA["properties"]) == emitted
    assert set().union(*scanned) <= emitted
    # Required: what every scanned event carries (event_dict writes them whatever the event).
    assert set(SCHEMA["required"]) == set.intersection(*(set(e) for e in scanned))


def test_the_schema_names_the_remediation_and_its_steps():
    rem = SCHEMA["$defs"]["remediation"]["properties"]
    assert set(rem) == _dict_keys(CatalogRecord.remediation)
    action = SCHEMA["$defs"]["fix_action"]
    assert action["properties"]["op"]["enum"] == list(FIX_OPS)
    for branch in action["oneOf"]:
        ops = branch["properties"]["op"].get("enum") or [branch["properties"]["op"]["const"]]
        for op in ops:
            assert set(branch["properties"]) == {"op"} | catalog_load._FIX_KEYS[op], op
    assert sorted(op for b in action["oneOf"]
                  for op in b["properties"]["op"].get("enum")
                  or [b["properties"]["op"]["const"]]) == sorted(FIX_OPS)


def test_the_schema_enums_are_the_codes():
    hints = typing.get_type_hints(Event)
    assert SCHEMA["properties"]["event"]["enum"] == list(typing.get_args(hints["event"]))
    assert SCHEMA["$defs"]["severity"]["enum"] == list(SEVERITIES)
    assert SCHEMA["properties"]["role"]["enum"] == list(ROLES)


def test_events_md_describes_every_field():
    text = (DOCS / "events.md").read_text(encoding="utf-8")
    missing = [f for f in SCHEMA["properties"] if f"`{f}`" not in text]
    missing += [f"remediation.{f}" for f in SCHEMA["$defs"]["remediation"]["properties"]
                if f"`{f}`" not in text]
    assert not missing, f"docs/events.md does not describe {missing}"


# -- generated pages --------------------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="process_* series exist only where /proc does")
def test_metrics_md_is_what_the_registry_holds():
    made = reference.render("metrics")
    assert (DOCS / "metrics.md").read_text(encoding="utf-8") == made, \
        f"docs/metrics.md differs from the registry: {UPDATE}"


def test_the_metrics_page_lists_every_family_of_a_built_daemon():
    families = {f.name: f for f in reference.metric_families()}
    assert "sglang_log_errors_total" in families
    assert families["sglang_log_errors_total"].labels[:3] == ("pattern_id", "error_class",
                                                              "severity")
    assert families["sglang_matcher_otlp_sent_total"].only_with == "otlp_endpoint"
    assert families["sglang_matcher_webhook_delivered_total"].only_with == "webhook_url"
    assert families["sglang_matcher_event_latency_seconds"].type == "histogram"


def test_configuration_md_is_what_the_code_says():
    made = reference.render("configuration")
    assert (DOCS / "configuration.md").read_text(encoding="utf-8") == made, \
        f"docs/configuration.md differs from the settings Config declares: {UPDATE}"


def test_every_setting_is_described():
    from matcher.config import NOT_RELOADABLE, SETTINGS

    fields = [f.name for f in dataclasses.fields(Config)]
    assert [s.name for s in SETTINGS] == fields
    assert all(s.doc.strip() for s in SETTINGS), "matcher/config.py: a setting without doc="
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for name in fields:
        assert f"### `{name}`" in text and f"`{ENV_PREFIX}{name.upper()}`" in text, name
    # The settings a reload leaves alone are named where the page says what SIGHUP does.
    sighup = " ".join(text.split("SIGHUP", 1)[1].split("\n\n", 1)[0].split())
    said = sighup.split("except ", 1)[1].split(", which need a restart", 1)[0]
    assert said.replace(" and ", ", ").split(", ") == [f"`{n}`" for n in NOT_RELOADABLE]


def _sample(s: Setting) -> str:
    """An environment value of the setting that differs from its default."""
    if s.choices:
        return next(c for c in reversed(s.choices) if c != s.default_value())
    if s.name == "metrics_addr":
        return "127.0.0.1:1"
    by_kind = {settings.BOOL: "false" if s.default_value() is True else "true",
               settings.COUNT: "7", settings.COUNT_OR_AUTO: "7", settings.SECONDS: "7",
               settings.PATH: "elsewhere", settings.PATH_OR_UNSET: "elsewhere",
               settings.TEXT_OR_UNSET: "http://127.0.0.1:1/x", settings.TEXT: "0.5.23",
               settings.TEXTS: "a,b", settings.PATHS: "a,b", settings.TABLE: "team=a"}
    return by_kind[s.kind]


def test_every_environment_variable_in_the_page_sets_its_setting():
    from matcher.config import SETTINGS

    base = load_config(environ={})
    for s in SETTINGS:
        got = load_config(environ={s.env: _sample(s)})
        assert getattr(got, s.name) != getattr(base, s.name), s.env


def test_every_watch_flag_is_in_the_page():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    from matcher.commands import build_parser

    [watch] = [p for a in build_parser()._subparsers._group_actions  # type: ignore[union-attr]
               for name, p in a.choices.items() if name == "watch"]
    options = [o for a in watch._actions if a.help != "==SUPPRESS==" for o in a.option_strings
               if o.startswith("--")]
    assert "--label" in options and "--otlp-endpoint" in options
    missing = [o for o in options if f"`{o}" not in text]
    assert not missing, f"watch flags missing from docs/configuration.md: {missing}; {UPDATE}"


def test_reference_check_says_how_to_update(tmp_path):
    (tmp_path / "configuration.md").write_text("stale\n")
    (tmp_path / "metrics.md").write_text("stale\n")
    done = subprocess.run([sys.executable, "-m", "matcher.reference", "configuration", "--docs",
                           str(tmp_path), "--check"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 1
    assert "python -m matcher.reference configuration" in done.stderr


# -- the repository stands alone --------------------------------------------------------------

# Spelled in pieces, so that this file does not find itself. The workspace directory inside a longer path
# (`/home/runner/work/`, a CI runner's build path in a real line a record quotes) is not ours.
OUTSIDE = ("/".join(("..", "shared")), "/".join(("", "work", "")))
_AT_ROOT = re.compile(r"(?<![\w.~-])" + re.escape(OUTSIDE[1]))
# Logs users pasted hold their own machines' paths (a `work` directory at the root): there only this
# workspace's own places count.
OUTSIDE_PASTED = ("/".join(("..", "shared")), "/".join(("", "work", "main")),
                  "/".join(("", "work", "wt", "")), "/".join(("", "work", "shared")))


def test_no_tracked_file_refers_outside_the_repository():
    listed = subprocess.run(["git", "ls-files", "-z"], capture_output=True, cwd=REPO)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    found = []
    for name in listed.stdout.decode().split("\0"):
        path = REPO / name
        if not name or not path.is_file() or path.suffix in (".gz", ".whl", ".png"):
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        text = data.decode("utf-8", "replace")
        pasted = name.startswith(("tests/fixtures/field/", "tests/fixtures/field-test/",
                                  "tests/fixtures/healthy/", "tests/fixtures/router/",
                                  "tests/fixtures/router-runs/"))  # the router's build paths
        found += [f"{name}: {needle}" for needle in (OUTSIDE_PASTED if pasted else OUTSIDE)
                  if needle in text and (needle != OUTSIDE[1] or _AT_ROOT.search(text))]
    assert not found, f"references to places outside the repository: {found}"
