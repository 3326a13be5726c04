"""What to do about two kinds of sglang's quantization failures, by rule over the generated
records: a GPU too old for the checkpoint's quantization, and a weight that does not split into
the quantization's blocks at the tensor-parallel size chosen. The checks that raise them compare
the GPU's compute capability or a weight's per-GPU slice, not a flag, so the guard-based
derivation (`matcher.catalog.remedy`) gives them only pointers; what to do follows from what the
message says it compared (the capability needed and the GPU's; the slice and the block).

The words go ahead of the record's pointers, no `fixActions` (which GPU, checkpoint or
tensor-parallel size to use is the operator's choice); a rule naming a flag applies only where
every release that prints the message defines it (`matcher.catalog.area_remedies`, whose
mechanism this reuses). `catalog extract` applies it after the guard derivation;
`python -m matcher.catalog.quant_remedies FILE` rewrites a written catalog.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import area_remedies, message_fix
from matcher.catalog.area_remedies import AreaRule
from matcher.catalog.server_args import ServerArgsTable

QUANT_TAG = "quant-remedy"

RULES: tuple[AreaRule, ...] = (
    AreaRule(
        "gpu-capability",
        re.compile(r"/srt/(?:layers/quantization|model_loader)/"),
        re.compile(r"(?i)\bcapability\b[^.]*\.\s*(?:current|got)\b|not supported for the "
                   r"current GPU|does not support \w+ quantization\b.*Please use Blackwell"),
        (),
        "This quantization's kernels need a newer GPU than this one (the message gives the "
        "compute capability they need and this GPU's; `nvidia-smi --query-gpu=compute_cap "
        "--format=csv` shows it): serve the checkpoint on a GPU of at least that capability, or "
        "serve a checkpoint of the model in a format this GPU runs (unquantized BF16/FP16, or "
        "another quantization method)"),
    AreaRule(
        "tp-split-not-block-aligned",
        re.compile(r"/srt/layers/(?:quantization|moe)/"),
        re.compile(r"(?i)is not divisible by weight quantization block|not aligned with the "
                   r"quantized weight shape|too large tensor parallel size"),
        ("--tp-size",),
        "Each GPU's slice of this weight (a dimension divided by the tensor-parallel size) is "
        "not a multiple of the quantization's block, so the checkpoint cannot be split this "
        "many ways: start with a smaller `--tp-size`, one that leaves each slice a multiple of "
        "the block (the message gives the slice and the block)"),
)


def apply(record: dict[str, Any], table: ServerArgsTable) -> bool:
    """Add the rule's words ahead of a pointer-only record's (in place); True when it did."""
    return area_remedies.apply(record, table, RULES, QUANT_TAG)


def rewrite(path: Path, table: ServerArgsTable) -> int:
    """`apply` to the quantization records of a JSONL catalog file (each names quantization in
    its path or message), rewriting only the lines it changes."""
    return message_fix.rewrite(path, table, rule=apply, lines_with="quantiz")


def main(argv: Sequence[str] | None = None) -> int:
    return area_remedies.run_cli(argv, "python -m matcher.catalog.quant_remedies",
                                 "give quantization records what to do", rewrite)


if __name__ == "__main__":
    raise SystemExit(main())
