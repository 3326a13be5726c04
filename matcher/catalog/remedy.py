"""How to get past a generated record's check, derived from the check itself.

A raise site's guard condition (`guard.when`: true when sglang fails there) often reads server
arguments — `cfg.enable_int8_mamba_checkpoint and cfg.radix_cache_backend is not None`. With
the release's flags (`server_args.ArgSpec`: spellings, default, choices, help), the ways out are
the changes to flags that make that condition false: drop `--radix-cache-backend`, or drop
`--enable-int8-mamba-checkpoint`.

Nothing is guessed: a way is kept only when the condition, evaluated on the arguments of a
launch that fails there (the release's defaults plus the fewest flags that make it true — the
*witness*) and then changed by the way, is false. Terms that are not server arguments (a call,
a model attribute) are *unknown*, and the evaluation is three-valued: `unknown and False` is
false, `unknown or False` is not known, so a way is kept only when it decides the condition on
its own. Records whose condition reads server arguments and has no such way are counted as
*unevaluable* (`catalog stats`), with the reason, and get a fix in words only.

Pure: the table of arguments comes in, records with `solutions`, `fixActions` and `exampleFix`
go out (`remediate`).
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matcher.catalog import (
    area_remedies,
    client_remedies,
    message_advice,
    message_fix,
    quant_remedies,
)
from matcher.catalog.schema import STATED_TAG
from matcher.catalog.server_args import ArgSpec, ServerArgsTable, flags_of
from matcher.catalog.wording import words

_UNKNOWN = object()  # a value the condition depends on that is not a server argument


class _Chosen:
    """A value the operator chooses (`--model-path <a local model dir>`): not None, and equal to
    nothing the condition names — comparing it is unknown."""

    def __repr__(self) -> str:
        return "<chosen>"


CHOSEN = _Chosen()

# Where a condition's attribute reads are server arguments: in these modules, any `name.field`
# (`self`, `cfg`, `view` are the ServerArgs there); elsewhere only through a name that says so.
_ARG_MODULES = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/")
_ARG_NAMES = frozenset({"server_args", "args", "sargs", "server_args_", "_server_args"})


def _is_args_base(node: ast.expr, in_arg_module: bool) -> bool:
    if isinstance(node, ast.Name):
        return in_arg_module or node.id in _ARG_NAMES
    if isinstance(node, ast.Attribute):  # self.server_args.x, model_runner.server_args.x
        return node.attr in _ARG_NAMES
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # get_global_server_args()
        return node.func.id == "get_global_server_args" and not node.args
    return False


def arg_read(node: ast.AST, args: Mapping[str, ArgSpec], in_arg_module: bool) -> str | None:
    """The server argument `node` reads (`self.tp_size`, `global_server_args_dict["x"]`)."""
    if isinstance(node, ast.Attribute) and node.attr in args \
            and _is_args_base(node.value, in_arg_module):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id == "global_server_args_dict" \
            and isinstance(node.slice, ast.Constant) and node.slice.value in args:
        return str(node.slice.value)
    return None


def in_arg_module(path: str) -> bool:
    path = path.removeprefix("python/")
    return any(path == m or path.startswith(m) for m in _ARG_MODULES)


def reads(condition: ast.expr, args: Mapping[str, ArgSpec], path: str) -> list[str]:
    """The server arguments a condition reads, in order of first appearance."""
    inside = in_arg_module(path)
    seen: dict[str, None] = {}
    for node in ast.walk(condition):
        field = arg_read(node, args, inside)
        if field is not None:
            seen.setdefault(field)
    return list(seen)


# --- three-valued evaluation ------------------------------------------------------------------

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_CONVERSIONS: dict[str, Callable[..., Any]] = {"len": len, "int": int, "float": float,
                                               "str": str, "bool": bool}
_CALLS: dict[str, Callable[..., Any]] = {**_CONVERSIONS, "abs": abs, "min": min, "max": max}
_STR_METHODS = frozenset({"startswith", "endswith", "lower", "upper", "strip"})
_METHODS = _STR_METHODS | {"split"}


def readable(value: ast.expr) -> bool:
    """An expression a condition may read through a local bound to it (`catalog extract`
    inlines it): attributes, constants, operators, conversions (`int(x)`) and string methods
    (`(x or "").upper()`) — what the evaluator reads, and nothing that runs code we cannot
    see."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            if node.keywords or not (
                    (isinstance(func, ast.Name) and func.id in _CONVERSIONS)
                    or (isinstance(func, ast.Attribute) and func.attr in _STR_METHODS)):
                return False
        elif not isinstance(node, ast.Attribute | ast.Subscript | ast.Constant | ast.Name
                            | ast.BoolOp | ast.BinOp | ast.UnaryOp | ast.Compare | ast.IfExp
                            | ast.Tuple | ast.List | ast.Set | ast.expr_context | ast.boolop
                            | ast.operator | ast.unaryop | ast.cmpop):
            return False
    return True


class Evaluator:
    """A condition's value given server arguments (`values`: field → value); `_UNKNOWN` where
    it depends on anything else."""

    def __init__(self, args: Mapping[str, ArgSpec], path: str) -> None:
        self.args = args
        self.inside = in_arg_module(path)

    def truth(self, node: ast.expr, values: Mapping[str, Any]) -> bool | None:
        """True / False, or None when not known."""
        if isinstance(node, ast.BoolOp):
            seen_unknown = False
            for operand in node.values:
                t = self.truth(operand, values)
                if t is None:
                    seen_unknown = True
                elif t is isinstance(node.op, ast.Or):  # True decides `or`, False decides `and`
                    return t
            return None if seen_unknown else isinstance(node.op, ast.And)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            t = self.truth(node.operand, values)
            return None if t is None else not t
        v = self.value(node, values)
        if v is _UNKNOWN:
            return None
        if v is CHOSEN:
            return True  # the operator's value for a flag: given, so not empty
        try:
            return bool(v)
        except Exception:  # noqa: BLE001 - an odd value's __bool__
            return None

    def value(self, node: ast.expr, values: Mapping[str, Any]) -> Any:
        field = arg_read(node, self.args, self.inside)
        if field is not None:
            return values.get(field, _UNKNOWN)
        try:
            return self._value(node, values)
        except Exception:  # noqa: BLE001 - TypeError of None > 1, ZeroDivision: not known
            return _UNKNOWN

    def _value(self, node: ast.expr, values: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return {"True": True, "False": False, "None": None}.get(node.id, _UNKNOWN)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.value(e, values) for e in node.elts]
            if any(_opaque(i) for i in items):
                return _UNKNOWN
            return tuple(items) if not isinstance(node, ast.Set) else frozenset(items)
        if isinstance(node, ast.BoolOp):
            items = [self.value(e, values) for e in node.values]
            if any(_opaque(i) for i in items):
                return _UNKNOWN
            out = items[0]
            for i in items[1:]:
                out = (out and i) if isinstance(node.op, ast.And) else (out or i)
            return out
        if isinstance(node, ast.UnaryOp):
            t = self.truth(node.operand, values) if isinstance(node.op, ast.Not) else None
            if isinstance(node.op, ast.Not):
                return _UNKNOWN if t is None else not t
            v = self.value(node.operand, values)
            if _opaque(v):
                return _UNKNOWN
            return -v if isinstance(node.op, ast.USub) else +v if isinstance(node.op, ast.UAdd) \
                else _UNKNOWN
        if isinstance(node, ast.Compare):
            return self._compare(node, values)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            a, b = self.value(node.left, values), self.value(node.right, values)
            if _opaque(a) or _opaque(b):
                return _UNKNOWN
            return _BINARY[type(node.op)](a, b)
        if isinstance(node, ast.IfExp):
            t = self.truth(node.test, values)
            if t is None:
                return _UNKNOWN
            return self.value(node.body if t else node.orelse, values)
        if isinstance(node, ast.Call) and not node.keywords:
            return self._call(node, values)
        return _UNKNOWN

    def _compare(self, node: ast.Compare, values: Mapping[str, Any]) -> Any:
        left = self.value(node.left, values)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = self.value(right_node, values)
            if right is _UNKNOWN and isinstance(op, (ast.In, ast.NotIn)) \
                    and isinstance(right_node, (ast.Tuple, ast.List, ast.Set)) \
                    and not _opaque(left):  # `x in (None, steps + 1)` with x None: known
                known = [self.value(e, values) for e in right_node.elts]
                if any(not _opaque(k) and not _differs(left, k) for k in known):
                    right = (left,)
            if left is _UNKNOWN or right is _UNKNOWN:
                return _UNKNOWN
            if left is CHOSEN or right is CHOSEN:
                other = right if left is CHOSEN else left
                if isinstance(op, (ast.Is, ast.IsNot)) and other is None:
                    ok = isinstance(op, ast.IsNot)  # a chosen value is not None
                else:
                    return _UNKNOWN
            else:
                ok = _COMPARE[type(op)](left, right)
            if not ok:
                return False
            result = ok
            left = right
        return bool(result)

    def _call(self, node: ast.Call, values: Mapping[str, Any]) -> Any:
        if isinstance(node.func, ast.Name) and node.func.id in _CALLS:
            items = [self.value(a, values) for a in node.args]
            if any(_opaque(i) for i in items):
                return _UNKNOWN
            return _CALLS[node.func.id](*items)
        if isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS:
            owner = self.value(node.func.value, values)
            items = [self.value(a, values) for a in node.args]
            if not isinstance(owner, str) or any(_opaque(i) for i in items):
                return _UNKNOWN
            return getattr(owner, node.func.attr)(*items)
        return _UNKNOWN


def _opaque(v: Any) -> bool:
    return v is _UNKNOWN or v is CHOSEN


# --- candidate values -------------------------------------------------------------------------

def _constants(condition: ast.expr, field: str, args: Mapping[str, ArgSpec],
               path: str) -> list[Any]:
    """Values the condition compares `field` with (and their neighbours, for `<`/`>`)."""
    inside = in_arg_module(path)
    out: list[Any] = []
    for node in ast.walk(condition):
        if not isinstance(node, ast.Compare):
            continue
        terms = [node.left, *node.comparators]
        if not any(_reads_field(t, field, args, inside) for t in terms):
            continue
        for t in terms:
            if isinstance(t, ast.Constant):
                vals = [t.value]
            elif isinstance(t, (ast.Tuple, ast.List, ast.Set)):
                vals = [e.value for e in t.elts if isinstance(e, ast.Constant)]
            elif isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.USub) \
                    and isinstance(t.operand, ast.Constant):
                vals = [-t.operand.value] if isinstance(t.operand.value, (int, float)) \
                    else []
            else:
                continue
            for v in vals:
                out.append(v)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    step = 1 if isinstance(v, int) else 0.1
                    out.extend([v - step, v + step])
    return out + _method_constants(condition, field, args, inside)


def _reads_field(node: ast.expr, field: str, args: Mapping[str, ArgSpec], inside: bool) -> bool:
    """`node` is the field, or a method of it (`cfg.speculative_algorithm.upper()`)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _METHODS:
        node = node.func.value
    if isinstance(node, ast.BoolOp):  # `(cfg.x or "")`
        return any(_reads_field(v, field, args, inside) for v in node.values)
    return arg_read(node, args, inside) == field


def _method_constants(condition: ast.expr, field: str, args: Mapping[str, ArgSpec],
                      inside: bool) -> list[Any]:
    """`cfg.device.startswith("cuda")`: "cuda" is a value worth trying for `device`."""
    out: list[Any] = []
    for node in ast.walk(condition):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith") \
                and arg_read(node.func.value, args, inside) == field:
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    out.append(a.value)
                elif isinstance(a, ast.Tuple):
                    out += [e.value for e in a.elts if isinstance(e, ast.Constant)]
    return out


def _typed(spec: ArgSpec, value: Any) -> Any:
    """A value as the flag would parse it (`--tp-size 2` gives 2, not "2")."""
    if value is None or isinstance(value, bool) or spec.type not in ("int", "float"):
        return value
    try:
        return int(value) if spec.type == "int" else float(value)
    except (TypeError, ValueError):
        return value


def _accepts(spec: ArgSpec, value: Any) -> bool:
    """A value the flag can be set to from the command line."""
    if value is None or value is CHOSEN:
        return value is CHOSEN
    if spec.switch is not None:
        return False
    if spec.choices is not None:
        return value in spec.choices
    if spec.boolean_optional:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return spec.type in ("bool", "str2bool")
    if spec.type == "int":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if spec.type == "float":
        return isinstance(value, (int, float)) and math.isfinite(float(value))
    if spec.nargs not in (None, "?", 1):
        return False  # a list flag: what a value of it is, the condition rarely says
    return isinstance(value, (str, int, float))


def _values(spec: ArgSpec, condition: ast.expr, args: Mapping[str, ArgSpec],
            path: str) -> list[Any]:
    """What `spec`'s field may be set to on a command line, for this condition."""
    if spec.switch is not None:
        return [spec.switch]
    out: list[Any] = []
    if spec.boolean_optional:
        out += [True, False]
    out += list(spec.choices or ())
    out += [_typed(spec, v) for v in _constants(condition, spec.dest, args, path)]
    if spec.type in ("int", "float") and spec.choices is None:
        out += [0, 1, 2]
    if spec.choices is None and not spec.boolean_optional:
        out.append(CHOSEN)
    unique: list[Any] = []
    for v in out:
        if _accepts(spec, v) and all(_differs(v, u) for u in unique):
            unique.append(v)
    return unique


# --- ways out ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Step:
    """One change to one flag: back to its default (`remove`), or to `value`."""

    field: str
    op: str  # "remove" | "add" | "set"
    value: Any = None

    @property
    def values(self) -> tuple[Any, ...]:
        """The values a `set` may take, the preferred first (one, unless `_Alternatives`)."""
        return tuple(self.value) if isinstance(self.value, _Alternatives) else (self.value,)

    def apply(self, values: dict[str, Any], args: Mapping[str, ArgSpec]) -> None:
        """The preferred value (the default, for `remove`) into `values`."""
        spec = args[self.field]
        values[self.field] = spec.default if self.op == "remove" else self.values[0]


@dataclass(frozen=True, slots=True)
class Derived:
    """What the condition gave: the arguments it reads, the ways out (each a tuple of steps,
    tried on every witness), the witnesses, and why there is no way when there is none."""

    reads: tuple[str, ...]
    ways: tuple[tuple[Step, ...], ...]
    witnesses: tuple[Mapping[str, Any], ...]
    unfixed: str | None


def _differs(a: Any, b: Any) -> bool:
    return not (a is b or (type(a) is type(b) and a == b))


def _witnesses(ev: Evaluator, cond: ast.expr, defaults: Mapping[str, Any],
               choices: Mapping[str, list[Any]], limit: int = 12) -> list[dict[str, Any]]:
    """Launches that fail here: the defaults with the fewest changes that make the condition
    true (or, when none makes it true for sure, not known to be false)."""
    fields = list(choices)
    budget = 20_000  # evaluations: three fields of thirty choices each stay well inside it
    for want in (True, None):
        for size in range(min(3, len(fields)) + 1):
            found: list[dict[str, Any]] = []
            for combo in itertools.combinations(fields, size):
                for picked in itertools.product(*(choices[f] for f in combo)):
                    budget -= 1
                    if budget < 0:
                        return found
                    values = dict(defaults)
                    values.update(zip(combo, picked))
                    if any(not _differs(values[f], defaults[f]) for f in combo):
                        continue
                    t = ev.truth(cond, values)
                    if t is want:
                        found.append(values)
                        if len(found) >= limit:
                            return found
            if found:
                return found
    return []


def _steps(field: str, spec: ArgSpec, options: list[Any]) -> list[Step]:
    out = [Step(field, "remove")]
    if spec.switch is not None:
        out.append(Step(field, "add", spec.switch))
    out += [Step(field, "set", v) for v in options if spec.switch is None]
    return out


def _decides(ev: Evaluator, cond: ast.expr, witnesses: Sequence[Mapping[str, Any]],
             way: Sequence[Step], args: Mapping[str, ArgSpec]) -> bool:
    """The way makes the condition false on every witness it changes something in."""
    changed_any = False
    for w in witnesses:
        values = dict(w)
        for step in way:
            step.apply(values, args)
        if all(not _differs(values[f], w[f]) for f in values):
            return False  # it is already how this failing launch is: no way out here
        changed_any = True
        if ev.truth(cond, values) is not False:
            return False
    return changed_any


def derive(when: str, args: Mapping[str, ArgSpec], path: str) -> Derived:
    """The ways out of the failure whose condition is `when` (a Python expression)."""
    try:
        cond = ast.parse(when, mode="eval").body
    except SyntaxError:
        return Derived((), (), (), "the condition does not parse")
    fields = reads(cond, args, path)
    if not fields:
        return Derived((), (), (), None)
    ev = Evaluator(args, path)
    options = {f: _values(args[f], cond, args, path) for f in fields}
    witnesses = _witnesses(ev, cond, {f: args[f].default for f in fields}, options)
    if not witnesses:
        return Derived(tuple(fields), (), (), "no launch with these flags fails here "
                                               "(the condition also reads values that are not "
                                               "server arguments)")
    single: list[tuple[Step, ...]] = [(s,) for f in fields
                                      for s in _steps(f, args[f], options[f])]
    ways = [w for w in single if _decides(ev, cond, witnesses, w, args)]
    if not ways:
        pairs: list[tuple[Step, ...]] = [(a[0], b[0])
                                          for a, b in itertools.combinations(single, 2)
                                          if a[0].field != b[0].field]
        ways = [w for w in pairs if _decides(ev, cond, witnesses, w, args)][:3]
    if not ways:
        ways = _each_term(normalized(cond), args, path, ev, witnesses)
    if not ways:
        return Derived(tuple(fields), (), tuple(witnesses),
                       "no change of these flags alone makes the condition false "
                       "(it also depends on values that are not server arguments)")
    return Derived(tuple(fields), tuple(_best(ways, witnesses)), tuple(witnesses), None)


_INVERSE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
    ast.LtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def normalized(node: ast.expr) -> ast.expr:
    """`not` pushed inward (De Morgan; `not a == b` is `a != b`), so `not (A and B)` reads as
    the `or` it is: every term must be made false."""
    if isinstance(node, ast.BoolOp):
        return ast.BoolOp(op=node.op, values=[normalized(v) for v in node.values])
    if not (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return node
    inner = node.operand
    if isinstance(inner, ast.UnaryOp) and isinstance(inner.op, ast.Not):
        return normalized(inner.operand)
    if isinstance(inner, ast.BoolOp):
        flipped: ast.boolop = ast.Or() if isinstance(inner.op, ast.And) else ast.And()
        return ast.BoolOp(op=flipped, values=[normalized(ast.UnaryOp(op=ast.Not(), operand=v))
                                              for v in inner.values])
    if isinstance(inner, ast.Compare) and len(inner.ops) == 1:
        return ast.Compare(left=inner.left, ops=[_INVERSE[type(inner.ops[0])]()],
                           comparators=inner.comparators)
    return node


def _each_term(cond: ast.expr, args: Mapping[str, ArgSpec], path: str, ev: Evaluator,
               witnesses: Sequence[Mapping[str, Any]]) -> list[tuple[Step, ...]]:
    """`A or B or …`: one way out of each term, all taken together (when they agree), checked
    on the whole condition."""
    if not (isinstance(cond, ast.BoolOp) and isinstance(cond.op, ast.Or)):
        return []
    steps: dict[str, Step] = {}
    for term in cond.values:
        if not reads(term, args, path):
            continue  # a term no flag decides: the check below says whether it matters
        sub = derive(ast.unparse(term), args, path)
        if not sub.ways:
            return []
        for step in sub.ways[0]:
            step = Step(step.field, step.op, step.values[0])
            if steps.setdefault(step.field, step) != step:
                return []  # two terms want the same flag two ways
    way = tuple(steps.values())
    return [way] if way and _decides(ev, cond, witnesses, way, args) else []


def _best(ways: list[tuple[Step, ...]], witnesses: Sequence[Mapping[str, Any]],
          keep: int = 3) -> list[tuple[Step, ...]]:
    """One way per flag: taking out a flag the failing launch set first, then adding a switch,
    then a value; a value from the flag's choices over the operator's choice."""
    def rank(way: tuple[Step, ...]) -> tuple[int, int]:
        op_rank = {"remove": 0, "add": 1, "set": 2}
        return (len(way), sum(op_rank[s.op] + (1 if s.value is CHOSEN else 0) for s in way))

    by_fields: dict[tuple[str, ...], list[tuple[Step, ...]]] = {}  # in rank order
    for way in sorted(ways, key=rank):
        by_fields.setdefault(tuple(s.field for s in way), []).append(way)
    return [_merged_sets(group) for group in list(by_fields.values())[:keep]]


def _merged_sets(ways: list[tuple[Step, ...]]) -> tuple[Step, ...]:
    """The first way; a single `set` keeps its alternatives (the other values that work)."""
    first = ways[0]
    if len(first) == 1 and first[0].op == "set":
        others = tuple(w[0].value for w in ways if len(w) == 1 and w[0].op == "set")
        return (Step(first[0].field, "set", _Alternatives(others)),)
    return first


class _Alternatives(tuple):  # type: ignore[type-arg]
    """The values a `set` may take, the first preferred."""


# --- as catalog fields ------------------------------------------------------------------------

def _word(value: Any) -> str:
    if value is CHOSEN:
        return "<value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fix_action(step: Step, spec: ArgSpec) -> dict[str, Any]:
    """A step as a `fixActions` entry."""
    flag = spec.flag
    aliases = list(spec.flags[1:])
    extra = {"aliases": aliases} if aliases else {}
    if step.op == "remove":
        return {"op": "remove", "flag": flag, **extra}
    if step.op == "add":
        return {"op": "add", "flag": flag, **extra}
    values = step.values
    first = values[0]
    if spec.boolean_optional and isinstance(first, bool):
        return {"op": "add", "flag": _switch_name(spec, first)}
    if first is CHOSEN:
        return {"op": "set", "flag": flag, "value": f"<{spec.dest.replace('_', ' ')}>", **extra}
    concrete = [v for v in values if v is not CHOSEN]
    out: dict[str, Any] = {"op": "set", "flag": flag, "value": _word(first), **extra}
    if len(concrete) > 1 and spec.choices is not None:  # a number: the values tried, not all
        out["oneOf"] = [_word(v) for v in concrete]
    return out


def _switch_name(spec: ArgSpec, on: bool) -> str:
    """`--x` or `--no-x`: how a `--x/--no-x` flag (BooleanOptionalAction) is given `on`."""
    return spec.flag if on else "--no-" + spec.flag.removeprefix("--")


def _short(text: str | None, limit: int = 90) -> str:
    if not text:
        return ""
    text = " ".join(text.split()).replace("%%", "%")
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def solution(way: Sequence[Step], args: Mapping[str, ArgSpec]) -> str:
    """A way in the operator's words, with each flag's help quoted."""
    parts = []
    for step in way:
        spec = args[step.field]
        helptext = _short(spec.help, 160)
        about = f" ({spec.flag}: \u201c{helptext}\u201d)" if helptext else ""
        if step.op == "remove":
            default = spec.default
            back = "" if default is None or spec.switch is not None else \
                f" (its default is {_word(default)})"
            parts.append(f"remove {spec.flag} from the launch command{back}{about}")
        elif step.op == "add":
            parts.append(f"add {spec.flag}{about}")
        else:
            values = step.values
            concrete = [_word(v) for v in values if v is not CHOSEN]
            if spec.boolean_optional and isinstance(values[0], bool):
                parts.append(f"pass {_switch_name(spec, values[0])}{about}")
            elif values[0] is CHOSEN:
                parts.append(f"set {spec.flag} to a value{about}")
            elif len(concrete) > 1 and spec.choices is not None:
                parts.append(f"set {spec.flag} to one of {', '.join(concrete)}{about}")
            elif spec.type in ("int", "float") and spec.choices is None:
                parts.append(f"set {spec.flag} to a value for which the check passes, such as "
                             f"{concrete[0]}{about}")
            else:
                parts.append(f"set {spec.flag} {concrete[0]}{about}")
    text = "; and ".join(parts)
    return text[0].upper() + text[1:] + "."


def example_fix(way: Sequence[Step], witness: Mapping[str, Any],
                args: Mapping[str, ArgSpec]) -> str:
    """`# before` / `# after` flags of the failing launch and of the fixed one."""
    def flags(values: Mapping[str, Any]) -> list[str]:
        out = []
        for field, value in values.items():
            spec = args[field]
            if not _differs(value, spec.default):
                continue
            if spec.switch is not None:
                out.append(spec.flag)
            elif spec.boolean_optional and isinstance(value, bool):
                out.append(_switch_name(spec, value))
            else:
                out.append(f"{spec.flag} {_word(value)}")
        return out

    fixed = dict(witness)
    for step in way:
        step.apply(fixed, args)
    before, after = flags(witness), flags(fixed)
    return f"# before\n{' '.join(before) or '(these flags at their defaults)'}\n" \
           f"# after\n{' '.join(after) or '(these flags at their defaults)'}"


def remediate(record: dict[str, Any], args: Mapping[str, ArgSpec]) -> Derived | None:
    """Add `solutions`, `fixActions`, `exampleFix` (and `guard.reads`, `guard.unfixed`) to a
    generated record, in place; its `guard.when` and the release's `args` say what. A record
    with solutions already (hand-written) is left as it is."""
    if record.get("solutions"):
        return None
    guard = record.get("guard") or {}
    when = guard.get("when")
    derived = derive(when, args, record.get("filePath") or "") if when else None
    if derived is not None and derived.reads:
        guard["reads"] = list(derived.reads)
    if derived is not None and derived.ways:
        ways = named_first(derived.ways, record.get("errorMessage") or "", args)
        record["solutions"] = [solution(w, args) for w in ways] + words(record, None)[1:]
        record["fixActions"] = [[fix_action(s, args[s.field]) for s in w] for w in ways]
        record["exampleFix"] = example_fix(ways[0], derived.witnesses[0], args)
    else:
        if derived is not None and derived.unfixed:
            guard["unfixed"] = derived.unfixed
        record["solutions"] = words(record, when)
    return derived


def remediate_all(records: Sequence[dict[str, Any]],
                  table: ServerArgsTable | None) -> Counter[str]:
    """`remediate` each record with the flags of the newest release it is in; how many got
    flag changes, are unevaluable, or are fixed in words (`fix_share` renders it)."""
    from matcher.catalog.pep440 import parse_range

    kinds: Counter[str] = Counter()
    for record in records:
        versions = record.get("sglangVersions") or []
        newest = parse_range(versions[-1])[1] if versions else None
        # A release older than the table's oldest has no flags in it (its parser was not read):
        # the fix in words, never the flags of a later release.
        known = table is not None and newest and table.holds(newest)
        remediate(record, table.at(newest) if table is not None and known and newest else {})
        if table is not None and known:
            message_fix.apply(record, table)  # a fix the message states, when no check gave one
            area_remedies.apply(record, table)  # else what its area's set-up says
            quant_remedies.apply(record, table)  # or what its quantization check compared
            client_remedies.apply(record, table)  # or what a client helper's wait means
            message_advice.apply(record, table)  # or the step the message itself states
        kinds["stated" if STATED_TAG in (record.get("tags") or []) else
              "flags" if record.get("fixActions") else
              "unevaluable" if (record.get("guard") or {}).get("reads") else "words"] += 1
    return kinds


def named_first(ways: Sequence[tuple[Step, ...]], message: str,
                args: Mapping[str, ArgSpec]) -> list[tuple[Step, ...]]:
    """The ways on a flag the message itself names first ("… Omit --radix-cache-backend.",
    "requires --speculative-draft-window-size"): sglang's authors said which to change."""
    def named(way: tuple[Step, ...]) -> bool:
        return any(re.search(re.escape(flag) + r"(?![\w-])", message)
                   for s in way for flag in args[s.field].flags)

    return sorted(ways, key=lambda w: not named(w))


def when_of(kind: str, condition: str) -> str:
    """The condition under which a site fails: an `if` test as it is, an assert's negated."""
    return f"not ({condition})" if kind == "assert" else condition


# --- the check: a stored fix, read back, on the launches that fail ---------------------------

def steps_of(way: Sequence[Mapping[str, Any]], args: Mapping[str, ArgSpec]) -> tuple[Step, ...]:
    """A `fixActions` way (as stored) back as steps on fields; KeyError for a flag the release
    does not have."""
    by_flag = flags_of(args.values())
    out = []
    for action in way:
        flag = action["flag"]
        if flag.startswith("--no-") and flag not in by_flag:
            spec = by_flag["--" + flag.removeprefix("--no-")]
            out.append(Step(spec.dest, "set", False))
            continue
        spec = by_flag[flag]
        if action["op"] == "remove":
            out.append(Step(spec.dest, "remove"))
        elif action["op"] == "add":
            out.append(Step(spec.dest, "add", True if spec.boolean_optional else spec.switch))
        else:
            value = action["value"]
            out.append(Step(spec.dest, "set", CHOSEN if value.startswith("<")
                            else _parsed(spec, value)))
    return tuple(out)


def _parsed(spec: ArgSpec, word: str) -> Any:
    """A value word as argparse would hand it to sglang (choices compared as given)."""
    for choice in spec.choices or ():
        if _word(choice) == word:
            return choice
    if word in ("true", "false") and (spec.boolean_optional or spec.type in ("bool", "str2bool")):
        return word == "true"
    return _typed(spec, word)


def proven(when: str, path: str, args: Mapping[str, ArgSpec],
           way: Sequence[Mapping[str, Any]]) -> bool:
    """The stored way makes `when` false on every launch that fails there (the witnesses,
    found afresh from the release's defaults and flags)."""
    cond = ast.parse(when, mode="eval").body
    fields = reads(cond, args, path)
    ev = Evaluator(args, path)
    witnesses = _witnesses(ev, cond, {f: args[f].default for f in fields},
                           {f: _values(args[f], cond, args, path) for f in fields})
    steps = steps_of(way, args)
    for step in steps:  # a step on a field the condition does not read: that field too
        for w in witnesses:
            w.setdefault(step.field, args[step.field].default)
    return bool(witnesses) and _decides(ev, cond, witnesses, steps, args)
