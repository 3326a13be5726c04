"""The CUDA driver API's status codes (`CUresult`): one record per `CUDA_ERROR_*`, read from
NVIDIA's `cuda-bindings` wheels on PyPI.

`cuda/bindings/cydriver.pxd` numbers each `cudaError_enum` value and `cuda/bindings/driver.pyx`
documents it (`#: This indicates …` above each name). Native code that calls the driver directly
prints the name (`CUDA_ERROR_OUT_OF_MEMORY`) or the number (torch_memory_saver's `CUresult
error  result=2 file=… func=… line=…`); a record matches either. What to do is the runtime
status's of the same name (`CUDA_ERROR_ILLEGAL_ADDRESS` ↔ `cudaErrorIllegalAddress`, compared
without case and underscores) from `native_remedies.CUDA`; a status with none keeps empty
`solutions`. Statuses that are no failure (`CUDA_SUCCESS`, `CUDA_ERROR_NOT_READY`, the
profiler's and `…_ALREADY_…`) are left out.

    python -m matcher.catalog.cu_result --build   # read the wheels, write cuda-driver.vocab.tsv
    python -m matcher.catalog.cu_result           # write cuda-driver.jsonl from it
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import status_table

GENERATOR = "matcher.catalog.cu_result"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
VOCAB = GENERATED / "cuda-driver.vocab.tsv"
OUTPUT = GENERATED / "cuda-driver.jsonl"
COLUMNS = ("version", "code", "name", "text")
VERSIONS = ("12.9.4", "13.0.3")

_VALUE = re.compile(r"^\s*(CUDA_(?:SUCCESS|ERROR_\w+))\s*=\s*(\d+)\s*$", re.MULTILINE)
_DOC = re.compile(r"((?:^[ \t]*#:.*\n)+)[ \t]*(CUDA_ERROR_\w+)\s*=", re.MULTILINE)
NO_FAILURE = re.compile(r"^CUDA_(?:SUCCESS|ERROR_NOT_READY|ERROR_PROFILER_\w+|ERROR_\w*ALREADY_\w+)$")


def vocabulary(pxd: str, pyx: str) -> list[tuple[int, str, str]]:
    """(code, name, the first sentence of its documentation) of each status."""
    docs = {}
    for m in _DOC.finditer(pyx):
        text = " ".join(line.strip().removeprefix("#:").strip() for line in m[1].splitlines())
        text = re.sub(r":py:obj:`~?\.?([^`]*)`", r"\1", text)
        docs[m[2]] = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    return sorted({(int(code), name, docs.get(name, "")) for name, code in _VALUE.findall(pxd)})


def build() -> list[tuple[str, str, str, str]]:
    from matcher.catalog import soname_sources as S

    rows = []
    for version in VERSIONS:
        url = S.wheel_url("cuda-bindings", version)
        if url is None:
            raise SystemExit(f"no wheel of cuda-bindings=={version}")
        with zipfile.ZipFile(S.RangeFile(url)) as z:
            pxd = z.read("cuda/bindings/cydriver.pxd").decode("utf-8")
            pyx = z.read("cuda/bindings/driver.pyx").decode("utf-8")
        rows += [(version, str(code), name, text) for code, name, text in vocabulary(pxd, pyx)]
    return rows


# Driver statuses whose runtime counterpart is named otherwise.
RUNTIME_NAME = {"OUT_OF_MEMORY": "cudaErrorMemoryAllocation",
                "NOT_INITIALIZED": "cudaErrorInitializationError",
                "LAUNCH_FAILED": "cudaErrorLaunchFailure"}


def _key(name: str) -> str:
    return name.lower().replace("_", "").removeprefix("cudaerror").removeprefix("cuda")


def records(rows: Sequence[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    from matcher.catalog import native_remedies as R

    runtime = {_key(n): r for n, r in R.CUDA.items()}
    by_name: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in rows:
        by_name.setdefault(row[2], []).append(row)
    out = []
    for name, group in sorted(by_name.items(), key=lambda kv: int(kv[1][0][1])):
        if NO_FAILURE.match(name):
            continue
        code = group[-1][1]
        text = group[-1][3]
        short = name.removeprefix("CUDA_ERROR_")
        remedy = runtime.get(_key(RUNTIME_NAME.get(short, short)))
        doc = f"The CUDA driver API returned {name} ({code}): {text}"
        rec: dict[str, Any] = {
            "id": hashlib.sha256(f"sglang-matcher/cu_result/{name}".encode()).hexdigest()[:16],
            "slug": "cuda-driver-" + name.lower().removeprefix("cuda_error_").replace("_", "-"),
            "errorMessage": name,
            "messagePattern": rf"(?:\b{name}\b|CUresult error\s+result={code}\b)",
            "errorClass": None, "errorType": "native",
            "severity": remedy.severity if remedy else "error",
            "documentation": doc + (" " + remedy.documentation if remedy else ""),
            "solutions": list(remedy.solutions) if remedy else [],
            "tags": ["native", "cuda-driver"],
            "sourcePackage": "cuda-driver (cuda-bindings)",
            "sourceVersions": sorted({r[0] for r in group}), "generator": GENERATOR,
            "examples": {"match": [name]},
        }
        if remedy is not None and remedy.fix_actions:
            rec["fixActions"] = [list(way) for way in remedy.fix_actions]
        out.append(rec)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return status_table.main(argv, prog="python -m matcher.catalog.cu_result", doc=__doc__,
                             vocab=VOCAB, columns=COLUMNS, output=OUTPUT, build=build,
                             records=lambda rows: records([(r[0], r[1], r[2], r[3]) for r in rows]))


if __name__ == "__main__":
    raise SystemExit(main())
