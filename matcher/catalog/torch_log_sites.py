"""One C++ file of torch → the lines it logs at WARNING, ERROR or FATAL: what c10's logger
prints when something in the distributed or CUDA runtime goes wrong.

Pure: `log_sites(text, path, warnings=…)` takes a file's text and its path
(`torch/csrc/distributed/c10d/TCPStore.cpp`) and returns `LogSite`s:

- `LOG(ERROR|WARNING|FATAL) << a << b …;`: the operands one after another — literals as they
  are, anything else as its value (a hole);
- `C10D_ERROR(fmt, …)` / `C10D_WARNING(fmt, …)` (`torch/csrc/distributed/c10d/logging.h`):
  `LOG(level) << "[c10d] " << fmt::format(fmt, …)`, each `{}` a hole;
- `TORCH_WARN(a, b, …)` and `TORCH_WARN_ONCE` (`warnings`: read where the caller says), which
  print `Warning: <c10::str(a, b, …)> (function <fn>)`.

A value is followed where the file says what it is, so that the words of a message built
before the statement are known: `c10::str(…)`, `fmt::format("…", …)`, `std::string(…)` and
`a + b` are taken apart; a local variable is read from its assignments earlier in the same
function (`errorMsg = c10::str(…); … LOG(ERROR) << errorMsg;`, each assignment one variant); a
parameter from the arguments the file's calls of the function pass; a call of a function of
the file whose body is one `return …;` from that expression. Anything else is a hole.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from matcher.catalog.cpp_checks import (
    FunctionSpan,
    Hole,
    Part,
    Tok,
    function_spans,
    lex,
    macro_args,
    spell,
)
from matcher.catalog.source_text import join_literals, matching_close

LOG_LEVELS = {"ERROR": "error", "FATAL": "error", "WARNING": "warning"}
C10D_MACROS = {"C10D_ERROR": "error", "C10D_WARNING": "warning"}
WARN_MACROS = ("TORCH_WARN", "TORCH_WARN_ONCE")
C10D_PREFIX = "[c10d] "
MAX_VARIANTS = 8  # per value: a message built in more ways than this is left a hole
MAX_DEPTH = 4  # variables, parameters and returns followed from one statement

Parts = tuple[Part, ...]


@dataclass(frozen=True, slots=True)
class LogSite:
    level: str  # ERROR, WARNING, FATAL (what c10 prints as E, W, F)
    severity: str  # error, warning
    macro: str  # LOG(ERROR), C10D_WARNING, TORCH_WARN …
    parts: Parts  # the message as logged, after any prefix the macro adds
    path: str
    line: int
    function: str


def _fmt_parts(fmt: str, args: list[list[Tok]]) -> Parts:
    """`fmt::format(fmt, args…)`: the format's text with each `{…}` a hole named after its
    argument (`{{`/`}}` are braces)."""
    out: list[Part] = []
    i, n, k = 0, len(fmt), 0
    while i < n:
        if fmt.startswith(("{{", "}}"), i):
            out.append(fmt[i])
            i += 2
            continue
        if fmt[i] == "{":
            j = fmt.find("}", i)
            j = n - 1 if j < 0 else j
            spec = fmt[i + 1:j].split(":", 1)[0]
            at = int(spec) if spec.isdigit() else k
            k += 0 if spec.isdigit() else 1
            out.append(Hole(spell(args[at]) if at < len(args) and args[at] else "value"))
            i = j + 1
            continue
        out.append(fmt[i])
        i += 1
    return join_literals(out)


def _product(pieces: list[list[Parts]]) -> list[Parts]:
    """Every way to join one variant of each piece, the first MAX_VARIANTS."""
    out = []
    for combo in itertools.islice(itertools.product(*pieces), MAX_VARIANTS):
        out.append(join_literals([p for parts in combo for p in parts]))
    return out


def _split_plus(ts: list[Tok]) -> list[list[Tok]]:
    """`a + b + c` at the top level → [a, b, c]."""
    pieces: list[list[Tok]] = [[]]
    depth = 0
    for t in ts:
        if t.kind == "punct" and t.text in "([{":
            depth += 1
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
        if depth == 0 and t.kind == "punct" and t.text == "+":
            pieces.append([])
            continue
        pieces[-1].append(t)
    return pieces


def _is_call(ts: list[Tok], *names: str) -> bool:
    """`ts` is one call `a::b(…)` of the qualified name `names` (`("c10", "str")`)."""
    k = 0
    for n, name in enumerate(names):
        if n:
            if k >= len(ts) or ts[k].text != "::":
                return False
            k += 1
        if k >= len(ts) or ts[k].text != name:
            return False
        k += 1
    return k < len(ts) and ts[k].text == "(" and matching_close(ts, k) == len(ts) - 1


class _File:
    """One file's tokens and functions: the values its messages are made of."""

    def __init__(self, text: str) -> None:
        self.toks = lex(text)
        self.spans = function_spans(self.toks)

    def enclosing(self, at: int) -> list[FunctionSpan]:
        """The functions whose bodies hold token `at`, innermost first."""
        return sorted((s for s in self.spans if s.body < at < s.end), key=lambda s: -s.body)

    def value(self, ts: list[Tok], at: int, depth: int) -> list[Parts]:
        """The variants of the text an expression (tokens `ts`, at token `at`) makes."""
        while len(ts) > 2 and ts[0].text == "(" and matching_close(ts, 0) == len(ts) - 1:
            ts = ts[1:-1]
        if len(ts) == 1 and ts[0].kind == "str":
            return [(ts[0].text,)]
        pieces = _split_plus(ts)
        if len(pieces) > 1 and all(pieces):
            return _product([self.value(p, at, depth) for p in pieces])
        found = self._composed(ts, at, depth) if depth < MAX_DEPTH else None
        return found or [(Hole(spell(ts) or "value"),)]

    def _composed(self, ts: list[Tok], at: int, depth: int) -> list[Parts] | None:
        """An expression whose text the file says: a string-building call, a variable or
        parameter, a call of a one-`return` function; None for anything else."""
        if _is_call(ts, "c10", "str") or _is_call(ts, "std", "string"):
            args = macro_args(ts, 4, len(ts) - 1)
            return _product([self.value(a, at, depth) for a in args if a])
        if _is_call(ts, "fmt", "format"):
            args = macro_args(ts, 4, len(ts) - 1)
            return self.formatted(args, at, depth)
        if _is_call(ts, "fmt", "vformat"):  # `fmt::vformat(format, make_format_args(…))`
            args = macro_args(ts, 4, len(ts) - 1)
            return self.formatted(args[:1], at, depth)
        if len(ts) == 1 and ts[0].kind == "ident":
            return self.variable(ts[0].text, at, depth + 1)
        if len(ts) >= 3 and ts[0].kind == "ident" and _is_call(ts, ts[0].text):
            return self.returned(ts[0].text, depth + 1)
        return None

    def formatted(self, args: list[list[Tok]], at: int, depth: int) -> list[Parts] | None:
        """`fmt::format(fmt, …)` when the format's text is known."""
        if not args:
            return None
        out = []
        for fmt in self.value(args[0], at, depth):
            if len(fmt) == 1 and isinstance(fmt[0], str):
                out.append(_fmt_parts(fmt[0], args[1:]))
        return out or None

    def variable(self, name: str, at: int, depth: int) -> list[Parts] | None:
        """A local variable's values (its assignments before `at` in the innermost function
        that assigns it), or a parameter's (the arguments the file's calls pass)."""
        for span in self.enclosing(at):
            values = [v for expr, k in self.assignments(name, span.body, at)
                      for v in self.value(expr, k, depth)]
            if values:
                return list(dict.fromkeys(values))[:MAX_VARIANTS]
            params = self.parameters(span)
            if name in params:
                return self.passed(span, params.index(name), depth)
        return None

    def assignments(self, name: str, start: int, end: int) -> list[tuple[list[Tok], int]]:
        """`name = expr;` (a declaration's or an assignment's) between two tokens: each
        expression and where it is."""
        out = []
        toks = self.toks
        for k in range(start, end):
            t = toks[k]
            if t.text != name or t.kind != "ident" or toks[k + 1].text != "=":
                continue
            if k and toks[k - 1].text in (".", "->", "::"):
                continue
            j = k + 2
            depth = 0
            while j < end and not (depth == 0 and toks[j].text == ";"):
                depth += toks[j].text in "([{"
                depth -= toks[j].text in ")]}"
                j += 1
            out.append((toks[k + 2:j], k))
        return out

    def parameters(self, span: FunctionSpan) -> list[str]:
        """A function's parameter names, in order."""
        close = matching_close(self.toks, span.params)
        names = []
        for arg in macro_args(self.toks, span.params + 1, close):
            head = arg[:next((k for k, t in enumerate(arg) if t.text == "="), len(arg))]
            idents = [t.text for t in head if t.kind == "ident"]
            names.append(idents[-1] if idents else "")
        return names

    def passed(self, span: FunctionSpan, index: int, depth: int) -> list[Parts] | None:
        """The values the file's calls of a function pass as its argument `index`: the calls
        after its definition and before the next one of the same name (two classes' methods
        of one name), or before the first definition."""
        definitions = sorted(s.params for s in self.spans if s.name == span.name)
        out: list[Parts] = []
        for k, t in enumerate(self.toks[:-1]):
            if t.text != span.name or self.toks[k + 1].text != "(" or k + 1 in definitions:
                continue
            before = [d for d in definitions if d < k]
            if (before[-1] if before else definitions[0]) != span.params:
                continue
            prev = self.toks[k - 1] if k else None
            if prev is not None and prev.kind == "ident" and prev.text not in ("return", "else"):
                continue  # a declaration: `void f(…)`
            close = matching_close(self.toks, k + 1)
            args = macro_args(self.toks, k + 2, close)
            if index < len(args) and args[index]:
                out.extend(self.value(args[index], k, depth))
        return list(dict.fromkeys(out))[:MAX_VARIANTS] or None

    def returned(self, function: str, depth: int) -> list[Parts] | None:
        """What a function of the file whose body is one `return expr;` returns."""
        for s in self.spans:
            body = self.toks[s.body + 1:s.end]
            if s.name == function and len(body) > 2 and body[0].text == "return" \
                    and body[-1].text == ";":
                return self.value(body[1:-1], s.body + 1, depth)
        return None


def _operands(toks: list[Tok], start: int) -> tuple[list[list[Tok]], int]:
    """The `<<` operands of a stream statement from `toks[start]` to its `;`, and the index
    of the `;`."""
    ops: list[list[Tok]] = [[]]
    depth = 0
    j = start
    while j < len(toks) and not (depth == 0 and toks[j].text == ";"):
        t = toks[j]
        if t.kind == "punct" and t.text in "([{":
            depth += 1
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
        if depth == 0 and t.text == "<<":
            ops.append([])
        else:
            ops[-1].append(t)
        j += 1
    return [o for o in ops if o], j


class _Scanner:
    """The log statements of one file, each turned into its sites (one per message variant)."""

    def __init__(self, text: str, path: str, warnings: bool) -> None:
        self.file = _File(text)
        self.path = path
        self.warnings = warnings
        self.out: list[LogSite] = []

    def owner(self, at: int) -> str:
        spans = self.file.enclosing(at)
        return spans[0].name if spans else ""

    def add(self, level: str, severity: str, macro: str, variants: list[Parts], at: int
            ) -> None:
        line = self.file.toks[at].line
        for parts in dict.fromkeys(variants):
            self.out.append(LogSite(level, severity, macro, parts, self.path, line,
                                    self.owner(at)))

    def scan(self) -> list[LogSite]:
        toks = self.file.toks
        for k, t in enumerate(toks[:-1]):
            if t.kind != "ident" or toks[k + 1].text != "(":
                continue
            if t.text == "LOG" and k + 4 < len(toks) and toks[k + 2].text in LOG_LEVELS \
                    and toks[k + 3].text == ")" and toks[k + 4].text == "<<":
                self.logged(k)
            elif t.text in C10D_MACROS:
                self.c10d(k)
            elif t.text in WARN_MACROS and self.warnings:
                close = matching_close(toks, k + 1)
                args = [a for a in macro_args(toks, k + 2, close) if a]
                self.add("WARNING", "warning", t.text,
                         _product([self.file.value(a, k, 0) for a in args]), k)
        return self.out

    def logged(self, k: int) -> None:
        """`LOG(LEVEL) << …;` at token `k`."""
        toks = self.file.toks
        level = toks[k + 2].text
        ops, _ = _operands(toks, k + 5)
        variants = _product([self.file.value(o, k, 0) for o in ops])
        self.add(level, LOG_LEVELS[level], f"LOG({level})", variants, k)

    def c10d(self, k: int) -> None:
        """`C10D_ERROR(fmt, …)` / `C10D_WARNING(fmt, …)` at token `k`."""
        toks = self.file.toks
        close = matching_close(toks, k + 1)
        args = macro_args(toks, k + 2, close)
        variants = self.file.formatted(args, k, 0)
        if variants is None and args:  # `C10D_ERROR(msg)`: the message was made before
            variants = self.file.value(args[0], k, 0)
        severity = C10D_MACROS[toks[k].text]
        self.add("ERROR" if severity == "error" else "WARNING", severity, toks[k].text,
                 variants or [], k)


def log_sites(text: str, path: str, *, warnings: bool = False) -> list[LogSite]:
    """Every logged message of one file (see the module doc); `warnings`: also
    `TORCH_WARN`/`TORCH_WARN_ONCE`."""
    return _Scanner(text, path, warnings).scan()
