"""Matches to events: one event per real failure, however many ranks printed it.

sglang prints the same traceback once per rank; eight events for one crash is noise. Matches of
the same pattern with the same captures within `window` seconds collapse into one event that
lists the ranks; a rank seen twice starts a new occurrence. A consequence (`Received sigquit
from a child process`) that follows a root cause within the window is attached to it as
`consequences` instead of standing as a failure of its own; so is a record that names the root
cause it follows (`consequenceOf`) when that cause was the last one reported — the CUDA error a
kernel's failed device-side assertion makes torch raise — and a repeat of the cause itself that
names it (the assertion line each GPU thread prints) counts as an occurrence of it. A
consequence that follows no failure of its source — a child killed by the OOM killer prints
nothing, and its parent's `Subprocess scheduler_0 (pid=…) crashed with exit code -9` is all
there is — is the first fact known: its event says role "cause", and the consequences after it
join it. It keeps role "consequence" when a failure of its source comes within the window after
it (another process may print the failure a moment later; with `early` it waits `rank_grace`
for it, as for a rank). Exceptions no pattern knows become `sglang_unknown_error` events with a
fingerprint of their message shape.

With `early` (the daemon), a group does not wait for its whole window when nothing more can
join it: a failure without ranks is emitted at once, and one with ranks as soon as every rank
the source has shown (`expected`) has reported it, or `rank_grace` seconds (of arrival time)
after its first rank did, whichever comes first. Ranks that crash together print within
milliseconds of each other; a failure on one rank among eight (an OOM, a NaN) would otherwise
wait the whole window for ranks that will never print it. A rank or a consequence that comes
later within the window is folded into the group already emitted — not counted, not printed
again — so an event may list fewer ranks than printed the error; the count of failures stays
right. `scan` waits, and lists every rank.

A failure's identity is where it happened and what it is: its source (one log file, one
journal), its record (or, unknown, its fingerprint) and its captured values. Ranks collapse, and
consequences attach, only within one source: the same failure in two pods' logs is two events.

Repeats (a crash loop) are rate-limited when `repeat_interval` is set: at most one printed event
per identity per interval of arrival time — the same record with another captured value
(`--flag-b` after `--flag-a`) is another failure, printed at once; the repeats come out `quiet` —
counted by the metrics sink, not printed — and the next printed one of that identity carries
`suppressed: N`.

Time: windows run on the time we read a line, not the time the line claims. The caller passes
that arrival time as `now` (the daemon: its monotonic clock); the module never reads a clock,
and arrival time never goes back (a `now` read a moment before the last one counts as the last).
An occurrence joins a group — or folds into one emitted early, or attaches to it as a
consequence — only if it arrived within `window` of the group's first record and, when both
carry a log timestamp, the two timestamps are within `window` of each other, either way. So the
log's time can only separate: a backlog read in one go still splits crashes hours apart, and a
line with a wild timestamp (a bad clock, a replayed log, a line stamped 2099) stands alone. It
can no longer steer: when the log's time bounded the window (`t - log_t <= window`, true for
any line stamped earlier than the group), one far-future line swallowed a later, separate
failure on another rank. Windows end, and the repeat interval runs, on arrival time only.
`scan` passes no arrival time (now=0 throughout): there the log's own timestamp alone groups,
and a group ends when an occurrence falls outside its window, on a rank's repeat, or at
`finish()` (scan sorts its output, so when it comes out does not matter). Nor does scan limit
repeats: with no arrival time, no interval would ever pass.

Many distinct errors cost O(1) amortized each: open groups, groups emitted early and the repeat
table are kept in arrival order and pruned from the old end, and each holds at most
`max_tracked` entries, the oldest leaving first. What leaving costs: an open group is emitted
then, maybe before its last rank (with `early` that rank still folds in; without, it comes out
as an event of its own); an early-emitted group that left can take no late rank or consequence
(each comes out as an event of its own); a repeat of an error the repeat table forgot is printed
again, and a note of quiet repeats that left is not printed. Counts are never lost: the metrics
count every event, printed or quiet. Nothing is dropped: `finish()` emits whatever is still open.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from matcher import frames
from matcher.redact import Redactor
from matcher.types import UNCLASSIFIED, Event, Match, RaisedAt, Record

if TYPE_CHECKING:
    from matcher.catalog.schema import CatalogRecord

DEFAULT_WINDOW = 5.0
DEFAULT_RANK_GRACE = 0.1
MAX_TRACEBACK_CHARS = 8192
# Entries each table (open groups, groups emitted early, the repeat table, its notes) holds
# at most; past it the oldest leaves (the module docstring says what that costs). 10,000
# small entries are a few MB; more distinct errors than that within one window or repeat
# interval is a flood no one reads event by event.
MAX_TRACKED = 10_000
_KEPT_REMEDIES = 1024  # records whose remediation is kept (`Aggregator._remediation`)
_REDACTOR = Redactor()  # for the cut when the caller gave none

# Compiled on first use (`_masks`), as is `_LOG_LEVEL`: only an unknown error or a generated
# record's match needs them, and every start paid ~2 ms for them at import.
_MASKS = (
    (r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "<ip>"),
    (r"(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?", "<path>"),
    (r"'[^'\n]*'|\"[^\"\n]*\"", "<str>"),
    (r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{12,}\b", "<hex>"),
    (r"\d+(?:\.\d+)?", "<num>"),
)


@functools.cache
def _masks() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern), repl) for pattern, repl in _MASKS)


def mask_message(message: str) -> str:
    """The shape of a message: values that vary between occurrences masked."""
    text = message.split("\n", 1)[0][:2000]
    for pattern, repl in _masks():
        text = pattern.sub(repl, text)
    return text.strip()


def fingerprint(error_class: str, message: str, raised_at: str = "") -> str:
    """Stable across occurrences of the same unknown error, different across different ones:
    its class, the place that raised it (`raising_frame`) and its message with values masked —
    one `KeyError` on a request id from one place is one fingerprint, whatever the id."""
    shape = f"{error_class.rsplit('.', 1)[-1]}|{mask_message(message)}"
    if raised_at:
        shape += f"|{raised_at}"
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def raised_at(record: Record) -> RaisedAt | None:
    """The frame the log's traceback says raised the exception (`frames.raising_frame`)."""
    frame = frames.raising_frame(record) if record.kind == "traceback" else None
    if frame is None:
        return None
    return RaisedAt(path=frame.package_path, line=frame.line, function=frame.function,
                    source_line=frame.source)


def raising_frame(record: Record) -> str:
    """`managers/detokenizer_manager.py:event_loop` — the frame that raised a traceback's
    exception (`frames.raising_frame`) as its last two path parts and its function: line
    numbers change between releases, and pasted paths are often cut (`.../managers/x.py`)."""
    frame = frames.raising_frame(record)
    if frame is None:
        return ""
    return f"{'/'.join(frame.path.split('/')[-2:])}:{frame.function}"


@functools.lru_cache(maxsize=256)
def log_time(log_ts: str | None) -> float | None:
    """Seconds of sglang's `2026-01-01 12:00:00(.mmm)` (its local time, compared only with itself).
    Remembered: the records of a second, or of a traceback's ranks, share their stamp."""
    if not log_ts:
        return None
    try:
        return datetime.fromisoformat(log_ts.replace(",", ".")).timestamp()
    except ValueError:
        return None


def traceback_text(record: Record, redactor: Redactor | None = None) -> str | None:
    """A traceback's text, its middle cut past `MAX_TRACEBACK_CHARS` — redacted as a whole
    first, so that no secret straddling a cut leaves its head or tail behind."""
    if record.kind != "traceback":
        return None
    text = record.text
    if len(text) > MAX_TRACEBACK_CHARS:
        text = (redactor or _REDACTOR).text(text)
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
    pattern_id: str | None = None
    source: str = ""


@dataclass(slots=True)
class _Seen:
    """When a failure (not a consequence) of a source was last seen."""

    now_t: float
    log_t: float | None


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
    # A consequence that no failure of its source took: it reports as the cause unless a
    # failure of its source is seen within its window, before or after it.
    alone: bool = False
    cause_seen: bool = False

    def hold(self, record: Record) -> None:
        held = self.offsets.get(record.source)
        if held is None or record.offset < held:
            self.offsets[record.source] = record.offset


class Aggregator:
    """Collapses ranks and attaches consequences. Feed records in the order they were read."""

    def __init__(
        self,
        *,
        window: float = DEFAULT_WINDOW,
        catalog_version: str = "",
        labels: dict[str, str] | None = None,
        repeat_interval: float = 0.0,
        early: bool = False,
        rank_grace: float = DEFAULT_RANK_GRACE,
        max_tracked: int = MAX_TRACKED,
        redactor: Redactor | None = None,
    ) -> None:
        if max_tracked < 1:
            raise ValueError("max_tracked must be at least 1")
        self.window = window
        self.early = early
        self.rank_grace = rank_grace
        self.repeat_interval = repeat_interval
        self.catalog_version = catalog_version
        self.labels = dict(labels or {})
        self.max_tracked = max_tracked
        self.redactor = redactor if redactor is not None else _REDACTOR  # before the cut
        self._now = 0.0  # the latest arrival time given
        # Every table in arrival order, oldest first: what left its window or interval is found
        # at the front and removed there, so no record costs a pass over any table.
        self._open: OrderedDict[tuple[object, ...], _Group] = OrderedDict()
        self._closed: OrderedDict[tuple[object, ...], _Closed] = OrderedDict()
        self._closed_cause: _Closed | None = None
        self._last_cause: _Group | None = None
        self._cause_at: OrderedDict[str, _Seen] = OrderedDict()  # source → its last failure
        self._alone: list[_Group] = []  # open groups of consequences no failure took
        # A failure's identity → arrival time of its last printed event; → quiet repeats since.
        self._last_printed: OrderedDict[tuple[object, ...], float] = OrderedDict()
        self._suppressed: OrderedDict[tuple[object, ...], int] = OrderedDict()
        # Each record's remediation, made once while it keeps firing: the events of a record
        # share one dict, which nothing changes (`event_dict` and the sinks copy what they
        # redact or add).
        self._remedies: dict[int, tuple[CatalogRecord, dict[str, Any]]] = {}

    def add(self, record: Record, match: Match | None, now: float = 0.0,
            expected: Collection[str] = ()) -> list[Event]:
        """Take one framed record and its match (or None); return events that are complete.

        `now`: when the record was read (arrival time; see the module docstring). `expected`:
        the ranks the record's source has shown so far (used when `early`).
        """
        now = self._arrive(now)
        t = log_time(record.log_ts)
        out = self._expire(now)
        if match is None and not record.exceptions:
            return out
        if match is not None and (match.pattern.role == "consequence"
                                  or self._follows(match.pattern.consequence_of, t, now,
                                                   record.source)) \
                and self._taken_by_cause(record, match, t, now):
            return out
        key = self._key(record, match)
        group = self._open.get(key)
        rank = record.rank_key
        closed = self._closed.get(key)
        if group is None and closed is not None and rank and rank not in closed.ranks \
                and self._within(closed, t, now):
            closed.ranks.add(rank)
            return out
        if group is not None and (not rank or rank in group.ranks
                                  or not self._within(group, t, now)):
            out.append(self._close(group))
            group = None
        if group is None:
            group = _Group(key, record, match, t, now, observed=now)
            self._open[key] = group  # at the end: its key left `_open` when it closed
            if rank:
                group.ranks.append(rank)
            if match is not None and match.pattern.role == "consequence":
                self._stand_alone(group)
            out += self._evict_open()
        else:
            group.ranks.append(rank)
            group.occurrences += 1
        group.hold(record)
        if match is None or match.pattern.role != "consequence":
            self._last_cause = group
            self._saw_cause(record.source, t, now)
        # A lone consequence waits its grace like a rank: the failure it follows may be
        # printed a moment after it (another process writing to the same stream).
        if self.early and not group.alone and (not rank or set(expected) <= set(group.ranks)):
            out.append(self._close_early(group))
        return out

    def _stand_alone(self, group: _Group) -> None:
        """A consequence no failure took opens a group of its own. With no failure of its
        source seen within its window, it is the first fact known of what went wrong: later
        consequences join it, and it reports as the cause (`_event`) unless a failure of its
        source follows within the window."""
        group.alone = True
        seen = self._cause_at.get(group.record.source)
        group.cause_seen = seen is not None and self._within(seen, group.log_t, group.now_t)
        other = self._last_cause  # one failure is followed at a time: keep another source's
        if not group.cause_seen and (other is None or other.key not in self._open
                                     or not self._within(other, group.log_t, group.now_t)):
            self._last_cause = group
        self._alone.append(group)

    def _saw_cause(self, source: str, t: float | None, now: float) -> None:
        """A failure of `source` at (`t`, `now`): the lone consequences of that source whose
        window it falls in follow a failure after all."""
        self._cause_at.pop(source, None)  # a new entry goes to the end
        self._cause_at[source] = _Seen(now, t)
        if len(self._cause_at) > self.max_tracked:
            self._cause_at.popitem(last=False)
        for g in self._alone:
            if g.record.source == source and self._within(g, t, now):
                g.cause_seen = True

    def _taken_by_cause(self, record: Record, match: Match, t: float | None,
                        now: float) -> bool:
        """A consequence (a record that only follows a failure) joins the open failure of its
        source that it follows, as a repeat or a consequence of it; after one just closed it
        is dropped. False: no such failure, the record stands alone."""
        cause = self._last_cause
        if cause is not None and cause.key in self._open and self._within(cause, t, now) \
                and cause.record.source == record.source:
            if cause.match is not None and cause.match.pattern.id == match.pattern.id:
                cause.occurrences += 1  # the same message again (another GPU thread)
            elif match.message not in cause.consequences:
                cause.consequences.append(match.message)
            cause.hold(record)
            return True
        closed_cause = self._closed_cause
        return closed_cause is not None and self._within(closed_cause, t, now) \
            and closed_cause.source == record.source

    def tick(self, now: float) -> list[Event]:
        now = self._arrive(now)
        out = self._expire(now)
        if self.early:
            late: list[_Group] = []
            for g in self._open.values():  # oldest first: the first still in its grace ends it
                if g.observed + self.rank_grace > now:
                    break
                late.append(g)
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
        oldest = next(iter(self._open.values()))
        wait = oldest.observed + self.rank_grace if self.early else oldest.now_t + self.window
        return max(0.0, wait - max(now, self._now))

    def open_offsets(self, source: str) -> list[int]:
        """Where the earliest record of `source` in each group not yet emitted starts."""
        return [g.offsets[source] for g in self._open.values() if source in g.offsets]

    def finish(self) -> list[Event]:
        return sorted((self._close(g) for g in list(self._open.values())), key=lambda e: e.offset)

    # -- internals ---------------------------------------------------------------------------

    def _arrive(self, now: float) -> float:
        """Arrival time never goes back: the daemon reads its clock once a round, and a call made
        with a `now` read a moment before another's counts as the later one. That keeps every
        table in time order."""
        if now > self._now:
            self._now = now
        return self._now

    def _follows(self, causes: tuple[str, ...], t: float | None, now: float, source: str
                 ) -> bool:
        """The last root cause reported, within the window and in `source`, is one of
        `causes` (ids): the record is part of that failure (`consequenceOf`), not a failure of
        its own."""
        if not causes:
            return False
        cause = self._last_cause
        if cause is not None and cause.key in self._open and cause.match is not None:
            return cause.match.pattern.id in causes and self._within(cause, t, now) \
                and cause.record.source == source
        closed = self._closed_cause
        return closed is not None and closed.pattern_id in causes \
            and self._within(closed, t, now) and closed.source == source

    def _close_early(self, group: _Group) -> Event:
        was_cause = self._last_cause is group
        closed = _Closed(set(group.ranks), group.log_t, group.now_t,
                         group.match.pattern.id if group.match is not None else None,
                         group.record.source)
        self._closed.pop(group.key, None)  # a new entry goes to the end
        self._closed[group.key] = closed
        if len(self._closed) > self.max_tracked:
            self._closed.popitem(last=False)
        if was_cause:
            self._closed_cause = closed
        return self._close(group)

    def _within(self, group: _Group | _Closed | _Seen, t: float | None, now: float) -> bool:
        """An occurrence stamped `t` that arrived at `now` belongs to `group`'s window: arrival
        within `window`, and log timestamps (when both have one) within `window` either way."""
        if now - group.now_t > self.window:
            return False
        return t is None or group.log_t is None or abs(t - group.log_t) <= self.window

    def _expire(self, now: float) -> list[Event]:
        """Drop the early-emitted groups and emit the open ones whose window of arrival time has
        ended: from the oldest, stopping at the first still in it.

        An entry that left `_open` late (a group waits its grace before `_closed` takes it)
        may stand in front of an older one, which then leaves a little late; lookups check
        the window themselves, so that costs memory for a moment, never a wrong grouping.
        """
        closed = self._closed
        while closed and now - next(iter(closed.values())).now_t > self.window:
            closed.popitem(last=False)
        if self._closed_cause is not None and now - self._closed_cause.now_t > self.window:
            self._closed_cause = None
        seen = self._cause_at
        while seen and now - next(iter(seen.values())).now_t > self.window:
            seen.popitem(last=False)
        done: list[_Group] = []
        for g in self._open.values():
            if now - g.now_t <= self.window:
                break
            done.append(g)
        return sorted((self._close(g) for g in done), key=lambda e: e.offset)

    def _evict_open(self) -> list[Event]:
        """More open groups than `max_tracked` (a flood of distinct errors, each waiting for its
        ranks): the oldest are emitted now."""
        out: list[Event] = []
        while len(self._open) > self.max_tracked:
            oldest = next(iter(self._open.values()))
            out.append(self._close_early(oldest) if self.early else self._close(oldest))
        return out

    def _key(self, record: Record, match: Match | None) -> tuple[object, ...]:
        """A failure's identity: where (its source) and what (record and captured values, or
        the unknown exception's fingerprint)."""
        if match is not None:
            return (record.source, "known", match.pattern.id,
                    tuple(sorted(match.captures.items())))
        exc = record.exceptions[-1]
        return (record.source, "unknown",
                fingerprint(exc.error_class, exc.message, raising_frame(record)))

    def _close(self, group: _Group) -> Event:
        return self._rate_limit(self._event(group), group.now_t)

    def _rate_limit(self, event: Event, t: float) -> Event:
        """At most one printed event per error per `repeat_interval` of arrival time (`t`: when
        the event's first record arrived); the rest are `quiet` (still counted) and the next
        printed one says how many were held back."""
        if self.repeat_interval <= 0:
            return event
        printed = self._last_printed
        # Forget, oldest first, the errors whose interval has passed for every group still to
        # close: none arrived before this one, the oldest open one, or (those to come) now.
        # Their notes stay in `_suppressed` until the error prints again or the table is full.
        oldest = next(iter(self._open.values())).now_t if self._open else self._now
        horizon = min(t, oldest) - self.repeat_interval
        while printed and next(iter(printed.values())) <= horizon:
            printed.popitem(last=False)
        # A failure's identity: the same failure in another server's log, or with another
        # captured value, is news, not a repeat.
        key = (event.source, event.pattern_id or event.fingerprint or "",
               tuple(sorted(event.captures.items())))
        last = printed.get(key)
        if last is not None and t - last < self.repeat_interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            self._suppressed.move_to_end(key)
            if len(self._suppressed) > self.max_tracked:
                self._suppressed.popitem(last=False)  # its quiet repeats were counted already
            return dataclasses.replace(event, quiet=True)
        printed.pop(key, None)  # a new entry goes to the end
        printed[key] = t
        if len(printed) > self.max_tracked:
            printed.popitem(last=False)
        held = self._suppressed.pop(key, 0)
        return dataclasses.replace(event, suppressed=held) if held else event

    def _remediation(self, record: CatalogRecord) -> dict[str, Any]:
        kept = self._remedies.get(id(record))
        if kept is None:
            if len(self._remedies) >= _KEPT_REMEDIES:
                self._remedies.clear()
            kept = self._remedies[id(record)] = (record, record.remediation())
        return kept[1]

    def _event(self, group: _Group) -> Event:
        self._open.pop(group.key, None)
        if self._last_cause is group:
            self._last_cause = None
        if group.alone:
            self._alone.remove(group)
        r = group.record
        m = group.match
        common = {
            "source": r.source,
            "log_ts": r.log_ts,
            "observed_ts": group.observed,
            "ranks": tuple(sorted(group.ranks, key=_rank_order)),
            "occurrences": group.occurrences,
            "traceback": traceback_text(r, self.redactor),
            "catalog_version": self.catalog_version,
            "labels": dict(self.labels),
            "consequences": tuple(group.consequences),
            "offset": r.offset,
            "lineno": r.lineno,
            "raised_at": raised_at(r),
        }
        if m is not None:
            message = f"{m.error_class}: {m.message}" if m.error_class and not m.on_header \
                and r.exceptions else m.message
            severity = event_severity(m, r)
            return Event(
                event="sglang_error" if severity in ERROR_SEVERITIES else "sglang_warning",
                pattern_id=m.pattern.id,
                error_class=event_class(m, r),
                severity=severity,
                role="cause" if group.alone and not group.cause_seen else m.pattern.role,
                message=message,
                captures=dict(m.captures),
                remediation=self._remediation(m.pattern),
                **common,  # type: ignore[arg-type]
            )
        exc = r.exceptions[-1]
        return Event(
            event="sglang_unknown_error",
            error_class=event_class(None, r),
            severity="error",
            message=f"{exc.error_class}: {exc.message}" if exc.error_class else exc.message,
            fingerprint=fingerprint(exc.error_class, exc.message, raising_frame(r)),
            **common,  # type: ignore[arg-type]
        )


# -- severity and class ------------------------------------------------------------------------
#
# What an event's `event`, `severity` and `error_class` say (docs/events.md). `severity` is
# the catalog record's; `event` follows it: `sglang_error` for critical and error,
# `sglang_warning` for warning and info (what `scan`'s report counts as warnings). So a line
# the log itself marks INFO or WARNING is an `sglang_error` only when its record says it is
# one: a curated or user record's severity is a person's statement about that message, and
# stands (NCCL prints its fatal connection errors as `NCCL WARN`). A generated record's
# severity is not: it is "error" for every `raise` and `logger.error` extracted from sglang's
# source, and when the log shows the message at INFO or WARNING, the code that printed it
# caught the exception and carried on — the log's level is the event's severity then.

ERROR_SEVERITIES = frozenset({"critical", "error"})

_LEVELS = {"DEBUG": "info", "INFO": "info", "WARN": "warning", "WARNING": "warning",
           "ERROR": "error", "CRITICAL": "critical", "FATAL": "critical"}
# The level word of a line, where the writers found in sglang's logs put it (after sglang's
# own prefix and any wrapper, which the framer has taken off the record's header). sglang's own
# format (`[2026-01-01 12:00:00 TP0] message`) carries none.
_LOG_LEVEL = (
    # uvicorn `INFO:     127.0.0.1…`, vLLM `WARNING 12-04 11:03:30 [x.py:21] …`,
    # logging.basicConfig `WARNING:root:…`, ray workers `WARNING:2025-11-28 16:00:45,396:…`
    r"(?P<lead>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?=[:\s])"
    # sglang's verbose format `- ERROR - scheduler.py:run_scheduler_process - …`
    r"|- (?P<dash>DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
    # a named logger `[sgl_kernel] CRITICAL: …`
    r"|\[[\w.-]+\] (?P<named>DEBUG|INFO|WARNING|ERROR|CRITICAL):"
    # NCCL `host:pid:tid [7] socket.c:485 NCCL WARN …`, `… [1] NCCL INFO …`
    r"|\S+ \[\d+\] (?:\S+ )?NCCL (?P<nccl>INFO|WARN)\b"
)


@functools.cache
def _log_level() -> re.Pattern[str]:
    return re.compile(_LOG_LEVEL)


def log_level(record: Record) -> str | None:
    """The severity the log itself gives `record` (`info`, `warning`, `error`, `critical`), from
    the level word its writer put at the start of the line, or a wrapper taken off before it
    (`Record.level`); None when the line has none."""
    if record.level in _LEVELS:
        return _LEVELS[record.level]
    m = _log_level().match(record.header.lstrip())
    if m is None:
        return None
    return _LEVELS[next(word for word in m.groups() if word)]


def event_severity(match: Match, record: Record) -> str:
    """The record's severity; a generated record's capped at the level the log shows — but for
    a native library's message (`errorType` "native", `matcher.catalog.native`), whose severity
    was given per message: NCCL prints its fatal connection failures as `NCCL WARN`."""
    severity = match.pattern.severity
    if match.pattern.layer == "generated" and severity in ERROR_SEVERITIES \
            and match.pattern.error_type != "native":
        level = log_level(record)
        if level is not None and level not in ERROR_SEVERITIES:
            return level
    return severity


def event_class(match: Match | None, record: Record) -> str:
    """Never empty: the record's class (as the log spells it, `torch.OutOfMemoryError`, when
    the log names it); else the class of the exception the log shows (a traceback matched on
    its header, or an unknown one: the exception that escaped); else `UNCLASSIFIED`."""
    if match is not None and match.error_class:
        return match.error_class
    if record.exceptions and record.exceptions[-1].error_class:
        return record.exceptions[-1].error_class
    return UNCLASSIFIED


_RANK_TAG = re.compile(r"([A-Za-z_]*?)(\d+)$")


@functools.lru_cache(maxsize=4096)
def _rank_order(rank: str) -> tuple[tuple[str, int], ...]:
    """`DP0 TP10` after `DP0 TP2`: compare rank tags by name, then number. Kept per rank: a
    server has a few, and every event sorts its own."""
    out = []
    for tag in rank.strip("[]").split():
        m = _RANK_TAG.match(tag)
        out.append((m.group(1), int(m.group(2))) if m else (tag, -1))
    return tuple(out)
