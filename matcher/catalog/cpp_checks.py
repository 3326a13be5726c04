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


def lex(text: str, macros: dict[str, Macro] | None = None) -> list[Tok]:
    """C++ tokens, comments dropped, adjacent string literals joined (as the compiler does);
    `#define NAME(params) body` lines are added to `macros` (when given), other directives
    skipped."""
    toks: list[Tok] = []
    i = 0
    n = len(text)
    line = 1
    at_line_start = True
    space = False

    def tok(kind: str, value: str, at: int) -> None:
        nonlocal space
        toks.append(Tok(kind, value, at, space))
        space = False

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            space = True
            continue
        if c in " \t\r\f\v":
            i += 1
            space = True
            continue
        if c == "\\" and text.startswith("\n", i + 1):
            i += 2
            line += 1
            space = True
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            space = True
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
            space = True
            continue
        if c == "#" and at_line_start:
            # a directive, continued over backslash-newlines
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] == "\\" or (text[k - 1] == "\r" and text[k - 2] == "\\"):
                    j = k + 1
                    continue
                break
            directive = text[i:k]
            if macros is not None:
                _define(directive, line, macros)
            line += text.count("\n", i, k)
            i = k
            continue
        at_line_start = False
        m = _RAW.match(text, i)
        if m:
            end = text.find(")" + m.group(1) + '"', m.end())
            end = n if end < 0 else end
            _add_str(toks, text[m.end():end], line, space)
            space = False
            line += text.count("\n", i, end)
            i = end + len(m.group(1)) + 2
            continue
        if c == '"' or (c in "uUL" and text.startswith('"', i + 1)) or text.startswith('u8"', i):
            j = text.index('"', i) + 1
            start = j
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            _add_str(toks, _unescape(text[start:j]), line, space)
            space = False
            i = j + 1
            continue
        if c == "'":
            m2 = re.compile(r"'(?:\\.|[^\\'\n])*'").match(text, i)
            if m2:
                tok("char", m2.group(), line)
                i = m2.end()
                continue
        m3 = _IDENT.match(text, i)
        if m3:
            tok("ident", m3.group(), line)
            i = m3.end()
            continue
        m4 = _NUMBER.match(text, i)
        if m4 and m4.end() > i:
            tok("num", m4.group(), line)
            i = m4.end()
            continue
        for p in _PUNCT:
            if text.startswith(p, i):
                tok("punct", p, line)
                i += len(p)
                break
        else:
            tok("punct", c, line)
            i += 1
    return toks


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


_OPEN = {"(": ")", "[": "]", "{": "}"}


def _close(toks: list[Tok], i: int) -> int:
    stack = [_OPEN[toks[i].text]]
    j = i + 1
    while j < len(toks):
        t = toks[j]
        if t.kind == "punct":
            if t.text in _OPEN:
                stack.append(_OPEN[t.text])
            elif t.text == stack[-1]:
                stack.pop()
                if not stack:
                    return j
            elif t.text in (")", "]", "}"):
                pass
        j += 1
    return len(toks) - 1


def _args(toks: list[Tok], start: int, end: int) -> list[list[Tok]]:
    """Top-level comma-separated arguments; `<…>` is not a group (`a < b, c` is two)."""
    out: list[list[Tok]] = []
    cur: list[Tok] = []
    depth = 0
    for t in toks[start:end]:
        if t.kind == "punct" and t.text in _OPEN:
            depth += 1
        elif t.kind == "punct" and t.text in (")", "]", "}"):
            depth -= 1
        if depth == 0 and t.kind == "punct" and t.text == ",":
            out.append(cur)
            cur = []
            continue
        cur.append(t)
    if cur or out:
        out.append(cur)
    return out


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
    return _joined(parts)


def _joined(parts: list[Part]) -> tuple[Part, ...]:
    out: list[Part] = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] = out[-1] + p
                continue
        out.append(p)
    return tuple(out)


def _concat_parts(arg: list[Tok]) -> tuple[Part, ...] | None:
    """`"a" + x + std::string("b")` / `std::string("a") + x` / a literal → parts."""
    pieces: list[list[Tok]] = [[]]
    depth = 0
    for t in arg:
        if t.kind == "punct" and t.text in _OPEN:
            depth += 1
        elif t.kind == "punct" and t.text in (")", "]", "}"):
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
    return _joined(parts)


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


def _function_owners(toks: list[Tok]) -> list[str]:
    """For each token, the function whose body holds it (`__func__`: the bare name; a lambda's
    body is `operator()`)."""
    owner = [""] * len(toks)
    spans: list[tuple[int, int, str]] = []
    for i, t in enumerate(toks):
        if t.text != "(":
            continue
        close = _close(toks, i)
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
        spans.append((j, _close(toks, j), name))
    for a, b, name in sorted(spans):
        owner[a:b + 1] = [name] * (b + 1 - a)
    return owner


def checks(text: str, path: str, macros: dict[str, Macro]) -> list[CppCheck]:
    """Every check of one file (see the module doc); the file's own `#define`s are added to
    `macros` as they are read."""
    toks = lex(text, macros)
    lines = text.splitlines()
    owner = _function_owners(toks)
    out: list[CppCheck] = []

    def source(line: int) -> str:
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""

    def scan(ts: list[Tok], base: int, line: int | None, via: str, depth: int) -> None:
        i = 0
        while i < len(ts):
            t = ts[i]
            if t.kind != "ident":
                i += 1
                continue
            at = line if line is not None else t.line
            fn = owner[base + i] if line is None and base + i < len(owner) else (
                owner[base] if base < len(owner) else "")
            nxt = ts[i + 1] if i + 1 < len(ts) else None
            if t.text in CHECK_CLASSES and nxt is not None and nxt.text == "(":
                close = _close(ts, i + 1)
                args = _args(ts, i + 2, close)
                if args:
                    cond = spell(args[0])
                    parts = _message_parts(args[1:]) if len(args) > 1 else (
                        NO_MESSAGE.format(cond=cond),)
                    out.append(CppCheck("check", via or t.text, parts, CHECK_CLASSES[t.text],
                                        cond, path, at, fn, source(at)))
                i = close + 1
                continue
            if t.text in OP_CHECKS and nxt is not None and nxt.text == "(":
                close = _close(ts, i + 1)
                args = _args(ts, i + 2, close)
                if len(args) >= 2:
                    a, b = spell(args[0]), spell(args[1])
                    op = OP_CHECKS[t.text]
                    parts = _joined([f"Check failed: {a} {op} {b} (", Hole(a), " vs. ", Hole(b),
                                     ") "])
                    out.append(CppCheck("op", via or t.text, parts, None, f"{a} {op} {b}",
                                        path, at, fn, source(at)))
                i = close + 1
                continue
            if (t.text == "throw" and i + 4 < len(ts) and ts[i + 1].text == "std"
                    and ts[i + 2].text == "::" and ts[i + 3].text in THROWN
                    and ts[i + 4].text in ("(", "{")):
                close = _close(ts, i + 4)
                args = _args(ts, i + 5, close)
                parts2 = _concat_parts(args[0]) if len(args) == 1 else None
                if parts2:
                    out.append(CppCheck("throw", via or ts[i + 3].text, parts2, None, "", path,
                                        at, fn, source(at)))
                i = close + 1
                continue
            if t.text in macros and nxt is not None and nxt.text == "(" and depth < 4:
                close = _close(ts, i + 1)
                args = _args(ts, i + 2, close)
                body = _expand(macros[t.text], args, at)
                scan(body, base + i, at, via or t.text, depth + 1)
                i = close + 1
                continue
            i += 1

    scan(toks, 0, None, "", 0)
    return out


def plain_text(parts: tuple[Part, ...]) -> str:
    return "".join(p for p in parts if isinstance(p, str))
