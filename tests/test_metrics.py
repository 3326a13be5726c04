"""Events to Prometheus series (MetricsSink) and the pipeline's own telemetry, on fresh registries."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from structlog.testing import CapturingLogger

from matcher import selflog
from matcher.catalog import load_catalog
from matcher.catalog.schema import CatalogRecord
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.redact import Redactor
from matcher.sinks.metrics import MetricsSink
from matcher.telemetry import Telemetry
from matcher.types import Chunk, Event

FIXTURES = Path(__file__).parent / "fixtures"
ERRORS = "sglang_log_errors_total"
UNKNOWN = "sglang_log_unknown_errors_total"


def record(rid: str, layer: str = "curated", error_class: str | None = "ValueError",
           severity: str = "error") -> CatalogRecord:
    return CatalogRecord(id=rid, message_pattern=rf"failure {rid} (\w+)", layer=layer,  # type: ignore[arg-type]
                         origin="test.json", index=0, error_class=error_class, severity=severity)


@dataclass(frozen=True)
class Catalog:
    records: tuple[CatalogRecord, ...]
    version: str = "v1"


def event(pattern_id: str | None, *, kind: str = "sglang_error", error_class: str = "ValueError",
          ranks: tuple[str, ...] = ("TP0",), **kw: object) -> Event:
    fields: dict[str, object] = {
        "event": kind, "error_class": error_class, "message": "failure", "source": "server.log",
        "severity": "error", "log_ts": None, "observed_ts": 0.0, "ranks": ranks,
        "occurrences": len(ranks), "traceback": None, "pattern_id": pattern_id}
    fields.update(kw)
    return Event(**fields)  # type: ignore[arg-type]


CATALOG = Catalog((record("cur-a"), record("cur-b", error_class=None, severity="warning"),
                   record("gen-a", layer="generated"), record("user-a", layer="user",
                                                              error_class="torch.OutOfMemoryError",
                                                              severity="critical")))


def sink(registry: CollectorRegistry, catalog: Catalog = CATALOG, **kw: object) -> MetricsSink:
    kw.setdefault("static_labels", {"cluster": "c1"})
    return MetricsSink(registry, catalog=catalog, build_version="0.1.0",
                       catalog_version=catalog.version, wall=lambda: 1_700_000_000.0, **kw)  # type: ignore[arg-type]


def errors(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    """Every sglang_log_errors_total series as (pattern_id, error_class, severity) → value."""
    out = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == ERRORS:
                assert s.labels["cluster"] == "c1"
                out[(s.labels["pattern_id"], s.labels["error_class"], s.labels["severity"])] = s.value
    return out


def test_curated_and_user_series_exist_at_zero_before_any_event():
    """increase() needs a 0 before the first error: curated and user records have it, generated not."""
    registry = CollectorRegistry()
    sink(registry)
    assert errors(registry) == {
        ("cur-a", "ValueError", "error"): 0.0,
        ("cur-b", "UnclassifiedError", "warning"): 0.0,
        ("user-a", "torch.OutOfMemoryError", "critical"): 0.0,
    }
    assert registry.get_sample_value(
        "sglang_matcher_build_info", {"version": "0.1.0", "catalog_version": "v1", "cluster": "c1"}) == 1
    assert {layer: registry.get_sample_value("sglang_matcher_catalog_patterns",
                                             {"layer": layer, "cluster": "c1"})
            for layer in ("generated", "curated", "user")} == {"generated": 1, "curated": 2, "user": 1}
    assert registry.get_sample_value("sglang_log_last_error_timestamp_seconds",
                                     {"pattern_id": "cur-a", "cluster": "c1"}) is None


def test_every_builtin_curated_record_has_a_zero_series():
    """The shipped catalog: one zero series per curated record, labelled with its own class and severity."""
    catalog = load_catalog()
    registry = CollectorRegistry()
    MetricsSink(registry, catalog=catalog, build_version="0.1.0", catalog_version=catalog.version)
    curated = [r for r in catalog.records if r.layer == "curated"]
    assert curated
    for r in curated:
        labels = {"pattern_id": r.id, "error_class": r.error_class or "UnclassifiedError",
                  "severity": r.severity}
        assert registry.get_sample_value(ERRORS, labels) == 0.0, r.where


def test_a_tp8_crash_from_a_real_log_counts_once():
    """Eight ranks printing the same traceback (the real TP=8 fixture) are one failure: +1."""
    catalog = load_catalog()
    pipeline = Pipeline(Engine(catalog.records), catalog_version=catalog.version)
    data = (FIXTURES / "sglang/constructed/tp8_scheduler_crash.log").read_bytes()
    events = pipeline.feed(Chunk(data, "tp8.log", len(data)), 0.0).events + pipeline.finish(0.0)
    registry = CollectorRegistry()
    metrics = MetricsSink(registry, catalog=catalog, build_version="0.1.0",
                          catalog_version=catalog.version)
    metrics.accept(events)
    assert [(e.event, e.ranks, e.occurrences) for e in events] == [
        ("sglang_error", tuple(f"TP{i}" for i in range(8)), 8)]
    r = catalog.by_id(events[0].pattern_id or "")
    assert r is not None
    counted = {s.labels["pattern_id"]: s.value for m in registry.collect() for s in m.samples
               if s.name == ERRORS and s.value}
    assert counted == {r.id: 1.0}


def test_rank_collapsed_events_count_one_each_and_quiet_repeats_count_too():
    """occurrences (ranks) never multiply the count; rate-limited (quiet) repeats each add 1 and
    the `suppressed` note on the next printed event adds nothing more."""
    registry = CollectorRegistry()
    metrics = sink(registry)
    ranks = tuple(f"TP{i}" for i in range(8))
    first = event("cur-a", ranks=ranks)
    metrics.accept([first])
    metrics.accept([dataclasses.replace(first, quiet=True) for _ in range(98)])
    metrics.accept([dataclasses.replace(first, suppressed=98)])
    assert errors(registry)[("cur-a", "ValueError", "error")] == 100.0
    assert registry.get_sample_value("sglang_log_last_error_timestamp_seconds",
                                     {"pattern_id": "cur-a", "cluster": "c1"}) == 1_700_000_000.0


def test_unknown_error_classes_are_bounded():
    """Catalog classes and the first N others get series; later classes and non-names are `other`."""
    registry = CollectorRegistry()
    metrics = sink(registry, unknown_class_limit=2)
    classes = ["ValueError", "AlphaError", "torch.BetaError", "GammaError", "DeltaError",
               "not a class: sk-live-SECRET", "AlphaError"]
    metrics.accept([event(None, kind="sglang_unknown_error", error_class=c, fingerprint="f")
                    for c in classes])
    got = {s.labels["error_class"]: s.value for m in registry.collect() for s in m.samples
           if s.name == UNKNOWN}
    assert got == {"ValueError": 1.0, "OutOfMemoryError": 0.0, "other": 3.0,
                   "AlphaError": 2.0, "BetaError": 1.0}


def test_reload_keeps_counts_and_adds_zero_series_for_new_records():
    """SIGHUP: nothing resets or expires; new curated records start at 0; build_info follows."""
    registry = CollectorRegistry()
    metrics = sink(registry)
    metrics.accept([event("cur-a"), event("cur-b", severity="warning")])
    metrics.reload(Catalog((record("cur-a"), record("cur-new")), version="v2"))
    # cur-b left the catalog: still its own id
    metrics.accept([event("cur-a"), event("cur-b", severity="warning")])
    assert errors(registry) == {
        ("cur-a", "ValueError", "error"): 2.0,
        ("cur-b", "UnclassifiedError", "warning"): 2.0,
        ("user-a", "torch.OutOfMemoryError", "critical"): 0.0,
        ("cur-new", "ValueError", "error"): 0.0,
    }
    build = {s.labels["catalog_version"]: s.value for m in registry.collect() for s in m.samples
             if s.name == "sglang_matcher_build_info"}
    assert build == {"v2": 1.0}
    assert registry.get_sample_value("sglang_matcher_catalog_patterns",
                                     {"layer": "curated", "cluster": "c1"}) == 2


def test_no_label_value_comes_from_the_log():
    """Captures, messages, a lying error_class and a foreign pattern id never become label values."""
    registry = CollectorRegistry()
    metrics = sink(registry)
    secret = "sk-live-SECRET"
    metrics.accept([
        event("cur-a", error_class=f"Injected{secret}", message=f"failure {secret}",
              captures={"arg1": secret}, labels={"x": secret}),
        event(f"id-{secret}", error_class="ValueError"),
    ])
    text = generate_latest(registry).decode()
    assert "SECRET" not in text and "Injected" not in text
    assert errors(registry) == {
        ("cur-a", "ValueError", "error"): 1.0,
        ("cur-b", "UnclassifiedError", "warning"): 0.0,
        ("user-a", "torch.OutOfMemoryError", "critical"): 0.0,
        ("other", "other", "other"): 1.0,
    }


def test_static_labels_are_checked():
    """A static label that Prometheus would refuse, or that shadows ours, fails at construction."""
    for bad in ({"bad-name": "x"}, {"__reserved": "x"}, {"pattern_id": "x"}):
        with pytest.raises(ValueError, match="static label"):
            sink(CollectorRegistry(), static_labels=bad)


# -- Telemetry ------------------------------------------------------------------------------


def telemetry(registry: CollectorRegistry, **kw: object) -> tuple[Telemetry, CapturingLogger]:
    log = CapturingLogger()
    return Telemetry(registry, log, {"cluster": "c1"}, redactor=Redactor(), **kw), log  # type: ignore[arg-type]


def calls(log: CapturingLogger) -> list[tuple[str, str, dict[str, object]]]:
    return [(c.method_name, c.args[0], c.kwargs) for c in log.calls]


def test_telemetry_counts_and_logs_each_notice_in_one_call():
    """Each report moves its series and writes one redacted log entry (or none, for per-chunk counts)."""
    registry = CollectorRegistry()
    tel, log = telemetry(registry, wall=lambda: 1700000000.0)
    c = {"cluster": "c1"}
    assert registry.get_sample_value("sglang_matcher_reloads_total", {"result": "failed", **c}) == 0
    assert registry.get_sample_value("sglang_matcher_checkpoint_failures_total", c) == 0
    tel.lines("server", 3, 120)
    tel.lines("server", 2, 80)
    tel.read_lag("server", 4096)
    tel.rotated("server", path="/var/log/sglang/server.log")
    tel.truncated("server")
    tel.lines_truncated("server", 2)
    tel.checkpoint_written()
    tel.checkpoint_failed("cannot write: token=sk-live-SECRET")
    tel.reload("ok", catalog_version="v2")
    tel.reload("failed", detail="bad regex")
    tel.events_suppressed(7)
    tel.pipeline_error("read", PermissionError("denied"))
    tel.pipeline_error("frame", "WeirdCustomError")
    tel.pipeline_error("nonsense-stage", "ValueError")
    tel.event_latency(0.3)
    tel.events_refused("forbidden")
    values = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "cluster"))): s.value
              for m in registry.collect() for s in m.samples if not s.name.endswith("_created")
              and not s.name.startswith("sglang_matcher_event_latency_seconds_bucket")}
    assert values == {
        ("sglang_matcher_lines_total", (("source", "server"),)): 5.0,
        ("sglang_matcher_bytes_total", (("source", "server"),)): 200.0,
        ("sglang_matcher_read_lag_bytes", (("source", "server"),)): 4096.0,
        ("sglang_matcher_rotations_total", (("source", "server"),)): 1.0,
        ("sglang_matcher_truncations_total", (("source", "server"),)): 1.0,
        ("sglang_matcher_lines_truncated_total", (("source", "server"),)): 2.0,
        ("sglang_matcher_checkpoint_writes_total", ()): 1.0,
        ("sglang_matcher_checkpoint_failures_total", ()): 1.0,
        ("sglang_matcher_heartbeat_timestamp_seconds", ()): 1700000000.0,
        ("sglang_matcher_last_checkpoint_success_timestamp_seconds", ()): 1700000000.0,
        ("sglang_matcher_reloads_total", (("result", "ok"),)): 1.0,
        ("sglang_matcher_reloads_total", (("result", "failed"),)): 1.0,
        ("sglang_matcher_events_suppressed_total", ()): 7.0,
        ("sglang_matcher_events_requests_refused_total", (("reason", "forbidden"),)): 1.0,
        ("sglang_matcher_events_requests_refused_total", (("reason", "busy"),)): 0.0,
        ("sglang_matcher_errors_total", (("error_type", "PermissionError"), ("stage", "read"))): 1.0,
        ("sglang_matcher_errors_total", (("error_type", "other"), ("stage", "frame"))): 1.0,
        ("sglang_matcher_errors_total", (("error_type", "ValueError"), ("stage", "other"))): 1.0,
        ("sglang_matcher_event_latency_seconds_count", ()): 1.0,
        ("sglang_matcher_event_latency_seconds_sum", ()): 0.3,
    }
    assert calls(log) == [
        ("info", "file_rotated", {"source": "server", "path": "/var/log/sglang/server.log"}),
        ("warning", "file_truncated", {"source": "server"}),
        ("warning", "line_truncated", {"source": "server", "lines": 2}),
        ("error", "checkpoint_failed", {"detail": "cannot write: token=***", "failures": 1}),
        ("info", "reloaded", {"catalog_version": "v2"}),
        ("error", "reload_failed", {"detail": "bad regex"}),
        ("error", "pipeline_error", {"stage": "read", "error_type": "PermissionError",
                                     "detail": "denied"}),
        ("error", "pipeline_error", {"stage": "frame", "error_type": "WeirdCustomError"}),
        ("error", "pipeline_error", {"stage": "nonsense-stage", "error_type": "ValueError"}),
    ]


def test_telemetry_bounds_sources():
    """Beyond 64 distinct source names, lines are counted under `other`."""
    registry = CollectorRegistry()
    tel, _ = telemetry(registry)
    for i in range(70):
        tel.lines(f"s{i}", 1, 10)
    tel.lines("s0", 1, 10)
    got = {s.labels["source"]: s.value for m in registry.collect() for s in m.samples
           if s.name == "sglang_matcher_lines_total"}
    assert got == {**{f"s{i}": 1.0 for i in range(64)}, "s0": 2.0, "other": 6.0}


def test_telemetry_logs_floods_at_most_once_per_interval_and_counts_all():
    """1000 webhook drops: every one counted, two log lines, the second saying how many were held."""
    registry = CollectorRegistry()
    now = [0.0]
    tel, log = telemetry(registry, quiet_for=10.0, clock=lambda: now[0])
    webhook = tel.delivery("webhook")
    for _ in range(1000):
        webhook.dropped(1)
    now[0] = 11.0
    webhook.dropped(1)
    assert registry.get_sample_value("sglang_matcher_webhook_dropped_total", {"cluster": "c1"}) == 1001
    assert calls(log) == [("warning", "webhook_dropped", {"events": 1}),
                          ("warning", "webhook_dropped", {"events": 1, "held_back": 999})]


def test_notices_are_typed_and_pass_the_rate_limit_and_redaction_processors():
    """A typed notice is logged at its own level, a file source's too;
    every field is redacted once (a pattern matching its own mask tells one pass from two); a
    quiet notice is held back within `quiet_for`, then says how many were."""
    registry = CollectorRegistry()
    now = [0.0]
    log = CapturingLogger()
    tel = Telemetry(registry, log, redactor=Redactor([r"(?P<keep>pin=)(?P<secret>\S)"]),
                    quiet_for=10.0, clock=lambda: now[0])
    tel.notice(selflog.SETTING_NOT_RELOADED, setting="metrics_addr", hint="pin=4711")
    tel.notice(selflog.FILE_UNREADABLE, path="/var/log/x.log")
    quiet = selflog.Notice("test_flood", "error", quiet=True)
    for _ in range(3):
        tel.notice(quiet, n=1)
    now[0] = 10.5
    tel.notice(quiet, n=1)
    tel.use_redactor(Redactor())  # a reload's patterns, from the next entry on
    tel.notice(selflog.SETTING_NOT_RELOADED, hint="pin=4711")
    assert calls(log) == [
        ("warning", "setting_not_reloaded", {"setting": "metrics_addr", "hint": "pin=***711"}),
        ("warning", "file_unreadable", {"path": "/var/log/x.log"}),
        ("error", "test_flood", {"n": 1}),
        ("error", "test_flood", {"n": 1, "held_back": 2}),
        ("warning", "setting_not_reloaded", {"hint": "pin=4711"}),
    ]


def test_no_series_has_an_empty_error_class_after_a_real_log():
    """Issue 16: a record without `errorClass` made `error_class=""` a label value. The real
    launch log's `Ignore import error when loading …` lines (a curated record with no class)
    and its ValueError: every series is labelled with a class, the classless one with
    `UnclassifiedError`, and so is every event."""
    catalog = load_catalog()
    pipeline = Pipeline(Engine(catalog.records), catalog_version=catalog.version)
    data = (FIXTURES / "sglang/launch/unsupported_architecture.log").read_bytes()
    events = pipeline.feed(Chunk(data, "launch.log", len(data)), 0.0).events + pipeline.finish(0.0)
    assert {e.pattern_id for e in events} >= {"01da696bae8096d9"}
    assert all(e.error_class for e in events)
    registry = CollectorRegistry()
    MetricsSink(registry, catalog=catalog, build_version="0.1.0",
                catalog_version=catalog.version).accept(events)
    labels = [s.labels for m in registry.collect() for s in m.samples if "error_class" in s.labels]
    assert labels and all(x["error_class"] for x in labels)
    counted = {(s.labels["pattern_id"], s.labels["error_class"], s.labels["severity"])
               for m in registry.collect() for s in m.samples if s.name == ERRORS and s.value}
    assert ("01da696bae8096d9", "UnclassifiedError", "info") in counted


def test_checkpoint_failures_are_logged_once_a_minute_with_a_count() -> None:
    """A read-only state dir fails every turn (once a second): one log line a minute says how
    many failed since the previous one; the counter counts every failure; a final save at
    shutdown is always logged; a success after held-back failures says they ended."""
    registry = CollectorRegistry()
    now = [1000.0]
    tel, log = telemetry(registry, clock=lambda: now[0])
    for _ in range(150):  # 150 turns, one a second
        tel.checkpoint_failed("write", detail="cannot write /state: Read-only file system")
        now[0] += 1.0
    logged = [(e, f.get("failures")) for _, e, f in calls(log)]
    assert logged == [("checkpoint_failed", 1), ("checkpoint_failed", 60),
                      ("checkpoint_failed", 60)]
    assert registry.get_sample_value("sglang_matcher_checkpoint_failures_total",
                                     {"cluster": "c1"}) == 150
    tel.checkpoint_failed("write", detail="cannot write", final=True)  # 29 held + this one
    assert calls(log)[-1][2]["failures"] == 30 and calls(log)[-1][2]["final"] is True
    tel.checkpoint_failed("write", detail="cannot write")  # within the minute: held
    assert len(calls(log)) == 4
    tel.checkpoint_written()
    assert calls(log)[-1][:2] == ("warning", "checkpoint_recovered")
    assert calls(log)[-1][2]["failures"] == 1
    tel.checkpoint_failed("write", detail="again")  # a new run of failures logs at once
    assert calls(log)[-1][1:] == ("checkpoint_failed", {"detail": "again", "failures": 1})


# -- sglang_error_pattern_info: what an alert says ---------------------------------------------

INFO = "sglang_error_pattern_info"


def infos(registry: CollectorRegistry) -> dict[str, dict[str, str]]:
    """Every sglang_error_pattern_info series as pattern_id → its labels (one per pattern)."""
    out: dict[str, dict[str, str]] = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == INFO:
                assert s.value == 1.0 and s.labels["pattern_id"] not in out
                out[s.labels["pattern_id"]] = dict(s.labels)
    return out


def test_pattern_info_only_for_patterns_that_fired_one_series_each():
    """No info series before a failure (not even for curated records at 0); after failures, one
    per pattern however often and at whatever severity it fired; the class never empty; an
    unknown error or a foreign pattern id makes none."""
    registry = CollectorRegistry()
    metrics = sink(registry)
    assert infos(registry) == {}
    metrics.accept([event("cur-a"), event("cur-a", quiet=True), event("cur-b", severity="info"),
                    event("gen-a"), event("gen-a", severity="warning"),
                    event(None, kind="sglang_unknown_error", error_class="WeirdError"),
                    event("not-loaded")])
    got = infos(registry)
    assert sorted(got) == ["cur-a", "cur-b", "gen-a"]
    assert {k: (v["error_class"], v["severity"], v["cluster"]) for k, v in got.items()} == {
        "cur-a": ("ValueError", "error", "c1"), "cur-b": ("UnclassifiedError", "warning", "c1"),
        "gen-a": ("ValueError", "error", "c1")}
    # A record with no documentation, solution or link still says something, and links to https.
    assert got["cur-a"]["summary"] == "pattern cur-a" and got["cur-a"]["fix"] == ""
    assert got["cur-a"]["doc_url"] == (
        'https://github.com/sgl-project/sglang/issues?q=is%3Aissue+%22ValueError%22')


def test_pattern_info_words_are_the_records_short_and_redacted():
    """summary: the documentation's first sentence (a generated record: its message), cut at a
    word with …; fix: the first solution without its parenthesised link, else the first way out;
    doc_url: the event's release link, else the record's, else an issue search of the message's
    longest literal part; secrets in any of them masked; a pod address never a link."""
    from matcher.catalog.schema import FixAction

    secret = "hf_" + "a" * 30
    long_doc = ("The scheduler died while loading " + "very " * 40 + "large weights. "
                "Second sentence.")
    cur = dataclasses.replace(
        record("cur-w"), documentation=f"Token {secret} was refused, e.g. Bad. More here.",
        solutions=("Pass a valid token (see https://example.invalid/x)", "Or another"),
        github_url="https://github.com/sgl-project/sglang/blob/v0.5.23/a.py#L3")
    gen = dataclasses.replace(
        record("gen-w", layer="generated"), documentation="`f()` in a.py:3 raises ValueError",
        error_message="bad value {x} for --foo: use {y}",
        fix_actions=((FixAction("remove", flag="--foo"), FixAction("add", flag="--bar")),),
        github_url="http://10.0.0.7:9464/events")
    long = dataclasses.replace(record("long-w"), documentation=long_doc,
                               solutions=("x " * 150,))
    registry = CollectorRegistry()
    metrics = sink(registry, catalog=Catalog((cur, gen, long)),
                   redactor=Redactor([r"(?P<secret>refused)"]))
    versioned = "https://github.com/sgl-project/sglang/blob/v0.5.20/a.py#L9"
    metrics.accept([event("cur-w", remediation={"url": versioned}),
                    event("gen-w", remediation={"url": "http://10.0.0.7:9464/x"}),
                    event("long-w")])
    got = infos(registry)
    assert (got["cur-w"]["summary"], got["cur-w"]["fix"], got["cur-w"]["doc_url"]) == (
        "Token *** was ***, e.g. Bad.", "Pass a valid token", versioned)
    assert (got["gen-w"]["summary"], got["gen-w"]["fix"], got["gen-w"]["doc_url"]) == (
        "bad value {x} for --foo: use {y}", "remove --foo; add --bar",
        "https://github.com/sgl-project/sglang/issues?q=is%3Aissue+%22for+--foo%3A+use%22")
    summary, fix = got["long-w"]["summary"], got["long-w"]["fix"]
    assert summary.startswith("The scheduler died while loading very") and summary.endswith("…")
    assert len(summary) <= 120 and len(fix) <= 200 and fix.endswith("…")
    assert secret not in generate_latest(registry).decode()


def test_pattern_info_is_capped_and_a_reload_rewrites_not_adds():
    """At most `pattern_info_limit` patterns get one (the counter counts the rest all the same);
    a reload that changes a fired record's words replaces its series."""
    registry = CollectorRegistry()
    metrics = sink(registry, pattern_info_limit=2)
    metrics.accept([event("cur-a"), event("gen-a"), event("user-a", severity="critical")])
    assert sorted(infos(registry)) == ["cur-a", "gen-a"]
    assert errors(registry)[("user-a", "torch.OutOfMemoryError", "critical")] == 1.0
    changed = dataclasses.replace(record("cur-a"), documentation="Now documented.")
    metrics.reload(Catalog((changed,), version="v2"))
    got = infos(registry)
    assert sorted(got) == ["cur-a", "gen-a"] and got["cur-a"]["summary"] == "Now documented."


def test_pattern_info_of_a_real_failure_names_it_and_its_fix():
    """The real int8-mamba log through the built-in catalog: the seed's series says what
    happened, the first fix, and links to its source."""
    catalog = load_catalog()
    pipeline = Pipeline(Engine(catalog.records), catalog_version=catalog.version)
    data = (Path(__file__).resolve().parents[1] / "examples/logs/int8-mamba-radix-cache.log"
            ).read_bytes()
    events = pipeline.feed(Chunk(data, "server.log", len(data)), 0.0).events + pipeline.finish(0.0)
    registry = CollectorRegistry()
    MetricsSink(registry, catalog=catalog, build_version="0.1.0",
                catalog_version=catalog.version).accept(events)
    seed = infos(registry)["4e2cdd4d6209ebbd"]
    assert seed == {
        "pattern_id": "4e2cdd4d6209ebbd", "error_class": "ValueError", "severity": "error",
        "summary": "--enable-int8-mamba-checkpoint only works with the built-in Mamba radix "
                   "cache.",
        "fix": "Remove --radix-cache-backend from the launch command so the built-in mamba "
               "radix cache is used",
        "doc_url": "https://github.com/sgl-project/sglang/blob/0132848349585cfe6aae51c4941cbae8"
                   "72505f8a/python/sglang/srt/server_args.py#L6800-L6836"}


def test_a_fresh_start_is_not_a_checkpoint_failure() -> None:
    """Before the first save (which waits while the full catalog compiles) the last-success
    time is the start, not 0: `time() - 0 > 300` fired SglangMatcherCheckpointFailing on every
    start that compiled (found by the Alertmanager test)."""
    registry = CollectorRegistry()
    telemetry(registry, wall=lambda: 1_700_000_123.0)
    assert registry.get_sample_value("sglang_matcher_last_checkpoint_success_timestamp_seconds",
                                     {"cluster": "c1"}) == 1_700_000_123.0
