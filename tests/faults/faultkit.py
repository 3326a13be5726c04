"""Measuring helpers for the fault suite: peak RSS, /metrics samples, stderr events."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # watch_harness

from watch_harness import DaemonProcess


def figure(text: str) -> None:
    """A measured figure, printed (visible with -s) for docs/reliability.md's table."""
    print(f"\nFIGURE: {text}")


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM): what memory the input made it take, at worst."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def served_url(d: DaemonProcess) -> str | None:
    for line in d.err.read_text().splitlines():
        if '"serving"' in line:
            return json.loads(line)["url"]
    return None


def metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, sorted labels)."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def sample(url: str, name: str, **labels: str) -> float:
    """One series' value (0 when it does not exist yet)."""
    return metrics(url).get((name, tuple(sorted(labels.items()))), 0.0)


def stderr_events(d: DaemonProcess, event: str) -> list[dict]:
    out = []
    for line in d.err.read_text().splitlines():
        if f'"event": "{event}"' in line:
            out.append(json.loads(line))
    return out

