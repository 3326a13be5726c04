r"""torch's own C++ checks → catalog records: the messages of the `RuntimeError`s (and
`ValueError`, `IndexError`, `DistBackendError` …) that torch's operators, CUDA allocator and
distributed backends raise when sglang calls them with something they do not accept.

    python -m matcher.catalog.torch_native [--dir DIR] [-o patterns/sglang/generated/torch-native.jsonl]

The source is Debian's copy of PyTorch's release tarball (`pytorch_<v>+dfsg.orig.tar.xz`, the
release's tree with non-free parts removed; PyPI ships torch only as built wheels, and the
GitHub repository is beyond what this project fetches). Read: ATen's operators
(`aten/src/ATen/native/` — the CPU/generic files, `cuda/` and `transformers/`, which holds
scaled-dot-product attention), ATen's core and CUDA glue, `c10/core`, `c10/cuda`, `c10/util`,
and `torch/csrc`'s top level, `cuda/`, `utils/` and `distributed/c10d/`. Left out: backends an
sglang server does not run (quantized, sparse, mkldnn, MPS, Vulkan, XNNPACK, nested tensors) and
operators its forward pass does not (`NOT_SERVED`: convolutions, pooling, losses, optimizers,
backward-only kernels …).

Each `TORCH_CHECK*`, `TORCH_CHECK_WITH`, `C10_THROW_ERROR` and `AT_ERROR` with enough literal
text (`cpp_checks`, `sgl_kernel.usable`) gives a record per message template, merged over the
files that hold it. torch's Python shows the message as the exception's (`RuntimeError: <msg>`),
so the pattern is anchored at the message's start, as sgl-kernel's are. Where a check is says
what failed (an operator's arguments, the CUDA allocator, c10d, shared memory); only the shared-
memory checks carry a way to fix that holds for all of them, and the checks of the GPU or the
torch build that `matcher.catalog.torch_check_remedies` names (FP8 matmul below sm89 …). A template a kernel package's
records also hold (flashinfer reuses torch's words: `mat1 and mat2 shapes cannot be
multiplied`) names those places in its documentation: a lone line cannot tell them apart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import sys
import tarfile
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matcher.catalog import torch_check_remedies
from matcher.catalog.cpp_checks import CppCheck, Hole, Part, checks, plain_text
from matcher.catalog.sgl_kernel import message_pattern, usable

PACKAGE = "torch"
GENERATOR = "matcher.catalog.torch_native"
ID_PREFIX = "sglang-matcher/torch-native/"
ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "patterns" / "sglang" / "generated"
DEFAULT_OUTPUT = GENERATED / "torch-native.jsonl"
# The kernel packages whose C++ records may hold one of torch's templates word for word.
KERNEL_FILES = ("flashinfer.jsonl", "sgl-kernel.jsonl")
VERSIONS = ("2.6.0",)
DEBIAN_POOL = "https://deb.debian.org/debian/pool/main/p/pytorch/"
SUFFIXES = (".cpp", ".cu", ".cuh", ".h", ".cc")
IN_SCOPE = re.compile(
    r"(?:aten/src/ATen/native/(?:[^/]+|cuda/[^/]+|transformers/.+)"
    r"|aten/src/ATen/(?:[^/]+|core/.+|cuda/[^/]+|templates/[^/]+)"
    r"|c10/(?:core|cuda|util)/[^/]+"
    r"|torch/csrc/(?:[^/]+|cuda/[^/]+|utils/[^/]+|distributed/c10d/.+))")
LEFT_OUT = re.compile(r"/(?:quantized|sparse|mkldnn|mps|vulkan|xnnpack|nested|metal|miopen|hip)/")
# Operators and backends an LLM server's forward pass does not run (convolutions, pooling,
# recurrent layers, losses, optimizers, backward-only kernels, solvers, FFTs, TorchScript's
# types, MPI/UCC process groups): their checks only weigh on the catalog's size and start.
NOT_SERVED = re.compile(
    r"/(?:[^/]*Conv[^/]*|[^/]*Pool[^/]*|MaxUnpooling|BatchLinearAlgebra|SpectralOps|Distance|"
    r"RNN|ReflectionPad|ReplicationPad|Padding|EmbeddingBag|Histogram|SegmentReduce|Loss|"
    r"UpSample|Fractional|Bucketization|ProcessGroupMPI|ProcessGroupUCC|Sparse|NestedInt|"
    r"LegacyBatching|NamedTensor|class_type|ivalue|attention_backward|kernel_backward|"
    r"AffineGrid|GridSampler|Im2Col|Col2Im|Unfold|PixelShuffle|ChannelShuffle|Correlation|"
    r"Fused(?:Adam|SGD|Adagrad)|Foreach)[^/]*$")
HEAD = r"(?<=^\s*(?:what\(\):\s+)?)"
MARKERS = ("TORCH_CHECK", "AT_ERROR", "C10_THROW_ERROR")


def in_scope(member: str) -> str | None:
    """The path inside the source tree (`aten/src/ATen/native/TensorShape.cpp`) of a tarball
    member (`pytorch-v2.6.0/aten/…`), or None when it is not read."""
    rel = member.split("/", 1)[1] if "/" in member else member
    if not rel.endswith(SUFFIXES) or LEFT_OUT.search("/" + rel):
        return None
    if NOT_SERVED.search("/" + rel):
        return None
    return rel if IN_SCOPE.fullmatch(rel) else None


def tarball_files(path: Path, scope: Callable[[str], str | None] = in_scope,
                  markers: Sequence[str] = MARKERS) -> Iterator[tuple[str, str]]:
    """(path, text) of the files of a release tarball that `scope` keeps (under the path it
    gives) and that name one of `markers`: by default, the checks this module reads."""
    with lzma.open(path) as xz, tarfile.open(fileobj=xz, mode="r|") as t:
        for m in t:
            rel = scope(m.name) if m.isfile() else None
            f = t.extractfile(m) if rel else None
            if rel and f is not None:
                text = f.read().decode("utf-8", "replace")
                if any(k in text for k in markers):
                    yield rel, text


def fetch(version: str, cache: Path) -> Path:
    """The release's tarball in `cache`, downloaded from Debian's pool when missing."""
    name = f"pytorch_{version}+dfsg.orig.tar.xz"
    out = cache / name
    if not out.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(DEBIAN_POOL + name, timeout=600) as r:
            out.write_bytes(r.read())
    return out


# Windows' own error reporting: a message that holds it is from a code path Linux never runs.
WINDOWS_ONLY = ("GetLastError", "_WIN32")


def release_checks(files: Iterable[tuple[str, str]]) -> list[CppCheck]:
    out: list[CppCheck] = []
    for path, text in files:
        out.extend(c for c in checks(text, path, {}, classed=True)
                   if usable(c) and not any(w in c.template for w in WINDOWS_ONLY))
    return out


@dataclass(slots=True)
class Merged:
    key: str
    check: CppCheck
    versions: set[str] = field(default_factory=set)
    places: set[tuple[str, int, str]] = field(default_factory=set)


_HOLE = re.compile(r"(?<!\{)\{(?!\{)[^{}]*\}")


def shape_of(template: str) -> str:
    """A template with its values' expressions left out: `a ({x}x{y})` → `a ({}x{})` (the
    same words at two sites name their values differently)."""
    return _HOLE.sub("{}", template)


def record_key(c: CppCheck) -> str:
    return f"{c.error_class or ''}\n{shape_of(c.template)}"


def record_id(key: str) -> str:
    return hashlib.sha256((ID_PREFIX + key).encode()).hexdigest()[:16]


def _where(places: set[tuple[str, int, str]]) -> str:
    spots = sorted(places)
    where = ", ".join(f"`{fn}()` in {p}:{line}" if fn else f"{p}:{line}"
                      for p, line, fn in spots[:3])
    return where + (f" and {len(spots) - 3} more" if len(spots) > 3 else "")


_ERRNO_VALUE = re.compile(r"err|what\(\)")


def without_detail_tail(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    """The message without a trailing `: {strerror(errno)} ({errno})` clause: after the last
    `: ` or `; `, only values of the OS's error and punctuation. torch added such details to
    older messages over its releases (`unable to open shared memory object <…> in read-write
    mode` gained `: <why> (<errno>)`), so the pattern ends where every release's words end."""
    for k in range(len(parts) - 1, -1, -1):
        p = parts[k]
        if isinstance(p, Hole):
            if not _ERRNO_VALUE.search(p.expr):
                return parts
            continue
        cut = max(p.rfind(": "), p.rfind("; "))
        if p[cut + 2 if cut >= 0 else 0:].strip(" ()<>.") != "":
            return parts
        if cut >= 0 and k + 1 < len(parts):
            head = (*parts[:k], p[:cut]) if p[:cut] else parts[:k]
            return head if plain_text(head).strip() else parts
    return parts


def build_record(m: Merged, shared: Sequence[str]) -> dict[str, Any]:
    c = m.check
    newest = max(m.versions)
    doc = (f"In torch {newest}, a `{c.macro}` in {_where(m.places)} raises {c.error_class} "
           f"with this message")
    if c.condition and c.condition != "false":
        doc += f" when `{c.condition}` does not hold"
    area = area_of(c.path)
    doc += ". " + area.what
    if shared:
        doc += " The same words are in " + "; ".join(shared) + "."
    machine = torch_check_remedies.remedy_for(c.template)  # a check of the GPU or the build
    if machine is not None:
        doc += " " + machine.why
    return {
        "id": record_id(m.key),
        "repo": "pytorch/pytorch",
        "slug": "torch-" + slug(plain_text(c.parts)),
        "errorMessage": c.template,
        "messagePattern": HEAD + message_pattern(without_detail_tail(c.parts)),
        "errorType": "check",
        "errorClass": c.error_class,
        "severity": "error",
        "filePath": c.path,
        "lineNumber": c.line,
        "githubUrl": f"https://github.com/pytorch/pytorch/blob/v{newest}/{c.path}#L{c.line}",
        "documentation": doc,
        "solutions": list(machine.solutions if machine is not None else area.solutions),
        "tags": ["dependency", PACKAGE, "cpp", "generated", c.path.split("/")[0]],
        "sourcePackage": PACKAGE,
        "sourceVersions": sorted(m.versions),
        "generator": GENERATOR,
        "sourceLocations": [{"versions": newest,
                             "sites": sorted(f"{p}:{line}" for p, line, _ in m.places)[:20],
                             "count": len(m.places)}],
        "schemaVersion": 2,
    }


@dataclass(frozen=True, slots=True)
class Area:
    """A part of torch's tree: what a failed check there means, and the ways to fix it that hold
    for every check there (often none)."""

    shape: re.Pattern[str]  # searched in the check's path
    what: str
    solutions: tuple[str, ...] = ()


AREAS = (
    Area(re.compile(r"aten/src/ATen/MapAllocator|torch/csrc/StorageSharing"),
         ("torch could not make or map the shared-memory segment (`/dev/shm`) it passes a "
          "tensor between processes with: sglang's processes exchange tensors this way."),
         (("Give the server more shared memory: run its container with `--ipc=host` or "
           "`--shm-size=32g` (as sglang's Docker instructions do); on Kubernetes mount an "
           "`emptyDir` with `medium: Memory` at `/dev/shm`."),)),
    Area(re.compile(r"c10/cuda/CUDACachingAllocator"),
         ("The check is in torch's CUDA caching allocator, which holds the GPU memory of "
          "sglang's weights, KV cache and activations.")),
    Area(re.compile(r"torch/csrc/distributed/c10d/"),
         ("The check is in torch.distributed (c10d), which sglang's tensor-, pipeline- and "
          "data-parallel groups communicate through.")),
    Area(re.compile(r"c10/cuda/|aten/src/ATen/cuda/|torch/csrc/cuda/"),
         "The check is in torch's CUDA runtime glue (devices, streams, events, CUDA graphs)."),
)
OPERATOR = Area(re.compile(""), (
    "torch refused the tensors or arguments an operator was called with: the traceback's last "
    "frame above torch's (in sglang, a model file or a kernel library) is the call that passed "
    "them."))


def area_of(path: str) -> Area:
    return next((a for a in AREAS if a.shape.search(path)), OPERATOR)


def slug(text: str, limit: int = 48, empty: str = "check") -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].rstrip("-") or empty


def kernel_templates(files: Iterable[Path]) -> dict[str, list[str]]:
    """errorMessage → where kernel packages' records hold it (`flashinfer-python 0.3.1
    csrc/x.cu:113`)."""
    out: dict[str, list[str]] = {}
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            r = json.loads(line) if line.strip() else {}
            if r.get("errorMessage"):
                versions = ", ".join(r.get("sourceVersions") or [])
                out.setdefault(shape_of(r["errorMessage"]), []).append(
                    f"{r.get('sourcePackage', '?')} {versions} {r.get('filePath')}:"
                    f"{r.get('lineNumber')}")
    return out


@dataclass(slots=True)
class Result:
    records: list[dict[str, Any]]
    counts: Counter[str]


def extract(releases: Sequence[tuple[str, list[CppCheck]]],
            kernels: dict[str, list[str]]) -> Result:
    merged: dict[str, Merged] = {}
    counts: Counter[str] = Counter()
    for version, found in releases:
        for c in found:
            counts[f"sites:{c.macro}"] += 1
            m = merged.setdefault(record_key(c), Merged(record_key(c), c))
            m.versions.add(version)
            m.places.add((c.path, c.line, c.function))
    records = []
    for m in merged.values():
        if len(plain_text(m.check.parts).split("\n", 1)[0].strip()) < 12:
            counts["dropped: its first line holds too little literal text"] += 1
            continue
        shared = kernels.get(shape_of(m.check.template), [])
        counts["shared with a kernel package"] += bool(shared)
        records.append(build_record(m, shared))
    records.sort(key=lambda r: r["id"])
    counts["records"] = len(records)
    return Result(records, counts)


def default_dir() -> Path:
    base = os.environ.get("SGLANG_MATCHER_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "sglang-matcher") / "torch"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.torch_native",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=None, help="where the tarballs are kept")
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS))
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    cache = args.dir or default_dir()
    releases = []
    for v in args.versions:
        found = release_checks(tarball_files(fetch(v, cache)))
        print(f"torch=={v}: {len(found)} checks", file=sys.stderr)
        releases.append((v, found))
    result = extract(releases, kernel_templates(GENERATED / f for f in KERNEL_FILES))
    from matcher.atomic import write_atomic

    write_atomic(args.out, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                                   for r in result.records))
    for k, n in sorted(result.counts.items()):
        print(f"{k}: {n}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
