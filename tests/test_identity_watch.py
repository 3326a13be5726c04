"""A failure's identity, with real daemons (issue: every event right): the same failure in two
pods' logs is two events and counts 2; a failure with another captured value is printed at
once, not held as a repeat of the first."""

from __future__ import annotations

import shutil
import time
import urllib.request
from pathlib import Path

from prom_harness import served_url
from watch_harness import DaemonProcess, wait_for

REPO = Path(__file__).resolve().parents[1]
CURATED = REPO / "patterns" / "sglang" / "curated"
FIELD = REPO / "tests" / "fixtures" / "field"


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")


def _counted(url: str, pattern_id: str) -> float:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sglang_log_errors_total{") and pattern_id in line)


def test_the_same_failure_on_two_pods_is_two_events_and_counts_two(tmp_path):
    """sglang #4048's TP5 and TP1 lines of one failure, one in each pod's log: before, one
    event from the first pod listed both ranks and the counter said 1."""
    lines = [x for x in (FIELD / "model-runtime" / "4048-max-new-tokens-none-typeerror.log"
                         ).read_text().splitlines() if "Input length (160062 tokens)" in x]
    tp5 = next(x for x in lines if " TP5]" in x)
    tp1 = next(x for x in lines if " TP1]" in x)
    logs = tmp_path / "logs"
    logs.mkdir()
    catalog = tmp_path / "curated"
    shutil.copytree(CURATED, catalog)
    with DaemonProcess(tmp_path, [str(logs / "*.log")], "--catalog", str(catalog),
                       "--metrics-addr", "127.0.0.1:0", writer_record=False,
                       env={"SGLANG_MATCHER_AGGREGATE_WINDOW": "5"}) as daemon:
        url = wait_for(lambda: served_url(daemon), 30)
        _append(logs / "pod-a.log", tp5)
        _append(logs / "pod-b.log", tp1)
        events = wait_for(lambda: len([e for e in daemon.events() if e.get("pattern_id")]) >= 2
                          and daemon.events(), 30)
        known = [e for e in events if e.get("pattern_id")]
        assert sorted((Path(e["source"]).name, tuple(e["ranks"])) for e in known) == [
            ("pod-a.log", ("TP5",)), ("pod-b.log", ("TP1",))]
        assert wait_for(lambda: _counted(f"{url}metrics" if url.endswith("/") else
                                         f"{url}/metrics", known[0]["pattern_id"]) == 2, 10)


def test_another_flag_is_printed_within_a_second_not_held_as_a_repeat(tmp_path):
    """The launcher's `unrecognized arguments:` for three flags (real lines of the curated
    record's examples), seconds apart, under the default 60 s repeat limit: each is printed
    within a second of being written."""
    lines = ["launch_server.py: error: unrecognized arguments: --enable-reasoning",
             "launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2",
             "sglang serve: error: unrecognized arguments: --no-such-flag"]
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "server.log"
    log.touch()
    # After a true repeat, another failure (sglang #4048's line): by the time it is out, the
    # repeat would have been too.
    sentinel = next(x for x in (FIELD / "model-runtime" / "4048-max-new-tokens-none-typeerror.log"
                                ).read_text().splitlines() if "Input length (160062" in x)
    with DaemonProcess(tmp_path, [str(logs / "*.log")], "--catalog", str(CURATED),
                       writer_record=False,
                       env={"SGLANG_MATCHER_REPEAT_INTERVAL": "60"}) as daemon:
        for n, line in enumerate(lines, 1):
            _append(log, line)
            written = time.monotonic()
            assert wait_for(lambda n=n: len(daemon.events()) >= n, 5), daemon.err.read_text()
            assert time.monotonic() - written < 1.0, line
        _append(log, lines[0])  # a true repeat: held back
        _append(log, sentinel)
        assert wait_for(lambda: len(daemon.events()) >= 4, 10)
        assert [e["captures"].get("arguments") for e in daemon.events()] == [
            "--enable-reasoning", "--reasoning_parser kimi_k2", "--no-such-flag", None]


def test_an_unknown_exception_then_an_nccl_line_then_a_cuda_traceback_are_three_failures(tmp_path):
    """Real lines back to back (sglang #4048's TypeError, #5594's `NCCL WARN`, #3713's
    illegal-access traceback): the TypeError is an event of its own, not one carrying the
    illegal-access record and its fix (before: one event, class TypeError, the CUDA record)."""
    first = (FIELD / "model-runtime" / "4048-max-new-tokens-none-typeerror.log"
             ).read_text().splitlines()[:2]
    nccl = next(x for x in (FIELD / "distributed-build" / "5594-nccl-socket-connect-abort.log"
                            ).read_text().splitlines() if "NCCL WARN" in x)
    ima = (FIELD / "gpu" / "3713-ima-lora-stream-sync.log").read_text().splitlines()
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "server.log"
    log.touch()
    with DaemonProcess(tmp_path, [str(logs / "*.log")], builtin=True) as daemon:
        log.write_text("\n".join([*first, nccl, *ima]) + "\n")
        events = wait_for(lambda: len(daemon.events()) >= 3 and daemon.events(), 60)
    assert events, daemon.err.read_text()[-2000:]
    by_class = {e["error_class"]: e for e in events}
    typed = by_class["TypeError"]
    assert typed["message"].startswith("TypeError: '>' not supported")
    assert by_class["RuntimeError"]["pattern_id"] is not None
    assert typed.get("pattern_id") != by_class["RuntimeError"]["pattern_id"]
    assert "illegal memory access" not in typed["message"]
    assert "illegal memory access" in by_class["RuntimeError"]["message"]
    assert any("NCCL WARN" in e["message"] for e in events)
