"""The sites of one module: each raise, assert and logger call, with its function, the condition
that leads to it and its message's template (`SiteWalker`); and the helpers that raise or log a
message made of their parameters (`Helper`, `Sink`), read at each call with the message passed."""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from matcher.catalog import remedy
from matcher.catalog.extract_stats import (
    CALL_RESULT,
    KEYWORD_ONLY,
    NO_MESSAGE,
    RERAISE,
    SEVERAL_ARGS,
)
from matcher.catalog.extract_templates import (
    Hole,
    Part,
    Resolver,
    hole_of,
    merge_literals,
    message_parts,
    percent_parts,
)

if TYPE_CHECKING:
    from matcher.catalog.extract_helpers import Callees


_LOG_LEVELS = {"error": "error", "exception": "error", "critical": "error",
               "warning": "warning", "warn": "warning"}


# What a warning that prints a failed import (`Ignore import error when loading {name}: {e}`)
# gets appended to its `failure`: such a record is tagged `import-error` and told how to fix it.
IMPORTED = " (an import)"


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
                more = message_parts(b.value, self._outer_resolver()) or [hole_of(b.value)]
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


@dataclass(frozen=True, slots=True)
class Signature:
    """A function's parameters, as a call binds its arguments to them."""

    positional: tuple[str, ...]  # positional parameters in order, `self` included
    keywords: frozenset[str]  # parameters that may be given by keyword
    bound: bool  # a method: called as `obj.f(…)`, its first parameter is not passed


@dataclass(frozen=True, slots=True)
class Forward:
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

    def bind_parts(self, forward: Forward, *, attribute: bool) -> dict[str, list[Part]]:
        params = self.positional[1:] if self.bound and attribute else self.positional
        out = {name: parts for name, parts in zip(params, forward.args, strict=False)
               if parts is not None}
        out.update({k: v for k, v in forward.keywords.items() if k in self.all_params})
        return out


def hole_parameter(expression: str) -> str:
    """`msg`, `str(msg)` → `msg`: the name a hole shows when it is a parameter as it is."""
    m = re.fullmatch(r"(?:str\()?([A-Za-z_]\w*)\)?", expression)
    return m.group(1) if m else ""


def substitute(parts: Iterable[Part], mapping: Mapping[str, list[Part]]) -> list[Part]:
    """A helper's message with each hole that is one of its parameters replaced by what the
    caller passes (its own template when it is one)."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, Hole) and not p.conversion and not p.spec \
                and hole_parameter(p.expression) in mapping:
            out.extend(mapping[hole_parameter(p.expression)])
        else:
            out.append(p)
    return merge_literals(out)


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


class SiteWalker(ast.NodeVisitor):
    """Collect sites with the function, condition and message template of each."""

    def __init__(self, module: ast.Module, callees: Callees | None = None, *,
                 collect: bool = False, joined_lines: bool = False,
                 variable_holes: bool = False) -> None:
        self.sites: list[Site] = []
        self._joined_lines = joined_lines  # read `raise X("\n".join(msg))` (`_lines_joined`)
        # read `raise X(f"{preface} …")` through `preface`'s template (`_through_variables`)
        self._variable_holes = variable_holes
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
        self.defs: dict[str, Signature] = {}
        self.forwards: list[Forward] = []

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
            self.defs[".".join(self._functions)] = Signature(positional, keywords, bound)
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

    def _through_variables(self, parts: list[Part]) -> list[Part]:
        """A hole that is a bare local name bound once to a template before the raise (its
        assignment read as a raised variable's is, `_Scope.value_of`) written as that template:
        transformers' `preface = "FlashAttention2 has been toggled on, but …:"` then
        `raise ImportError(f"{preface} the package flash_attn seems to be not installed.")`.
        A hole the name's binding does not settle stays a hole."""
        out: list[Part] = []
        for part in parts:
            if isinstance(part, Hole) and not part.conversion and not part.spec \
                    and part.expression.isidentifier():
                got = self._resolve(ast.Name(id=part.expression, ctx=ast.Load()))
                if got is not None and got != [part]:
                    out += got
                    continue
            out.append(part)
        return out

    def _lines_joined(self, node: ast.expr) -> list[Part] | None:
        """`"\n".join(msg)`, `msg = [f"ninja exited with status {code}", …]` bound once before
        it: the lines written in the list. Lines appended to it later (tvm_ffi's build error: the
        build's stdout and stderr) follow them; a message pattern matches from the start of the
        message on, not to its end, so they need no hole."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "join" and isinstance(node.func.value, ast.Constant)
                and node.func.value.value == "\n" and len(node.args) == 1
                and isinstance(node.args[0], ast.Name)):
            return None
        name = node.args[0].id
        value = self._scopes[-1].expr_of(name, self._stmt)
        if not isinstance(value, ast.List | ast.Tuple) or not value.elts:
            return None
        parts: list[Part] = []
        for i, element in enumerate(value.elts):
            got = message_parts(element, self._resolve)
            parts += [*(["\n"] if i else []), *(got if got is not None else [hole_of(element)])]
        return parts

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
            isinstance(p, Hole) and hole_parameter(p.expression) in params for p in parts or ())
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
        if parts is None and self._joined_lines:
            parts = self._lines_joined(exc.args[0])
        if parts is not None and self._variable_holes:
            parts = self._through_variables(parts)
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
        return parts if parts is not None else [hole_of(arg)]

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
            if any(isinstance(p, Hole) and hole_parameter(p.expression) in helper.all_params
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
                isinstance(p, Hole) and hole_parameter(p.expression) in params for p in parts))
            args.append(parts)
        for kw in node.keywords:
            if kw.arg is None:
                continue
            parts = self._message_arg(kw.value)
            if parts is not None and any(
                    isinstance(p, Hole) and hole_parameter(p.expression) in params for p in parts):
                hit = True
                keywords[kw.arg] = parts
        if hit:
            self.forwards.append(Forward(".".join(self._functions), self._class_name(),
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
