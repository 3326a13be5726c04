"""The matcher's log about itself: what each entry is (`Notice`), and the structlog processors
every entry passes on its way to the configured logger.

A `Notice` is a typed value: its snake_case name, its level, and whether it may flood (a webhook
that is down fails every event). `own_log` wraps the logger so that each entry goes through:

1. `RateLimit`: a notice that may flood is logged the first time, then at most once per
   `quiet_for` seconds, with `held_back`: how many were not logged since (its counter, kept by
   the caller, counts every one).
2. `Redact`: every field, names and values, through the current `Redactor` (a reload swaps it).
3. `to_logger`: the entry handed to the wrapped logger as `method(name, **fields)`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import structlog

from matcher.redact import Redactor

Level = Literal["debug", "info", "warning", "error"]
_NOTICE = "_notice"  # the key the entry's `Notice` travels under, between processors


class Logger(Protocol):
    """The part of a structlog bound logger the matcher's own log uses."""

    def info(self, event: str, **kw: Any) -> Any: ...
    def warning(self, event: str, **kw: Any) -> Any: ...
    def error(self, event: str, **kw: Any) -> Any: ...


@dataclass(frozen=True)
class Notice:
    """One kind of log entry: `quiet` ones may come in floods and are rate-limited."""

    name: str
    level: Level = "info"
    quiet: bool = False


# Entries with a counter next to them (telemetry.py moves it).
FILE_ROTATED = Notice("file_rotated")
FILE_TRUNCATED = Notice("file_truncated", "warning")
LINE_TRUNCATED = Notice("line_truncated", "warning")
FILES_CLOSED_IDLE = Notice("files_closed_idle", "warning", quiet=True)
MALFORMED_INPUT = Notice("malformed_input", "warning", quiet=True)
CHECKPOINT_FAILED = Notice("checkpoint_failed", "error")
CHECKPOINT_RECOVERED = Notice("checkpoint_recovered", "warning")
RELOADED = Notice("reloaded")
RELOAD_FAILED = Notice("reload_failed", "error")
PIPELINE_ERROR = Notice("pipeline_error", "error")
REGEX_TIMEOUT = Notice("regex_timeout", "warning", quiet=True)
PATTERN_QUARANTINED = Notice("pattern_quarantined", "error")
EVENTS_OUTPUT_FAILED = Notice("events_output_failed", "error", quiet=True)
# Entries with no counter.
SETTING_NOT_RELOADED = Notice("setting_not_reloaded", "warning")
OTLP_RESOURCE_ATTRIBUTES_IGNORED = Notice("otlp_resource_attributes_ignored", "warning")
# What the files source says about a file (`source/openfile.SourceNotice`) and its globs.
FILE_OPENED = Notice("file_opened")
FILE_CLOSED = Notice("file_closed")
FILE_UNREADABLE = Notice("file_unreadable", "warning")
FILE_RECOVERED = Notice("file_recovered")
FILE_RELEASED = Notice("file_released", "warning")  # a lookalike read after all
FILE_POLLED = Notice("file_polled")  # inotify cannot vouch for it
LISTING_FAILED = Notice("listing_failed", "warning")
DISCOVERY_CAPPED = Notice("discovery_capped", "warning")
PATH_MATCHES_NOTHING = Notice("path_matches_nothing", "warning")
WATCH_REARMED = Notice("watch_rearmed", "warning")
WATCH_FAILED = Notice("watch_failed", "warning")
# What a journal source says, by `journald.JournalStatus.kind`.
JOURNAL_NOTICES = {kind: Notice(f"journal_{kind}", "info" if kind in ("started", "finished")
                                else "warning")
                   for kind in ("started", "unavailable", "exited", "finished", "warning", "gap",
                                "dropped", "oversized")}


def delivery_notices(prefix: str) -> tuple[Notice, Notice, Notice]:
    """An HTTP sink's retry, failed and dropped entries (`webhook_retry`, …): all may flood."""
    return (Notice(f"{prefix}_retry", "warning", quiet=True),
            Notice(f"{prefix}_failed", "error", quiet=True),
            Notice(f"{prefix}_dropped", "warning", quiet=True))


class RateLimit:
    """Drops a quiet notice logged less than `quiet_for` seconds ago (per notice name); the next
    one logged says how many were dropped (`held_back`)."""

    def __init__(self, quiet_for: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet_for = quiet_for
        self._clock = clock
        self._held: dict[str, tuple[float, int]] = {}  # name -> (last logged, held back)
        self._lock = threading.Lock()

    def __call__(self, _logger: Any, _method: str, entry: MutableMapping[str, Any]
                 ) -> MutableMapping[str, Any]:
        notice = entry.get(_NOTICE)
        if notice is None or not notice.quiet:
            return entry
        now = self._clock()
        with self._lock:
            last, held = self._held.get(notice.name, (None, 0))
            if last is not None and now - last < self.quiet_for:
                self._held[notice.name] = (last, held + 1)
                raise structlog.DropEvent
            self._held[notice.name] = (now, 0)
        if held:
            entry["held_back"] = held
        return entry


class Redact:
    """Every field of the entry, its names too, through `redactor` (None: left as they are)."""

    def __init__(self, redactor: Redactor | None) -> None:
        self.redactor = redactor

    def __call__(self, _logger: Any, _method: str, entry: MutableMapping[str, Any]
                 ) -> MutableMapping[str, Any]:
        redactor = self.redactor
        if redactor is None:
            return entry
        keep = {k: entry.pop(k) for k in ("event", _NOTICE) if k in entry}
        cleaned: dict[str, Any] = redactor.value(entry)
        return {**cleaned, **keep}


def to_logger(_logger: Any, _method: str, entry: MutableMapping[str, Any]
              ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The entry as the wrapped logger's call: `method(name, **fields)`."""
    entry.pop(_NOTICE, None)
    name = entry.pop("event")
    return (name,), dict(entry)


class OwnLog:
    """The wrapped logger, through the processors above; `log(notice, **fields)` writes one
    entry at the notice's level."""

    def __init__(self, logger: Logger, redactor: Redactor | None, *, quiet_for: float,
                 clock: Callable[[], float]) -> None:
        self.rate_limit = RateLimit(quiet_for, clock)
        self.redact = Redact(redactor)
        self._bound = structlog.BoundLogger(
            logger, processors=[self.rate_limit, self.redact, to_logger], context={})

    def log(self, notice: Notice, **fields: Any) -> None:
        method = getattr(self._bound, notice.level)
        method(notice.name, **{_NOTICE: notice, **fields})
