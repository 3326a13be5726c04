"""Writes `model-types.tsv` (read by `matcher.catalog.model_types`): which transformers release
first knows each model type, and which model types sglang registers itself.

    python -m matcher.catalog.model_types_table --sglang-wheel W [--transformers-dir D]

transformers: every release from 4.26 on is fetched with `pip download --no-deps` (or read from
`D/<version>.py`, copies of `transformers/models/auto/configuration_auto.py` with 5.6+'s
`auto_mappings.py` appended), and the keys of its `CONFIG_MAPPING_NAMES` read with `ast`. A type is written with the first release that has
it when the newest release still has it and `model_types.SINCE` did not.

sglang: the newest wheel's `_CONFIG_REGISTRY` (`srt/utils/hf_transformers/common.py`, or
`srt/utils/hf_transformers_utils.py` in older layouts): the classes it lists and the string
keys it assigns, each class's `model_type` read from `srt/configs/`, and the first release that
ships the class from sglang's symbol index.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from matcher.catalog.model_types import FILE, SINCE
from matcher.catalog.pep440 import version_key

CONFIG_AUTO = "transformers/models/auto/configuration_auto.py"
AUTO_MAPPINGS = "transformers/models/auto/auto_mappings.py"  # where 5.6+ define the mapping
REGISTRY_FILES = ("sglang/srt/utils/hf_transformers/common.py",
                  "sglang/srt/utils/hf_transformers_utils.py")
FIRST = "4.26.0"


def mapping_names(source: str) -> set[str]:
    """The keys of `CONFIG_MAPPING_NAMES` in configuration_auto.py (and, from 5.6 on, the
    auto_mappings.py that defines it, appended): its assignments' `(type, class)` pairs and
    dict keys, and the dicts of its `.update(...)` calls."""
    keys: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.AnnAssign) and "CONFIG_MAPPING_NAMES" in _names(node):
            keys |= _keys(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "update" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "CONFIG_MAPPING_NAMES":
            for arg in node.args:
                keys |= _keys(arg)
    return keys


def _keys(value: ast.expr | None) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(value) if value is not None else ():
        if isinstance(n, ast.Tuple) and len(n.elts) == 2 and isinstance(n.elts[0], ast.Constant) \
                and isinstance(n.elts[0].value, str):
            out.add(n.elts[0].value)
        elif isinstance(n, ast.Dict):
            out |= {k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return out


def first_releases(per_release: Mapping[str, set[str]]) -> dict[str, str]:
    """Model type → the first release that has it, for the types the newest release has and
    `SINCE` (or the oldest release read, if later) did not."""
    order = sorted(per_release, key=version_key)
    newest = per_release[order[-1]]
    old = next((per_release[v] for v in order if version_key(v) >= version_key(SINCE)), set())
    out: dict[str, str] = {}
    for v in order:
        for t in per_release[v]:
            out.setdefault(t, v)
    return {t: v for t, v in out.items() if t in newest and t not in old}


def registry(files: Mapping[str, str]) -> dict[str, str]:
    """sglang's registry: model type → config class, from the registry module and the
    `model_type = "…"` of the classes defined under srt/configs/."""
    text = next((files[p] for p in REGISTRY_FILES if p in files), "")
    classes: dict[str, str] = {}
    for path, source in files.items():
        if path.startswith("sglang/srt/configs/"):
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.ClassDef):
                    mt = _model_type(node)
                    if mt:
                        classes.setdefault(node.name, mt)
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.AnnAssign | ast.Assign) and _names(node) == {"_CONFIG_REGISTRY"} \
                and node.value is not None:
            for n in ast.walk(node.value):
                if isinstance(n, ast.Name) and n.id in classes:
                    out.setdefault(classes[n.id], n.id)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            sub = node.targets[0]
            if isinstance(sub.value, ast.Name) and sub.value.id == "_CONFIG_REGISTRY" \
                    and isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str) \
                    and isinstance(node.value, ast.Name):
                out.setdefault(sub.slice.value, node.value.id)
    return out


def _names(node: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _model_type(node: ast.ClassDef) -> str | None:
    for st in node.body:
        if isinstance(st, ast.Assign | ast.AnnAssign) and _names(st) == {"model_type"} \
                and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            return st.value.value
    return None


def first_sglang(cls: str) -> str | None:
    """The first sglang release with a module of `sglang.srt` that defines (or imports) `cls`,
    from the shipped symbol index."""
    from matcher.catalog.mismatch import index_for

    index = index_for("sglang")
    if index is None:
        return None
    mask = 0
    for line in index._lines("N sglang.srt."):
        parts = line.split(" ")
        if cls in parts[3:]:
            mask |= int(parts[2], 16)
    versions = index.versions_of(mask)
    return versions[0] if versions else None


def render(transformers: Mapping[str, str], sglang: Mapping[str, tuple[str, str]]) -> str:
    lines = [("# model_type → T: the first transformers release whose AutoConfig knows it; "
             "S: the first sglang release shipping the configuration class it registers "
             "itself; python -m matcher.catalog.model_types_table")]
    lines += [f"T\t{t}\t{v}" for t, v in sorted(transformers.items())]
    lines += [f"S\t{t}\t{r}\t{c}" for t, (r, c) in sorted(sglang.items())]
    return "\n".join(lines) + "\n"


def _versions() -> list[str]:
    run = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "transformers"],
                         capture_output=True, text=True, timeout=300, check=True)
    line = next(x for x in run.stdout.splitlines() if x.startswith("Available versions:"))
    found = [v.strip() for v in line.split(":", 1)[1].split(",")]
    return [v for v in found if v.replace(".", "").isdigit()
            and version_key(v) >= version_key(FIRST)]


def _config_auto(version: str, cache: Path | None) -> str | None:
    if cache is not None and (cache / f"{version}.py").is_file():
        return (cache / f"{version}.py").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        f"transformers=={version}", "-d", tmp], timeout=600, check=False)
        wheels = list(Path(tmp).glob("transformers-*.whl"))
        if not wheels:
            return None
        with zipfile.ZipFile(wheels[0]) as z:
            names = set(z.namelist())
            return "\n".join(z.read(n).decode("utf-8") for n in (CONFIG_AUTO, AUTO_MAPPINGS)
                             if n in names)


def _wheel_files(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n).decode("utf-8") for n in z.namelist()
                if n.endswith(".py") and (n in REGISTRY_FILES or n.startswith("sglang/srt/configs/"))}


def build(versions: Iterable[str], cache: Path | None, sglang_wheel: Path) -> str:
    per_release = {}
    for v in versions:
        text = _config_auto(v, cache)
        if text is not None:
            per_release[v] = mapping_names(text)
    transformers = first_releases(per_release)
    sglang = {}
    for t, cls in registry(_wheel_files(sglang_wheel)).items():
        first = first_sglang(cls) if t == t.lower() and "-" not in t else None
        if first is not None:
            sglang[t] = (first, cls)
    return render(transformers, sglang)


def main(argv: Sequence[str] | None = None) -> int:
    from matcher.catalog import builtin_patterns_dir

    p = argparse.ArgumentParser(prog="python -m matcher.catalog.model_types_table",
                                description="write model-types.tsv")
    p.add_argument("--sglang-wheel", type=Path, required=True, help="the newest sglang wheel")
    p.add_argument("--transformers-dir", type=Path, help="<version>.py copies of "
                   "configuration_auto.py already fetched (the rest are downloaded)")
    p.add_argument("--out", type=Path, default=builtin_patterns_dir().joinpath(*FILE))
    args = p.parse_args(argv)
    args.out.write_text(build(_versions(), args.transformers_dir, args.sglang_wheel),
                        encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
