"""The sglang-router generator (`matcher.catalog.router`) and its records, on real text.

Real inputs: the release sdists from PyPI (fetched when the test runs, skipped offline), the
logs the real sglang-router wheels 0.1.2, 0.1.4, 0.2.4 and 0.3.2 wrote when started against a
worker that does not answer (`tests/fixtures/router/README.md` says how they were made), and the
panic lines rustc 1.95 prints for `panic_columns.rs`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import regex

from matcher.catalog import load_catalog
from matcher.catalog.router import (
    QUIET_LEVELS,
    extract,
    fetch_sdists,
    frame_pattern,
    message_pattern,
    read_sdist,
    remedy_for,
)
from matcher.catalog.rust_source import Hole, format_parts, lex, sites
from matcher.commands.scan import cmd_scan

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "router"
GENERATED = ROOT / "patterns" / "sglang" / "generated" / "router.jsonl"


@pytest.fixture(scope="module")
def shipped():
    return load_catalog(builtin=False, user_paths=[GENERATED])


def scan(catalog, path: Path) -> list[dict]:
    out = io.StringIO()
    cmd_scan([str(path)], "json", catalog, out, err=io.StringIO())
    return [json.loads(x) for x in out.getvalue().splitlines()]


def by_id(catalog, rid: str):
    return catalog.by_id(rid)


# --- the Rust reader ---------------------------------------------------------------------------

def test_panic_sites_have_the_line_and_column_rustc_prints():
    """rustc 1.95 compiled `panic_columns.rs` and ran it three ways: each `panicked at` line
    names a site the reader found, at the same line and column (a method's name for `.expect`
    and `.unwrap()`, even when the call is on a line of its own)."""
    found = {(s.line, s.col): s for s in sites((FIXTURES / "panic_columns.rs").read_text(),
                                               "panic_columns.rs")}
    printed = regex.findall(r"panicked at m\.rs:(\d+):(\d+):",
                            (FIXTURES / "panic_columns.txt").read_text())
    assert len(printed) == 3
    for line, col in printed:
        site = found[(int(line), int(col))]
        assert site.kind in ("panic", "frame")
    assert found[(5, 44)].template == "Failed to create router"
    assert found[(8, 10)].macro == "unwrap"


def test_lexer_reads_raw_strings_escapes_lifetimes_and_nested_comments():
    text = 'fn f<\'a>(x: &\'a str) { /* a /* nested */ comment */ let c = \'"\';\n' \
           '  error!(r#"raw "quoted" {}"#, x); warn!("tab\\tand \\u{41} and {{braces}}"); }'
    toks = lex(text)
    strings = [t.text for t in toks if t.kind == "str"]
    assert strings == ['raw "quoted" {}', "tab\tand A and {{braces}}"]
    found = sites(text, "src/x.rs")
    assert [s.template for s in found] == ['raw "quoted" {x}', "tab\tand A and {{braces}}"]


def test_format_strings_become_holes_named_after_their_arguments():
    toks = lex('f(worker.url(), e, n = 3)')
    args = [[toks[2], toks[3], toks[4], toks[5], toks[6]], [toks[8]],
            [toks[10], toks[11], toks[12]]]
    parts = format_parts("Worker {} failed: {:?} after {n} tries, {0}", args)
    assert parts == ("Worker ", Hole("worker.url()"), " failed: ", Hole("e", "?"), " after ",
                     Hole("3"), " tries, ", Hole("worker.url()"))
    pattern = message_pattern(parts, anchored=False)
    assert pattern.startswith(QUIET_LEVELS)
    m = regex.search(pattern, "Worker http://w:1 failed: Timeout after 3 tries, http://w:1")
    assert m and m.group("url") == "http://w:1" and m.group("e") == "Timeout"


def test_test_modules_are_left_out():
    text = ('fn serve() { error!("Failed to bind the listener on {}", addr); }\n'
            '#[cfg(test)]\nmod tests {\n  #[test]\n  fn t() { panic!("this is a test panic"); }\n}\n'
            '#[tokio::test]\nasync fn u() { warn!("only in a test function"); }\n')
    assert [s.template for s in sites(text, "src/server.rs")] == [
        "Failed to bind the listener on {addr}"]


def test_errors_built_in_err_and_struct_variants_are_read():
    text = ('fn f() -> Result<(), E> {\n'
            '  return Err(WorkflowError::StepFailed {\n'
            '    step_id: StepId::new("detect"),\n'
            '    message: format!("Both HTTP and gRPC health checks failed for {}", url),\n'
            '  });\n'
            '  let x = y.map_err(|e| format!("Failed to parse server info: {e}"))?;\n'
            '  Err(pyo3::exceptions::PyValueError::new_err("policy must be one of a, b"))\n}\n')
    found = {s.template: s for s in sites(text, "src/x.rs") if s.kind == "error"}
    assert set(found) == {"Both HTTP and gRPC health checks failed for {url}",
                          "Failed to parse server info: {e}", "policy must be one of a, b"}
    assert found["policy must be one of a, b"].py_class == "ValueError"


def test_frame_pattern_takes_any_build_path():
    p = frame_pattern("src/server.rs", [(25, 27)])
    assert regex.search(p, "thread '<unnamed>' panicked at src/server.rs:25:27:")
    assert regex.search(p, "thread 'main' (7) panicked at /build/sgl-router/src/server.rs:25:27:")
    assert not regex.search(p, "thread 'main' panicked at src/server.rs:25:270:")


# --- the generator on real sdists --------------------------------------------------------------

def _sdist(version: str, tmp: Path) -> Path:
    try:
        [path] = fetch_sdists([version], tmp)
    except OSError as e:
        pytest.skip(f"cannot fetch sglang-router {version}'s sdist from PyPI: {e}")
    return path


def test_generator_on_real_sdists_matches_what_those_releases_printed(tmp_path):
    """Two releases' sdists → records; the start-up timeout sglang-router 0.1.4 logged and
    raised (its real log) is one record with the flag to raise, attributed to both releases
    that hold it."""
    paths = [_sdist(v, tmp_path) for v in ("0.1.3", "0.1.4")]
    releases = [r for r in map(read_sdist, paths) if r is not None]
    assert [r.version for r in releases] == ["0.1.3", "0.1.4"]
    assert "worker-startup-timeout-secs" in releases[1].flags
    result = extract(releases)
    timeout = [r for r in result.records if r["errorMessage"] and r["errorMessage"].startswith(
        "Timeout {timeout_secs}s waiting for workers {worker_urls:?} to become healthy")]
    assert [r["errorType"] for r in timeout] == ["log"]
    [record] = timeout
    assert record["sourcePackage"] == "sglang-router"
    assert record["generator"] == "matcher.catalog.router"
    assert "--worker-startup-timeout-secs" in record["solutions"][0]
    log = (FIXTURES / "sglang-router-0.1.4-unreachable-worker.log").read_text()
    line = next(x for x in log.splitlines() if "- ERROR - Timeout 3s" in x)
    assert regex.search(record["messagePattern"], line)


# --- the shipped records on the real runs ------------------------------------------------------

def test_every_shipped_record_is_attributed(shipped):
    assert len(shipped.records) > 500
    for r in shipped.records:
        assert r.source_package == "sglang-router"
        assert r.generator == "matcher.catalog.router"
        assert r.source_versions


def test_the_0_1_2_panic_is_known_by_its_frame_and_its_cause(shipped):
    """sglang-router 0.1.2 started against a dead worker: after 300 s the router thread panics
    at src/server.rs:25:27 (`panic!("Failed to create router: {}", error)`), which pyo3 raises
    in Python as `PanicException` — the failure of sglang #2778's title. The panic's header and
    message are one record (`framing`): its message is recognized by the error it carries, with
    the flag to raise; the panic site's own record takes the header, the frame."""
    path = FIXTURES / "sglang-router-0.1.2-unreachable-worker.log"
    events = scan(shipped, path)
    cause = [e for e in events if e["message"].startswith("Failed to create router: Timeout")]
    assert cause
    record = shipped.by_id(cause[0]["pattern_id"])
    assert record.error_message == "Timeout {timeout_secs}s waiting for workers to become healthy"
    assert "--worker-startup-timeout-secs" in record.solutions[0]
    header = next(x for x in path.read_text().splitlines() if " panicked at " in x)
    [panic] = [r for r in shipped.records if r.error_message == "Failed to create router: {error}"]
    assert regex.search(panic.message_pattern, header)
    assert regex.search(panic.message_pattern, "Failed to create router: Timeout 300s waiting")


@pytest.mark.parametrize("version", ["0.2.4", "0.3.2"])
def test_a_worker_that_does_not_answer_is_one_failure_with_a_fix(shipped, version):
    """Real runs of 0.2.4 and 0.3.2: the WARN lines of the failed connection step are
    recognized by the error the step returned (`Both HTTP and gRPC health checks failed for
    …`), with the worker's URL captured and a fix; INFO lines are not events."""
    events = scan(shipped, FIXTURES / f"sglang-router-{version}-unreachable-worker.log")
    assert events
    both = [e for e in events if e["pattern_id"] and "Both HTTP and gRPC health checks"
            in (shipped.by_id(e["pattern_id"]).error_message or "")]
    assert both and both[0]["captures"]["url"] == "http://127.0.0.1:1"
    assert shipped.by_id(both[0]["pattern_id"]).solutions
    for e in events:
        assert " INFO " not in e["message"]


def test_remedies_name_what_to_do_not_where_to_look():
    r = remedy_for("Timeout 300s waiting for workers to become healthy")
    assert r is not None and r.name == "startup-timeout"
    assert remedy_for("Failed to serialize membership state: ") is None


FIELD = ROOT / "tests" / "fixtures" / "field"


def test_a_client_told_no_available_workers_gets_the_routers_record(shipped):
    """THUDM/slime#1328 (train): slime's rollout retries a 503 whose body is the router's
    `No available workers (all circuits open or unhealthy)` response."""
    path = FIELD / "projects" / "slime-1328-router-no-available-workers.log"
    events = scan(shipped, path)
    assert events
    record = shipped.by_id(events[0]["pattern_id"])
    assert record.error_message == "No available workers (all circuits open or unhealthy)"
    assert record.solutions


def test_the_python_launchers_error_is_a_record(shipped):
    """sglang#2796 (train): `launch_router` without `--worker-urls` on sglang-router 0.1.1;
    the launcher's `logger.error(f"Error starting router: {e}")`."""
    path = FIELD / "sglang-b" / "2796-launch-router-without-worker-urls.log"
    [event] = scan(shipped, path)
    assert shipped.by_id(event["pattern_id"]).error_message == "Error starting router: {e}"
    assert event["captures"]["e"].startswith("argument 'worker_urls'")


def test_remedies_tell_the_breaker_the_queue_and_a_workers_failure_apart():
    """The words of the router's own messages choose the way out: a circuit breaker that opened
    is not an unreachable worker, the concurrency queue's rejection is load shedding, and a
    worker's error status is that worker's to explain."""
    assert remedy_for("No available prefill workers (all circuits open or unhealthy)").name \
        == "circuit-open"
    assert remedy_for("Queue returned error status: ").name == "rate-limit"
    assert remedy_for("Decode server  returned error status: ").name == "worker-error-status"
    assert remedy_for("Failed to select PD pair error=").name == "no-workers"
    assert remedy_for("Rust Router is not installed").name == "not-installed"


def test_a_decode_servers_error_status_points_at_that_servers_log(shipped):
    """sglang#10001 (train): the PD router's decode leg got a 500 (0.1.x tracing format); the
    cause was in the decode server's log (Mooncake's transfer failing)."""
    path = FIELD / "sglang-h" / "10001-pd-router-decode-server-error-status.log"
    events = scan(shipped, path)
    first = shipped.by_id(events[0]["pattern_id"])
    assert first.error_message.startswith("Decode server returned error status")
    assert events[0]["captures"]["url"] == "http://10.160.1.22:50000"
    assert "its own log at that moment" in first.solutions[0]


SMG = ROOT / "patterns" / "sglang" / "generated" / "smg.jsonl"


def test_smg_busy_port_is_smgs_record_with_a_fix():
    """A real run of smg 1.13.0 (`smg launch`) on a port another process holds: the error
    value `Failed to bind the HTTP listener on {addr}: {e}` (model_gateway/src/server.rs),
    printed by the launcher and raised as RuntimeError, is smg's record with the port fix;
    the INFO and WARN start-up lines are not events."""
    catalog = load_catalog(builtin=False, user_paths=[GENERATED, SMG])
    events = scan(catalog, FIXTURES / "smg-1.13.0-port-in-use.log")
    assert events
    bound = [catalog.by_id(e["pattern_id"]) for e in events if e["pattern_id"]]
    assert bound and all(r.error_message == "Failed to bind the HTTP listener on {addr}: {e}"
                         for r in bound)
    assert bound[0].source_package == "smg"
    assert any("--port" in s for s in bound[0].solutions)
    assert events[0]["captures"]["addr"] == "127.0.0.1:39123"


def test_smg_records_name_smg_and_their_sites():
    """smg's records say `smg`, its releases and its repository's paths (model_gateway/…,
    crates/…); an upgrade names `pip install -U smg`; none comes from the mock worker."""
    records = [json.loads(x) for x in SMG.read_text().splitlines()]
    assert records
    for r in records:
        assert r["sourcePackage"] == "smg" and r["tags"][0] == "smg"
        assert r["filePath"].startswith("src/smg/") or "/src/" in r["filePath"]
        assert not r["filePath"].startswith("crates/mock_worker/")
        assert all(v[0] in "01" for v in r["sourceVersions"])
        for s in r["solutions"]:
            assert "sglang-router" not in s
    assert any("`pip install -U smg`" in s for r in records for s in r["solutions"])
