"""ROCm's management libraries' status codes: one record per `RSMI_STATUS_*` (rocm_smi) and
`AMDSMI_STATUS_*` (amd-smi), read from AMD's Python bindings on PyPI.

`pyrsmi` (`pyrsmi/rocml.py`) maps each `rsmi_status_t` and `amdsmi_status_t` to its text, and
`amdsmi` (`amdsmi/amdsmi_exception.py`) prints `AMDSMI_STATUS_X - text`; the names and texts are
the closed vocabulary that C++ callers print too (`rocm smi failed with RSMI_STATUS_INIT_ERROR:
An error occurred during initialization, …`, mori's topology probe). A record matches the
status name; what to do comes from `REMEDIES` (the statuses that say the GPU or its driver
cannot be reached); statuses that healthy tools print in passing (`NOT_SUPPORTED`, `NO_DATA` …)
are left out.

    python -m matcher.catalog.rocm_status --build   # read the wheels, write rocm.vocab.tsv
    python -m matcher.catalog.rocm_status           # write rocm.jsonl from it
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import status_table

GENERATOR = "matcher.catalog.rocm_status"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
VOCAB = GENERATED / "rocm.vocab.tsv"
OUTPUT = GENERATED / "rocm.jsonl"
COLUMNS = ("package", "version", "name", "text")
# (distribution, version, file): the newest releases on PyPI when this was written.
SOURCES = (("pyrsmi", "1.1.0", "pyrsmi/rocml.py"),
           ("amdsmi", "7.0.2", "amdsmi/amdsmi_exception.py"))

_PAIR = re.compile(r"\b(?:rsmi_status_t|amdsmi_status_t)\.(\w+)\s*:\s*'([^'\n]*)'")
# `RSMI_INITIALIZATION_ERROR = RSMI_STATUS_INIT_ERROR`: an older name of a status.
_ALIAS = re.compile(r"^\s*(\w+)\s*=\s*(\w+_STATUS_\w+)\s*$", re.MULTILINE)
_EXCEPTION = re.compile(r"amdsmi_wrapper\.(AMDSMI_STATUS_\w+)\s*:\s*\"\1 -\s+([^\"\n]*)\"")
# Statuses that are no failure, or that healthy tools print for a metric a GPU lacks.
PASSING = re.compile(r"_(?:SUCCESS|NOT_SUPPORTED|NOT_YET_IMPLEMENTED|NO_DATA|MORE_DATA|"
                     r"INSUFFICIENT_SIZE|UNEXPECTED_SIZE|RETRY|SETTING_UNAVAILABLE)$")


def vocabulary(source: str) -> list[tuple[str, str]]:
    """(name, text) of each status a binding's source spells out."""
    aliases: dict[str, str] = dict(_ALIAS.findall(source))
    found: dict[str, str] = {}
    for m in _PAIR.finditer(source):
        name = aliases.get(m.group(1), m.group(1))
        if "_STATUS_" in name:
            found.setdefault(name, m[2].strip())
    for m in _EXCEPTION.finditer(source):
        found.setdefault(m[1], m[2].strip())
    return sorted(found.items())


def build() -> list[tuple[str, str, str, str]]:
    from matcher.catalog import soname_sources as S

    rows = []
    for dist, version, path in SOURCES:
        url = S.wheel_url(dist, version)
        if url is None:
            raise SystemExit(f"no wheel of {dist}=={version}")
        with zipfile.ZipFile(S.RangeFile(url)) as z:
            text = z.read(path).decode("utf-8")
        rows += [(dist, version, name, said) for name, said in vocabulary(text)]
    return rows


_VISIBLE = (
    ("Check that the amdgpu kernel driver is loaded and the GPUs are visible: on the host, "
    "rocm-smi (or amd-smi list) and lsmod | grep amdgpu; in a container, start it with "
    "--device=/dev/kfd --device=/dev/dri --group-add video --group-add render (Kubernetes: "
    "request amd.com/gpu)"),
    ("The ROCm user-space libraries must be a release the installed amdgpu driver supports: "
    "compare the image's ROCm version (cat /opt/rocm/.info/version) with the host's driver"))
_PERMISSION = (
    ("Give the process access to the GPU devices: add the user to the video and render groups "
    "(usermod -aG video,render <user>), or start the container with --group-add video "
    "--group-add render"),)
REMEDIES: dict[str, tuple[str, ...]] = {
    "RSMI_STATUS_INIT_ERROR": _VISIBLE, "AMDSMI_STATUS_INIT_ERROR": _VISIBLE,
    "AMDSMI_STATUS_NOT_INIT": _VISIBLE, "AMDSMI_STATUS_DRIVER_NOT_LOADED": _VISIBLE,
    "AMDSMI_STATUS_NO_DRV": _VISIBLE,
    "AMDSMI_STATUS_FAIL_LOAD_MODULE": _VISIBLE, "AMDSMI_STATUS_DRM_ERROR": _VISIBLE,
    "AMDSMI_STATUS_NOT_FOUND": _VISIBLE, "RSMI_STATUS_FILE_ERROR": _VISIBLE,
    "AMDSMI_STATUS_FILE_ERROR": _VISIBLE, "AMDSMI_STATUS_DIRECTORY_NOT_FOUND": _VISIBLE,
    "RSMI_STATUS_PERMISSION": _PERMISSION, "AMDSMI_STATUS_NO_PERM": _PERMISSION,
    "AMDSMI_STATUS_BUSY": (("Another process holds the GPU: list them with rocm-smi --showpids "
                           "(or amd-smi process) and stop them, or choose other GPUs with "
                           "HIP_VISIBLE_DEVICES"),),
}


def records(rows: Sequence[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    by_name: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in rows:
        by_name.setdefault(row[2], []).append(row)
    out = []
    for name, group in sorted(by_name.items()):
        if PASSING.search(name):
            continue
        text = max((r[3] for r in group), key=len)
        library = "amd-smi" if name.startswith("AMDSMI") else "rocm_smi"
        solutions = list(REMEDIES.get(name, ()))
        out.append({
            "id": hashlib.sha256(f"sglang-matcher/rocm/{name}".encode()).hexdigest()[:16],
            "slug": "rocm-" + name.lower().replace("_", "-"),
            "errorMessage": name, "messagePattern": rf"\b{name}\b",
            "errorClass": None, "errorType": "native",
            "severity": "critical" if solutions else "error",
            "documentation": f"ROCm's {library} library returned {name}: “{text}”. GPU serving "
                             "on ROCm (sglang's topology probe, mori, aiter) queries it at start.",
            "solutions": solutions, "tags": ["native", "rocm", library],
            "sourcePackage": ", ".join(sorted({r[0] for r in group})),
            "sourceVersions": sorted({r[1] for r in group}), "generator": GENERATOR,
            "examples": {"match": [name]}})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return status_table.main(argv, prog="python -m matcher.catalog.rocm_status", doc=__doc__,
                             vocab=VOCAB, columns=COLUMNS, output=OUTPUT, build=build,
                             records=lambda rows: records([(r[0], r[1], r[2], r[3]) for r in rows]))


if __name__ == "__main__":
    raise SystemExit(main())
