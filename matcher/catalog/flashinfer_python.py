"""flashinfer's Python raise sites over the releases `matcher.catalog.flashinfer` reads.

The same sites `matcher.catalog.deps` reads for its other dependencies (`deps.extract_package`:
raise, assert and error-log templates, Python's generic messages left out), in the modules
sglang calls (`deps.FLASHINFER_SCOPE`: attention, sampling, norm, rope, quantization, its JIT and
compilation context, allreduce), for every release in `flashinfer.VERSIONS` instead of the newest
pin alone: a message a release reworded is a record per wording, each with the releases that
print it. Each record is attributed as `deps.attributed` does, with `flashinfer_remedies`' way
out for the module's area.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from matcher.catalog import deps
from matcher.catalog import flashinfer_remedies as remedies
from matcher.catalog.releases import merge_releases
from matcher.catalog.versions import sort_versions

PACKAGE = "flashinfer-python"


def python_path(path: str) -> str | None:
    """`flashinfer/x.py` inside an sdist (`flashinfer_python-V/flashinfer/x.py`) or a wheel."""
    parts = path.split("/")
    for k in range(len(parts)):
        if parts[k] == "flashinfer" and path.endswith(".py"):
            rest = "/".join(parts[k:])
            return rest if deps.FLASHINFER_SCOPE(rest) else None
    return None


def release_records(files: Iterable[tuple[str, str]], version: str) -> list[dict[str, Any]]:
    return deps.extract_package(((p, t.encode()) for p, t in files), deps.FLASHINFER_SCOPE,
                                version)


def remediated(record: dict[str, Any]) -> dict[str, Any]:
    remedy = remedies.remedy_for(str(record.get("filePath", "")), record.get("errorMessage") or "")
    if remedy.solutions:
        record["solutions"] = list(remedy.solutions)
    if remedy.fix_actions:
        record["fixActions"] = [list(a) for a in remedy.fix_actions]
    record["documentation"] = f"{record.get('documentation', '')} {remedy.documentation}".strip()
    record["tags"] = [*record.get("tags", []), remedy.area]
    return record


def records(per_version: Mapping[str, list[dict[str, Any]]],
            generator: str) -> list[dict[str, Any]]:
    read: Sequence[str] = sort_versions(per_version)
    out = []
    for r in merge_releases(per_version):
        a = deps.attributed(r, PACKAGE, read, {})
        a["generator"] = generator
        out.append(remediated(a))
    return out
