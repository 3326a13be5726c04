"""Which split of the field corpus a thread belongs to, and the families excerpts are filed under.

The rule was written before any excerpt it places was read, and is never changed:

- a thread cited by the catalog, the tests or the docs before 2026-12-06
  (`tests/fixtures/field/seen-threads.txt`) is **train**: records were written from it;
- any other thread is **test** when the first hex digit of `sha256("owner/repo#N")` (lower case)
  is 0–7, else **train** — about half of the new threads.

Train excerpts live in `tests/fixtures/field/`, test excerpts in `tests/fixtures/field-test/`.
Records and rules are written from train excerpts only; of the test split only aggregate figures
and per-family counts are looked at (`bench/field_recall.py` prints nothing else of it).

    python bench/field_split.py URL…    # prints each thread's split
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAIN_DIR = ROOT / "tests" / "fixtures" / "field"
TEST_DIR = ROOT / "tests" / "fixtures" / "field-test"
SEEN = TRAIN_DIR / "seen-threads.txt"

_THREAD = re.compile(
    r"https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/(?:issues|pull|discussions)/(\d+)")

# Every excerpt is filed under one of these (its `family` in `index.json`).
FAMILIES: dict[str, str] = {
    "cuda-oom": "torch's and sglang's out-of-memory errors, KV pool sizing",
    "cuda-error": "illegal memory access, device-side asserts, launch failures, no kernel image",
    "process-crash": "segfaults, Fatal Python error, terminate called, killed processes",
    "nccl": "NCCL errors and warnings, collective failures, custom all-reduce",
    "watchdog-timeout": "c10d watchdog timeouts and hangs it detects",
    "multinode-network": "dist init, ports in use, Gloo, ZMQ, IB/RDMA, NVSHMEM",
    "torch-compile": "torch.compile, dynamo and inductor errors, CUDA graph capture",
    "triton": "triton JIT, out of resources, its C++ assertions",
    "sgl-kernel": "sgl_kernel load and import failures, its C++/CUDA checks",
    "flashinfer": "flashinfer JIT and runtime errors",
    "build-install": "pip, wheel, Docker and toolkit build failures",
    "dependency-version": "ImportError, ModuleNotFoundError, API mismatches between packages",
    "model-architecture": "unsupported architectures, config mismatches, remote code",
    "weight-loading": "checkpoints, safetensors, missing or mis-shaped weights",
    "quantization": "fp8, AWQ, GPTQ, Marlin, compressed-tensors, ModelOpt",
    "tokenizer-template": "tokenizers, chat templates, detokenization",
    "server-args": "invalid or incompatible launch flags",
    "scheduler-runtime": "scheduler and request-handling crashes at serving time",
    "kv-cache": "radix cache, memory pool leaks, HiCache",
    "structured-output": "xgrammar, outlines, llguidance, JSON schema and regex constraints",
    "disaggregation": "prefill/decode disaggregation, Mooncake, NIXL transfers",
    "router": "sglang's router and gateway (Rust)",
    "speculative": "EAGLE, MTP and other speculative decoding",
    "multimodal": "vision and audio models, processors, image inputs",
    "lora": "LoRA adapters",
    "hardware-platform": "ROCm/AMD, Ascend NPU, CPU, Intel XPU backends",
    "api-request": "the OpenAI-compatible API and request validation",
}


def thread_key(url: str) -> str:
    """`owner/repo#N` of a GitHub issue, pull request or discussion URL (lower case)."""
    m = _THREAD.match(url)
    if not m:
        raise ValueError(f"not a GitHub issue, pull request or discussion URL: {url}")
    return f"{m.group(1).lower()}#{m.group(2)}"


def seen_threads(path: Path = SEEN) -> frozenset[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(s.strip() for s in lines if s.strip() and not s.startswith("#"))


def split_of(url: str, seen: frozenset[str] | None = None) -> str:
    """"train" or "test", by the rule above."""
    key = thread_key(url)
    if key in (seen_threads() if seen is None else seen):
        return "train"
    return "test" if hashlib.sha256(key.encode()).hexdigest()[0] in "01234567" else "train"


def main(argv: list[str]) -> int:
    seen = seen_threads()
    for url in argv:
        print(f"{split_of(url, seen)}\t{thread_key(url)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
