"""A traceback's frames: where an exception was raised, as the traceback prints it.

A message often does not say what failed — a bare `AssertionError`, `KeyError: '5e25…'`,
`IndexError: list index out of range` — but the frame that raised it does: its file, its
function and the source line Python prints under it. The engine matches catalog records that
name a frame (`raisedIn`) by the frame, the aggregator fingerprints unknown errors by it, and
release learning reads which sglang file raised a message. All read frames here, one way.

Which frame identifies an exception: the innermost one in sglang's own code (a path holding
`sglang/`) — a `KeyError` raised by a dict lookup in `tokenizer_manager.py` is that line's
failure, and a torch error raised deep in torch is reported at the sglang line that called
torch — and the innermost frame of all when it is not sglang's, so a record can name a frame
of torch or triton too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from matcher.framing import FRAME_LINE, GROUP_BARS, TRACEBACK_START, parse_exception_line
from matcher.types import Record


@dataclass(frozen=True, slots=True)
class Frame:
    """One `File "path", line N, in function` line and the source line printed under it."""

    path: str  # as printed, with `\` made `/`
    line: int
    function: str  # "" when the traceback does not print it
    source: str  # stripped; "" when none is printed (a frozen module, a cut paste)

    @property
    def ours(self) -> bool:
        """In sglang's own code: an installed tree (`…/sglang/srt/x.py`) or a checkout."""
        return "sglang/" in self.path

    @property
    def package_path(self) -> str:
        """`sglang/srt/managers/x.py` — the path from the package on, as catalogs name it."""
        i = self.path.rfind("sglang/")
        return self.path[i:] if i >= 0 else self.path


def _body(line: str) -> str:
    """A line without the `|` bars an exception group draws in front of its tracebacks."""
    m = GROUP_BARS.match(line)
    return line[m.end():] if m else line


def frames_by_exception(record: Record) -> tuple[tuple[Frame, ...], ...]:
    """The frames printed above each of `record.exceptions`, outermost first, aligned with them.

    A chained traceback prints each exception after its own frames; an exception printed with
    no frames of its own (a cause without a traceback) gets none. A `Traceback (most recent
    call last):` line starts a new run of frames.

    Kept for the records read last (`_READ`): matching a traceback reads its frames for the
    records named by frame and again for the file that raised it: kept, each traceback's
    frames are read once.
    """
    kept = _READ.get(id(record))
    if kept is not None and kept[0] is record:
        return kept[1]
    found = _read_frames(record)
    if len(_READ) >= _READ_MAX:
        _READ.clear()
    _READ[id(record)] = (record, found)
    return found


# Records whose frames were read last, by identity (each entry holds its record, so no other
# object takes its id while it is here); emptied when full.
_READ: dict[int, tuple[Record, tuple[tuple[Frame, ...], ...]]] = {}
_READ_MAX = 256


def _read_frames(record: Record) -> tuple[tuple[Frame, ...], ...]:
    exceptions = record.exceptions
    out: list[tuple[Frame, ...]] = []
    current: list[Frame] = []
    pending: re.Match[str] | None = None  # a frame line whose source line may come next
    for raw in record.lines:
        text = _body(raw)
        stripped = text.strip()
        frame_line = FRAME_LINE.match(text)
        if pending is not None:
            expected = exceptions[len(out)].error_class if len(out) < len(exceptions) else ""
            printed_next = (frame_line is not None or stripped.endswith(TRACEBACK_START)
                            or _prints(expected, stripped)
                            or parse_exception_line(stripped) is not None)
            source = "" if printed_next else stripped
            current.append(_frame(pending, source))
            pending = None
            if source:
                continue
        if frame_line is not None:
            pending = frame_line
        elif stripped.endswith(TRACEBACK_START):
            current = []
        elif len(out) < len(exceptions) and _prints(exceptions[len(out)].error_class, stripped):
            out.append(tuple(current))
            current = []
    if pending is not None:
        current.append(_frame(pending, ""))
    while len(out) < len(exceptions):
        # An exception line the walk did not find as printed (a message rewrapped): it keeps
        # the frames last seen, which are the nearest above it.
        out.append(tuple(current))
        current = []
    return tuple(out)


def _prints(error_class: str, text: str) -> bool:
    """`text` is the line that printed an exception of this class (its message may go on)."""
    return bool(error_class) and (text == error_class or text.startswith(error_class + ":"))


def _frame(m: re.Match[str], source: str) -> Frame:
    return Frame((m.group("path") or m.group("cut")).replace("\\", "/"), int(m.group("line")),
                 m.group("function") or "", " ".join(source.split()))


def all_frames(record: Record) -> list[Frame]:
    """Every frame of a record, outermost first, across its chained tracebacks."""
    return [f for frames in frames_by_exception(record) for f in frames] if record.exceptions \
        else _frames_of_lines(record)


def frames_of_text(traceback: str) -> list[Frame]:
    """The frames of a traceback given as text (an event's `traceback`), outermost first, each
    with the indented source line printed under it, if any."""
    lines = [_body(line) for line in traceback.splitlines()]
    out = []
    for i, line in enumerate(lines):
        m = FRAME_LINE.match(line)
        if m is None:
            continue
        under = lines[i + 1] if i + 1 < len(lines) else ""
        source = under if under[:1].isspace() and not FRAME_LINE.match(under) else ""
        out.append(_frame(m, source))
    return out


def _frames_of_lines(record: Record) -> list[Frame]:
    return [_frame(m, "") for line in record.lines if (m := FRAME_LINE.match(_body(line)))]


def identifying(frames: tuple[Frame, ...] | list[Frame]) -> tuple[Frame, ...]:
    """The frames that say where an exception was raised: the innermost of sglang's, then the
    innermost of all if that is another package's."""
    if not frames:
        return ()
    ours = next((f for f in reversed(frames) if f.ours), None)
    last = frames[-1]
    if ours is None:
        return (last,)
    return (ours,) if ours is last else (ours, last)


# A helper that raises what it was given (`raise ValueError(message)`, `raise exc`): the
# message was made by its caller.
_PASS_THROUGH = re.compile(r"raise \w+(?:\(\w+\))?")


def message_sites(frames: tuple[Frame, ...] | list[Frame]) -> tuple[str, ...]:
    """Where in sglang (paths from `sglang/` on) the exception's message was made, as the
    traceback shows it: the innermost sglang frame and, while that frame only raises what it
    was given (a helper such as `raise_error_or_warn`), its callers in turn. Empty when no
    frame of sglang's is printed."""
    ours = [f for f in frames if f.ours]
    out: list[str] = []
    for f in reversed(ours):
        out.append(f.package_path)
        if not _PASS_THROUGH.fullmatch(f.source):
            break
    return tuple(out)


def raising_frame(record: Record) -> Frame | None:
    """The frame that raised the exception that escaped: its innermost sglang frame, else its
    innermost frame (None: no frame printed)."""
    frames = all_frames(record)
    found = identifying(frames)
    return found[0] if found else None
