"""Matches to events: one event per real failure, however many ranks printed it.

sglang prints the same traceback once per rank; eight events for one crash is noise. Matches of
the same pattern with the same captures within `window` seconds collapse into one event that
lists the ranks; a rank seen twice starts a new occurrence. A consequence (`Received sigquit
from a child process`) that follows a root cause within the window is attached to it as
`consequences` instead of standing as a failure of its own. Exceptions no pattern knows become
`sglang_unknown_error` events with a fingerprint of their message shape.

With `early` (the daemon), a group does not wait for its whole window when nothing more can
join it: a failure without ranks is emitted at once, and one with ranks as soon as every rank
the source has shown (`expected`) has reported it, or `rank_grace` seconds (of arrival time)
after its first rank did, whichever comes first. Ranks that crash together print within
milliseconds of each other; a failure on one rank among eight (an OOM, a NaN) would otherwise
wait the whole window for ranks that will never print it. A rank or a consequence that comes
later within the window is folded into the group already emitted — not counted, not printed
again — so an event may list fewer ranks than printed the error; the count of failures stays
right. `scan` waits, and lists every rank.

Repeats (a crash loop) are rate-limited when `repeat_interval` is set: at most one printed event
per error per source (one log file, one journal) per interval; the others come out `quiet` —
counted by the metrics sink, not printed — and the next printed one carries `suppressed: N`.

Time is the log's own timestamp when the line has one, else the `now` the caller passes; the
module never reads a clock. Nothing is dropped: `finish()` emits whatever is still open.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime

from matcher.types import Event, Match, Record

DEFAULT_WINDOW = 5.0
DEFAULT_RANK_GRACE = 0.1
MAX_TRACEBACK_CHARS = 8192

_MASKS = (
    (re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
     "<uuid>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?"), "<path>"),
    (re.compile(r"'[^'\n]*'|\"[^\"\n]*\""), "<str>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{12,}\b"), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<num>"),
)


def mask_message(message: str) -> str:
    """The shape of a message: values that vary between occurrences masked."""
    text = message.split("\n", 1)[0][:2000]
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text.strip()


def fingerprint(error_class: str, message: str) -> str:
    """Stable across occurrences of the same unknown error, different across different ones."""
    shape = f"{error_class.rsplit('.', 1)[-1]}|{mask_message(message)}"
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def log_time(log_ts: str | None) -> float | None:
    """Seconds of sglang's `2026-01-01 12:00:00(.mmm)` (its local time, compared only with itself)."""
    if not log_ts:
        return None
    try:
        return datetime.fromisoformat(log_ts.replace(",", ".")).timestamp()
    except ValueError:
        return None


def traceback_text(record: Record) -> str | None:
    if record.kind != "traceback":
        return None
    text = record.text
    if len(text) > MAX_TRACEBACK_CHARS:
        half = MAX_TRACEBACK_CHARS // 2
        text = text[:half] + "\n…\n" + text[-half:]
    return text


@dataclass(slots=True)
class _Closed:
    """A group emitted before its window ended: later ranks and consequences fold into it."""

    ranks: set[str]
    log_t: float | None
    now_t: float


@dataclass(slots=True)
class _Group:
    key: tuple[object, ...]
    record: Record
    match: Match | None
    log_t: float | None
    now_t: float
    ranks: list[str] = field(default_factory=list)
    occurrences: int = 1
    consequences: list[str] = field(default_factory=list)
    observed: float = 0.0
    offsets: dict[str, int] = field(default_factory=dict)  # source → first record it holds

    def hold(self, record: Record) -> None:
        held = self.offsets.get(record.source)
        if held is None or record.offset < held:
            self.offsets[record.source] = record.offset


class Aggregator:
    """Collapses ranks and attaches consequences. Feed matches in log order."""

    def __init__(
        self,
        *,
        window: float = DEFAULT_WINDOW,
        catalog_version: str = "",
        labels: dict[str, str] | None = None,
        repeat_interval: float = 0.0,
        early: bool = False,
        rank_grace: float = DEFAULT_RANK_GRACE,
    ) -> None:
        self.window = window
        self.early = early
        self.rank_grace = rank_grace
        self._closed: dict[tuple[object, ...], _Closed] = {}
        self._closed_cause: _Closed | None = None
        self.repeat_interval = repeat_interval
        self._last_printed: dict[tuple[str, str], float] = {}  # (source, error) → time
        self._suppressed: dict[tuple[str, str], int] = {}
        self.catalog_version = catalog_version
        self.labels = dict(labels or {})
        self._open: dict[tuple[object, ...], _Group] = {}
        self._last_cause: _Group | None = None

    def add(self, record: Record, match: Match | None, now: float = 0.0,
            expected: Collection[str] = ()) -> list[Event]:
        """Take one framed record and its match (or None); return events that are complete.

        `expected`: the ranks the record's source has shown so far (used when `early`).
        """
        t = log_time(record.log_ts)
        out = self._expire(t, now)
        if match is None and not record.exceptions:
            return out
        if match is not None and match.pattern.role == "consequence":
            cause = self._last_cause
            if cause is not None and cause.key in self._open and self._within(cause, t, now):
                text = match.message
                if text not in cause.consequences:
                    cause.consequences.append(text)
                cause.hold(record)
                return out
            closed_cause = self._closed_cause
            if closed_cause is not None and self._within(closed_cause, t, now):
                return out
        key = self._key(record, match)
        group = self._open.get(key)
        rank = record.rank_key
        closed = self._closed.get(key)
        if group is None and closed is not None and rank and rank not in closed.ranks \
                and self._within(closed, t, now):
            closed.ranks.add(rank)
            return out
        if group is not None and (not rank or rank in group.ranks):
            out.append(self._close(group))
            group = None
        if group is None:
            group = _Group(key, record, match, t, now, observed=now)
            self._open[key] = group
            if rank:
                group.ranks.append(rank)
        else:
            group.ranks.append(rank)
            group.occurrences += 1
        group.hold(record)
        if match is None or match.pattern.role != "consequence":
            self._last_cause = group
        if self.early and (not rank or set(expected) <= set(group.ranks)):
            out.append(self._close_early(group))
        return out

    def tick(self, now: float) -> list[Event]:
        out = self._expire(None, now)
        if self.early:
            late = [g for g in self._open.values() if g.observed + self.rank_grace <= now]
            out += sorted((self._close_early(g) for g in late), key=lambda e: e.offset)
        return out

    def holding(self) -> bool:
        """Groups wait for their window to end."""
        return bool(self._open)

    def due_in(self, now: float) -> float | None:
        """Seconds until `tick` has something to emit (None: nothing open). The daemon sleeps
        no longer than this, so an early event leaves on time."""
        if not self._open:
            return None
        if self.early:
            return max(0.0, min(g.observed for g in self._open.values()) + self.rank_grace - now)
        return max(0.0, min(g.now_t for g in self._open.values()) + self.window - now)

    def open_offsets(self, source: str) -> list[int]:
        """Where the earliest record of `source` in each group not yet emitted starts."""
        return [g.offsets[source] for g in self._open.values() if source in g.offsets]

    def finish(self) -> list[Event]:
        return sorted((self._close(g) for g in list(self._open.values())), key=lambda e: e.offset)

    # -- internals ---------------------------------------------------------------------------

    def _close_early(self, group: _Group) -> Event:
        was_cause = self._last_cause is group
        closed = _Closed(set(group.ranks), group.log_t, group.now_t)
        if len(self._closed) >= 10_000:  # bounded; entries leave with their window anyway
            self._closed.clear()
        self._closed[group.key] = closed
        if was_cause:
            self._closed_cause = closed
        return self._close(group)

    def _within(self, group: _Group | _Closed, t: float | None, now: float) -> bool:
        if t is not None and group.log_t is not None:
            return t - group.log_t <= self.window
        return now - group.now_t <= self.window

    def _expire(self, t: float | None, now: float) -> list[Event]:
        if self._closed:
            self._closed = {k: c for k, c in self._closed.items() if self._within(c, t, now)}
            if self._closed_cause is not None and not self._within(self._closed_cause, t, now):
                self._closed_cause = None
        done = [g for g in self._open.values() if not self._within(g, t, now)]
        return sorted((self._close(g) for g in done), key=lambda e: e.offset)

    def _key(self, record: Record, match: Match | None) -> tuple[object, ...]:
        if match is not None:
            return ("known", match.pattern.id, tuple(sorted(match.captures.items())))
        exc = record.exceptions[-1]
        return ("unknown", fingerprint(exc.error_class, exc.message))

    def _close(self, group: _Group) -> Event:
        event = self._event(group)
        t = group.log_t if group.log_t is not None else group.now_t
        return self._rate_limit(event, t)

    def _rate_limit(self, event: Event, t: float) -> Event:
        """At most one printed event per error per `repeat_interval`; the rest are `quiet`
        (still counted) and the next printed one says how many were held back."""
        if self.repeat_interval <= 0:
            return event
        # Per source: the same failure in another server's log is news, not a repeat.
        key = (event.source, event.pattern_id or event.fingerprint or "")
        last = self._last_printed.get(key)
        if last is not None and 0 <= t - last < self.repeat_interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return dataclasses.replace(event, quiet=True)
        if len(self._last_printed) > 10_000:  # bounded: forget errors quiet for a whole interval
            self._last_printed = {k: v for k, v in self._last_printed.items()
                                  if t - v < self.repeat_interval}
            # (their quiet repeats were counted by the metrics already; only the note goes)
            self._suppressed = {k: n for k, n in self._suppressed.items()
                                if k in self._last_printed}
        self._last_printed[key] = t
        held = self._suppressed.pop(key, 0)
        return dataclasses.replace(event, suppressed=held) if held else event

    def _event(self, group: _Group) -> Event:
        self._open.pop(group.key, None)
        if self._last_cause is group:
            self._last_cause = None
        r = group.record
        m = group.match
        common = dict(
            source=r.source,
            log_ts=r.log_ts,
            observed_ts=group.observed,
            ranks=tuple(sorted(group.ranks, key=_rank_order)),
            occurrences=group.occurrences,
            traceback=traceback_text(r),
            catalog_version=self.catalog_version,
            labels=dict(self.labels),
            consequences=tuple(group.consequences),
            offset=r.offset,
            lineno=r.lineno,
        )
        if m is not None:
            message = f"{m.error_class}: {m.message}" if m.error_class and not m.on_header \
                and r.exceptions else m.message
            return Event(
                event="sglang_error",
                pattern_id=m.pattern.id,
                error_class=m.error_class,
                severity=m.pattern.severity,
                role=m.pattern.role,
                message=message,
                captures=dict(m.captures),
                remediation=m.pattern.remediation(),
                **common,  # type: ignore[arg-type]
            )
        exc = r.exceptions[-1]
        return Event(
            event="sglang_unknown_error",
            error_class=exc.error_class,
            severity="error",
            message=f"{exc.error_class}: {exc.message}" if exc.error_class else exc.message,
            fingerprint=fingerprint(exc.error_class, exc.message),
            **common,  # type: ignore[arg-type]
        )


def _rank_order(rank: str) -> tuple[tuple[str, int], ...]:
    """`DP0 TP10` after `DP0 TP2`: compare rank tags by name, then number."""
    out = []
    for tag in rank.strip("[]").split():
        m = re.match(r"([A-Za-z_]*?)(\d+)$", tag)
        out.append((m.group(1), int(m.group(2))) if m else (tag, -1))
    return tuple(out)
