"""Build the dependency symbol index: `python -m matcher.catalog.depindex`.

1. The pins of every sglang release (its wheel's `Requires-Dist`, `pins.server_pins`), from the
   wheels `catalog extract` keeps (`releases.default_wheel_dir()`; fetched when missing).
2. For each dependency in `DEPENDENCIES`, the versions some release's specifier names, plus the
   newest on PyPI (`pip download --no-deps`, a wheel, else the sdist: flashinfer-python's 0.2
   releases have no wheel there; vllm's sdist only, `SDIST_ONLY`), each read with
   `symbols.release_facts` and kept in the cache as JSON by distribution and version, so the
   archive itself may go (`--drop-large`). vllm's pins are read from sglang 0.1.0 on
   (`PINNED_SINCE`): only releases before 0.5 pin it.
3. One index file per distribution, `patterns/sglang/generated/symbols/<dist>.txt.gz`, with the
   sglang releases' specifiers (`P` lines) and, for sglang's own index (every release since
   0.1, `--sglang-versions`), the imports of dependencies' names (`A` lines, for `NameError:
   name 'sgl_…' is not defined` and for dating a traceback's importing frame).

The daemon reads an index only when an event needs it (`matcher.catalog.mismatch`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from matcher.atomic import write_atomic
from matcher.catalog import pins as pins_mod
from matcher.catalog import symbols
from matcher.catalog.pep440 import sort_versions, version_key
from matcher.catalog.releases import default_wheel_dir, download, list_releases

# distribution → (its top-level import names, extra versions to read besides the pinned ones).
# `triton` is not pinned by sglang but by torch: its versions are those the pinned torch
# releases require. Distributions renamed over time share an index (`INDEX_NAME`).
DEPENDENCIES: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "torch": (("torch",), ()),
    "triton": (("triton",), ()),
    "transformers": (("transformers",), ()),
    "tokenizers": (("tokenizers",), ("0.21.1",)),
    "flashinfer-python": (("flashinfer",), ()),
    "sgl-kernel": (("sgl_kernel",), ()),
    "sglang-kernel": (("sgl_kernel",), ()),
    "xgrammar": (("xgrammar",), ()),
    "outlines": (("outlines",), ("0.0.46", "0.1.0")),
    "compressed-tensors": (("compressed_tensors",), ("0.9.4", "0.10.2", "0.11.0", "0.12.2")),
    # vllm: also the releases an unbounded pin (`vllm>=0.3.3`) let pip install in place of the
    # pinned one (0.4.x, without the `model_executor.input_metadata` sglang 0.1.x imports;
    # 0.4.0's releases have no sdist)
    # torchao: also releases before the oldest pinned, which Windows and old environments
    # still install (`quantize_` came in 0.4)
    "torchao": (("torchao",), ("0.1", "0.3.1", "0.5.0")),
    "llguidance": (("llguidance",), ()),
    "vllm": (("vllm",), ("0.4.1", "0.6.0", "0.6.6.post1", "0.8.5")),
}
# Distributions only sglang's older releases pin (vllm: 0.1.x–0.4.4 import its layers and
# parallel state): their pins are read from every release since this one, not only `--versions`.
PINNED_SINCE: Mapping[str, str] = {"vllm": "0.1.0"}
# Distributions read from their sdist, fetched from PyPI's simple index: vllm's wheels carry
# 10–260 MB of compiled kernels, its sdists the same Python in under 6 MB (the compiled `vllm._C`
# is then not seen, so a failure naming it gets no version answer).
SDIST_ONLY = frozenset({"vllm"})
# sgl-kernel and sglang-kernel are one package (`sgl_kernel`) under two names: one index.
INDEX_NAME: Mapping[str, str] = {"sglang-kernel": "sgl-kernel"}
NO_LATEST = frozenset({"vllm", "sgl-kernel"})  # the newest is not one sglang ever ran with
# Distributions whose every pinned release would cost too much to read (transformers: 2,000
# modules a release; sgl-kernel: a 500 MB wheel): at most this many, spread over the pinned
# ones, the newest always among them.
THINNED: Mapping[str, int] = {"transformers": 9, "sgl-kernel": 6, "sglang-kernel": 4}


def thin(versions: Sequence[str], keep: int) -> list[str]:
    """`keep` of `versions` (sorted), evenly spread, first and last always kept."""
    order = sort_versions(set(versions))
    if len(order) <= keep or keep < 2:
        return order
    step = (len(order) - 1) / (keep - 1)
    return sort_versions({order[round(i * step)] for i in range(keep)})

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated" / "symbols"


def sglang_pins(wheel_dir: Path, spec: str = "0.4.0..0.5.23") -> dict[str, dict[str, str]]:
    """release → {distribution: specifier} for every final/.postN release in `spec`."""
    out: dict[str, dict[str, str]] = {}
    for v in list_releases(spec).wanted:
        found = sorted(wheel_dir.glob(f"sglang-{v}-*.whl")) or [download(v, wheel_dir)]
        version, pins = pins_mod.read_wheel_pins(found[0])
        out[version or v] = pins
    return out


def fetch(distribution: str, version: str, directory: Path, *, sdist_ok: bool = False
          ) -> Path | None:
    """`pip download --no-deps` a wheel of `distribution==version` (else its sdist)."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[-_.]+", "_", distribution).lower()
    for p in directory.iterdir():
        name = p.name.lower()
        if name.startswith(f"{stem}-{version}-") or name == f"{stem}-{version}.tar.gz":
            return p
    # an sdist only where no wheel was ever published and it builds its metadata without
    # installing a toolchain (flashinfer-python's 0.2–0.4 sdists install torch to do so)
    for extra in (["--only-binary", ":all:"], [] if sdist_ok else None):
        if extra is None:
            break
        run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *extra,
                              f"{distribution}=={version}", "-d", str(directory)],
                             capture_output=True, text=True, timeout=3600, check=False)
        saved = re.findall(r"Saved (\S+)", run.stdout)
        if saved and Path(saved[-1]).is_file():
            return Path(saved[-1])
        m = re.search(r"File was already downloaded (\S+)", run.stdout)
        if m and Path(m.group(1)).is_file():
            return Path(m.group(1))
    return None


SIMPLE_JSON = "https://pypi.org/simple/{name}/"


def fetch_sdist(distribution: str, version: str, directory: Path) -> Path | None:
    """The sdist `<name>-<version>.tar.gz` of a release, from PyPI's simple index (PEP 691
    JSON) — not `pip download`, which would build the sdist's metadata (vllm's needs torch)."""
    import urllib.request

    stem = normalize_name(distribution).replace("-", "_")
    wanted = {f"{stem}-{version}.tar.gz", f"{normalize_name(distribution)}-{version}.tar.gz"}
    for p in directory.glob("*.tar.gz"):
        if p.name.lower() in wanted:
            return p
    request = urllib.request.Request(SIMPLE_JSON.format(name=normalize_name(distribution)),
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        files = json.loads(response.read().decode("utf-8")).get("files") or []
    for f in files:
        if str(f.get("filename", "")).lower() in wanted and not f.get("yanked"):
            directory.mkdir(parents=True, exist_ok=True)
            target = directory / str(f["filename"])
            with urllib.request.urlopen(str(f["url"]), timeout=600) as response:
                write_atomic(target, response.read())
            return target
    return None


def newest(distribution: str) -> str | None:
    run = subprocess.run([sys.executable, "-m", "pip", "index", "versions", distribution],
                         capture_output=True, text=True, timeout=300, check=False)
    m = re.search(r"^\S+ \(([^)]+)\)", run.stdout, re.MULTILINE)
    return m.group(1) if m else None


def facts_key(name: str, version: str, packages: Sequence[str],
              imports_from: Sequence[str] = ()) -> str:
    """The cache file of one release's facts: by distribution and version (a release's files
    never change on PyPI), what is read of it, and the reading code's format."""
    what = hashlib.sha256(json.dumps([list(packages), list(imports_from), _code()]).encode()
                          ).hexdigest()[:12]
    return f"{normalize_name(name)}-{version}-{what}.json"


def normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def kept_facts(kept: Path) -> symbols.Release | None:
    if not kept.is_file():
        return None
    doc = json.loads(kept.read_text(encoding="utf-8"))
    return symbols.Release(
        modules={m: frozenset(n) for m, n in doc["modules"].items()},
        open=frozenset(doc["open"]),
        functions={(m, q): tuple(p) for m, q, p in doc["functions"]},
        imports={(m, a): (s, n) for m, a, s, n in doc["imports"]})


def facts_of(archive: Path, packages: Sequence[str], kept: Path,
             imports_from: Sequence[str] = ()) -> symbols.Release:
    """One archive's facts, kept in the file `kept` (`facts_key`)."""
    got = kept_facts(kept)
    if got is not None:
        return got
    r = symbols.release_facts(symbols.read_archive(archive), packages=packages,
                              imports_from=imports_from)
    doc = {"archive": archive.name,
           "modules": {m: sorted(n) for m, n in sorted(r.modules.items())},
           "open": sorted(r.open),
           "functions": [[m, q, list(p)] for (m, q), p in sorted(r.functions.items())],
           "imports": [[m, a, s, n] for (m, a), (s, n) in sorted(r.imports.items())]}
    write_atomic(kept, json.dumps(doc, separators=(",", ":")))
    return r


# What `symbols.release_facts` reads of an archive: change it when that changes, and the facts
# kept in the cache are read again.
FACTS_FORMAT = "b8a083cb9af5629c"


def _code() -> str:
    return FACTS_FORMAT


def compiled_unseen(release: symbols.Release, packages: Sequence[str]) -> symbols.Release:
    """An sdist has its compiled modules (`vllm._C`) as C++ sources only: the top-level
    packages are marked open, so a name missing from them is not taken as missing."""
    return dataclasses.replace(release, open=release.open | frozenset(packages))


def requirement_of(distribution: str, version: str, wanted: str) -> str | None:
    """The exact version of `wanted` that `distribution==version` requires on Linux x86-64,
    from the release's metadata as pip resolves it (`pip install --dry-run --report`)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                        "--ignore-installed", "-q", "--report", str(report),
                        f"{distribution}=={version}"],
                       capture_output=True, text=True, timeout=1800, check=False)
        try:
            doc = json.loads(report.read_text(encoding="utf-8"))
            requires = doc["install"][0]["metadata"].get("requires_dist") or []
        except (OSError, ValueError, KeyError, IndexError):
            return None
    spec = pins_mod.server_pins("".join(f"Requires-Dist: {r}\n" for r in requires)).get(wanted)
    return pins_mod.exact(spec or "")


def admitted(release_pins: Mapping[str, Mapping[str, str]], names: Sequence[str],
             versions: Sequence[str]) -> tuple[dict[str, str], dict[str, int]]:
    """For one index (its distribution names): each sglang release's specifier, and the mask of
    the indexed `versions` it admits."""
    order = sorted(versions, key=version_key)
    specs: dict[str, str] = {}
    masks: dict[str, int] = {}
    for release, pins in release_pins.items():
        for name in names:
            if name in pins:
                spec = pins[name]
                specs[release] = f"{name}{spec}" if spec else name
                masks[release] = sum(1 << i for i, v in enumerate(order)
                                     if not spec or pins_mod.admits(spec, v))
    return specs, masks


def read_release(dist: str, version: str, packages: Sequence[str], dep_dir: Path,
                 drop_large_mb: int) -> symbols.Release | None:
    """One release's facts: kept in `<dep_dir>/facts`, else read from its archive (fetched; an
    archive over `drop_large_mb` deleted once read)."""
    kept = dep_dir / "facts" / facts_key(dist, version, packages)
    got = kept_facts(kept)
    if got is None:
        archive = (fetch_sdist(dist, version, dep_dir) if dist in SDIST_ONLY
                   else fetch(dist, version, dep_dir))
        if archive is None:
            print(f"{dist}=={version}: no archive", file=sys.stderr)
            return None
        got = facts_of(archive, packages, kept)
        if archive.stat().st_size > drop_large_mb << 20:
            archive.unlink()
    print(f"{dist}=={version}: {len(got.modules)} modules", file=sys.stderr)
    return compiled_unseen(got, packages) if dist in SDIST_ONLY else got


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    wheel_dir = args.wheel_dir or default_wheel_dir()
    dep_dir = args.dep_dir or wheel_dir.parent / "deps"
    wanted = args.only or [*DEPENDENCIES, "sglang"]
    _index_dependencies(args, wheel_dir, dep_dir, wanted)
    if "sglang" in wanted:
        _index_sglang(args, wheel_dir, dep_dir / "facts")
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.depindex", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--versions", default="0.4.0..0.5.23",
                    help="sglang releases whose pins choose the dependencies' versions (A..B)")
    ap.add_argument("--sglang-versions", default="0.1.0..0.5.23",
                    help="sglang releases in sglang's own index (A..B)")
    ap.add_argument("--wheel-dir", type=Path, default=None,
                    help="sglang's wheels (default: catalog extract's cache)")
    ap.add_argument("--dep-dir", type=Path, default=None,
                    help="where dependencies' archives go (default: <cache>/deps)")
    ap.add_argument("--only", action="append", default=[], help="only this distribution")
    ap.add_argument("--drop-large", type=int, default=100, metavar="MB",
                    help="delete an archive over MB once read (its facts are kept)")
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    return ap


def _index_dependencies(args: argparse.Namespace, wheel_dir: Path, dep_dir: Path,
                        wanted: Sequence[str]) -> None:
    """One index per index name (distributions that share one are read together), of the
    versions sglang's releases pin, the few `DEPENDENCIES` names, and the newest."""
    release_pins = sglang_pins(wheel_dir, args.versions)
    older_pins: dict[str, dict[str, dict[str, str]]] = {}
    groups: dict[str, list[str]] = {}
    for dist in DEPENDENCIES:
        groups.setdefault(INDEX_NAME.get(dist, dist), []).append(dist)
    triton_of_torch: dict[str, str] = {}
    for index_name, dists in groups.items():
        if not any(d in wanted for d in dists) and index_name not in wanted:
            continue
        packages = DEPENDENCIES[dists[0]][0]
        per_version: dict[str, symbols.Release] = {}
        since = PINNED_SINCE.get(dists[0])
        pins_here = release_pins
        if since is not None:
            hi = args.versions.partition("..")[2]
            if since not in older_pins:
                older_pins[since] = sglang_pins(wheel_dir, f"{since}..{hi}")
            pins_here = older_pins[since]
        for dist in dists:
            for v in sort_versions(_versions_to_read(dist, dists, pins_here, triton_of_torch)):
                if dist == "torch":
                    triton = requirement_of("torch", v, "triton")
                    if triton:
                        triton_of_torch[v] = triton
                got = read_release(dist, v, packages, dep_dir, args.drop_large)
                if got is not None:
                    per_version[v] = got
        specs, masks = admitted(pins_here, dists, list(per_version))
        symbols.write_index(args.out / f"{index_name}.txt.gz",
                            symbols.index_lines(per_version, pins=specs, admitted=masks))


def _versions_to_read(dist: str, dists: Sequence[str], pins: dict[str, dict[str, str]],
                      triton_of_torch: dict[str, str]) -> set[str]:
    """A distribution's versions to index: those the releases pin, those `DEPENDENCIES` names,
    the tritons of the torches read, thinned where `THINNED` says, and the newest."""
    versions = set(pins_mod.pinned_versions(pins.values(), dist))
    versions |= set(DEPENDENCIES[dist][1])
    if dist == "triton":
        versions |= set(triton_of_torch.values())
    if dist in THINNED:
        versions = set(thin(sorted(versions, key=version_key), THINNED[dist]))
    if dist not in NO_LATEST and dist == dists[-1]:
        latest = newest(dist)
        if latest:
            versions.add(latest)
    return versions


def _index_sglang(args: argparse.Namespace, wheel_dir: Path, facts_dir: Path) -> None:
    """sglang's own index: each release's names, and what it imports from the dependencies."""
    deps = sorted({p for d in DEPENDENCIES.values() for p in d[0]})
    per_release: dict[str, symbols.Release] = {}
    for release in sglang_pins(wheel_dir, args.sglang_versions):
        wheel = sorted(wheel_dir.glob(f"sglang-{release}-*.whl"))[0]
        kept = facts_dir / facts_key("sglang", release, ("sglang",), deps)
        per_release[release] = facts_of(wheel, ("sglang",), kept, imports_from=deps)
    symbols.write_index(args.out / "sglang.txt.gz", symbols.index_lines(per_release))


if __name__ == "__main__":
    raise SystemExit(main())
