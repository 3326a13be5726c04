r"""flashinfer's own checks (C++/CUDA) and raise sites (Python) → catalog records, over the
flashinfer releases sglang pins.

    python -m matcher.catalog.flashinfer [--dir DIR] [-o patterns/sglang/generated/flashinfer.jsonl]

Each flashinfer-python release in `VERSIONS` (the `==` pins of sglang's releases, from
`symbols/flashinfer-python.txt.gz`, thinned to one per minor line and its newest) is read from
its sdist on PyPI (kept in DIR, default `$SGLANG_MATCHER_CACHE_DIR/flashinfer`): the sources the
JIT compiles, `include/flashinfer/` and `csrc/` (vendored 3rdparty code, experimental kernels and
0.7's generated per-configuration bindings left out). Every
`FLASHINFER_ERROR` / `FLASHINFER_CHECK`, `FLASHINFER_RUNTIME_ASSERT` and tvm-ffi check with a
message (`flashinfer_sites`) and every `TORCH_CHECK` (`cpp_checks`, 0.2–0.3 bind through torch)
gives a record per message template, merged over the releases; its Python raise sites in the
modules sglang calls are read too (`flashinfer_python`, as `deps` reads other packages'):

- `Error in function '<fn>' at <file>:<line>: <message>` (what `flashinfer::Error` prints, as
  `RuntimeError`, or `tvm.error.InternalError` once tvm-ffi converts it), ``Assertion `0 &&
  "<message>"` failed.`` from the device, `Check failed: … : <message>` from tvm-ffi, and a
  torch check's message at the start of the exception's;
- `sourcePackage` `flashinfer-python`, `sourceVersions` (ranges of the releases read that hold
  it), `sourceLocations` (file:line per range), and one family record for any `Error in function
  … at …flashinfer…:N:` line no message record knows (a release not read, a message built at
  run time).

What to do comes from where the check is (`flashinfer_remedies`): the kernel's area names the
sglang flag that runs another backend for it (attention, sampling, MoE), and the words name a
GPU architecture, a dtype or a head size. A check sgl-kernel's records already hold (its
vendored flashinfer macros) is left to them.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import urllib.request
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matcher.catalog import flashinfer_python
from matcher.catalog import flashinfer_remedies as remedies
from matcher.catalog.cpp_checks import CppCheck, checks, plain_text
from matcher.catalog.flashinfer_sites import sites
from matcher.catalog.sgl_kernel import family_of, message_pattern, usable
from matcher.catalog.versions import compact_ranges, sort_versions, version_key

PACKAGE = "flashinfer-python"
GENERATOR = "matcher.catalog.flashinfer"
ID_PREFIX = "sglang-matcher/flashinfer/"
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUTPUT = ROOT / "patterns" / "sglang" / "generated" / "flashinfer.jsonl"
SGL_KERNEL = ROOT / "patterns" / "sglang" / "generated" / "sgl-kernel.jsonl"
SUFFIXES = (".cu", ".cuh", ".cc", ".cpp", ".h", ".hpp")
# The flashinfer-python releases some sglang release pins with `==` (0.4.3.post3 to 0.5.23),
# one per minor line and the newest of each line sglang moved along (0.6.x).
VERSIONS = ("0.2.2.post1", "0.2.3", "0.2.5", "0.2.7.post1", "0.2.11.post3", "0.2.14.post1",
            "0.3.1", "0.4.1", "0.5.3", "0.6.3", "0.6.8.post1", "0.6.18", "0.7.2")

ERROR_HEAD = r"Error in function '[^'\n]*' at [^\n]*?:\d+: "
KIND_HEADS = {
    "error": ERROR_HEAD,
    "assert": r"Assertion `0 && \"",
    "tvm": r"(?:Check failed: [^\n]*?: )?",
    "check": r"(?<=^\s*(?:what\(\):\s+)?)",
}
KIND_WORDS = {
    "error": "`FLASHINFER_ERROR`/`FLASHINFER_CHECK` threw `flashinfer::Error`",
    "assert": "a device-side `FLASHINFER_RUNTIME_ASSERT` failed (every failing GPU thread prints "
              "it; the host then sees `device-side assert triggered`)",
    "tvm": "a tvm-ffi check failed",
    "check": "a `TORCH_CHECK` failed",
    "op": "a `TORCH_CHECK_` comparison failed",
    "throw": "it threw a `std::` exception",
}


# Left out of the tree: vendored code, flashinfer's experimental kernels and the generated
# per-configuration bindings of 0.7 (`csrc/cake_*/…_<hash>_binding.cu`), as `deps` leaves its
# experimental Python out.
LEFT_OUT = re.compile(r"(?:^|/)(?:3rdparty|experimental|cake_[^/]*)(?:/|$)|_[0-9a-f]{16,}_binding\.")


def in_scope(path: str) -> str | None:
    """The source path inside the release (`include/flashinfer/x.cuh`, `csrc/y.cu`), or None
    for files the JIT does not compile from flashinfer's own tree."""
    parts = path.split("/")
    for k in range(len(parts)):
        rest = "/".join(parts[k:])
        if rest.startswith(("include/flashinfer/", "csrc/")) and rest.endswith(SUFFIXES):
            return None if LEFT_OUT.search(path) else rest
    return None


def archive_files(data: bytes, name: str, scope: Callable[[str], str | None] = in_scope,
                  ) -> Iterator[tuple[str, str]]:
    """(path, text) of an sdist (`.tar.gz`) or wheel, only the files `scope` keeps (C++ sources
    by default), each under the path `scope` gives it."""
    if name.endswith(".whl"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for n in z.namelist():
                if (p := scope(n)) is not None:
                    yield p, z.read(n).decode("utf-8", "replace")
        return
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        for m in t:
            if m.isfile() and (p := scope(m.name)) is not None:
                f = t.extractfile(m)
                if f is not None:
                    yield p, f.read().decode("utf-8", "replace")


def fetch(version: str, cache: Path) -> Path:
    """The release's sdist in `cache`, downloaded from PyPI when missing."""
    for p in cache.glob(f"flashinfer_python-{version}.tar.gz"):
        return p
    meta = json.load(urllib.request.urlopen(
        f"https://pypi.org/pypi/{PACKAGE}/{version}/json", timeout=60))
    url: str = next(f["url"] for f in meta["urls"] if f["packagetype"] == "sdist")
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / url.rsplit("/", 1)[1]
    with urllib.request.urlopen(url, timeout=600) as r:
        out.write_bytes(r.read())
    return out


# A file is lexed only when it names one of these (most of the tree is kernels without checks).
SITE_MACROS = ("FLASHINFER_ERROR", "FLASHINFER_CHECK", "FLASHINFER_RUNTIME_ASSERT", "TVM_FFI_")


def release_checks(files: Iterable[tuple[str, str]]) -> list[CppCheck]:
    out: list[CppCheck] = []
    for path, text in files:
        if any(m in text for m in SITE_MACROS):
            out.extend(sites(text, path))
        if path.startswith("csrc/") and "TORCH_CHECK" in text:
            out.extend(c for c in checks(text, path, {}) if family_of(c) is None)
    return out


@dataclass(slots=True)
class Merged:
    key: str
    check: CppCheck
    versions: set[str] = field(default_factory=set)
    places: dict[str, set[tuple[str, int, str]]] = field(default_factory=dict)
    newest: str = ""


def record_key(c: CppCheck) -> str:
    return f"{c.kind}\n{c.template}"


def record_id(key: str) -> str:
    return hashlib.sha256((ID_PREFIX + key).encode()).hexdigest()[:16]


def pattern_of(c: CppCheck) -> str:
    body = message_pattern(c.parts)
    if c.kind == "assert":
        return KIND_HEADS["assert"] + body
    return KIND_HEADS.get(c.kind, KIND_HEADS["check"]) + body


def build_record(m: Merged, order: Sequence[str]) -> dict[str, Any]:
    c = m.check
    newest = sorted(m.places[m.newest])
    where = ", ".join(f"`{fn}()` in {p}:{line}" if fn else f"{p}:{line}"
                      for p, line, fn in newest[:3])
    if len(newest) > 3:
        where += f" and {len(newest) - 3} more"
    doc = f"In flashinfer {m.newest}, {KIND_WORDS[c.kind]} in {where}"
    if c.condition and c.condition != "false":
        doc += f": `{c.condition}` did not hold"
    remedy = remedies.remedy_for(c.path, plain_text(c.parts))
    doc += ". " + remedy.documentation
    return {
        "id": record_id(m.key),
        "repo": "flashinfer-ai/flashinfer",
        "slug": "flashinfer-" + remedies.slug(plain_text(c.parts)),
        "errorMessage": c.template,
        "messagePattern": pattern_of(c),
        "errorType": "check",
        "errorClass": c.error_class,
        "severity": "critical" if c.kind == "assert" else "error",
        "filePath": f"flashinfer/{c.path}",
        "lineNumber": c.line,
        "githubUrl": f"https://github.com/flashinfer-ai/flashinfer/blob/v{m.newest}/{c.path}"
                     f"#L{c.line}",
        "documentation": doc,
        "solutions": list(remedy.solutions),
        **({"fixActions": [list(a) for a in remedy.fix_actions]} if remedy.fix_actions else {}),
        "tags": ["dependency", PACKAGE, "cpp", "generated", c.kind, remedy.area],
        "sourcePackage": PACKAGE,
        "sourceVersions": compact_ranges(m.versions, order),
        "generator": GENERATOR,
        "sourceLocations": _locations(m, order),
        "schemaVersion": 2,
    }


def _locations(m: Merged, order: Sequence[str]) -> list[dict[str, Any]]:
    by_places: dict[tuple[str, ...], list[str]] = {}
    for v in order:
        if v in m.places:
            spots = tuple(sorted(f"{p}:{line}" for p, line, _ in m.places[v]))
            by_places.setdefault(spots, []).append(v)
    out = [{"versions": r, "sites": list(spots[:20]), "count": len(spots)}
           for spots, vs in by_places.items() for r in compact_ranges(vs, order)]
    out.sort(key=lambda e: version_key(str(e["versions"]).split("..")[0]))
    return out


def _held_by_sgl_kernel() -> set[str]:
    """The message templates sgl-kernel's records hold (its sources vendor flashinfer's)."""
    try:
        lines = SGL_KERNEL.read_text(encoding="utf-8").splitlines()
    except OSError:
        return set()
    return {json.loads(x).get("errorMessage") or "" for x in lines if x.strip()}


@dataclass(slots=True)
class Result:
    records: list[dict[str, Any]]
    counts: Counter[str]


def extract(releases: Sequence[tuple[str, list[CppCheck]]]) -> Result:
    order = sort_versions(v for v, _ in releases)
    held = _held_by_sgl_kernel()
    merged: dict[str, Merged] = {}
    counts: Counter[str] = Counter()
    for version, found in sorted(releases, key=lambda r: version_key(r[0])):
        for c in found:
            counts[f"sites:{c.kind}"] += 1
            if not usable(c):
                counts["dropped: too little literal text"] += 1
                continue
            if c.template in held:
                counts["dropped: an sgl-kernel record holds it"] += 1
                continue
            m = merged.setdefault(record_key(c), Merged(record_key(c), c))
            m.check, m.newest = c, version
            m.versions.add(version)
            m.places.setdefault(version, set()).add((c.path, c.line, c.function))
    records = [build_record(m, order) for m in merged.values()]
    records.append(remedies.family_record(order, GENERATOR, record_id("family\nerror")))
    records.sort(key=lambda r: r["id"])
    counts["records"] = len(records)
    return Result(records, counts)


def default_dir() -> Path:
    base = os.environ.get("SGLANG_MATCHER_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "sglang-matcher") / "flashinfer"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.flashinfer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=None, help="where the sdists are kept")
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS))
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    cache = args.dir or default_dir()
    releases = []
    python: dict[str, list[dict[str, Any]]] = {}
    for v in args.versions:
        archive = fetch(v, cache)
        data = archive.read_bytes()
        found = release_checks(archive_files(data, archive.name))
        python[v] = flashinfer_python.release_records(
            archive_files(data, archive.name, flashinfer_python.python_path), v)
        print(f"flashinfer-python=={v}: {len(found)} C++ sites, {len(python[v])} Python "
              f"records", file=sys.stderr)
        releases.append((v, found))
    result = extract(releases)
    result.records.extend(flashinfer_python.records(python, GENERATOR))
    result.records.sort(key=lambda r: r["id"])
    result.counts["records"] = len(result.records)
    from matcher.atomic import write_atomic

    write_atomic(args.out, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                                   for r in result.records))
    for k, n in sorted(result.counts.items()):
        print(f"{k}: {n}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
