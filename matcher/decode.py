"""Bytes to lines: where a line starts and ends, whatever the size of the chunks read.

A line is complete at its newline; the bytes after the last newline wait for the next chunk, so
how a source happens to be read never changes the lines it yields (a property test holds us to
that). Lines longer than `max_line_bytes` keep their first `max_line_bytes` and are marked
`truncated`; the rest of such a line is dropped, never buffered — memory stays bounded — and
the line is emitted at its newline, so its `end_offset` is where the next line starts. Invalid
UTF-8 is decoded with U+FFFD replacement characters and NUL bytes are kept as they are: the
text is damaged where the input was, and nothing after it is lost.

Then, per source, `LineDecoder` turns those raw lines into content lines, by format:

- `plain`: the line is the content.
- `cri` (Kubernetes, `/var/log/pods`): `<rfc3339nano> <stdout|stderr> <P|F> <content>`. The
  runtime cuts long lines into `P` (partial) pieces ended by an `F` piece of the same stream;
  they are joined into one line that keeps the first piece's `offset`, `lineno` and `ts` and the
  last piece's `end_offset`. The other stream's lines may come in between and pass first.
- `docker` (json-file driver): `{"log": "…\n", "stream": "stdout", "time": "…"}` per line; a
  `log` without its trailing newline is a partial (docker cuts at 16 KiB) joined with the next.
- `auto`: the first non-empty line of the source decides (CRI shape, a JSON object with a `log`
  key, else plain); the choice then holds for the source.

What the decoder can lose: content beyond `max_line_bytes` (the joined line keeps its first
`max_line_bytes`, is marked `truncated`, and later pieces are counted as read but not kept); a
multi-byte character that the runtime cut between two CRI pieces becomes U+FFFD (the splitter
decodes each piece on its own), and a carriage return that ends a CRI `P` piece is dropped;
docker's own JSON already carries U+FFFD for bytes it could not encode. A line that is not
in the format (bad CRI timestamp, stream or tag; JSON that does not parse, or that the
splitter had to cut) is not lost: it is passed on as plain text and counted in `malformed`.
A partial whose last piece never comes waits until `finish()` (end of input, or the caller
deciding it has been idle long enough).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from matcher.types import Chunk, Line, Stream

DEFAULT_MAX_LINE_BYTES = 1024 * 1024
INPUT_FORMATS = ("auto", "plain", "cri", "docker")
# Room a raw container-format line needs around its content: the CRI prefix, docker's JSON
# keys and the escaping of the content (a quote or backslash doubles).
_RAW_SLACK = 4096


def _decode(raw: bytes) -> str:
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", errors="replace")


def _line_before_hit(body: bytes, pos: int, hit_end: int) -> int:
    """Where reading resumes, from `pos`, for the hit whose line ends at `hit_end`: the start
    of the line before the hit's line (`feed_sparse` yields both), not before `pos`."""
    target = body.rfind(b"\n", pos, hit_end - 1) + 1
    if target <= pos:
        return pos
    return max(body.rfind(b"\n", pos, target - 1) + 1, pos)


class LineSplitter:
    """Splits the chunks of one source into `Line`s; one instance per source."""

    def __init__(
        self,
        source: str,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        stream: Stream = "",
    ) -> None:
        self.source = source
        self.stream: Stream = stream
        self.max_line_bytes = max_line_bytes
        self._pending = bytearray()
        self._pending_offset = 0
        self._line_len = 0  # bytes of the line being read, kept or not
        self._overflow = False  # the line being read is longer than the cap: rest dropped
        self._lineno = 0
        self.skipped = 0  # lines `feed_sparse` passed over

    @property
    def pending_bytes(self) -> int:
        return len(self._pending)

    @property
    def position(self) -> int:
        """Where the line being read starts: every byte before it has been handed on as lines."""
        return self._pending_offset

    @property
    def partial_offset(self) -> int | None:
        """Start of a line read in part and still waiting for its newline, if there is one."""
        return self._pending_offset if (self._pending or self._overflow) else None

    @property
    def lineno(self) -> int:
        """Lines handed on (or passed over) so far."""
        return self._lineno

    def renumber(self, delta: int) -> None:
        """Count lines from elsewhere: `matcher.parallel`'s workers count from their own start,
        and their count moves to the true one where their reading meets the parent's."""
        self._lineno += delta

    def state(self) -> dict[str, Any]:
        """What decides which lines the next chunks make, comparable with `==` (a copy):
        every field (one added later counts until said otherwise) but the `skipped` counter;
        the line being read (up to `max_line_bytes`) by its digest, so that a kept state does
        not hold a copy of a long line."""
        fields = {k: v for k, v in vars(self).items() if k not in ("skipped", "_pending")}
        fields["_pending"] = hashlib.blake2b(self._pending, digest_size=16).digest()
        return copy.deepcopy(fields)

    def feed(self, chunk: Chunk) -> list[Line]:
        data = chunk.data
        start = chunk.end_offset - len(data)
        if not self._pending and not self._overflow:
            self._pending_offset = start
        lines: list[Line] = []
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                self._take(data[pos:])
                return lines
            self._take(data[pos:nl])
            end = start + nl + 1
            lines.append(self._line(bytes(self._pending), self._pending_offset, end,
                                    truncated=self._overflow))
            self._pending.clear()
            self._overflow = False
            self._line_len = 0
            self._pending_offset = end
            pos = nl + 1

    def feed_sparse(self, chunk: Chunk, hits: Callable[[bytes], list[int]],
                    idle: Callable[[], bool],
                    skippable: Callable[[bytes, int, int], int] | None = None) -> Iterator[Line]:
        """Like `feed`, but skips the lines nobody needs: while `idle()` holds, only lines where
        `hits` found something (and the line before each) are yielded; the others are counted
        in `skipped` and their bytes passed over. Offsets and line numbers stay as `feed` gives.

        `idle` is asked again after each yielded line has been consumed (a traceback it opened
        makes every following line needed until it closes), so this is a generator to be
        consumed in step with the framer.

        `skippable(body, start, end)`, when given, says how far from `start` (a line start, at
        most `end`) the lines may be passed over at all: a container format's line that its
        decoder would treat specially (a partial, a malformed line) is read even without a hit.
        """
        data = chunk.data
        start = chunk.end_offset - len(data)
        first = data.find(b"\n")
        last = data.rfind(b"\n")
        if first < 0 or last - first > self.max_line_bytes:
            yield from self.feed(chunk)  # no whole line inside, or one that may need the cap
            return
        yield from self.feed(Chunk(data[:first + 1], chunk.source, start + first + 1))
        body = data[first + 1:last + 1]
        base = start + first + 1
        # The body's last line is always read: the first line of the next chunk may be an
        # unprefixed traceback whose rank the framer takes from the line before it.
        found = [*hits(body), len(body)] if body else []
        pos, i, n = 0, 0, len(body)
        while pos < n:
            if idle():
                while i < len(found) and found[i] <= pos:
                    i += 1
                before = n if i == len(found) else _line_before_hit(body, pos, found[i])
                if skippable is not None:
                    before = skippable(body, pos, before)
                self._skip(body, pos, before, base)
                if before == n:
                    break
                pos = before  # the line read next: needed, or one its format makes special
            end = body.find(b"\n", pos)
            line = self._line(body[pos:end], base + pos, base + end + 1)
            pos = end + 1
            self._pending_offset = base + pos
            yield line
        if last + 1 < len(data):
            self.feed(Chunk(data[last + 1:], chunk.source, chunk.end_offset))

    def _skip(self, body: bytes, start: int, end: int, base: int) -> None:
        if end > start:
            n = body.count(b"\n", start, end)
            self._lineno += n
            self.skipped += n
            self._pending_offset = base + end

    def _take(self, piece: bytes) -> None:
        """Keep at most `max_line_bytes` of the line being read; count the rest as dropped."""
        self._line_len += len(piece)
        room = self.max_line_bytes - len(self._pending)
        if len(piece) > room:
            self._overflow = True
            piece = piece[:max(room, 0)]
        self._pending += piece

    def finish(self, end_offset: int | None = None) -> list[Line]:
        """Flush a last line that has no newline (end of input, or idle for long enough)."""
        if not self._pending and not self._overflow:
            return []
        end = end_offset if end_offset is not None else self._pending_offset + self._line_len
        line = self._line(bytes(self._pending), self._pending_offset, end,
                          truncated=self._overflow)
        self._pending.clear()
        self._overflow = False
        self._line_len = 0
        self._pending_offset = end
        return [line]

    def _line(self, raw: bytes, offset: int, end: int, *, truncated: bool = False) -> Line:
        self._lineno += 1
        return Line(
            text=_decode(raw),
            source=self.source,
            offset=offset,
            end_offset=end,
            stream=self.stream,
            truncated=truncated,
            lineno=self._lineno,
        )


# -- container log formats -------------------------------------------------------------------

_CRI_TS = (
    r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
    r"T(?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d{1,9})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)"
)
_CRI = re.compile(rf"(?P<ts>{_CRI_TS}) (?P<stream>stdout|stderr) (?P<tag>[PF])(?::\S*)?(?: |$)")
_SURROGATE = re.compile("[\ud800-\udfff]")
# A CRI line that `LineDecoder` passes on whole and unchanged but for its prefix: a final (`F`)
# piece, well-formed. Stricter than `_CRI` (ASCII digits, no `:suffix` on the tag), so a line it
# accepts is one `_CRI` accepts; what it refuses is read in full, which is always right.
_CRI_F_RAW = _CRI_TS.encode() + rb" (?:stdout|stderr) F[ \n]"  # bytes: `\d` is ASCII here
_CRI_F_LINE = re.compile(_CRI_F_RAW)
_CRI_OTHER_LINE = re.compile(rb"\n(?!" + _CRI_F_RAW + rb")")  # a newline before any other line


# A docker json-file line that `LineDecoder` turns into one whole content line: the fields
# docker writes, in its order, and a `log` string ending in `\n` (not a partial) holding only
# the escapes docker's encoder writes. Stricter than `parse_docker`, like `_CRI_F_RAW`: a
# `\u0041` that would unescape into a literal, say, makes the line one to read in full.
# Possessive (`++`, `*+`): each position has one way to match, so a line that fails fails fast.
_DOCKER_WHOLE_RAW = (
    rb'\{"log":"(?:[^"\\\x00-\x1f]++|\\["\\/bfrt]|\\n(?!")|\\u00[01][0-9a-fA-F]'
    rb'|\\u00(?:26|3[cCeE])|\\u20(?:28|29))*+\\n","stream":"(?:stdout|stderr)",'
    rb'"time":"[0-9TZ:.+-]*"\}\n'
)
_DOCKER_WHOLE_LINE = re.compile(_DOCKER_WHOLE_RAW)
_DOCKER_OTHER_LINE = re.compile(rb"\n(?!" + _DOCKER_WHOLE_RAW + rb")")


def docker_skippable(body: bytes, start: int, end: int) -> int:
    """`cri_skippable` for docker json-file lines: how far from `start` every line is a whole
    line in docker's own shape; a partial, the line before it, or anything else is read."""
    return _skippable(body, start, end, _DOCKER_WHOLE_LINE, _DOCKER_OTHER_LINE)


def cri_skippable(body: bytes, start: int, end: int) -> int:
    """How far from `start` (a line start) the lines of `body[start:end]` are plain CRI `F`
    lines, which a sparse read may pass over: the start of the first other line, else `end`.

    A `P` piece must be read (it opens a partial line, and a literal may straddle its pieces,
    so the prefilter may not have pointed at it), and with it the line before, which the framer
    reads for the rank and time of an unprefixed traceback; a malformed line must be read too
    (it is counted). One C-level search over the bytes.
    """
    return _skippable(body, start, end, _CRI_F_LINE, _CRI_OTHER_LINE)


def _skippable(body: bytes, start: int, end: int, plain: re.Pattern[bytes],
               other_after_newline: re.Pattern[bytes]) -> int:
    if start >= end:
        return end
    if plain.match(body, start, end) is None:
        return start
    # The line at `end` is searched too: when it is itself a `P` piece (the hit was in the
    # piece that ends its line), the line before the piece is the one the framer needs.
    stop = body.find(b"\n", end)
    other = other_after_newline.search(body, start, len(body) if stop < 0 else stop)
    if other is None or other.start() >= end:
        return end
    return max(start, body.rfind(b"\n", start, other.start()) + 1)


def cap_text(text: str, max_bytes: int) -> tuple[str, bool]:
    """`text` cut to its first `max_bytes` UTF-8 bytes, and whether it was cut."""
    if len(text) * 4 <= max_bytes:
        return text, False
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", "ignore"), True  # a character cut in two is dropped


def cap_line(line: Line, max_bytes: int) -> Line:
    text, cut = cap_text(line.text, max_bytes)
    if not cut:
        return line
    return Line(text, line.source, line.offset, line.end_offset, line.stream, line.ts, True,
                line.lineno)


def parse_docker(text: str) -> tuple[str, Stream, str | None] | None:
    """`(log, stream, time)` of a docker json-file line, or None if it is not one."""
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    log = obj.get("log")
    if not isinstance(log, str):
        return None
    if _SURROGATE.search(log):  # `\ud800` escapes that pair with nothing: not text
        log = _SURROGATE.sub("\ufffd", log)
    stream = obj.get("stream")
    ts = obj.get("time")
    return (log, stream if stream in ("stdout", "stderr") else "",
            ts if isinstance(ts, str) else None)


def detect_format(text: str) -> str:
    """The format a source is in, judged from its first non-empty line."""
    if _CRI.match(text):
        return "cri"
    if parse_docker(text) is not None:
        return "docker"
    return "plain"


@dataclass(slots=True)
class _Partial:
    """A line of one stream whose pieces have started to arrive but not its last one."""

    source: str
    offset: int
    end_offset: int
    stream: Stream
    ts: str | None
    lineno: int
    parts: list[str]
    size: int = 0  # UTF-8 bytes kept in `parts`
    truncated: bool = False

    def add(self, piece: str, end_offset: int, truncated: bool, max_bytes: int) -> None:
        self.end_offset = end_offset
        self.truncated |= truncated
        room = max_bytes - self.size
        if not piece or room <= 0:
            self.truncated |= bool(piece)
            return
        raw = piece.encode("utf-8", "surrogatepass")
        if len(raw) > room:
            raw = raw[:room]
            piece = raw.decode("utf-8", "ignore")
            self.truncated = True
        self.parts.append(piece)
        self.size += len(raw)

    def to_line(self) -> Line:
        text = "".join(self.parts)
        if text.endswith("\r"):
            text = text[:-1]
        return Line(text, self.source, self.offset, self.end_offset, self.stream, self.ts,
                    self.truncated, self.lineno)


class LineDecoder:
    """Turns the raw lines of one source into content lines; one instance per source.

    Pure and bounded: at most one partial line per stream is held, each at most
    `max_line_bytes`. Lines that are not in the format are passed on as plain text and counted in
    `malformed`. `raw_max_line_bytes` is the cap the `LineSplitter` in front of it should use, so
    that a container line whose content is just under the cap is not cut by its wrapping.
    """

    def __init__(
        self, format: str = "auto", *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    ) -> None:
        if format not in INPUT_FORMATS:
            raise ValueError(f"input format {format!r} is not one of {', '.join(INPUT_FORMATS)}")
        self.format = format
        self.max_line_bytes = max_line_bytes
        self.detected: str | None = None if format == "auto" else format
        self.malformed = 0
        self._partials: dict[str, _Partial] = {}

    @property
    def raw_max_line_bytes(self) -> int:
        if self.format == "plain":
            return self.max_line_bytes
        return 2 * self.max_line_bytes + _RAW_SLACK

    @property
    def pending_offset(self) -> int | None:
        """Start of the earliest partial line still waiting for its last piece."""
        return min((p.offset for p in self._partials.values()), default=None)

    def renumber(self, delta: int) -> None:
        """Move the line numbers of the partial lines held by `delta` (`LineSplitter.renumber`)."""
        for partial in self._partials.values():
            partial.lineno += delta

    def state(self) -> dict[str, Any]:
        """What decides which lines the next raw lines make, comparable with `==` (a copy):
        every field but the `malformed` counter."""
        return copy.deepcopy({k: v for k, v in vars(self).items() if k != "malformed"})

    def detect(self, data: bytes) -> None:
        """Decide the format from the first non-blank complete line of a source's first bytes
        (what `decode` would decide on that line); undecided if there is none."""
        pos = 0
        while self.detected is None:
            nl = data.find(b"\n", pos)
            if nl < 0:
                return
            text = _decode(data[pos:min(nl, pos + self.raw_max_line_bytes)])  # as split
            if text.strip():
                self.detected = detect_format(text)
            pos = nl + 1

    def decode(self, line: Line) -> list[Line]:
        fmt = self.detected
        if fmt is None:
            if not line.text.strip():
                # blank before the first content: nothing to judge the format by yet
                return [cap_line(line, self.max_line_bytes)]
            fmt = self.detected = detect_format(line.text)
        if fmt == "cri":
            return self._cri(line)
        if fmt == "docker":
            return self._docker(line)
        return [cap_line(line, self.max_line_bytes)]

    def finish(self) -> list[Line]:
        """Hand on partial lines still waiting (end of input, or idle); the decoder goes on."""
        out = [p.to_line() for p in sorted(self._partials.values(), key=lambda p: p.offset)]
        self._partials.clear()
        return out

    def _cri(self, line: Line) -> list[Line]:
        m = _CRI.match(line.text)
        if m is None:
            self.malformed += 1
            return [cap_line(line, self.max_line_bytes)]
        stream: Stream = m.group("stream")  # type: ignore[assignment]
        piece = line.text[m.end():]
        return self._piece(line, piece, stream, m.group("ts"), m.group("tag") == "F")

    def _docker(self, line: Line) -> list[Line]:
        parsed = parse_docker(line.text)
        if parsed is None:
            self.malformed += 1
            return [cap_line(line, self.max_line_bytes)]
        log, stream, ts = parsed
        last = log.endswith("\n")
        return self._piece(line, log[:-1] if last else log, stream, ts, last)

    def _piece(self, line: Line, piece: str, stream: Stream, ts: str | None,
               last: bool) -> list[Line]:
        part = self._partials.get(stream)
        if part is None:
            if last:
                text, cut = cap_text(piece, self.max_line_bytes)
                if text.endswith("\r"):
                    text = text[:-1]
                return [Line(text, line.source, line.offset, line.end_offset, stream, ts,
                             cut or line.truncated, line.lineno)]
            part = self._partials[stream] = _Partial(
                line.source, line.offset, line.end_offset, stream, ts, line.lineno, [])
        part.add(piece, line.end_offset, line.truncated, self.max_line_bytes)
        if not last:
            return []
        del self._partials[stream]
        return [part.to_line()]
