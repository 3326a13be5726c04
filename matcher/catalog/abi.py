"""Compiled packages built for another torch, and packages that check another's version —
the `pip install` that fixes each, decided per event.

    ImportError: /…/site-packages/flashinfer/flashinfer_kernels.abi3.so: undefined symbol: _ZN5torch3jit…
    RuntimeError: operator torchvision::nms does not exist
    ERROR! Intel® Extension for PyTorch* needs to work with PyTorch 2.6.*, but PyTorch 2.7.0+cu126 is found. …
    ImportError: tokenizers>=0.11.1,!=0.11.3,<0.14 is required for a normal functioning of this module, but found tokenizers==0.19.1.
    sgl-kernel is installed with version 0.0.5, which is less than the minimum required version 0.0.8. …

An undefined symbol names the library that needs it (its package, from the path under
`site-packages/`) and what it needs: `_ZN3c10…`/`_ZN5torch…`/`_ZN2at…` is torch's C++ API (the
package was built against another torch), `cuXxx` the NVIDIA driver's API (the driver is older
than the CUDA it was built for), `ncclXxx` NCCL's. The fix reinstalls the package at the
version the running sglang release pins (the shipped symbol index's `P` lines), the torch
companions at the version built for the torch that release pins (`torch-companions.tsv`), or
else a build for the installed torch. A version check says what it requires and what it found;
the fix installs what it requires. Pure but for reading the shipped tables.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from matcher.catalog.answer import requires
from matcher.catalog.symbols import DISTRIBUTION_OF_MODULE

if TYPE_CHECKING:
    from matcher.catalog.answer import Answer

# -- what the message says ---------------------------------------------------------------------

_SYMBOL = re.compile(r"(?P<library>/\S+?\.so(?:\.[\d.]+)?): undefined symbol: (?P<symbol>\S+)")
_SITE = re.compile(r"/(?:site|dist)-packages/(?P<top>[A-Za-z_]\w*)")
_TORCH_API = re.compile(r"^_ZN?K?\d*(?:3c10|5torch|2at|6caffe2|3c104cuda)|^_ZNK?3c10")
_DRIVER_API = re.compile(r"^cu[A-Z]\w*$")
_NCCL_API = re.compile(r"^nccl[A-Z]\w*$")

# Compiled modules installed at the top of site-packages, and import names whose distribution
# is not the import name with `_` → `-`.
EXTENSION_DISTRIBUTION = {
    "flash_attn_2_cuda": "flash-attn", "flash_attn_3_cuda": "flash-attn",
    "transformer_engine_extensions": "transformer-engine", "vllm_flash_attn": "vllm",
}


@dataclass(frozen=True, slots=True)
class Check:
    """A version check: the distribution, the requirement it states, the version it found."""

    distribution: str
    requirement: str  # a pip requirement: `torch==2.6.*`, `tokenizers>=0.11.1,!=0.11.3,<0.14`
    found: str


_CHECKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ipex", re.compile(r"Intel® Extension for PyTorch\* needs to work with PyTorch (?P<required>"
                        r"\d+\.\d+)\.\*, but PyTorch (?P<found>\S+) is found")),
    ("require", re.compile(r"(?P<requirement>[A-Za-z][\w.-]*[<>=!~][^\s]*) is required for a "
                           r"normal functioning of this module, but found (?P<dist>[\w.-]+)=="
                           r"(?P<found>[^\s]+?)\.?(?:\s|$)")),
    ("minimum", re.compile(r"(?P<dist>[A-Za-z][\w.-]*) is installed with version (?P<found>\S+), "
                           r"which is less than the minimum required version (?P<required>"
                           r"\d[\w.+]*?)\.?(?:\s|$)")),
    ("absent", re.compile(r"(?P<dist>[A-Za-z][\w.-]*) with minimum required version (?P<required>"
                          r"\d[\w.+]*) is not installed")),
    # transformers' `require_version` when no version is installed (other projects call it for
    # their own dependencies: LlamaFactory's `require_version("sglang>=0.4.5", …)`)
    ("wanted", re.compile(r"The '(?P<requirement>(?P<dist>[A-Za-z][\w.-]*)(?:\[[\w,.-]*\])?"
                          r"(?:[<>=!~][^'\s]*)?)' distribution was not found and is required")),
)
_TORCHVISION = re.compile(r"operator torchvision::\w+ does not exist|Detected that PyTorch and "
                          r"torchvision were compiled with different CUDA (?:major )?versions")


def version_check(message: str) -> Check | None:
    for kind, rx in _CHECKS:
        m = rx.search(message)
        if m is None:
            continue
        if kind == "ipex":
            return Check("torch", f"torch=={m['required']}.*", m["found"])
        if kind == "require":
            return Check(m["dist"], m["requirement"], m["found"])
        if kind == "minimum":
            return Check(m["dist"], f"{m['dist']}>={m['required']}", m["found"])
        if kind == "wanted":
            return Check(m["dist"], m["requirement"], "")
        return Check(m["dist"], f"{m['dist']}>={m['required']}", "")
    return None


# sgl_kernel's loader gives up (`load_utils.py`): what it tried, the GPU it saw, and (since
# 0.3.x) the errors of the attempts, one `- Class: message` line each.
_SGL_KERNEL = re.compile(r"\[sgl_kernel\] CRITICAL: Could not load any common_ops library")
_MISSING = re.compile(r"(?:^|Error: |^- \w+: )(?P<soname>[\w+.-]+\.so(?:\.\d+)*): cannot open "
                      r"shared object file", re.MULTILINE)
# tvm-ffi's loader (`DSOLibrary::Load`, src/ffi/extra/library_module_dynamic_lib.cc) names the
# module it opened and appends dlerror(): flashinfer's JIT modules and deep_gemm load through it.
_TVM_FFI = re.compile(r"Failed to load dynamic shared library (?P<module>\S+) "
                      r"(?P<soname>[\w+.-]+\.so(?:\.\d+)*): cannot open shared object file")
_NO_GPU = re.compile(r"Compute capability: None|Expected variant: CPU")


def computes(message: str) -> bool:
    """This module has an answer for the message's shape (whatever its exception class)."""
    return bool(_SYMBOL.search(message) or _TORCHVISION.search(message)
                or _SGL_KERNEL.search(message) or _TVM_FFI.search(message)
                or version_check(message) is not None)


def distribution_of(library: str) -> str | None:
    """`/…/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so` → `flash-attn`."""
    m = _SITE.search(library)
    if m is None:
        return None
    top = m["top"]
    if top in EXTENSION_DISTRIBUTION:
        return EXTENSION_DISTRIBUTION[top]
    if top in DISTRIBUTION_OF_MODULE:
        return DISTRIBUTION_OF_MODULE[top][0]
    return top.replace("_", "-")


def symbol_kind(symbol: str) -> str:
    if _TORCH_API.search(symbol):
        return "torch"
    if _DRIVER_API.match(symbol):
        return "driver"
    if _NCCL_API.match(symbol):
        return "nccl"
    return "other"


# -- the tables -----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def companions() -> dict[str, dict[str, str]]:
    from matcher.catalog import builtin_patterns_dir
    from matcher.catalog.companions import read_table

    return read_table(Path(builtin_patterns_dir()) / "sglang" / "generated" / "torch-companions.tsv")


def companion_for(package: str, torch: str) -> tuple[str, str] | None:
    """The release of a torch companion built for `torch` (`2.9.1+cu128` read as 2.9.1), or for
    the newest torch of the same minor when none requires it exactly: (version, its torch)."""
    table = companions().get(package, {})
    base = torch.split("+", 1)[0]
    if base in table:
        return table[base], base
    minor = ".".join(base.split(".")[:2]) + "."
    same = sorted((t for t in table if t.startswith(minor)), key=_vkey)
    return (table[same[-1]], same[-1]) if same else None


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.+]", v))


def pinned(distribution: str, sglang_version: str | None) -> tuple[str, str] | None:
    """(the name as pinned, the version) that the sglang release (or every release of a range)
    pins exactly for `distribution`, from the shipped symbol index."""
    from matcher.catalog import mismatch

    top = next((t for t, ds in DISTRIBUTION_OF_MODULE.items() if distribution in ds), None)
    if top is None or not sglang_version:
        return None
    index = mismatch.index_for(top)
    if index is None:
        return None
    pins = index.pins()
    found = {(m[1], m[2]) for r in mismatch.releases_in(sglang_version, pins)
             if (m := re.fullmatch(r"([\w.-]+)==([\w.+]+)", pins[r][0]))}
    return next(iter(found)) if len(found) == 1 else None


def recent_pins(distribution: str, count: int = 3) -> list[tuple[str, str, str]]:
    """The last `count` distinct (sglang release, pin of `distribution`, torch pin) of the index."""
    from matcher.catalog import mismatch
    from matcher.catalog.versions import version_key

    top = next((t for t, ds in DISTRIBUTION_OF_MODULE.items() if distribution in ds), None)
    index = mismatch.index_for(top) if top else None
    torch = mismatch.index_for("torch")
    if index is None or torch is None:
        return []
    pins, torch_pins = index.pins(), torch.pins()
    out: list[tuple[str, str, str]] = []
    for release in sorted(pins, key=version_key, reverse=True):
        spec = pins[release][0]
        if "==" not in spec or (out and out[-1][1] == spec):
            continue
        out.append((release, spec, torch_pins.get(release, ("torch", 0))[0]))
        if len(out) == count:
            break
    return out


# -- the answers ----------------------------------------------------------------------------------

def remedy(message: str, sglang_version: str | None) -> Answer | None:
    m = _SYMBOL.search(message)
    if m is not None:
        return symbol_answer(m["library"], m["symbol"], sglang_version)
    if _TORCHVISION.search(message):
        return companion_answer("torchvision", sglang_version)
    if _SGL_KERNEL.search(message):
        return sgl_kernel_answer(message, sglang_version)
    if (ffi := _TVM_FFI.search(message)) is not None:
        return tvm_ffi_answer(ffi["module"], ffi["soname"])
    check = version_check(message)
    return check_answer(check, sglang_version) if check is not None else None


_KIND_DOC = {
    "torch": "`{symbol}` is a function of torch's C++ API (c10, at, torch): {lib} was built "
             "against another torch than the one installed (or with the other C++ ABI flag).",
    "driver": "`{symbol}` is a function of the NVIDIA driver's API: the driver is older than "
              "the CUDA that {lib} was built for.",
    "nccl": "`{symbol}` is an NCCL function: the NCCL loaded is older than the one {lib} was "
            "built for.",
    "other": "{lib} needs `{symbol}`, which no library loaded defines: it was built against "
             "other versions of its dependencies (most often torch) than those installed.",
}


def symbol_answer(library: str, symbol: str, sglang_version: str | None) -> Answer:
    from matcher.catalog.answer import Answer

    dist = distribution_of(library)
    kind = symbol_kind(symbol)
    lib = f"the {dist} package ({library.rsplit('/', 1)[-1]})" if dist else library
    doc = _KIND_DOC[kind].format(symbol=symbol, lib=lib)
    if kind == "driver":
        return Answer(doc, (
            ("Upgrade the NVIDIA driver: nvidia-smi shows the newest CUDA the driver supports, "
            "which must be at least the CUDA of torch (python -c 'import torch; "
            "print(torch.version.cuda)')"),
            (f"Or install the {dist or 'package'} build made for the CUDA version your driver "
            "supports")), ())
    if kind == "nccl":
        return Answer(doc, (
            ("Reinstall the NCCL that your torch requires: " + requires("torch", "nccl")
             + " names it (nvidia-nccl-cu12==V or nvidia-nccl-cu13==V); pip install "
             "--force-reinstall 'nvidia-nccl-cu12==V', and unset LD_LIBRARY_PATH entries that "
             "put another libnccl.so.2 first"),), ())
    if dist in ("torchvision", "torchaudio"):
        got = companion_answer(dist, sglang_version)
        return Answer(doc + " " + got.documentation, got.solutions, got.installs)
    if dist is None:
        return Answer(doc, (("Rebuild the extension against the torch installed (its setup.py / "
                            "pip install --no-build-isolation from its source), or install the "
                            "torch it was built for"),), ())
    return _reinstall(doc, dist, sglang_version)


def sgl_kernel_answer(message: str, sglang_version: str | None) -> Answer:
    """sgl_kernel found no common_ops it could load: the cause its message carries (a library
    missing, an undefined symbol — answered above —, no GPU seen), else a reinstall."""
    from matcher.catalog.answer import Answer

    doc = "sgl_kernel could not load its compiled operators (common_ops) for this GPU."
    missing = _MISSING.search(message)
    if missing is not None:
        got = soname_answer(missing["soname"])
        if got is not None:
            return Answer(doc + " " + got.documentation, got.solutions, got.installs)
    found = re.findall(r"found files: (\[[^\]\n]*\])", message)
    if _NO_GPU.search(message) and found and all(f == "[]" for f in found):
        return Answer(doc + " torch saw no CUDA GPU (compute capability None), so it looked for "
                      "a CPU variant the CUDA wheel does not have.", (
                          ("Make the GPU visible to torch: python -c 'import torch; "
                          "print(torch.__version__, torch.cuda.is_available())' must show a CUDA "
                          "build (not +cpu) and True — install torch's CUDA build (the one sglang "
                          "pins), start the container with --gpus all, and check "
                          "CUDA_VISIBLE_DEVICES"),), ())
    got = _reinstall(doc + " Its message names no cause; python -c 'import sgl_kernel' prints the "
                     "underlying error.", "sglang-kernel", sglang_version)
    return got


def tvm_ffi_answer(module: str, soname: str) -> Answer:
    """tvm-ffi could not open a compiled module because a library it links is not found: the
    package that installs the library (the soname table), and the build of the module's own
    package for the CUDA in use when the library is of another CUDA release."""
    from matcher.catalog.answer import Answer

    dist = distribution_of(module)
    owner = f"the {dist} package's {module.rsplit('/', 1)[-1]}" if dist else module
    doc = (f"tvm-ffi could not load {owner}: it links {soname}, which the dynamic loader did "
           "not find.")
    rebuild = (f"Or install a build of {dist or 'the package that holds the module'} for the "
               "CUDA your torch uses (python -c 'import torch; print(torch.version.cuda)'): a CUDA "
               "library of another major release than torch's means the module was built for it")
    got = soname_answer(soname)
    if got is None:
        find = f"Install what provides {soname} and put its directory on LD_LIBRARY_PATH"
        return Answer(doc, (find, rebuild), ())
    return Answer(doc + " " + got.documentation, (*got.solutions, rebuild), got.installs)


@functools.lru_cache(maxsize=1)
def _sonames() -> dict[str, list[tuple[str, str, str]]]:
    from matcher.catalog import builtin_patterns_dir
    from matcher.catalog.soname_sources import read_tsv

    out: dict[str, list[tuple[str, str, str]]] = {}
    try:
        rows = read_tsv(Path(builtin_patterns_dir()) / "sglang" / "generated" / "sonames.tsv")
    except (OSError, ValueError):
        return out
    for r in rows:
        out.setdefault(r.soname, []).append((r.kind, r.package, r.version))
    return out


def soname_answer(soname: str) -> Answer | None:
    """Which package installs a shared library (the shipped soname table)."""
    from matcher.catalog.answer import Answer

    rows = _sonames().get(soname)
    if not rows:
        return None
    if any(kind == "driver" for kind, _, _ in rows):
        return Answer(f"{soname} is the NVIDIA driver's, installed with it on the host.", (
            ("Start the container with the NVIDIA runtime (docker run --gpus all …; Kubernetes: "
            "request nvidia.com/gpu), or install the driver on the host (nvidia-smi must work)"),),
            ())
    apt = sorted({p for kind, p, _ in rows if kind == "apt"})
    pip = sorted({(p, v) for kind, p, v in rows if kind == "pip" and p != "torch"},
                 key=lambda pv: _vkey(pv[1]))
    if apt:
        return Answer(f"{soname} is installed by the Debian/Ubuntu package {', '.join(apt[:3])}.",
                      (f"Install it: apt-get install -y {apt[0]}",), ())
    if pip:
        name, version = pip[-1]
        return Answer(f"{soname} is installed by the pip package {name}.",
                      ((f"Install the {name} your torch requires ({requires('torch', 'nvidia')} "
                       f"names its version), e.g. pip install '{name}=={version}'"),),
                      (f"{name}=={version}",))
    return None


def _reinstall(doc: str, dist: str, sglang_version: str | None) -> Answer:
    from matcher.catalog.answer import Answer

    pin = pinned(dist, sglang_version)
    torch = pinned("torch", sglang_version)
    if pin is not None:
        name, version = pin
        with_torch = f" with torch=={torch[1]}" if torch else ""
        return Answer(
            doc + f" sglang {sglang_version} pins {name}=={version}{with_torch}.",
            (f"Reinstall the {name} that sglang {sglang_version} pins, and the torch it pins: "
             f"pip install --force-reinstall --no-deps '{name}=={version}'"
             + (f" 'torch=={torch[1]}'" if torch else ""),), (f"{name}=={version}",))
    recent = recent_pins(dist)
    said = "; ".join(f"sglang {r} pins {spec} with {t}" for r, spec, t in recent)
    solutions = [f"Reinstall the {dist} your sglang pins with the torch it pins: "
                 + requires("sglang") + f" lists both ({dist}==V, torch==T); "
                 f"then pip install --force-reinstall --no-cache-dir --no-deps '{dist}==V' "
                 "'torch==T'" if recent else
                 f"Reinstall {dist} built for the torch installed: pip install --force-reinstall "
                 f"--no-cache-dir --no-build-isolation {dist} (a wheel made for your torch and "
                 "CUDA, or a build from source against it)"]
    if recent:
        solutions.append("Or reinstall sglang's pinned set together: pip install --force-reinstall "
                         f"'sglang==<your release>' (which reinstalls {dist} and torch as it pins them)")
    return Answer(doc + (f" Recent pins: {said}." if said else ""), tuple(solutions), ())


def companion_answer(package: str, sglang_version: str | None) -> Answer:
    """torchvision/torchaudio built for another torch: the release built for the torch the
    sglang release pins, else the table."""
    from matcher.catalog.answer import Answer

    doc = (f"{package} is compiled against one torch release and must be installed at the "
           "release built for the torch installed.")
    torch = pinned("torch", sglang_version)
    got = companion_for(package, torch[1]) if torch else None
    if torch and got:
        version, built_for = got
        return Answer(doc + f" sglang {sglang_version} pins torch=={torch[1]}; {package} "
                      f"{version} is built for torch {built_for}.",
                      ((f"Install the {package} built for that torch: pip install --no-deps "
                       f"'{package}=={version}'"),), (f"{package}=={version}",))
    table = companions().get(package, {})
    newest = sorted(table, key=_vkey)[-4:]
    pairs = ", ".join(f"torch {t} → {package} {table[t]}" for t in reversed(newest))
    return Answer(doc + (f" Releases: {pairs}." if pairs else ""),
                  (f"Install the {package} built for your torch (pip show torch): "
                   f"pip install --no-deps '{package}==<its release for that torch>'"
                   + (f" ({pairs})" if pairs else ""),), ())


def check_answer(check: Check, sglang_version: str | None) -> Answer:
    from matcher.catalog.answer import Answer

    found = f" (found {check.found})" if check.found else " (none installed)"
    doc = f"A package checked the version of {check.distribution}: it requires " \
          f"{check.requirement}{found}."
    requirement = check.requirement
    pin = pinned(check.distribution, sglang_version)
    if pin is not None and ">=" in requirement:
        requirement = f"{pin[0]}=={pin[1]}"
        doc += f" sglang {sglang_version} pins {requirement}."
    solutions = [f"Install what it requires: pip install '{requirement}'"]
    if check.distribution == "torch" and check.found:
        minor = ".".join(check.found.split("+")[0].split(".")[:2])
        solutions.append("Or keep this torch and install the Intel Extension for PyTorch of "
                         f"its minor release: pip install 'intel-extension-for-pytorch=={minor}.*'")
    return Answer(doc, tuple(solutions), (requirement,))



# -- the records ----------------------------------------------------------------------------------

GENERATOR = "matcher.catalog.abi"
OUTPUT = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated" / "abi.jsonl"
# Where a loader's message starts an error (see `sonames.START`): not inside torchvision's
# `UserWarning: Failed to load image Python extension: '…/image.so: undefined symbol: …'`, which
# healthy launches print.
_START = r"(?:^|(?<=Error: )|(?<=^- ))"

_CHECK_DOC = {
    "intel-extension-for-pytorch": "Intel Extension for PyTorch (IPEX) checks at import that "
    "torch has its own major.minor release and exits (status 127) when it does not.",
    "transformers": "transformers checks the versions of its dependencies at import "
    "(`require_version`, from its `dependency_versions_table`) and raises when one is "
    "outside the range it states.",
    "torchvision": "torchvision checks at import that it and torch were built for the same "
    "CUDA major version.",
}


# Real lines of the check sites, by (distribution, class).
CHECK_EXAMPLES: dict[tuple[str, str], list[str]] = {
    # https://github.com/sgl-project/sglang/issues/7547 (train)
    ("intel-extension-for-pytorch", "print"): [
        ("ERROR! Intel® Extension for PyTorch* needs to work with PyTorch 2.6.*, but PyTorch "
        "2.7.0+cu126 is found. Please switch to the matching version and run again.")],
    # transformers 5.25.0 imported with tokenizers 0.21.1, run here:
    # tests/fixtures/libs/transformers-5.25.0-tokenizers-0.21.1.log
    # https://github.com/hiyouga/LlamaFactory/issues/8544 (train)
    ("transformers", "PackageNotFoundError"): [
        ("importlib.metadata.PackageNotFoundError: No package metadata was found for The "
        "'sglang>=0.4.5' distribution was not found and is required by this application. ")],
    ("transformers", "ImportError"): [
        ("ImportError: tokenizers>=0.23.1,<0.24.0 is required for a normal functioning of this "
        "module, but found tokenizers==0.21.1.")],
}


def check_records(rows: list[tuple[str, list[str], str, str]]) -> list[dict[str, object]]:
    from matcher.catalog.patterns import pattern_from_template

    out: list[dict[str, object]] = []
    for dist, versions, kind, template in rows:
        pattern = pattern_from_template(template)
        if template.endswith("}"):  # a last hole may be empty (`{hint}`)
            pattern = pattern[: pattern.rfind("(.+?)")] + "(.*)"
        out.append(_record(
            f"check\n{dist}\n{template}", "version-check-" + dist + "-" + _slug(template),
            template, pattern, None if kind == "print" else kind,
            _CHECK_DOC.get(dist, f"{dist} checked the version of another package.")
            + " What it requires, what it found and the install that satisfies it are computed "
            "for each event from its message.",
            [("Install the version the message says is required (pip install '<package and "
             "version required>'), then start again; pip check lists the other conflicts")],
            dist, versions, CHECK_EXAMPLES.get((dist, kind), [])))
    return out


def _slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", re.sub(r"\{[^}]*\}", "", text.lower())))[:40]


def _record(key: str, slug: str, message: str, pattern: str, cls: str | None, doc: str,
            solutions: list[str], package: str, versions: list[str],
            examples: list[str] | None = None) -> dict[str, object]:
    import hashlib

    return {"id": hashlib.sha256(f"sglang-matcher/abi/{key}".encode()).hexdigest()[:16],
            "slug": slug, "errorMessage": message, "messagePattern": pattern, "errorClass": cls,
            "errorType": "dependency", "severity": "critical", "documentation": doc,
            "solutions": solutions, "tags": ["dependency", "version-mismatch", "abi"],
            "sourcePackage": package, "sourceVersions": versions, "generator": GENERATOR,
            "examples": {"match": examples or []}}


def shape_records() -> list[dict[str, object]]:
    return [
        _record("undefined symbol", "compiled-extension-undefined-symbol",
                "{library}: undefined symbol: {symbol}",
                _START + r"(?P<library>/\S+?\.so(?:\.[\d.]+)?): undefined symbol: (?P<symbol>\S+)",
                None, "A compiled extension could not be loaded: the dynamic linker did not find "
                "a function it was built against. Which package it is (from its path), what the "
                "symbol belongs to (torch's C++ API, the NVIDIA driver, NCCL) and the reinstall "
                "that fixes it are computed for each event.",
                [("Reinstall the package named in the path, built for the torch installed: "
                 "pip install --force-reinstall --no-cache-dir <package>==<the version your "
                 "sglang pins> (" + requires("sglang") + " lists its pins)")], "glibc (ld.so)", [],
                # https://github.com/flashinfer-ai/flashinfer/issues/911
                [("ImportError: /usr/local/lib/python3.10/dist-packages/flashinfer/flashinfer_"
                 "kernels.abi3.so: undefined symbol: _ZN5torch3jit17parseSchemaOrNameERKSsb")]),
        _record("torchvision operator", "torchvision-operator-does-not-exist",
                "operator torchvision::{operator} does not exist",
                r"operator torchvision::(?P<operator>\w+) does not exist", "RuntimeError",
                "torchvision registers its C++ operators (nms, roi_align …) from its compiled "
                "library at import; when that library was built for another torch it fails to "
                "load and the Python side then finds no operator. The torchvision built for the "
                "torch sglang pins is computed for each event.",
                [("Install the torchvision built for your torch (pip show torch): pip install "
                 "--no-deps 'torchvision==<its release for that torch>'")], "torch", [],
                # torchvision 0.24.1 (for torch 2.9.1) imported with torch 2.13.0+cpu, run here:
                # tests/fixtures/libs/torchvision-0.24.1-on-torch-2.13.0.log
                ["RuntimeError: operator torchvision::nms does not exist"]),
    ]


def sgl_kernel_record() -> dict[str, object]:
    """sgl_kernel's loader message by its head, for the releases whose full template no
    generated record holds (its lines changed over releases)."""
    return _record(
        "sgl_kernel common_ops", "sgl-kernel-common-ops-not-loaded",
        "[sgl_kernel] CRITICAL: Could not load any common_ops library!",
        # at the start of the message: when a library's own error comes first (`libnuma.so.1:
        # cannot open …` then this message), that error's record is the cause
        # and when its error details name a missing library or an undefined symbol, the
        # curated records of those causes (proven fixes) take the event
        r"(?<![\s\S])\s*\[sgl_kernel\] CRITICAL: Could not load any common_ops library!"
        r"(?![\s\S]*(?:undefined symbol: |cannot open shared object file))", None,
        "sgl_kernel could not load its compiled operators (common_ops) when imported, so sglang "
        "cannot start. The message lists what it tried, the GPU it saw and (in newer releases) "
        "the underlying errors; the cause and the fix are computed for each event from them.",
        [("Run python -c 'import sgl_kernel' in the same environment: the underlying error "
         "(a missing library, an undefined symbol) says what to install; reinstall the "
         "sglang-kernel your sglang pins with the torch it pins")], "sglang-kernel", [],
        # https://github.com/sgl-project/sglang/pull/12119 (train)
        ["[sgl_kernel] CRITICAL: Could not load any common_ops library!"])


def records() -> list[dict[str, object]]:
    from matcher.catalog.version_checks import read_table

    return [*shape_records(), sgl_kernel_record(), *check_records(read_table())]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from matcher.atomic import write_atomic

    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.abi",
                                 description="write the ABI and version-check records")
    ap.add_argument("-o", "--out", type=Path, default=OUTPUT)
    args = ap.parse_args(argv)
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records()]
    write_atomic(args.out, "".join(lines))
    print(f"{len(lines)} records", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
