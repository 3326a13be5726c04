"""Version checks that dependencies write: the messages a package prints or raises when another
package is at a version it does not work with, read from the package's own source.

A check site is a `print(…)`, `raise X(…)` or `warnings.warn(…)` whose message (a string, an
f-string, or `+`-joined pieces of both) has at least one hole and says what is required
(`version`, `required`, `needs to work with`): Intel Extension for PyTorch's
`… needs to work with PyTorch {ipex_version}.*, but PyTorch {torch.__version__} is found.`,
transformers' `require_version` (`{requirement} is required for a normal functioning of this
module, but found {pkg}=={got_ver}.{hint}`), torchvision's CUDA major check. `SOURCES` names the
files read; each at the releases given (PyPI wheels, read with HTTP range requests).

Rows go to `patterns/sglang/generated/version-checks.tsv` (distribution, versions read that hold
the template, the class raised or `print`, the template), committed: `matcher.catalog.abi` makes
the records from it, and computes each event's fix from its message.

    python -m matcher.catalog.version_checks     # reads PyPI, writes the table
"""

from __future__ import annotations

import argparse
import ast
import re
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
TABLE = GENERATED / "version-checks.tsv"
COLUMNS = ("distribution", "versions", "class", "template")

# distribution → (the file holding its checks, the releases read).
SOURCES: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "intel-extension-for-pytorch": ("intel_extension_for_pytorch/__init__.py",
                                    ("2.5.0", "2.6.0", "2.7.0", "2.8.0")),
    "transformers": ("transformers/utils/versions.py", ("4.46.3", "4.51.1", "4.57.1", "5.25.0")),
    "torchvision": ("torchvision/extension.py", ("0.20.1", "0.22.1", "0.24.1", "0.28.0")),
}
_SAYS_REQUIRED = re.compile(r"version|required|requires|needs to work with", re.IGNORECASE)
MIN_LITERAL = 20


def _text(node: ast.expr) -> str | None:
    """A message expression as a template: literal text, `{expression}` for each hole."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value.replace("{", "{{").replace("}", "}}"))
            elif isinstance(v, ast.FormattedValue):
                parts.append("{" + ast.unparse(v.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


def _called(call: ast.Call) -> str | None:
    """`print`, `warn`, or the class a `raise X(…)` makes (set by the caller)."""
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return name if name in ("print", "warn") else None


def _raised(func: ast.expr) -> str | None:
    """The class a `raise X(…)` or `raise mod.X(…)` makes (transformers raises
    `importlib.metadata.PackageNotFoundError(…)` when a required distribution is absent)."""
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def templates(source: str) -> Iterator[tuple[str, str]]:
    """(class or `print`, template) of each check site of a module's source."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        call: ast.Call | None = None
        kind: str | None = None
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            call = node.exc
            kind = _raised(call.func)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            kind = _called(call)
        if call is None or kind is None or not call.args:
            continue
        text = _text(call.args[0])
        if text is None or "{" not in text.replace("{{", "") or not _SAYS_REQUIRED.search(text):
            continue
        literal = re.sub(r"\{[^{}]*\}", "", text)
        if len(literal) >= MIN_LITERAL:
            yield kind, text


def read_member(distribution: str, version: str, path: str) -> str | None:
    from matcher.catalog import soname_sources as S

    url = S.wheel_url(distribution, version)
    if url is None:
        return None
    with zipfile.ZipFile(S.RangeFile(url)) as z:
        try:
            return z.read(path).decode("utf-8")
        except KeyError:
            return None


def build(sources: Mapping[str, tuple[str, Sequence[str]]] = SOURCES) -> list[tuple[str, ...]]:
    rows: dict[tuple[str, str, str], list[str]] = {}
    for dist, (path, versions) in sources.items():
        for v in versions:
            text = read_member(dist, v, path)
            for kind, template in templates(text) if text else ():
                rows.setdefault((dist, kind, template), []).append(v)
    return sorted((d, ",".join(vs), k, t) for (d, k, t), vs in rows.items())


def read_table(path: Path = TABLE) -> list[tuple[str, list[str], str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        dist, versions, kind, template = line.split("\t")
        out.append((dist, versions.split(","), kind, template.replace("\\n", "\n")))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.version_checks",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", type=Path, default=TABLE)
    args = ap.parse_args(argv)
    rows = build()
    lines = ["\t".join(COLUMNS), *("\t".join(r).replace("\n", "\\n") for r in rows)]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(rows)} check sites", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
