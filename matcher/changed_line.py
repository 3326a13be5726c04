"""An exception no record knows, raised at an sglang line a later release changed: an event of
the curated record `sglang-changed-line`, with the release to upgrade to. An exception a
dependency's record knows but gives no way to fix (torch refused an operator's arguments)
keeps its record and gains the same upgrade.

The traceback's innermost frame in sglang's code (`Event.raised_at`) names the file and prints
the source line. When the line history (`matcher.catalog.line_history`) says that line was
dropped from that file in a later release, the event says which release, links GitHub's compare
view of the file between the two, and says to upgrade — and that whether the change fixes this
failure is not known until it runs there. Which run of releases holds the log's line: the one
holding the release that wrote the log when it is known, else the only one (a line that came
and went twice, in a log of an unknown release, has no answer). Everything else stays unknown.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable
from pathlib import Path

from matcher.catalog.line_history import History, Run
from matcher.catalog.schema import CatalogRecord
from matcher.release import COMPARE, Releases
from matcher.types import Event, FixedIn

RECORD_ID = "sglang-changed-line"


@functools.lru_cache(maxsize=1)
def _history(path: Path | None = None) -> History | None:
    try:
        return History.load(path)
    except (OSError, ValueError):
        return None  # a checkout without the file: nothing to answer with


def answered(events: list[Event], record: CatalogRecord | None,
             known: Callable[[str], Releases | None],
             history: Callable[[], History | None] = _history,
             unfixed: Callable[[Event], bool] = lambda e: False) -> list[Event]:
    """`events` with each unknown exception raised at a changed sglang line made an event of
    `record`, and each `unfixed` one (an event of a dependency's record that says no way to
    fix it) given the upgrade (`known(source)`: the releases that source's log can be from,
    None if unknown)."""
    if record is None:
        return events
    out = events
    for i, e in enumerate(events):
        at = e.raised_at
        if at is None or not at.source_line or not at.path.startswith("sglang/") \
                or not (e.event == "sglang_unknown_error" or unfixed(e)):
            continue
        lines = history()
        if lines is None:
            return out
        releases = known(e.source)
        run = (lines.lone_run(at.path, at.source_line) if releases is None
               else _holding(lines.runs(at.path, at.source_line), releases))
        if run is None:
            continue
        if out is events:
            out = list(events)
        out[i] = (_event(e, record, run, at.path, at.source_line)
                  if e.event == "sglang_unknown_error" else _upgraded(e, run, at.path, at.source_line))
    return out


def _holding(runs: list[Run], known: Releases) -> Run | None:
    """The run the log's line is from, when one is, and a later release lost the line."""
    holding = [r for r in runs if known.intersect(Releases.of((f"{r.first}..{r.last}",)))]
    return holding[0] if len(holding) == 1 and holding[0].after is not None else None


def _fixed_in(run: Run, path: str, line: str) -> FixedIn:
    anchor = hashlib.sha256(f"python/{path}".encode()).hexdigest()
    assert run.after is not None
    return FixedIn(run.after, run.last, f"{COMPARE}/v{run.last}...v{run.after}#diff-{anchor}",
                   line=line)


def _upgraded(e: Event, run: Run, path: str, line: str) -> Event:
    fixed = _fixed_in(run, path, line)
    remediation = {**(e.remediation or {}), "solutions": [fixed.solution()]}
    return dataclasses.replace(e, remediation=remediation, fixed_in=fixed)


def _event(e: Event, record: CatalogRecord, run: Run, path: str, line: str) -> Event:
    fixed = _fixed_in(run, path, line)
    base = record.remediation()
    remediation = {**base, "solutions": [fixed.solution(), *base.get("solutions", ())]}
    return dataclasses.replace(
        e, event="sglang_error", pattern_id=record.id, severity=record.severity,
        role=record.role, remediation=remediation, fixed_in=fixed, fingerprint=None)
