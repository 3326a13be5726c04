"""Layers one way: every import inside `matcher/` (at the top of a module or inside a function)
goes down the layers below, never up, and no modules import each other round in a circle, in a
layer or across. Imports under `if TYPE_CHECKING:` are for annotations only and do not count.

From the bottom:
  foundation     small helpers anything may use (types, redaction, atomic writes, …)
  catalog data   what a catalog record is and how catalog files are read
  engine         matching lines against records (and the framing it needs)
  catalog tools  extract, check, export, stats, remedy, server args, releases; and
                 `matcher.catalog` itself, whose `load_catalog` may extract the installed sglang
  application    everything else: daemon, topology, config, pipeline, sources, sinks, …
  commands       `matcher.commands` (one module per command) and the entry point `matcher.cli`:
                 they may import everything; nothing else imports them
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "matcher"

FOUNDATION = {"matcher", "matcher.atomic", "matcher.cache", "matcher.types", "matcher.utf8", "matcher.limits",
              "matcher.backoff", "matcher.redact", "matcher.wrappers"}
CATALOG_DATA = {"matcher.catalog.schema", "matcher.catalog.load", "matcher.catalog.patterns",
                "matcher.catalog.wording", "matcher.catalog.versions", "matcher.catalog.pep440",
                "matcher.catalog.layers", "matcher.catalog.line_history"}
ENGINE = {"matcher.engine", "matcher.compile", "matcher.stored_form", "matcher.prefilter",
          "matcher.frames", "matcher.framing", "matcher.api_error",
          "matcher.precompiled"}
CATALOG_TOOLS = {"matcher.catalog"} | {
    f"matcher.catalog.{name}" for name in ("check", "extract", "extract_templates", "extract_sites",
                                           "extract_helpers", "extract_records", "extract_stats",
                                           "extract_sources", "export", "stats", "remedy",
                                           "server_args", "argdump", "releases", "installed",
                                           "area_remedies", "client_remedies", "message_advice",
                                           "message_fix",
                                           "quant_remedies",
                                           # what a message says to install, which `check`
                                           # reads for the family record's examples
                                           "stated_install", "answer")}
LAYERS = [("foundation", FOUNDATION), ("catalog data", CATALOG_DATA), ("engine", ENGINE),
          ("catalog tools", CATALOG_TOOLS)]  # anything else: application, on top


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


APPLICATION, COMMANDS = len(LAYERS), len(LAYERS) + 1


def is_command(module: str) -> bool:
    return module in ("matcher.cli", "matcher.__main__", "matcher.commands") \
        or module.startswith("matcher.commands.")


def layer(module: str) -> int:
    for rank, (_, members) in enumerate(LAYERS):
        if module in members:
            return rank
    return COMMANDS if is_command(module) else APPLICATION


def layer_name(rank: int) -> str:
    return LAYERS[rank][0] if rank < len(LAYERS) else ("application", "commands")[rank - APPLICATION]


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of each `matcher` import in the file, outside `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "matcher":
            for alias in node.names:  # `from matcher.catalog import extract` imports a module
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if sub in MODULES else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names
                      if a.name.split(".")[0] == "matcher"]
    return found


def wrong_way() -> list[str]:
    out = []
    for module, path in sorted(MODULES.items()):
        for line, target in imports(path):
            if layer(target) > layer(module):
                out.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} "
                           f"({layer_name(layer(module))}) imports {target} "
                           f"({layer_name(layer(target))})")
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's `matcher` imports among `modules` (function-level ones included)."""
    return {m: {t for _, t in imports(p) if t in modules and t != m} for m, p in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round in a circle (each sorted): the
    strongly connected components of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return sorted(found)


def test_imports_only_go_down_the_layers() -> None:
    assert wrong_way() == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Function-level imports included: a lazy import that closes a circle is one too."""
    assert cycles(import_graph(MODULES)) == []


def test_a_circle_of_imports_is_found(tmp_path: Path) -> None:
    """Two modules of one layer, one importing the other inside a function, are a circle; a
    `TYPE_CHECKING` import back is not."""
    (tmp_path / "a.py").write_text("from matcher.b import x\n")
    (tmp_path / "b.py").write_text("def x():\n    from matcher.a import y\n")
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from matcher.a import y\nfrom matcher.b import x\n")
    graph = import_graph({f"matcher.{n}": tmp_path / f"{n}.py" for n in "abc"})
    assert graph == {"matcher.a": {"matcher.b"}, "matcher.b": {"matcher.a"},
                     "matcher.c": {"matcher.b"}}
    assert cycles(graph) == [["matcher.a", "matcher.b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_layers_name_real_modules() -> None:
    named = set().union(*(members for _, members in LAYERS))
    assert named - set(MODULES) == set()


def test_a_wrong_way_import_is_found(tmp_path: Path) -> None:
    """The check sees lazy imports inside functions, and ignores TYPE_CHECKING ones."""
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from matcher.cli import main\n"
                     "def f():\n    from matcher.catalog import extract\n"
                     "    import matcher.engine\n")
    assert imports(probe) == [(5, "matcher.catalog.extract"), (6, "matcher.engine")]
    assert layer("matcher.catalog.extract") > layer("matcher.catalog.load")
    assert layer("matcher.engine") > layer("matcher.catalog.schema")
    assert layer("matcher.cli") > layer("matcher.catalog.extract")


def test_nothing_below_the_commands_imports_them(tmp_path: Path) -> None:
    """`matcher.commands` sits on top: the commands import the application, never the other
    way (a module of the application importing a command is found)."""
    assert layer("matcher.commands.watch") == layer("matcher.cli") == COMMANDS
    assert layer("matcher.commands.catalog.extract") == COMMANDS
    assert layer("matcher.daemon") == layer("matcher.config") == APPLICATION
    commands = [m for m in MODULES if is_command(m)]
    assert "matcher.commands.scan" in commands and "matcher.commands.catalog" in commands
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from matcher.commands.watch import watch_flags\n")
    [(_, target)] = imports(probe)
    assert layer(target) > layer("matcher.reference")
