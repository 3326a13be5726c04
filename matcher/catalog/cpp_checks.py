r"""One C++/CUDA source file → the checks that fail with a message: what a kernel library prints.

Pure: `checks(text, path, macros)` takes a file's text, its path (`csrc/gemm/fp8_gemm_kernel.cu`)
and the function-like macros known so far (`CHECK_INPUT(x)` → `TORCH_CHECK(x.is_cuda(), #x "
must be a CUDA tensor")`, read from the library's headers and the file's own `#define`s) and
returns `CppCheck`s:

- `TORCH_CHECK(cond, a, b, …)`: torch's `c10::str` prints the arguments one after another —
  string literals as they are, anything else as its value (a hole); with no message, torch prints
  `Expected <cond> to be true, but got false.  (Could this error message be improved?  If so,
  please report an enhancement request to PyTorch.)` with the condition as the preprocessor
  spells it. `TORCH_CHECK_VALUE`/`_TYPE`/`_INDEX`/`_NOT_IMPLEMENTED` raise Python's
  `ValueError`/`TypeError`/`IndexError`/`NotImplementedError`, `TORCH_CHECK` `RuntimeError`;
- `TORCH_CHECK_EQ(a, b)` and its siblings: c10's glog-style fatal check, `Check failed: a == b
  (<a> vs. <b>) `;
- `throw std::runtime_error(…)` (and `invalid_argument`, `logic_error`, `out_of_range`): a
  literal, `std::string("…") + x + "…"` concatenations;
- a call of a macro whose expansion holds one of these (`CHECK_IS_CUDA(q)`), expanded with its
  arguments (`#x` stringized, as the preprocessor does).

Each check keeps its line (`__LINE__`: the macro call's line), the enclosing function
(`__func__`, what torch prints in `Exception raised from <fn> at <file>:<line>`) and its
condition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from matcher.catalog.source_text import (
    CLOSE,
    OPEN,
    join_literals,
    line_comment_end,
    matching_close,
    quoted_end,
    split_args,
)

CHECK_CLASSES = {
    "TORCH_CHECK": "RuntimeError",
    "TORCH_CHECK_VALUE": "ValueError",
    "TORCH_CHECK_TYPE": "TypeError",
    "TORCH_CHECK_INDEX": "IndexError",
    "TORCH_CHECK_NOT_IMPLEMENTED": "NotImplementedError",
    "TORCH_CHECK_LINALG": "RuntimeError",
}
OP_CHECKS = {"TORCH_CHECK_EQ": "==", "TORCH_CHECK_NE": "!=", "TORCH_CHECK_LE": "<=",
             "TORCH_CHECK_LT": "<", "TORCH_CHECK_GE": ">=", "TORCH_CHECK_GT": ">"}
THROWN = {"runtime_error": None, "invalid_argument": None, "logic_error": None,
          "out_of_range": None}
# torch's own sources also raise through these (`checks(…, classed=True)`): the C++ error type
# names the Python class torch converts it to (torch/csrc/Exceptions.h); `AT_ERROR(msg…)` is
# `TORCH_CHECK(false, msg…)`.
CLASSED = ("TORCH_CHECK_WITH", "C10_THROW_ERROR", "AT_ERROR")
PYTHON_CLASS_OF = {
    "Error": "RuntimeError", "ValueError": "ValueError", "TypeError": "TypeError",
    "IndexError": "IndexError", "NotImplementedError": "NotImplementedError",
    "LinAlgError": "RuntimeError", "OutOfMemoryError": "OutOfMemoryError",
    "DistError": "DistError", "DistBackendError": "DistBackendError",
    "DistNetworkError": "DistNetworkError", "DistStoreError": "DistStoreError",
    "EnforceFiniteError": "RuntimeError", "AcceleratorError": "AcceleratorError",
}
NO_MESSAGE = ("Expected {cond} to be true, but got false.  (Could this error message be "
              "improved?  If so, please report an enhancement request to PyTorch.)")


@dataclass(frozen=True, slots=True)
class Hole:
    expr: str


Part = str | Hole


@dataclass(frozen=True, slots=True)
class CppCheck:
    kind: str  # "check" (TORCH_CHECK*), "op" (TORCH_CHECK_EQ …), "throw"
    macro: str  # TORCH_CHECK, CHECK_IS_CUDA, runtime_error …
    parts: tuple[Part, ...]
    error_class: str | None
    condition: str
    path: str
    line: int
    function: str
    source: str  # the first source line, stripped

    @property
    def template(self) -> str:
        out = []
        for p in self.parts:
            if isinstance(p, Hole):
                out.append("{" + p.expr + "}")
            else:
                out.append(p.replace("{", "{{").replace("}", "}}"))
        return "".join(out)


@dataclass(frozen=True, slots=True)
class Tok:
    kind: str  # ident, str, num, punct, char
    text: str
    line: int
    space: bool = False  # whitespace before it in the source (kept by `#x`, as one space)


@dataclass(frozen=True, slots=True)
class Macro:
    name: str
    params: tuple[str, ...]
    body: tuple[Tok, ...]


_ESC = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"', "?": "?",
        "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            e = body[i + 1]
            if e in _ESC:
                out.append(_ESC[e])
                i += 2
                continue
            if e == "x":
                m = re.match(r"[0-9A-Fa-f]+", body[i + 2:])
                if m:
                    out.append(chr(int(m.group(), 16) & 0xFF))
                    i += 2 + m.end()
                    continue
            out.append(e)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?:0[xX][0-9A-Fa-f']+|[0-9][0-9']*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)[uUlLfF]*")
_PUNCT = ("<<=", ">>=", "::", "->", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "++", "--",
          "+=", "-=", "*=", "/=", "##")
_RAW = re.compile(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')

_CHAR = re.compile(r"'(?:\\.|[^\\'\n])*'")


class _Lexer:
    """One pass over a C++ file's text: one method per kind of thing the text can hold next,
    each consuming it and returning True, or returning False to let the next one look."""

    def __init__(self, text: str, macros: dict[str, Macro] | None) -> None:
        self.text = text
        self.macros = macros
        self.toks: list[Tok] = []
        self.i = 0
        self.line = 1
        self.at_line_start = True  # only blanks and comments since the last newline
        self.space = False  # whitespace since the last token (`#x` keeps it as one space)

    def tokens(self) -> list[Tok]:
        """Every token of the text, in order."""
        n = len(self.text)
        while self.i < n:
            if self.blank() or self.comment() or self.directive():
                continue
            self.at_line_start = False
            _ = self.raw_string() or self.string() or self.char() or self.word()
        return self.toks

    def emit(self, kind: str, value: str) -> None:
        self.toks.append(Tok(kind, value, self.line, self.space))
        self.space = False

    def blank(self) -> bool:
        """A newline, blanks, or a backslash-newline (a line continuation)."""
        text, i = self.text, self.i
        c = text[i]
        if c == "\n":
            self.line += 1
            self.at_line_start = True
            self.i += 1
        elif c in " \t\r\f\v":
            self.i += 1
        elif c == "\\" and text.startswith("\n", i + 1):
            self.line += 1
            self.i += 2
        else:
            return False
        self.space = True
        return True

    def comment(self) -> bool:
        """`// …` up to its newline, or `/* … */` (not nested in C++)."""
        text, i = self.text, self.i
        if text.startswith("//", i):
            self.i = line_comment_end(text, i)
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = len(text) if j < 0 else j + 2
            self.line += text.count("\n", i, j)
            self.i = j
        else:
            return False
        self.space = True
        return True

    def directive(self) -> bool:
        """A `#` line, continued over backslash-newlines: function-like `#define`s are recorded
        in `macros`, other directives skipped."""
        if not (self.at_line_start and self.text[self.i] == "#"):
            return False
        text, i = self.text, self.i
        k = _directive_end(text, i)
        if self.macros is not None:
            _define(text[i:k], self.line, self.macros)
        self.line += text.count("\n", i, k)
        self.i = k
        return True

    def raw_string(self) -> bool:
        """`R"delim(…)delim"` (with an encoding prefix or not), taken as it is."""
        text, i = self.text, self.i
        m = _RAW.match(text, i)
        if not m:
            return False
        end = text.find(")" + m.group(1) + '"', m.end())
        end = len(text) if end < 0 else end
        _add_str(self.toks, text[m.end():end], self.line, self.space)
        self.space = False
        self.line += text.count("\n", i, end)
        self.i = end + len(m.group(1)) + 2
        return True

    def string(self) -> bool:
        """`"…"` (or `u"…"`, `U"…"`, `L"…"`, `u8"…"`), escapes decoded, joined to a literal just
        before it."""
        text, i = self.text, self.i
        c = text[i]
        if not (c == '"' or (c in "uUL" and text.startswith('"', i + 1))
                or text.startswith('u8"', i)):
            return False
        start = text.index('"', i) + 1
        j = quoted_end(text, start, stop_at_newline=True)
        _add_str(self.toks, _unescape(text[start:j]), self.line, self.space)
        self.space = False
        self.i = j + 1
        return True

    def char(self) -> bool:
        """A character literal, `'a'` or `'\\n'`; an unclosed `'` is left to `word` (punct)."""
        if self.text[self.i] != "'":
            return False
        m = _CHAR.match(self.text, self.i)
        if not m:
            return False
        self.emit("char", m.group())
        self.i = m.end()
        return True

    def word(self) -> bool:
        """An identifier, a number, or punctuation (longest of `_PUNCT` first); always consumes."""
        text, i = self.text, self.i
        m = _IDENT.match(text, i) or _NUMBER.match(text, i)
        if m and m.end() > i:
            self.emit("ident" if m.re is _IDENT else "num", m.group())
            self.i = m.end()
            return True
        p = next((p for p in _PUNCT if text.startswith(p, i)), text[i])
        self.emit("punct", p)
        self.i += len(p)
        return True


def _directive_end(text: str, i: int) -> int:
    """Where a preprocessor directive starting at `i` ends: its first newline not escaped by a
    backslash (kept), or the end of text."""
    j = i
    while True:
        k = text.find("\n", j)
        if k < 0:
            return len(text)
        if text[k - 1] == "\\" or (text[k - 1] == "\r" and text[k - 2] == "\\"):
            j = k + 1
            continue
        return k


def lex(text: str, macros: dict[str, Macro] | None = None) -> list[Tok]:
    """C++ tokens, comments dropped, adjacent string literals joined (as the compiler does);
    `#define NAME(params) body` lines are added to `macros` (when given), other directives
    skipped."""
    return _Lexer(text, macros).tokens()


def _add_str(toks: list[Tok], value: str, line: int, space: bool) -> None:
    if toks and toks[-1].kind == "str":  # "a" "b" is one literal
        prev = toks[-1]
        toks[-1] = Tok("str", prev.text + value, prev.line, prev.space)
    else:
        toks.append(Tok("str", value, line, space))


_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)\(([^)]*)\)")


def _define(directive: str, line: int, macros: dict[str, Macro]) -> None:
    m = _DEFINE.match(directive)
    if m is None:
        return
    body_text = directive[m.end():].replace("\\\r\n", " ").replace("\\\n", " ")
    body = tuple(Tok(t.kind, t.text, line, t.space) for t in lex(body_text))
    if not any(t.text in CHECK_CLASSES or t.text in OP_CHECKS or t.text == "throw"
               or t.text in macros for t in body):
        return
    params = tuple(p.strip() for p in m.group(2).split(",") if p.strip())
    macros[m.group(1)] = Macro(m.group(1), params, body)


def macro_args(toks: list[Tok], start: int, end: int) -> list[list[Tok]]:
    """A call's top-level comma-separated arguments, as the preprocessor counts them: a
    trailing comma leaves an empty last argument; `<…>` is not a group (`a < b, c` is two)."""
    return split_args(toks, start, end, keep_empty_last=True)


def spell(arg: list[Tok]) -> str:
    """Tokens as the preprocessor's `#x` spells them: a space where the source had any
    whitespace between two tokens, none elsewhere; a string literal quoted again."""
    out = ""
    for k, t in enumerate(arg):
        text = ('"' + t.text.replace("\\", "\\\\").replace('"', '\\"') + '"'
                if t.kind == "str" else t.text)
        if k and t.space:
            out += " "
        out += text
    return out


def _expand(macro: Macro, args: list[list[Tok]], line: int) -> list[Tok]:
    """A function-like macro's body with its arguments substituted (`#x` stringized)."""
    by_name = dict(zip(macro.params, args, strict=False))
    if macro.params and macro.params[-1] == "...":
        by_name["__VA_ARGS__"] = [t for k, a in enumerate(args[len(macro.params) - 1:])
                                  for t in ([Tok("punct", ",", line)] if k else []) + a]
    out: list[Tok] = []
    body = macro.body
    k = 0
    while k < len(body):
        t = body[k]
        if t.text == "#" and k + 1 < len(body) and body[k + 1].text in by_name:
            s = Tok("str", spell(by_name[body[k + 1].text]), line, t.space)
            _push_str(out, s)
            k += 2
            continue
        if t.kind == "ident" and t.text in by_name:
            out.extend(Tok(a.kind, a.text, line, a.space if j else t.space)
                       for j, a in enumerate(by_name[t.text]))
        elif t.kind == "str":
            _push_str(out, Tok("str", t.text, line, t.space))
        else:
            out.append(Tok(t.kind, t.text, line, t.space))
        k += 1
    return out


def _push_str(out: list[Tok], s: Tok) -> None:
    if out and out[-1].kind == "str":
        out[-1] = Tok("str", out[-1].text + s.text, s.line, out[-1].space)
    else:
        out.append(s)


def _message_parts(args: list[list[Tok]]) -> tuple[Part, ...]:
    """`c10::str(a, b, …)`: literals as text, other arguments as holes."""
    parts: list[Part] = []
    for a in args:
        if len(a) == 1 and a[0].kind == "str":
            parts.append(a[0].text)
        elif a:
            parts.append(Hole(spell(a)))
    return join_literals(parts)


def _concat_parts(arg: list[Tok]) -> tuple[Part, ...] | None:
    """`"a" + x + std::string("b")` / `std::string("a") + x` / a literal → parts."""
    pieces: list[list[Tok]] = [[]]
    depth = 0
    for t in arg:
        if t.kind == "punct" and t.text in OPEN:
            depth += 1
        elif t.kind == "punct" and t.text in CLOSE:
            depth -= 1
        if depth == 0 and t.text == "+":
            pieces.append([])
            continue
        pieces[-1].append(t)
    parts: list[Part] = []
    for p in pieces:
        if len(p) == 1 and p[0].kind == "str":
            parts.append(p[0].text)
        elif (len(p) >= 4 and p[0].text == "std" and p[2].text == "string" and p[3].text == "("
              and len(p) == 6 and p[4].kind == "str"):
            parts.append(p[4].text)
        elif p:
            parts.append(Hole(spell(p)))
    if not any(isinstance(p, str) for p in parts):
        return None
    return join_literals(parts)


_NOT_FUNCTIONS = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof",
                            "decltype", "alignof", "static_assert", "defined"})


def _opening(toks: list[Tok], close: int) -> int | None:
    """The index of the bracket that `toks[close]` (`)` or `}`) closes, searching backwards."""
    want = {")": "(", "}": "{"}[toks[close].text]
    depth = 0
    for j in range(close, -1, -1):
        if toks[j].text == toks[close].text:
            depth += 1
        elif toks[j].text == want:
            depth -= 1
            if depth == 0:
                return j
    return None


def _constructor_of(toks: list[Tok], k: int) -> str | None:
    """When `toks[k]` names the last member of a constructor's initializer list (`C(…) : a(x),
    b(y) {`), the constructor's name (`__func__` in its body), else None."""
    j = k - 1
    while j > 0 and toks[j].text == ",":
        if toks[j - 1].text not in (")", "}"):
            return None
        opening = _opening(toks, j - 1)
        if opening is None or opening < 2 or toks[opening - 1].kind != "ident":
            return None
        j = opening - 2
    if j < 1 or toks[j].text != ":":
        return None
    while j > 0 and toks[j - 1].text in ("noexcept", "override", "final"):
        j -= 1
    if toks[j - 1].text != ")":
        return None
    opening = _opening(toks, j - 1)
    if opening is None or opening < 1 or toks[opening - 1].kind != "ident":
        return None
    return toks[opening - 1].text


@dataclass(frozen=True, slots=True)
class FunctionSpan:
    """A function's definition among a file's tokens: `name` (`__func__`: the bare name; a
    lambda is `operator()`), its parameter list's `(` (`params`), and its body's braces."""

    name: str
    params: int
    body: int
    end: int


def function_spans(toks: list[Tok]) -> list[FunctionSpan]:
    """The function (and lambda) definitions of a file's tokens, in order of their bodies."""
    spans: list[FunctionSpan] = []
    for i, t in enumerate(toks):
        if t.text != "(":
            continue
        close = matching_close(toks, i)
        j = close + 1
        while j < len(toks) and (toks[j].text in ("const", "noexcept", "override", "final",
                                                  "mutable", "&", "&&") or
                                 (toks[j].kind == "ident" and toks[j].text.startswith("__"))):
            j += 1
        if j < len(toks) and toks[j].text == "->":
            j += 1
            while j < len(toks) and toks[j].text not in ("{", ";", "(", ")"):
                j += 1
        if j >= len(toks) or toks[j].text != "{":
            continue
        prev = toks[i - 1] if i else None
        if prev is not None and prev.text == "]":
            name = "operator()"
        elif prev is not None and prev.kind == "ident" and prev.text not in _NOT_FUNCTIONS:
            name = _constructor_of(toks, i - 1) or prev.text
        else:
            continue
        spans.append(FunctionSpan(name, i, j, matching_close(toks, j)))
    return sorted(spans, key=lambda s: (s.body, s.end, s.name))


def _function_owners(toks: list[Tok]) -> list[str]:
    """For each token, the function whose body holds it (`__func__`: the bare name; a
    lambda's body is `operator()`)."""
    owner = [""] * len(toks)
    for s in function_spans(toks):
        owner[s.body:s.end + 1] = [s.name] * (s.end + 1 - s.body)
    return owner


class _CheckScanner:
    """The checks of one file's tokens: `scan` walks a token list and hands each check-shaped
    call to the method for its kind, which records it and says where the walk goes on."""

    def __init__(self, text: str, path: str, macros: dict[str, Macro], classed: bool = False
                 ) -> None:
        self.classed = classed
        self.toks = lex(text, macros)
        self.lines = text.splitlines()
        self.owner = _function_owners(self.toks)
        self.path = path
        self.macros = macros
        self.out: list[CppCheck] = []

    def source(self, line: int) -> str:
        """The stripped source line `line` (1-based), "" past the end."""
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    def add(self, kind: str, macro: str, parts: tuple[Part, ...], error_class: str | None,
            condition: str, at: int, fn: str) -> None:
        self.out.append(CppCheck(kind, macro, parts, error_class, condition, self.path, at, fn,
                                 self.source(at)))

    def scan(self, ts: list[Tok], base: int, line: int | None, via: str, depth: int) -> None:
        """Record the checks in `ts`: the file's tokens (`line` None: each token's own line and
        function) or a macro's expansion called at `toks[base]` on `line` (`via`: the
        outermost macro's name, what the check is known by; `depth`: expansions so far)."""
        i = 0
        while i < len(ts):
            t = ts[i]
            if t.kind != "ident":
                i += 1
                continue
            at = line if line is not None else t.line
            fn = self.owner[base + i] if line is None and base + i < len(self.owner) else (
                self.owner[base] if base < len(self.owner) else "")
            call = i + 1 < len(ts) and ts[i + 1].text == "("
            if call and t.text in CHECK_CLASSES:
                i = self.torch_check(ts, i, at, fn, via)
            elif call and self.classed and t.text in CLASSED:
                i = self.classed_check(ts, i, at, fn)
            elif call and t.text in OP_CHECKS:
                i = self.op_check(ts, i, at, fn, via)
            elif (t.text == "throw" and i + 4 < len(ts) and ts[i + 1].text == "std"
                    and ts[i + 2].text == "::" and ts[i + 3].text in THROWN
                    and ts[i + 4].text in ("(", "{")):
                i = self.thrown(ts, i, at, fn, via)
            elif call and t.text in self.macros and depth < 4:
                close = matching_close(ts, i + 1)
                body = _expand(self.macros[t.text], macro_args(ts, i + 2, close), at)
                self.scan(body, base + i, at, via or t.text, depth + 1)
                i = close + 1
            else:
                i += 1

    def torch_check(self, ts: list[Tok], i: int, at: int, fn: str, via: str) -> int:
        """`TORCH_CHECK*(cond, msg…)` at `ts[i]`: its message, or torch's own when it has none.
        Returns the index after the call."""
        close = matching_close(ts, i + 1)
        args = macro_args(ts, i + 2, close)
        if args:
            cond = spell(args[0])
            parts = _message_parts(args[1:]) if len(args) > 1 else (
                NO_MESSAGE.format(cond=cond),)
            self.add("check", via or ts[i].text, parts, CHECK_CLASSES[ts[i].text], cond, at, fn)
        return close + 1

    def classed_check(self, ts: list[Tok], i: int, at: int, fn: str) -> int:
        """`TORCH_CHECK_WITH(Type, cond, msg…)`, `C10_THROW_ERROR(Type, msg…)` or
        `AT_ERROR(msg…)` at `ts[i]`, with a literal in its message. Returns the index after."""
        close = matching_close(ts, i + 1)
        args = macro_args(ts, i + 2, close)
        name = ts[i].text
        if name == "AT_ERROR":
            kind, cond, message = "RuntimeError", "false", args
        elif name == "C10_THROW_ERROR" and len(args) >= 2:
            kind, cond, message = spell(args[0]), "false", args[1:]
        elif name == "TORCH_CHECK_WITH" and len(args) >= 3:
            kind, cond, message = spell(args[0]), spell(args[1]), args[2:]
        else:
            return close + 1
        parts = _message_parts(message)
        if any(isinstance(p, str) and p.strip() for p in parts):
            self.add("check", name, parts, PYTHON_CLASS_OF.get(kind, "RuntimeError"), cond, at,
                     fn)
        return close + 1

    def op_check(self, ts: list[Tok], i: int, at: int, fn: str, via: str) -> int:
        """`TORCH_CHECK_EQ(a, b)` and its siblings at `ts[i]`: `Check failed: a == b (x vs. y) `.
        Returns the index after the call."""
        close = matching_close(ts, i + 1)
        args = macro_args(ts, i + 2, close)
        if len(args) >= 2:
            a, b = spell(args[0]), spell(args[1])
            op = OP_CHECKS[ts[i].text]
            parts = join_literals([f"Check failed: {a} {op} {b} (", Hole(a), " vs. ", Hole(b),
                                   ") "])
            self.add("op", via or ts[i].text, parts, None, f"{a} {op} {b}", at, fn)
        return close + 1

    def thrown(self, ts: list[Tok], i: int, at: int, fn: str, via: str) -> int:
        """`throw std::runtime_error(…)` (or a sibling) at `ts[i]`, when its one argument holds
        literal text. Returns the index after the call."""
        close = matching_close(ts, i + 4)
        args = macro_args(ts, i + 5, close)
        parts = _concat_parts(args[0]) if len(args) == 1 else None
        if parts:
            self.add("throw", via or ts[i + 3].text, parts, None, "", at, fn)
        return close + 1


def checks(text: str, path: str, macros: dict[str, Macro], classed: bool = False
           ) -> list[CppCheck]:
    """Every check of one file (see the module doc); the file's own `#define`s are added to
    `macros` as they are read. `classed`: also torch's own `TORCH_CHECK_WITH`,
    `C10_THROW_ERROR` and `AT_ERROR`."""
    scanner = _CheckScanner(text, path, macros, classed)
    scanner.scan(scanner.toks, 0, None, "", 0)
    return scanner.out


def plain_text(parts: tuple[Part, ...]) -> str:
    return "".join(p for p in parts if isinstance(p, str))
