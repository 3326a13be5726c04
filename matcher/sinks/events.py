"""Events as JSON lines, through structlog, with every string redacted on the way out.

The field names are the contract with the operator's log pipeline (docs/events.md);
`scan --format json` and the daemon print the same dicts.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, TextIO

from matcher.redact import Redactor
from matcher.types import Batch, Event


def event_dict(event: Event, redactor: Redactor) -> dict[str, Any]:
    """The emitted form of an event; redaction happens here, so no caller can forget it."""
    d: dict[str, Any] = {
        "event": event.event,
        "pattern_id": event.pattern_id,
        "error_class": event.error_class,
        "severity": event.severity,
        "role": event.role,
        "message": event.message,
        "captures": event.captures,
        "source": event.source,
        "offset": event.offset,
        "line": event.lineno or None,
        "ranks": list(event.ranks),
        "log_ts": event.log_ts,
        "observed_ts": event.observed_ts,
        "occurrences": event.occurrences,
        "traceback": event.traceback,
        "catalog_version": event.catalog_version,
        "labels": event.labels,
    }
    if event.sglang_version is not None:
        d["sglang_version"] = event.sglang_version
    if event.fixed_in is not None:
        d["fixed_in"] = event.fixed_in.as_dict()
    if event.raised_at is not None:
        d["raised_at"] = event.raised_at.as_dict()
    if event.consequences:
        d["consequences"] = list(event.consequences)
    if event.remediation is not None:
        d["remediation"] = event.remediation
    if event.fingerprint is not None:
        d["fingerprint"] = event.fingerprint
    if event.suppressed:
        d["suppressed"] = event.suppressed
    redacted: dict[str, Any] = redactor.value(d)
    return redacted


def _human(_logger: Any, _name: str, fields: MutableMapping[str, Any]) -> str:
    """structlog's last processor for `human`: the event as `scan` prints it."""
    from matcher.report import event_text

    return event_text(dict(fields)).rstrip("\n")


class OutputClosed(Exception):
    """The reader of an event stream went away (EPIPE: `watch | jq` and jq ended, the pipe a
    supervisor gave for stdout broken). Nothing more can be told there: the daemon stops with
    exit code 1 and saves no position past what it could not tell, so that a restart (systemd's
    `Restart=on-failure`, Kubernetes) reads it again into a new stdout."""


def stream_gone(stream: TextIO) -> None:
    """After a broken pipe: what is still buffered for `stream` goes nowhere, so that the flush
    Python makes as it exits does not fail again with a traceback on stderr."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # (io.UnsupportedOperation is both)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _writable(fd: int) -> None:
    """Wait until `fd` takes more (a non-blocking pipe that a supervisor, or a parent such as
    Node.js, handed over for stdout: full, a write there fails with EAGAIN instead of waiting,
    and the rest of a line would have been torn off and lost)."""
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    poll.poll()


class _Lines:
    """What `EventWriter` prints through: each event's line written whole when structlog
    flushes it (after every event), straight to the descriptor — no buffer left holding a
    line that failed. A write that fails for want of room or of a disk (`ENOSPC`, `EIO`, not
    a broken pipe: that is `OutputClosed`) loses that line here and is told to `failed`;
    through a buffered stream, the full disk of `events_file` stopped the daemon with a
    traceback, and the metrics and every other output with it."""

    def __init__(self, stream: TextIO, failed: Callable[[OSError, int], None]) -> None:
        self._failed = failed
        self._pending: list[str] = []
        self.retarget(stream)

    def retarget(self, stream: TextIO) -> None:
        """Write to `stream` from now on (a reopened events file)."""
        self._stream = stream
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        self._fd: int | None
        try:
            self._fd = stream.fileno()
        except (OSError, ValueError):  # no descriptor (a StringIO): through the stream
            self._fd = None
        else:
            with contextlib.suppress(OSError):
                stream.flush()  # what is in its buffer goes first

    def write(self, text: str) -> int:
        self._pending.append(text)
        return len(text)

    def flush(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        try:
            if self._fd is None:
                self._stream.write(text)
                self._stream.flush()
                return
            data = memoryview(text.encode(self._encoding, "backslashreplace"))
            while data:
                try:
                    data = data[os.write(self._fd, data):]
                except BlockingIOError:  # a non-blocking pipe, full: wait, as a blocking one
                    _writable(self._fd)
        except BrokenPipeError:
            raise
        except OSError as e:
            self._failed(e, 1)  # (structlog flushes after every event)


class EventWriter:
    """Writes events to a stream: one JSON object per line (`json`), or as `scan` prints a
    failure (`human`, for a person at a terminal; `console` is its older name).

    Both go through structlog, configured here and only here, with a logger of their own so the
    daemon's diagnostics (stderr) and its events (stdout) never mix.
    """

    holds_checkpoint = True  # a write blocks (a full pipe stops reading); flushed before saving

    def __init__(self, stream: TextIO, redactor: Redactor, fmt: str = "json", *,
                 name: str = "stdout", owns_stream: bool = False,
                 failed: Callable[[str, OSError, int], None] | None = None,
                 path: Path | None = None) -> None:
        self.name = name
        # The file `stream` was opened from (the events file): followed when logrotate's
        # `create` puts another file there (`_follow_path`).
        self._path = path
        self.format = fmt
        self._stream = stream
        self._owns_stream = owns_stream
        self._redactor = redactor
        self.gone = False  # its reader went away (`OutputClosed`)
        import structlog  # here: `scan` makes event dicts only, and the import costs 30 ms

        renderer: Any = _human if fmt in ("human", "console") \
            else structlog.processors.JSONRenderer(serializer=_dumps)
        # `failed(name, error, events)`: events this output could not write (`_Lines`),
        # `Telemetry.output_failed` in the daemon; without it such an error is raised.
        self._lines = _Lines(stream, self._failed)
        self._on_failed = failed
        self._log = structlog.wrap_logger(
            structlog.PrintLogger(self._lines),  # type: ignore[arg-type]
            processors=[renderer], cache_logger_on_first_use=True)

    def accept(self, events: list[Event]) -> None:
        self.write([event_dict(e, self._redactor) for e in events])

    def write(self, dicts: list[dict[str, Any]]) -> None:
        """Print event dicts that `event_dict` already made (and redacted); `OutputClosed` when
        the stream's reader is gone (and from then on)."""
        if self.gone:
            raise OutputClosed(self.name)
        if self._path is not None and dicts:
            self._follow_path(self._path)
        try:
            for d in dicts:
                fields = dict(d)
                name = fields.pop("event")
                self._log.msg(name, **fields)
        except BrokenPipeError as e:
            self._lose()
            raise OutputClosed(self.name) from e

    def _lose(self) -> None:
        self.gone = True
        stream_gone(self._stream)

    def _follow_path(self, path: Path) -> None:
        """Reopen the events file when its path names another file now: logrotate's `create`
        renamed it away and made a new one, with no `postrotate` SIGHUP (the events went on
        into the rotated file, and the new one stayed empty). A path with no file for now is
        left alone while the file written to is still linked somewhere (renamed: `create`
        makes the new one right after its rename), and made anew once that file is deleted
        (`rm`, or a rotation with `rotate 0`): the events went on into a file no one could
        read again, until a reload."""
        try:
            there = os.stat(path)
        except FileNotFoundError:
            if self._linked():
                return
        except OSError:
            return
        else:
            if self._holds(there):
                return
        try:
            stream: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept
        except OSError as e:
            self._failed(e, 0)  # said; the old file still takes the events
            return
        old, self._stream = self._stream, stream
        self._lines.retarget(stream)
        with contextlib.suppress(OSError):
            old.close()

    def is_at(self, path: str | os.PathLike[str]) -> bool:
        """Whether `path` still names the file this writes to. logrotate's `create` renames
        it away and makes a new one: a reload (SIGHUP, logrotate's `postrotate`) then opens
        the new one instead of writing on into the rotated file."""
        try:
            return self._holds(os.stat(path))
        except OSError:
            return False

    def identity(self) -> tuple[int, int] | None:
        """(device, inode) of the file written to now (None: not a file, or closed): the
        daemon never reads it back, whatever path leads to it."""
        try:
            st = os.fstat(self._stream.fileno())
        except (OSError, ValueError):
            return None
        return st.st_dev, st.st_ino

    def _linked(self) -> bool:
        """Whether the file written to still has a name (or cannot be asked)."""
        try:
            return os.fstat(self._stream.fileno()).st_nlink > 0
        except (OSError, ValueError):
            return True

    def _holds(self, there: os.stat_result) -> bool:
        """Whether the file `there` describes is the one this writes to."""
        try:
            own = os.fstat(self._stream.fileno())
        except (OSError, ValueError):
            return False
        return (there.st_dev, there.st_ino) == (own.st_dev, own.st_ino)

    def _failed(self, error: OSError, events: int) -> None:
        if self._on_failed is None:
            raise error
        self._on_failed(self.name, error, events)

    # -- Sink --------------------------------------------------------------------------------

    def emit(self, batch: Batch) -> None:
        self.write(list(batch.dicts))

    def flush(self) -> None:
        if self.gone:
            raise OutputClosed(self.name)
        try:
            self._lines.flush()
            self._stream.flush()
        except ValueError:
            pass  # closed
        except BrokenPipeError as e:
            self._lose()
            raise OutputClosed(self.name) from e

    def close(self) -> None:
        if not self.gone:
            self.flush()
        if self._owns_stream:
            self._stream.close()


def _dumps(obj: Any, **kw: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)
