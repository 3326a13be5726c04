"""Catalogs that are wrong, slow or edited badly at night: the daemon keeps matching."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from faultkit import sample, served_url, stderr_events
from watch_harness import REPO, DaemonProcess, wait_for

from matcher.testing import line_for

# With literal text they pass the load checks. Hyperscan's prefilter decides `(a+)+$` and
# `(.*a){20}x` exactly, so `regex` never backtracks on them; a lookaround it cannot decide lets
# the line through to `regex`, where the timeout has to stop it.
CATASTROPHIC = {
    "nested-plus": (r"catastrophic failure marker: (a+)+(?=!)",
                    "catastrophic failure marker: " + "a" * 5000 + "?"),
    "repeated-dot-star": (r"catastrophic failure marker: (.*a){20}(?=x)",
                          "catastrophic failure marker: " + "a" * 3000),
}
PREFILTERED = {
    "nested-plus": (r"catastrophic failure marker: (a+)+$",
                    "catastrophic failure marker: " + "a" * 5000 + "!"),
    "repeated-dot-star": (r"catastrophic failure marker: (.*a){20}x",
                          "catastrophic failure marker: " + "a" * 3000),
}


@pytest.mark.parametrize("case", PREFILTERED.values(), ids=PREFILTERED)
def test_catastrophic_patterns_with_literals_never_reach_the_backtracker(tmp_path, case):
    """The same patterns anchored by literal text: the prefilter rules the line out, so a
    thousand lines that would each backtrack for seconds cost no regex search at all."""
    from matcher.catalog import load_catalog
    from matcher.engine import Engine
    from matcher.pipeline import Pipeline
    from matcher.types import Chunk

    pattern, evil_line = case
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"id": "evil", "messagePattern": pattern}))
    engine = Engine(load_catalog(user_paths=[mine], builtin=False).records)
    pipeline = Pipeline(engine, catalog_version="t")
    data = f"[2026-01-01 00:00:00 TP0] {evil_line}\n".encode() * 1000
    events = pipeline.feed(Chunk(data, "s", 0), 0.0).events + pipeline.drain(10.0)
    assert (events, engine.prefilter, engine.stats.timeouts) == ([], "hyperscan", 0)


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(.*a){20}"])
def test_bare_catastrophic_patterns_are_rejected_at_load(tmp_path, pattern):
    """The textbook cases have no literal text to anchor them: `catalog lint` rejects them,
    naming file, record and field, and the good record next to them still loads."""
    f = tmp_path / "mine.json"
    f.write_text(json.dumps([{"id": "good", "messagePattern": "a perfectly specific failure"},
                             {"id": "evil", "messagePattern": pattern}]))
    r = subprocess.run([sys.executable, "-m", "matcher", "catalog", "lint", str(f)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2
    (problem,) = [x for x in r.stdout.splitlines() if "evil" in x]
    assert problem.startswith(f"{f}: record 1 (id evil): field 'messagePattern': too little "
                              "literal text to be specific")
    assert "1 records in 1 files, 1 problems" in r.stdout  # `good` loaded


@pytest.mark.parametrize("case", CATASTROPHIC.values(), ids=CATASTROPHIC)
def test_catastrophic_pattern_is_bounded_quarantined_and_counted(tmp_path, case):
    """A catastrophic pattern with enough literal text to pass the load checks meets the lines
    that make it backtrack: each search is cut by the regex timeout, the pattern is quarantined
    after 3, the counter says so, and the other patterns keep matching every line."""
    pattern, evil_line = case
    log = tmp_path / "server.log"
    log.touch()
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"id": "evil", "messagePattern": pattern}))
    with DaemonProcess(tmp_path, [str(log)], "--catalog", str(mine),
                       "--metrics-addr", "127.0.0.1:0") as d:
        url = wait_for(lambda: served_url(d), 20)
        with open(log, "a") as f:
            for i in range(20):
                f.write(f"[2026-01-01 00:00:00 TP0] {evil_line}\n{line_for(i)}\n")
        d.wait_seqs(set(range(20)))
        assert wait_for(lambda: sample(url, "sglang_matcher_errors_total", stage="match",
                                       error_type="RegexTimeout") >= 3, 20)
        timeouts = sample(url, "sglang_matcher_errors_total", stage="match",
                          error_type="RegexTimeout")
        assert d.stop() == 0
    assert timeouts == 3  # quarantined after the third: the 17 later lines cost nothing
    assert [e["pattern_id"] for e in stderr_events(d, "pattern_quarantined")] == ["evil"]
    assert sorted(d.seqs()) == list(range(20))


def test_a_bad_edit_at_sighup_keeps_the_running_catalog(tmp_path):
    """At SIGHUP, a file half-saved by an editor and a catastrophic pattern: the reload fails,
    is counted, names the file, and the running catalog goes on matching."""
    log = tmp_path / "server.log"
    log.touch()
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"id": "mine", "messagePattern": "custom failure marker"}))
    with DaemonProcess(tmp_path, [str(log)], "--catalog", str(mine),
                       "--metrics-addr", "127.0.0.1:0") as d:
        url = wait_for(lambda: served_url(d), 20)
        for n, bad in enumerate(['[{"id": "mine", "messagePattern": "custom fail',
                                 json.dumps({"id": "mine", "messagePattern": "(a+)+$"})], 1):
            mine.write_text(bad)
            d.proc.send_signal(signal.SIGHUP)
            assert wait_for(lambda n=n: sample(url, "sglang_matcher_reloads_total",
                                               result="failed") == n, 20)
        with open(log, "a") as f:
            f.write("[2026-01-01 00:00:00] custom failure marker here\n")
            f.write(line_for(0) + "\n")
        d.wait_seqs({0})
        assert d.proc.poll() is None
        assert d.stop() == 0
    assert [e["pattern_id"] for e in d.events() if e["pattern_id"] == "mine"] == ["mine"]
    failures = stderr_events(d, "reload_failed")
    assert len(failures) == 2 and all("mine.json" in f["detail"] for f in failures)
