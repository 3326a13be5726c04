"""What a GPU architecture name says, when a line reports one a build or library does not support.

Builds and kernel libraries check the GPU they run on, or build for, against the targets they
have code for, and name both in their message: sgl-kernel's ROCm build (`sgl-kernel/
setup_rocm.py`: `Unsupported GPU architecture detected 'gfx1100'. Expected 'gfx942' or
'gfx950'.`), AMD's aiter (`aiter/jit/utils/chip_info.py`: `Unknown GPU architecture: gfx1151.
Supported architectures: [...]`), PyTorch's CUDA build check (`torch/cuda/__init__.py`: `NVIDIA
GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch
installation.`). What the line alone does not say is which GPU the name is, and, for an NVIDIA
capability, whether the build is too old for a new GPU or too new for an old one: the names are
closed vocabularies — AMD's LLVM processor names (`gfx…`, LLVM's AMDGPUUsage table) and NVIDIA's
compute capabilities (`sm_…`, NVIDIA's CUDA GPUs table).

The records capture the name as `gpu_arch` (AMD) or `cuda_sm` (NVIDIA, digits as printed:
`120`, `90`; newer torch releases print it as `cc_major`.`cc_minor`) and the accepted list, when
printed, as `supported` (`cc_supported`: torch's `- 9.0 which supports hardware CC …` list)
(`matcher.pipeline.vocabulary_answered` applies this to every event that has one).
"""

from __future__ import annotations

import re

from matcher.catalog.answer import answered_by

CAPTURES = ("gpu_arch", "cuda_sm", "cc_major")

# LLVM AMDGPU processor names of the GPUs ROCm users run (AMDGPUUsage, "Processors").
AMD: dict[str, str] = {
    "gfx900": "AMD Vega 10 (Radeon Instinct MI25, Radeon RX Vega 56/64)",
    "gfx906": "AMD Vega 20 (Radeon Instinct MI50/MI60, Radeon VII)",
    "gfx908": "AMD CDNA (Instinct MI100)",
    "gfx90a": "AMD CDNA 2 (Instinct MI210/MI250/MI250X)",
    "gfx940": "AMD CDNA 3 (early Instinct MI300 parts)",
    "gfx941": "AMD CDNA 3 (early Instinct MI300 parts)",
    "gfx942": "AMD CDNA 3 (Instinct MI300X/MI300A/MI325X)",
    "gfx950": "AMD CDNA 4 (Instinct MI350X/MI355X)",
    "gfx1030": "AMD RDNA 2 (Radeon RX 6800/6900, Radeon PRO W6800)",
    "gfx1031": "AMD RDNA 2 (Radeon RX 6700 XT)",
    "gfx1032": "AMD RDNA 2 (Radeon RX 6600)",
    "gfx1100": "AMD RDNA 3 (Radeon RX 7900 XTX/XT, Radeon PRO W7900/W7800)",
    "gfx1101": "AMD RDNA 3 (Radeon RX 7800 XT/7700 XT)",
    "gfx1102": "AMD RDNA 3 (Radeon RX 7600)",
    "gfx1103": "AMD RDNA 3 integrated graphics (Radeon 780M/760M)",
    "gfx1150": "AMD RDNA 3.5 integrated graphics (Ryzen AI 300, Radeon 890M)",
    "gfx1151": "AMD RDNA 3.5 integrated graphics (Ryzen AI Max \"Strix Halo\", Radeon 8060S)",
    "gfx1200": "AMD RDNA 4 (Radeon RX 9060 XT)",
    "gfx1201": "AMD RDNA 4 (Radeon RX 9070 XT/9070)",
}

# NVIDIA compute capabilities (major, minor) of the GPUs CUDA users run.
NVIDIA: dict[int, str] = {
    50: "Maxwell", 52: "Maxwell (GTX 9xx, Tesla M40)", 53: "Maxwell (Jetson Nano)",
    60: "Pascal (Tesla P100)", 61: "Pascal (GTX 10xx, Tesla P40/P4)",
    62: "Pascal (Jetson TX2)", 70: "Volta (Tesla V100, Titan V)",
    72: "Volta (Jetson Xavier)", 75: "Turing (Tesla T4, RTX 20xx, Quadro RTX)",
    80: "Ampere (A100, A30)", 86: "Ampere (A10, A40, RTX A6000, RTX 30xx)",
    87: "Ampere (Jetson Orin)", 89: "Ada Lovelace (L4, L40/L40S, RTX 40xx, RTX 6000 Ada)",
    90: "Hopper (H100, H200, H20, H800, GH200)", 100: "Blackwell (B200, GB200)",
    103: "Blackwell Ultra (B300, GB300)", 110: "Blackwell (Jetson Thor)",
    120: "Blackwell (RTX 50xx, RTX PRO 6000 Blackwell)", 121: "Blackwell (DGX Spark GB10)",
}

_SM = re.compile(r"sm_(\d+)")
_CC = re.compile(r"- (\d+)\.(\d) which supports")
# CUDA 12.8 is the first toolkit that builds for Blackwell (sm_100, sm_120): PyTorch's wheels
# for these GPUs are the cu128 and newer builds (torch 2.7 and later).
_BLACKWELL_WHEELS = ("torch 2.7 or newer built with CUDA 12.8 or later (`pip install torch "
                     "--index-url https://download.pytorch.org/whl/cu128`, or cu130)")


_NO_ARCH = (
    ("No GPU architecture reached the check (the name is empty): the GPU was not visible to the "
     "process, or the variable naming the target was set empty."),
    ("Run `rocminfo | grep gfx` in the same environment: it must list the GPU (in a container "
     "start it with --device=/dev/kfd --device=/dev/dri --group-add video --group-add render); "
     "to build for a GPU this host lacks, name the target (aiter: GPU_ARCHS=gfx942; "
     "sgl-kernel: AMDGPU_TARGET=gfx942)"))
_OLDER = ("This PyTorch dropped the GPU: use an older PyTorch (and the sglang release that pins "
          "it) whose build still lists this capability, or other hardware; current sglang needs "
          "sm_75 or newer")


def amd_name(arch: str) -> str:
    """`gfx1100:xnack-` → `gfx1100`; the target features after the colon do not name the GPU."""
    return arch.split(":", 1)[0].strip().lower()


def _amd_meaning(arch: str, supported: str | None) -> tuple[str, str | None]:
    name = amd_name(arch)
    if not name:
        return _NO_ARCH
    gpu = AMD.get(name)
    said = f"`{name}` is {gpu}." if gpu else f"`{name}` is an AMD GPU architecture."
    listed = [s for s in re.findall(r"gfx\w+", supported or "") if s != name]
    if listed:
        said += " It is not among the targets this check accepts: " + ", ".join(listed) + "."
    return said, None


def _nvidia_meaning(sm: str, supported: str | None) -> tuple[str, str | None]:
    capability = int(sm)
    gpu = NVIDIA.get(capability)
    said = f"sm_{capability} is {'NVIDIA ' + gpu if gpu else 'an NVIDIA compute capability'}."
    built = sorted({int(s) for s in _SM.findall(supported or "")}
                   | {int(a) * 10 + int(b) for a, b in _CC.findall(supported or "")})
    if not built:
        return said, None
    said += " This PyTorch has kernels for " + ", ".join(f"sm_{s}" for s in built) + "."
    if capability > built[-1]:
        wheel = (_BLACKWELL_WHEELS if capability >= 100 else
                 "a PyTorch build whose CUDA supports this GPU")
        newer = (f"Install {wheel}, as the sglang release you run pins it, or use the "
                 "lmsysorg/sglang image built for this GPU family; check with python -c "
                 "\"import torch; print(torch.cuda.get_arch_list())\" that "
                 f"sm_{capability} is listed")
        return said + " The GPU is newer than every architecture this build targets.", newer
    if capability < built[0]:
        return said + " The GPU is older than every architecture this build targets.", _OLDER
    return said, None


def answer(captures: dict[str, str]) -> tuple[str, str | None] | None:
    """(what the captured architecture is, what to do or None); None when none was captured."""
    if "gpu_arch" in captures:
        return _amd_meaning(captures["gpu_arch"] or "", captures.get("supported"))
    sm = captures.get("cuda_sm")
    if sm and sm.isdigit():
        return _nvidia_meaning(sm, captures.get("supported"))
    major, minor = captures.get("cc_major"), captures.get("cc_minor")
    if major and minor and major.isdigit() and minor.isdigit():
        return _nvidia_meaning(str(int(major) * 10 + int(minor)), captures.get("cc_supported"))
    return None



remediation = answered_by(answer)  # what the GPU is ahead of the record's words
