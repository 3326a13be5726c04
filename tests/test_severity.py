"""Severity that means something (issue 16, part 5): what `event`, `severity` and `error_class` say.

Every log line here is read from a real sglang log in the repository (tests/fixtures/,
examples/logs/), by file and line number; only catalog records are written for a test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from watch_harness import wait_for

from matcher.aggregate import Aggregator, event_class, log_level
from matcher.catalog import Catalog, load_catalog
from matcher.catalog.load import validate_record
from matcher.engine import Engine
from matcher.framing import Framer
from matcher.pipeline import Pipeline
from matcher.redact import Redactor
from matcher.report import exit_code, render
from matcher.sinks.events import event_dict
from matcher.sinks.metrics import MetricsSink
from matcher.types import UNCLASSIFIED, Chunk, Line, Record

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
# A real launch of sglang 0.5.23 whose model registry skipped four modules
# (`Ignore import error when loading sglang.srt.models.…`, lines 31-34) before the scheduler
# died of the unknown architecture (a ValueError).
IMPORT_LOG = REPO / "examples" / "logs" / "scheduler-crash-unknown-architecture.log"
IMPORT_IGNORED = "01da696bae8096d9"  # its curated record: severity "info", no errorClass
NCCL_LOG = FIXTURES / "field" / "distributed-build" / "5594-nccl-socket-connect-abort.log"
VLLM_LOG = FIXTURES / "sglang" / "releases-launch" / "0.4.6.post1" / "dp_attention_dp_size_1.log"


def real_line(path: Path, lineno: int) -> str:
    return path.read_text(encoding="utf-8").splitlines()[lineno - 1]


def framed(text: str) -> Record:
    framer = Framer()
    records = framer.feed(Line(text, "s", 0, len(text) + 1)) + framer.finish()
    assert len(records) == 1
    return records[0]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def engine(catalog):
    return Engine(catalog.records)


def scan_events(engine, path: Path, catalog) -> list:
    pipeline = Pipeline(engine, catalog_version=catalog.version)
    data = path.read_bytes()
    return pipeline.feed(Chunk(data, str(path), len(data)), 0.0).events + pipeline.finish(0.0)


# -- what the log says: real level words -------------------------------------------------------

@pytest.mark.parametrize(("path", "lineno", "level"), [
    # vLLM's logger in an sglang 0.4.6 launch
    (VLLM_LOG, 3, "info"),
    (VLLM_LOG, 5, "warning"),
    # uvicorn's access log behind sglang's prefix
    (FIXTURES / "field/distributed-build/14193-watchdog-illegal-memory-access.log", 2, "info"),
    # NCCL's own levels
    (NCCL_LOG, 1, "warning"),
    (FIXTURES / "field/distributed-build/10216-two-node-watchdog-failure-detected.log", 1, "info"),
    # a ray worker's logging.basicConfig format behind ray's `(WorkerDict pid=…)`
    (FIXTURES / "field/gpu/14092-memory-saver-cu-mem-create-oom.log", 2, "warning"),
    # sglang's verbose format, and a named logger
    (FIXTURES / "field/model-runtime/8931-swa-radix-sanity-check.log", 1, "error"),
    (FIXTURES / "field/distributed-build/13948-sgl-kernel-common-ops-undefined-symbol.log", 2,
     "critical"),
    # a level a wrapper gives: c10's glog letter, FastChat's logger (taken off as wrappers)
    (FIXTURES / "field/projects/gpustack-3383-diffusion-tp2-tcpstore-recv-failed.log", 1,
     "warning"),
    (FIXTURES / "field/projects/167-fastchat-worker-no-module-zmq.log", 1, "error"),
    # sglang's own format carries no level
    (IMPORT_LOG, 31, None),
    (IMPORT_LOG, 35, None),
])
def test_log_level_reads_the_level_words_real_writers_put_on_a_line(path, lineno, level):
    assert log_level(framed(real_line(path, lineno))) == level


# -- error_class: never empty --------------------------------------------------------------------

def test_a_record_without_a_class_gives_the_placeholder_not_an_empty_class(engine, catalog):
    """Issue 16: `Ignore import error when loading …` came out with `"error_class": ""`."""
    events = scan_events(engine, IMPORT_LOG, catalog)
    ignored = [e for e in events if e.pattern_id == IMPORT_IGNORED]
    assert len(ignored) == 4
    assert {e.error_class for e in ignored} == {UNCLASSIFIED} == {"UnclassifiedError"}
    assert all(e.error_class for e in events)


def test_classless_records_on_lines_that_show_no_class_get_the_placeholder(engine, catalog):
    """The real NCCL log: `NCCL WARN socketStartConnect: … failed` (a plain line) and the
    `Scheduler hit an exception:` traceback, cut before its exception line, are known by
    records with no class, and the log shows none either: both carry the placeholder (they
    came out with `"error_class": ""`)."""
    events = scan_events(engine, NCCL_LOG, catalog)
    by_line = {e.lineno: e for e in events}
    assert set(by_line) == {1, 20}
    assert by_line[20].message == "Scheduler hit an exception:"
    assert by_line[20].traceback is not None and "Error" not in by_line[20].traceback
    for e in events:
        assert catalog.by_id(e.pattern_id).error_class is None
        assert e.error_class == UNCLASSIFIED


def test_every_event_of_every_real_log_has_a_class(engine, catalog):
    logs = sorted(FIXTURES.rglob("*.log")) + sorted((REPO / "examples" / "logs").glob("*.log"))
    assert len(logs) > 100
    empty = [(p.name, e.pattern_id or e.fingerprint) for p in logs
             for e in scan_events(engine, p, catalog) if not e.error_class]
    assert empty == []


def test_an_unknown_exception_without_a_class_gets_the_placeholder():
    record = framed(real_line(IMPORT_LOG, 31))
    assert event_class(None, record) == UNCLASSIFIED


# -- severity: the kind of event follows it --------------------------------------------------------

def test_an_info_record_is_a_warning_event_not_an_sglang_error(engine, catalog):
    """Issue 16: the info-level `Ignore import error when loading …` was an `sglang_error` while
    `scan` counted it among the warnings. It is an `sglang_warning` of the record's severity;
    the crash that followed stays the one error."""
    events = scan_events(engine, IMPORT_LOG, catalog)
    kinds = Counter((e.event, e.severity) for e in events)
    assert kinds == {("sglang_warning", "info"): 4, ("sglang_error", "error"): 1}
    assert all(e.event == "sglang_warning" for e in events if e.pattern_id == IMPORT_IGNORED)


def test_the_text_report_counts_what_the_events_say(engine, catalog):
    """Four info events of one record are one entry (`seen 4×`): the summary counts the
    entries it lists."""
    dicts = [event_dict(e, Redactor()) for e in scan_events(engine, IMPORT_LOG, catalog)]
    text = render(dicts, inputs=["x.log"], lines=76)
    assert "1 known error, 0 unknown exceptions, 1 warning " in text and "seen 4×" in text
    assert f"INFO  {UNCLASSIFIED}  pattern {IMPORT_IGNORED}" in text
    assert exit_code(dicts) == 1
    assert exit_code([d for d in dicts if d["event"] == "sglang_warning"]) == 0


def test_a_line_the_log_marks_warn_stays_an_error_when_its_curated_record_says_so(engine, catalog):
    """`NCCL WARN socketStartConnect: … failed` is how NCCL prints a fatal connection error; its
    curated record says critical, and a person's record is believed over the log's level."""
    first = min(scan_events(engine, NCCL_LOG, catalog), key=lambda e: e.offset)
    assert log_level(framed(real_line(NCCL_LOG, 1))) == "warning"
    assert catalog.by_id(first.pattern_id).layer == "curated"
    assert (first.event, first.severity) == ("sglang_error", "critical")


def _one_record_engine(layer: str) -> Engine:
    # A record (written for the test) of the message in vLLM's real WARNING line.
    raw = {"id": f"vllm-c-{layer}", "messagePattern": r"Failed to import from vllm\._C with",
           "severity": "error"}
    return Engine([validate_record(raw, "t.json", 0, layer)])


def test_a_generated_records_error_is_the_logs_warning_when_the_log_says_warning():
    """A generated record's severity is "error" for every raise in sglang's source; the real
    line shows the message at WARNING (vLLM caught the ImportError and went on): the event
    is an `sglang_warning` of severity warning. The same line under a curated record that says
    error is an `sglang_error`."""
    line = real_line(VLLM_LOG, 5)
    assert line.startswith("WARNING ")
    data = (line + "\n").encode()
    kinds = {}
    counted = {}
    for layer in ("generated", "curated"):
        engine = _one_record_engine(layer)
        pipeline = Pipeline(engine)
        events = pipeline.feed(Chunk(data, "s", len(data))).events + pipeline.finish()
        assert len(events) == 1
        kinds[layer] = (events[0].event, events[0].severity, events[0].error_class)
        registry = CollectorRegistry()
        MetricsSink(registry, catalog=Catalog(tuple(engine.records), (), "t", ()), build_version="t",
                    catalog_version="t").accept(events)
        counted[layer] = {s.labels["severity"] for m in registry.collect() for s in m.samples
                          if s.name == "sglang_log_errors_total" and s.value}
    assert kinds == {"generated": ("sglang_warning", "warning", UNCLASSIFIED),
                     "curated": ("sglang_error", "error", UNCLASSIFIED)}
    # The counter says what the event says: the shipped alert (severity=~"critical|error|…")
    # does not page for an error the log itself called a warning, unless a curated record says.
    assert counted == {"generated": {"warning"}, "curated": {"error"}}


def test_the_aggregator_alone_applies_the_same_rule():
    """Nothing outside the aggregator decides an event's kind: the daemon and scan both get it."""
    line = real_line(IMPORT_LOG, 31)
    record = framed(line)
    engine = Engine([validate_record(
        {"id": "ign", "messagePattern": r"Ignore import error when loading (?P<module>\S+):",
         "severity": "info"}, "t.json", 0, "user")])
    match = engine.match_all(record)[0]
    aggregator = Aggregator()
    (event,) = aggregator.add(record, match) + aggregator.finish()
    assert (event.event, event.severity, event.error_class) == (
        "sglang_warning", "info", UNCLASSIFIED)


# -- scan and watch agree ------------------------------------------------------------------------

def _kinds(events: list[dict]) -> Counter:
    return Counter((e["event"], e["pattern_id"], e["severity"], e["error_class"],
                    json.dumps(e["captures"], sort_keys=True)) for e in events)


def test_scan_and_watch_emit_the_same_kinds_and_severities_for_a_real_log(tmp_path):
    """Both read the real launch log through `Pipeline`: the same events, kinds, severities and
    classes (watch prints every repeat here: `SGLANG_MATCHER_REPEAT_INTERVAL=0`)."""
    log = tmp_path / "sglang.log"
    log.write_bytes(IMPORT_LOG.read_bytes())
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SGLANG_MATCHER_REPEAT_INTERVAL": "0"}
    scanned = subprocess.run([sys.executable, "-m", "matcher", "scan", "--format", "json",
                              str(log)], capture_output=True, text=True, cwd=REPO, env=env,
                             timeout=600)
    assert scanned.returncode == 1, scanned.stderr
    from_scan = [json.loads(x) for x in scanned.stdout.splitlines() if x.strip()]
    out, err = tmp_path / "watch.out", tmp_path / "watch.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "matcher", "watch", "--state-dir", str(tmp_path / "state"),
             "--from-beginning", "--poll-interval", "0.05", str(log)],
            stdout=o, stderr=e, cwd=REPO, env=env)
    try:
        def printed() -> list[dict]:
            text = out.read_text()
            return [json.loads(x) for x in text[: text.rfind("\n") + 1].splitlines() if x.strip()]

        # Starting compiles the whole catalog: minutes on a cold cache and a busy machine.
        wait_for(lambda: len(printed()) >= len(from_scan) or proc.poll() is not None, 600)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, err.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    from_watch = printed()
    assert _kinds(from_watch) == _kinds(from_scan)
    assert Counter((e["event"], e["severity"]) for e in from_watch) == {
        ("sglang_warning", "info"): 4, ("sglang_error", "error"): 1}
    assert all(e["error_class"] for e in from_watch)
