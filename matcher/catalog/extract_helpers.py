"""The helpers of a release (a first pass over all its modules).

`raise_error_or_warn(self, strict, "count", msg)` raises `ValueError(msg)` or logs it; a local
`def _fail(msg): raise ValueError(msg)` raises what it is given. The message is written at
the call, not at the raise, so the raise site alone says nothing (its message is a bare
parameter). `index_helpers` reads a release's own code for the functions whose raise or log
message is made of their parameters and cannot be recognized without them (a bare `{msg}`,
`[{name}] {msg}`), transitively (`_report(msg)` → `raise_error_or_warn(…, msg)`); each call
of one is then a site of its own, with the message the caller passes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from matcher.catalog.extract_sites import (
    Forward,
    Helper,
    Signature,
    Sink,
    SiteWalker,
    hole_parameter,
    substitute,
)
from matcher.catalog.extract_sources import module_name
from matcher.catalog.extract_templates import Hole, merge_literals, recognizable


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


class Callees:
    """The helpers a module's calls reach (`HelperIndex.lookup`), for `SiteWalker`."""

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
    release = _read_release(files)
    for _ in range(6):  # helpers of helpers; sglang's chains are two or three deep
        release.index._index_names()
        if not _follow_forwards(release):
            break
    release.index._index_names()
    return release.index


@dataclass(slots=True)
class _Release:
    """What the first pass read of each module (by dotted name): its helpers so far (`index`),
    its functions' signatures, the calls that pass on a message made of their parameters, and
    its path inside the package."""

    index: HelperIndex = field(default_factory=HelperIndex)
    defs: dict[str, dict[str, Signature]] = field(default_factory=dict)
    forwards: dict[str, list[Forward]] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)


def _read_release(files: Iterable[tuple[str, str]]) -> _Release:
    """Each module's signatures, imports and forwarding calls, and the functions that raise or
    log their parameters themselves."""
    release = _Release()
    index, defs = release.index, release.defs
    for path, text in files:
        text = text.removeprefix("\ufeff")
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError):
            continue
        module = module_name(path)
        release.paths[module] = path
        walker = SiteWalker(tree, collect=True)
        walker.visit(tree)
        defs[module] = walker.defs
        index.defined[module] = frozenset(walker.defs)
        index.imports[module], index.stars[module] = _imports(
            tree, module, PurePosixPath(path).name == "__init__.py")
        release.forwards[module] = walker.forwards
        for site in walker.sites:
            if (site.from_params and site.parts is not None and site.skip is None
                    and site.function in walker.defs and site.kind in ("raise", "log")
                    and not recognizable(merge_literals(site.parts), site.kind)):
                _add_sink(index, defs, module, site.function,
                          Sink(site.kind, site.error_class, site.severity, tuple(site.parts),
                               path))
    return release


def _follow_forwards(release: _Release) -> int:
    """One round: each call that passes its own parameters to a known helper makes its
    function a helper too; the number of sinks added (0: the fixed point)."""
    index, defs = release.index, release.defs
    added = 0
    for module, calls in release.forwards.items():
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
                if any(isinstance(p, Hole) and hole_parameter(p.expression) in mine
                       for p in parts) and not recognizable(parts, sink.kind):
                    added += _add_sink(index, defs, module, fw.function, Sink(
                        sink.kind, sink.error_class, sink.severity, tuple(parts),
                        release.paths[module]))
    return added


def _add_sink(index: HelperIndex, defs: Mapping[str, Mapping[str, Signature]], module: str,
              function: str, sink: Sink) -> int:
    d = defs[module][function]
    helpers = index.helpers.setdefault(module, {})
    old = helpers.get(function)
    if old is not None and sink in old.sinks:
        return 0
    sinks = (*old.sinks, sink) if old is not None else (sink,)
    helpers[function] = Helper(d.positional, d.keywords, d.bound, sinks)
    return 1
