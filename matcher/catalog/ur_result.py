"""Intel GPU (XPU) status codes: one record per `UR_RESULT_ERROR_*` of oneAPI's Unified Runtime,
read from the `intel-sycl-rt` wheels on PyPI.

torch's XPU backend (and IPEX) runs on SYCL, whose Unified Runtime returns `ur_result_t`; a
failure reaches Python as `RuntimeError: level_zero backend failed with error: 20
(UR_RESULT_ERROR_DEVICE_LOST)` or `Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)`. The
wheel ships `include/unified-runtime/ur_api.h`, whose `ur_result_t` enum numbers each status
and documents it (`/// …` above each name); a record matches the name. What to do comes from
`REMEDIES` (the device lost, its memory or resources exhausted, no device found); the others
keep the header's sentence and no solutions.

    python -m matcher.catalog.ur_result --build   # read the wheels, write xpu.vocab.tsv
    python -m matcher.catalog.ur_result           # write xpu.jsonl from it
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import status_table

GENERATOR = "matcher.catalog.ur_result"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
VOCAB = GENERATED / "xpu.vocab.tsv"
OUTPUT = GENERATED / "xpu.jsonl"
COLUMNS = ("version", "code", "name", "text")
# The first releases whose wheel ships the header, and the newest when this was written (the
# status numbers are the Unified Runtime's ABI: older runtimes print the same).
VERSIONS = ("2026.0.0", "2026.2.0")
HEADER = "include/unified-runtime/ur_api.h"

_ENUM = re.compile(r"typedef enum ur_result_t \{(.*?)\}", re.DOTALL)
_ITEM = re.compile(r"((?:^[ \t]*///.*\n)*)[ \t]*(UR_RESULT_\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)",
                   re.MULTILINE)
NO_FAILURE = re.compile(r"^UR_RESULT_(?:SUCCESS|FORCE_UINT32)$")


def vocabulary(header: str) -> list[tuple[int, str, str]]:
    """(code, name, text) of each `ur_result_t` value the header declares."""
    body = _ENUM.search(header)
    if body is None:
        return []
    out = []
    for m in _ITEM.finditer(body[1]):
        text = " ".join(line.strip().removeprefix("///").strip() for line in m[1].splitlines())
        out.append((int(m[3], 0), m[2], " ".join(text.split())))
    return out


def _wheel(version: str) -> str:
    from matcher.catalog import soname_sources as S

    for f in S.files_of("intel-sycl-rt"):
        fn = f["filename"]
        if fn.endswith(".whl") and S.version_of(fn) == version and "manylinux" in fn \
                and "x86_64" in fn:
            return str(f["url"])
    raise SystemExit(f"no Linux wheel of intel-sycl-rt=={version}")


def build() -> list[tuple[str, str, str, str]]:
    from matcher.catalog import soname_sources as S

    rows = []
    for version in VERSIONS:
        with zipfile.ZipFile(S.RangeFile(_wheel(version))) as z:
            path = next(n for n in z.namelist() if n.endswith(HEADER))
            header = z.read(path).decode("utf-8")
        rows += [(version, str(code), name, text) for code, name, text in vocabulary(header)]
    return rows


_LOST = (
    ("The GPU stopped responding (a hang, a page fault in a kernel, or memory exhausted on "
     "integrated GPUs): check the kernel log (sudo dmesg | grep -i -e i915 -e xe) and "
     "xpu-smi, and restart the process; the device is unusable in it afterwards"),
    ("Update the Intel GPU driver (compute-runtime / Level Zero) and use the torch XPU build "
     "made for it; lower memory use (--mem-fraction-static, --max-running-requests) when the "
     "loss comes under memory pressure"),
)
_MEMORY = (
    ("Free GPU memory: lower --mem-fraction-static, --max-running-requests or "
     "--chunked-prefill-size, or spread the model over more GPUs (--tp-size), and stop other "
     "processes that use the GPU"),
)
_NO_DEVICE = (
    ("Make the Intel GPU visible: sycl-ls must list a level_zero:gpu device; in a container, "
     "pass --device=/dev/dri and add the user to the render group; check ONEAPI_DEVICE_SELECTOR "
     "and ZE_AFFINITY_MASK do not hide it"),
)
REMEDIES: dict[str, tuple[str, ...]] = {
    "UR_RESULT_ERROR_DEVICE_LOST": _LOST, "UR_RESULT_ERROR_DEVICE_REQUIRES_RESET": _LOST,
    "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY": _MEMORY, "UR_RESULT_ERROR_OUT_OF_RESOURCES": _MEMORY,
    "UR_RESULT_ERROR_MEM_OBJECT_ALLOCATION_FAILURE": _MEMORY,
    "UR_RESULT_ERROR_DEVICE_NOT_FOUND": _NO_DEVICE, "UR_RESULT_ERROR_DEVICE_NOT_AVAILABLE": _NO_DEVICE,
}


def records(rows: Sequence[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    by_name: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in rows:
        by_name.setdefault(row[2], []).append(row)
    out = []
    for name, group in sorted(by_name.items(), key=lambda kv: int(kv[1][-1][1])):
        if NO_FAILURE.match(name):
            continue
        _, code, _, text = group[-1]
        solutions = list(REMEDIES.get(name, ()))
        out.append({
            "id": hashlib.sha256(f"sglang-matcher/ur_result/{name}".encode()).hexdigest()[:16],
            "slug": "xpu-" + name.lower().removeprefix("ur_result_").replace("_", "-"),
            "errorMessage": name, "messagePattern": rf"\b{name}\b",
            "errorClass": None, "errorType": "native",
            "severity": "critical" if solutions else "error",
            "documentation": f"On an Intel GPU (XPU), oneAPI's Unified Runtime returned {name} "
                             f"({code}): “{text}”. torch raises it as `level_zero backend failed "
                             f"with error: {code} ({name})`.",
            "solutions": solutions, "tags": ["native", "xpu", "intel-gpu"],
            "sourcePackage": "intel-sycl-rt",
            "sourceVersions": sorted({r[0] for r in group}), "generator": GENERATOR,
            "examples": {"match": [name]}})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return status_table.main(argv, prog="python -m matcher.catalog.ur_result", doc=__doc__,
                             vocab=VOCAB, columns=COLUMNS, output=OUTPUT, build=build,
                             records=lambda rows: records([(r[0], r[1], r[2], r[3]) for r in rows]))


if __name__ == "__main__":
    raise SystemExit(main())
