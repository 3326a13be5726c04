"""What the install and build tools print, read from the tools: `buildjit.facts.tsv`.

    python -m matcher.catalog.buildjit_facts --pip DIR … --uv BIN … --torch WHEEL … \
        --nvcc BIN --gcc BIN --cmake BIN --skbuild WHEEL --pypi [-o patterns/sglang/generated/buildjit.facts.tsv]

- `--pip DIR`: an installed `pip` package directory; each literal of `buildjit.INSTALLER`
  whose tool is pip is looked for in its `_internal/**/*.py` (the raise and log sites).
- `--uv BIN`: a uv binary (`BIN --version` tells its version); its literals are looked for in
  the binary's bytes (uv is Rust: the strings are in it).
- `--torch WHEEL`: a torch wheel; `torch/utils/cpp_extension.py` is read with
  `extract.extract_module` (its raise sites: `CUDA_HOME environment variable is not set…`)
  plus the module constants it raises as tuples (`CUDA_MISMATCH_MESSAGE`), and the literals
  of `torch/_dynamo/exc.py` are looked for.
- `--nvcc BIN`, `--gcc BIN`: each is run on a source that fails (two undefined names; a
  missing header) and every compiler record whose pattern matches a line of its output is
  recorded as printed by that version.
- `--cmake BIN`: configures a CUDA project for sm_50, which CUDA 13's nvcc rejects; the cmake
  records its output matches. `--skbuild WHEEL`: a scikit-build-core wheel's Python source.
- `--setuptools PYTHON`: `setup.py build_ext` of an extension with a missing header;
  `--cargo BIN`: `cargo build` of a crate with an undefined name and of one whose
  rust-version no rustc has. `--update` keeps the output's rows of the tool versions not
  read again.
- `--pypi`: PyPI's JSON API for sglang's own packages (`PACKAGES`): the newest release's
  Requires-Python and wheel tags.

Rows (tab-separated): `literal TOOL VERSION KEY`, `torch-site VERSION CLASS TEMPLATE` (the template as a JSON string),
`wheels PACKAGE VERSION REQUIRES_PYTHON TAG,TAG…`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from matcher.catalog import extract
from matcher.catalog.buildjit import (
    BUILD_SYSTEMS,
    COMPILER,
    FACTS,
    INSTALLER,
    TORCH_COMPILE,
    Message,
)

PACKAGES = ("sglang", "sgl-kernel", "sglang-kernel", "flashinfer-python", "sglang-router")
CPP_EXTENSION = "torch/utils/cpp_extension.py"
DYNAMO_EXC = "torch/_dynamo/exc.py"
INDUCTOR_EXC = "torch/_inductor/exc.py"
# Module constants cpp_extension raises with their values as further arguments: Python prints
# the tuple (`RuntimeError: ('The detected CUDA version (%s) mismatches …', '12.1', '11.8')`).
TUPLE_CONSTANTS = ("CUDA_MISMATCH_MESSAGE",)

Row = tuple[str, ...]


def pip_rows(pip_dir: Path) -> list[Row]:
    version = re.search(r'__version__ = "([^"]+)"',
                        (pip_dir / "__init__.py").read_text(encoding="utf-8"))
    if version is None:
        raise ValueError(f"{pip_dir}: no __version__")
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                     for p in sorted((pip_dir / "_internal").rglob("*.py")))
    return [("literal", "pip", version.group(1), m.key)
            for m in INSTALLER if m.tool == "pip" and _holds(text, m.literal)]


def _holds(source: str, literal: str) -> bool:
    """The literal is in the source, possibly split over adjacent string literals."""
    if literal in source:
        return True
    joined = re.sub(r"[\"']\s*\n\s*(?:\+\s*)?[\"f]*", "", source)
    return literal in joined


def uv_rows(uv: Path) -> list[Row]:
    out = subprocess.run([str(uv), "--version"], capture_output=True, text=True, check=True)
    version = out.stdout.split()[1]
    data = uv.read_bytes()
    return [("literal", "uv", version, m.key)
            for m in INSTALLER if m.tool == "uv" and m.literal.encode() in data]


def torch_rows(wheel: Path) -> list[Row]:
    version = wheel.name.split("-")[1].split("+")[0]
    with zipfile.ZipFile(wheel) as z:
        cpp = z.read(CPP_EXTENSION).decode("utf-8")
        exc = z.read(DYNAMO_EXC).decode("utf-8") + z.read(INDUCTOR_EXC).decode("utf-8")
    rows: list[Row] = []
    got = extract.extract_module(cpp, CPP_EXTENSION, version=version)
    for r in got.records:
        if r.get("errorMessage") and r.get("severity") == "error" and "raisedIn" not in r:
            rows.append(("torch-site", version, r["errorClass"] or "",
                         json.dumps(r["errorMessage"])))
    for name in TUPLE_CONSTANTS:
        value = _constant(cpp, name)
        if value is not None and f"raise RuntimeError({name}," in cpp:
            rows.append(("torch-site", version, "RuntimeError", json.dumps(value)))
    rows += [("literal", "torch", version, m.key) for m in TORCH_COMPILE if m.literal in exc]
    return rows


def _constant(source: str, name: str) -> str | None:
    """A module-level `NAME = ("…" "…")` string, its adjacent literals joined."""
    m = re.search(rf"^{name} = \(\n((?:\s+\"[^\n]*\"\n)+)\)", source, re.M)
    if m is None:
        return None
    return "".join(re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(1)))


# Per compiler, the sources that fail and the arguments each is compiled with.
_FAILING = {
    "nvcc": (("bad.cu", "__global__ void k(int* x) { x[0] = undefined_a; x[1] = undefined_b; }\n",
              ("-c", "bad.cu", "-o", "out.o")),),
    "gcc": (("bad.c", "#include <cuda_runtime_missing_here.h>\nint f(void) { return 0; }\n",
             ("-c", "bad.c", "-o", "out.o")),
            ("link.c", "extern int missing_fn(void);\nint main(void) { return missing_fn(); }\n",
             ("link.c", "-o", "link")),
            ("lib.c", "int main(void) { return 0; }\n",
             ("lib.c", "-o", "lib", "-lmissing_library_here"))),
}


def compiler_rows(tool: str, binary: Path) -> list[Row]:
    """Run the compiler on a source that fails; the records whose pattern its output matches."""
    version_out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                                 check=True).stdout
    found = re.search(r"release (\d+\.\d+)" if tool == "nvcc" else r"(\d+\.\d+\.\d+)",
                      version_out)
    if found is None:
        raise ValueError(f"{binary}: no version in --version")
    lines: list[str] = []
    for name, source, args in _FAILING[tool]:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / name).write_text(source, encoding="utf-8")
            run = subprocess.run([str(binary), *args], cwd=tmp, capture_output=True, text=True)
        lines += (run.stdout + run.stderr).splitlines()
    return [("literal", tool, found.group(1), m.key) for m in COMPILER
            if m.tool == tool and _prints(m, lines)]


def _prints(m: Message, lines: Iterable[str]) -> bool:
    """The compiler printed the message's literal (its pattern may ask more of the line, such
    as flashinfer's cache path, than this run's file gives)."""
    return any(m.literal in line for line in lines)


_CMAKE_PROJECT = ("cmake_minimum_required(VERSION 3.18)\nset(CMAKE_CUDA_ARCHITECTURES 50)\n"
                  "project(probe LANGUAGES CXX CUDA)\n")


def cmake_rows(cmake: Path) -> list[Row]:
    """Configure a project whose CUDA architecture (sm_50) the nvcc on PATH rejects (CUDA 13
    dropped it), as old kernel packages do; the cmake records its output matches."""
    version = subprocess.run([str(cmake), "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[2]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "CMakeLists.txt").write_text(_CMAKE_PROJECT, encoding="utf-8")
        run = subprocess.run([str(cmake), "-S", tmp, "-B", f"{tmp}/build"],
                             capture_output=True, text=True)
    lines = (run.stdout + run.stderr).splitlines()
    return [("literal", "cmake", version, m.key) for m in BUILD_SYSTEMS
            if m.tool == "cmake" and _prints(m, lines)]


def setuptools_rows(python: Path) -> list[Row]:
    """`setup.py build_ext` of an extension whose source includes a missing header, run with
    the interpreter given; the setuptools records its output matches."""
    version = subprocess.run([str(python), "-c", "import setuptools; print(setuptools.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    setup = ("from setuptools import setup, Extension\n"
             "setup(name='badext', version='0.1', ext_modules=[Extension('badext', ['bad.c'])])\n")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "setup.py").write_text(setup, encoding="utf-8")
        (Path(tmp) / "bad.c").write_text(_FAILING["gcc"][0][1], encoding="utf-8")
        run = subprocess.run([str(python), "setup.py", "build_ext"], cwd=tmp,
                             capture_output=True, text=True)
    lines = (run.stdout + run.stderr).splitlines()
    return [("literal", "setuptools", version, m.key) for m in BUILD_SYSTEMS
            if m.tool == "setuptools" and _prints(m, lines)]


_CRATES = (  # (Cargo.toml's [package] extra line, src/lib.rs): an undefined name; a rustc too old
    ("", "pub fn f() -> u32 { undefined_x }\n"),
    ('rust-version = "1.999"\n', "pub fn f() -> u32 { 1 }\n"),
)


def cargo_rows(cargo: Path) -> list[Row]:
    """`cargo build --offline` of crates that fail to compile; the cargo records it matches."""
    version = subprocess.run([str(cargo), "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[1]
    lines: list[str] = []
    for extra, lib in _CRATES:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "src").mkdir()
            (Path(tmp) / "Cargo.toml").write_text(
                f'[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n{extra}',
                encoding="utf-8")
            (Path(tmp) / "src" / "lib.rs").write_text(lib, encoding="utf-8")
            run = subprocess.run([str(cargo), "build", "--offline"], cwd=tmp,
                                 capture_output=True, text=True)
        lines += (run.stdout + run.stderr).splitlines()
    return [("literal", "cargo", version, m.key) for m in BUILD_SYSTEMS
            if m.tool == "cargo" and _prints(m, lines)]


def skbuild_rows(wheel: Path) -> list[Row]:
    """scikit-build-core's messages, looked for in its wheel's Python source."""
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as z:
        text = "\n".join(z.read(n).decode("utf-8", "replace") for n in z.namelist()
                         if n.endswith(".py"))
    return [("literal", "scikit-build-core", version, m.key) for m in BUILD_SYSTEMS
            if m.tool == "scikit-build-core" and m.literal in text]


def pypi_rows(packages: Sequence[str] = PACKAGES) -> list[Row]:
    rows: list[Row] = []
    for name in packages:
        with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60) as r:
            doc = json.load(r)
        tags = sorted({u["filename"][:-4].split("-", 2)[2] if u["packagetype"] == "bdist_wheel"
                       else "sdist" for u in doc["urls"]})
        rows.append(("wheels", name, doc["info"]["version"],
                     doc["info"].get("requires_python") or "", ",".join(tags)))
    return rows


def _tool_of(row: Row) -> tuple[str, str]:
    """The tool and version a row was read from (`pypi` has one version: its read)."""
    if row[0] == "literal":
        return row[1], row[2]
    if row[0] == "torch-site":
        return "torch", row[1]
    return "pypi", ""


def kept_rows(path: Path, read: set[tuple[str, str]]) -> list[Row]:
    """The rows of `path` whose tool and version are not among those read again."""
    if not path.exists():
        return []
    rows = [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if _tool_of(r) not in read]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.buildjit_facts",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pip", type=Path, action="append", default=[])
    ap.add_argument("--uv", type=Path, action="append", default=[])
    ap.add_argument("--torch", type=Path, action="append", default=[])
    ap.add_argument("--nvcc", type=Path, action="append", default=[])
    ap.add_argument("--gcc", type=Path, action="append", default=[])
    ap.add_argument("--cmake", type=Path, action="append", default=[])
    ap.add_argument("--skbuild", type=Path, action="append", default=[],
                    help="a scikit-build-core wheel")
    ap.add_argument("--setuptools", type=Path, action="append", default=[],
                    help="a Python whose setuptools builds a failing extension")
    ap.add_argument("--cargo", type=Path, action="append", default=[])
    ap.add_argument("--pypi", action="store_true")
    ap.add_argument("--update", action="store_true",
                    help="keep the output's rows of the tool versions not read in this run")
    ap.add_argument("-o", "--output", type=Path, default=FACTS)
    args = ap.parse_args(argv)
    rows: list[Row] = []
    for d in args.pip:
        rows += pip_rows(d)
    for b in args.uv:
        rows += uv_rows(b)
    for w in args.torch:
        rows += torch_rows(w)
    for b in args.nvcc:
        rows += compiler_rows("nvcc", b)
    for b in args.gcc:
        rows += compiler_rows("gcc", b)
    for b in args.cmake:
        rows += cmake_rows(b)
    for w in args.skbuild:
        rows += skbuild_rows(w)
    for b in args.setuptools:
        rows += setuptools_rows(b)
    for b in args.cargo:
        rows += cargo_rows(b)
    if args.pypi:
        rows += pypi_rows()
    if args.update:
        rows += kept_rows(args.output, {_tool_of(r) for r in rows})
    text = "".join("\t".join(r) + "\n" for r in sorted(set(rows)))
    args.output.write_text(text, encoding="utf-8")
    print(f"{args.output}: {len(set(rows))} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
