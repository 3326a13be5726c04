r"""sglang's own source → catalog records: one per raise, assert and logger call with a message,
and one per bare raise or assert, recognized by the traceback frame that raises it.

`extract_module` is pure: it takes one module's source text and its path inside the package
(`sglang/srt/arg_groups/mamba_hook.py`) and returns seed-schema v2 records plus the counts that
say what was seen and why a site gave no record. Reading a source tree, an installed package or
a wheel happens at the edge (`read_tree`, `read_wheel`, `find_installed`), never in the middle.

What a site's message becomes:
- `errorMessage`: the message as the code builds it, written as one template whatever the source
  used — literal text with `{` and `}` doubled, each hole `{expression}` with its conversion and
  format spec (`{cfg.radix_cache_backend!r}`, `{n:.2f}`); `%` and `.format()` holes are written
  the same way. A `KeyError`'s message is quoted, as Python prints it.
- `messagePattern`: literal text escaped, each hole a lazy group named after its expression when
  that is a name or an attribute (`(?P<radix_cache_backend>.+?)`), unnamed otherwise; a hole that
  ends the pattern is greedy, so its capture is the whole rest of the line. A raise or assert
  pattern is anchored (`(?<![\s\S])\s*`) at the start of the message, which is where Python
  prints it after `Class: `: the same words inside another line (a warning, a wrapped error) are
  not this site; a hole that opens such a pattern takes no whitespace (it is a name or a value,
  not a phrase). A variable's message is read from its assignment and the `+=` that follow it.

A site that raises without a message — `assert cond`, `raise ValueError`, `raise ValueError()` —
prints `AssertionError` (or `ValueError`) alone: nothing in the message says which site failed,
but the traceback's last frame does. Such a site becomes a frame record: `messagePattern` `^$`,
no `errorMessage`, and `raisedIn` — the frame as a traceback prints it: the path from `sglang/`
on, the function's bare name (`co_name`: the innermost `def` or `class`, `<module>` at module
level) and the one physical line printed under it, stripped: a raise's first line; for an
assert spread over lines, the line 3.10 and 3.11 print (`assert_line`). Its id is made of that
function and line instead of a template (`frame:get_next_batch_to_run:assert x is not None`),
so it too survives a line move; two sites of one module that print the same frame are one
record. (A class that makes its own message, `raise MyError()`, prints one: its frame record
then matches nothing, which costs only its place in the catalog.)

What is lost, and counted by reason: messages that are not string templates at all (a variable,
`str(e)`, a tuple), re-raises, raises whose message is only in keyword arguments, logger calls
without a message, and templates whose literal text is too short to recognize one site: under
the loader's 8 literal characters (`f"{e}"`, `f"Error: {e}"`), or without one literal run of 12
characters (`f"{path}.{key} must be {p}"`, `f"x.shape={x.shape!r}"`), which among thousands of
records would claim other libraries' errors. A logger call's message keeps its first line only:
a log line's continuation is a line of its own in the log.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
import string
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from matcher.catalog import remedy
from matcher.catalog.load import check_pattern
from matcher.catalog.patterns import analyze, escape_literal
from matcher.catalog.schema import CatalogRecord

REPO = "sgl-project/sglang"
GITHUB = f"https://github.com/{REPO}"
ID_PREFIX = "sglang-matcher/generated/"

_LOG_LEVELS = {"error": "error", "exception": "error", "critical": "error",
               "warning": "warning", "warn": "warning"}
_EXCLUDED_DIRS = frozenset({"test", "tests", "benchmark", "benchmarks"})
_CONVERSIONS = {ord("r"): "!r", ord("s"): "!s", ord("a"): "!a", -1: ""}
_PERCENT = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?(?P<flags>[-#0 +]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
    r"[hlL]?(?P<type>[diouxXeEfFgGcrsa%])"
)
_GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_POSITIONAL_NAME = re.compile(r"arg\d+")
# Among 16,000 records, `{path}.{key} must be {predicate}` or `x.shape={x.shape!r}` would claim
# other libraries' errors: a template needs one literal run at least this long to be a site's.
MIN_LITERAL_RUN = 12
# A frame record's message: none at all (`AssertionError` printed alone).
FRAME_PATTERN = "^$"
# Tags: a message passed to a helper that raises or logs it; a warning that reports a failure
# (`_failure_of`: kept with `--severity failure`).
VIA_HELPER = "via-helper"
FAILURE = "failure"
# The key under which `Stats.covered` and `Stats.records` count frame records (the sites are
# counted under "raise" and "assert" in `Stats.sites`, as every site is).
FRAME = "frame"


# Skip reasons, as printed by `catalog extract` and kept in the stats file.
NO_MESSAGE = "no message"  # a logger call without arguments; a bare raise or assert is a frame
RERAISE = "re-raise of an existing exception"
CALL_RESULT = "raises what a function returns"
NOT_TEMPLATE = "message is not a string template (variable, call, tuple)"
KEYWORD_ONLY = "message only in keyword arguments"
SEVERAL_ARGS = "several arguments (printed as a tuple)"
TOO_VAGUE = "too little literal text (under 8 characters, the loader's minimum)"
MOSTLY_HOLES = f"mostly holes (no literal run of {MIN_LITERAL_RUN} characters)"
DUPLICATE = "same message as an earlier site in the module (merged into its record)"
PARAMETER = ("message made of its function's parameters (a helper's: read at each call, "
             "with the message passed)")
DUPLICATE_FRAME = ("same frame (function and source line) as an earlier bare site in the module "
                   "(merged into its record)")


# --- the template of one message -----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Hole:
    expression: str  # source text of what fills the hole (`cfg.radix_cache_backend`)
    conversion: str = ""  # `!r`, `!s`, `!a` or ""
    spec: str = ""  # format spec without the colon
    name: str | None = None  # the capture group's name, when the expression gives one

    @property
    def template(self) -> str:
        spec = ":" + self.spec if self.spec else ""
        return "{" + self.expression + self.conversion + spec + "}"


Part = str | Hole
Resolver = Callable[[ast.Name], "list[Part] | None"]


def _hole(node: ast.expr, conversion: str = "", spec: str = "", name: str | None = None) -> Hole:
    expression = ast.unparse(node)
    if name is None:
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
    return Hole(expression, conversion, spec, name)


def _joined_spec(node: ast.expr | None) -> str:
    """A format spec (itself a JoinedStr) back to text: `{width}` holes kept as written."""
    if node is None:
        return ""
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                out.append(_hole(v.value, _CONVERSIONS.get(v.conversion, "")).template)
        return "".join(out)
    return ast.unparse(node)


def message_parts(node: ast.expr, resolve: Resolver | None = None) -> list[Part] | None:
    """The literal text and holes of a string-building expression, or None if it is not one.

    Literals, f-strings, implicit concatenation (already one constant in the tree), `+` of
    templates and other values, `"…" % args` and `"…".format(...)` are understood; a variable
    is read through `resolve` (see `_Scope`) when one is given.
    """
    if isinstance(node, ast.Name):
        return resolve(node) if resolve is not None else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts: list[Part] = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                parts.append(_hole(v.value, _CONVERSIONS.get(v.conversion, ""),
                                   _joined_spec(v.format_spec)))
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = message_parts(node.left, resolve), message_parts(node.right, resolve)
        if left is None and right is None:
            return None
        return [*(left if left is not None else [_hole(node.left)]),
                *(right if right is not None else [_hole(node.right)])]
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)
            and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
        return percent_parts(node.left.value, node.right)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"):
        base = node.func.value
        fmt = message_parts(base, resolve) if isinstance(base, ast.Name) else None
        if isinstance(base, ast.Constant) and isinstance(base.value, str):
            return format_parts(base.value, node.args, node.keywords)
        if fmt is not None and len(fmt) == 1 and isinstance(fmt[0], str):
            return format_parts(fmt[0], node.args, node.keywords)  # a constant read by name
    return None


def percent_parts(fmt: str, args: ast.expr | list[ast.expr] | None) -> list[Part]:
    """`"x=%s y=%(k)r" % …` → parts; `args` is the right operand, or a logger call's args."""
    if isinstance(args, list):
        positional: list[ast.expr] | None = args
    elif isinstance(args, ast.Tuple):
        positional = list(args.elts)
    elif args is None:
        positional = []
    else:
        positional = None  # one value, or a tuple we cannot see into
    mapping = (
        {k.value: v for k, v in zip(args.keys, args.values, strict=True)
         if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if isinstance(args, ast.Dict) else {}
    )
    n_holes = sum(1 for m in _PERCENT.finditer(fmt) if m.group("type") != "%")
    parts: list[Part] = []
    pos = 0
    index = 0
    for m in _PERCENT.finditer(fmt):
        parts.append(fmt[pos:m.start()])
        pos = m.end()
        kind = m.group("type")
        if kind == "%":
            parts.append("%")
            continue
        conversion = {"r": "!r", "a": "!a"}.get(kind, "")
        spec = "" if kind in "rsa" else (
            m.group("flags") + (m.group("width") or "")
            + (f".{m.group('prec')}" if m.group("prec") else "") + kind)
        key = m.group("key")
        value: ast.expr | None = None
        name: str | None = None
        if key is not None:
            value, name = mapping.get(key), key
        elif positional is not None and index < len(positional):
            value = positional[index]
        elif positional is None and n_holes == 1 and isinstance(args, ast.expr):
            value = args
        index += 1
        if value is None:
            parts.append(Hole(key or "", conversion, spec, name))
        else:
            parts.append(_hole(value, conversion, spec, name))
    parts.append(fmt[pos:])
    return parts


def format_parts(fmt: str, args: list[ast.expr], keywords: list[ast.keyword]) -> list[Part] | None:
    """`"{} and {name!r}".format(a, name=b)` → parts; None if the template is malformed."""
    kwargs = {k.arg: k.value for k in keywords if k.arg is not None}
    parts: list[Part] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return None
    for literal, field_name, spec, conversion in parsed:
        if literal:
            parts.append(literal)
        if field_name is None:
            continue
        first, rest = re.match(r"([^.\[]*)(.*)", field_name).groups()  # type: ignore[union-attr]
        conv = f"!{conversion}" if conversion else ""
        value: ast.expr | None
        name: str | None = None
        if first == "":
            value = args[auto] if auto < len(args) else None
            auto += 1
        elif first.isdigit():
            value = args[int(first)] if int(first) < len(args) else None
        else:
            value, name = kwargs.get(first), first
        if rest:
            expression = (ast.unparse(value) if value is not None else first) + rest
            attr = re.search(r"\.([A-Za-z_]\w*)$", rest)
            parts.append(Hole(expression, conv, spec or "", attr.group(1) if attr else None))
        elif value is None:
            parts.append(Hole(first, conv, spec or "", name))
        else:
            parts.append(_hole(value, conv, spec or "", name))
    return parts


def _merge_literals(parts: Iterable[Part]) -> list[Part]:
    out: list[Part] = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += p
                continue
        out.append(p)
    return out


def _quoted(parts: list[Part]) -> list[Part]:
    """A KeyError prints `repr(message)`: the template in the quotes `repr` would choose."""
    literal = "".join(p for p in parts if isinstance(p, str))
    quote = '"' if "'" in literal and '"' not in literal else "'"
    escaped: list[Part] = [
        p.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
        if isinstance(p, str) else p
        for p in parts
    ]
    return [quote, *escaped, quote]


def template_of(parts: list[Part]) -> str:
    return "".join(p.replace("{", "{{").replace("}", "}}") if isinstance(p, str) else p.template
                   for p in parts)


def pattern_of(parts: list[Part], *, first_line_only: bool = False, anchored: bool = False) -> str:
    """Literal text escaped, holes as groups; whitespace at line ends made optional.

    `anchored`: the pattern must start the searched text, as an exception's message starts the
    text after `Class: `; a hole that opens it then takes no whitespace, so neither another
    writer's prefix (`…/utils.py:223: UserWarning: `) nor the first words of an unrelated
    sentence (`Overlap schedule is not implemented for …`) pass for its value.
    """
    if first_line_only:
        cut: list[Part] = []
        for p in parts:
            if isinstance(p, str) and "\n" in p:
                cut.append(p.split("\n", 1)[0])
                break
            cut.append(p)
        parts = cut
    parts = _merge_literals(parts)
    # Leading and trailing whitespace is not part of what a log shows after `Class: `.
    if parts and isinstance(parts[0], str):
        parts[0] = parts[0].lstrip()
    if parts and isinstance(parts[-1], str):
        parts[-1] = parts[-1].rstrip()
    parts = _merge_literals(parts)
    used: Counter[str] = Counter()
    out: list[str] = []
    for i, p in enumerate(parts):
        if isinstance(p, str):
            lines = p.split("\n")
            if len(lines) > 1:  # the framer joins continuation lines stripped, with "\n"
                lines = ([lines[0].rstrip()] + [x.strip() for x in lines[1:-1]]
                         + [lines[-1].lstrip()])
            pieces = [escape_literal(x.replace("{", "{{").replace("}", "}}")) for x in lines]
            out.append(r"\s*\n\s*".join(pieces))
            continue
        if i == len(parts) - 1:
            body = ".+"
        elif i == 0 and anchored:
            body = r"\S+?"  # a name or a value: not another writer's `path.py:12: Warning: `
        else:
            body = ".+?"
        name = _group_name(p.name, used)
        out.append(f"(?P<{name}>{body})" if name else f"({body})")
    # `(?<![\s\S])` is `\A` as Hyperscan's prefilter can skip: a `^` costs it 20x the compile time.
    return (r"(?<![\s\S])\s*" if anchored else "") + "".join(out)


def _group_name(name: str | None, used: Counter[str]) -> str | None:
    if not name or not _GROUP_NAME.fullmatch(name):
        return None
    if _POSITIONAL_NAME.fullmatch(name):
        name += "_"  # `arg1` is what an unnamed group is called in captures
    used[name] += 1
    return name if used[name] == 1 else f"{name}_{used[name]}"


# --- sites of one module ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Site:
    kind: str  # "raise" | "assert" | "log"
    line: int
    error_class: str | None
    severity: str
    function: str  # qualified name of the enclosing function, "" at module level
    condition: str  # the innermost `if` test (or the assert's test) that leads here, "" if none
    parts: list[Part] | None  # the message's template; None: not a string template
    skip: str | None = None  # why no message can be read at all
    frame: bool = False  # no message at all: recognized by its traceback frame instead
    code_name: str = "<module>"  # the function's name as a traceback prints it (`co_name`)
    # `condition` with the local names it tests read through to what they were bound to
    # (`window = cfg.speculative_draft_window_size` … `if window <= 0`): what `guard.when`
    # holds, so the fix can name the flag
    guard: str = ""
    from_params: bool = False  # the message has a hole that is its function's parameter
    via: str = ""  # the helper that raises or logs the message passed here: `name() (path)`
    failure: str = ""  # a warning that reports a failure: why we say so (`_failure_of`)


@dataclass(frozen=True, slots=True)
class _Binding:
    line: int
    op: str  # "=" (a value we can read), "+=" (appended), "?" (bound some other way)
    value: ast.expr | None
    block: int  # id of the statement list it stands in


class _Scope:
    """The names a function (or the module) binds, so `raise X(msg)` can read `msg`.

    `msg` is read from its last plain assignment before the use, in a block that encloses the
    use, plus the `+=` that follow it in the same block. A rebinding anywhere else in between
    makes it ambiguous: no template. An append under a condition ends the template there; the
    pattern is searched, so a message that got the append still matches the part before it.
    """

    def __init__(self, body: list[ast.stmt], parent: _Scope | None = None,
                 params: frozenset[str] = frozenset()) -> None:
        self.parent = parent
        self.params = params  # the function's parameters: a message may be one of them
        self.bindings: dict[str, list[_Binding]] = {}
        self.paths: dict[int, tuple[int, ...]] = {}
        self._scan(body, ())

    def _scan(self, stmts: list[ast.stmt], path: tuple[int, ...]) -> None:
        here = (*path, id(stmts))
        for st in stmts:
            self.paths[id(st)] = here
            self._bind(st, here[-1])
            if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            for name in ("body", "orelse", "finalbody"):
                sub = getattr(st, name, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    self._scan(sub, here)
            for handler in getattr(st, "handlers", ()):
                self._scan(handler.body, here)
            for case in getattr(st, "cases", ()):
                self._scan(case.body, here)

    def _bind(self, st: ast.stmt, block: int) -> None:
        def add(name: str, op: str, value: ast.expr | None) -> None:
            self.bindings.setdefault(name, []).append(_Binding(st.lineno, op, value, block))

        if isinstance(st, ast.Assign):
            for target in st.targets:
                if isinstance(target, ast.Name):
                    add(target.id, "=" if len(st.targets) == 1 else "?", st.value)
                else:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            add(n.id, "?", None)
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value:
            add(st.target.id, "=", st.value)
        elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
            add(st.target.id, "+=" if isinstance(st.op, ast.Add) else "?", st.value)
        elif isinstance(st, ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
            targets = [st.target] if isinstance(st, ast.For | ast.AsyncFor) else [
                i.optional_vars for i in st.items if i.optional_vars is not None]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        add(n.id, "?", None)

    def value_of(self, name: str, use: ast.stmt | None) -> list[Part] | None:
        path = self.paths.get(id(use)) if use is not None else None
        if path is None:
            return None
        line = use.lineno if use is not None else 0
        before = [b for b in self.bindings.get(name, ()) if b.line < line]
        base = next((i for i in range(len(before) - 1, -1, -1)
                     if before[i].op != "+=" and before[i].block in path), None)
        if base is None:
            if name in self.params and not before:  # the caller's message: a hole named so
                return [Hole(name, name=name)]
            return self.parent.constant(name) if self.parent and name not in self.bindings else None
        value = before[base].value
        if before[base].op != "=" or value is None:
            return None
        parts = message_parts(value, self._outer_resolver())
        if parts is None:
            return None
        appending = True
        for b in before[base + 1:]:
            if b.op != "+=":
                return None  # rebound elsewhere between the assignment and the use
            appending = appending and b.block == before[base].block
            if appending and b.value is not None:
                more = message_parts(b.value, self._outer_resolver()) or [_hole(b.value)]
                parts = [*parts, *more]
        return parts

    def expr_of(self, name: str, use: ast.stmt | None) -> ast.expr | None:
        """What `name` holds at `use` when that is one plain assignment before it, in a block
        enclosing it, not rebound in between (a module-level constant bound once, else)."""
        path = self.paths.get(id(use)) if use is not None else None
        if path is None:
            return None
        line = use.lineno if use is not None else 0
        before = [b for b in self.bindings.get(name, ()) if b.line < line]
        if not before:
            if self.parent is None or name in self.bindings:
                return None
            bindings = self.parent.bindings.get(name, ())
            if len(bindings) != 1 or bindings[0].op != "=":
                return None
            return bindings[0].value
        last = before[-1]
        if last.op != "=" or last.block not in path:
            return None
        return last.value

    def constant(self, name: str) -> list[Part] | None:
        """A module-level name bound exactly once, to a template."""
        bindings = self.bindings.get(name, ())
        if len(bindings) != 1 or bindings[0].op != "=" or bindings[0].value is None:
            return None
        return message_parts(bindings[0].value)

    def _outer_resolver(self) -> Resolver | None:
        parent = self.parent
        if parent is None:
            return None
        return lambda n: parent.constant(n.id) if n.id not in self.bindings else None


# --- messages that flow through helpers -----------------------------------------------------
#
# `raise_error_or_warn(self, strict, "count", msg)` raises `ValueError(msg)` or logs it; a local
# `def _fail(msg): raise ValueError(msg)` raises what it is given. The message is written at
# the call, not at the raise, so the raise site alone says nothing (its message is a bare
# parameter). `index_helpers` reads a release's own code for the functions whose raise or log
# message is made of their parameters and cannot be recognized without them (a bare `{msg}`,
# `[{name}] {msg}`), transitively (`_report(msg)` → `raise_error_or_warn(…, msg)`); each call
# of one is then a site of its own, with the message the caller passes.

@dataclass(frozen=True, slots=True)
class _Def:
    positional: tuple[str, ...]  # positional parameters in order, `self` included
    keywords: frozenset[str]  # parameters that may be given by keyword
    bound: bool  # a method: called as `obj.f(…)`, its first parameter is not passed


@dataclass(frozen=True, slots=True)
class _Forward:
    """A call, in function `function`, that passes on a message made of its parameters."""

    function: str  # qualified name of the calling function
    cls: str | None  # its class, for `self.f(…)`
    func: ast.expr  # what is called
    args: tuple[list[Part] | None, ...]  # positional arguments' parts (None: not a message)
    keywords: Mapping[str, list[Part]]


@dataclass(frozen=True, slots=True)
class Sink:
    """What a helper does with a message made of its parameters."""

    kind: str  # "raise" | "log"
    error_class: str | None
    severity: str
    parts: tuple[Part, ...]  # the message, its holes naming the helper's parameters
    path: str  # the module that raises or logs it (`sglang/srt/utils/common.py`)


@dataclass(frozen=True, slots=True)
class Helper:
    positional: tuple[str, ...]
    keywords: frozenset[str]
    bound: bool
    sinks: tuple[Sink, ...]

    @property
    def all_params(self) -> frozenset[str]:
        return frozenset(self.positional) | self.keywords

    def bind(self, call: ast.Call, *, attribute: bool) -> dict[str, ast.expr] | None:
        """The call's argument for each parameter a sink uses (None: the call cannot be read:
        `*args`, `**kwargs`)."""
        params = self.positional[1:] if self.bound and attribute else self.positional
        out: dict[str, ast.expr] = {}
        for name, arg in zip(params, call.args, strict=False):
            if isinstance(arg, ast.Starred):
                return None
            out[name] = arg
        for kw in call.keywords:
            if kw.arg is None:
                return None
            if kw.arg in self.all_params:
                out[kw.arg] = kw.value
        return out

    def bind_parts(self, forward: _Forward, *, attribute: bool) -> dict[str, list[Part]]:
        params = self.positional[1:] if self.bound and attribute else self.positional
        out = {name: parts for name, parts in zip(params, forward.args, strict=False)
               if parts is not None}
        out.update({k: v for k, v in forward.keywords.items() if k in self.all_params})
        return out


def _parameter(expression: str) -> str:
    """`msg`, `str(msg)` → `msg`: the name a hole shows when it is a parameter as it is."""
    m = re.fullmatch(r"(?:str\()?([A-Za-z_]\w*)\)?", expression)
    return m.group(1) if m else ""


def substitute(parts: Iterable[Part], mapping: Mapping[str, list[Part]]) -> list[Part]:
    """A helper's message with each hole that is one of its parameters replaced by what the
    caller passes (its own template when it is one)."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, Hole) and not p.conversion and not p.spec \
                and _parameter(p.expression) in mapping:
            out.extend(mapping[_parameter(p.expression)])
        else:
            out.append(p)
    return _merge_literals(out)


def recognizable(parts: Sequence[Part], kind: str) -> bool:
    """A template with literal text enough for a record of its own (the loader's minimum and
    `MIN_LITERAL_RUN`)."""
    pattern = pattern_of(list(parts), first_line_only=kind == "log", anchored=kind != "log")
    return isinstance(check_pattern(pattern), int) and max(
        map(len, analyze(pattern).required_literals), default=0) >= MIN_LITERAL_RUN


# A warning that says sglang tried and gave up: `… is still TokenizersBackend after retries`.
_GAVE_UP = re.compile(r"(?i)\b(?:after|despite)\s+(?:\d+\s+|all\s+|several\s+|the\s+)?"
                      r"(?:retries|retrying|attempts|tries)\b|\bgiving up\b|\bgave up\b")


def _imports_something(body: list[ast.stmt]) -> bool:
    """A `try` body that imports (`import x`, `importlib.import_module(name)`)."""
    for st in body:
        for node in ast.walk(st):
            if isinstance(node, ast.Import | ast.ImportFrom):
                return True
            if isinstance(node, ast.Call) and (
                    ast.unparse(node.func).endswith(("import_module", "__import__"))):
                return True
    return False


_PROCESS_MODULES = frozenset({"resource", "os", "psutil", "signal", "gc", "sys"})


def _tunes_process(body: list[ast.stmt]) -> bool:
    """A `try` body whose calls all set up the process through the OS (`resource.setrlimit`,
    `os.sched_setaffinity`, `psutil.Process().cpu_affinity`)."""
    roots = []
    for st in body:
        for node in ast.walk(st):
            if isinstance(node, ast.Call):
                func = node.func
                while isinstance(func, ast.Attribute | ast.Call):
                    func = func.value if isinstance(func, ast.Attribute) else func.func
                roots.append(func.id if isinstance(func, ast.Name) else "")
    return bool(roots) and all(r in _PROCESS_MODULES for r in roots)


def _failure_of(parts: Sequence[Part], handlers: Sequence[tuple[str | None, str]]) -> str:
    """Why a warning reports a failure ("" if it does not say so): it is logged in an `except`
    handler and prints the exception it caught (`except Exception as e: logger.warning(f"…
    {e}")`), or its text says sglang gave up after retrying."""
    if handlers:
        name, caught = handlers[-1]
        if name and any(isinstance(p, Hole) and re.search(rf"\b{re.escape(name)}\b",
                                                          p.expression) for p in parts):
            return f"except {caught}"
    literal = "".join(p for p in parts if isinstance(p, str))
    if _GAVE_UP.search(literal):
        return "gave up"
    return ""


class _Walker(ast.NodeVisitor):
    """Collect sites with the function, condition and message template of each."""

    def __init__(self, module: ast.Module, callees: _Callees | None = None, *,
                 collect: bool = False) -> None:
        self.sites: list[Site] = []
        self._functions: list[str] = []
        self._classes: list[str | None] = []  # per `_functions` entry: its name if a class
        self._conditions: list[str] = []
        self._guards: list[str] = []
        self._handlers: list[tuple[str | None, str]] = []  # (`as` name, caught classes)
        self._module_scope = _Scope(module.body)
        self._scopes: list[_Scope] = [self._module_scope]
        self._stmt: ast.stmt | None = None
        self._callees = callees  # helpers that raise or log their argument (`index_helpers`)
        # `collect` (the first pass of `index_helpers`): each function's parameters, and the
        # calls that pass on a message made of them
        self._collect = collect
        self.defs: dict[str, _Def] = {}
        self.forwards: list[_Forward] = []

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            saved, self._stmt = self._stmt, node
            super().visit(node)
            self._stmt = saved
        else:
            super().visit(node)

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        in_class = bool(self._classes) and self._classes[-1] is not None
        self._functions.append(node.name)
        is_function = not isinstance(node, ast.ClassDef)
        self._classes.append(None if is_function else node.name)
        saved, self._conditions = self._conditions, []
        saved_guards, self._guards = self._guards, []
        saved_handlers, self._handlers = self._handlers, []
        if is_function:
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            a = node.args
            positional = tuple(x.arg for x in (*a.posonlyargs, *a.args))
            keywords = frozenset(x.arg for x in (*a.args, *a.kwonlyargs))
            decorators = {ast.unparse(d) for d in node.decorator_list}
            bound = in_class and "staticmethod" not in decorators
            self.defs[".".join(self._functions)] = _Def(positional, keywords, bound)
            params = frozenset(positional) | keywords
            self._scopes.append(_Scope(node.body, self._module_scope, params))
        self.generic_visit(node)
        if is_function:
            self._scopes.pop()
        self._conditions = saved
        self._guards = saved_guards
        self._handlers = saved_handlers
        self._classes.pop()
        self._functions.pop()

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        for st in node.body:
            self.visit(st)
        imports = _imports_something(node.body)
        tuning = _tunes_process(node.body)
        for handler in node.handlers:
            caught = ast.unparse(handler.type) if handler.type is not None else "BaseException"
            if imports or re.search(r"\b(?:ImportError|ModuleNotFoundError)\b", caught):
                caught += IMPORTED
            # A best-effort setting of the process (`resource.setrlimit`): sglang runs on
            # without it, and healthy launches print it (`Fail to set RLIMIT_NOFILE: …`).
            self._handlers.append((None if tuning else handler.name, caught))
            self.visit(handler)
            self._handlers.pop()
        for st in (*node.orelse, *node.finalbody):
            self.visit(st)

    def visit_TryStar(self, node: ast.TryStar) -> None:
        self.visit_Try(node)

    def _class_name(self) -> str | None:
        """The class whose method the current code is in (its innermost enclosing class)."""
        for i in range(len(self._classes) - 1, -1, -1):
            if self._classes[i] is not None:
                return self._classes[i]
        return None

    def _params(self) -> frozenset[str]:
        return self._scopes[-1].params if len(self._scopes) > 1 else frozenset()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        test = ast.unparse(node.test)
        guard = test if self._collect else self._read_through(node.test)  # no guard in pass 1
        self._conditions.append(test)
        self._guards.append(guard)
        for stmt in node.body:
            self.visit(stmt)
        self._conditions[-1] = f"not ({test})"
        self._guards[-1] = f"not ({guard})"
        for stmt in node.orelse:
            self.visit(stmt)
        self._conditions.pop()
        self._guards.pop()

    def _read_through(self, test: ast.expr) -> str:
        """`test` with each local name replaced by what it was bound to, when that is a plain
        read (`remedy.readable`: an attribute, constants, operators, conversions)."""
        scope, use = self._scopes[-1], self._stmt

        class Inline(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                if not isinstance(node.ctx, ast.Load):
                    return node
                value = scope.expr_of(node.id, use)
                if value is not None and remedy.readable(value):
                    return value
                return node

        try:
            return ast.unparse(Inline().visit(copy.deepcopy(test)))
        except (RecursionError, ValueError):
            return ast.unparse(test)

    def _resolve(self, node: ast.Name) -> list[Part] | None:
        return self._scopes[-1].value_of(node.id, self._stmt)

    def _site(self, kind: str, line: int, cls: str | None, severity: str,
              parts: list[Part] | None, *, condition: str | None = None,
              skip: str | None = None, frame: bool = False, guard: str | None = None,
              via: str = "") -> None:
        if guard is None:
            guard = self._guards[-1] if self._guards and condition is None else condition
        if condition is None:
            condition = self._conditions[-1] if self._conditions else ""
        # A frame's name is its code object's: the innermost `def` — or `class`, for a statement
        # in a class body — never dotted; a lambda cannot hold a raise or an assert.
        code_name = self._functions[-1] if self._functions else "<module>"
        params = self._params()
        from_params = bool(parts) and any(
            isinstance(p, Hole) and _parameter(p.expression) in params for p in parts or ())
        failure = ""
        if kind == "log" and severity == "warning" and parts is not None:
            failure = _failure_of(parts, self._handlers)
        self.sites.append(Site(kind, line, cls, severity, ".".join(self._functions), condition,
                               parts, skip, frame, code_name, guard or "", from_params, via,
                               failure))

    def visit_Raise(self, node: ast.Raise) -> None:
        self.generic_visit(node)
        exc = node.exc
        if exc is None or not isinstance(exc, ast.Call):
            if exc is None or not _is_class_name(exc):
                self._site("raise", node.lineno, _class_of(exc), "error", None, skip=RERAISE)
            else:  # `raise ValueError`: the class alone, printed without a message
                self._site("raise", node.lineno, _class_of(exc), "error", None, frame=True)
            return
        if not _is_class_name(exc.func):
            self._site("raise", node.lineno, None, "error", None, skip=CALL_RESULT)
            return
        cls = ast.unparse(exc.func)
        if not exc.args:
            if exc.keywords:  # the class builds its message from them: no template to read
                self._site("raise", node.lineno, cls, "error", None, skip=KEYWORD_ONLY)
            else:
                self._site("raise", node.lineno, cls, "error", None, frame=True)
            return
        parts = message_parts(exc.args[0], self._resolve)
        several = len(exc.args) > 1 or isinstance(exc.args[0], ast.Starred)
        self._site("raise", node.lineno, cls, "error", parts,
                   skip=SEVERAL_ARGS if several and parts is not None else None)

    def visit_Assert(self, node: ast.Assert) -> None:
        self.generic_visit(node)
        line = assert_line(node)
        condition = ast.unparse(node.test)
        guard = self._read_through(node.test)
        if node.msg is None:
            self._site("assert", line, "AssertionError", "error", None,
                       condition=condition, frame=True, guard=guard)
            return
        parts = message_parts(node.msg, self._resolve)
        self._site("assert", line, "AssertionError", "error", parts, condition=condition,
                   guard=guard)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in _LOG_LEVELS
                and _is_logger(func.value)):
            if self._callees is not None:
                self._through_helper(node)
            if self._collect:
                self._forward(node)
            return
        level = _LOG_LEVELS[func.attr]
        if not node.args or isinstance(node.args[0], ast.Starred):
            self._site("log", node.lineno, None, level, None, skip=NO_MESSAGE)
            return
        message, args = node.args[0], list(node.args[1:])
        # A logger formats `msg % args` only when there are args.
        if args and isinstance(message, ast.Constant) and isinstance(message.value, str):
            parts: list[Part] | None = percent_parts(message.value, args)
        else:
            parts = message_parts(message, self._resolve)
        self._site("log", node.lineno, None, level, parts)


    def _arg_parts(self, arg: ast.expr) -> list[Part]:
        parts = message_parts(arg, self._resolve)
        return parts if parts is not None else [_hole(arg)]

    def _message_arg(self, arg: ast.expr) -> list[Part] | None:
        """An argument that may be a message (a name, a string, a template), as parts; None
        for the rest (numbers, calls, containers), which no helper raises or logs."""
        if isinstance(arg, ast.Name | ast.JoinedStr) or (
                isinstance(arg, ast.Constant) and isinstance(arg.value, str)) or (
                isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add | ast.Mod)) or (
                isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
                and arg.func.attr == "format"):
            return self._arg_parts(arg)
        return None

    def _through_helper(self, node: ast.Call) -> None:
        """A call to a function that raises or logs its argument (`raise_error_or_warn(…,
        message)`): a site here, with the message the caller passes."""
        assert self._callees is not None
        found = self._callees.find(node.func, ".".join(self._functions), self._class_name())
        for helper, sink, name in found:
            bound = helper.bind(node, attribute=isinstance(node.func, ast.Attribute))
            if bound is None:
                continue
            mapping = {p: self._arg_parts(arg) for p, arg in bound.items()}
            parts = substitute(sink.parts, mapping)
            if any(isinstance(p, Hole) and _parameter(p.expression) in helper.all_params
                   for p in parts):
                continue  # the helper's own parameter not given here (a default): no message
            self._site(sink.kind, node.lineno, sink.error_class, sink.severity, parts,
                       via=f"{name}() ({sink.path})")

    def _forward(self, node: ast.Call) -> None:
        """First pass: a call that passes on a message made of this function's parameters."""
        params = self._params()
        if not params or isinstance(node.func, ast.Lambda):
            return
        args: list[list[Part] | None] = []
        keywords: dict[str, list[Part]] = {}
        hit = False
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                break
            parts = self._message_arg(arg)
            hit = hit or (parts is not None and any(
                isinstance(p, Hole) and _parameter(p.expression) in params for p in parts))
            args.append(parts)
        for kw in node.keywords:
            if kw.arg is None:
                continue
            parts = self._message_arg(kw.value)
            if parts is not None and any(
                    isinstance(p, Hole) and _parameter(p.expression) in params for p in parts):
                hit = True
                keywords[kw.arg] = parts
        if hit:
            self.forwards.append(_Forward(".".join(self._functions), self._class_name(),
                                          node.func, tuple(args), keywords))


def assert_line(node: ast.Assert) -> int:
    """The line a traceback shows for a failed assert (its frame's line, and the source printed).

    Python 3.10 and 3.11 report it at the last comparison the test branches on — through
    `and`/`or`, `not` and `a if c else b`, in the order they are compiled, whichever operand
    failed — at the comparison's first line; with no such comparison, at the statement's first
    line. 3.12 always reports the statement's first line (`assert (`), 3.13 the test's first
    line. They disagree only on an assert spread over lines; this follows 3.10 and 3.11, two of
    the three of 3.10-3.12 (checked with each interpreter; the extract tests run the one here).
    """
    compare = _last_branch_compare(node.test)
    return compare.lineno if compare is not None else node.lineno


def _last_branch_compare(test: ast.expr) -> ast.Compare | None:
    if isinstance(test, ast.Compare):
        return test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _last_branch_compare(test.operand)
    if isinstance(test, ast.BoolOp):
        branches = list(test.values)
    elif isinstance(test, ast.IfExp):
        branches = [test.test, test.body, test.orelse]
    else:
        return None  # a call, a name, an attribute…: no branch of its own
    found = None
    for branch in branches:
        found = _last_branch_compare(branch) or found
    return found


def _is_class_name(node: ast.expr) -> bool:
    """`ValueError`, `torch.cuda.OutOfMemoryError`: a name whose last part is capitalized."""
    last = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return bool(last) and last[0].isupper() and isinstance(node, ast.Name | ast.Attribute)


def _class_of(node: ast.expr | None) -> str | None:
    return ast.unparse(node) if node is not None and _is_class_name(node) else None


def _is_logger(node: ast.expr) -> bool:
    """`logger`, `log`, `self.logger`, `logging`, `init_logger(...)`/`logging.getLogger(...)`."""
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        return name.endswith(("getLogger", "get_logger", "init_logger"))
    last = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return last.lower() in ("log", "logging") or last.lower().endswith("logger")


# --- the helpers of a release (first pass) ---------------------------------------------------

@dataclass(slots=True)
class HelperIndex:
    """Per module (dotted name): its helpers by qualified name, the functions it defines, and
    what its imports bind (`local name` → dotted target; `*` → the modules it star-imports)."""

    helpers: dict[str, dict[str, Helper]] = field(default_factory=dict)
    defined: dict[str, frozenset[str]] = field(default_factory=dict)
    imports: dict[str, dict[str, str]] = field(default_factory=dict)
    stars: dict[str, tuple[str, ...]] = field(default_factory=dict)
    by_name: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def __len__(self) -> int:
        return sum(map(len, self.helpers.values()))

    def _index_names(self) -> None:
        by_name: dict[str, list[tuple[str, str]]] = {}
        for module, helpers in self.helpers.items():
            for qual in helpers:
                by_name.setdefault(qual.rsplit(".", 1)[-1], []).append((module, qual))
        self.by_name = by_name

    def exported(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        """Where `from module import name` leads: (module, qualified name) of a helper."""
        if depth > 6:
            return None
        if name in self.helpers.get(module, {}):
            return module, name
        if name in self.defined.get(module, frozenset()):
            return None  # defined there, and not a helper
        target = self.imports.get(module, {}).get(name)
        if target is not None:
            return self._dotted(target, depth + 1)
        for star in self.stars.get(module, ()):
            found = self.exported(star, name, depth + 1)
            if found is not None:
                return found
        return None

    def _dotted(self, target: str, depth: int = 0) -> tuple[str, str] | None:
        mod, _, name = target.rpartition(".")
        return self.exported(mod, name, depth) if mod else None

    def _unique(self, name: str, bound: bool) -> tuple[str, str] | None:
        found = [(m, q) for m, q in self.by_name.get(name, ())
                 if self.helpers[m][q].bound == bound]
        return found[0] if len(found) == 1 else None

    def lookup(self, module: str, func: ast.expr, function: str,
               cls: str | None) -> tuple[str, str] | None:
        """The helper a call's `func` names, seen from `function` (qualified) in `module`."""
        helpers = self.helpers.get(module, {})
        defined = self.defined.get(module, frozenset())
        if isinstance(func, ast.Name):
            name = func.id
            scopes = function.split(".") if function else []
            for i in range(len(scopes), -1, -1):  # a local def, then the module's
                qual = ".".join([*scopes[:i], name])
                if qual in helpers:
                    return module, qual
                if qual in defined:
                    return None
            target = self.imports.get(module, {}).get(name)
            if target is not None:
                return self._dotted(target)
            for star in self.stars.get(module, ()):
                found = self.exported(star, name)
                if found is not None:
                    return found
            return self._unique(name, bound=False)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            base, name = func.value.id, func.attr
            if base in ("self", "cls"):
                if cls is not None:
                    qual = f"{cls}.{name}"
                    if qual in helpers:
                        return module, qual
                    if qual in defined:
                        return None
                return self._unique(name, bound=True)  # a mixin's method
            target = self.imports.get(module, {}).get(base)
            if target is not None:  # `utils.f(…)`: `f` of the module imported as `utils`
                return self.exported(target, name)
        return None

    def helper(self, found: tuple[str, str]) -> Helper:
        return self.helpers[found[0]][found[1]]


class _Callees:
    """The helpers a module's calls reach (`HelperIndex.lookup`), for `_Walker`."""

    def __init__(self, index: HelperIndex, module: str) -> None:
        self.index = index
        self.module = module

    def find(self, func: ast.expr, function: str,
             cls: str | None) -> list[tuple[Helper, Sink, str]]:
        found = self.index.lookup(self.module, func, function, cls)
        if found is None:
            return []
        helper = self.index.helper(found)
        return [(helper, sink, found[1]) for sink in helper.sinks]


def _imports(tree: ast.Module, module: str, is_package: bool) -> tuple[dict[str, str],
                                                                        tuple[str, ...]]:
    """What a module's top-level imports bind: local name → dotted target, and the modules it
    star-imports."""
    names: dict[str, str] = {}
    stars: list[str] = []
    package = module if is_package else module.rpartition(".")[0]

    def top(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:  # module level, and under if/try
        for st in stmts:
            yield st
            if isinstance(st, ast.If | ast.Try):
                yield from top(st.body)
                yield from top(st.orelse)
                for h in getattr(st, "handlers", ()):
                    yield from top(h.body)

    for node in top(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    stars.append(source)
                else:
                    names[alias.asname or alias.name] = f"{source}.{alias.name}"
    return names, tuple(stars)


def index_helpers(files: Iterable[tuple[str, str]]) -> HelperIndex:
    """The functions of a release that raise or log a message made of their parameters, which
    cannot be recognized without them — directly, or by passing it on to another such function
    (followed to a fixed point). `files`: `(path inside the package, source text)` each."""
    index = HelperIndex()
    forwards: dict[str, list[_Forward]] = {}
    defs: dict[str, dict[str, _Def]] = {}
    paths: dict[str, str] = {}
    for path, text in files:
        text = text.removeprefix("\ufeff")
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError):
            continue
        module = module_name(path)
        paths[module] = path
        walker = _Walker(tree, collect=True)
        walker.visit(tree)
        defs[module] = walker.defs
        index.defined[module] = frozenset(walker.defs)
        index.imports[module], index.stars[module] = _imports(
            tree, module, PurePosixPath(path).name == "__init__.py")
        forwards[module] = walker.forwards
        for site in walker.sites:
            if (site.from_params and site.parts is not None and site.skip is None
                    and site.function in walker.defs and site.kind in ("raise", "log")
                    and not recognizable(_merge_literals(site.parts), site.kind)):
                _add_sink(index, defs, module, site.function,
                          Sink(site.kind, site.error_class, site.severity, tuple(site.parts),
                               path))
    for _ in range(6):  # helpers of helpers; sglang's chains are two or three deep
        index._index_names()
        added = 0
        for module, calls in forwards.items():
            for fw in calls:
                found = index.lookup(module, fw.func, fw.function, fw.cls)
                if found is None:
                    continue
                callee = index.helper(found)
                mapping = callee.bind_parts(fw, attribute=isinstance(fw.func, ast.Attribute))
                d = defs[module].get(fw.function)
                if d is None:
                    continue
                mine = frozenset(d.positional) | d.keywords
                for sink in callee.sinks:
                    parts = substitute(sink.parts, mapping)
                    if any(isinstance(p, Hole) and _parameter(p.expression) in mine
                           for p in parts) and not recognizable(parts, sink.kind):
                        added += _add_sink(index, defs, module, fw.function, Sink(
                            sink.kind, sink.error_class, sink.severity, tuple(parts),
                            paths[module]))
        if not added:
            break
    index._index_names()
    return index


def _add_sink(index: HelperIndex, defs: Mapping[str, Mapping[str, _Def]], module: str,
              function: str, sink: Sink) -> int:
    d = defs[module][function]
    helpers = index.helpers.setdefault(module, {})
    old = helpers.get(function)
    if old is not None and sink in old.sinks:
        return 0
    sinks = (*old.sinks, sink) if old is not None else (sink,)
    helpers[function] = Helper(d.positional, d.keywords, d.bound, sinks)
    return 1


# --- records ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Stats:
    """What extraction saw: counts by site kind, and why sites gave no record.

    A bare raise or assert is a "raise" or "assert" site, without a message; the frame record it
    gives is counted under "frame" in `covered` and `records`, so "raise" and "assert" there
    stay the message records that `coverage` is about.
    """

    files: int = 0
    sites: Mapping[str, int] = field(default_factory=dict)  # kind → sites seen
    with_message: Mapping[str, int] = field(default_factory=dict)  # kind → string-message sites
    covered: Mapping[str, int] = field(default_factory=dict)  # kind or "frame" → sites recognized
    records: Mapping[str, int] = field(default_factory=dict)  # kind or "frame" → records made
    skipped: Mapping[str, int] = field(default_factory=dict)  # reason → sites
    files_skipped: Mapping[str, int] = field(default_factory=dict)  # reason → files

    def __add__(self, other: Stats) -> Stats:
        def add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
            return dict(sorted((Counter(a) + Counter(b)).items()))
        return Stats(self.files + other.files, add(self.sites, other.sites),
                     add(self.with_message, other.with_message), add(self.covered, other.covered),
                     add(self.records, other.records), add(self.skipped, other.skipped),
                     add(self.files_skipped, other.files_skipped))

    @property
    def coverage(self) -> float:
        """Share of raise/assert sites with a string message that a record recognizes."""
        n = sum(self.with_message.get(k, 0) for k in ("raise", "assert"))
        got = sum(self.covered.get(k, 0) for k in ("raise", "assert"))
        return got / n if n else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "sites": dict(self.sites),
            "sites_with_string_message": dict(self.with_message),
            "sites_covered": dict(self.covered),
            "records": dict(self.records),
            "skipped": dict(self.skipped),
            "files_skipped": dict(self.files_skipped),
            "coverage": round(self.coverage, 4),
        }


@dataclass(frozen=True, slots=True)
class Extraction:
    records: tuple[dict[str, Any], ...]
    stats: Stats

    def without(self, ids: Iterable[str], reason: str) -> Extraction:
        """These records left out, and counted under `reason`."""
        drop = set(ids)
        gone = Counter(record_kind(r) for r in self.records if r["id"] in drop)
        st = self.stats
        return Extraction(
            tuple(r for r in self.records if r["id"] not in drop),
            Stats(st.files, st.sites, st.with_message, st.covered,
                  {k: n - gone.get(k, 0) for k, n in st.records.items()},
                  {**st.skipped, reason: sum(gone.values())} if gone else st.skipped,
                  st.files_skipped),
        )


def record_kind(record: Mapping[str, Any]) -> str:
    """The key a record is counted under in `Stats.records`: "frame", or its `errorType`."""
    return FRAME if "raisedIn" in record else record["errorType"]


def physical_lines(text: str) -> list[str]:
    """The source's lines as `linecache` reads them for a traceback (universal newlines), so
    line N here is the line printed for line N; `str.splitlines` would also split at a form
    feed, which the tokenizer does not count as a line break."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def module_name(path: str) -> str:
    p = PurePosixPath(path)
    parts = list(p.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def record_id(module: str, error_class: str, template: str) -> str:
    """Stable across versions while the message, its class and its module stay the same."""
    key = f"{ID_PREFIX}{module}\n{error_class}\n{template}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def slugify(text: str, limit: int = 48) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].rstrip("-")


def extract_module(text: str, path: str, *, version: str,
                   helpers: HelperIndex | None = None) -> Extraction:
    """Records for one module's source; `path` is inside the package: `sglang/srt/x.py`.
    `helpers` (`index_helpers` of the whole release): each call of a function that raises or
    logs its argument is a site too, with the message passed."""
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark (qwen2_classification.py)
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return Extraction((), Stats(files=1, files_skipped={"syntax error": 1}))
    module = module_name(path)
    walker = _Walker(tree, _Callees(helpers, module) if helpers is not None else None)
    walker.visit(tree)
    sites: Counter[str] = Counter()
    with_message: Counter[str] = Counter()
    covered: Counter[str] = Counter()
    made: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    records: dict[str, dict[str, Any]] = {}
    lines = physical_lines(text)
    for site in sorted(walker.sites, key=lambda s: s.line):
        sites[site.kind] += 1
        if site.frame:
            frame = raised_in(site, path, lines)
            rid = record_id(module, site.error_class or "",
                            f"frame:{frame['function']}:{frame['source']}")
            covered[FRAME] += 1
            if rid in records:
                records[rid].setdefault("alsoAt", []).append(site.line)
                skipped[DUPLICATE_FRAME] += 1
                continue
            made[FRAME] += 1
            records[rid] = _record(rid, site, None, FRAME_PATTERN, path, module, version,
                                   frame=frame)
            continue
        parts = site.parts
        if parts is None:
            skipped[site.skip or NOT_TEMPLATE] += 1
            continue
        with_message[site.kind] += 1
        if site.skip is not None:
            skipped[site.skip] += 1
            continue
        parts = _merge_literals(parts)
        if site.error_class is not None and site.error_class.rsplit(".", 1)[-1] == "KeyError":
            parts = _quoted(parts)
        template = template_of(parts)
        pattern = pattern_of(parts, first_line_only=site.kind == "log",
                             anchored=site.kind != "log")
        if not isinstance(check_pattern(pattern), int):
            skipped[PARAMETER if site.from_params else TOO_VAGUE] += 1
            continue
        if max(map(len, analyze(pattern).required_literals), default=0) < MIN_LITERAL_RUN:
            skipped[PARAMETER if site.from_params else MOSTLY_HOLES] += 1
            continue
        cls_key = site.error_class or f"logger.{site.severity}"
        rid = record_id(module, cls_key, template)
        covered[site.kind] += 1
        if rid in records:
            records[rid].setdefault("alsoAt", []).append(site.line)
            skipped[DUPLICATE] += 1
            continue
        made[site.kind] += 1
        records[rid] = _record(rid, site, template, pattern, path, module, version)
    stats = Stats(1, dict(sites), dict(with_message), dict(covered), dict(made), dict(skipped))
    return Extraction(tuple(records.values()), stats)


def raised_in(site: Site, path: str, lines: Sequence[str]) -> dict[str, str]:
    """The frame a traceback prints for a site: path from `sglang/` on, `co_name`, and the
    site's line stripped, as `traceback` strips it."""
    source = lines[site.line - 1].strip() if site.line <= len(lines) else ""
    return {"path": path, "function": site.code_name, "source": source}


def _documentation(site: Site, path: str, *, frame: bool) -> str:
    where = f"sglang/{path.removeprefix('sglang/')}:{site.line}"
    fn = f"`{site.function}()`" if site.function else "module-level code"
    cond = site.condition if len(site.condition) <= 200 else site.condition[:199] + "…"
    if frame and site.kind == "assert":
        return (f"{fn} in {where} asserts `{cond}`: the assertion failed, and Python printed no "
                "message — the traceback's frame (raisedIn) tells the site.")
    if frame:
        when = f" when `{cond}`" if cond else ""
        return (f"{fn} in {where} raises {site.error_class} without a message{when} — the "
                "traceback's frame (raisedIn) tells the site.")
    what = {"raise": f"raises {site.error_class}", "assert": "asserts",
            "log": f"logs at level {site.severity}"}[site.kind]
    if site.via:
        doc = f"{fn} in {where} passes this message to `{site.via}`, which {what} with it"
    else:
        doc = f"{fn} in {where} {what} with this message"
    if cond:
        doc += f": the assertion `{cond}` failed" if site.kind == "assert" else f" when `{cond}`"
    doc += "."
    if site.failure == "gave up":
        doc += " The warning says sglang tried and gave up: what it tried is not in effect."
    elif site.failure:
        doc += (f" It is logged where sglang caught an exception (`{site.failure}`) and carried "
                "on without what failed: the text after the colon is that exception.")
    return doc


def _record(rid: str, site: Site, template: str | None, pattern: str, path: str, module: str,
            version: str, *, frame: dict[str, str] | None = None) -> dict[str, Any]:
    """`template` is None for a frame record: its `frame` (raisedIn) names it instead — by the
    whole test for an assert, since its printed line may be `assert (` alone."""
    file_path = f"python/{path}"
    if frame is None:
        named_by = (template or "").strip("'\"")
    else:
        named_by = f"assert {site.condition}" if site.kind == "assert" else frame["source"]
    parts = PurePosixPath(path).parts
    return {
        "id": rid,
        "repo": REPO,
        "slug": slugify(named_by) or slugify(module),
        "errorMessage": template,
        "messagePattern": pattern,
        "errorType": site.kind,
        "errorClass": site.error_class,
        "severity": site.severity,
        "filePath": file_path,
        "lineNumber": site.line,
        "githubUrl": f"{GITHUB}/blob/v{version}/{file_path}#L{site.line}",
        **({"raisedIn": frame} if frame is not None else {}),
        **({"guard": {"when": remedy.when_of(site.kind, site.guard or site.condition)}}
           if site.condition else {}),
        "documentation": _documentation(site, path, frame=frame is not None),
        "tags": ["sglang", "generated", site.kind, *([FRAME] if frame is not None else []),
                 *([VIA_HELPER] if site.via else []), *([FAILURE] if site.failure else []),
                 *(["import-error"] if site.failure.endswith(IMPORTED) else []),
                 *parts[1:-1][:2]],
        **({"solutions": list(IMPORT_FIX)} if site.failure.endswith(IMPORTED) else {}),
        "sglangVersions": [version],
        "schemaVersion": 2,
    }


# What a warning that prints a failed import (`Ignore import error when loading {name}: {e}`)
# tells the operator to do: the exception's text after the colon says which of these.
IMPORTED = " (an import)"
IMPORT_FIX = (
    ("`No module named 'X'`: install the package that provides module X into the environment "
     "that runs sglang (`pip install X` when the package has the module's name; `No module "
     "named 'X.y'` with X installed: X is another version than this release expects)."),
    ("`cannot import name 'N' from 'M'`: the installed M is not the version this sglang "
     "release was built against: reinstall the versions it pins (`pip install "
     "sglang==<release>` resolves them; for sgl-kernel and flashinfer, the versions its "
     "requirements name)."),
    ("A shared library that fails to load (`lib….so: cannot open shared object file`, "
     "`undefined symbol`): install the CUDA/ROCm runtime and the kernel package built for it, "
     "or use the sglang container image."),
)


def extract_files(files: Iterable[tuple[str, str]], *, version: str,
                  flow: bool = True) -> Extraction:
    """Records for many modules, `(path inside the package, source text)` each. `flow`:
    messages passed to the release's helpers that raise or log them (`index_helpers`) too."""
    files = list(files)
    helpers = index_helpers(files) if flow else None
    records: list[dict[str, Any]] = []
    stats = Stats()
    for path, text in files:
        ex = extract_module(text, path, version=version, helpers=helpers)
        records.extend(ex.records)
        stats = stats + ex.stats
    records.sort(key=lambda r: (r["filePath"], r["lineNumber"], r["id"]))
    return Extraction(tuple(records), stats)


def excluded(path: str) -> bool:
    """sglang's tests, benchmarks and tooling dot-directories are not the server."""
    p = PurePosixPath(path)
    name = p.name
    return (
        any(part in _EXCLUDED_DIRS or part.startswith(".") for part in p.parts[:-1])
        or name.startswith(("test_", "bench_")) or name.endswith("_test.py")
        or name == "conftest.py"
    )


# --- the edge: where the source comes from ------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SourceFiles:
    files: tuple[tuple[str, str], ...]  # (path inside the package, text)
    version: str | None
    excluded: int


def package_dir(root: Path) -> Path:
    """`DIR` may be a checkout (`python/sglang`), a site-packages dir, or the package itself."""
    for candidate in (root / "python" / "sglang", root / "sglang", root):
        if (candidate / "__init__.py").is_file() and candidate.name == "sglang":
            return candidate
    raise FileNotFoundError(f"no sglang package under {root}")


def read_tree(root: Path) -> SourceFiles:
    pkg = package_dir(root)
    files: list[tuple[str, str]] = []
    n_excluded = 0
    for p in sorted(pkg.rglob("*.py")):
        rel = "sglang/" + p.relative_to(pkg).as_posix()
        if excluded(rel):
            n_excluded += 1
            continue
        files.append((rel, p.read_text(encoding="utf-8", errors="replace")))
    return SourceFiles(tuple(files), version_in(dict(files).get("sglang/_version.py")
                                                 or dict(files).get("sglang/version.py")),
                       n_excluded)


def read_wheel(wheel: Path) -> SourceFiles:
    files: list[tuple[str, str]] = []
    n_excluded = 0
    version = None
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.endswith(".dist-info/METADATA"):
                meta = zf.read(name).decode(errors="replace")
                m = re.search(r"^Version: (\S+)$", meta, re.MULTILINE)
                version = m.group(1) if m else None
            if not (name.startswith("sglang/") and name.endswith(".py")):
                continue
            if excluded(name):
                n_excluded += 1
                continue
            files.append((name, zf.read(name).decode("utf-8", errors="replace")))
    return SourceFiles(tuple(files), version or version_in(dict(files).get("sglang/_version.py")),
                       n_excluded)


def find_installed() -> tuple[Path, str | None]:
    """The sglang in this environment, found without importing it (importing it is heavy)."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("sglang is not installed in this Python environment")
    try:
        version: str | None = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return Path(next(iter(spec.submodule_search_locations))), version


def version_in(text: str | None) -> str | None:
    if not text:
        return None
    m = re.search(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text, re.MULTILINE)
    return m.group(1) if m else None


def iter_jsonl(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    import json

    for r in records:
        yield json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"


def stats_toml(stats: Stats, *, version: str, source: str) -> str:
    """The stats as TOML (a suffix the catalog loader does not read)."""
    import json  # a JSON string is a TOML basic string

    def table(name: str, values: Mapping[str, int]) -> list[str]:
        return [f"\n[{name}]"] + [f"{json.dumps(k)} = {v}" for k, v in values.items()]

    lines = [
        ("# written by `sglang-matcher catalog extract`; coverage = sites_covered / "
         "sites_with_string_message over raise and assert sites; \"frame\": bare raise and "
         "assert sites (no message), recognized by their traceback frame"),
        f"sglang_version = {json.dumps(version)}",
        f"source = {json.dumps(source)}",
        f"files = {stats.files}",
        f"coverage = {round(stats.coverage, 4)}",
    ]
    lines += table("sites", stats.sites)
    lines += table("sites_with_string_message", stats.with_message)
    lines += table("sites_covered", stats.covered)
    lines += table("records", stats.records)
    lines += table("skipped", stats.skipped)
    lines += table("files_skipped", stats.files_skipped)
    return "\n".join(lines) + "\n"


def selected(record: Mapping[str, Any], severities: Iterable[str]) -> bool:
    """`--severity` (repeated): a record of one of these severities; `failure` selects the
    warnings that report a failure (tagged `failure`: `_failure_of`)."""
    chosen = set(severities)
    return record["severity"] in chosen or (
        FAILURE in chosen and FAILURE in (record.get("tags") or ()))


DEFERRED = "its lines are a curated record's examples (left to that record)"
NOT_SELECTED = "severity not selected (--severity)"


def defer_to(
    records: Sequence[dict[str, Any]], curated: Sequence[CatalogRecord]
) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """Leave out the records that would take a curated record's own example lines.

    A curated record with the same template already replaces a generated one when the layers
    merge. This is for the curated record that covers several sites with one pattern (a port
    in use, said three ways): the generated record of each other site is more specific and
    would win its lines, so the operator would get the site without the remediation.
    """
    from matcher.catalog.check import frame_text
    from matcher.catalog.layers import merge_layers
    from matcher.catalog.load import validate_record
    from matcher.engine import Engine

    generated = []
    for i, raw in enumerate(records):
        rec = validate_record(raw, "<generated>", i, "generated")
        if isinstance(rec, CatalogRecord):
            generated.append(rec)
    dropped: set[str] = set()
    while True:
        merged = merge_layers([*(g for g in generated if g.id not in dropped), *curated])
        engine = Engine(merged, use_hyperscan=False, cache=None)
        taken: set[str] = set()
        for rec in curated:
            for example in rec.examples_match:
                winners = [m for m in map(engine.match, frame_text(example)) if m is not None]
                if winners and not any(m.pattern.id == rec.id for m in winners):
                    taken.update(m.pattern.id for m in winners if m.pattern.layer == "generated")
        if not taken:
            break
        dropped |= taken
    return tuple(r for r in records if r["id"] not in dropped), tuple(sorted(dropped))
