"""Lines to records: sglang's line prefix, ANSI colours, and Python tracebacks as one record each.

sglang writes `[2026-01-01 12:00:00 DP0 TP3] message` once it has set up logging, and bare text
before that (launch errors) or when the interpreter itself prints an uncaught exception. A
scheduler crash is one `logger.error` call whose message is a whole traceback: only its first
line carries the prefix. Several ranks crash together and write whole blocks, so the lines of
one traceback are attributed to the rank whose prefixed line opened it; a prefixed line of
another rank interrupts it only once it has reached its `Class: message` line.

What can be lost: nothing is dropped, but a traceback longer than `max_traceback_lines` keeps its
first lines and its exception lines only (marked `truncated`), and a traceback whose end never
comes is closed at end of input, at `flush_after` seconds idle (see `tick`), or at the line cap;
one that has printed its exception line, `exception_grace` seconds after its last line.
A line that sglang's prefix does not start is taken as it is, ranks unknown.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from matcher.types import ExceptionLine, Line, Record
from matcher.wrappers import LearnedWrappers, Unwrapped, unwrap

if TYPE_CHECKING:
    from matcher.redact import Redactor

# Real escape sequences, and the same written out as text (JSON logs, `repr`ed messages).
_ANSI = re.compile(r"(?:\x1b|\\u001b|\\x1b|\\033)\[[0-9;?]*[A-Za-z]")
_PREFIX = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?P<tags>(?: [^\]\n]*)?)\] ?"
)
_RANK = re.compile(r"^[A-Za-z_]*[A-Za-z]\d+$")
TRACEBACK_START = "Traceback (most recent call last):"
# A traceback's frame line, `  File "/x/sglang/srt/managers/scheduler.py", line 3, in f`.
# A paste that starts inside a frame line (`…/sglang/srt/layers/linear.py", line 1226, in
# weight_loader`) still names its path, line and function.
FRAME_LINE = re.compile(r'^\s*(?:File "(?P<path>[^"]+)|(?P<cut>[^\s"]+)(?=", line \d+, in \S))'
                        r'", line (?P<line>\d+)(?:, in (?P<function>\S+))?')
# A frame line as only a Python traceback prints it (faulthandler's dumps have no comma before
# `in`): it opens a traceback whose first line was cut off.
_TRACEBACK_FRAME = re.compile(r'^\s*(?:File "[^"]+|[^\s"]+)", line \d+, in ')
# The carets Python 3.11+ prints under a frame's source line (`^^^^`, `~~~^^^`).
_CARETS = re.compile(r"^[\s^~]+$")
_GROUP_START = re.compile(r"^\s*\+ Exception Group Traceback \(most recent call last\):")
_CHAIN = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
# `pkg.module.ClassName: message` or a bare `ClassName` as Python prints the escaped exception.
_EXCEPTION_LINE = re.compile(r"^(?P<cls>[A-Za-z_][\w.]*)(?::(?: (?P<msg>.*))?)?$", re.DOTALL)
_CLASS_LIKE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*)?(?:Error|Exception|Exit|Interrupt|Warning|Fault|ExceptionGroup)$"
    # a class of a package's errors module, whatever its name: triton's `OutOfResources`
    # (torch's `_dynamo.exc`/`_inductor.exc` classes stay text: records name them in their
    # patterns, `BackendCompilerFailed: backend='inductor' raised:`)
    r"|^(?:[A-Za-z_]\w*\.)+(?:errors?|exceptions?|_exceptions)\.[A-Z]\w*$"
    r"|^(?:StopIteration|StopAsyncIteration)$"
)
# Inside an exception group, traceback lines are drawn behind `|` bars, between separators
# such as `+-+---------------- 1 ----------------`.
GROUP_BARS = re.compile(r"^(?:\s*\| ?)+")
_GROUP_SEPARATOR = re.compile(r"^[\s|+]*(?:\+-+|-{4,}).*$|^[\s|]*\.\.\.")
# Lines of other writers that end a bare traceback's message (uvicorn, glog, timestamps).
_OTHER_LOG_FORMAT = re.compile(
    r"^(?:(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)(?::|\s)|[IWEF]\d{4} |\d{4}-\d\d-\d\d[ T]\d"
    # NCCL's debug log (`host:pid:tid [dev] socket.c:485 NCCL WARN …`) and the native crash
    # lines: what follows an exception there is another failure, not its message going on.
    r"|\S+:\d+:\d+ \[\d+\] (?:\S+:\d+ )?NCCL (?:WARN|INFO|ERROR|TRACE|ABORT)\b"
    r"|terminate called |Fatal Python error: |thread '[^']*'(?: \(\d+\))? panicked at )"
)

# A native crash whose message comes on the next line: a C++ exception nobody caught
# (`terminate called after throwing an instance of 'c10::DistBackendError'`, then `  what():  …`)
# and a Rust panic since Rust 1.73 (`thread 'main' panicked at src/x.rs:463:40:`, then the
# message; newer Rust puts the thread's id after its name: `thread '<unnamed>' (3957) panicked
# at …`). The two lines are one record: its header the first, its exception the message (for
# C++, of the class named, `::` read as `.`: `c10.DistBackendError`).
_TERMINATE = re.compile(r"terminate called after throwing an instance of '(?P<cls>[^'\n]+)'\s*$")
_PANIC = re.compile(r"thread '[^'\n]*'(?: \(\d+\))? panicked at [^\s'][^\s]*:\d+:\d+:\s*$")
_WHAT = re.compile(r"^\s*what\(\):\s*(?P<msg>.*?)\s*$")
# A panic's stack when RUST_BACKTRACE is set (sglang-router's launcher sets it): `stack
# backtrace:`, numbered frames and their `at file:line:col` lines, and the note that closes it.
# They belong to the panic's record but are no part of its message.
_RUST_BACKTRACE = re.compile(
    r"^(?:stack backtrace:\s*$|\s+\d+: \S|\s+at \S|note: Some details are omitted)")
# Lines that start a native crash record of their own, never a message's continuation.
_NATIVE_START = re.compile(
    r"^(?:Fatal Python error: |terminate called |thread '[^'\n]*'(?: \(\d+\))? panicked at "
    r"|note: run with `RUST_BACKTRACE)")

# `…/torch/cuda/__init__.py:182: UserWarning: …` — a warning another module printed.
_PY_WARNING = re.compile(r"^\S+\.py:\d+: \w+: ")
_MAX_BLANK_RUN = 2

# What a line holds whenever the framer, with no record open, makes more of it than a plain line:
# a traceback or exception group starts, an exception line (after sglang's prefix, if any), or
# escape sequences to strip (real or written out). Hyperscan syntax over raw bytes, `^` and `$`
# at line ends; each is a superset of what `feed` tests, so a line without any is a plain line.
RECORD_START_SIGNS: tuple[bytes, ...] = (
    rb"Traceback \(most recent call last\):",
    # an exception line at the start of a line's content, after a CRI prefix, sglang's prefix
    # or any chain of wrappers (`wrappers.unwrap`): so anywhere after a line start or a
    # character a wrapper ends with
    (rb"(?:^|[\s:|>\]\)])[A-Za-z_][A-Za-z0-9_.]*"
    rb"(?:Error|Exception|Exit|Interrupt|Warning|Fault|ExceptionGroup)(?::|\r?$)"),
    rb'File "[^"\n]+", line \d+, in ',  # a traceback cut before its first line
    rb"terminate called after throwing an instance of '",  # then `what():` (`_TERMINATE`)
    rb"'(?: \(\d+\))? panicked at ",  # a Rust panic, its message on the next line (`_PANIC`)
    rb"\x1b",
    rb"\\u001b",
    rb"\\x1b",
    rb"\\033",
)

# The same signs inside a docker json-file line, where the text is a JSON string: a line's
# start is not the content's start (so unanchored), its end is an escape (`\n`, `\r`) or the
# closing quote, and escape sequences are written out (`\u001b`).
DOCKER_RECORD_START_SIGNS: tuple[bytes, ...] = (
    rb"Traceback \(most recent call last\):",
    (rb"[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault|ExceptionGroup)"
    rb"(?::|\\|\")"),
    rb'File \\"[^"\n]+\\", line \d+, in ',
    rb"terminate called after throwing an instance of '",
    rb"'(?: \(\d+\))? panicked at ",
    rb"\\u001b",
    rb"\\x1b",
    rb"\\033",
)

DEFAULT_MAX_TRACEBACK_LINES = 2000
# A traceback at its exception line is closed after this long without a next line (`Framer.tick`).
DEFAULT_EXCEPTION_GRACE = 0.1
# The longest a traceback's next line may take to write and still keep it open (`Framer._due`).
SLOW_LINE_LIMIT = 60.0
MAX_RANKS_SEEN = 4096
DEFAULT_MAX_MESSAGE_CHARS = 64 * 1024
DEFAULT_MAX_EXCEPTIONS = 32


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if ("\x1b" in text or "\\" in text) else text


@dataclass(frozen=True, slots=True)
class Prefixed:
    """A line split into sglang's prefix (if any) and its message."""

    message: str
    log_ts: str | None = None
    ranks: tuple[str, ...] = ()
    has_prefix: bool = False
    level: str | None = None  # the level word a wrapper gave the line (`wrappers.unwrap`)


def split_prefix(text: str) -> Prefixed:
    """Split `[2026-01-01 12:00:00 DP0 TP1] msg` into timestamp, ranks and message."""
    m = _PREFIX.match(text)
    if m is None:
        return Prefixed(message=text)
    ranks = tuple(t for t in m.group("tags").split() if _RANK.match(t))
    return Prefixed(message=text[m.end():], log_ts=m.group("ts"), ranks=ranks, has_prefix=True)


def parse_exception_line(text: str) -> ExceptionLine | None:
    """`torch.OutOfMemoryError: CUDA out of memory…` → class and message, if it has that shape."""
    m = _EXCEPTION_LINE.match(text)
    if m is None or not _CLASS_LIKE.match(m.group("cls")):
        return None
    return ExceptionLine(error_class=m.group("cls"), message=m.group("msg") or "")


def _starts_another_exception(text: str) -> bool:
    """`ValueError: bad value` at the start of a line: an exception line of its own, not the
    continuation of the message before it (a warning's `UserWarning: …` is left to continue)."""
    exc = parse_exception_line(text)
    return (exc is not None and bool(exc.message.strip())
            and not exc.error_class.endswith("Warning"))


@dataclass(slots=True)
class _Open:
    """A traceback being assembled."""

    key: str
    source: str
    offset: int
    end_offset: int
    header: str
    log_ts: str | None
    ranks: tuple[str, ...]
    stream: str
    lineno: int
    started: float
    last_seen: float
    lines: list[str] = field(default_factory=list)
    exceptions: list[ExceptionLine] = field(default_factory=list)
    state: str = "frames"  # frames | exception | chain
    line_count: int = 0
    truncated: bool = False
    blank_run: int = 0
    in_group: bool = False
    kind: str = "traceback"  # or "line": a lone `Class: message` line and its continuation
    # When bytes of its next line last came, that line not ended yet (`Framer.line_growing`).
    growing_at: float = field(default=0.0, compare=False)
    after_frame: bool = False  # the last line was a `File "…", line N` frame line
    # A native crash's first line (`_TERMINATE`, `_PANIC`): "terminate" or "panic", waiting in
    # state "native" for its message line; `native_class` the C++ exception's class.
    native: str = ""
    native_class: str = ""
    level: str | None = None  # the level word a wrapper gave the opening line

    def add_line(self, text: str, max_lines: int) -> None:
        self.line_count += 1
        if len(self.lines) < max_lines:
            self.lines.append(text)
        else:
            self.truncated = True

    def to_record(self) -> Record:
        while len(self.lines) > 1 and not self.lines[-1].strip():
            self.lines.pop()
        return Record(
            kind=self.kind,  # type: ignore[arg-type]
            source=self.source,
            offset=self.offset,
            end_offset=self.end_offset,
            header=self.header,
            lines=tuple(self.lines),
            exceptions=tuple(self.exceptions),
            log_ts=self.log_ts,
            ranks=self.ranks,
            stream=self.stream,  # type: ignore[arg-type]
            truncated=self.truncated,
            lineno=self.lineno,
            level=self.level,
        )


class Framer:
    """Turns the lines of one source into `Record`s. Pure: feed lines, get records back."""

    def __init__(
        self,
        *,
        max_traceback_lines: int = DEFAULT_MAX_TRACEBACK_LINES,
        max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS,
        max_exceptions: int = DEFAULT_MAX_EXCEPTIONS,
        flush_after: float = 5.0,
        exception_grace: float = DEFAULT_EXCEPTION_GRACE,
        redactor: Redactor | None = None,
    ) -> None:
        self.max_traceback_lines = max_traceback_lines
        self.max_message_chars = max_message_chars
        # A message cut at `max_message_chars` is redacted whole first (`Redactor.cut`).
        self.redactor = redactor
        self.max_exceptions = max_exceptions
        self.flush_after = flush_after
        self.exception_grace = exception_grace
        self._open: dict[str, _Open] = {}
        self._current = ""
        self._previous: Prefixed | None = None  # the line just before, if it had a prefix
        # Ranks whose prefixed lines this source has shown (bounded): the aggregator closes a
        # failure's group as soon as each of them has reported it.
        self.ranks_seen: set[str] = set()
        # Wrappers no known shape describes, learned from this source's tracebacks; and the
        # traceback just opened behind text that may be one (its first frame line will say).
        self.learned = LearnedWrappers()
        self._opening: str | None = None

    @property
    def open_tracebacks(self) -> int:
        return len(self._open)

    def idle(self) -> bool:
        """No record is open: the next line means nothing unless it starts one (or matches)."""
        return not self._open

    def renumber(self, delta: int) -> None:
        """Move the line numbers of the records being assembled by `delta`
        (`LineSplitter.renumber`)."""
        for building in self._open.values():
            building.lineno += delta

    def state(self) -> dict[str, Any]:
        """What decides which records the next lines make, comparable with `==` (a copy):
        every field but `ranks_seen` (read only by the aggregator's `early` mode) and the
        `redactor` (the same patterns wherever it is made); the learned wrappers by their
        patterns, and the current record's key only while one is open (else nothing reads it)."""
        fields = {k: v for k, v in vars(self).items()
                  if k not in ("ranks_seen", "redactor", "learned")}
        fields["learned"] = [(p.pattern, p.flags) for p in self.learned.shapes]
        if self.idle():
            fields["_current"] = ""
        return copy.deepcopy(fields)

    def open_offsets(self) -> list[int]:
        """Where each record still being assembled starts: its lines are not handed on yet."""
        return [tb.offset for tb in self._open.values()]

    def feed(self, line: Line, now: float = 0.0) -> list[Record]:
        out: list[Record] = []
        unwrapped = unwrap(strip_ansi(line.text))
        text = unwrapped.text
        if self._opening is not None:
            self._learn_wrapper(text)
        if self.learned.shapes:
            bare = self.learned.strip(text)
            if bare is not text:
                again = unwrap(bare)
                unwrapped = Unwrapped(again.text, again.rank or unwrapped.rank, True,
                                      again.level or unwrapped.level)
                text = again.text
        p = split_prefix(text)
        if unwrapped.level is not None:
            p = dataclasses.replace(p, level=unwrapped.level)
        if unwrapped.rank is not None:
            if not p.has_prefix:
                return self._feed_rank_line(line, text, unwrapped.rank, now, out, p.level)
            if not p.ranks:
                p = Prefixed(p.message, p.log_ts, (unwrapped.rank,), True, p.level)
        if p.has_prefix:
            if p.ranks and len(self.ranks_seen) < MAX_RANKS_SEEN:
                self.ranks_seen.add(" ".join(p.ranks))
            key = "[" + " ".join(p.ranks) + "]"
            self._close(key, out)
            # Another rank's block interrupts a traceback only once it has its exception line.
            cur = self._open.get(self._current)
            if cur is not None and cur.state != "frames":
                self._close(self._current, out)
            self._current = key
            self._start_or_plain(line, text, p, key, now, out)
            self._previous = p
            return out
        previous, self._previous = self._previous, None
        tb = self._open.get(self._current) or self._unfinished()
        if tb is not None and self._continue(tb, line, text, now):
            self._current = tb.key
            return out
        if tb is not None:
            self._close(tb.key, out)
        if previous is not None and text.startswith(TRACEBACK_START):
            # `logger.exception("…")`: the message line has the prefix, its traceback does not.
            p = Prefixed(text, previous.log_ts, previous.ranks)
            key = "[" + " ".join(previous.ranks) + "]"
            self._close(key, out)
        else:
            key = ""
        self._current = key
        self._start_or_plain(line, text, p, key, now, out)
        return out

    def _learn_wrapper(self, text: str) -> None:
        """The line after one that opened a traceback behind unknown text: if it is the first
        frame behind the same text, that text is a wrapper (`LearnedWrappers`); the open
        traceback gets its real header, and sglang's prefix when one stood behind it."""
        key, self._opening = self._opening, None
        tb = self._open.get(key) if key is not None else None
        if tb is None or tb.line_count != 1 or split_prefix(text).has_prefix:
            return
        header = self.learned.learn(tb.header, text)
        if header is None:
            return
        p = split_prefix(header)
        tb.header = p.message.strip()
        if p.has_prefix:
            tb.log_ts, tb.ranks = p.log_ts, p.ranks
        tb.lines[0] = f"{header} {TRACEBACK_START}".lstrip()

    def _feed_rank_line(self, line: Line, text: str, rank: str, now: float,
                        out: list[Record], level: str | None = None) -> list[Record]:
        """A line torch's launcher marked `[rankN]:`: every line of that rank carries the mark,
        and ranks' lines interleave line by line, so each goes to its own rank's traceback."""
        if len(self.ranks_seen) < MAX_RANKS_SEEN:
            self.ranks_seen.add(rank)
        key = f"[{rank}]"
        tb = self._open.get(key)
        if tb is not None and self._continue(tb, line, text, now):
            self._current = key
            return out
        if tb is not None:
            self._close(key, out)
        self._current = key
        self._start_or_plain(line, text, Prefixed(text, None, (rank,), level=level), key, now,
                             out)
        return out

    def tick(self, now: float) -> list[Record]:
        """Close what is due (the daemon calls this every turn): a traceback that has printed
        its exception line and nothing for `exception_grace` seconds — the last thing a dying
        server writes is its exception, and no next line will come to close it — and any other
        open record idle for `flush_after` seconds (a traceback cut off in its frames)."""
        out: list[Record] = []
        for key in [k for k, tb in self._open.items() if now >= self._due(tb)]:
            self._close(key, out)
        return out

    def due_in(self, now: float) -> float | None:
        """Seconds until `tick` closes an open record (None: none open)."""
        if not self._open:
            return None
        return max(0.0, min(self._due(tb) for tb in self._open.values()) - now)

    def line_growing(self, now: float) -> None:
        """Bytes of a line not ended yet came (a writer slower than a line at a time: a byte
        every 100 ms behind a slow pipe): the record that line would continue is not idle."""
        tb = self._open.get(self._current) or self._unfinished()
        if tb is not None:
            tb.growing_at = now

    def _due(self, tb: _Open) -> float:
        """When `tb` is closed if no line comes. A continuation (`During handling…`, `The above
        exception…`, an exception group's bars, a message's next line) comes at once in
        practice — Python prints a traceback in one go — and resets the clock.

        While its next line is being written (`line_growing`), a record still waiting for its
        exception line waits `flush_after` from the last byte (up to `SLOW_LINE_LIMIT` after its
        last line: no traceback line takes longer to write); one past its exception line waits
        up to `flush_after` after it, not only `exception_grace` (another rank's progress bar
        without a newline then delays its event by that much, no more)."""
        growing = tb.growing_at > tb.last_seen
        if tb.state == "exception":
            wait = self.flush_after if growing else min(self.exception_grace, self.flush_after)
            return tb.last_seen + wait
        if not growing:
            return tb.last_seen + self.flush_after
        return min(tb.growing_at, tb.last_seen + SLOW_LINE_LIMIT) + self.flush_after

    def finish(self) -> list[Record]:
        """End of input: every open traceback becomes a record, in the order they started."""
        out: list[Record] = []
        for key in sorted(self._open, key=lambda k: self._open[k].offset):
            self._close(key, out)
        return out

    # -- internals ---------------------------------------------------------------------------

    def _unfinished(self) -> _Open | None:
        """The latest traceback still in its frames: where a stray unprefixed line belongs."""
        waiting = [tb for tb in self._open.values() if tb.state != "exception"]
        return max(waiting, key=lambda tb: tb.offset) if waiting else None

    def _close(self, key: str, out: list[Record]) -> None:
        tb = self._open.pop(key, None)
        if tb is not None:
            out.append(tb.to_record())

    def _start_or_plain(
        self, line: Line, text: str, p: Prefixed, key: str, now: float, out: list[Record]
    ) -> None:
        msg = p.message
        stripped = msg.rstrip()
        group = _GROUP_START.match(stripped)
        if stripped.endswith(TRACEBACK_START) or group:
            self._begin_traceback(line, text, p, key, now, stripped, in_group=group is not None)
            return
        if _TRACEBACK_FRAME.match(stripped):
            # A traceback cut before its first line (a paste, a collector's limit): its frames
            # still say where the exception was raised (`matcher.frames`).
            self._begin(line, text, p, key, now, header="", after_frame=True)
            return
        if not stripped:
            return  # a blank line means nothing on its own
        terminate = _TERMINATE.match(stripped)
        if terminate is not None or _PANIC.match(stripped):
            self._begin_native(line, text, p, key, now, stripped, terminate)
            return
        exc = parse_exception_line(msg)
        if exc is not None and exc.error_class.endswith("Warning"):
            # `Warning: You are sending unauthenticated requests…`, `FutureWarning: …`: a library
            # talking, not an exception; a record may still know the line. (Raised, with a
            # traceback, a warning is an exception like any other.)
            exc = None
        if exc is not None:
            # `[ts TP0] AcceleratorError: …` logged without a traceback: its message may go on
            # over the following unprefixed lines, so it stays open like a traceback's last line.
            self._begin(line, text, p, key, now, header=msg, kind="line", state="exception",
                        exceptions=[exc], truncated=line.truncated)
            return
        out.append(
            Record(
                kind="line",
                source=line.source,
                offset=line.offset,
                end_offset=line.end_offset,
                header=msg,
                lines=(text,),
                exceptions=(exc,) if exc else (),
                log_ts=p.log_ts,
                ranks=p.ranks,
                stream=line.stream,
                truncated=line.truncated,
                lineno=line.lineno,
                level=p.level,
            )
        )

    def _begin_traceback(self, line: Line, text: str, p: Prefixed, key: str, now: float,
                         stripped: str, *, in_group: bool) -> None:
        """Open a traceback at its `Traceback (most recent call last):` line (or an exception
        group's first line), with what precedes it on the line as its header."""
        header = "" if in_group else stripped[: -len(TRACEBACK_START)].rstrip()
        self._begin(line, text, p, key, now, header=header, in_group=in_group)
        if header and not p.has_prefix:
            self._opening = key  # a wrapper no known shape describes, perhaps

    def _begin_native(self, line: Line, text: str, p: Prefixed, key: str, now: float,
                      stripped: str, terminate: re.Match[str] | None) -> None:
        """Open a native crash at its first line: C++'s `terminate called after throwing…`
        (`terminate`: its match, which names the class) or a Rust panic."""
        self._begin(line, text, p, key, now, header=stripped, state="native",
                    native="terminate" if terminate else "panic",
                    native_class=terminate.group("cls").replace("::", ".") if terminate
                    else "")

    def _begin(self, line: Line, text: str, p: Prefixed, key: str, now: float, **fields: Any
               ) -> None:
        """Open a record that following lines may extend (a traceback, a lone exception line)."""
        opened = _Open(key=key, source=line.source, offset=line.offset,
                       end_offset=line.end_offset, log_ts=p.log_ts, ranks=p.ranks,
                       stream=line.stream, lineno=line.lineno, started=now, last_seen=now,
                       level=p.level, **fields)
        opened.add_line(text, self.max_traceback_lines)
        self._open[key] = opened
        self._current = key

    def _continue(self, tb: _Open, line: Line, text: str, now: float) -> bool:
        """Add an unprefixed line to the open traceback if it belongs there."""
        if tb.in_group:
            if text.lstrip()[:1] in ("|", "+"):
                self._continue_group(tb, text)
                return self._accept(tb, line, text, now)
            tb.in_group = False
            tb.state = "exception"
        stripped = text.strip()
        if tb.native:
            return self._continue_native(tb, line, text, now)
        if stripped in _CHAIN:
            tb.state = "chain"
            return self._accept(tb, line, text, now)
        if tb.state == "chain":
            return self._continue_chain(tb, line, text, stripped, now)
        if text.startswith(TRACEBACK_START):
            return False  # a new traceback, not chained to this one
        if tb.state == "frames":
            after_frame, tb.after_frame = tb.after_frame, FRAME_LINE.match(text) is not None
            if _GROUP_START.match(text):
                tb.in_group = True
            elif stripped and not text[:1].isspace() and not text.startswith('File "') \
                    and not _CARETS.match(text) \
                    and not (after_frame and parse_exception_line(stripped) is None):
                # (A paste that lost the indentation: the line after a frame is its source.)
                self._add_exception(tb, text.rstrip("\r\n"))
                tb.state = "exception"
            return self._accept(tb, line, text, now)
        # state "exception": the message may go on over several lines, blank ones included
        # (torch's CUDA errors end in a newline before sglang's "Possible solutions:").
        if _GROUP_START.match(text):
            return False
        if not stripped:
            tb.blank_run += 1
            return tb.blank_run <= _MAX_BLANK_RUN and self._accept(tb, line, text, now)
        if _OTHER_LOG_FORMAT.match(text) or _PY_WARNING.match(text):
            return False
        if not text[:1].isspace() and _starts_another_exception(stripped):
            return False  # `IndexError: …` after `KeyError: …`: two failures, two records
        if tb.blank_run:
            for _ in range(tb.blank_run):
                self._append_message(tb, "")
        self._append_message(tb, text.rstrip("\r\n"))
        return self._accept(tb, line, text, now)

    def _continue_chain(self, tb: _Open, line: Line, text: str, stripped: str,
                        now: float) -> bool:
        """The line after `During handling…`/`The above exception…`: the next exception of
        the chain begins (its traceback, or its `Class: message` line alone), or the chain
        ends and the line is not this record's."""
        if not stripped:
            return self._accept(tb, line, text, now)
        tb.kind = "traceback"
        if text.startswith(TRACEBACK_START) or _GROUP_START.match(text):
            tb.state = "frames"
            tb.in_group = bool(_GROUP_START.match(text))
            return self._accept(tb, line, text, now)
        if not text[:1].isspace() and parse_exception_line(stripped) is not None:
            # A cause that carries no frames is printed as its `Class: message` line alone.
            self._add_exception(tb, text.rstrip("\r\n"))
            tb.state = "exception"
            return self._accept(tb, line, text, now)
        return False

    def _continue_native(self, tb: _Open, line: Line, text: str, now: float) -> bool:
        """A native crash's next line: its message (C++'s `what():`, a panic's next line), then
        the message's own continuation up to a blank line or another crash's first line."""
        stripped = text.strip()
        if (not stripped or _NATIVE_START.match(stripped) or _OTHER_LOG_FORMAT.match(text)
                or stripped.startswith(TRACEBACK_START)):
            return False
        if tb.state == "native":
            what = _WHAT.match(text)
            if tb.native == "terminate" and what is None:
                return False
            message = what.group("msg") if what is not None else stripped
            tb.exceptions.append(ExceptionLine(tb.native_class, self._cut(message)))
            tb.state = "exception"
            return self._accept(tb, line, text, now)
        if tb.native == "panic" and _RUST_BACKTRACE.match(text):
            return self._accept(tb, line, text, now)
        self._append_message(tb, text.rstrip("\r\n"))
        return self._accept(tb, line, text, now)

    def _append_message(self, tb: _Open, text: str) -> None:
        if not tb.exceptions:  # an exception group's header, then a frame with no `|` bar
            return
        last = tb.exceptions[-1]
        if len(last.message) < self.max_message_chars:
            joined = self._cut(last.message + "\n" + text)
            tb.exceptions[-1] = ExceptionLine(last.error_class, joined)

    def _cut(self, message: str) -> str:
        """`message` cut to `max_message_chars`, redacted before the cut when a redactor was
        given (a secret straddling the cut would otherwise leave its head)."""
        if len(message) <= self.max_message_chars:
            return message
        if self.redactor is not None:
            return self.redactor.cut(message, self.max_message_chars)
        return message[: self.max_message_chars]

    def _continue_group(self, tb: _Open, text: str) -> None:
        """A line of an exception group (`| ...`, `+---- 1 ----`): note its exception lines."""
        if _GROUP_SEPARATOR.match(text):
            return
        body = GROUP_BARS.sub("", text, count=1)
        stripped = body.strip()
        if (
            not stripped
            or body[:1].isspace()
            or "Traceback (most recent call last):" in stripped
            or stripped in _CHAIN
        ):
            return
        if parse_exception_line(stripped) is not None or not tb.exceptions:
            self._add_exception(tb, stripped)
            tb.state = "exception"
        else:
            last = tb.exceptions[-1]
            joined = self._cut(last.message + "\n" + stripped)
            tb.exceptions[-1] = ExceptionLine(last.error_class, joined)

    def _add_exception(self, tb: _Open, text: str) -> None:
        m = _EXCEPTION_LINE.match(text)
        if m is not None:
            exc = ExceptionLine(m.group("cls"), self._cut(m.group("msg") or ""))
        else:
            exc = ExceptionLine("", self._cut(text))
        if len(tb.exceptions) >= self.max_exceptions:
            tb.exceptions.pop(0)
            tb.truncated = True
        tb.exceptions.append(exc)

    def _accept(self, tb: _Open, line: Line, text: str, now: float) -> bool:
        if text.strip():
            tb.blank_run = 0
        tb.add_line(text, self.max_traceback_lines)
        tb.end_offset = line.end_offset
        tb.last_seen = now
        return True
