"""One message's template, read from the AST: the parts of an f-string, a `%` or a `.format()`
message (literal text and holes), and the `errorMessage` template and `messagePattern` regex
written from them (`matcher.catalog.extract` says what each looks like)."""

from __future__ import annotations

import ast
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from matcher.catalog.load import check_pattern
from matcher.catalog.patterns import analyze, escape_literal

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


def hole_of(node: ast.expr, conversion: str = "", spec: str = "", name: str | None = None) -> Hole:
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
                out.append(hole_of(v.value, _CONVERSIONS.get(v.conversion, "")).template)
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
                parts.append(hole_of(v.value, _CONVERSIONS.get(v.conversion, ""),
                                   _joined_spec(v.format_spec)))
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = message_parts(node.left, resolve), message_parts(node.right, resolve)
        if left is None and right is None:
            return None
        return [*(left if left is not None else [hole_of(node.left)]),
                *(right if right is not None else [hole_of(node.right)])]
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
            parts.append(hole_of(value, conversion, spec, name))
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
            parts.append(hole_of(value, conv, spec or "", name))
    return parts


def merge_literals(parts: Iterable[Part]) -> list[Part]:
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


def quoted(parts: list[Part]) -> list[Part]:
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
    parts = merge_literals(parts)
    # Leading and trailing whitespace is not part of what a log shows after `Class: `.
    if parts and isinstance(parts[0], str):
        parts[0] = parts[0].lstrip()
    if parts and isinstance(parts[-1], str):
        parts[-1] = parts[-1].rstrip()
    parts = merge_literals(parts)
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


def recognizable(parts: Sequence[Part], kind: str) -> bool:
    """A template with literal text enough for a record of its own (the loader's minimum and
    `MIN_LITERAL_RUN`)."""
    pattern = pattern_of(list(parts), first_line_only=kind == "log", anchored=kind != "log")
    return isinstance(check_pattern(pattern), int) and max(
        map(len, analyze(pattern).required_literals), default=0) >= MIN_LITERAL_RUN
