"""Records for shared libraries that cannot be loaded, and for a C/C++ runtime too old.

    ImportError: libnuma.so.1: cannot open shared object file: No such file or directory
    OSError: libcufile.so.0: cannot open shared object file: No such file or directory
    Could not load library libcudnn_cnn_infer.so.8. Error: libcudnn_cnn_infer.so.8: cannot open …
    ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (…)

One record per library (its stem: `libnuma` covers `libnuma.so`, `libnuma.so.1`), whose fix
names the package that installs it, from `patterns/sglang/generated/sonames.tsv`: the `nvidia-*`
wheel and the version each torch release sglang pins requires (`pip install`), the Debian/Ubuntu
package (`apt-get install`), or the NVIDIA driver (not installable in a container: the container
must be started with the GPU runtime). The table is made by `--build` from the packages
themselves (`soname_sources`); the records are made from the table, so building the catalog needs
no network. A library a curated record already recognizes is left to it (its remediation was
written from real threads). Then two family records: any other `lib….so…` that cannot be
opened, and `version `GLIBCXX_…'/`GLIBC_…' not found`.

    python -m matcher.catalog.sonames --build     # read the sources, write sonames.tsv
    python -m matcher.catalog.sonames             # write sonames.jsonl from sonames.tsv
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import regex

from matcher.catalog import soname_sources as S
from matcher.catalog.versions import sort_versions

GENERATOR = "matcher.catalog.sonames"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
TABLE = GENERATED / "sonames.tsv"
OUTPUT = GENERATED / "sonames.jsonl"
CURATED = GENERATED.parent / "curated"

# dlopen's `X: cannot open shared object file`, as ctypes and Python's import print it, and as
# cuDNN ends its `Could not load library X. Error: X: cannot open shared object file`.
_TAIL = r"(?P<library>(?:/[^\s:]*/)?{stem}\.so(?:\.\d+)*): cannot open shared object file"

# Where a loader's message starts an error: the start of the message, behind an exception's
# class (`ImportError: `, `OSError: `), or sgl_kernel's `- ` list of what it tried. Not inside a
# line that goes on (NCCL's `NET/Plugin : dlerror=libnccl-net.so: cannot open …` and ibverbs'
# `couldn't load driver 'libmlx4-rdmav34.so': …` are printed by every healthy launch without
# those plugins).
START = r"(?:^|(?<=Error: )|(?<=^- ))"


# A copy a wheel carries under a name of its own (auditwheel's `libgomp-a34b3233.so.1`, NVRTC's
# `.alt` builds): loaded by path from its package, never asked for by name.
VENDORED = re.compile(r"-[0-9a-f]{8}$|\.alt$")


def stem_of(soname: str) -> str:
    return soname.split(".so", 1)[0]


def record_id(key: str) -> str:
    return hashlib.sha256(f"sglang-matcher/sonames/{key}".encode()).hexdigest()[:16]


def curated_patterns(curated: Path) -> list[regex.Pattern[str]]:
    out = []
    for path in sorted(curated.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for rec in data if isinstance(data, list) else data.get("patterns", []):
            if rec.get("messagePattern"):
                out.append(regex.compile(rec["messagePattern"]))
    return out


def left_to_curated(sonames: Iterable[str], curated: Sequence[regex.Pattern[str]]) -> bool:
    """Every soname of a stem is recognized by a curated record."""
    return all(any(p.search(f"{so}: cannot open shared object file") for p in curated)
               for so in sonames)


# -- what to do -----------------------------------------------------------------------------------

def _pip_solutions(rows: Sequence[S.Provider]) -> tuple[list[str], list[str], str]:
    """Per pip distribution, the version each torch release requires (newest torch first)."""
    by_dist: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in rows:
        by_dist[r.package][r.version].add(r.source.removeprefix("torch "))
    solutions: list[str] = []
    installs: list[str] = []
    said = []
    for dist in sorted(by_dist):
        versions = sort_versions(set(by_dist[dist]))
        newest = versions[-1]
        torches = {v: sort_versions(by_dist[dist][v]) for v in versions}
        sonames = sorted({r.soname for r in rows if r.package == dist})
        if dist == "torch":
            said.append(f"{', '.join(sonames)} {'is' if len(sonames) == 1 else 'are'} torch's own "
                        f"(torch {_span(versions)})")
            solutions.append(
                "It is torch's own library (torch/lib): an extension built for another torch "
                "build asks for it — libtorch_cuda.so and libc10_cuda.so are only in torch's CUDA "
                "builds, so a CUDA extension (torchaudio, torchvision, flash-attn) with a CPU "
                "torch (+cpu) fails so: install the torch build (CUDA or CPU) the extension was "
                "made for, or the extension built for your torch; an extension imported before "
                "torch fails so too (import torch first)")
            continue
        pairs = "; ".join(f"torch {_span(torches[v])} requires {dist}=={v}" for v in reversed(versions))
        said.append(f"{', '.join(sonames)} {'is' if len(sonames) == 1 else 'are'} installed by "
                    f"the pip package {dist} ({pairs})")
        installs.append(f"{dist}=={newest}")
        solutions.append(
            f"Install the {dist} that your torch requires (pip show torch; then the version "
            f"above), e.g. for torch {torches[newest][-1]}: pip install '{dist}=={newest}'; its "
            "libraries are found through torch, so the same environment's python must run sglang")
    return solutions, installs, ". ".join(said)


def _span(versions: Sequence[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]}..{versions[-1]}"


def _apt_solutions(rows: Sequence[S.Provider]) -> tuple[list[str], str]:
    by_so: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        by_so[r.soname].add(r.package)
    runtime = sorted({p for so, ps in by_so.items() if re.search(r"\.so\.\d", so) for p in ps})
    dev = sorted({p for so, ps in by_so.items() if so.endswith(".so") for p in ps})
    said = "; ".join(f"{so} is in {', '.join(sorted(ps)[:4])}" for so, ps in sorted(by_so.items()))
    solutions = []
    if runtime:
        solutions.append("Install the system library (Debian and Ubuntu name the package the "
                         f"same): apt-get install -y {' '.join(runtime[:3])}"
                         + (" (one of them)" if len(runtime) > 1 else "")
                         + "; in a Dockerfile, add it to the image's apt-get install line")
    if dev:
        solutions.append(f"A program that opens the unversioned name needs the development "
                         f"package: apt-get install -y {' '.join(dev[:3])}")
    return solutions, f"Debian bookworm: {said}" if said else ""


_DRIVER_SOLUTIONS = [
    ("It is a library of the NVIDIA driver, installed with the driver on the host, not by pip: "
    "inside a container the driver is not visible — start it with the NVIDIA runtime "
    "(docker run --gpus all …; Kubernetes: request nvidia.com/gpu)"),
    "On the host, check the driver: nvidia-smi; ldconfig -p | grep {stem}",
]


def _source(pip: Sequence[S.Provider], driver: Sequence[S.Provider]) -> str:
    """What `catalog stats` counts the record under: the pip wheels, the driver, or Debian."""
    if driver:
        return "nvidia-driver"
    if pip:
        return ", ".join(sorted({r.package for r in pip}))
    return f"debian {S.SUITE}"


def stem_record(stem: str, rows: Sequence[S.Provider]) -> dict[str, Any]:
    pip = [r for r in rows if r.kind == "pip"]
    apt = [r for r in rows if r.kind == "apt"]
    driver = [r for r in rows if r.kind == "driver"]
    solutions: list[str] = []
    installs: list[str] = []
    said = []
    if driver:
        solutions += [s.format(stem=stem) for s in _DRIVER_SOLUTIONS]
        said.append(f"{stem} is the NVIDIA driver's (Debian packages it as "
                    f"{', '.join(sorted({r.package for r in driver})[:3])})")
    if pip:
        sol, installs, text = _pip_solutions(pip)
        solutions += sol
        said.append(text)
    if apt and not driver:
        sol, text = _apt_solutions(apt)
        solutions += sol
        said.append(text)
    solutions.append(f"If it is installed in an unusual directory, add that directory to the "
                     f"loader's path: find / -name '{stem}.so*' 2>/dev/null, then export "
                     "LD_LIBRARY_PATH=<that directory>:$LD_LIBRARY_PATH")
    esc = re.escape(stem)
    rec: dict[str, Any] = {
        "id": record_id(stem),
        "slug": "shared-library-missing-" + re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-"),
        "errorMessage": f"{stem}.so: cannot open shared object file",
        "messagePattern": START + _TAIL.format(stem=esc),
        "errorClass": None,
        "errorType": "environment",
        "severity": "critical",
        "documentation": ("The dynamic loader could not find a shared library that a Python "
                          "extension (or ctypes) asked for, so the import failed. "
                          + ". ".join(s for s in said if s) + "."),
        "solutions": solutions,
        "tags": ["environment", "shared-library", *sorted({r.kind for r in rows})],
        "sourcePackage": _source(pip, driver),
        "sourceVersions": sort_versions({r.version for r in pip}) if pip else [],
        "generator": GENERATOR,
        "examples": {"match": [(f"ImportError: {sorted({r.soname for r in rows})[-1]}: cannot open "
                               "shared object file: No such file or directory")]},
    }
    if installs:
        rec["fixActions"] = [[{"op": "install", "value": req}] for req in installs]
    return rec


# -- the families -------------------------------------------------------------------------------


_ANY_DOC = ("The dynamic loader could not find a shared library that a Python extension (or "
            "ctypes) asked for, so the import failed. The library is named in the message; a "
            "library with a record of its own says which package installs it.")
_ANY_SOLUTIONS = [
    ("Find the package that installs it: on Debian/Ubuntu, apt-get install -y apt-file && "
    "apt-file update && apt-file search <library>; for CUDA libraries (libcu*, libnv*), the "
    "nvidia-* pip package your torch requires (pip show torch; pip list | grep nvidia)"),
    ("If it is installed in an unusual directory, add that directory to the loader's path: "
    "find / -name '<library>*' 2>/dev/null, then export LD_LIBRARY_PATH=<that "
    "directory>:$LD_LIBRARY_PATH"),
]

_GLIBC_DOC = ("A native library was built against a newer C++ runtime (GLIBCXX_…, libstdc++) or "
              "C library (GLIBC_…, glibc) than the one loaded: the loaded file is the path before "
              "`: version`, the library that needs the newer one is after `required by`. Each "
              "GCC release adds a GLIBCXX version (GCC 12: 3.4.30, GCC 13: 3.4.31 and 3.4.32, "
              "GCC 14: 3.4.33); in a conda environment its own older lib/libstdc++.so.6 is "
              "often the one loaded.")
_GLIBCXX_SOLUTIONS = [
    ("In a conda environment (the loaded path is under …/envs/<env>/lib): conda install -c "
    "conda-forge 'libstdcxx-ng>=13' (or libstdcxx), so the environment's libstdc++ is new enough"),
    ("Outside conda: use a newer base image or distribution whose libstdc++6 has that version "
    "(strings /lib/x86_64-linux-gnu/libstdc++.so.6 | grep GLIBCXX lists what it has), or "
    "install the package built for your system's compiler"),
]
_GLIBC_SOLUTIONS = [
    ("glibc cannot be upgraded in place: run on a newer distribution or base image (glibc ≥ the "
    "version named), or install a build of the package made for your glibc (a manylinux wheel "
    "whose tag is not newer than your system: ldd --version)"),
]


def family_records() -> list[dict[str, Any]]:
    def rec(key: str, slug: str, message: str, pattern: str, doc: str, solutions: list[str],
            package: str, examples: list[str]) -> dict[str, Any]:
        return {"id": record_id(key), "slug": slug, "errorMessage": message,
                "messagePattern": pattern, "errorClass": None, "errorType": "environment",
                "severity": "critical", "documentation": doc, "solutions": solutions,
                "tags": ["environment", "shared-library", "family"], "sourcePackage": package,
                "sourceVersions": [], "generator": GENERATOR, "examples": {"match": examples}}

    return [
        rec("any", "shared-library-missing", "{library}: cannot open shared object file",
            # `lib` left out of the literal text: a record naming the library (its own, or a
            # curated one) then holds more literal text, and wins
            START + r"(?P<library>(?:/[^\s:]*/)?[^\s:/]*?\.so(?:\.\d+)*): cannot open shared "
            r"object file", _ANY_DOC, _ANY_SOLUTIONS, "glibc (ld.so)",
            # glibc's loader asked for NCCL's network plugin here (ctypes), which no package of
            # the table installs
            [("OSError: libnccl-net.so: cannot open shared object file: No such file or "
              "directory")]),
        rec("glibcxx", "libstdcxx-version-not-found",
            "{library}: version `GLIBCXX_{v}' not found",
            r"(?P<library>\S*libstdc\+\+\.so[\d.]*): version [`'‘]?(?P<symbol_version>GLIBCXX_"
            r"[\d.]+|CXXABI_[\d.]+)['’]? not found(?: \(required by (?P<required_by>[^)\s]+)\))?",
            _GLIBC_DOC, _GLIBCXX_SOLUTIONS, "libstdc++",
            # https://github.com/kvcache-ai/ktransformers/issues/439
            [("ImportError: /home/ubuntu/anaconda3/envs/ktransformers-0.3/bin/../lib/libstdc++.so.6"
             ": version `GLIBCXX_3.4.32' not found (required by /home/ubuntu/anaconda3/envs/"
             "ktransformers-0.3/lib/python3.11/site-packages/KTransformersOps.cpython-311-x86_64-"
             "linux-gnu.so)")]),
        rec("glibc", "glibc-version-not-found", "{library}: version `GLIBC_{v}' not found",
            r"(?P<library>\S*lib(?:c|m|pthread|dl|rt)\.so[\d.]*): version [`'‘]?(?P<symbol_version>"
            r"GLIBC_[\d.]+)['’]? not found(?: \(required by (?P<required_by>[^)\s]+)\))?",
            _GLIBC_DOC, _GLIBC_SOLUTIONS, "glibc",
            # https://github.com/huggingface/lerobot/issues/2219
            ["ImportError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found"]),
    ]


# -- the table and the records --------------------------------------------------------------------

def loader_says(soname: str) -> str:
    """What glibc's loader says when asked for `soname` here (`dlopen` through ctypes): the
    real message, for the record's example, or "" when the library is there."""
    import ctypes

    try:
        ctypes.CDLL(soname)
    except OSError as e:
        return f"OSError: {e}" if "cannot open shared object file" in str(e) else ""
    return ""


def records(rows: Sequence[S.Provider], curated: Path | None = CURATED) -> list[dict[str, Any]]:
    """One record per library stem, then the families. Rows of kind `said` carry what the
    loader said for a soname missing where the table was built (the records' examples)."""
    said = {r.soname: r.source for r in rows if r.kind == "said"}
    by_stem: dict[str, list[S.Provider]] = defaultdict(list)
    for r in rows:
        if r.kind != "said":
            by_stem[stem_of(r.soname)].append(r)
    taken = curated_patterns(curated) if curated is not None else []
    out = []
    for stem, group in sorted(by_stem.items()):
        if VENDORED.search(stem):
            continue
        sonames = sorted({r.soname for r in group})
        if left_to_curated(sonames, taken):
            continue
        rec = stem_record(stem, group)
        real = [said[so] for so in sonames if said.get(so)]
        rec["examples"] = {"match": real[:2]}
        out.append(rec)
    return out + family_records()


def torch_versions() -> list[str]:
    """The torch versions sglang releases pin, from the shipped symbol index's `P` lines."""
    from matcher.catalog import mismatch

    index = mismatch.index_for("torch")
    if index is None:
        raise SystemExit("no torch symbol index: run python -m matcher.catalog.depindex first")
    found = {m.group(1) for spec, _ in index.pins().values()
             if (m := re.fullmatch(r"torch==([\w.+]+)", spec))}
    return sort_versions(found)


def main(argv: Sequence[str] | None = None) -> int:
    from matcher.atomic import write_atomic
    from matcher.cache import default_cache_dir

    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.sonames", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="store_true", help="read PyPI and Debian, write the table")
    ap.add_argument("--table", type=Path, default=TABLE)
    ap.add_argument("-o", "--out", type=Path, default=OUTPUT)
    args = ap.parse_args(argv)
    if args.build:
        rows = S.pip_rows(torch_versions()) + S.debian(default_cache_dir() / "sonames")
        rows += [S.Provider(so, "said", "", "", text) for so in sorted({r.soname for r in rows})
                 if (text := loader_says(so))]
        S.write_tsv(rows, args.table)
    rows = S.read_tsv(args.table)
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records(rows)]
    write_atomic(args.out, "".join(lines))
    print(f"{len(lines)} records from {len(rows)} rows", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
