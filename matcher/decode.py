"""Bytes to lines: where a line starts and ends, whatever the size of the chunks read.

A line is complete at its newline; the bytes after the last newline wait for the next chunk, so
how a source happens to be read never changes the lines it yields (a property test holds us to
that). Lines longer than `max_line_bytes` keep their first `max_line_bytes` and are marked
`truncated`; the rest of such a line is dropped, never buffered — memory stays bounded — and
the line is emitted at its newline, so its `end_offset` is where the next line starts. Invalid
UTF-8 is decoded with U+FFFD replacement characters and NUL bytes are kept as they are: the
text is damaged where the input was, and nothing after it is lost.
"""

from __future__ import annotations

from matcher.types import Chunk, Line, Stream

DEFAULT_MAX_LINE_BYTES = 1024 * 1024


def _decode(raw: bytes) -> str:
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", errors="replace")


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

    @property
    def pending_bytes(self) -> int:
        return len(self._pending)

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
