"""The systemd journal of a unit, followed through `journalctl --follow --output=json`.

A host that runs sglang as `sglang.service` keeps its log in the journal, not in a file: this
source runs journalctl as a subprocess, turns each journal entry into `Line`s and remembers
each entry's `__CURSOR`, so that the daemon can checkpoint "the cursor of the last entry fully
processed" and a later start resumes exactly after it.

What `--unit=sglang.service` reads is journalctl's, not ours: the unit's own output, systemd's
messages about it (`Main process exited, code=killed, status=9/KILL`, `Failed with result
'oom-kill'`), its core dumps, and journald's notices about it. Following needs a journal
directory (the system's, or `directory=`): journalctl cannot follow single `--file`s, so
`files=` is for finite reads of a copied journal.

What can be lost, and what we say about it:

- **journald's rate limit** (`RateLimitBurst=`, per unit) drops messages before they are ever
  written. journald writes a notice, "Suppressed N messages from sglang.service", which
  `journalctl --unit` shows with the unit's own entries; we pass its text on as a line and
  report it as a `dropped` status with the count. The dropped lines themselves are gone.
- **Entries rotated or vacuumed away while we were not reading** (the daemon stopped for
  longer than the journal's retention). journalctl says nothing about it, and its
  `--after-cursor` even skips one more entry when the cursor's own entry is gone (measured
  with systemd 252). So we resume with `--cursor` instead, which shows the checkpointed entry
  itself when the journal still holds it: we drop that one, and when the first entry is a
  different one we report a `gap` status and read on from there, losing nothing more. A gap
  after which nothing has been written yet is not seen.
- **Lines journald itself splits**: a line longer than `LineMax=` (48K by default) reaches the
  journal as several entries, so as several lines here.
- **An entry larger than `max_entry_bytes`** of JSON is skipped with an `oversized` status
  (its cursor still counts, so a checkpoint can pass it). A line of a message longer than
  `max_line_bytes` keeps its start and is marked `truncated`, as in `decode`.
- **A unit that does not exist** is not an error to journalctl: it follows it and shows
  nothing. Nor is a user without the right to read the system journal, when the user has a
  journal of its own: journalctl prints a hint, which we report as a `warning`.

Offsets are entry sequence numbers of this reader, starting at `first_offset`: the lines of
entry `n` all have `offset == n`, and only its last line has `end_offset == n + 1`, so that a
checkpoint taken after any line is `cursor_for_checkpoint(end_offset)` — the cursor of the
last entry whose lines were all processed. The numbers are not kept across restarts of the
daemon; cursors are.

Memory is bounded: a reader thread parses journalctl's output into a queue bounded in entries
and bytes; when the caller is slow the thread waits, the pipe fills, and journalctl waits on
its write. Cursors are remembered for the last `cursor_history` entries handed out.

journalctl dying (not installed, no permission, killed) never raises: `poll()` returns a
`JournalStatus` that says what happened and what to do, and a later `poll()` or `read()`
starts it again after a growing delay, resuming after the last entry read. Without `follow`
(a finite read of a copied journal) the source finishes instead. `read`, `poll` and `close`
are meant to be called from one thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

from matcher.backoff import Backoff
from matcher.decode import DEFAULT_MAX_LINE_BYTES
from matcher.types import Line

DEFAULT_MAX_ENTRY_BYTES = 8 * 1024 * 1024

# journald's "Suppressed N messages from UNIT" notice (sd-messages.h: SD_MESSAGE_JOURNAL_DROPPED).
MESSAGE_ID_JOURNAL_DROPPED = "a596d6fe7bfa4994828e72309e95d61e"

# The fields we need besides those journalctl always prints with --output=json
# (__CURSOR, __REALTIME_TIMESTAMP, __MONOTONIC_TIMESTAMP, _BOOT_ID): less to pipe and parse.
OUTPUT_FIELDS = ("MESSAGE", "MESSAGE_ID", "N_DROPPED")

_CURSOR_IN_JSON = re.compile(rb'"__CURSOR"\s*:\s*"([^"\\]+)"')
_STDERR_LINE_CHARS = 500
_STDERR_TAIL_LINES = 5

HINT_GROUP = (
    "the user running sglang-matcher may not read the system journal: add it to the "
    "systemd-journal group (usermod -aG systemd-journal USER, or SupplementaryGroups="
    "systemd-journal in its unit) and restart it, or run it as root"
)
HINT_INSTALL = (
    "install systemd's journalctl (Debian/Ubuntu: apt-get install systemd) or set the "
    "path of journalctl in the journal source's configuration"
)
HINT_FOLLOW_FILE = (
    "journalctl cannot follow single journal files (--file): give their directory "
    "(--directory) instead, or read them without following"
)

StatusKind = Literal[
    "started", "unavailable", "exited", "finished", "warning", "gap", "dropped", "oversized"
]


@dataclass(frozen=True, slots=True)
class JournalStatus:
    """Something the operator should hear about the journal source itself (not about sglang).

    `unavailable`: journalctl could not be run; `exited`: it stopped while following (it is
    started again after `retry_in` seconds); `finished`: a finite read ended; `warning`:
    journalctl said something on stderr while running; `gap`: entries may have been lost
    between the checkpoint and the next entry; `dropped`: journald's rate limit dropped
    `dropped` messages; `oversized`: an entry too large to read was skipped; `started`: a
    journalctl process was started (`argv` says how).
    """

    kind: StatusKind
    message: str
    returncode: int | None = None
    retry_in: float | None = None
    dropped: int = 0
    argv: tuple[str, ...] = ()


def journalctl_argv(
    units: Sequence[str],
    *,
    journalctl: str = "journalctl",
    files: Sequence[str | os.PathLike[str]] = (),
    directory: str | os.PathLike[str] | None = None,
    follow: bool = True,
    cursor: str | None = None,
    since: float | None = None,
    from_beginning: bool = False,
) -> list[str]:
    """The journalctl command line for one start.

    Where it starts: at the entry `cursor` (shown again, so that we can tell whether it still
    exists — see the module docstring), else at the wall-clock time `since` (a restart that
    had not read any entry yet), else at the beginning, else at the end (`--lines=0`).
    `--no-tail` matters: with `--follow`, journalctl otherwise shows only the last 10 entries
    after a cursor. `--all` keeps fields over 4096 bytes, which journalctl's JSON output
    otherwise replaces by null (sglang's `server_args=` line is 20 KB).
    """
    argv = [
        journalctl,
        "--output=json",
        "--all",
        "--no-pager",
        "--output-fields=" + ",".join(OUTPUT_FIELDS),
    ]
    if follow:
        argv.append("--follow")
    argv += [f"--file={os.fspath(f)}" for f in files]
    if directory is not None:
        argv.append(f"--directory={os.fspath(directory)}")
    argv += [f"--unit={unit}" for unit in units]
    if cursor is not None:
        argv += [f"--cursor={cursor}", "--no-tail"]
    elif since is not None:
        argv += [f"--since=@{since:.6f}", "--no-tail"]
    elif from_beginning:
        argv.append("--no-tail")
    else:
        argv.append("--lines=0")
    return argv


def realtime_to_rfc3339(usec: int) -> str:
    """`__REALTIME_TIMESTAMP` (microseconds since the epoch) as RFC 3339 in UTC."""
    seconds, micros = divmod(usec, 1_000_000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{micros:06d}Z"


def same_entry(cursor_a: str, cursor_b: str) -> bool:
    """Whether two cursors name the same entry: same sequence-number space and number.

    A cursor is `s=…;i=…;b=…;m=…;t=…;x=…`; `s` and `i` identify the entry even when the
    file that holds it was archived and renamed since.
    """
    a, b = _cursor_fields(cursor_a), _cursor_fields(cursor_b)
    if "s" in a and "i" in a and "s" in b and "i" in b:
        return (a["s"], a["i"]) == (b["s"], b["i"])
    return cursor_a == cursor_b


def _cursor_fields(cursor: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in cursor.split(";") if "=" in part)


@dataclass(frozen=True, slots=True)
class _Entry:
    """One journal entry as parsed by the reader thread; offsets are given out by `read`."""

    cursor: str | None
    message: bytes | None
    realtime: int | None = None
    message_id: str | None = None
    n_dropped: int = 0
    size: int = 0
    oversized: bool = False


def _field_bytes(value: object) -> bytes | None:
    """A field of journalctl's JSON: a string, a list of byte values (binary or invalid UTF-8,
    or control characters such as ANSI colors), null, or a list of those when the field
    occurs several times in the entry (joined by newlines)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogatepass")
    if isinstance(value, list):
        if all(isinstance(v, int) for v in value):
            return bytes(v & 0xFF for v in value)
        parts = [_field_bytes(v) for v in value]
        return b"\n".join(p for p in parts if p is not None)
    return str(value).encode("utf-8")


def _field_text(value: object) -> str | None:
    raw = _field_bytes(value)
    return None if raw is None else raw.decode("utf-8", errors="replace")


def parse_entry(raw: bytes) -> _Entry:
    """One line of `journalctl --output=json` → `_Entry`; raises ValueError when it is not one."""
    obj = json.loads(raw)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    cursor = _field_text(obj.get("__CURSOR"))
    realtime: int | None
    try:
        realtime = int(_field_text(obj.get("__REALTIME_TIMESTAMP")) or "")
    except ValueError:
        realtime = None
    n_dropped = 0
    message_id = _field_text(obj.get("MESSAGE_ID"))
    if message_id == MESSAGE_ID_JOURNAL_DROPPED:
        try:
            n_dropped = int(_field_text(obj.get("N_DROPPED")) or "0")
        except ValueError:
            n_dropped = 0
    return _Entry(
        cursor=cursor,
        message=_field_bytes(obj.get("MESSAGE")),
        realtime=realtime,
        message_id=message_id,
        n_dropped=n_dropped,
        size=len(raw),
    )


def message_lines(message: bytes, max_line_bytes: int) -> list[tuple[str, bool]]:
    """A MESSAGE's lines as (text, truncated): split at newlines, a final newline ending the
    last line rather than starting an empty one, `\\r` before a newline dropped, invalid UTF-8
    replaced by U+FFFD."""
    pieces = message.split(b"\n")
    if len(pieces) > 1 and pieces[-1] == b"":
        pieces.pop()
    out: list[tuple[str, bool]] = []
    for piece in pieces:
        if piece.endswith(b"\r"):
            piece = piece[:-1]
        truncated = len(piece) > max_line_bytes
        if truncated:
            piece = piece[:max_line_bytes]
        out.append((piece.decode("utf-8", errors="replace"), truncated))
    return out


class _EntryQueue:
    """FIFO between the reader thread and the caller, bounded in entries and in bytes.

    An entry larger than the byte budget is let in when the queue is empty, so one huge
    entry cannot block the reader for ever.
    """

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self._items: deque[_Entry] = deque()
        self._bytes = 0
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._closed = False
        self.cond = threading.Condition()

    def put(self, entry: _Entry, stop: threading.Event) -> bool:
        with self.cond:
            while (
                self._items
                and not self._closed
                and not stop.is_set()
                and (
                    len(self._items) >= self._max_entries
                    or self._bytes + entry.size > self._max_bytes
                )
            ):
                self.cond.wait(0.5)
            if self._closed or stop.is_set():
                return False
            self._items.append(entry)
            self._bytes += entry.size
            self.cond.notify_all()
            return True

    def take(self, n: int) -> list[_Entry]:
        with self.cond:
            out: list[_Entry] = []
            while self._items and len(out) < n:
                entry = self._items.popleft()
                self._bytes -= entry.size
                out.append(entry)
            if out:
                self.cond.notify_all()
            return out

    def __len__(self) -> int:
        with self.cond:
            return len(self._items)

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self._closed = True
            self.cond.notify_all()


@dataclass(slots=True)
class _Run:
    """One journalctl process and its two reader threads."""

    proc: subprocess.Popen[bytes]
    argv: tuple[str, ...]
    started: float
    resume_cursor: str | None
    stop: threading.Event = field(default_factory=threading.Event)
    stdout_thread: threading.Thread | None = None
    stderr_thread: threading.Thread | None = None
    entries: int = 0
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=_STDERR_TAIL_LINES))


def _check_what_to_read(units: Sequence[str], files: Sequence[str | os.PathLike[str]],
                        directory: str | os.PathLike[str] | None, *, follow: bool) -> None:
    """ValueError unless there is something journalctl can read, and follow if asked."""
    if not units and not files and directory is None:
        raise ValueError("a journal source needs a unit, a journal file or a directory")
    if follow and files:
        # systemd 252: "Failed to get journal fd: Destination address required" once an
        # entry is written, and exit status 0; or nothing at all with --lines=0.
        raise ValueError(HINT_FOLLOW_FILE)


class JournalSource:
    """Follows the journal of one or more units; see the module docstring for what it loses."""

    def __init__(
        self,
        units: Sequence[str],
        *,
        name: str | None = None,
        journalctl: str = "journalctl",
        files: Sequence[str | os.PathLike[str]] = (),
        directory: str | os.PathLike[str] | None = None,
        after_cursor: str | None = None,
        from_beginning: bool = False,
        follow: bool = True,
        first_offset: int = 0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        max_queue_entries: int = 4096,
        max_queue_bytes: int = 16 * 1024 * 1024,
        cursor_history: int = 32768,
        restart_delay: float = 1.0,
        max_restart_delay: float = 60.0,
        stop_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        _check_what_to_read(units, files, directory, follow=follow)
        self.units = tuple(units)
        self.name = name or "journal:" + ",".join(self.units or ("*",))
        self.journalctl = journalctl
        self.files = tuple(Path(f) for f in files)
        self.directory = Path(directory) if directory is not None else None
        self.follow = follow
        self.from_beginning = from_beginning
        self.max_line_bytes = max_line_bytes
        self.max_entry_bytes = max_entry_bytes
        self.restart_delay = restart_delay
        self.max_restart_delay = max_restart_delay
        self.stop_timeout = stop_timeout
        self._clock = clock
        self._wall_clock = wall_clock
        self._queue = _EntryQueue(max_queue_entries, max_queue_bytes)
        self._statuses: deque[JournalStatus] = deque(maxlen=256)
        self._run: _Run | None = None
        self._resume_cursor = after_cursor  # the last entry read from journalctl, across runs
        self._since: float | None = None  # wall time of a first start at the end
        self._next_offset = first_offset
        self._lineno = 0
        self._remember_cursors(after_cursor, first_offset, cursor_history)
        self._backoff = Backoff(restart_delay, max_restart_delay)
        self._restart_at: float | None = 0.0  # start on the first poll()/read()
        self._finished = False
        self._closed = False

    def _remember_cursors(self, after_cursor: str | None, first_offset: int,
                          history: int) -> None:
        """The memory of the cursors of the last `history` entries by sequence number
        (`cursor_at`). `after_cursor` stands at `first_offset - 1`, so that "nothing processed
        yet" checkpoints where reading started."""
        self._cursors: deque[str | None] = deque(maxlen=max(history, 1))
        self._cursor_base = first_offset  # offset of self._cursors[0]
        if after_cursor is not None:
            self._cursors.append(after_cursor)
            self._cursor_base -= 1

    # -- what the caller uses -------------------------------------------------------------

    def read(self, max_entries: int = 1024) -> list[Line]:
        """The lines of up to `max_entries` entries available now; never blocks, never raises
        for journalctl's sake (statuses wait for `poll()`)."""
        self._tick()
        lines: list[Line] = []
        for entry in self._queue.take(max_entries):
            lines.extend(self._lines(entry))
        return lines

    def poll(self) -> list[JournalStatus]:
        """Start or restart journalctl when due, and what happened since the last call."""
        self._tick()
        out = []
        while self._statuses:
            out.append(self._statuses.popleft())
        return out

    def wait(self, timeout: float) -> bool:
        """Block up to `timeout` seconds until there is something to `read()` or `poll()`.

        For callers with nothing else to wait on (tests, a daemon that follows only the
        journal); restarts that fall due meanwhile happen here too.
        """
        deadline = time.monotonic() + timeout
        while True:
            self._tick()
            with self._queue.cond:
                if self._ready():
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._queue.cond.wait(min(left, 0.1))

    def _ready(self) -> bool:
        if self._queue._items or self._statuses or self._finished or self._closed:
            return True
        run = self._run
        return run is not None and not (run.stdout_thread and run.stdout_thread.is_alive())

    def cursor_at(self, offset: int) -> str | None:
        """The `__CURSOR` of the entry with sequence number `offset`, if still remembered."""
        i = offset - self._cursor_base
        if 0 <= i < len(self._cursors):
            return self._cursors[i]
        return None

    def cursor_for_checkpoint(self, end_offset: int) -> str | None:
        """The cursor to save after processing the lines up to `end_offset`: that of the last
        entry all of whose lines were processed (resume with `after_cursor=` it). At
        `first_offset` that is `after_cursor`; None means keep the checkpoint you have (none
        was processed yet, or it is older than `cursor_history` entries)."""
        return self.cursor_at(end_offset - 1)

    @property
    def finished(self) -> bool:
        """A finite read (`follow=False`) has ended and everything has been read."""
        return self._finished and self._run is None and not len(self._queue)

    @property
    def state(self) -> Literal["waiting", "running", "finished", "closed"]:
        if self._closed:
            return "closed"
        if self._run is not None:
            return "running"
        return "finished" if self._finished else "waiting"

    @property
    def pid(self) -> int | None:
        return self._run.proc.pid if self._run is not None else None

    def close(self) -> None:
        """Stop journalctl: SIGTERM, then SIGKILL after `stop_timeout` seconds."""
        if self._closed:
            return
        self._closed = True
        self._queue.close()
        if self._run is not None:
            self._stop_run(self._run)
            self._run = None

    def __enter__(self) -> JournalSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lifecycle ------------------------------------------------------------------------

    def _tick(self) -> None:
        if self._closed:
            return
        run = self._run
        if run is not None:
            self._check_ended(run)
        due = self._restart_at
        if self._run is None and not self._finished and due is not None and self._clock() >= due:
            self._start()

    def _check_ended(self, run: _Run) -> None:
        """journalctl has stopped once its output is read to the end and it has exited."""
        for thread in (run.stdout_thread, run.stderr_thread):
            if thread is not None and thread.is_alive():
                return
        returncode = run.proc.poll()
        if returncode is None:
            return
        self._close_pipes(run)
        self._run = None
        if run.entries or self._clock() - run.started >= self.max_restart_delay:
            self._backoff.reset()  # it had worked: start again from the short delay
        if not self.follow and returncode == 0:
            self._finished = True
            self._statuses.append(JournalStatus(
                "finished", f"{self.name}: read to the end of the journal", returncode=0))
            return
        detail = _describe_exit(returncode, list(run.stderr_tail))
        if not self.follow:
            self._finished = True
            self._statuses.append(JournalStatus(
                "exited", f"{self.name}: journalctl {detail}", returncode=returncode))
            return
        delay = self._backoff.next_delay()
        self._restart_at = self._clock() + delay
        self._statuses.append(JournalStatus(
            "exited",
            f"{self.name}: journalctl {detail}; starting it again in {delay:g} s",
            returncode=returncode,
            retry_in=delay,
        ))

    def _start(self) -> None:
        first_start = self._since is None and self._resume_cursor is None
        since = None
        if self._resume_cursor is None and not self.from_beginning and self._since is not None:
            since = self._since  # restarted before any entry came: from the first start on
        argv = journalctl_argv(
            self.units,
            journalctl=self.journalctl,
            files=self.files,
            directory=self.directory,
            follow=self.follow,
            cursor=self._resume_cursor,
            since=since,
            from_beginning=self.from_beginning,
        )
        if first_start:
            self._since = self._wall_clock()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": "", "LC_ALL": "C"},
                close_fds=True,
            )
        except OSError as exc:
            self._spawn_failed(argv, exc)
            return
        self._restart_at = None
        run = _Run(proc=proc, argv=tuple(argv), started=self._clock(),
                   resume_cursor=self._resume_cursor)
        run.stdout_thread = threading.Thread(
            target=self._read_stdout, args=(run,), name=f"{self.name} stdout", daemon=True)
        run.stderr_thread = threading.Thread(
            target=self._read_stderr, args=(run,), name=f"{self.name} stderr", daemon=True)
        self._run = run
        self._statuses.append(JournalStatus(
            "started", f"{self.name}: started {' '.join(argv)}", argv=tuple(argv)))
        run.stdout_thread.start()
        run.stderr_thread.start()

    def _spawn_failed(self, argv: list[str], exc: OSError) -> None:
        if isinstance(exc, FileNotFoundError):
            what = f"{self.journalctl!r} was not found: {HINT_INSTALL}"
        elif isinstance(exc, PermissionError):
            what = f"{self.journalctl!r} cannot be executed ({exc.strerror}): {HINT_INSTALL}"
        else:
            what = f"{self.journalctl!r} could not be started: {exc}"
        if not self.follow:
            self._finished = True
            self._restart_at = None
            self._statuses.append(JournalStatus("unavailable", f"{self.name}: {what}",
                                                argv=tuple(argv)))
            return
        delay = self._backoff.next_delay()
        self._restart_at = self._clock() + delay
        self._statuses.append(JournalStatus(
            "unavailable", f"{self.name}: {what}; trying again in {delay:g} s",
            retry_in=delay, argv=tuple(argv)))

    def _stop_run(self, run: _Run) -> None:
        run.stop.set()
        self._queue.wake()
        proc = run.proc
        if proc.poll() is None:
            try:
                proc.terminate()
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            except ProcessLookupError:
                pass
        for thread in (run.stdout_thread, run.stderr_thread):
            if thread is not None:
                thread.join(self.stop_timeout)
        self._close_pipes(run)

    @staticmethod
    def _close_pipes(run: _Run) -> None:
        for pipe in (run.proc.stdout, run.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    # -- the reader threads ---------------------------------------------------------------

    def _read_stdout(self, run: _Run) -> None:
        stream = run.proc.stdout
        assert stream is not None
        expect = run.resume_cursor  # --cursor shows this entry again when it still exists
        try:
            while not run.stop.is_set():
                raw = stream.readline(self.max_entry_bytes + 1)
                if not raw:
                    return
                if len(raw) > self.max_entry_bytes and not raw.endswith(b"\n"):
                    entry = self._skip_oversized(stream, raw)
                elif not raw.strip():
                    continue
                else:
                    try:
                        entry = parse_entry(raw)
                    except ValueError as exc:
                        self._statuses.append(JournalStatus(
                            "warning",
                            f"{self.name}: journalctl printed something that is not a "
                            f"journal entry ({exc}): {raw[:200]!r}"))
                        continue
                if expect is not None:
                    if entry.cursor is not None and same_entry(entry.cursor, expect):
                        expect = None
                        continue
                    self._statuses.append(JournalStatus(
                        "gap",
                        f"{self.name}: the journal no longer holds the entry we stopped at "
                        f"({expect}); it was rotated or vacuumed away while we were not "
                        f"reading, so entries written between it and "
                        f"{_when(entry.realtime)} may be lost"))
                    expect = None
                if entry.n_dropped:
                    self._statuses.append(JournalStatus(
                        "dropped",
                        f"{self.name}: journald dropped {entry.n_dropped} messages of the unit "
                        f"(rate limit): raise RateLimitBurst= in journald.conf or "
                        f"LogRateLimitBurst= in the unit, or set LogRateLimitIntervalSec=0",
                        dropped=entry.n_dropped))
                if entry.cursor is not None:
                    self._resume_cursor = entry.cursor
                run.entries += 1
                if not self._queue.put(entry, run.stop):
                    return
        except (OSError, ValueError):
            return  # the pipe was closed by close()
        finally:
            self._queue.wake()

    def _skip_oversized(self, stream: IO[bytes], head: bytes) -> _Entry:
        """Read past an entry of more than `max_entry_bytes`, keeping only its cursor."""
        size = len(head)
        match = _CURSOR_IN_JSON.search(head)
        cursor = match.group(1).decode("ascii", "replace") if match else None
        window = head[-256:]
        while True:
            more = stream.readline(1024 * 1024)
            if not more:
                break
            size += len(more)
            if cursor is None:
                match = _CURSOR_IN_JSON.search(window + more)
                if match:
                    cursor = match.group(1).decode("ascii", "replace")
            window = (window + more)[-256:]
            if more.endswith(b"\n"):
                break
        self._statuses.append(JournalStatus(
            "oversized",
            f"{self.name}: skipped a journal entry of {size} bytes of JSON, more than "
            f"max_entry_bytes={self.max_entry_bytes} (cursor {cursor})"))
        return _Entry(cursor=cursor, message=None, size=min(size, 4096), oversized=True)

    def _read_stderr(self, run: _Run) -> None:
        stream = run.proc.stderr
        assert stream is not None
        try:
            while True:
                raw = stream.readline(64 * 1024)
                if not raw:
                    return
                text = raw.decode("utf-8", errors="replace").rstrip()
                if not text:
                    continue
                text = text[:_STDERR_LINE_CHARS]
                run.stderr_tail.append(text)
                if text.startswith("Hint:") or "not seeing messages from other users" in text:
                    self._statuses.append(JournalStatus(
                        "warning", f"{self.name}: journalctl: {text} — {HINT_GROUP}"))
        except (OSError, ValueError):
            return
        finally:
            self._queue.wake()

    # -- entries to lines -----------------------------------------------------------------

    def _lines(self, entry: _Entry) -> list[Line]:
        offset = self._next_offset
        self._next_offset += 1
        if len(self._cursors) == self._cursors.maxlen:
            self._cursor_base += 1
        self._cursors.append(entry.cursor)
        if entry.message is None:
            return []
        ts = realtime_to_rfc3339(entry.realtime) if entry.realtime is not None else None
        pieces = message_lines(entry.message, self.max_line_bytes)
        lines = []
        for i, (text, truncated) in enumerate(pieces):
            self._lineno += 1
            last = i == len(pieces) - 1
            lines.append(Line(
                text=text,
                source=self.name,
                offset=offset,
                end_offset=offset + 1 if last else offset,
                stream="",
                ts=ts,
                truncated=truncated,
                lineno=self._lineno,
            ))
        return lines


def _when(realtime: int | None) -> str:
    return realtime_to_rfc3339(realtime) if realtime is not None else "the next entry"


def _describe_exit(returncode: int, stderr: list[str]) -> str:
    if returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        how = f"exited with status {returncode}"
    said = "; ".join(stderr)
    text = f"{how}: {said}" if said else how
    lowered = said.lower()
    if "insufficient permissions" in lowered or "permission denied" in lowered:
        text += f" — {HINT_GROUP}"
    elif "failed to get journal fd" in lowered:
        text += f" — {HINT_FOLLOW_FILE}"
    elif "no such file or directory" in lowered:
        text += " — check the journal file or directory given to the journal source"
    return text
