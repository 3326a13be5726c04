r"""ROCm's HSA runtime (ROCr): one record per `hsa_status_t` and one per reason of its GPU memory
fault message, read from the runtime's own source at ROCm release tags.

Under torch, HIP and every ROCm kernel library sits ROCr, the runtime that owns the GPU's queues.
When a kernel faults, HIP's queue callback prints the status's text as ROCr's
`hsa_status_string` returns it (`src/core/runtime/hsa.cpp`), and ROCr itself prints the memory
fault (`src/core/runtime/runtime.cpp`) before the process aborts:

    :0:rocdevice.cpp :3586: 1183357978 us:  Callback: Queue 0x7f35e8100000 aborting with error :
        HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016
    Memory access fault by GPU node-1 (Agent handle: 0x559ee9967590) on address 0x7fe05f439000.
        Reason: Page not present or supervisor privilege.

Both are closed vocabularies: the `case HSA_…: *status_string = "…"` table, and the `reason +=
"…"` strings of the fault message. A status record matches the status name; a fault record the
message with its reason (`node` and `address` captured). What to do comes from `REMEDIES`: a
kernel that faulted (an invalid access, an illegal instruction, a trap such as a device-side
assert) is found and worked around as for the amdgpu kernel's page faults
(`native_remedies.AMDGPU_FAULT`); an ECC failure is the GPU's memory. Statuses that are no
failure (`HSA_STATUS_SUCCESS`, `HSA_STATUS_INFO_BREAK`, `HSA_STATUS_CU_MASK_REDUCED`) are left
out.

    python -m matcher.catalog.hsa_status --build --repo ROCR.git --tag rocm-6.0.0 …
                                                  # read the clone, write hsa.vocab.tsv
    python -m matcher.catalog.hsa_status          # write hsa.jsonl from it
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import native_remedies as NR
from matcher.catalog import status_table
from matcher.catalog.patterns import escape_literal

GENERATOR = "matcher.catalog.hsa_status"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
VOCAB = GENERATED / "hsa.vocab.tsv"
OUTPUT = GENERATED / "hsa.jsonl"
COLUMNS = ("kind", "version", "name", "text")
# The runtime's files, before and after ROCr moved under `runtime/hsa-runtime/`.
STATUS_FILES = ("src/core/runtime/hsa.cpp", "runtime/hsa-runtime/core/runtime/hsa.cpp")
FAULT_FILES = ("src/core/runtime/runtime.cpp", "runtime/hsa-runtime/core/runtime/runtime.cpp")

_STATUS = re.compile(r'case\s+(HSA(?:_EXT)?_STATUS_\w+)\s*:\s*\*status_string\s*=\s*'
                     r'((?:"(?:[^"\\]|\\.)*"\s*)+);')
_REASON = re.compile(r'reason\s*\+=\s*"([^"\\]*)"\s*;')
PASSING = frozenset({"HSA_STATUS_SUCCESS", "HSA_STATUS_INFO_BREAK", "HSA_STATUS_CU_MASK_REDUCED"})


def statuses(source: str) -> list[tuple[str, str]]:
    """(name, text after `NAME: `) of each status `hsa_status_string` spells out."""
    out = []
    for name, literals in _STATUS.findall(source):
        text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', literals))
        out.append((name, text.removeprefix(f"{name}:").strip()))
    return sorted(set(out))


def fault_reasons(source: str) -> list[str]:
    """The reasons the runtime's memory-fault message can give."""
    start = source.find("Memory access fault by GPU node-")
    body = source[max(0, source.rfind("std::string reason", 0, start)):start]
    return sorted(set(_REASON.findall(body)))


def _show(repo: Path, tag: str, paths: Sequence[str]) -> str:
    for path in paths:
        done = subprocess.run(["git", "--git-dir", str(repo), "show", f"{tag}:{path}"],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return done.stdout
    raise SystemExit(f"{repo}: none of {', '.join(paths)} at {tag}")


def build(repo: Path, tags: Sequence[str]) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    for tag in tags:
        version = tag.removeprefix("rocm-")
        rows += [("status", version, n, t) for n, t in statuses(_show(repo, tag, STATUS_FILES))]
        rows += [("fault", version, r, r) for r in fault_reasons(_show(repo, tag, FAULT_FILES))]
    return rows


_KERNEL_FAULT = NR.AMDGPU_FAULT.solutions
_ECC = (("The GPU reported an uncorrectable memory (ECC) error: read its error counts with "
         "`rocm-smi --showrasinfo`, reset the GPU or reboot the node, and if it recurs on the "
         "same GPU take it out of service and have it checked"),)
REMEDIES: dict[str, tuple[str, ...]] = {
    "HSA_STATUS_ERROR_EXCEPTION": _KERNEL_FAULT,
    "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION": _KERNEL_FAULT,
    "HSA_STATUS_ERROR_MEMORY_FAULT": _KERNEL_FAULT,
    "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION": _KERNEL_FAULT,
    "Page not present or supervisor privilege": _KERNEL_FAULT,
    "Write access to a read-only page": _KERNEL_FAULT,
    "Execute access to a page marked NX": _KERNEL_FAULT,
    "Host access only": _KERNEL_FAULT,
    "DRAM ECC failure": _ECC,
    "SRAM ECC failure": _ECC,
}
_WHAT = {
    "HSA_STATUS_ERROR_EXCEPTION": " A GPU kernel trapped: an invalid memory access, an illegal "
    "instruction, or a trap it raised itself (a device-side assert such as torch's "
    "`_assert_async_cuda_kernel`); HIP aborts the queue and the process dies (`Fatal Python "
    "error: Aborted`).",
}


def _record(key: str, slug: str, message: str, pattern: str, documentation: str,
            solutions: Sequence[str], versions: Sequence[str],
            examples: Sequence[str]) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": hashlib.sha256(f"sglang-matcher/hsa/{key}".encode()).hexdigest()[:16],
        "slug": slug, "errorMessage": message, "messagePattern": pattern,
        "errorClass": None, "errorType": "native",
        "severity": "critical" if solutions else "error",
        "documentation": documentation, "solutions": list(solutions),
        "tags": ["native", "rocm", "hsa-runtime"], "sourcePackage": "rocr-runtime",
        "sourceVersions": sorted(set(versions)), "generator": GENERATOR}
    if examples:
        rec["examples"] = {"match": list(examples)}
    if tuple(solutions) == _KERNEL_FAULT:
        rec["fixActions"] = [list(way) for way in NR.AMDGPU_FAULT.fix_actions]
    return rec


# The message as ROCr's `fprintf` writes it, and the real lines of it the records are proved on.
_FAULT_FORMAT = ("Memory access fault by GPU node-%u (Agent handle: %p) on address %p%s. "
                 "Reason: {reason}.")
_FAULT_SEEN = {  # https://github.com/ollama/ollama/issues/8851 (train)
    "Page not present or supervisor privilege": (
        "ollama  | Memory access fault by GPU node-1 (Agent handle: 0x559ee9967590) on address "
        "0x7fe05f439000. Reason: Page not present or supervisor privilege."),
}
_FAULT_LEAD = (r"Memory access fault by GPU node-(?P<node>\d+) \(Agent handle: [^)\n]*\) on "
               r"address (?P<address>\S+?)(?:\(may not be exact address\))?\. Reason: ")


def records(rows: Sequence[tuple[str, ...]]) -> list[dict[str, Any]]:
    by_key: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    for row in rows:
        by_key.setdefault((row[0], row[2]), []).append(row)
    out = []
    for (kind, name), group in sorted(by_key.items()):
        versions = [r[1] for r in group]
        solutions = REMEDIES.get(name, ())
        if kind == "status":
            if name in PASSING:
                continue
            text = max((r[3] for r in group), key=len)
            out.append(_record(
                name, name.lower().replace("_", "-"), name, rf"\b{name}\b",
                f"ROCm's HSA runtime (ROCr) reported {name}: “{text}”." + _WHAT.get(name, ""),
                solutions, versions, [name]))
        else:
            out.append(_record(
                "fault\n" + name, "hsa-memory-fault-" + re.sub(r"[^a-z0-9]+", "-", name.lower()),
                _FAULT_FORMAT.format(reason=name), _FAULT_LEAD + escape_literal(name),
                "ROCm's HSA runtime (ROCr) reports a GPU memory fault of the process's GPU "
                f"node before it aborts: “{name}”. The amdgpu driver's lines in the kernel log "
                "(dmesg) at that moment say more (for an access fault: the address and process).",
                solutions, versions, [_FAULT_SEEN[name]] if name in _FAULT_SEEN else []))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--repo", type=Path, help="a clone (git directory) of ROCm/ROCR-Runtime")
    ap.add_argument("--tag", action="append", default=[], help="a release tag (repeatable)")
    known, rest = ap.parse_known_args(argv)
    if "--build" in rest and (known.repo is None or not known.tag):
        raise SystemExit("--build needs --repo and at least one --tag")
    return status_table.main(rest, prog="python -m matcher.catalog.hsa_status", doc=__doc__,
                             vocab=VOCAB, columns=COLUMNS, output=OUTPUT,
                             build=lambda: build(known.repo, known.tag), records=records)


if __name__ == "__main__":
    raise SystemExit(main())
