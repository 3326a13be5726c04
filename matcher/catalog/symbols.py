"""Which names each module of a package defines, per release: read with `ast`, never imported.

`cannot import name 'X' from 'P.mod'`, `No module named 'P.mod'`, `module 'P.mod' has no
attribute 'X'` and `f() got an unexpected keyword argument 'k'` say that the installed P is not
the one the caller was written for. Which releases of P have X is in P's own wheels: this module
reads them (`wheel_symbols`) and writes a compact index of them (`write_index`), which the
daemon reads only when such an event needs it (`Index.load`): nothing of it at start.

What a module "defines" is what `from P.mod import X` finds there: the names its top level binds
(in any `if`/`try`/`with` branch — a `TYPE_CHECKING` branch too, which is where lazy packages
such as transformers list what they export), its `from … import *` resolved within the package,
its submodules, and for a `.pyi` stub (the Python face of a compiled module, tokenizers') what
the stub declares. A module with a module-level `__getattr__`, or a compiled module with no stub,
is *open*: a name missing from it is not proof that the name is missing.

The index file, one per distribution, gzip'd text, one fact a line:

    V <version> <version> …                     the releases read, oldest first (bit i = the i-th)
    M <module> <mask> [open]                    the releases that have the module
    N <module> <mask> <name> <name> …           names defined in exactly those releases
    F <module> <qualname> <mask> <param,param…> a function's keyword parameters in those releases
                                                (none taking **kwargs: those take any keyword)
    P <sglang release> <spec> <mask>            (sglang's pins of this distribution) the spec,
                                                and which releases read here it admits
    A <module> <alias> <mask> <source module> <name>   (sglang's index only) an import of a
                                                dependency's name, as `alias`, in those releases

`<mask>` is hexadecimal over the `V` list. Pure but for the edges that read wheels and files.
"""

from __future__ import annotations

import ast
import gzip
import io
import re
import tarfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from matcher.catalog.pep440 import version_key

# Import name → the distributions that install it, as sglang's wheels name them.
DISTRIBUTION_OF_MODULE: Mapping[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "transformers": ("transformers",),
    "tokenizers": ("tokenizers",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "sgl_kernel": ("sglang-kernel", "sgl-kernel"),
    "xgrammar": ("xgrammar",),
    "outlines": ("outlines",),
    "outlines_core": ("outlines-core",),
    "vllm": ("vllm",),
    "triton": ("triton",),
    "compressed_tensors": ("compressed-tensors",),
    "llguidance": ("llguidance",),
    "torchao": ("torchao",),
    "sglang": ("sglang",),
}


# --- one module --------------------------------------------------------------------------------


@dataclass(slots=True)
class ModuleFacts:
    names: set[str] = field(default_factory=set)
    stars: list[str] = field(default_factory=list)  # modules whose `*` it imports (absolute)
    all_names: list[str] | None = None  # a literal `__all__`
    open: bool = False  # a module-level __getattr__, or compiled without a stub
    functions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # no **kwargs ones
    imports: list[tuple[str, str, str]] = field(default_factory=list)  # (alias, module, name)


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *([target] if target else [])])


def module_facts(text: str, module: str, *, is_package: bool) -> ModuleFacts | None:
    """What one module's source binds at its top level; None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    facts = ModuleFacts()
    _top(tree.body, facts, module, is_package)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            _function(node, node.name, facts)
        elif isinstance(node, ast.ClassDef):
            _class(node, node.name, facts)
    return facts


def _top(body: Sequence[ast.stmt], facts: ModuleFacts, module: str, is_package: bool) -> None:
    for st in body:
        if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            facts.names.add(st.name)
            if st.name == "__getattr__" and not isinstance(st, ast.ClassDef):
                facts.open = True
        elif isinstance(st, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        facts.names.add(n.id)
            if isinstance(st, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in st.targets):
                facts.all_names = _strings(st.value)
            if isinstance(st, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id in ("__getattr__",) for t in st.targets):
                facts.open = True
        elif isinstance(st, ast.Import):
            for a in st.names:
                facts.names.add(a.asname or a.name.split(".")[0])
        elif isinstance(st, ast.ImportFrom):
            source = _absolute(module, is_package, st.level, st.module)
            for a in st.names:
                if a.name == "*":
                    facts.stars.append(source)
                else:
                    facts.names.add(a.asname or a.name)
                    facts.imports.append((a.asname or a.name, source, a.name))
        elif isinstance(st, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for block in _blocks(st):
                _top(block, facts, module, is_package)
            if isinstance(st, ast.For):
                for n in ast.walk(st.target):
                    if isinstance(n, ast.Name):
                        facts.names.add(n.id)
        elif sys_match(st):
            for case in st.cases:  # type: ignore[attr-defined]
                _top(case.body, facts, module, is_package)


def sys_match(st: ast.stmt) -> bool:
    return type(st).__name__ == "Match"


def _blocks(st: ast.If | ast.Try | ast.With | ast.For | ast.While) -> list[list[ast.stmt]]:
    if isinstance(st, ast.Try):
        return [st.body, *[h.body for h in st.handlers], st.orelse, st.finalbody]
    if isinstance(st, ast.With):
        return [st.body]
    return [st.body, st.orelse]


def _strings(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple):
        out = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return out if len(out) == len(node.elts) else None
    return None


def _params(args: ast.arguments) -> tuple[str, ...] | None:
    """The names a call may pass by keyword; None when it takes **kwargs (any keyword)."""
    if args.kwarg is not None:
        return None
    return tuple(a.arg for a in (*args.args, *args.kwonlyargs))


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str,
              facts: ModuleFacts) -> None:
    params = _params(node.args)
    if params is not None:
        facts.functions[qualname] = params


def _is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else \
            target.id if isinstance(target, ast.Name) else ""
        if name == "dataclass":
            return True
    return False


def _class(node: ast.ClassDef, qualname: str, facts: ModuleFacts) -> None:
    # a dataclass's generated __init__ takes its fields (a base class's fields are not seen
    # here: only a class without bases is told apart)
    if _is_dataclass(node) and not node.bases and not any(
            isinstance(st, ast.FunctionDef) and st.name == "__init__" for st in node.body):
        facts.functions[f"{qualname}.__init__"] = tuple(
            st.target.id for st in node.body
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
            and "ClassVar" not in ast.unparse(st.annotation))
    for st in node.body:
        if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef):
            _function(st, f"{qualname}.{st.name}", facts)
        elif isinstance(st, ast.ClassDef):
            _class(st, f"{qualname}.{st.name}", facts)


# --- one release of a package ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Release:
    """One release's facts: module → names (submodules and `*` resolved), open modules,
    functions' keyword parameters, and its imports of other packages' names."""

    modules: dict[str, frozenset[str]]
    open: frozenset[str]
    functions: dict[tuple[str, str], tuple[str, ...]]
    imports: dict[tuple[str, str], tuple[str, str]]  # (module, alias) → (source module, name)


_COMPILED = re.compile(r"\.(?:cpython-[^.]+\.|abi3\.|cp\d+-[^.]+\.)?(?:so|pyd)$")


def module_of(path: str) -> tuple[str, bool] | None:
    """`torch/cuda/__init__.py` → (`torch.cuda`, True); `x/y.pyi` → (`x.y`, False); a compiled
    `sgl_kernel/common_ops.abi3.so` → (`sgl_kernel.common_ops`, False); else None."""
    p = PurePosixPath(path)
    if p.suffix in (".py", ".pyi"):
        stem = p.with_suffix("")
    elif _COMPILED.search(p.name):
        stem = p.with_name(p.name.split(".", 1)[0])
    else:
        return None
    parts = list(stem.parts)
    if not parts or not all(x.isidentifier() for x in parts):
        return None
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def release_facts(files: Iterable[tuple[str, bytes]], *, packages: Sequence[str],
                  imports_from: Sequence[str] = ()) -> Release:
    """`files`: (path in the wheel, bytes) of one release; `packages`: its top-level import
    names (the rest of the wheel is ignored); `imports_from`: the top-level packages whose
    names imported here are kept (`imports`)."""
    facts: dict[str, ModuleFacts] = {}
    compiled: set[str] = set()
    stubs: dict[str, ModuleFacts] = {}
    for path, data in files:
        if path.split("/", 1)[0] not in packages:
            continue
        where = module_of(path)
        if where is None:
            continue
        module, is_package = where
        if not path.endswith((".py", ".pyi")):
            compiled.add(module)
            continue
        got = module_facts(data.decode("utf-8", "replace"), module, is_package=is_package)
        if got is None:
            facts.setdefault(module, ModuleFacts(open=True))
            continue
        if path.endswith(".pyi"):
            stubs[module] = got
        else:
            facts[module] = got
    for module, stub in stubs.items():
        own = facts.setdefault(module, ModuleFacts())
        own.names |= stub.names
        own.functions.update(stub.functions)
        compiled.discard(module)
    for module in compiled:
        facts.setdefault(module, ModuleFacts(open=True))
    # parents of every module exist (namespace packages) and have their submodules
    for module in list(facts):
        parts = module.split(".")
        for i in range(1, len(parts)):
            facts.setdefault(".".join(parts[:i]), ModuleFacts())
    names: dict[str, set[str]] = {m: set(f.names) for m, f in facts.items()}
    for module in facts:
        parent, _, leaf = module.rpartition(".")
        if parent:
            names[parent].add(leaf)
    _resolve_stars(facts, names)
    return Release(
        modules={m: frozenset(n) for m, n in names.items()},
        open=frozenset(m for m, f in facts.items() if f.open),
        functions={(m, q): p for m, f in facts.items() for q, p in f.functions.items()},
        imports=_imported_from(facts, tuple(imports_from)))


def _imported_from(facts: Mapping[str, ModuleFacts],
                   wanted: tuple[str, ...]) -> dict[tuple[str, str], tuple[str, str]]:
    """(module, local name) → (source module, name) of each name imported from one of the
    `wanted` top-level packages."""
    imports: dict[tuple[str, str], tuple[str, str]] = {}
    if wanted:
        for module, f in facts.items():
            for alias, source, name in f.imports:
                if source.split(".", 1)[0] in wanted:
                    imports[(module, alias)] = (source, name)
    return imports


def _resolve_stars(facts: Mapping[str, ModuleFacts], names: dict[str, set[str]]) -> None:
    """`from .x import *` brings x's `__all__` (or its public names); to a fixpoint."""
    for _ in range(8):
        changed = False
        for module, f in facts.items():
            for source in f.stars:
                src = facts.get(source)
                if src is None:
                    continue
                exported = set(src.all_names) if src.all_names is not None else {
                    n for n in names.get(source, ()) if not n.startswith("_")}
                before = len(names[module])
                names[module] |= exported
                changed = changed or len(names[module]) != before
        if not changed:
            return


def read_archive(path: Path) -> Iterator[tuple[str, bytes]]:
    """(path inside the package, bytes) of a wheel, or of an sdist (its first directory and any
    `python/` or `src/` left out) — Python files, stubs and the names of compiled modules."""
    keep = (".py", ".pyi", ".so", ".pyd")
    if path.name.endswith(".whl") or path.suffix == ".zip":
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name.endswith(keep) and ".dist-info/" not in name and ".data/" not in name:
                    yield name, (z.read(name) if name.endswith((".py", ".pyi")) else b"")
        return
    with tarfile.open(path) as t:
        for m in t:
            if not m.isfile() or not m.name.endswith(keep):
                continue
            rel = m.name.split("/", 1)[-1]
            for lead in ("python/", "src/"):
                rel = rel.removeprefix(lead)
            f = t.extractfile(m)
            yield rel, (f.read() if f is not None and rel.endswith((".py", ".pyi")) else b"")


# --- many releases → the index -----------------------------------------------------------------

def _hex(mask: int) -> str:
    return format(mask, "x")


def index_lines(releases: Mapping[str, Release], *,
                pins: Mapping[str, str] | None = None,
                admitted: Mapping[str, int] | None = None) -> Iterator[str]:
    """The index text of one distribution (see the module's doc), releases oldest first."""
    order = sorted(releases, key=version_key)
    bit = {v: 1 << i for i, v in enumerate(order)}
    yield "V " + " ".join(order)
    module_mask: dict[str, int] = {}
    open_mask: dict[str, int] = {}
    name_mask: dict[str, dict[str, int]] = {}
    fn_mask: dict[tuple[str, str], dict[tuple[str, ...], int]] = {}
    imp_mask: dict[tuple[str, str, str, str], int] = {}
    for v in order:
        r = releases[v]
        for module, names in r.modules.items():
            module_mask[module] = module_mask.get(module, 0) | bit[v]
            per = name_mask.setdefault(module, {})
            for n in names:
                per[n] = per.get(n, 0) | bit[v]
        for module in r.open:
            open_mask[module] = open_mask.get(module, 0) | bit[v]
        for key, params in r.functions.items():
            per_fn = fn_mask.setdefault(key, {})
            per_fn[params] = per_fn.get(params, 0) | bit[v]
        for (module, alias), (source, name) in r.imports.items():
            k = (module, alias, source, name)
            imp_mask[k] = imp_mask.get(k, 0) | bit[v]
    for module in sorted(module_mask):
        yield f"M {module} {_hex(module_mask[module])}" + (" open" if module in open_mask else "")
        by_mask: dict[int, list[str]] = {}
        for n, m in name_mask.get(module, {}).items():
            by_mask.setdefault(m, []).append(n)
        for m, ns in sorted(by_mask.items()):
            yield f"N {module} {_hex(m)} " + " ".join(sorted(ns))
    for (module, qual), per_params in sorted(fn_mask.items()):
        if len(per_params) == 1 and next(iter(per_params.values())) == module_mask.get(module):
            continue  # the same parameters whenever the module exists: nothing to tell apart
        for params, m in sorted(per_params.items(), key=lambda kv: kv[1]):
            yield f"F {module} {qual} {_hex(m)} {','.join(params)}"
    for (module, alias, source, name), m in sorted(imp_mask.items()):
        yield f"A {module} {alias} {_hex(m)} {source} {name}"
    for release, spec in sorted((pins or {}).items(), key=lambda kv: version_key(kv[0])):
        yield f"P {release} {spec or '*'} {_hex((admitted or {}).get(release, 0))}"


def write_index(path: Path, lines: Iterable[str]) -> None:
    from matcher.atomic import write_atomic

    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        for line in lines:
            gz.write(line.encode("utf-8") + b"\n")
    write_atomic(path, buf.getvalue())


# --- reading it back (at event time) ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Index:
    """One distribution's index, as text: looked up by scanning for a line's head (a lookup
    is rare — once per mismatch event — and keeping the text is cheaper than building maps).

    The lines come grouped by kind: module and name lines (`M`, `N`, interleaved), then
    function, import and pin lines (`F`, `A`, `P`). `starts` holds where each of the last
    three groups begins, so a search for one of them skips the megabytes before it (a search
    for a short head such as `\nA ` from the text's start took 80 ms)."""

    distribution: str
    versions: tuple[str, ...]
    text: str
    starts: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, distribution: str) -> Index:
        text = "\n" + gzip.decompress(path.read_bytes()).decode("utf-8")
        head = text[1:text.find("\n", 1)]
        starts, at = {}, max(text.rfind("\nM "), text.rfind("\nN "), 0)
        for kind in "FAP":
            found = text.find(f"\n{kind} ", at)
            starts[kind] = at = found if found >= 0 else at
        return cls(distribution, tuple(head.split()[1:]), text, starts)

    def _lines(self, head: str) -> Iterator[str]:
        key = "\n" + head
        at = self.text.find(key, self.starts.get(head[0], 0))
        while at >= 0:
            end = self.text.find("\n", at + 1)
            yield self.text[at + 1: end if end >= 0 else len(self.text)]
            at = self.text.find(key, at + 1)

    def versions_of(self, mask: int) -> list[str]:
        return [v for i, v in enumerate(self.versions) if mask >> i & 1]

    def module(self, module: str) -> tuple[int, bool]:
        """(mask of releases that have `module`, whether it is open in any)."""
        for line in self._lines(f"M {module} "):
            parts = line.split()
            return int(parts[2], 16), len(parts) > 3
        return 0, False

    def name(self, module: str, name: str) -> int:
        """Mask of releases whose `module` defines `name`."""
        for line in self._lines(f"N {module} "):
            parts = line.split(" ")
            if name in parts[3:]:
                return int(parts[2], 16)
        return 0

    def keyword(self, qualname: str, keyword: str, module: str | None = None
                ) -> tuple[int, int, list[str]]:
        """(releases whose `qualname` takes `keyword`, releases whose does not, modules) for
        the functions indexed with varying parameters; `module` narrows when known."""
        takes = lacks = 0
        where: list[str] = []
        for line in self._lines("F "):
            parts = line.split(" ")
            if parts[2] != qualname or (module is not None and parts[1] != module):
                continue
            mask = int(parts[3], 16)
            params = parts[4].split(",") if len(parts) > 4 and parts[4] else []
            if keyword in params:
                takes |= mask
            else:
                lacks |= mask
            if parts[1] not in where:
                where.append(parts[1])
        return takes, lacks, where

    def pins(self) -> dict[str, tuple[str, int]]:
        """sglang release → (spec, mask of indexed releases it admits)."""
        out = {}
        for line in self._lines("P "):
            _, release, spec, mask = line.split(" ")
            out[release] = ("" if spec == "*" else spec, int(mask, 16))
        return out

    def imports_of(self, alias: str) -> list[tuple[str, int, str, str]]:
        """(module, mask, source module, name) of every import bound to `alias`."""
        out = []
        for line in self._lines("A "):
            parts = line.split(" ")
            if parts[2] == alias:
                out.append((parts[1], int(parts[3], 16), parts[4], parts[5]))
        return out

    def importers(self, source: str, name: str | None) -> list[tuple[str, int]]:
        """(module, mask) of every import of `source`'s `name`, whatever it is bound as; with
        no name, of any name from `source` or a module under it."""
        out = []
        for line in self._lines("A "):
            parts = line.split(" ")
            if name is None:
                if parts[4] == source or parts[4].startswith(source + "."):
                    out.append((parts[1], int(parts[3], 16)))
            elif parts[4] == source and parts[5] == name:
                out.append((parts[1], int(parts[3], 16)))
        return out
