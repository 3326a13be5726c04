"""Which package provides each shared library a GPU server loads, read from the packages.

Two systematic sources, both read over HTTP by `python -m matcher.catalog.sonames --build`:

- **pip wheels**: the `nvidia-*` wheels that each torch release sglang pins requires (`Requires-Dist:
  nvidia-cudnn-cu12==9.10.2.21` in torch's METADATA, served by PyPI beside the wheel, PEP 658),
  and torch's own wheel: the `.so` files each lists in its `RECORD` (read from the end of the
  zip with HTTP range requests: the central directory and one member, not the whole wheel).
- **Debian bookworm's Contents index** (`main`, `contrib`, `non-free`): which binary package
  installs each `usr/lib/x86_64-linux-gnu/<soname>` (Ubuntu names these library packages the
  same), kept only for the libraries of `DEBIAN_STEMS`.

Each row: soname, provider kind (`pip`, `apt`, `driver`), package, version (the pip pin; empty
for apt), and where it was read (`torch 2.9.1`, `debian bookworm main`).
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

SIMPLE = "https://pypi.org/simple/{name}/"
DEBIAN = "http://deb.debian.org/debian/dists/{suite}/{component}/Contents-amd64.gz"
SUITE = "bookworm"
COMPONENTS = ("main", "contrib", "non-free")
TIMEOUT = 120

# The libraries a Python GPU-serving stack loads besides CUDA's pip wheels: NUMA and RDMA (sgl_kernel,
# Mooncake, NIXL, DeepEP), the NVIDIA driver's user-space libraries, OpenMP, the C++ runtime,
# MPI and UCX, OpenCV's and torchaudio's system dependencies (libGL, glib, ffmpeg, sndfile),
# allocators, async I/O, and the CUDA/ROCm libraries Debian packages.
DEBIAN_STEMS = re.compile(
    r"lib(?:numa|ibverbs|rdmacm|mlx[45]|efa|ibumad|cuda|nvidia-ml|nvidia-ptxjitcompiler|nvcuvid|"
    r"GL|GLX|EGL|OpenGL|gomp|omp|stdc\+\+|gfortran|quadmath|mpi|mpi_cxx|open-pal|open-rte|ucp|ucs|"
    r"uct|hwloc|glib-2\.0|gthread-2\.0|SM|ICE|X11|Xext|Xrender|xcb|sndfile|sox|avutil|avcodec|"
    r"avformat|avdevice|avfilter|swscale|swresample|jpeg|png16|ssl|crypto|ffi|aio|tcmalloc|"
    r"tcmalloc_minimal|jemalloc|gdrapi|nccl|cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|cufft|"
    r"curand|cusparse|cusolver|cupti|nvToolsExt|nvJitLink|amdhip64|hsa-runtime64|rocm_smi64|"
    r"rocblas|hipblas|hipblaslt|rccl|MIOpen|amd_comgr|drm_amdgpu|zmq|sodium|python3\.\d+)\.so"
    r"(?:\.[\d.]+)?$")
# Debian's library directories; the driver's libraries are under nvidia/current (its alternatives).
_DEBIAN_DIRS = re.compile(r"^(?:usr/)?lib/x86_64-linux-gnu/(?:nvidia/current/)?(?P<name>[^/]+)$")
# A file a loader is asked for: `libX.so` (the -dev package's link), `libX.so.N` (the soname).
SONAME = re.compile(r"^lib[\w+.-]*?\.so(?:\.\d+){0,2}$")
# The NVIDIA driver's user-space libraries: installed with the driver, not by pip or apt in a container.
DRIVER = re.compile(r"^lib(?:cuda|nvidia-ml|nvidia-ptxjitcompiler|nvcuvid)\.so")


@dataclass(frozen=True, order=True, slots=True)
class Provider:
    soname: str
    kind: str  # pip, apt, driver; `said`: what the loader said for it here (in `source`)
    package: str
    version: str
    source: str

    def row(self) -> str:
        return "\t".join((self.soname, self.kind, self.package, self.version, self.source))


COLUMNS = ("soname", "kind", "package", "version", "source")


def read_tsv(path: Path) -> list[Provider]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise ValueError(f"{path}: not a soname table (first line must be the columns)")
    return [Provider(*line.split("\t")) for line in lines[1:] if line]


def write_tsv(rows: Iterable[Provider], path: Path) -> None:
    path.write_text("\n".join(["\t".join(COLUMNS), *(r.row() for r in sorted(set(rows)))]) + "\n",
                    encoding="utf-8")


# -- Debian -------------------------------------------------------------------------------------

def debian_rows(lines: Iterable[str], source: str) -> Iterator[Provider]:
    """`usr/lib/x86_64-linux-gnu/libnuma.so.1   libs/libnuma1` → (libnuma.so.1, apt, libnuma1)."""
    for line in lines:
        path, _, where = line.rstrip("\n").rpartition(" ")
        m = _DEBIAN_DIRS.match(path.strip())
        if m is None or not SONAME.match(m["name"]) or not DEBIAN_STEMS.match(m["name"]):
            continue
        for qualified in where.split(","):
            package = qualified.rsplit("/", 1)[-1]
            kind = "driver" if DRIVER.match(m["name"]) else "apt"
            yield Provider(m["name"], kind, package, "", source)


def debian(cache: Path) -> list[Provider]:
    out: list[Provider] = []
    for component in COMPONENTS:
        local = cache / f"{SUITE}-{component}-Contents-amd64.gz"
        if not local.is_file():
            _download(DEBIAN.format(suite=SUITE, component=component), local)
        with gzip.open(local, "rt", encoding="utf-8", errors="replace") as fh:
            out.extend(debian_rows(fh, f"debian {SUITE} {component}"))
    return out


def _download(url: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
        path.write_bytes(r.read())


# -- pip wheels ---------------------------------------------------------------------------------

class RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, seekable: enough for `zipfile` to read the
    central directory and one member of a wheel of a gigabyte."""

    def __init__(self, url: str) -> None:
        self.url = url
        req = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            self.size = int(r.headers["Content-Length"])
        self.pos = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            data: bytes = r.read()
        self.pos += len(data)
        return data

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


@functools.cache
def files_of(name: str) -> tuple[dict[str, Any], ...]:
    req = urllib.request.Request(SIMPLE.format(name=name),
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        return tuple(json.load(r)["files"])


def version_of(filename: str) -> str:
    return filename.split("-")[1]


def wheel_url(name: str, version: str) -> str | None:
    """The URL of the wheel of name==version for CPython 3.11 on Linux x86-64 (a cp311, abi3 or
    py3 manylinux wheel; else a pure-Python one)."""
    wheels = [f for f in files_of(name) if f["filename"].endswith(".whl")
              and version_of(f["filename"]) == version]
    for tag in ("-cp311-", "-abi3-", "-py3-", "py3-none-any"):
        for f in wheels:
            fn = f["filename"]
            if tag in fn and (("x86_64" in fn and "linux" in fn) or fn.endswith("-any.whl")):
                return str(f["url"])
    return None


def resolve(name: str, spec: SpecifierSet) -> str | None:
    """The newest version of `name` with a Linux x86-64 wheel that `spec` admits."""
    versions = {version_of(f["filename"]) for f in files_of(name) if f["filename"].endswith(".whl")}
    fit = sorted(Version(v) for v in versions if _valid(v) and spec.contains(v, prereleases=False))
    for v in reversed(fit):
        if wheel_url(name, str(v)) is not None:
            return str(v)
    return None


def _valid(v: str) -> bool:
    try:
        Version(v)
    except InvalidVersion:
        return False
    return True


def metadata(name: str, version: str) -> Message:
    url = wheel_url(name, version)
    if url is None:
        raise LookupError(f"no wheel of {name}=={version} for Linux x86-64")
    try:
        with urllib.request.urlopen(url + ".metadata", timeout=TIMEOUT) as r:
            text = r.read().decode("utf-8")
    except urllib.error.HTTPError:  # an older upload without PEP 658 metadata: read the wheel's
        with zipfile.ZipFile(RangeFile(url)) as z:
            member = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            text = z.read(member).decode("utf-8")
    return Parser().parsestr(text, headersonly=True)


_LINUX = {"platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux"}


def cuda_requirements(name: str, version: str, extras: frozenset[str] = frozenset()
                      ) -> list[tuple[str, str]]:
    """The CUDA library distributions (`nvidia-*`) and the versions `name==version` requires on
    Linux x86-64, following `cuda-toolkit[cublas,…]==13.0.2` (torch's CUDA 13 builds) to the
    wheels its extras name; a wildcard (`==13.1.0.3.*`) resolved to the newest it admits."""
    out = []
    for line in metadata(name, version).get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not any(
                req.marker.evaluate({**_LINUX, "extra": e}) for e in (extras or {""})):
            continue
        if req.name.startswith("nvidia-"):
            got = resolve(req.name, req.specifier)
            if got:
                out.append((req.name, got))
        elif req.name == "cuda-toolkit":
            got = resolve(req.name, req.specifier)
            if got:
                out += cuda_requirements(req.name, got, frozenset(req.extras))
    return out


def torch_requirements(version: str) -> list[tuple[str, str]]:
    """The `nvidia-*` distributions and exact versions torch==version requires on Linux x86-64."""
    return cuda_requirements("torch", version)


def wheel_sonames(name: str, version: str) -> list[str]:
    """The shared libraries a wheel installs (its RECORD's `.so` files, by file name)."""
    url = wheel_url(name, version)
    if url is None:
        return []
    with zipfile.ZipFile(RangeFile(url)) as z:
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        text = z.read(record).decode("utf-8")
    names = {line.split(",", 1)[0].rsplit("/", 1)[-1] for line in text.splitlines()}
    return sorted(n for n in names if SONAME.match(n))


def pip_rows(torch_versions: Sequence[str]) -> list[Provider]:
    out: list[Provider] = []
    seen: dict[tuple[str, str], list[str]] = {}
    for tv in torch_versions:
        source = f"torch {tv}"
        for so in wheel_sonames("torch", tv):
            out.append(Provider(so, "pip", "torch", tv, source))
        for dist, v in torch_requirements(tv):
            if (dist, v) not in seen:
                seen[(dist, v)] = wheel_sonames(dist, v)
            out.extend(Provider(so, "pip", dist, v, source) for so in seen[(dist, v)])
    return out
