"""The edge: where sglang's source comes from (a source tree, a wheel, the installed package),
which of its files are the server's, and a file's module name and physical lines."""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

_EXCLUDED_DIRS = frozenset({"test", "tests", "benchmark", "benchmarks"})


def excluded(path: str) -> bool:
    """sglang's tests, benchmarks and tooling dot-directories are not the server."""
    p = PurePosixPath(path)
    name = p.name
    return (
        any(part in _EXCLUDED_DIRS or part.startswith(".") for part in p.parts[:-1])
        or name.startswith(("test_", "bench_")) or name.endswith("_test.py")
        or name == "conftest.py"
    )


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
