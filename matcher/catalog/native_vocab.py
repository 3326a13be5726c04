"""The closed vocabularies of native libraries, read from the libraries themselves.

Each row is a string a library prints for one of its status codes, as the library returns it:

- CUDA runtime: `cudaGetErrorString` / `cudaGetErrorName` of every `cudaError_t` (no GPU needed),
  from each `libcudart.so` given (the `nvidia-cuda-runtime-cu1x` wheels, a toolkit's `lib64`);
- NCCL: `ncclGetErrorString` of every `ncclResult_t` (`libnccl.so.2` of the `nvidia-nccl-cu12`
  wheels);
- cuBLAS: `cublasGetStatusName` / `cublasGetStatusString` of every `cublasStatus_t`;
- cuDNN: `cudnnGetErrorString` of every `cudnnStatus_t` (cuDNN 8 numbers them 0…14, cuDNN 9 in
  blocks of a thousand);
- NCCL's `WARN` lines about connections and the network (sockets, IB verbs, CUDA calls, rings):
  their printf formats as the library holds them (`Call to ibv_modify_qp failed with error %s
  errno %d`), found among its strings by the heads in `NCCL_WARN_HEADS`;
- NVSHMEM's transport failures (`ibv_modify_qp failed`, `ep_connect failed` …), printed behind
  `FILE:LINE: non-zero status: N `: the messages its transport libraries hold
  (`nvshmem_transport_ibrc.so` …), found by `NVSHMEM_FAILURE`;
- HIP: `hipGetErrorString`'s table as ROCm's runtime (`ROCm/clr`, `hipamd/src/hip_error.cpp`)
  holds it at each release tag given, read with git from a clone (ROCm cannot be loaded here).

The rows go to a TSV file (`patterns/sglang/generated/native.vocab.tsv`) that
`matcher.catalog.native` turns into catalog records; that file is committed, so building the
catalog needs none of these libraries. Run again with the same libraries, it gives the same bytes.

    python -m matcher.catalog.native_vocab --cudart L … --nccl L … --cublas L … --cudnn L … \
        --hip-repo CLONE --hip-tag rocm-6.2.2 … -o patterns/sglang/generated/native.vocab.tsv
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

COLUMNS = ("family", "package", "version", "code", "name", "text")


@dataclass(frozen=True, order=True, slots=True)
class Entry:
    """One status of one library at one version: its number, its enum name, its text."""

    family: str  # cuda, hip, nccl, cublas, cudnn
    package: str  # the package that prints it: cuda-runtime, hip-runtime, nccl, cublas, cudnn
    version: str
    code: int
    name: str
    text: str

    def row(self) -> str:
        fields = (self.family, self.package, self.version, str(self.code), self.name, self.text)
        if any("\t" in f or "\n" in f for f in fields):
            raise ValueError(f"a tab or newline in {fields!r}")
        return "\t".join(fields)


def read_tsv(path: Path) -> list[Entry]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise ValueError(f"{path}: not a native vocabulary (first line must be the columns)")
    out = []
    for n, line in enumerate(lines[1:], 2):
        parts = line.split("\t")
        if len(parts) != len(COLUMNS):
            raise ValueError(f"{path}:{n}: {len(parts)} columns, {len(COLUMNS)} expected")
        family, package, version, code, name, text = parts
        out.append(Entry(family, package, version, int(code), name, text))
    return out


def write_tsv(entries: Iterable[Entry], path: Path) -> None:
    rows = ["\t".join(COLUMNS), *(e.row() for e in sorted(set(entries)))]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def _load(path: str | Path) -> ctypes.CDLL:
    # The library's own directory first: cuDNN 8 opens its sub-libraries by name.
    return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


def _text(value: bytes | None) -> str:
    return (value or b"").decode("utf-8", "replace")


# -- the libraries ------------------------------------------------------------------------------

CUDA_UNKNOWN = "unrecognized error code"
# cudaError_t values are below 1000, and cudaErrorApiFailureBase is 10000.
CUDA_CODES = (*range(1000), *range(10000, 10001))


def cuda_runtime(path: str | Path, version: str = "") -> list[Entry]:
    """`version`: the runtime's own when empty (`cudaRuntimeGetVersion`; CUDA 11 answers it only
    with a driver loaded, so give it as `LIB@11.8` there)."""
    lib = _load(path)
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    lib.cudaGetErrorName.restype = ctypes.c_char_p
    if not version:
        v = ctypes.c_int()
        if lib.cudaRuntimeGetVersion(ctypes.byref(v)) != 0:
            raise RuntimeError(f"{path}: cudaRuntimeGetVersion failed: give the version, LIB@X.Y")
        version = f"{v.value // 1000}.{v.value % 1000 // 10}"
    out = []
    for code in CUDA_CODES:
        text = _text(lib.cudaGetErrorString(code))
        if code == 0 or text == CUDA_UNKNOWN:
            continue
        out.append(Entry("cuda", "cuda-runtime", version, code,
                         _text(lib.cudaGetErrorName(code)), text))
    return out


NCCL_UNKNOWN = "unknown result code"


def nccl(path: str | Path, version: str = "") -> list[Entry]:
    lib = _load(path)
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    v = ctypes.c_int()
    if lib.ncclGetVersion(ctypes.byref(v)) != 0:
        raise RuntimeError(f"{path}: ncclGetVersion failed")
    code = v.value  # 22105 = 2.21.5 (since 2.9: major*10000 + minor*100 + patch)
    version = version or f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    out = []
    for result in range(1, 64):
        text = _text(lib.ncclGetErrorString(result))
        if text != NCCL_UNKNOWN:
            out.append(Entry("nccl", "nccl", version, result, "", text))
    for text in library_strings(Path(path)):
        if NCCL_WARN_HEADS.match(text):
            out.append(Entry("nccl-warn", "nccl", version, -1, "WARN", text))
    return out


# The NCCL WARN formats that say a connection, a NIC or a CUDA call failed (by their heads).
NCCL_WARN_HEADS = re.compile(
    r"(?:Call to ibv_\w+ failed with |socketStartConnect: |socketPollConnect: |"
    r"NET/IB ?: Got completion from peer |NET/IB : No device found|"
    r"NET/Socket : No usable listening interface found|Bootstrap : no socket interface found|"
    r"Error : ring %d does not |Failed to open libibverbs)")
_PRINTABLE = re.compile(rb"[\x20-\x7e]{8,}")


def library_strings(path: Path) -> list[str]:
    """The printable runs of a shared library, as `strings -n 8` lists them."""
    return sorted({m.group().decode("ascii") for m in _PRINTABLE.finditer(path.read_bytes())})


# What NVSHMEM's transports say failed, behind their `%s:%d: non-zero status: %d ` lead.
NVSHMEM_FAILURE = re.compile(r"(?:ibv_\w+|ep_\w+|cq creation|get_device_list|gdrcopy \w+) failed ?")


def nvshmem(path: str | Path, version: str = "") -> list[Entry]:
    """The failure messages of an NVSHMEM transport library (no call: loading it needs CUDA's
    driver); `version` is required, the library does not say it without one."""
    if not version:
        raise RuntimeError(f"{path}: give NVSHMEM's version, LIB@X.Y.Z")
    name = Path(path).name.split(".so")[0]
    out = []
    for text in library_strings(Path(path)):
        if NVSHMEM_FAILURE.fullmatch(text):
            out.append(Entry("nvshmem", "nvshmem", version, -1, name, text.strip()))
        elif NVSHMEM_MESSAGE.fullmatch(text):
            out.append(Entry("nvshmem-msg", "nvshmem", version, -1, name, text.strip()))
    return out


# Whole messages NVSHMEM's host library prints behind `file:function:line: `.
NVSHMEM_MESSAGE = re.compile(r"NVSHMEM API called before NVSHMEM initialization has completed")


def cublas(path: str | Path, version: str = "") -> list[Entry]:
    lib = _load(path)
    lib.cublasGetStatusName.restype = ctypes.c_char_p
    lib.cublasGetStatusString.restype = ctypes.c_char_p
    parts = []
    for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        v = ctypes.c_int()
        if lib.cublasGetProperty(prop, ctypes.byref(v)) != 0:
            raise RuntimeError(f"{path}: cublasGetProperty failed")
        parts.append(str(v.value))
    version = version or ".".join(parts)
    out = []
    for status in range(1, 64):
        name = _text(lib.cublasGetStatusName(status))
        if name.startswith("CUBLAS_STATUS_"):
            out.append(Entry("cublas", "cublas", version, status, name,
                             _text(lib.cublasGetStatusString(status))))
    return out


def cudnn(path: str | Path, version: str = "") -> list[Entry]:
    lib = _load(path)
    lib.cudnnGetErrorString.restype = ctypes.c_char_p
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    v = int(lib.cudnnGetVersion())
    # 8902 = 8.9.2; from 9.0, 91002 = 9.10.2
    major = v // 10000 if v >= 90000 else v // 1000
    minor = v % 10000 // 100 if v >= 90000 else v % 1000 // 100
    version = version or f"{major}.{minor}.{v % 100}"
    out = []
    for status in (*range(1, 100), *range(1000, 10000)):
        name = _text(lib.cudnnGetErrorString(status))
        if name.startswith("CUDNN_STATUS_"):
            out.append(Entry("cudnn", "cudnn", version, status, name, name))
    return out


_HIP_CASE = re.compile(r'case\s+(hip\w+)\s*:\s*(?:case\s+hip\w+\s*:\s*)*return\s+"([^"]*)"\s*;')
_HIP_ENUM = re.compile(r"^\s*(hip(?:Success|Error\w+))\s*=\s*(\d+)", re.MULTILINE)


def hip(repo: Path, tag: str) -> list[Entry]:
    """`hipGetErrorString`'s texts at a tag of a `ROCm/clr` clone (a bare git directory)."""
    source = _git_show(repo, tag, "hipamd/src/hip_error.cpp")
    start = source.find("ihipGetErrorString")
    if start < 0:
        raise RuntimeError(f"{repo}@{tag}: no ihipGetErrorString in hip_error.cpp")
    body = source[start:source.find("\n}\n", start)]
    codes = _hip_codes(repo, tag)
    version = tag.removeprefix("rocm-")
    out = []
    for name, text in _HIP_CASE.findall(body):
        if name in ("hipSuccess", "hipErrorUnknown"):
            continue
        out.append(Entry("hip", "hip-runtime", version, codes.get(name, -1), name, text))
    return out


def _hip_codes(repo: Path, tag: str) -> dict[str, int]:
    """The numbers of hipError_t, from the HIP header the tag holds (when it holds one)."""
    for path in ("hipamd/include/hip/hip_runtime_api.h", "include/hip/hip_runtime_api.h"):
        try:
            header = _git_show(repo, tag, path)
        except RuntimeError:
            continue
        return {name: int(n) for name, n in _HIP_ENUM.findall(header)}
    return {}


def _git_show(repo: Path, tag: str, path: str) -> str:
    done = subprocess.run(["git", "--git-dir", str(repo), "show", f"{tag}:{path}"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{repo}: no {path} at {tag}")
    return done.stdout


def _in_child(kind: str, path: str) -> list[Entry]:
    """Each library is loaded in a process of its own: two `libcudart.so.12` of different
    releases cannot both be loaded in one, and cuDNN 8 finds its sub-libraries only through
    LD_LIBRARY_PATH, which a process reads at its start."""
    env = dict(os.environ)
    lib = Path(path.partition("@")[0]).resolve()
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(lib.parent), env.get("LD_LIBRARY_PATH", "")) if p)
    done = subprocess.run([sys.executable, "-m", "matcher.catalog.native_vocab", "--one", kind,
                           path], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} {path}: {done.stderr.strip()[-400:]}")
    out = []
    for line in done.stdout.splitlines():
        if line:
            family, package, version, code, name, text = line.split("\t")
            out.append(Entry(family, package, version, int(code), name, text))
    return out


READERS = {"cudart": cuda_runtime, "nccl": nccl, "cublas": cublas, "cudnn": cudnn,
           "nvshmem": nvshmem}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m matcher.catalog.native_vocab",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    for kind in READERS:
        p.add_argument(f"--{kind}", action="append", default=[], metavar="LIB",
                       help=f"a {kind} shared library to call (repeatable: one per version); "
                       "LIB@VERSION names its version where the library cannot")
    p.add_argument("--hip-repo", type=Path, help="a clone (git directory) of ROCm/clr")
    p.add_argument("--hip-tag", action="append", default=[], help="a release tag of ROCm/clr")
    p.add_argument("--one", nargs=2, metavar=("KIND", "LIB"), help=argparse.SUPPRESS)
    p.add_argument("-o", "--output", type=Path)
    args = p.parse_args(argv)
    if args.one:
        kind, spec = args.one
        path, _, version = spec.partition("@")
        for entry in READERS[kind](path, version):
            print(entry.row())
        return 0
    if args.output is None:
        p.error("-o/--output is required")
    entries: list[Entry] = []
    for kind in READERS:
        for path in getattr(args, kind):
            found = _in_child(kind, path)
            print(f"{kind} {path}: {len(found)} statuses"
                  f" (version {found[0].version if found else '?'})", file=sys.stderr)
            entries += found
    for tag in args.hip_tag:
        if args.hip_repo is None:
            p.error("--hip-tag needs --hip-repo")
        found = hip(args.hip_repo, tag)
        print(f"hip {tag}: {len(found)} statuses", file=sys.stderr)
        entries += found
    write_tsv(entries, args.output)
    print(f"{args.output}: {len(set(entries))} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
