"""What to do about a failed flashinfer check: by the kernel's area (where the check is) and the
words of its message. Used by `matcher.catalog.flashinfer`.

An area is given a way out only where sglang has a flag that runs the same work without that
flashinfer kernel, in the releases that have it (read from `server-args.json.gz`):
`--attention-backend triton` (0.4.0 to 0.5.23), `--sampling-backend pytorch` (0.4.0 to 0.5.23),
`--moe-runner-backend triton` (0.5.1 on), `--enforce-disable-flashinfer-allreduce-fusion`
(0.5.10 on; earlier, leaving out `--enable-flashinfer-allreduce-fusion`), `--fp8-gemm-backend` /
`--fp4-gemm-backend` (0.5.6.post2 / 0.5.8 on). Norm, RoPE and activation kernels have no such
flag: their records say what failed and where.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

FixActions = tuple[tuple[dict[str, Any], ...], ...]


@dataclass(frozen=True, slots=True)
class Remedy:
    area: str
    documentation: str
    solutions: tuple[str, ...] = ()
    fix_actions: FixActions = ()


@dataclass(frozen=True, slots=True)
class Area:
    name: str
    path: re.Pattern[str]
    what: str
    way: str = ""
    actions: FixActions = ()


AREAS: tuple[Area, ...] = (
    Area("moe", re.compile(r"moe|routing", re.I), "a fused-MoE kernel",
         "Run the MoE layers without flashinfer: `--moe-runner-backend triton` (sglang 0.5.1 "
         "and later; older releases use flashinfer's MoE only with `--enable-flashinfer-*-moe`, "
         "so leave that flag out).",
         (({"op": "set", "flag": "--moe-runner-backend", "value": "triton"},),)),
    Area("allreduce", re.compile(r"comm/|allreduce|alltoall|mnnvl|nvshmem|vmm", re.I),
         "a communication (all-reduce fusion / all-to-all) kernel",
         "Turn flashinfer's all-reduce fusion off: `--enforce-disable-flashinfer-allreduce-"
         "fusion` (sglang 0.5.10 and later, where it is on by default for some models); on "
         "0.4.9 to 0.5.9 leave out `--enable-flashinfer-allreduce-fusion`.",
         (({"op": "add", "flag": "--enforce-disable-flashinfer-allreduce-fusion"},),)),
    Area("sampling", re.compile(r"sampling", re.I), "a sampling kernel",
         "Sample without flashinfer: `--sampling-backend pytorch`.",
         (({"op": "set", "flag": "--sampling-backend", "value": "pytorch"},),)),
    Area("gemm", re.compile(r"gemm|bmm|fp4|fp8|quantiz|cutlass", re.I),
         "a GEMM / quantization kernel",
         "Pick another GEMM backend for the quantized layers: `--fp8-gemm-backend` (sglang "
         "0.5.6.post2 and later) or `--fp4-gemm-backend` (0.5.8 and later) with a value that is "
         "not `flashinfer_*` (`triton` or `cutlass` for FP8, `cutlass` or `marlin` for FP4)."),
    Area("attention", re.compile(r"attention|prefill|decode|mla|fmha|page|cascade|pod|xqa|"
                                 r"scheduler", re.I),
         "an attention kernel (or its planner)",
         "Run attention without flashinfer: `--attention-backend triton` (every release; `fa3` "
         "on Hopper is another); it may be slower, but it does not call this kernel.",
         (({"op": "set", "flag": "--attention-backend", "value": "triton"},),)),
)
OTHER = Area("other", re.compile(r"$^"), "a flashinfer kernel")

ARCH = re.compile(r"architecture|compute capability|\bsm_?\d{2,3}[af]?\b|\bSM\d{2,3}\b|"
                  r"Hopper|Blackwell|Ampere", re.I)
BF16_SM75 = re.compile(r"bf16 on sm75", re.I)
SHAPE = re.compile(r"Unsupported (?:head_dim|group_size|page_size|num_qo_heads|head size)|"
                   r"head_dim_(?:qk|vo)", re.I)
INTERNAL = re.compile(r"Internal Error|please report this bug", re.I)
# flashinfer's JIT builds for the architectures FLASHINFER_CUDA_ARCH_LIST names, else for the
# GPUs it sees (`compilation_context.py`, 0.3 on).
ARCH_ELSEWHERE = (
    "Run on a GPU the kernel supports, or launch sglang with a backend that does not call this "
    "flashinfer kernel (the traceback's sglang frames say which: attention → `--attention-backend "
    "triton`, MoE → `--moe-runner-backend triton`, sampling → `--sampling-backend pytorch`). If "
    "FLASHINFER_CUDA_ARCH_LIST is set, it must name this GPU's architecture: flashinfer builds "
    "its kernels for the architectures it lists, else for the GPUs it sees.")
PIN = ("Install the flashinfer-python release your sglang release pins (`pip install "
       "\"sglang[all]==<your release>\"` puts it back; `pip show flashinfer-python` says which "
       "one runs): sglang calls flashinfer's kernels as that release defines them.")


def area_of(path: str) -> Area:
    for a in AREAS:
        if a.path.search(path):
            return a
    return OTHER


def remedy_for(path: str, text: str) -> Remedy:
    area = area_of(path)
    doc = f"The check is in {area.what} of flashinfer, which sglang calls."
    solutions: list[str] = []
    actions: FixActions = ()
    if BF16_SM75.search(text):
        doc += " Turing GPUs (sm75) have no bfloat16 tensor cores for this kernel."
        solutions.append("Run the model in float16 on this GPU: `--dtype float16`.")
        actions = (({"op": "set", "flag": "--dtype", "value": "float16"},),)
    elif ARCH.search(text):
        doc += (" The kernel is built for, or runs on, only some GPU architectures, and this GPU "
                "is not one of them.")
        if not area.way:
            solutions.append(ARCH_ELSEWHERE)
    elif SHAPE.search(text):
        doc += " The kernel does not support this model's attention shape (head size or grouping)."
    elif INTERNAL.search(text):
        doc += " flashinfer reports an internal inconsistency: a bug of that release."
        solutions.append(PIN)
    if area.way:
        solutions.append(area.way)
        actions = actions + area.actions
    return Remedy(area.name, doc, tuple(solutions), actions)


def slug(text: str, limit: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].rstrip("-") or "check"


FAMILY_PATTERN = (r"Error in function '(?P<function>[^'\n]+)' at (?P<file>[^\s:]*flashinfer"
                  r"[^\s:]*):(?P<line>\d+): (?P<message>.+)")


def family_record(order: list[str], generator: str, rid: str) -> dict[str, Any]:
    """Any `flashinfer::Error` line no message record knows."""
    ways = [a.way for a in AREAS if a.way]
    return {
        "id": rid,
        "repo": "flashinfer-ai/flashinfer",
        "slug": "flashinfer-error-in-function",
        "errorMessage": "Error in function '{function}' at {file}:{line}: {message}",
        "messagePattern": FAMILY_PATTERN,
        "errorType": "check",
        "errorClass": None,
        "severity": "error",
        "filePath": "flashinfer/include/flashinfer/exception.h",
        "lineNumber": None,
        "githubUrl": None,
        "documentation": (
            "A flashinfer kernel's host-side check failed (`FLASHINFER_ERROR` / "
            "`FLASHINFER_CHECK`: `flashinfer::Error`, printed as `RuntimeError` or, from "
            "flashinfer 0.4 on, `tvm.error.InternalError`): `function` and `file:line` say "
            "which kernel refused, `message` why. The file's directory names the area "
            "(attention, sampling, MoE, communication, GEMM)."),
        "solutions": [
            "Avoid that flashinfer kernel with the sglang flag of its area (the file in the "
            "message says which): " + " ".join(ways),
            PIN,
        ],
        "tags": ["dependency", "flashinfer-python", "cpp", "generated", "family"],
        "sourcePackage": "flashinfer-python",
        "sourceVersions": [f"{order[0]}..{order[-1]}"] if order else [],
        "generator": generator,
        "schemaVersion": 2,
    }
