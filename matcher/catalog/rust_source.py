r"""One Rust source file → the message sites it holds: what the router prints when it fails.

Pure: `sites(text, path)` takes a file's text and its path inside the crate (`src/core/worker.rs`,
as `file!()` and the panic handler print it) and returns `RustSite`s. No Rust toolchain is
needed: a small lexer (strings, raw strings, chars and lifetimes, nested comments) and a walk
over its tokens find

- log calls — `error!`, `warn!` (`tracing::`, `log::` or bare), their format string and
  arguments (fields such as `worker = %url` and `target: "x"` skipped: tracing prints fields after
  the message);
- panics — `panic!`, `unreachable!`, `unimplemented!`, `todo!`, `assert!`/`assert_eq!`/`assert_ne!`
  with a message, `.expect("…")` (Rust prints `msg: <the error's Debug>` for a `Result`), and
  `.unwrap()`, whose message (`called \`Result::unwrap()\` on an \`Err\` value: …`) names no site:
  only the `panicked at FILE:LINE:COL` frame does;
- error values — `Err(format!(…))`, `Err("…".to_string())`, `anyhow!(…)`, `bail!(…)`,
  `SomeError::Variant(format!(…))`, pyo3's `PyXError::new_err(…)`, `.map_err(|e| format!(…))`:
  text that reaches a log line, an HTTP error body or a Python exception.

Test code is left out: items under `#[cfg(test)]`, `#[test]` and `#[tokio::test]` functions.
Each site keeps its line and the column Rust's `Location::caller()` reports (the macro's or the
method name's first character), the enclosing `fn`, and the stripped source line, so that a
panic without a message can be known by its frame.
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

LOG_MACROS = {"error": "error", "warn": "warning"}
PANIC_MACROS = frozenset({"panic", "unreachable", "unimplemented", "todo"})
ASSERT_MACROS = {"assert": 1, "assert_eq": 2, "assert_ne": 2, "debug_assert": 1,
                 "debug_assert_eq": 2, "debug_assert_ne": 2}
ERROR_MACROS = frozenset({"anyhow", "bail"})


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "ident", "str", "punct", "num", "char", "life"
    text: str  # the identifier, the punctuation, or a string literal's decoded value
    line: int
    col: int  # 1-based, in characters


@dataclass(frozen=True, slots=True)
class Hole:
    """A `{…}` of a format string: the argument expression it prints (empty when unknown)."""

    expr: str
    spec: str = ""  # what follows `:` — `?` is Debug


@dataclass(frozen=True, slots=True)
class RustSite:
    kind: str  # "log", "panic", "error", "frame"
    severity: str  # "error", "warning", "critical"
    macro: str  # error, warn, panic, expect, unwrap, Err, anyhow, new_err …
    parts: tuple[str | Hole, ...]  # the message: literal text and holes (empty for "frame")
    path: str
    line: int
    col: int
    function: str
    source: str  # the site's first source line, stripped
    py_class: str | None = None  # pyo3's exception class, `new_err` sites only
    suffix: bool = False  # Rust appends `: <error>` (`.expect` on a Result)
    condition: str = ""  # an assert's condition, a panic's enclosing `if`/`match` arm

    @property
    def template(self) -> str:
        """The message as a format string: literal braces doubled, each hole `{expr}`."""
        out = []
        for p in self.parts:
            if isinstance(p, Hole):
                out.append("{" + p.expr + (":" + p.spec if p.spec else "") + "}")
            else:
                out.append(p.replace("{", "{{").replace("}", "}}"))
        return "".join(out)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUM = re.compile(r"[0-9][0-9A-Za-z_.]*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"'}
_PUNCT2 = ("::", "=>", "->", "==", "!=", "<=", ">=", "&&", "||", "..")


def _decode(body: str) -> str:
    """A Rust string literal's escapes decoded (`\\n`, `\\u{..}`, `\\x..`, a line continuation)."""
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
        elif e == "x" and i + 3 < n + 1:
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif e == "u" and body[i + 2:i + 3] == "{":
            end = body.index("}", i)
            out.append(chr(int(body[i + 3:end].replace("_", ""), 16)))
            i = end + 1
        elif e == "\n":  # continuation: the newline and the next line's leading whitespace
            i += 2
            while i < n and body[i] in " \t\r\n":
                i += 1
        else:
            out.append(e)
            i += 2
    return "".join(out)


_RAW_STRING = re.compile(r'(b|c)?r(#*)"')
_CHAR_BODY = re.compile(r"(?:\\u\{[0-9A-Fa-f_]+\}|\\x[0-9A-Fa-f]{2}|\\.|[^\\'\n])'")


class _Lexer:
    """One pass over a Rust file's text: one method per kind of thing the text can hold next,
    each consuming it and returning True, or returning False to let the next one look."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[Token] = []
        self.i = 0
        self.line = 1
        self.line_start = 0  # index of the current line's first character

    def lex(self) -> list[Token]:
        """Every token of the text, in order."""
        n = len(self.text)
        while self.i < n:
            if self.blank():
                continue
            col = self.i - self.line_start + 1
            _ = (self.comment() or self.raw_string(col) or self.string(col)
                 or self.char_or_lifetime(col) or self.word(col))
        return self.tokens

    def emit(self, kind: str, text: str, col: int) -> None:
        self.tokens.append(Token(kind, text, self.line, col))

    def pass_lines(self, a: int, b: int) -> None:
        """Count the newlines of `text[a:b]`, a token spanning lines."""
        k = self.text.count("\n", a, b)
        if k:
            self.line += k
            self.line_start = self.text.rindex("\n", a, b) + 1

    def blank(self) -> bool:
        """A newline or blanks."""
        c = self.text[self.i]
        if c == "\n":
            self.line += 1
            self.i += 1
            self.line_start = self.i
        elif c in " \t\r":
            self.i += 1
        else:
            return False
        return True

    def comment(self) -> bool:
        """`// …` up to its newline, or `/* … */`, which nests in Rust."""
        text, i = self.text, self.i
        if text.startswith("//", i):
            self.i = line_comment_end(text, i)
            return True
        if not text.startswith("/*", i):
            return False
        j = _nested_comment_end(text, i)
        self.pass_lines(i, j)
        self.i = j
        return True

    def raw_string(self, col: int) -> bool:
        """`r"…"`, `r#"…"#` (and `br`, `cr`): the text as it is, when not inside a word."""
        text, i = self.text, self.i
        m = _RAW_STRING.match(text, i)
        if not m or (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            return False
        hashes = m.group(2)
        end = text.find('"' + hashes, m.end())
        end = len(text) if end < 0 else end
        self.emit("str", text[m.end():end], col)
        self.pass_lines(i, end)
        self.i = end + 1 + len(hashes)
        return True

    def string(self, col: int) -> bool:
        """`"…"` (or `b"…"`, `c"…"`), escapes decoded; it may span lines."""
        text, i = self.text, self.i
        c = text[i]
        if not (c == '"' or (c in "bc" and text.startswith('"', i + 1))):
            return False
        start = i + (2 if c != '"' else 1)
        j = quoted_end(text, start, stop_at_newline=False)
        self.emit("str", _decode(text[start:j]), col)
        self.pass_lines(i, j)
        self.i = j + 1
        return True

    def char_or_lifetime(self, col: int) -> bool:
        """A char literal (`'a'`, `'\\n'`, `'\\u{1F600}'`, `b'x'`) or a lifetime (`'a`,
        `'static`); a lone `'` is skipped."""
        text, i = self.text, self.i
        c = text[i]
        if not (c == "'" or (c == "b" and text.startswith("'", i + 1))):
            return False
        j = i + (2 if c == "b" else 1)
        cm = _CHAR_BODY.match(text, j)
        lm = None if cm else _IDENT.match(text, j)
        if cm:
            self.emit("char", text[j:cm.end() - 1], col)
            self.i = cm.end()
        elif lm:
            self.emit("life", lm.group(), col)
            self.i = lm.end()
        else:
            self.i += 1
        return True

    def word(self, col: int) -> bool:
        """An identifier, a number, or punctuation (two characters of `_PUNCT2` first); always
        consumes."""
        text, i = self.text, self.i
        m = _IDENT.match(text, i)
        kind = "ident"
        if not m:
            m = _NUM.match(text, i)
            kind = "num"
        if m:
            self.emit(kind, m.group(), col)
            self.i = m.end()
            return True
        two = text[i:i + 2]
        p = two if two in _PUNCT2 else text[i]
        self.emit("punct", p, col)
        self.i += len(p)
        return True


def _nested_comment_end(text: str, i: int) -> int:
    """Where the `/* … */` comment starting at `i` ends (after its `*/`), inner comments
    counted; the end of text when left open."""
    depth = 0
    j = i
    n = len(text)
    while j < n:
        if text.startswith("/*", j):
            depth += 1
            j += 2
        elif text.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                break
        else:
            j += 1
    return j


def lex(text: str) -> list[Token]:
    """Rust tokens, comments dropped; string literals decoded (raw and byte strings too)."""
    return _Lexer(text).lex()


def _split_args(toks: list[Token], start: int, end: int) -> list[list[Token]]:
    """A macro call's top-level comma-separated arguments; a trailing comma adds none."""
    return split_args(toks, start, end, keep_empty_last=False)


def _expr_text(arg: list[Token]) -> str:
    """An argument expression as short text: `self.url`, `e`, `worker.url()`."""
    out = []
    for t in arg:
        if t.kind == "str":
            out.append('"' + t.text + '"')
        else:
            out.append(t.text)
    text = "".join(out)
    for prefix in ("&", "*"):
        while text.startswith(prefix):
            text = text[1:]
    return text


_FMT_HOLE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def format_parts(fmt: str, args: list[list[Token]]) -> tuple[str | Hole, ...]:
    """A format string and its arguments → literal text and holes (named and positional
    arguments, inline `{name}` captures, `{0}`, `{:?}`, `{name:>8}`)."""
    positional: list[str] = []
    named: dict[str, str] = {}
    for a in args:
        if len(a) >= 2 and a[0].kind == "ident" and a[1].text == "=" and (
                len(a) < 3 or a[2].text != "="):
            named[a[0].text] = _expr_text(a[2:])
        else:
            positional.append(_expr_text(a))
    parts: list[str | Hole] = []
    pos = 0
    nxt = 0
    for m in _FMT_HOLE.finditer(fmt):
        parts.append(fmt[pos:m.start()])
        pos = m.end()
        if m.group(0) == "{{":
            parts.append("{")
            continue
        if m.group(0) == "}}":
            parts.append("}")
            continue
        inner = m.group(1) or ""
        name, _, spec = inner.partition(":")
        name = name.strip()
        if not name:
            expr = positional[nxt] if nxt < len(positional) else ""
            nxt += 1
        elif name.isdigit():
            k = int(name)
            expr = positional[k] if k < len(positional) else ""
        else:
            expr = named.get(name, name)
        parts.append(Hole(expr, spec))
    parts.append(fmt[pos:])
    return join_literals(parts)


def _message(arg: list[Token], rest: list[list[Token]]) -> tuple[str | Hole, ...] | None:
    """The message of a macro's format arguments, or of `format!(…)`, `"…".to_string()`,
    `"…".into()`, `String::from("…")`, `"…"`; None when it is not text we can read."""
    if not arg:
        return None
    if arg[0].kind == "str" and (len(arg) == 1 or (
            len(arg) >= 3 and arg[1].text == "." and arg[2].text in (
                "to_string", "into", "to_owned", "to_str"))):
        return format_parts(arg[0].text, rest) if rest else (arg[0].text,)
    if (len(arg) >= 4 and arg[0].text == "format" and arg[1].text == "!"
            and arg[2].text in OPEN):
        inner = _split_args(arg, 3, matching_close(arg, 2))
        if inner and len(inner[0]) == 1 and inner[0][0].kind == "str":
            return format_parts(inner[0][0].text, inner[1:])
        return None
    if (len(arg) >= 4 and arg[0].text == "String" and arg[1].text == "::"
            and arg[2].text == "from" and arg[3].text == "(" and arg[4].kind == "str"):
        return (arg[4].text,)
    return None


def _plain_text(parts: tuple[str | Hole, ...]) -> str:
    return "".join(p for p in parts if isinstance(p, str))


def _log_message(args: list[list[Token]]) -> tuple[str | Hole, ...] | None:
    """A tracing / log macro's message: its first argument that is a bare string literal (what
    comes before are `target: …`, `parent: …` and fields such as `worker = %url`, `?e`)."""
    for k, a in enumerate(args):
        if len(a) == 1 and a[0].kind == "str":
            return format_parts(a[0].text, args[k + 1:])
        if a and a[0].kind == "str":
            return None
    return None


def test_spans(toks: list[Token]) -> list[tuple[int, int]]:
    """Token index ranges of items under `#[cfg(test)]`, `#[test]`, `#[tokio::test]` …"""
    spans: list[tuple[int, int]] = []
    i = 0
    n = len(toks)
    while i < n:
        t = toks[i]
        if t.text == "#" and i + 1 < n and toks[i + 1].text == "[":
            close = matching_close(toks, i + 1)
            body = [x.text for x in toks[i + 2:close]]
            is_test = ("test" in body and (body[0] in ("test", "cfg") or body[-1] == "test"))
            if body[:1] == ["cfg"] and "not" in body:
                is_test = False
            if is_test:
                j = close + 1
                # further attributes, then the item up to its block or `;`
                while j < n:
                    if toks[j].text == "#" and j + 1 < n and toks[j + 1].text == "[":
                        j = matching_close(toks, j + 1) + 1
                        continue
                    if toks[j].text == ";":
                        break
                    if toks[j].text == "{":
                        j = matching_close(toks, j)
                        break
                    j += 1
                spans.append((i, j))
                i = j + 1
                continue
            i = close + 1
            continue
        i += 1
    return spans


def _functions(toks: list[Token]) -> list[tuple[int, int, str]]:
    """(body start, body end, name) of every `fn` with a body, innermost found by the caller."""
    out: list[tuple[int, int, str]] = []
    for i, t in enumerate(toks):
        if t.text == "fn" and t.kind == "ident" and i + 1 < len(toks) and toks[i + 1].kind == "ident":
            depth = 0
            j = i + 2
            while j < len(toks):
                x = toks[j]
                if x.text in ("(", "[", "<"):
                    depth += 1
                elif x.text in (")", "]", ">") and depth:
                    depth -= 1
                elif x.text == "->":
                    pass
                elif depth == 0 and x.text == ";":
                    break
                elif depth == 0 and x.text == "{":
                    out.append((j, matching_close(toks, j), toks[i + 1].text))
                    break
                j += 1
    return out


_PY_ERROR = re.compile(r"^Py([A-Z]\w*(?:Error|Exception|Warning))$")
_ERROR_PATH = re.compile(r"(?:Error|Err)$")


def _test_mask(toks: list[Token]) -> bytearray:
    """One byte per token (and one past the end): 1 inside test code (`test_spans`)."""
    testing = bytearray(len(toks) + 1)
    for a, b in test_spans(toks):
        testing[a:b + 1] = b"\x01" * (b + 1 - a)
    return testing


def _function_owners(toks: list[Token]) -> list[str]:
    """For each token, the innermost `fn` whose body holds it ("" outside any): outer bodies
    are filled first, inner ones over them."""
    owner = [""] * len(toks)
    for a, b, name in sorted(_functions(toks), key=lambda f: f[0]):
        owner[a:b + 1] = [name] * (b + 1 - a)
    return owner


class _SiteFinder:
    """The message sites of one file's tokens: `find` walks them and hands each site-shaped
    construct to the method for its kind; a method returns the index the walk goes on from,
    or None when the token does not start that kind."""

    def __init__(self, text: str, path: str) -> None:
        self.toks = lex(text)
        self.lines = text.splitlines()
        self.path = path
        self.testing = _test_mask(self.toks)
        self.owner = _function_owners(self.toks)
        self.error_heads = _error_contexts(self.toks)
        self.out: list[RustSite] = []

    def add(self, kind: str, severity: str, macro: str, parts: tuple[str | Hole, ...],
            at: Token, i: int, **extra: object) -> None:
        """Record a site reported at `at`'s line and column, in the function around `toks[i]`."""
        function = self.owner[i] if i < len(self.owner) else ""
        line = at.line
        source = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.out.append(RustSite(kind, severity, macro, parts, self.path, line, at.col,
                                 function, source, **extra))  # type: ignore[arg-type]

    def find(self) -> list[RustSite]:
        """Every site outside test code, in token order."""
        i = 0
        while i < len(self.toks):
            if self.testing[i]:
                i += 1
                continue
            for step in (self.macro_call, self.method_call, self.error_attribute):
                after = step(i)
                if after is not None:
                    i = after
                    break
            else:
                self.error_value(i)
                i += 1
        return self.out

    def macro_call(self, i: int) -> int | None:
        """`name!(…)` of a log, panic, assert or error macro; the site is at the macro's path
        (`tracing::error!` at `tracing`)."""
        toks, n = self.toks, len(self.toks)
        t = toks[i]
        if not (t.kind == "ident" and i + 2 < n and toks[i + 1].text == "!"
                and toks[i + 2].text in OPEN and t.text in _KNOWN_MACROS):
            return None
        name = t.text
        head = toks[i - 2] if i >= 2 and toks[i - 1].text == "::" else t
        args = _split_args(toks, i + 3, matching_close(toks, i + 2))
        if name in LOG_MACROS:
            parts = _log_message(args)
            if parts is not None:
                self.add("log", LOG_MACROS[name], name, parts, head, i)
        elif name in PANIC_MACROS:
            self.panic_macro(name, args, head, i)
        elif name in ASSERT_MACROS:
            self.assert_macro(name, args, head, i)
        elif name in ERROR_MACROS and args:
            parts = _message(args[0], args[1:])
            if parts is not None:
                self.add("error", "error", name, parts, head, i)
        return i + 1

    def panic_macro(self, name: str, args: list[list[Token]], head: Token, i: int) -> None:
        """`panic!`, `unreachable!`, `unimplemented!`, `todo!`: the message Rust prints (the
        last three put their own words first), or a frame-only site without one."""
        parts = (format_parts(args[0][0].text, args[1:])
                 if args and len(args[0]) == 1 and args[0][0].kind == "str" else ())
        if name != "panic":
            parts = ((_UNFINISHED[name] + ": ",) + parts) if parts else (_UNFINISHED[name],)
        self.add("panic" if parts else "frame", "critical", name, parts, head, i)

    def assert_macro(self, name: str, args: list[list[Token]], head: Token, i: int) -> None:
        """`assert!`/`assert_eq!`/`assert_ne!`: a panic with its message when it has one, else
        frame-only; `debug_assert*` are compiled out of release builds and left out."""
        if name.startswith("debug_"):
            return
        k = ASSERT_MACROS[name]
        condition = " , ".join(_expr_text(a) for a in args[:k])
        if len(args) > k and args[k] and args[k][0].kind == "str":
            parts = format_parts(args[k][0].text, args[k + 1:])
            self.add("panic", "critical", name, parts, head, i, condition=condition)
        else:
            self.add("frame", "critical", name, (), head, i, condition=condition)

    def method_call(self, i: int) -> int | None:
        """`.expect("…")` (the message, then `: <error>`) and `.unwrap()` (frame only); any
        other `.method(` is passed over."""
        toks, n = self.toks, len(self.toks)
        if not (toks[i].text == "." and i + 2 < n and toks[i + 1].kind == "ident"
                and toks[i + 2].text == "("):
            return None
        method = toks[i + 1]
        if method.text == "expect":
            args = _split_args(toks, i + 3, matching_close(toks, i + 2))
            parts = _message(args[0], []) if args else None
            if parts is None and args and args[0] and args[0][0].text == "&":
                parts = _message(args[0][1:], [])
            if parts:
                self.add("panic", "critical", "expect", parts, method, i, suffix=True)
            else:
                self.add("frame", "critical", "expect", (), method, i)
        elif method.text == "unwrap" and i + 3 < n and toks[i + 3].text == ")":
            self.add("frame", "critical", "unwrap", (), method, i)
        return i + 1

    def error_attribute(self, i: int) -> int | None:
        """`#[error("…")]`: a thiserror Display template, printed wherever the error is shown."""
        toks, n = self.toks, len(self.toks)
        if not (toks[i].text == "#" and i + 4 < n and toks[i + 1].text == "["
                and toks[i + 2].text == "error" and toks[i + 3].text == "("
                and toks[i + 4].kind == "str"):
            return None
        close = matching_close(toks, i + 3)
        args = _split_args(toks, i + 4, close)
        self.add("error", "error", "thiserror", format_parts(args[0][0].text, args[1:]),
                 toks[i + 4], i)
        return close + 1

    def error_value(self, i: int) -> None:
        """`format!(…)` / `"…".to_string()` inside an error's construction: `Err(…)`,
        `SomeError::Variant(…)` or `{ message: … }`, `PyXError::new_err(…)`, `.map_err(|e| …)`,
        `.ok_or_else(|| …)`; a bare literal argument of `new_err(…)` or an HTTP response."""
        toks, n = self.toks, len(self.toks)
        t = toks[i]
        if t.kind not in ("ident", "str") or i not in self.error_heads:
            return
        nxt = toks[i + 1] if i + 1 < n else None
        parts = None
        if t.text == "format" and t.kind == "ident" and nxt is not None and nxt.text == "!":
            parts = _message(toks[i:matching_close(toks, i + 2) + 1], [])
        elif t.kind == "str" and nxt is not None and (
                (nxt.text == "." and i + 2 < n
                 and toks[i + 2].text in ("to_string", "into", "to_owned"))
                or (nxt.text in (")", ",") and toks[i - 1].text in ("(", ",")
                    and self.error_heads[i][0] in ("new_err", "response"))):
            parts = (t.text,)
        if parts is not None:
            constructor, cls = self.error_heads[i]
            self.add("error", "error", constructor, parts, t, i, py_class=cls or None)


def sites(text: str, path: str) -> list[RustSite]:
    """Every message site of one Rust file outside test code (see the module doc)."""
    return _SiteFinder(text, path).find()


_KNOWN_MACROS = frozenset(LOG_MACROS) | PANIC_MACROS | frozenset(ASSERT_MACROS) | ERROR_MACROS
_UNFINISHED = {"unreachable": "internal error: entered unreachable code",
               "unimplemented": "not implemented", "todo": "not yet implemented"}


_MESSAGE_FIELDS = frozenset({"message", "msg", "error", "reason", "details", "detail"})


def _error_contexts(toks: list[Token]) -> dict[int, tuple[str, str]]:
    """Token index → (the error constructor it is built in, pyo3 class or ""): the tokens
    inside `Err(…)`, `XError::Variant(…)`/`{…}`, `new_err(…)`, `anyhow!`/`bail!` are not, they
    are handled as macros), the closures of `.map_err(…)` / `.ok_or_else(…)`; a group opened
    by another call inside (`format!`'s own, a `vec![…]`) keeps its outer context, a closure
    or block that logs (`error!(…)`) is its own."""
    heads: dict[int, tuple[str, str]] = {}
    stack: list[tuple[str, str] | None] = []
    for i, t in enumerate(toks):
        if t.kind == "punct" and t.text in OPEN:
            ctx: tuple[str, str] | None = None
            prev = toks[i - 1] if i else None
            if prev is not None and prev.kind == "ident":
                if prev.text == "Err" and t.text == "(":
                    ctx = ("Err", "")
                elif prev.text == "new_err" and t.text == "(":
                    cls = ""
                    if i >= 3 and toks[i - 2].text == "::":
                        pm = _PY_ERROR.match(toks[i - 3].text)
                        cls = pm.group(1) if pm else ""
                    ctx = ("new_err", cls)
                elif (prev.text in ("map_err", "ok_or_else", "ok_or") and t.text == "(") or (_is_error_variant(toks, i - 1) and t.text in ("(", "{")):
                    ctx = (prev.text, "")
            if (ctx is None and t.text == "(" and i + 2 < len(toks)
                    and toks[i + 1].text == "StatusCode" and toks[i + 2].text == "::"):
                ctx = ("response", "")  # (StatusCode::X, "message").into_response()
            if ctx is None and stack:
                ctx = stack[-1]
            if ctx is not None and prev is not None and prev.text == "!" and i >= 2 and \
                    toks[i - 2].text in ("error", "warn", "info", "debug", "trace", "panic"):
                ctx = None  # a log call inside: its own site
            stack.append(ctx)
            continue
        if t.kind == "punct" and t.text in CLOSE:
            if stack:
                stack.pop()
            continue
        if stack and stack[-1] is not None:
            heads[i] = stack[-1]
    return heads


def _is_error_variant(toks: list[Token], i: int) -> bool:
    """`RouterError::Internal(` / `WorkerError::HealthCheckFailed {`: a path with an error type."""
    if i < 2 or toks[i - 1].text != "::":
        return False
    return bool(_ERROR_PATH.search(toks[i - 2].text)) and toks[i].text[:1].isupper()


def plain_text(parts: tuple[str | Hole, ...]) -> str:
    """The literal text of a message, holes left out."""
    return _plain_text(parts)
