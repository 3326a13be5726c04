"""What other programs put in front of sglang's text, taken off before framing.

sglang's own prefix (`[2026-01-01 12:00:00 TP0] `) is the framer's business. But a log rarely
reaches us as sglang wrote it: torch.distributed's elastic launcher prefixes every line of a
rank with `[rank3]:`, `kubectl logs --timestamps` and CI systems put an RFC 3339 timestamp in
front, `kubectl logs --prefix` puts `[pod/name/container]`, docker compose `name-1  | `, syslog
collectors `Jan  2 03:04:05 host prog[pid]: `, Ray `(Actor pid=123) `, `srun --label` the task
number, c10's own log lines `[E207 01:29:36.730311765 ProcessGroupNCCL.cpp:616] `, cloud log
exports a level and a time (`ERROR 2025-04-07T19:13:52.31Z `), FastChat's logger
`2024-08-27 12:54:55 | ERROR | stderr | `, Python's logging `2025-06-30 06:18:36,801
xinference.core.worker 113 ERROR    `, and people paste logs into issues behind `> ` or inside
backticks — often two or three of these at once. Behind any chain of them, a traceback is a
traceback and an exception line an exception line. xoscar (xinference) also puts the actor's
`[address=0.0.0.0:43399, pid=1793] ` inside the message, after `RuntimeError: `: `unwrap`
takes that off too.

`unwrap` takes off every known wrapper at a line's start, in any order and combination, and
says which torch rank the line came from when the wrapper names one (ranks collapse like
sglang's `TP3`), and the level word when a wrapper gives one (a glog letter spelled out): a
record's severity is capped at the level the log shows (`aggregate.log_level`). It takes off one space after a wrapper and no more, so a traceback's
indentation survives. A line with no wrapper is returned as it is, at the cost of one failed
regex match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# One alternative per wrapper; each consumes the wrapper and one following space at most.
_WRAPPER = re.compile(
    r"""(?:
      >[ ]?                                                    # a quoted paste
    | `{1,3}(?=[^`])                                           # a paste in backticks (see _fenced)
    | (?P<cloud>DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|ALERT|EMERGENCY|FATAL|DEFAULT)[ ]+
      \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)[ ]?            # cloud export
    | \d{4}-\d\d-\d\d[ ]\d\d:\d\d:\d\d[ ]\|[ ](?P<fastchat>[A-Z]+)[ ]\|[ ][\w.-]+[ ]\|[ ]?  # FastChat
    | \d{4}-\d\d-\d\d[ ]\d\d:\d\d:\d\d,\d{3}[ ][\w.-]+[ ]\d+[ ]
      (?P<logging>DEBUG|INFO|WARNING|ERROR|CRITICAL)[ ]+       # logging: time name pid level
    | \[address=[^\]\s,]+,[ ]pid=\d+\][ ]?                       # xoscar's actor
    | \[rank(?P<rank>\d+)\]:[ ]?                               # torch.distributed / torchrun
    | \[pod/[^\]\s]+\][ ]?                                     # kubectl logs --prefix
    | \[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)\]?[ ]?  # RFC 3339
    | \[(?P<c10>[IWEF])\d{3,4}[ ]\d\d:\d\d:\d\d\.\d+[ ][^\]\n]*\][ ]?     # c10's log prefix
    | [A-Z][a-z]{2}[ ][ \d]\d[ ]\d\d:\d\d:\d\d[ ]\S+[ ][\w./@-]+(?:\[\d+\])?:[ ]?  # syslog
    | \w[\w.-]*[ ]+\|[ ]?                                      # docker compose: name-1  |
    | \([\w.-]+[ ]pid=\d+(?:,[ ]ip=[\d.]+)?\)[ ]?              # Ray: (Actor pid=12)
    | \d{1,4}:[ ]                                               # srun --label: task number
    )""",
    re.VERBOSE,
)
# A line can only start with a wrapper if it starts with one of these.
_MAY_WRAP = frozenset(">`[(0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
# xoscar's actor inside an exception's message: `RuntimeError: [address=…, pid=…] Initialization…`
_ACTOR = re.compile(r"(?<=: )\[address=[^\]\s,]+, pid=\d+\] ")
MAX_WRAPPERS = 6
# transformers' lazy importer (`_LazyModule._get_module`) re-raises a failed import as a
# RuntimeError of its own sentence with the import's message on the next line; an import that
# failed inside another lazy import repeats the sentence, once per level.
LAZY_IMPORT = re.compile(r"^(?:\s*Failed to import [\w.]+ because of the following error "
                         r"\(look up to see its traceback\):\s*)+")


_LEVEL_GROUPS = ("cloud", "fastchat", "logging", "c10")
# glog's letter (c10's prefix) as the level word the other writers spell out
_LETTER = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}


@dataclass(frozen=True, slots=True)
class Unwrapped:
    text: str
    rank: str | None = None  # `rank3` when a torch rank wrapper named it
    wrapped: bool = False
    level: str | None = None  # the level word (`WARNING`) a wrapper taken off gave the line


def unwrap(text: str) -> Unwrapped:
    """`text` without the wrappers at its start, and the torch rank one of them names."""
    if "[address=" in text:
        inner = _ACTOR.sub("", text, count=1)
        if inner != text:
            found = unwrap(inner)
            return Unwrapped(found.text, found.rank, True, found.level)
    if not text or text[0] not in _MAY_WRAP:
        return Unwrapped(text)
    rank = level = None
    start = 0
    end = len(text)
    for _ in range(MAX_WRAPPERS):
        m = _WRAPPER.match(text, start, end)
        if m is None or m.end() == start:
            break
        if m.group("rank") is not None:
            rank = f"rank{m.group('rank')}"
        word = next((w for g in _LEVEL_GROUPS if (w := m.group(g)) is not None), None)
        if word is not None:
            level = _LETTER.get(word, word)
        if text[start] == "`":
            fenced = _fenced(text, start, m.end(), end)
            if fenced is None:
                break
            end = fenced
        start = m.end()
    if start == 0:
        return Unwrapped(text)
    return Unwrapped(text[start:end], rank, True, level)


def _fenced(text: str, start: int, inner: int, end: int) -> int | None:
    """Where the text a backtick run opens ends: before the same run closing the line, or at the
    line's end when the run never comes again (a paste's closing backticks on a later line).
    None when the run comes again inside: the backticks are the message's own
    (`` `A_log` must be a 1D tensor. ``)."""
    run = text[start:inner]
    closes = text.endswith(run, inner, end) and end - len(run) >= inner
    body_end = end - len(run) if closes else end
    if text.find("`", inner, body_end) != -1:
        return None
    return body_end


# A traceback's first frame line behind a wrapper (Python indents frames by two spaces; pastes
# often lose them).
_WRAPPED_FRAME = re.compile(r'(?<=\s)File "[^"]+", line \d+')
_DIGITS = re.compile(r"\d+")
MAX_LEARNED = 4


def wrapper_shape(wrapper: str) -> re.Pattern[str]:
    """The shape of a wrapper seen once, as a pattern for the lines that follow: its digit runs
    vary (times, pids, counters), the rest stands as written."""
    parts = []
    last = 0
    for m in _DIGITS.finditer(wrapper):
        parts += [re.escape(wrapper[last:m.start()]), r"\d+"]
        last = m.end()
    parts.append(re.escape(wrapper[last:]))
    return re.compile("(?:" + "".join(parts) + ")[ ]?")


class LearnedWrappers:
    """Wrappers of one source that no known shape describes, learned from its tracebacks.

    A traceback's `Traceback (most recent call last):` line and its first frame line carry the
    same wrapper: whatever stands before the frame's indentation is a wrapper when
    the traceback's line starts with the same shape (what follows it there is the traceback's
    header, such as `Scheduler hit an exception:`). From then on every line of the source that
    starts with that shape has it taken off. A source keeps at most `MAX_LEARNED` shapes, the
    latest learned first.
    """

    def __init__(self) -> None:
        self.shapes: list[re.Pattern[str]] = []

    def strip(self, text: str) -> str:
        for shape in self.shapes:
            m = shape.match(text)
            if m is not None and m.end():
                return text[m.end():]
        return text

    def learn(self, opening: str, frame_line: str) -> str | None:
        """`opening`: the text before `Traceback (most recent call last):` on the line that
        opened a traceback; `frame_line`: the line after it. The opening without the wrapper
        (the header) when the two share one, else None."""
        m = _WRAPPED_FRAME.search(frame_line)
        if m is None:
            return None
        wrapper = frame_line[:m.start()].rstrip()
        if not wrapper.strip() or len(wrapper) < 2:
            return None
        shape = wrapper_shape(wrapper)
        found = shape.match(opening)
        if found is None:
            return None
        if all(s.pattern != shape.pattern for s in self.shapes):
            self.shapes = [shape, *self.shapes][:MAX_LEARNED]
        return opening[found.end():].strip()


def lazy_import_inner(message: str) -> str | None:
    """The import's own message inside transformers' lazy importer's sentence (`No module named
    'sentencepiece'`, a library's undefined symbol), or None when `message` is not one."""
    if "because of the following error" not in message:
        return None
    m = LAZY_IMPORT.match(message)
    inner = message[m.end():].strip() if m is not None else ""
    return inner or None
