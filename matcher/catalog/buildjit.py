"""Records for failures to install and to build: pip's and uv's resolution and build errors,
compiler and linker errors of JIT and extension builds (nvcc, gcc/ld, flashinfer's JIT cache,
torch's `cpp_extension`, setuptools' `build_ext`), cargo's (the router's source build), and
torch.compile's wrappers: `buildjit.jsonl`.

Two steps, as `native` does:

1. `python -m matcher.catalog.buildjit_facts …` reads the tools themselves — pip's source
   (each literal below is looked for in `pip/_internal`), uv's binary, torch's
   `torch/utils/cpp_extension.py` and `torch/_dynamo/exc.py` in torch wheels, nvcc — and
   PyPI's JSON for the wheels sglang's own packages publish; it writes `buildjit.facts.tsv`
   (committed).
2. `python -m matcher.catalog.buildjit` makes the records from that file and the tables here
   (no tool needed). A message whose literal no tool version read holds makes no record.

Every record names the tool (`sourcePackage`), the versions read that print it
(`sourceVersions`) and says what to do (`solutions`), citing where the advice comes from in
`documentation`: sglang's install guide (`docs/get_started/install.md`: `CUDA_HOME`, FlashInfer
only on sm75 and newer, `--attention-backend triton --sampling-backend pytorch`, reinstalling
flashinfer-python and clearing `~/.cache/flashinfer`, `uv pip install "sglang" --prerelease=allow`),
pip's and uv's own messages, and torch's `cpp_extension` source.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.catalog.versions import compact_ranges, sort_versions

GENERATOR = "matcher.catalog.buildjit"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
FACTS = GENERATED / "buildjit.facts.tsv"
OUTPUT = GENERATED / "buildjit.jsonl"

INSTALL_DOC = ("sglang's install guide (docs/get_started/install.md, "
               "https://github.com/sgl-project/sglang/blob/main/docs/get_started/install.md)")
# A build step's output in `docker build` is prefixed with the step and the seconds (`#12 854.5`).
DOCKER = r"^\s*(?:#\d+ )?(?:\d+\.\d+ )?"
PKG = r"(?P<package>[A-Za-z0-9][A-Za-z0-9._-]*)"


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a tool: the literal its source holds, the pattern of the printed line,
    what it means and what to do."""

    key: str
    tool: str  # pip, uv, nvcc, gcc, cmake, scikit-build-core, torch
    literal: str
    pattern: str
    documentation: str
    solutions: tuple[str, ...]
    examples: tuple[str, ...]
    severity: str = "error"
    error_class: str | None = None


# Said for any package pip or uv cannot install: where to look before anything else.
_RESOLVE_SOLUTIONS = (
    ("Read the requirement it names: a version that does not exist, a pin that no wheel for "
    "this Python and platform satisfies (`pip download --no-deps --only-binary :all: "
    "PKG==V` lists what the index has), or two packages that pin the same dependency "
    "differently (install the versions one sglang release pins together: `pip install "
    "sglang==R` alone, not with another torch or flashinfer pin)."),
    ("Install sglang as its install guide says: `pip install uv; uv pip install \"sglang\" "
    "--prerelease=allow` (sglang pins release candidates of flashinfer at times), or use the "
    "Docker image lmsysorg/sglang, which ships a matching torch, sgl-kernel and flashinfer."),
)
_BUILD_SOLUTIONS = (
    ("The cause is the first `error:` or `fatal error:` line of the build output above this "
    "line (a missing header, a compiler or CUDA toolkit that does not fit torch): fix that."),
    ("Prefer a prebuilt wheel to a source build: sgl-kernel, flashinfer-python and torch "
    "publish wheels for Linux x86_64 and aarch64; a source build needs the CUDA toolkit "
    "(nvcc, headers) of torch's CUDA version, CUDA_HOME pointing to it, and ninja."),
)
_FLASHINFER_JIT = (
    ("Clear flashinfer's JIT cache and reinstall it, as sglang's install guide says: `rm -rf "
    "~/.cache/flashinfer` and `pip3 install --upgrade flashinfer-python --force-reinstall "
    "--no-deps` (a stale cache from another flashinfer or CUDA version fails to build)."),
    ("Check that this flashinfer version supports the GPU's architecture (the number in the "
    "cache path, e.g. 120 for sm_120): FlashInfer supports sm75 and newer; a new "
    "architecture needs a newer flashinfer-python (and its flashinfer-jit-cache or "
    "flashinfer-cubin package built for the same CUDA) and an nvcc that knows it."),
    ("Or do not use flashinfer: `--attention-backend triton --sampling-backend pytorch` "
    "(sglang's install guide)."),
)
_CUDA_HOME = (
    ("Point CUDA_HOME at a CUDA toolkit of the same major version as torch's CUDA "
    "(`python -c \"import torch; print(torch.version.cuda)\"`): `export "
    "CUDA_HOME=/usr/local/cuda-<version>` (sglang's install guide), with `$CUDA_HOME/bin` on "
    "PATH."),
    ("Or install FlashInfer first, from its wheels, then sglang (sglang's install guide): "
    "prebuilt kernels need no nvcc at install time."),
)

# The examples are lines pip 23.2.1 and 26.3, uv 0.7.20 and 0.13.9, nvcc 13.0 and gcc printed
# here (tests/fixtures/buildjit/), or users pasted (the URL beside them).
INSTALLER: tuple[Message, ...] = (
    Message("pip-no-version", "pip", "that satisfies the requirement",
            r"Could not find a (?:pre-release )?version that satisfies the requirement "
            + PKG + r"(?P<spec>[^()\s;]*)(?:;[^(\n]*)?(?: \(from [^)]*\))? "
            r"\(from versions: (?P<versions>[^)]*)\)",
            "pip found no version of the package that satisfies the requirement and installs "
            "on this Python and platform; `from versions` lists the ones it could use "
            "(`none`: no wheel for this platform or Python at all).",
            _RESOLVE_SOLUTIONS,
            (("ERROR: Could not find a version that satisfies the requirement triton==3.6.0 "
             "(from versions: none)"),)),
    Message("pip-no-distribution", "pip", "No matching distribution found for ",
            r"No matching distribution found for " + PKG + r"(?P<spec>[^\s;]*)",
            "pip found no distribution of the package that satisfies the requirement for this "
            "Python and platform (the line above it lists the versions it saw).",
            _RESOLVE_SOLUTIONS,
            ("ERROR: No matching distribution found for triton==3.6.0",)),
    Message("pip-ignored-python", "pip", "Ignored the following versions that require a "
            "different python version",
            r"Ignored the following versions that require a different python version: "
            r"(?P<ignored>.+)",
            "pip skipped versions whose Requires-Python excludes this interpreter.",
            (("Use a Python the release supports (each ignored version says `Requires-Python "
             "…`): sglang 0.5.x needs Python 3.10 or newer, recent releases 3.11 or newer; "
             "create the venv with that Python (`uv venv --python 3.12`)."),),
            ()),  # the real lines (1,252 characters) are in tests/fixtures/buildjit/
    Message("pip-conflict", "pip", "because these package versions have conflicting "
            "dependencies",
            r"Cannot install (?P<packages>.+?) because these package versions have "
            r"conflicting dependencies\.",
            "pip's resolver found no set of versions that satisfies every requirement; `The "
            "conflict is caused by:` below it lists the pins that disagree.",
            _RESOLVE_SOLUTIONS,
            (("ERROR: Cannot install requests==2.31.0 and urllib3==1.20 because these package "
             "versions have conflicting dependencies."),)),
    Message("pip-resolution-impossible", "pip", "ResolutionImpossible: for help visit ",
            r"ResolutionImpossible: for help visit (?P<url>\S+)",
            "pip's resolver gave up: the requirements conflict (the lines above, `The conflict "
            "is caused by:`, name the pins).",
            _RESOLVE_SOLUTIONS,
            (("ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/"
             "dependency-resolution/#dealing-with-dependency-conflicts"),)),
    Message("pip-unsupported-wheel", "pip", "is not a supported wheel on this platform.",
            r"(?P<wheel>[^\s/]+\.whl) is not a supported wheel on this platform\.",
            "The wheel's tags (Python, ABI, platform in its file name) do not fit this "
            "interpreter or machine.",
            (("Take the wheel whose tags match: `cpXY` is the Python version (`python -V`), the "
             "platform is linux x86_64 or aarch64; for flashinfer's and PyTorch's wheel "
             "indexes, the URL also names the CUDA and torch versions (cu128/torch2.8), which "
             "must match the installed torch."),),
            (("ERROR: charset_normalizer-3.5.3-cp312-cp312-manylinux1_x86_64.manylinux_2_28_x86_64"
             ".manylinux_2_5_x86_64.whl is not a supported wheel on this platform."),)),
    Message("pip-subprocess-exited", "pip", "subprocess-exited-with-error",
            r"^\s*error: subprocess-exited-with-error\s*$",
            "A build step pip ran (metadata, build dependencies, the wheel build) exited with "
            "an error; the output between `[N lines of output]` and `[end of output]` below "
            "says why.", _BUILD_SOLUTIONS,
            ("  error: subprocess-exited-with-error",)),
    Message("pip-step-failed", "pip", " did not run successfully.",
            r"× (?P<step>(?:Building wheel for|Building editable for|Preparing (?:editable )?"
            r"metadata|Getting requirements to build|Running setup\.py|python setup\.py|pip "
            r"subprocess to install build dependencies)[^\n]*?) did not run successfully\.",
            "A build step pip ran for the package failed: the captured output under it says "
            "why.", _BUILD_SOLUTIONS,
            ("  × Building wheel for badkernel (pyproject.toml) did not run successfully.",)),
    Message("pip-failed-building-wheel", "pip", "Failed building wheel for ",
            r"Failed building wheel for " + PKG,
            "pip could not build a wheel of the package from its source distribution.",
            _BUILD_SOLUTIONS, ("  ERROR: Failed building wheel for badkernel",)),
    Message("pip-failed-to-build", "pip", "Failed to build ",
            DOCKER + r"Failed to build (?P<packages>[A-Za-z0-9][\w.-]*(?: [A-Za-z0-9][\w.-]*)*)"
            r"\s*$",
            "pip failed to build these packages from source (the first error of each build is "
            "above).", _BUILD_SOLUTIONS, ("Failed to build badkernel",)),
    Message("pip-could-not-build-wheels", "pip", "which is required to install "
            "pyproject.toml-based projects",
            r"Could not build wheels for (?P<packages>.+?), which is required to install "
            r"pyproject\.toml-based projects",
            "pip could not build the wheels these packages need (pip before 24.1 says it so).",
            _BUILD_SOLUTIONS,
            (("ERROR: Could not build wheels for badkernel, which is required to install "
             "pyproject.toml-based projects"),)),
    Message("pip-failed-installable-wheels", "pip", "Failed to build installable wheels for "
            "some pyproject.toml based projects",
            r"Failed to build installable wheels for some pyproject\.toml based projects",
            "pip could not build the wheels of the packages named on the next line.",
            _BUILD_SOLUTIONS,
            ("× Failed to build installable wheels for some pyproject.toml based projects",)),
    Message("pip-metadata-failed", "pip", "Encountered error while generating package "
            "metadata.",
            r"Encountered error while generating package metadata\.",
            "pip could not read the package's metadata: its build backend failed before "
            "building (the output above says why).", _BUILD_SOLUTIONS,
            ("× Encountered error while generating package metadata.",)),
    Message("pip-os-error", "pip", "Could not install packages due to an OSError",
            r"Could not install packages due to an OSError(?:: (?P<error>[^\n]+))?",
            "pip could not write or read a file while installing; the error after the colon "
            "(or the traceback, with --verbose) names it.",
            (("`[Errno 28] No space left on device`: the disk of the install target, of pip's "
             "temporary directory (TMPDIR) or of its cache is full — torch and the CUDA "
             "wheels sglang pulls in take several GB: free space, or point TMPDIR and "
             "PIP_CACHE_DIR at a larger disk (or add `--no-cache-dir`); in a Docker build, "
             "prune the builder's cache (`docker builder prune`)."),
             ("`[Errno 13] Permission denied`: install into a virtual environment you own "
             "(`python -m venv`, `uv venv`) rather than the system Python, or with `--user`."),
             "Another errno: the path in the message is the file pip could not use."),
            (("ERROR: Could not install packages due to an OSError: [Errno 28] No space left "
              "on device"),)),
    Message("uv-no-solution", "uv", "No solution found when resolving dependencies",
            r"(?:× |error: )No solution found when resolving dependencies:?\s*$",
            "uv's resolver found no set of versions that satisfies every requirement; the "
            "lines after it (`╰─▶ Because …`, `cause: Because …`) say which.",
            _RESOLVE_SOLUTIONS,
            ("  × No solution found when resolving dependencies:",
             "error: No solution found when resolving dependencies")),
    Message("uv-no-version", "uv", "there is no version of",
            r"Because there is no version of " + PKG + r"(?P<spec>[^\s,]*)",
            "uv found no version of the package that satisfies the requirement (none "
            "published, none for this Python or platform, or a pre-release uv does not "
            "consider by default).", _RESOLVE_SOLUTIONS,
            ("  ╰─▶ Because there is no version of urllib3==0.0.99 and you require",)),
    Message("uv-failed-to-build", "uv", "Failed to build",
            r"(?:× |error: )Failed to build `(?P<package>[^`\s]+)(?: @ (?P<source>[^`]+))?`",
            "uv could not build the package from source: the build backend's output below "
            "(`[stderr]`) says why.", _BUILD_SOLUTIONS,
            ("  × Failed to build `badkernel @ file:///tmp/buildjit/real/badpkg`",
             "error: Failed to build `badkernel @ file:///tmp/buildjit/real/badpkg`")),
    Message("uv-missing-library", "uv", "This error likely indicates that you need to install "
            "a library that provides",
            r"This error likely indicates that you need to\s+install a library that provides\s+"
            r"[\"`](?P<header>[^\"`]+)[\"`]",
            "uv saw a compiler error about a missing header in the package's build: a "
            "library's development files (headers) are not installed.",
            (("Install what provides the header: `cuda_runtime.h`, `cuda.h`, `cublas_v2.h`… "
             "come with the CUDA toolkit (set CUDA_HOME to it); `Python.h` with the "
             "interpreter's development package (python3.X-dev); others with the library's "
             "-dev package."),) + _BUILD_SOLUTIONS[1:],
            (("hint: This error likely indicates that you need to install a library that "
             "provides `cuda_runtime.h` for `file:///tmp/buildjit/real/badpkg`"),)),
)

_LINK_SOLUTIONS = (
    ("`-lcuda` (and `cu…` symbols such as `cuLaunchKernel`) is the NVIDIA driver's library "
    "libcuda.so, not the CUDA toolkit's: it exists only where the driver is installed — in a "
    "container started with the NVIDIA runtime (`docker run --gpus all`), mounted as "
    "libcuda.so.1; Triton links its launcher against the libcuda it finds with `ldconfig "
    "-p`, or in the directory TRITON_LIBCUDA_PATH names. To build without a GPU, link the "
    "toolkit's stub: `export LIBRARY_PATH=$CUDA_HOME/lib64/stubs:$LIBRARY_PATH`."),
    ("`-lcudart`, `-lcublas`, `-lnvrtc`… (and `cuda…` symbols) come with the CUDA toolkit: "
    "put `$CUDA_HOME/lib64` on LIBRARY_PATH; `-lpython3.X` with the interpreter's "
    "development package (python3.X-dev); torch's symbols (`c10::`, `at::`, `torch::`) mean "
    "the extension is built or loaded against another torch than the one installed: "
    "rebuild it with the installed torch, or install the versions sglang pins together."),
)
_FI_CACHE = (r"\"(?P<file>[^\"\n]*?/\.cache/flashinfer/(?:[^\"/\n]+/)*?(?P<arch>\d{2,3}[af]?)"
             r"/generated/(?P<module>[^\"/\n]+)/[^\"\n]*)\"")
_HEADER_SOLUTIONS = (
    ("Install what provides the header and put it on the include path: `cuda_runtime.h`, "
    "`cuda.h`, `cuda_fp8.h`, `cublas_v2.h`, `nvrtc.h`… come with the CUDA toolkit (set "
    "CUDA_HOME to a full toolkit with `include/`, of torch's CUDA version); `Python.h` with "
    "the interpreter's development package (python3.X-dev); a header of the package being "
    "built (flashinfer's `flashinfer/…`, cutlass) means its source or JIT cache is incomplete "
    "or from another version: reinstall it and clear its cache."),
)

COMPILER: tuple[Message, ...] = (
    Message("nvcc-errors-flashinfer-jit", "nvcc", "errors detected in the compilation of",
            r"(?P<count>\d+) errors? detected in the compilation of " + _FI_CACHE,
            "nvcc failed to compile a kernel of flashinfer's JIT cache "
            "(~/.cache/flashinfer/…/<arch>/generated/<module>/): the arch in the path is the "
            "GPU's compute capability it was compiled for.", _FLASHINFER_JIT,
            # https://github.com/sgl-project/sglang/issues/7855 (train)
            (("100 errors detected in the compilation of \"/home/user/.cache/flashinfer/120/"
             "generated/batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_"
             "dtype_idx_i32_head_dim_qk_64_head_dim_vo_64_posenc_0_use_swa_False_use_logits_"
             "cap_False_f16qk_False/batch_prefill_jit_pybind.cu\"."),)),
    Message("nvcc-errors", "nvcc", "errors detected in the compilation of",
            r"(?P<count>\d+) errors? detected in the compilation of \"(?P<file>[^\"\n]+)\"",
            "nvcc failed to compile a CUDA source file; the `error:` lines above it are the "
            "compiler's reasons.",
            (("Read the first `error:` line above: an unknown identifier or type in a kernel "
             "built from source or by a JIT usually means its headers or the CUDA toolkit do "
             "not fit it (a toolkit older than the code needs, headers of another version)."),
             ) + _BUILD_SOLUTIONS[1:],
            ("2 errors detected in the compilation of \"bad.cu\".",)),
    Message("cc-missing-header", "gcc", ": No such file or directory",
            r"(?P<file>[^\s:]+):(?P<line>\d+):(?P<column>\d+): fatal error: "
            r"(?P<header>[^\s:]+\.(?:h|hpp|hh|cuh|inc)): No such file or directory",
            "The compiler did not find a header the source includes: a library's development "
            "files are missing or not on the include path.", _HEADER_SOLUTIONS,
            ("csrc/ops.c:1:10: fatal error: cuda_runtime.h: No such file or directory",
             "py.c:1:10: fatal error: Python.h: No such file or directory",
             ("miss.cu:1:10: fatal error: flashinfer/attention/missing_header.cuh: No such file "
             "or directory"))),
    Message("nvcc-identifier-undefined", "nvcc", "is undefined",
            r"(?P<file>[^\s()]+)\((?P<line>\d+)\): error: identifier \"(?P<identifier>[^\"\n]+)\" "
            r"is undefined",
            "nvcc did not find the declaration of a name the CUDA source uses: a type or "
            "intrinsic of a newer CUDA toolkit (FP8/FP4 types, new warp intrinsics), or a "
            "header of another version of the package being built.",
            (("The toolkit compiling (CUDA_HOME's nvcc, `nvcc --version`) is older than, or "
             "of another major than, the code needs: build with the CUDA toolkit of torch's "
             "CUDA version (`python -c \"import torch; print(torch.version.cuda)\"`), or, for a "
             "JIT cache (flashinfer, sgl-kernel's JIT kernels), clear the cache and use the "
             "package version sglang pins."),) + _BUILD_SOLUTIONS[1:],
            ('bad.cu(1): error: identifier "undefined_a" is undefined',)),
    Message("ld-cannot-find-library", "gcc", "cannot find -l",
            r"\bld(?:\.(?:bfd|gold|lld))?: cannot find -l(?P<library>[^\s:]+)",
            "The linker did not find a library the link line asks for (`-lNAME` looks for "
            "`libNAME.so` on the library path).", _LINK_SOLUTIONS,
            ("/usr/bin/ld: cannot find -lcuda: No such file or directory",
             # https://github.com/JIA-Lab-research/Seg-Zero/issues/63 (train): binutils
             # before 2.40 print no reason after the library
             "/usr/bin/ld: cannot find -lcuda")),
    Message("ld-undefined-reference", "gcc", "undefined reference to",
            r"undefined reference to [`'](?P<symbol>[^`'\n]+)'",
            "The linker found no definition of a symbol the objects use: the library that "
            "defines it is not on the link line, or is another version than the headers the "
            "code was compiled with.", _LINK_SOLUTIONS,
            ("link.c:(.text+0x5): undefined reference to `missing_fn'",)),
)

_CMAKE_CUDA = (
    ("Read the compiler's output CMake quotes under the message: `nvcc fatal   : Unsupported "
    "gpu architecture 'compute_XX'` means the build asks for an architecture this nvcc no "
    "longer (or not yet) supports — set the package's architecture list "
    "(`CMAKE_CUDA_ARCHITECTURES`, `TORCH_CUDA_ARCH_LIST`) to the GPU's, or use a CUDA "
    "toolkit that supports it; a host compiler nvcc rejects needs a supported gcc "
    "(`CUDAHOSTCXX`)."),
) + _BUILD_SOLUTIONS[1:]

BUILD_SYSTEMS: tuple[Message, ...] = (
    Message("cmake-error", "cmake", "CMake Error at ",
            r"CMake Error at (?P<file>[^\s:]+):(?P<line>\d+) \((?P<command>\w+)\):",
            "CMake stopped the configuration of a package's build (sgl-kernel and other "
            "kernels build with CMake): the indented text under it says why.",
            (("Read the indented message under the line and the `Call Stack`: a missing "
             "package or toolkit (`Could NOT find …`: install it or point its *_ROOT/CUDA_HOME "
             "at it), or a compiler that fails CMake's test (the output it quotes)."),)
            + _BUILD_SOLUTIONS[1:],
            (("      CMake Error at /usr/share/cmake-3.25/Modules/CMakeTestCUDACompiler.cmake:103 "
             "(message):"),)),
    Message("cmake-cuda-compiler-broken", "cmake", "is not able to compile a simple test "
            "program.",
            r"is not able to compile a simple test program\.",
            "CMake's check of the CUDA (or C/C++) compiler failed: the compiler, with the flags "
            "the project sets (its GPU architectures among them), cannot build an empty "
            "program.", _CMAKE_CUDA,
            ("        is not able to compile a simple test program.",)),
    Message("skbuild-cmake-failed", "scikit-build-core", "CMake configuration failed",
            r"\*\*\* CMake (?P<step>configuration|build|install) failed",
            "scikit-build-core (the build backend of sgl-kernel and other CMake-built "
            "packages) ran CMake and it failed at this step; the CMake output above says why.",
            _BUILD_SOLUTIONS, ("      *** CMake configuration failed",)),
    Message("setuptools-command-failed", "setuptools", "failed with exit code",
            r"error: command '(?P<command>[^'\n]+)' failed with exit (?:code|status) "
            r"(?P<status>\d+)",
            "setuptools (`setup.py build_ext`, the build of a C/C++/CUDA extension) ran the "
            "compiler or linker named and it failed; its `error:` lines are above this one.",
            (("Read the compiler's first `error:` or `fatal error:` line above: a missing "
             "header (install what provides it), a compiler the CUDA toolkit rejects "
             "(`unsupported GNU version`: a gcc within the toolkit's bounds via `CC`/`CXX`), "
             "or an nvcc missing or older than the code needs (`CUDA_HOME` at a full toolkit "
             "of torch's CUDA version)."),) + _BUILD_SOLUTIONS[1:],
            ("error: command '/usr/bin/gcc' failed with exit code 1",
             # https://github.com/microsoft/computervision-recipes/issues/617 (train): the
             # distutils before setuptools 59 said `exit status`
             "error: command '/usr/local/cuda/bin/nvcc' failed with exit status 1")),
    Message("cargo-could-not-compile", "cargo", "could not compile",
            r"error: could not compile `(?P<crate>[^`\s]+)`(?: \((?P<target>[^)\n]+)\))?",
            "cargo failed to compile a Rust crate; the `error[E…]` lines above say why. "
            "sglang's router (sglang-router, sgl-model-gateway) is Rust: installing it from a "
            "source distribution or a git checkout compiles it.",
            (("Install the router's prebuilt wheel (`pip install sglang-router`, Linux x86_64 "
             "and aarch64) instead of building it; to build from source, use a current Rust "
             "toolchain (`rustup update stable`; a distribution's packaged rustc is often "
             "older than the router's dependencies require)."),
             ("Read the first `error[E…]` or `error:` line above: it names the crate and line "
              "that failed.")),
            ("error: could not compile `rbad` (lib) due to 1 previous error",)),
    Message("cargo-rustc-too-old", "cargo", "is not supported by the following package",
            r"error: rustc (?P<rustc>\S+) is not supported by the following packages?:",
            "cargo's rustc is older than the rust-version a crate of the build requires (the "
            "next line names the crate and the rustc it requires).",
            (("Update the Rust toolchain to at least the version the next line names: "
             "`rustup update stable` (a distribution's packaged rustc is often too old), or "
             "install the router's prebuilt wheel instead of building it."),),
            ("error: rustc 1.95.0 is not supported by the following package:",)),
)

TORCH_COMPILE: tuple[Message, ...] = (
    Message("dynamo-backend-failed", "torch", "raised:\\n",
            r"(?:torch\._dynamo\.exc\.)?BackendCompilerFailed: backend='(?P<backend>[^'\n]+)' "
            r"raised:",
            "torch.compile's backend failed to compile a graph; the next line is the "
            "exception it raised (its class and message say what failed).",
            (("Read the exception on the next line: it is the cause (a Triton kernel out of "
             "resources, a compiler error, an operator the backend does not support)."),
             ("To get past it, run sglang without torch.compile: drop --enable-torch-compile; "
             "piecewise CUDA graphs compile too — drop --enable-piecewise-cuda-graph "
             "(0.5.3.post2 to 0.5.9) or add --disable-piecewise-cuda-graph (0.5.10 to "
             "0.5.13.post1)."),),
            # the f-string of torch/_dynamo/exc.py; the line as
            # https://github.com/vllm-project/vllm/issues/13255 quotes it
            ("[rank0]: torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",)),
    Message("inductor-cpp-compile-error", "torch", "C++ compile error",
            r"(?:CppCompileError|CUDACompileError): C\+\+ compile error\n\nCommand:\n"
            r"(?P<command>[^\n]+)\n\nOutput:\n",
            "torch.compile's inductor backend generated C++ (or CUDA) code and the compiler "
            "failed on it; the message's `Output:` section is the compiler's own error.",
            (("Read the compiler's error under `Output:`: `Python.h: No such file or "
             "directory` needs the interpreter's development headers (python3.X-dev); a "
             "missing or too old compiler needs g++ installed or named with the CXX "
             "environment variable (inductor's `cpp.cxx` reads it)."),
             ("To get past it, run sglang without torch.compile: drop --enable-torch-compile; "
             "piecewise CUDA graphs compile too — drop --enable-piecewise-cuda-graph "
             "(0.5.3.post2 to 0.5.9) or add --disable-piecewise-cuda-graph (0.5.10 to "
             "0.5.13.post1).")),
            ()),  # the real lines (the command is 900 characters) are in tests/fixtures/buildjit/
    Message("inductor-no-cxx-compiler", "torch", "No working C++ compiler found in ",
            r"No working C\+\+ compiler found in torch\._inductor\.config\.cpp\.cxx: "
            r"(?P<compiler>[^\n]+)",
            "torch.compile's inductor backend found no C++ compiler to build its generated "
            "code with (it runs `g++`, or what the CXX environment variable names).",
            (("Install a C++ compiler (`apt-get install g++`, or the distribution's "
             "equivalent) or point CXX at one; or run sglang without torch.compile (drop "
             "--enable-torch-compile)."),),
            (("torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler "
              "found in torch._inductor.config.cpp.cxx: (None, '/tmp/buildjit/nocxx/g++')"),)),
    Message("inductor-triton-missing", "torch", "Cannot find a working triton installation.",
            r"Cannot find a working triton installation\.",
            "torch.compile's inductor backend needs Triton for GPU code and found none, or "
            "one too old for this torch.",
            (("Install the Triton this torch was built with: reinstall torch at the version "
             "sglang pins (`pip install torch==<pinned> --force-reinstall`, which brings its "
             "triton), or use the lmsysorg/sglang image; or run sglang without torch.compile "
             "(drop --enable-torch-compile)."),),
            ()),
    Message("inductor-gpu-too-old", "torch", "which is too old to be supported by the triton "
            "GPU compiler",
            r"Found (?P<gpu>.+?) which is too old to be supported by the triton GPU compiler"
            r"[^\n]*?capability (?P<capability>\d+\.\d+)",
            "Triton, which torch.compile's inductor backend compiles GPU code with, supports "
            "CUDA capability 7.0 and newer; this GPU is older.",
            (("Run sglang without torch.compile on this GPU: drop --enable-torch-compile, and "
             "drop --enable-piecewise-cuda-graph (0.5.3.post2 to 0.5.9) or add "
             "--disable-piecewise-cuda-graph (0.5.10 to 0.5.13.post1); sglang's own Triton "
             "kernels need the same capability, so a GPU of capability 7.0 or newer is "
             "needed to serve with them."),),
            # https://github.com/vllm-project/vllm/issues/13255, the line after the backend's
            (("RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by "
             "the triton GPU compiler, which is used as the backend. Triton only supports "
             "devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.0"),)),
)

# torch/utils/cpp_extension.py's raise sites that tell the user what to change, by the head of
# their message; the others (internal asserts, Windows and SYCL set-up) make no record.
_NINJA = (("Install ninja in the environment that builds: `pip install ninja` (the message "
          "itself says so), and check that `ninja --version` runs."),)
TORCH_SITE_REMEDIES: Mapping[str, tuple[str, ...]] = {
    "CUDA_HOME environment variable is not set": _CUDA_HOME,
    "CUDA was not found on the system": _CUDA_HOME,
    "nvcc not found at": (
        ("CUDA_HOME (or the CUDA found on PATH) names a directory without `bin/nvcc`: point "
        "CUDA_HOME at a full CUDA toolkit of torch's CUDA version, or install one (the "
        "runtime-only CUDA of a container or of the nvidia-* pip packages has no nvcc)."),),
    "ROCM_HOME environment variable is not set": (
        "Point ROCM_HOME at the ROCm install: `export ROCM_HOME=/opt/rocm`.",),
    "Ninja is required to load C++ extensions": _NINJA,
    "With dlink=True, ninja is required": _NINJA,
    "The current installed version of": (
        ("Use a host compiler within the bounds this CUDA version accepts (the message names "
        "them): install that gcc/g++ and point the build at it with `export CXX=g++-<N>` "
        "(cpp_extension reads CXX; `c++` otherwise), or use a CUDA toolkit that supports "
        "the installed compiler."),),
    "The detected CUDA version (%s) mismatches": (
        ("Make the CUDA toolkit that compiles (CUDA_HOME's nvcc, the first value) the same "
        "major version as the one torch was built with (the second): point CUDA_HOME at a "
        "toolkit of torch's version, or install a torch built for the toolkit's CUDA from "
        "PyTorch's index (`pip install torch --index-url "
        "https://download.pytorch.org/whl/cu<XY>`) — sglang pins torch, so take the CUDA "
        "variant of the version it pins."),),
    "Unknown CUDA arch ({arch}) or GPU not supported": (
        ("This torch does not know the GPU architecture named: set TORCH_CUDA_ARCH_LIST to "
        "architectures it knows (such as `9.0` for H100) or upgrade torch to a release "
        "that supports the GPU (and with it sglang, which pins torch)."),),
}


@dataclass(frozen=True, slots=True)
class Wheels:
    """What PyPI has of one of sglang's packages: the newest release's wheels."""

    package: str
    version: str
    requires_python: str
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Facts:
    read: Mapping[str, tuple[tuple[str, str], ...]]  # message key → (tool, version) that print it
    torch_sites: Mapping[tuple[str, str], tuple[str, ...]]  # (class, template) → torch versions
    wheels: tuple[Wheels, ...]


def read_facts(path: Path = FACTS) -> Facts:
    read: dict[str, list[tuple[str, str]]] = {}
    sites: dict[tuple[str, str], list[str]] = {}
    wheels: list[Wheels] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        kind, *rest = line.split("\t")
        if kind == "literal":
            tool, version, key = rest
            read.setdefault(key, []).append((tool, version))
        elif kind == "torch-site":
            version, cls, template = rest
            sites.setdefault((cls, json.loads(template)), []).append(version)
        elif kind == "wheels":
            package, version, requires, tags = rest
            wheels.append(Wheels(package, version, requires, tuple(tags.split(","))))
    return Facts({k: tuple(v) for k, v in read.items()},
                 {k: tuple(v) for k, v in sites.items()}, tuple(wheels))


def record_id(key: str) -> str:
    return hashlib.sha256(f"sglang-matcher/buildjit/{key}".encode()).hexdigest()[:16]


def _versions(read: Sequence[tuple[str, str]], tool: str) -> list[str]:
    held = {v for t, v in read if t == tool}
    return compact_ranges(held, sort_versions(held))


# How `buildjit_facts` knows a tool prints a message.
HOW_READ: Mapping[str, str] = {
    "pip": "found in its source", "uv": "found in its binary",
    "scikit-build-core": "found in its source", "torch": "found in its source",
    "nvcc": "printed when run on a failing source", "gcc": "printed when run on a failing source",
    "cmake": "printed when run on a failing project",
    "setuptools": "printed when run on a failing extension build",
    "cargo": "printed when run on a failing crate",
}


def message_record(m: Message, read: Sequence[tuple[str, str]]) -> dict[str, Any]:
    tools = sorted({t for t, _ in read})
    said = ", ".join(f"{t} {', '.join(sort_versions({v for tt, v in read if tt == t}))}"
                     for t in tools)
    rec: dict[str, Any] = {
        "id": record_id(m.key),
        "slug": m.key,
        "errorMessage": m.literal.strip(),
        "messagePattern": m.pattern,
        "errorClass": m.error_class,
        "errorType": "install" if m.tool in ("pip", "uv") else "build",
        "severity": m.severity,
        "documentation": f"{m.documentation} Printed by {said} ({HOW_READ[m.tool]}). "
                         f"Advice: {INSTALL_DOC}, and the tool's own message.",
        "solutions": list(m.solutions),
        "tags": ["buildjit", m.tool, "install" if m.tool in ("pip", "uv") else "build"],
        "sourcePackage": m.tool,
        "sourceVersions": _versions(read, tools[0]) if len(tools) == 1 else [],
        "generator": GENERATOR,
    }
    if m.examples:
        rec["examples"] = {"match": list(m.examples)}
    return rec


def torch_site_record(cls: str, template: str, versions: Sequence[str],
                      read: Sequence[str]) -> dict[str, Any] | None:
    remedy = next((s for head, s in TORCH_SITE_REMEDIES.items() if template.startswith(head)),
                  None)
    if remedy is None:
        return None
    from matcher.catalog.patterns import escape_literal, pattern_from_template

    if "%s" in template:  # a constant raised with its values: Python prints the tuple
        pattern = (r"(?<![\s\S])\s*\(?'?" + escape_literal(template).replace("%s", "(?:%s|.+?)")
                   + r"'?(?:, '(?P<found>[^']*)', '(?P<expected>[^']*)'\)?)?")
    else:
        pattern = r"(?<![\s\S])\s*" + pattern_from_template(template)
    return {
        "id": record_id(f"torch-site\n{cls}\n{template}"),
        "slug": "torch-cpp-extension-" + _slug(template),
        "errorMessage": template,
        "messagePattern": pattern,
        "errorClass": cls,
        "errorType": "raise",
        "severity": "error",
        "filePath": "torch/utils/cpp_extension.py",
        "documentation": (f"torch.utils.cpp_extension raises {cls} with this message when it "
                          "sets up a C++/CUDA extension build (flashinfer's and sglang's JIT "
                          "kernels, sgl-kernel or other packages built from source). Read in "
                          f"torch {', '.join(sort_versions(set(versions)))} "
                          "(torch/utils/cpp_extension.py). Advice: the message itself, "
                          f"cpp_extension's source, and {INSTALL_DOC}."),
        "solutions": list(remedy),
        "tags": ["buildjit", "torch", "cpp_extension", "build"],
        "sourcePackage": "torch",
        "sourceVersions": compact_ranges(set(versions), sort_versions(set(read))),
        "generator": GENERATOR,
    }


def _slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))[:48].rstrip("-")


def _platforms(w: Wheels) -> str:
    """`CPython 3.10+ (abi3) on manylinux2014 x86_64, aarch64` from the wheels' tags."""
    if not any(t != "sdist" for t in w.tags):
        return "a source distribution only"
    pythons, places = set(), set()
    for tag in w.tags:
        if tag == "sdist":
            continue
        py, abi, plat = tag.split("-", 2)
        pythons.add("any Python 3" if py.startswith("py3") else
                    f"CPython {py[2]}.{py[3:]}" + ("+ (abi3)" if abi == "abi3" else ""))
        places.add("any platform" if plat == "any" else plat.split(".")[-1])
    text = f"wheels for {', '.join(sorted(pythons))} on {', '.join(sorted(places))}"
    return text + (" and a source distribution" if "sdist" in w.tags else
                   " (no source distribution)")


# What sglang's docs say about installing each of its packages besides the wheel tags.
PACKAGE_NOTES: Mapping[str, str] = {
    "flashinfer-python": (
        "flashinfer runs on Linux only (JIT kernels need a CUDA GPU of sm75 or newer). Its "
        "releases before PyPI carried them, and its release candidates, came from FlashInfer's "
        "own index, which sglang 0.4.x's install guide named: `--find-links "
        "https://flashinfer.ai/whl/cu<XY>/torch<A.B>/flashinfer-python` (the CUDA and torch "
        "versions of the installed torch); uv needs `--prerelease=allow` for a pinned release "
        "candidate (sglang's install guide)."),
    "sgl-kernel": "sgl-kernel was renamed sglang-kernel (from 0.4); sglang pins one of them.",
    "sglang-kernel": "sglang-kernel is sgl-kernel's new name (from 0.4).",
    "sglang": "Other platforms (AMD, Intel CPU, TPU, Ascend) have their own install pages in "
              "sglang's docs.",
}


# Lines pip 26.3 and uv 0.13.9 printed here for sglang's packages (tests/fixtures/buildjit/).
PACKAGE_EXAMPLES: Mapping[str, tuple[str, ...]] = {
    "pip-no-version": (
        ("ERROR: Could not find a version that satisfies the requirement sgl-kernel "
        "(from versions: none)"),
        ("ERROR: Could not find a version that satisfies the requirement sglang-kernel "
        "(from versions: none)")),
    "pip-no-distribution": ("ERROR: No matching distribution found for sgl-kernel==0.0.99",
                            "ERROR: No matching distribution found for sglang-kernel",
                            "ERROR: No matching distribution found for sglang==0.5.6"),
    "uv-no-version": (
        ("  cause: Because there is no version of sgl-kernel==0.0.99 and you require "
        "sgl-kernel==0.0.99, we can conclude that your requirements are unsatisfiable."),),
}


def package_records(w: Wheels, read: Facts) -> list[dict[str, Any]]:
    """The no-version messages of pip and uv for one of sglang's packages, with what PyPI has."""
    name = re.escape(w.package)
    have = _platforms(w)
    solution = (f"{w.package} {w.version} (the newest on PyPI) is published as {have}, for "
                f"Python {w.requires_python or 'any'}: on another OS, CPU or Python pip and uv "
                "find nothing to install. Install on Linux x86_64/aarch64 with a Python in "
                "that range, or use sglang's Docker image lmsysorg/sglang "
                f"({INSTALL_DOC}); check the pinned version exists: "
                f"`pip index versions {w.package}`.")
    if w.package in PACKAGE_NOTES:
        solution += " " + PACKAGE_NOTES[w.package]
    out = []
    for base in ("pip-no-version", "pip-no-distribution", "uv-no-version"):
        m = next(x for x in INSTALLER if x.key == base)
        if base not in read.read:
            continue
        lead = {"pip-no-version": r"Could not find a (?:pre-release )?version that satisfies "
                                  r"the requirement ",
                "pip-no-distribution": r"No matching distribution found for ",
                "uv-no-version": r"Because there is no version of "}[base]
        rec = message_record(m, read.read[base])
        rec.update({
            "id": record_id(f"{base}\n{w.package}"),
            "slug": f"{base}-{w.package}",
            "errorMessage": f"{m.literal.strip()} {w.package}",
            "messagePattern": lead + rf"(?P<package>{name})\b(?![-_.]\w)(?P<spec>[^\s;,(]*)"
                              + (r"(?:;[^(\n]*)?(?: \(from [^)]*\))? \(from versions: "
                                 r"(?P<versions>[^)]*)\)" if base == "pip-no-version" else ""),
            "solutions": [solution, *m.solutions],
            "tags": [*rec["tags"], w.package],
        })
        rec["documentation"] += f" PyPI's JSON API, read at generation: {w.package} {w.version}."
        rec.pop("examples", None)
        seen = [line for line in PACKAGE_EXAMPLES.get(base, ())
                if re.search(rf"(?<![\w-]){name}(?![\w.-])", line)]
        if seen:
            rec["examples"] = {"match": seen}
        out.append(rec)
    return out


def build(facts: Facts) -> list[dict[str, Any]]:
    records = [message_record(m, facts.read[m.key])
               for m in (*INSTALLER, *COMPILER, *BUILD_SYSTEMS, *TORCH_COMPILE)
               if m.key in facts.read]
    torch_read = sorted({v for vs in facts.torch_sites.values() for v in vs})
    for (cls, template), versions in sorted(facts.torch_sites.items()):
        rec = torch_site_record(cls, template, versions, torch_read)
        if rec is not None:
            records.append(rec)
    for w in facts.wheels:
        records += package_records(w, facts)
    ids = [r["id"] for r in records]
    if len(ids) != len(set(ids)):
        raise ValueError("two buildjit records share an id")
    return records


def write(records: Sequence[dict[str, Any]], path: Path) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                            for r in records), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.buildjit",
                                 description="write the install and build failures' records")
    ap.add_argument("--facts", type=Path, default=FACTS)
    ap.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = ap.parse_args(argv)
    records = build(read_facts(args.facts))
    write(records, args.output)
    print(f"{args.output}: {len(records)} records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
