"""The post-mortem for a person: what went wrong, how often, where, and how to fix it.

Events of the same pattern are grouped into one entry (count, first and last time, ranks,
distinct captured values). Known messages come first — errors (`sglang_error`: critical, error)
before warnings (`sglang_warning`: warning, info), each in order of first appearance — then
unknown exceptions, then consequences — a consequence such as `Received sigquit from a child
process` is never presented as the reason a server died. Only errors and unknown exceptions
make `scan` exit 1.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from matcher.types import SEVERITY_RANK

# What a terminal would act on rather than show: C0 controls but tab and newline (ESC starts
# the title, clipboard (OSC 52) and hyperlink sequences; CR and BS overwrite what was shown),
# DEL, the C1 controls (U+0080–U+009F: 8-bit CSI and OSC, which some terminals obey), and the
# bidirectional and line-separator characters that reorder or break what is seen.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                       "\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """`text` with every control character from a log written as a visible escape (`\\x1b`,
    `\\x9b`, `\\u202e`): the report shows a log's bytes, it never lets them drive the
    operator's terminal (window title, clipboard, links, cursor)."""
    return _CONTROLS.sub(_escaped, text)


def _escaped(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


KNOWN = ("sglang_error", "sglang_warning")  # events of a catalog record


@dataclass(slots=True)
class Entry:
    first: dict[str, Any]
    count: int = 0
    occurrences: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    ranks: set[str] = field(default_factory=set)
    captures: list[dict[str, str]] = field(default_factory=list)
    consequences: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def group_events(events: Sequence[dict[str, Any]]) -> list[Entry]:
    """Group emitted event dicts by pattern (or fingerprint), in order of first appearance; the
    events of `sglang-changed-line` by the line that raised, each a failure of its own."""
    entries: dict[tuple[str, str, str], Entry] = {}
    for e in events:
        changed = (e.get("fixed_in") or {}).get("changed_line") or ""
        key = (e["event"], e.get("pattern_id") or e.get("fingerprint") or "", changed)
        entry = entries.get(key)
        if entry is None:
            entry = entries[key] = Entry(first=e, first_ts=e.get("log_ts"))
        entry.count += 1
        entry.occurrences += e.get("occurrences", 1)
        if e.get("log_ts"):
            entry.last_ts = e["log_ts"]
            entry.first_ts = entry.first_ts or e["log_ts"]
        entry.ranks.update(e.get("ranks") or ())
        if e.get("captures") and e["captures"] not in entry.captures:
            entry.captures.append(e["captures"])
        for c in e.get("consequences") or ():
            if c not in entry.consequences:
                entry.consequences.append(c)
        where = f"{e['source']}:{e.get('line') or e.get('offset')}"
        if len(entry.sources) < 3 and where not in entry.sources:
            entry.sources.append(where)
    return list(entries.values())


def render(events: Sequence[dict[str, Any]], *, inputs: Sequence[str], lines: int,
           files: int | None = None) -> str:
    """The post-mortem of `inputs` (as given: files or directories); `files`, the number of
    files read in them, is said when it is not the number of inputs."""
    entries = group_events(events)
    causes = sorted(
        (x for x in entries if x.first["event"] in KNOWN
         and x.first.get("role") != "consequence"),
        key=lambda x: SEVERITY_RANK.get(x.first.get("severity", "error"), 1),
    )  # stable: within a severity, in order of first appearance
    unknown = [x for x in entries if x.first["event"] == "sglang_unknown_error"]
    consequences = [x for x in entries if x.first.get("role") == "consequence"]
    out: list[str] = []
    # The entries listed below, not their occurrences (each entry says how often it was seen).
    n_err = sum(1 for x in causes if x.first["event"] == "sglang_error")
    n_warn = len(causes) - n_err
    n_unknown = len(unknown)
    out.append(
        f"sglang-matcher scan: {_plural(n_err, 'known error')}, "
        f"{_plural(n_unknown, 'unknown exception')}, {_plural(n_warn, 'warning')} "
        f"in {', '.join(inputs)} ({_read_from(inputs, files)}{_plural(lines, 'line')})"
    )
    if not entries:
        out.append("\nNo sglang errors found.")
        return escape_controls("\n".join(out)) + "\n"
    for i, entry in enumerate(causes, 1):
        out.append("")
        out.extend(_render_known(i, entry))
    if unknown:
        out.append("\nUnknown exceptions (no catalog record; counted as sglang_log_unknown_errors_total):")
        for entry in unknown:
            e = entry.first
            out.append(f"  - {_one_line(e['message'])}")
            out.append(f"    fingerprint {e['fingerprint']}  {_seen(entry)}")
            out.extend(_raised_at(e))
    if consequences:
        out.append("\nConsequences (follow a failure; not a root cause):")
        for entry in consequences:
            out.append(f"  - {_one_line(entry.first['message'])}  {_seen(entry)}")
    # Everything above is text: no colour or sequence of ours to keep (the progress line on a
    # terminal is drawn by `progress.py`, not through here).
    return escape_controls("\n".join(out)) + "\n"


def _raised_at(e: dict[str, Any]) -> list[str]:
    """Where the log's traceback says the exception was raised, as one line (or none)."""
    raised = e.get("raised_at")
    if not raised:
        return []
    return [f"    Raised at: {raised['path']}:{raised['line']}"
            + (f" in {raised['function']}()" if raised.get("function") else "")
            + (f"  {raised['url']}" if raised.get("url") else "")]


def _render_known(i: int, entry: Entry) -> list[str]:
    e = entry.first
    rem = e.get("remediation") or {}
    sev = (e.get("severity") or "error").upper()
    out = [f"[{i}] {sev}  {e.get('error_class') or '-'}  pattern {e['pattern_id']}"]
    out.append(f"    {_one_line(e['message'], 300)}")
    out.append(f"    {_seen(entry)}")
    out.append(f"    at {', '.join(entry.sources)}")
    for caps in entry.captures[:5]:
        out.append("    captured: " + ", ".join(f"{k} = {v}" for k, v in caps.items()))
    if rem.get("documentation"):
        out.append("    What happened:")
        out.extend(_wrap(rem["documentation"], 6))
    if rem.get("solutions"):
        out.append("    How to fix:")
        for n, s in enumerate(rem["solutions"], 1):
            out.extend(_wrap(f"{n}. {s}", 6, hang=3))
    if rem.get("references"):
        out.append("    No fix is known; to dig further:")
        for s in rem["references"]:
            out.extend(_wrap(f"- {s}", 6, hang=2))
    if rem.get("example_fix"):
        out.append("    Example fix:")
        out.extend("      " + line for line in rem["example_fix"].splitlines())
    fixed = e.get("fixed_in")
    if fixed:
        out.append(f"    Fixed in: sglang {fixed['release']} (last in {fixed['last_release']})"
                   + (f"  {fixed['compare_url']}" if fixed.get("compare_url") else ""))
    out.extend(_raised_at(e))
    if rem.get("url"):
        out.append(f"    Source: {rem['url']}")
    if entry.consequences:
        out.append("    Followed by (consequences): " + "; ".join(
            _one_line(c, 100) for c in entry.consequences))
    return out


def event_text(event: dict[str, Any]) -> str:
    """One event as `scan` prints a failure, for `watch` on a terminal: a line with the time
    it was seen, then class, pattern, message, where, ranks, what happened and how to fix."""
    entry = group_events([event])[0]
    when = event.get("log_ts") or ""
    if event["event"] == "sglang_unknown_error":
        lines = [(f"UNKNOWN  {event.get('error_class') or '-'}  fingerprint "
                 f"{event.get('fingerprint')}"),
                 f"    {_one_line(event['message'], 300)}",
                 f"    {_seen(entry)}",
                 f"    at {', '.join(entry.sources)}",
                 *_raised_at(event),
                 ("    No catalog record knows this exception; it is counted as "
                 "sglang_log_unknown_errors_total.")]
    else:
        lines = _render_known(0, entry)
        lines[0] = lines[0].split("] ", 1)[1]
        if event.get("role") == "consequence":
            lines[0] += "  (a consequence of an earlier failure)"
    if event.get("suppressed"):
        lines.append(f"    ({event['suppressed']} repeats held back since the last one printed)")
    rule = "── " + (f"{when}  " if when else "")
    return rule + lines[0] + "\n" + "\n".join(lines[1:]) + "\n"


def _seen(entry: Entry) -> str:
    parts = [f"seen {entry.count}×"]
    if entry.occurrences != entry.count:
        parts.append(f"({entry.occurrences} rank reports)")
    if entry.first_ts:
        parts.append(f"first {entry.first_ts}")
        if entry.last_ts and entry.last_ts != entry.first_ts:
            parts.append(f"last {entry.last_ts}")
    if entry.ranks:
        parts.append("ranks " + ", ".join(sorted(entry.ranks, key=_natural)))
    return "  ".join(parts)


def _natural(s: str) -> list[object]:
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def _one_line(text: str, limit: int = 200) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _wrap(text: str, indent: int, *, hang: int = 0) -> list[str]:
    return textwrap.wrap(
        text, width=100, initial_indent=" " * indent, subsequent_indent=" " * (indent + hang)
    ) or [" " * indent]


def _read_from(inputs: Sequence[str], files: int | None) -> str:
    return "" if files is None or files == len(inputs) else f"{_plural(files, 'file')}, "


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def exit_code(events: Sequence[dict[str, Any]]) -> int:
    """1 when a failure was found (an `sglang_error` that is not a consequence, or an
    `sglang_unknown_error`), else 0: warnings alone exit 0."""
    for e in events:
        if e.get("role") == "consequence":
            continue
        if e["event"] in ("sglang_error", "sglang_unknown_error"):
            return 1
    return 0
