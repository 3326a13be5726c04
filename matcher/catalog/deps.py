"""The raise, assert and error-log sites of sglang's dependencies' Python: `deps.jsonl`.

`python -m matcher.catalog.deps` reads, for each package in `SCOPES` and each version chosen
(`choose`: the newest version some sglang release pins, plus a few older pinned ones), the
package's Python files in scope — xgrammar, outlines, sgl-kernel's Python,
compressed-tensors, tokenizers' Python layer, triton's Python, transformers' loading, config,
tokenizer and quantizer modules, torch's `torch/cuda`, `torch/distributed`, `torch/_dynamo`, `torch/nn/modules`,
huggingface_hub's model fetching (sglang requires it with no version: the versions read are
those that transformers' requirement names, `PINNED_THROUGH`), tvm_ffi's JIT build — with `extract.extract_module`
(the same site finding as sglang's own catalog), merges the versions by record id
(`releases.merge_releases`) and writes one record per message template:

- `sourcePackage` (the distribution), `sourceVersions` (ranges of the versions read that hold
  the site), `generator`; `documentation` names the sglang releases whose pins admit those
  versions;
- no `sglangVersions` (the site is the package's, whatever sglang runs it), no `githubUrl`
  into sglang, no `guard` (server arguments do not reach a dependency's checks); as
  `solutions` only what the message itself tells the reader to do (`dep_fixes`: set or unset
  a named environment variable, a `pip install`, a login): a dependency's check says what its
  caller got wrong, not which flag fixes it;
- left out: frame records (bare asserts), and messages whose template is one of Python's own
  generic ones (`list index out of range`, `'…' object has no attribute '…'`): such a record
  would claim, for any line of that shape, a site its traceback may well contradict.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import dep_fixes, extract
from matcher.catalog import pins as pins_mod
from matcher.catalog.depindex import DEFAULT_OUT as DEFAULT_INDEX
from matcher.catalog.depindex import fetch, sglang_pins
from matcher.catalog.releases import default_wheel_dir, merge_releases
from matcher.catalog.symbols import read_archive
from matcher.catalog.versions import compact_ranges, sort_versions, version_key

GENERATOR = "matcher.catalog.deps"
DEFAULT_OUT = (Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
               / "deps.jsonl")


def _under(*prefixes: str, but: tuple[str, ...] = ()) -> Callable[[str], bool]:
    def inside(path: str) -> bool:
        return path.startswith(prefixes) and not any(part in path for part in but)

    return inside


def _top_files(*packages: str) -> Callable[[str], bool]:
    """The modules directly in these packages, not their subpackages."""
    return lambda path: any(path.startswith(p) and "/" not in path[len(p):] for p in packages)


def _either(*scopes: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda path: any(s(path) for s in scopes)


# flashinfer's modules sglang calls for attention, sampling, norm, rope, quantization, its JIT
# builds (and the compilation context that picks their GPU architectures) and allreduce — not
# the rest (vendored cutlass and cccl, kernels written in a Python DSL, MoE/GEMM/MLA backends,
# experimental packages: 7,000 more sites in 0.7.x). They are read by `matcher.catalog.flashinfer`
# (over every minor line sglang pins, with flashinfer's C++ checks), not here.
FLASHINFER_SCOPE: Callable[[str], bool] = _either(
    _under(*(f"flashinfer/{m}.py" for m in (
        "__init__", "prefill", "decode", "sampling", "activation", "rope", "cascade", "page",
        "utils", "quantization", "fp4_quantization", "fp8_quantization", "topk", "norm",
        "compilation_context"))),
    _top_files("flashinfer/jit/", "flashinfer/comm/", "flashinfer/norm/"))
# distribution → (which of its files are read, how many older pinned versions besides the
# newest). Left out of torch: its training-side torch.distributed subpackages (FSDP, DTensor,
# pipelining, checkpointing, RPC), which an inference server does not run; torch._dynamo's
# per-type `variables/` raise graph breaks, not failures.
SCOPES: Mapping[str, tuple[Callable[[str], bool], int]] = {
    "xgrammar": (_under("xgrammar/"), 3),
    "outlines": (_under("outlines/"), 2),
    "sglang-kernel": (_under("sgl_kernel/"), 2),
    "compressed-tensors": (_under("compressed_tensors/"), 1),
    "tokenizers": (_under("tokenizers/"), 1),
    "triton": (_under("triton/", but=("/backends/", "/experimental/", "/tools/")), 2),
    "transformers": (_under(
        "transformers/modeling_utils.py", "transformers/configuration_utils.py",
        "transformers/tokenization_", "transformers/models/auto/",
        "transformers/dynamic_module_utils.py", "transformers/utils/hub.py",
        "transformers/processing_utils.py", "transformers/feature_extraction_utils.py",
        "transformers/image_processing_utils", "transformers/generation/configuration_utils.py",
        "transformers/convert_slow_tokenizer.py",
        # the checks of a checkpoint's quantization at loading (`validate_environment`: the
        # library it needs, the GPU, the device map): AWQ, GPTQ, bitsandbytes, fp8 …
        "transformers/quantizers/",
        # the media a multimodal request carries: loading, validating and resizing images and
        # videos, and Qwen2-VL's image processor (sglang's qwen_vl processor calls it for the
        # Qwen2/2.5/3-VL families)
        "transformers/image_utils.py", "transformers/video_utils.py",
        "transformers/image_transforms.py", "transformers/models/qwen2_vl/image_processing_",
        "transformers/models/qwen2_vl/video_processing_"), 3),
    "torch": (_either(_under("torch/cuda/", "torch/nn/modules/"),
                      _top_files("torch/_dynamo/", "torch/distributed/"),
                      _under("torch/distributed/_symmetric_memory/")), 2),
    # Fetching a model: the repo id check, the download and snapshot, the HTTP errors they
    # raise (missing repo, gated repo, no token, offline) — not the upload, Space, inference
    # or CLI APIs, which a server loading a model does not call.
    "huggingface-hub": (_under(
        "huggingface_hub/file_download.py", "huggingface_hub/_snapshot_download.py",
        "huggingface_hub/errors.py", "huggingface_hub/constants.py",
        "huggingface_hub/utils/_validators.py", "huggingface_hub/utils/_http.py",
        "huggingface_hub/utils/_errors.py", "huggingface_hub/utils/_auth.py",
        "huggingface_hub/utils/_headers.py", "huggingface_hub/utils/_xet.py"), 2),
    # Its JIT build of C++/CUDA sources (sglang's jit_kernel) and the loading of what it built.
    "apache-tvm-ffi": (_under("tvm_ffi/cpp/", "tvm_ffi/libinfo.py", "tvm_ffi/module.py"), 2),
}
# A dependency sglang requires with no version: the versions named by the requirement of the
# package sglang reaches it through (transformers' `huggingface-hub>=0.34.0,<1.0`), for that
# package's versions read here.
PINNED_THROUGH: Mapping[str, str] = {"huggingface-hub": "transformers"}

# Python's own messages: a dependency raising one of these says nothing its traceback does not
# (and the same text comes from anywhere); such templates make no message record.
_GENERIC = re.compile(
    r"^(?:['\"]?\{[^{}]*\}['\"]?|\s)*(?:"
    r"list index out of range|tuple index out of range|string index out of range"
    r"|object has no attribute|has no attribute"
    r"|is not defined|got an unexpected keyword argument|missing \d* ?required"
    r"|takes \d+ positional|object is not (?:subscriptable|callable|iterable)"
    r"|not supported between instances|unsupported operand|division by zero"
    r"|cannot import name|No module named|Not implemented|not implemented"
    r"|invalid literal for int|too many values to unpack|not enough values to unpack"
    r")")
_HOLES = re.compile(r"\{[^{}]*\}")


def generic(template: str) -> bool:
    """A template that is one of Python's own messages, or nothing but holes and a few
    characters of text (`{x} != {y}`)."""
    text = template.strip("'\"")
    if _GENERIC.match(template) or _GENERIC.match(text):
        return True
    literal = _HOLES.sub("", text)
    return len(re.sub(r"\W+", "", literal)) < 8


def choose(pinned: Sequence[str], older: int) -> list[str]:
    """The newest pinned version and `older` more, spread over the older pinned ones."""
    order = sort_versions(set(pinned))
    if not order:
        return []
    rest = order[:-1]
    if older <= 0 or not rest:
        return [order[-1]]
    step = max(1, len(rest) // older)
    picked = rest[::-1][::step][:older]
    return sort_versions({order[-1], *picked})


def extract_package(files: Iterable[tuple[str, bytes]], in_scope: Callable[[str], bool],
                    version: str) -> list[dict[str, Any]]:
    """One version's message records (frame records and generic templates left out)."""
    out: list[dict[str, Any]] = []
    for path, data in files:
        if not path.endswith(".py") or not in_scope(path) or extract.excluded(path):
            continue
        got = extract.extract_module(data.decode("utf-8", "replace"), path, version=version,
                                     joined_lines=True, variable_holes=True)
        for r in got.records:
            if "raisedIn" in r or r.get("errorMessage") is None or generic(r["errorMessage"]) \
                    or r.get("severity") not in ("error", "critical"):
                continue
            out.append(r)
    return out


def attributed(record: Mapping[str, Any], distribution: str, read: Sequence[str],
               pinned_by: Mapping[str, list[str]]) -> dict[str, Any]:
    """A merged record made a dependency's: the package's versions in place of sglang's."""
    held = [v for v in read if _in(v, record.get("sglangVersions") or [])]
    releases = sorted({r for v in held for r in pinned_by.get(v, [])}, key=version_key)
    out: dict[str, Any] = {}
    for key, value in record.items():
        if key in ("sglangVersions", "sglangLocations", "githubUrl", "guard", "repo"):
            continue
        if key == "filePath":
            value = str(value).removeprefix("python/")
        if key == "documentation":
            value = str(value).replace("sglang/", "", 1)
            value += f" Raised by {distribution} (read: {', '.join(held)})."
            if releases:
                value += (" sglang releases whose pins admit these versions: "
                          + ", ".join(compact_ranges(releases, releases)) + ".")
        if key == "tags":
            value = [t for t in value if t not in ("sglang", "generated")]
            value = ["dependency", distribution, *value]
        if key == "schemaVersion":
            out["sourcePackage"] = distribution
            out["sourceVersions"] = compact_ranges(held, list(read))
            out["generator"] = GENERATOR
        out[key] = value
    out["solutions"] = dep_fixes.stated_solutions(record.get("errorMessage"), distribution)
    return out


def _in(version: str, ranges: Sequence[str]) -> bool:
    from matcher.catalog.versions import in_ranges

    return in_ranges(version, ranges)


def build(release_pins: Mapping[str, Mapping[str, str]], dep_dir: Path,
          only: Sequence[str] = (), *, index_dir: Path = DEFAULT_INDEX,
          log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for dist, (in_scope, older) in SCOPES.items():
        if only and dist not in only:
            continue
        names = [dist, *(["sgl-kernel"] if dist == "sglang-kernel" else [])]
        if dist == "triton":
            pinned = _triton_versions(index_dir)
        elif dist in PINNED_THROUGH:
            pinned = _pinned_through(dist, PINNED_THROUGH[dist], release_pins, dep_dir)
        else:
            pinned = _admitted(release_pins, names)
        per_version: dict[str, list[dict[str, Any]]] = {}
        for v in choose(pinned, older):
            got = None
            for name in names:
                got = fetch(name, v, dep_dir)
                if got is not None:
                    break
            if got is None:
                log(f"{dist}=={v}: no archive")
                continue
            per_version[v] = extract_package(read_archive(got), in_scope, v)
            log(f"{dist}=={v}: {len(per_version[v])} records")
        if not per_version:
            continue
        read = sort_versions(per_version)
        pinned_by: dict[str, list[str]] = {}
        for release, pins in release_pins.items():
            for name in names:
                spec = pins.get(name)
                if spec is None:
                    continue
                for v in read:
                    if not spec or pins_mod.admits(spec, v):
                        pinned_by.setdefault(v, []).append(release)
        for r in merge_releases(per_version):
            records.append(attributed(r, dist, read, pinned_by))
    records.sort(key=lambda r: r["id"])
    return records


def _admitted(release_pins: Mapping[str, Mapping[str, str]], names: Sequence[str]
              ) -> list[str]:
    """The versions some release's specifier names and some release's specifier admits: an
    exclusive bound no release runs (`<0.2`) may name a version that does not exist."""
    pinned: list[str] = []
    for name in names:
        specs = [p[name] for p in release_pins.values() if p.get(name)]
        pinned += [v for v in pins_mod.pinned_versions(release_pins.values(), name)
                   if any(pins_mod.admits(spec, v) for spec in specs)]
    return pinned


def _pinned_through(dist: str, through: str, release_pins: Mapping[str, Mapping[str, str]],
                    dep_dir: Path) -> list[str]:
    """`dist`'s versions that the requirements of `through` (the versions of it read here, their
    wheels' `Requires-Dist`) name as the least they run with (`>=`, `==`, `~=`): a range's floor
    is a release that exists, its exclusive top (`<2.0`) may not be."""
    import zipfile

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    named: set[str] = set()
    for v in choose(_admitted(release_pins, [through]), SCOPES[through][1]):
        got = fetch(through, v, dep_dir)
        if got is None or got.suffix != ".whl":
            continue
        with zipfile.ZipFile(got) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            spec = pins_mod.server_pins(z.read(meta).decode("utf-8", "replace")).get(dist, "")
        try:
            named.update(s.version for s in SpecifierSet(spec)
                         if s.operator in (">=", "==", "===", "~=") and "*" not in s.version)
        except InvalidSpecifier:
            continue
    return sort_versions(named)


def _triton_versions(index_dir: Path) -> list[str]:
    """triton is pinned by torch, not by sglang: the versions the pinned torch releases need,
    as the symbol index read them (`depindex`; its newest is not one torch pinned)."""
    from matcher.catalog.symbols import Index

    try:
        versions = list(Index.load(index_dir / "triton.txt.gz", "triton").versions)
    except OSError:
        return []
    return versions[:-1]


def _deferred(records: list[dict[str, Any]], curated: Path | None) -> list[dict[str, Any]]:
    """Without the records that would take a curated record's own examples: a curated family
    record (transformers' missing-file OSError, triton's fp8 type) says what to do, and a
    dependency's site, more literal, would win its lines with no fix."""
    if curated is None:
        return records
    from matcher.catalog.load import load_paths

    kept, dropped = extract.defer_to(records, load_paths([curated], "curated").records)
    print(f"{len(dropped)} records left to curated ones", file=sys.stderr)
    return list(kept)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.deps", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--versions", default="0.4.0..0.5.23", help="sglang releases (A..B)")
    ap.add_argument("--wheel-dir", type=Path, default=None)
    ap.add_argument("--dep-dir", type=Path, default=None)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--index-dir", type=Path, default=DEFAULT_INDEX,
                    help="the symbol index (`depindex`), for triton's versions")
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--curated", type=Path, default=None, metavar="DIR",
                    help="leave out the records that would take a curated record's example "
                         "lines (`extract.defer_to`), as `catalog extract --curated` does")
    ap.add_argument("--merge", nargs="+", type=Path, default=None, metavar="JSONL",
                    help="only merge outputs of runs with --only (one record per id)")
    args = ap.parse_args(argv)
    if args.merge:
        import json

        merged: dict[str, dict[str, Any]] = {}
        for part in args.merge:
            for line in part.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    r = json.loads(line)
                    # as `attributed` makes them, for parts written before the rule
                    r["solutions"] = dep_fixes.stated_solutions(r.get("errorMessage"),
                                                                r["sourcePackage"])
                    merged[r["id"]] = r
        from matcher.atomic import write_atomic

        kept = _deferred([merged[k] for k in sorted(merged)], args.curated)
        write_atomic(args.out, "".join(extract.iter_jsonl(kept)))
        print(f"{len(kept)} records → {args.out}", file=sys.stderr)
        return 0
    wheel_dir = args.wheel_dir or default_wheel_dir()
    dep_dir = args.dep_dir or wheel_dir.parent / "deps"
    release_pins = sglang_pins(wheel_dir, args.versions)
    records = _deferred(build(release_pins, dep_dir, args.only, index_dir=args.index_dir,
                              log=lambda s: print(s, file=sys.stderr)), args.curated)
    text = "".join(extract.iter_jsonl(records))
    from matcher.atomic import write_atomic

    write_atomic(args.out, text)
    print(f"{len(records)} records → {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
