"""What to do about a few of torch's C++ checks, by their message: the ones whose failure has
one cause an operator of an sglang server can fix, whatever sglang code made the call.

Most of torch's checks (`matcher.catalog.torch_native`) refuse arguments that sglang's code
computed — a bug to report, with no flag to change. These do not: they check the machine the
server runs on, so their cause is the GPU or the torch build, and the fix is the same for
every caller:

- FP8 matrix multiplication (`torch._scaled_mm`) on a GPU older than Ada/Hopper or MI300;
- torch's FlashAttention kernel on a GPU older than Ampere (or newer than the torch build);
- sharing a CUDA tensor between processes with a CPU-only torch (`CUDA is not available`);
- int4 weight-only matmul on an AMD GPU older than CDNA2 (MI200);
- an NCCL process group in a process that sees no GPU.

`torch_native.build_record` adds the rule's words to the record it makes;
`python -m matcher.catalog.torch_check_remedies FILE` applies them to a written catalog (the
generator's source tarball is large: this rewrites `torch-native.jsonl` without it).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CAPABILITY = ("see the GPU's compute capability: nvidia-smi --query-gpu=name,compute_cap "
               "--format=csv")


@dataclass(frozen=True, slots=True)
class CheckRemedy:
    message: re.Pattern[str]  # searched in the record's errorMessage (torch's template)
    why: str
    solutions: tuple[str, ...]


RULES: tuple[CheckRemedy, ...] = (
    CheckRemedy(
        re.compile(r"^torch\._scaled_mm is only supported on CUDA devices with compute "
                   r"capability >= 9\.0 or 8\.9"),
        ("FP8 matrix multiplication needs a GPU of compute capability 8.9 (Ada) or 9.0 and "
         "newer (Hopper, Blackwell), or an MI300: the server runs FP8 weights or activations "
         "(an FP8 checkpoint, `--quantization fp8` or `w8a8_fp8`, a torchao `fp8` config) on an "
         "older GPU (A100, A10, V100, T4, RTX 30xx)."),
        ((f"First {_CAPABILITY}. Below 8.9, serve the model's BF16/FP16 checkpoint without "
          "an FP8 `--quantization` (or `--torchao-config fp8…`), or a quantization this GPU "
          "runs (an AWQ or GPTQ checkpoint, `--quantization w8a8_int8`); or run the FP8 model "
          "on an sm89+ GPU (L4, L40S, RTX 40xx, H100/H200, B200) or an MI300"),)),
    CheckRemedy(
        re.compile(r"^FlashAttention only supports Ampere GPUs or newer\."),
        ("FlashAttention's kernel (torch's, and the flash-attn package's, which prints the "
         "same words) runs only on the GPU generations its build knows: compute capability 8.x "
         "and 9.0 in torch 2.6 and flash-attn 2. The GPU is older than Ampere (V100, T4, RTX "
         "20xx), or newer than that build (a Blackwell GPU, 10.x or 12.x)."),
        ((f"First {_CAPABILITY}. Below 8.0, run on an Ampere or newer GPU, or keep this GPU "
          "with an attention path that lets torch pick a kernel the GPU has: for a vision "
          "encoder, `--mm-attention-backend sdpa` (sglang 0.4.6.post3 and later). 10.0 or "
          "above: install the build made for that GPU of the package the traceback's last "
          "frame is in — torch 2.7 or later from a CUDA 12.8+ index, or a flash-attn release "
          "built for it"),)),
    CheckRemedy(
        re.compile(r"^CUDA is not available$"),
        ("torch raises this where a CUDA tensor is shared between processes (sglang's "
         "processes do so) and torch was built without CUDA: a CPU-only torch."),
        (("Check the torch build: python -c 'import torch; print(torch.__version__, "
          "torch.version.cuda, torch.cuda.is_available())' — a `+cpu` version or None: install "
          "the CUDA build of the torch your sglang pins from PyTorch's CUDA index (pip install "
          "--force-reinstall 'torch==<version>' --index-url https://download.pytorch.org/whl/"
          "cu128 for CUDA 12.8); False: the process sees no GPU — nvidia-smi in the container "
          "must list it (docker run --gpus all)"),)),
    CheckRemedy(
        re.compile(r"^_(?:weight_int4pack_mm|convert_weight_to_int4pack)_cuda is only "
                   r"supported on AMD gpu arch greater than or equal to CDNA2"),
        ("int4 weight-only matmul (torchao's `int4wo` quantization) runs on AMD GPUs of "
         "CDNA2 (MI200) and newer only: this GPU is older."),
        (("Serve the model without int4 weight-only quantization (drop `--torchao-config "
          "int4wo-…`), or with a quantization this GPU runs; or run on an MI200/MI300 "
          "(rocminfo lists the GPU's gfx name: gfx90a and gfx942 are CDNA2/CDNA3)"),)),
    CheckRemedy(
        re.compile(r"^ProcessGroupNCCL is only supported with GPUs, no GPUs found!"),
        ("torch found no GPU in the process that opens sglang's NCCL group: the container or "
         "job was given none, CUDA_VISIBLE_DEVICES names none that exist, or torch is a CPU "
         "build."),
        (("Make the GPUs visible to the server: nvidia-smi inside its container must list "
          "them (docker run --gpus all; on Kubernetes a `nvidia.com/gpu` resource limit); "
          "CUDA_VISIBLE_DEVICES, if set, must name devices that exist; and python -c 'import "
          "torch; print(torch.version.cuda, torch.cuda.device_count())' must print a CUDA "
          "version and a count above 0 (None: a CPU build of torch — install the CUDA one)"),)),
)


def remedy_for(template: str) -> CheckRemedy | None:
    return next((r for r in RULES if r.message.search(template)), None)


def apply(record: dict[str, Any]) -> bool:
    """Add the rule's words to a written torch record (once); True when one applied."""
    rule = remedy_for(record.get("errorMessage") or "")
    if rule is None:
        return False
    if rule.why not in record.get("documentation", ""):
        record["documentation"] = f"{record.get('documentation', '')} {rule.why}".strip()
    record["solutions"] = list(rule.solutions)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    from matcher.atomic import write_atomic

    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.torch_check_remedies",
                                 description="apply the rules to a written torch-native.jsonl")
    ap.add_argument("file", type=Path)
    args = ap.parse_args(argv)
    records = [json.loads(line) for line in args.file.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    applied = sum(apply(r) for r in records)
    write_atomic(args.file, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                                    for r in records))
    print(f"{applied} records given a rule's remedy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
