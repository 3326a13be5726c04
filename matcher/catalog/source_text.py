"""Scanning helpers shared by the C++ (`cpp_checks`) and Rust (`rust_source`) readers.

Both languages group with `()`, `[]` and `{}`, separate arguments with top-level commas, and
build messages from string literals joined with holes; these are the pieces that behave the same
in both. What differs (escapes, nested comments, raw strings, `#define`) stays in each reader.
Tokens are any objects with `kind` and `text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar


class Token(Protocol):
    """A lexer's token: its kind (`punct` for brackets and commas) and its text."""

    @property
    def kind(self) -> str: ...

    @property
    def text(self) -> str: ...


T = TypeVar("T", bound=Token)

OPEN = {"(": ")", "[": "]", "{": "}"}
CLOSE = (")", "]", "}")


def matching_close(toks: Sequence[Token], i: int) -> int:
    """The index of the token closing the group `toks[i]` opens (or the last token when the
    group is left open)."""
    stack = [OPEN[toks[i].text]]
    for j in range(i + 1, len(toks)):
        t = toks[j]
        if t.kind != "punct":
            continue
        if t.text in OPEN:
            stack.append(OPEN[t.text])
        elif t.text == stack[-1]:
            stack.pop()
            if not stack:
                return j
    return len(toks) - 1


def split_args(toks: Sequence[T], start: int, end: int, *,
               keep_empty_last: bool) -> list[list[T]]:
    """The top-level comma-separated arguments of `toks[start:end]`; `<…>` is not a group
    (`a < b, c` is two). `keep_empty_last`: a trailing comma leaves an empty last argument
    (C++'s preprocessor counts it; Rust's macros ignore it)."""
    args: list[list[T]] = []
    cur: list[T] = []
    depth = 0
    for t in toks[start:end]:
        if t.kind == "punct" and t.text in OPEN:
            depth += 1
        elif t.kind == "punct" and t.text in CLOSE:
            depth -= 1
        if depth == 0 and t.kind == "punct" and t.text == ",":
            args.append(cur)
            cur = []
            continue
        cur.append(t)
    if cur or (keep_empty_last and args):
        args.append(cur)
    return args


def join_literals(parts: Sequence[Any]) -> tuple[Any, ...]:
    """Message parts with adjacent literal strings joined and empty ones dropped; holes (any
    non-`str`) kept in place."""
    out: list[Any] = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] = out[-1] + p
                continue
        out.append(p)
    return tuple(out)


def line_comment_end(text: str, i: int) -> int:
    """Where a `//` comment starting at `i` ends: at its newline (kept), or at the end."""
    j = text.find("\n", i)
    return len(text) if j < 0 else j


def quoted_end(text: str, j: int, *, stop_at_newline: bool) -> int:
    """The index of the closing `"` of a string literal whose body starts at `j` (backslash
    escapes skipped), or of the end of text. C++ literals cannot span a line
    (`stop_at_newline`); Rust ones can."""
    n = len(text)
    while j < n and text[j] != '"' and not (stop_at_newline and text[j] == "\n"):
        j += 2 if text[j] == "\\" else 1
    return j
