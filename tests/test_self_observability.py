"""The matcher watched like any service: its process, how late its events are, what it follows."""

from __future__ import annotations

import json
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from watch_harness import DaemonProcess, wait_for

from matcher.latency import ReadTimes
from matcher.testing import line_for


def test_read_times_find_the_chunk_a_line_was_read_in_and_forget_what_is_done():
    times = ReadTimes()
    times.read("a", 100, at=1.0)  # bytes 0..99
    times.read("a", 250, at=2.0)  # bytes 100..249
    times.read("b", 10, at=5.0)
    assert [times.when("a", o) for o in (0, 99, 100, 249, 250)] == [1.0, 1.0, 2.0, 2.0, None]
    times.forget_before("a", 100)  # the pipeline is done with everything before 100
    assert (times.when("a", 50), times.when("a", 120)) == (2.0, 2.0)
    times.read("a", 40, at=9.0)  # truncated in place: it starts over
    assert (times.when("a", 120), times.when("a", 0)) == (None, 9.0)
    times.forget_before("b", None)  # nothing of it held any more
    assert times.sources() == ["a"]


def _scrape(d: DaemonProcess) -> dict[str, list]:
    url = None
    for line in d.err.read_text().splitlines():
        if '"serving"' in line:
            url = json.loads(line)["url"]
    assert url is not None
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_a_running_daemon_shows_its_process_its_event_latency_and_a_glob_following_nothing(
        tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    nothing = str(tmp_path / "pods" / "*.log")  # a path that follows no file
    d = DaemonProcess(tmp_path, [str(log), nothing], "--metrics-addr", "127.0.0.1:0")
    with d:
        with open(log, "a") as f:
            for seq in range(3):
                f.write(line_for(seq) + "\n")
        wait_for(lambda: len(d.events()) == 3, 30)
        metrics = wait_for(lambda: (m := _scrape(d)) and any(
            s.name.endswith("_count") and s.value == 3
            for s in m.get("sglang_matcher_event_latency_seconds", [])) and m, 30)
        assert d.stop() == 0
    assert len(d.events()) == 3
    latency = {s.name: s for s in metrics["sglang_matcher_event_latency_seconds"]}
    assert latency["sglang_matcher_event_latency_seconds_count"].value == 3
    # A plain line is out within the aggregation window (0.5 s in the harness) plus a turn.
    assert 0 < latency["sglang_matcher_event_latency_seconds_sum"].value < 3 * 5
    assert metrics["process_resident_memory_bytes"][0].value > 10_000_000
    assert metrics["process_open_fds"][0].value > 0
    followed = {s.labels["source"]: s.value for s in metrics["sglang_matcher_files_followed"]}
    assert followed == {str(log): 1.0, nothing: 0.0}
