"""The module index of `docs/architecture.md` and `matcher/` name the
same modules.

A newcomer reads `matcher/` top-down with that table beside them: a module missing from it,
or a row naming a module that is gone, sends them looking for what isn't there.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _table_names() -> set[str]:
    section = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    names: set[str] = set()
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        first, rest = row[2:].split("|", 1)
        packages = re.findall(r"`([\w/]+/)`", first)
        for name in re.findall(r"`([\w/]+\.py)`", first):
            names.add(name)
        for package in packages:  # `source/` rows list their modules by bare name
            for name in re.findall(r"`(\w+\.py)`", rest):
                names.add(package + name)
            names.add(package)
    return names


def _modules() -> set[str]:
    root = REPO / "matcher"
    out: set[str] = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if path.name in ("__init__.py", "__main__.py") or rel.startswith("_patterns"):
            continue
        if rel.startswith("catalog/"):
            continue  # the catalog package has a row of its own and its own README
        out.add(rel)
    return out


def test_every_module_has_a_row_and_every_row_a_module():
    table = _table_names()
    modules = _modules()
    missing = sorted(m for m in modules if m not in table)
    assert not missing, f"modules without a row in docs/architecture.md's table: {missing}"
    named = {n for n in table if n.endswith(".py") and not n.startswith("catalog/")}
    gone = sorted(n for n in named if not (REPO / "matcher" / n).exists())
    assert not gone, f"docs/architecture.md rows naming modules that do not exist: {gone}"
    assert "catalog/" in table
