r"""One flashinfer C++/CUDA source file → the checks that fail with a message of their own.

Pure: `sites(text, path)` returns `CppCheck`s (`cpp_checks`' value) for what flashinfer throws
or asserts itself, the way it prints them:

- `FLASHINFER_ERROR(msg)` and `FLASHINFER_CHECK(cond, msg…)` throw `flashinfer::Error`, whose
  `what()` is `Error in function '<fn>' at <file>:<line>: <msg>` (`include/flashinfer/
  exception.h` in every release). The message is a literal, a concatenation, or a
  `std::ostringstream`'s `.str()` whose `<<` chain is read back from the same function; from
  0.4 on `FLASHINFER_CHECK(cond, a, b, …)` writes its arguments separated by one space
  (`write_to_stream`), and with none it prints `Check failed: <cond>` (kind `error`);
- `FLASHINFER_RUNTIME_ASSERT(msg)` is `assert(0 && msg)` in device code: CUDA prints
  ``Assertion `0 && "<msg>"` failed.`` from every failing thread (kind `assert`);
- tvm-ffi's checks (flashinfer 0.4 and later): `TVM_FFI_ICHECK(x) << m` prints `Check failed:
  (x) is false: m`, `TVM_FFI_ICHECK_EQ(x, y) << m` `Check failed: x == y (a vs. b) : m`,
  `TVM_FFI_THROW(Kind) << m` / `TVM_FFI_LOG_AND_THROW(Kind) << m` the message alone (kind `tvm`,
  apache-tvm-ffi's `include/tvm/ffi/error.h`).

Macro bodies are read as code (`#define` headers blanked, continuations kept as line breaks), so
a check written inside a dispatch macro (`DISPATCH_HEAD_DIM`'s `Unsupported head_dim: …`) is
found where it is defined. `TORCH_CHECK` sites are `cpp_checks.checks`' job, not this one's.
"""

from __future__ import annotations

import re

from matcher.catalog.cpp_checks import (
    CppCheck,
    Hole,
    Part,
    Tok,
    _concat_parts,
    _function_owners,
    lex,
    macro_args,
    spell,
)
from matcher.catalog.source_text import join_literals, matching_close

_DEFINE_HEAD = re.compile(r"^([ \t]*#[ \t]*define[ \t]+\w+(?:\([^)\n]*\))?)", re.M)
_TVM_CHECKS = {"TVM_FFI_ICHECK", "TVM_FFI_CHECK", "TVM_FFI_ICHECK_EQ", "TVM_FFI_ICHECK_NE",
               "TVM_FFI_ICHECK_LT", "TVM_FFI_ICHECK_LE", "TVM_FFI_ICHECK_GT",
               "TVM_FFI_ICHECK_GE"}
_TVM_THROWS = {"TVM_FFI_THROW", "TVM_FFI_LOG_AND_THROW"}


def code_of(text: str) -> str:
    """The file with macro bodies as code: backslash-newlines become line breaks (lines keep
    their numbers) and each `#define NAME(params)` head becomes blanks."""
    text = re.sub(r"\\\r?\n", "\n", text)
    return _DEFINE_HEAD.sub(lambda m: " " * len(m.group(1)), text)


def _chain(toks: list[Tok], start: int) -> tuple[tuple[Part, ...], int]:
    """`<< a << "b" << c;` from `start` (at the first `<<`) → parts, and the index after it."""
    items: list[list[Tok]] = []
    depth = 0
    i = start
    while i < len(toks):
        t = toks[i]
        if depth == 0 and t.text in (";", "}", ")") :
            break
        if t.kind == "punct" and t.text in ("(", "[", "{"):
            depth += 1
        elif t.kind == "punct" and t.text in (")", "]", "}"):
            depth -= 1
        if depth == 0 and t.text == "<<":
            items.append([])
        elif items:
            items[-1].append(t)
        i += 1
    parts: list[Part] = []
    for item in items:
        if len(item) == 1 and item[0].kind == "str":
            parts.append(item[0].text)
        elif item and spell(item) not in ("std::endl", "std :: endl", "endl"):
            parts.append(Hole(spell(item)))
    return join_literals(parts), i


def _stream_text(toks: list[Tok], at: int, name: str, owner: list[str]) -> tuple[Part, ...]:
    """What `name << …;` statements wrote before token `at`, in the same function (or macro
    body), back to `name`'s declaration."""
    fn = owner[at] if at < len(owner) else ""
    starts: list[int] = []
    i = at - 1
    while i >= 0 and (owner[i] == fn):
        t = toks[i]
        if t.kind == "ident" and t.text == name:
            prev = toks[i - 1] if i else None
            if prev is not None and prev.text in ("ostringstream", "stringstream"):
                break
            if i + 1 < at and toks[i + 1].text == "<<" and (prev is None or prev.text in (
                    ";", "{", "}", ")")):
                starts.append(i + 1)
        i -= 1
    parts: list[Part] = []
    for s in reversed(starts):
        got, _ = _chain(toks, s)
        parts.extend(got)
    return join_literals(parts)


def _message(arg: list[Tok], toks: list[Tok], at: int, owner: list[str]) -> tuple[Part, ...]:
    if (len(arg) == 5 and arg[0].kind == "ident" and arg[1].text == "." and arg[2].text == "str"
            and arg[3].text == "(" and arg[4].text == ")"):
        return _stream_text(toks, at, arg[0].text, owner)
    return _concat_parts(arg) or ()


def _spaced(args: list[list[Tok]]) -> tuple[Part, ...]:
    """`write_to_stream(oss, a, b, c)`: the arguments with one space between them."""
    parts: list[Part] = []
    for k, a in enumerate(args):
        if k:
            parts.append(" ")
        got = _concat_parts(a)
        parts.extend(got if got else [Hole(spell(a))])
    return join_literals(parts)


def sites(text: str, path: str) -> list[CppCheck]:
    """Every FLASHINFER_ERROR / FLASHINFER_CHECK / FLASHINFER_RUNTIME_ASSERT and tvm-ffi check
    of one file, with the message each prints (see the module doc)."""
    code = code_of(text)
    toks = lex(code)
    owner = _function_owners(toks)
    lines = text.splitlines()
    out: list[CppCheck] = []

    def add(kind: str, macro: str, parts: tuple[Part, ...], cond: str, i: int) -> None:
        if not parts:
            return
        line = toks[i].line
        src = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        out.append(CppCheck(kind, macro, parts, None, cond, path, line, owner[i], src))

    i = 0
    while i < len(toks) - 1:
        t, nxt = toks[i], toks[i + 1]
        if t.kind != "ident" or nxt.text != "(":
            i += 1
            continue
        close = matching_close(toks, i + 1)
        args = macro_args(toks, i + 2, close)
        if t.text == "FLASHINFER_ERROR" and len(args) == 1:
            add("error", t.text, _message(args[0], toks, i, owner), "false", i)
        elif t.text == "FLASHINFER_CHECK" and len(args) >= 2:
            rest = args[1:]
            parts = _message(rest[0], toks, i, owner) if len(rest) == 1 else _spaced(rest)
            add("error", t.text, parts, spell(args[0]), i)
        elif t.text == "FLASHINFER_RUNTIME_ASSERT" and len(args) == 1:
            add("assert", t.text, _concat_parts(args[0]) or (), "false", i)
        elif (t.text in _TVM_CHECKS or t.text in _TVM_THROWS) and close + 1 < len(toks) \
                and toks[close + 1].text == "<<":
            parts, _ = _chain(toks, close + 1)
            cond = spell(args[0]) if args and t.text in _TVM_CHECKS else ""
            add("tvm", t.text, parts, cond, i)
        i += 1
    return out
