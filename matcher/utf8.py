"""How much of a byte stream is not valid UTF-8: counted per source, across chunk boundaries.

The decoder replaces invalid sequences with U+FFFD and keeps NUL bytes as they are (`decode.py`),
so nothing is lost or fatal; this only says that it happened. A character split between two
reads is not invalid: its first bytes are carried to the next chunk.
"""

from __future__ import annotations

import codecs

_LITERAL_FFFD = "\ufffd".encode()


def count_invalid(carry: bytes, data: bytes) -> tuple[int, bytes]:
    """(invalid sequences in `carry + data`, the unfinished character to carry to the next chunk).

    ASCII chunks — nearly all of a server log — cost one `isascii` pass."""
    if not carry and data.isascii():
        return 0, b""
    buf = carry + data
    try:
        _, used = codecs.utf_8_decode(buf, "strict", False)
        return 0, buf[used:]
    except UnicodeDecodeError:
        pass
    text, used = codecs.utf_8_decode(buf, "replace", False)
    return text.count("\ufffd") - buf[:used].count(_LITERAL_FFFD), buf[used:]
