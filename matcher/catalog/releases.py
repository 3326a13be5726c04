"""Many sglang releases → one merged catalog.

`catalog extract --versions 0.4.0..0.5.23` (or `--wheel` repeated) extracts each release on its
own (`extract.extract_files`, unchanged) and `merge_releases` folds them: one record per id —
the id depends on the module, the class and the message template, never on the line, so adding
a release never changes an existing record's id — with

- `sglangVersions`: the runs of consecutive extracted releases (PEP 440 order) that hold the
  record, each `"A..B"` (or `"A"` alone): a version v is in `"A..B"` when A <= v <= B;
- `sglangLocations`: only when the file or the line differ between those releases, every run of
  releases with one location: `{"versions": "A..B", "filePath", "lineNumber", "githubUrl"}`, the
  link at the tag of the run's newest release;
- every other field (the top-level `filePath`/`lineNumber`/`githubUrl` among them) the newest
  release's.

A message worded differently in two releases is two templates, hence two records: an operator
on 0.5.6 is told what 0.5.6 prints. The output depends on the releases' content only: records
sorted by id, keys in one fixed order, whatever order the inputs came in.

Fetching (`list_releases`, `download`) and the per-wheel cache are the edge; `merge_releases` is
pure.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.atomic import write_atomic
from matcher.cache import default_cache_dir
from matcher.catalog import extract
from matcher.catalog.load import code_fingerprint
from matcher.catalog.pep440 import compact_ranges, parse_range, sort_versions, version_key

PYPI_JSON = "https://pypi.org/pypi/sglang/json"
_FINAL_OR_POST = re.compile(r"^\d+(?:\.\d+)*(?:\.post\d+)?$")


class ReleaseError(Exception):
    """A release range or list that cannot be used; the message says why."""


# --- merging (pure) -----------------------------------------------------------------------------

def merge_releases(releases: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Records of several releases (version → that release's records) → one merged catalog."""
    order = sort_versions(releases)
    if len({version_key(v) for v in order}) != len(releases):
        raise ReleaseError("two inputs are the same release: " + ", ".join(releases))
    per_id: dict[str, dict[str, Mapping[str, Any]]] = {}
    for v in order:
        for r in releases[v]:
            per_id.setdefault(r["id"], {})[v] = r
    return [_merged(per_id[rid], order) for rid in sorted(per_id)]


def _merged(by_version: Mapping[str, Mapping[str, Any]], order: Sequence[str]) -> dict[str, Any]:
    present = [v for v in order if v in by_version]
    newest = by_version[present[-1]]
    out: dict[str, Any] = {}
    for key, value in newest.items():
        if key in ("sglangVersions", "sglangLocations"):
            continue
        if key == "schemaVersion":  # the extension fields before it, as `_record` writes them
            _versions_fields(out, by_version, present, order)
        out[key] = value
    if "sglangVersions" not in out:
        _versions_fields(out, by_version, present, order)
    return out


def _versions_fields(out: dict[str, Any], by_version: Mapping[str, Mapping[str, Any]],
                     present: Sequence[str], order: Sequence[str]) -> None:
    out["sglangVersions"] = compact_ranges(present, order)
    where = {v: (by_version[v].get("filePath"), by_version[v].get("lineNumber")) for v in present}
    if len(set(where.values())) < 2:
        return
    runs: list[list[str]] = []
    previous = None
    for v in order:
        loc = where.get(v)
        if loc is not None and loc == previous and runs:
            runs[-1].append(v)
        elif loc is not None:
            runs.append([v])
        previous = loc
    out["sglangLocations"] = [
        {"versions": run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}",
         "filePath": where[run[-1]][0], "lineNumber": where[run[-1]][1],
         "githubUrl": by_version[run[-1]].get("githubUrl")}
        for run in runs
    ]


def records_per_release(records: Iterable[Mapping[str, Any]] | Iterable[Any],
                        releases: Sequence[str]) -> dict[str, int]:
    """How many records hold each release (dicts as written, or `CatalogRecord`s)."""
    from matcher.catalog.pep440 import in_ranges

    counts = dict.fromkeys(releases, 0)
    for r in records:
        ranges = r.get("sglangVersions") if isinstance(r, Mapping) else r.sglang_versions
        for v in releases:
            if ranges and in_ranges(v, ranges):
                counts[v] += 1
    return counts


# --- which releases, and their wheels (the edge) ----------------------------------------------

@dataclass(frozen=True, slots=True)
class Listed:
    wanted: tuple[str, ...]  # final and .postN releases in the range, oldest first
    skipped: tuple[tuple[str, str], ...]  # (version, why) for releases in the range left out


def list_releases(spec: str, *, index: Mapping[str, Any] | None = None) -> Listed:
    """The final and `.postN` releases of sglang on PyPI within `A..B` (inclusive).

    `index`: PyPI's JSON for sglang (`releases` → files), fetched when not given; when PyPI's
    JSON API cannot be reached, `pip index versions sglang` is asked instead (it lists no
    yanked releases and no files).
    """
    lo, hi = parse_range(spec)
    if not lo or not hi or version_key(lo) > version_key(hi):
        raise ReleaseError(f"--versions {spec!r}: expected A..B with A <= B, e.g. 0.4.0..0.5.23")
    if index is None:
        index = _pypi_index()
    wanted: list[str] = []
    skipped: list[tuple[str, str]] = []
    for v in sort_versions(index):
        if not version_key(lo) <= version_key(v) <= version_key(hi):
            continue
        if not _FINAL_OR_POST.match(v):
            skipped.append((v, "not a final or .postN release"))
            continue
        files = index[v]
        if files is None:  # from `pip index versions`: nothing known about its files
            wanted.append(v)
            continue
        live = [f for f in files if not f.get("yanked")]
        if files and not live:
            skipped.append((v, "yanked"))
        elif not any(f.get("packagetype") == "bdist_wheel" for f in live):
            skipped.append((v, "no wheel on PyPI"))
        else:
            wanted.append(v)
    return Listed(tuple(wanted), tuple(skipped))


def _pypi_index() -> dict[str, Any]:
    try:
        with urllib.request.urlopen(PYPI_JSON, timeout=60) as resp:
            return dict(json.load(resp)["releases"])
    except (OSError, ValueError, KeyError):
        pass
    run = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "sglang"],
                         capture_output=True, text=True, timeout=300, check=False)
    m = re.search(r"^Available versions:\s*(.+)$", run.stdout, re.MULTILINE)
    if m is None:
        raise ReleaseError("cannot list sglang's releases: PyPI's JSON API is unreachable and "
                           f"`pip index versions sglang` said: {run.stderr.strip()[-300:]}")
    return {v.strip(): None for v in m.group(1).split(",") if v.strip()}


def default_wheel_dir() -> Path:
    return default_cache_dir() / "wheels"


def download(version: str, directory: Path) -> Path:
    """`pip download --no-deps sglang==V -d DIR` (a wheel already there is not fetched again);
    the wheel's path."""
    directory.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
         f"sglang=={version}", "-d", str(directory)],
        capture_output=True, text=True, timeout=1800, check=False)
    named = re.findall(r"(sglang-" + re.escape(version) + r"-[^\s/]+\.whl)", run.stdout)
    for name in reversed(named):
        if (directory / name).is_file():
            return Path(directory / name)
    if run.returncode != 0:
        tail = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise ReleaseError(f"pip download sglang=={version} failed: {tail}")
    found = sorted(directory.glob(f"sglang-{version}-*.whl"))
    if not found:
        raise ReleaseError(f"pip download sglang=={version} gave no wheel in {directory}")
    return found[0]


# --- extracting each release, cached per wheel -----------------------------------------------

@dataclass(frozen=True, slots=True)
class ReleaseExtraction:
    version: str
    source: str  # the wheel's file name, or the directory read
    sha256: str | None  # the wheel's
    extraction: extract.Extraction


def wheel_version(wheel: Path) -> str:
    """The release a wheel's file name says (`sglang-0.5.23-cp311-…whl` → `0.5.23`)."""
    parts = wheel.name.split("-")
    if len(parts) < 3 or not wheel.name.endswith(".whl"):
        raise ReleaseError(f"{wheel}: not a wheel's file name (name-version-…whl)")
    return parts[1]


def extract_wheel(wheel: Path, *, cache_dir: Path | None = None,
                  flow: bool = True) -> ReleaseExtraction:
    """One wheel's records (every severity) and counts; kept in `cache_dir/extracted/` by the
    wheel's sha256 and the extractor's code, so a rebuild reads instead of parsing again.
    `flow`: messages passed to helpers too (`extract.extract_files`)."""
    data = wheel.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    code = code_fingerprint(*extract.EXTRACTOR_MODULES, "matcher.catalog.patterns",
                            "matcher.catalog.remedy")
    name = f"{sha[:32]}-{code}{'' if flow else '-noflow'}.json"
    cached = (cache_dir / "extracted" / name) if cache_dir else None
    if cached is not None and cached.is_file():
        try:
            doc = json.loads(cached.read_text(encoding="utf-8"))
            return ReleaseExtraction(doc["version"], wheel.name, sha, extract.Extraction(
                tuple(doc["records"]), extract.Stats(**doc["stats"])))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    source = extract.read_wheel(wheel)
    version = source.version
    if not version:
        raise ReleaseError(f"{wheel}: no version in its METADATA")
    result = extract.extract_files(source.files, version=version, flow=flow)
    result = extract.Extraction(result.records, result.stats + extract.Stats(
        files_skipped={"tests and benchmarks": source.excluded} if source.excluded else {}))
    if cached is not None:
        st = result.stats
        doc = {"version": version, "records": list(result.records), "stats": {
            "files": st.files, "sites": dict(st.sites), "with_message": dict(st.with_message),
            "covered": dict(st.covered), "records": dict(st.records),
            "skipped": dict(st.skipped), "files_skipped": dict(st.files_skipped)}}
        try:
            write_atomic(cached, json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
        except OSError:
            pass
    return ReleaseExtraction(version, wheel.name, sha, result)


def _extract_one(args: tuple[Path, Path | None, bool]) -> ReleaseExtraction:
    return extract_wheel(args[0], cache_dir=args[1], flow=args[2])


def extract_wheels(wheels: Sequence[Path], *, cache_dir: Path | None = None,
                   jobs: int | None = None, flow: bool = True) -> list[ReleaseExtraction]:
    """Each wheel extracted (in `jobs` processes), in the order given."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(wheels)))
    work = [(w, cache_dir, flow) for w in wheels]
    if jobs == 1:
        return [_extract_one(w) for w in work]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_extract_one, work))


# --- the counts written next to a merged catalog ---------------------------------------------

def stats_toml(per_release: Sequence[tuple[str, str, str | None, extract.Stats, int]], *,
               records: Sequence[Mapping[str, Any]], command: str,
               skipped_releases: Sequence[tuple[str, str]] = ()) -> str:
    """`per_release`: (version, source, sha256, stats, records in the merged catalog) each,
    oldest first."""
    total = extract.Stats()
    for _, _, _, st, _ in per_release:
        total = total + st

    def table(name: str, values: Mapping[str, int]) -> list[str]:
        return [f"\n[{name}]"] + [f"{json.dumps(k)} = {v}" for k, v in values.items()]

    lines = [
        ("# written by `sglang-matcher catalog extract`; coverage = sites_covered / "
        "sites_with_string_message over raise and assert sites, summed over the releases; "
        "\"frame\": bare raise and assert sites (no message), recognized by their traceback frame"),
        f"command = {json.dumps(command)}",
        f"releases = [{', '.join(json.dumps(v) for v, *_ in per_release)}]",
        f"records = {len(records)}",
        f"templates = {len({r['errorMessage'] for r in records} - {None})}",  # frames have none
        f"coverage = {round(total.coverage, 4)}",
    ]
    if skipped_releases:
        lines.append("\n[releases_skipped]")
        lines += [f"{json.dumps(v)} = {json.dumps(why)}" for v, why in skipped_releases]
    lines += table("sites_all_releases", total.sites)
    lines += table("sites_with_string_message_all_releases", total.with_message)
    lines += table("sites_covered_all_releases", total.covered)
    lines += table("skipped_all_releases", total.skipped)
    for version, source, sha, st, n in per_release:
        lines += [f"\n[release.{json.dumps(version)}]", f"source = {json.dumps(source)}"]
        if sha:
            lines.append(f"sha256 = {json.dumps(sha)}")
        lines += [f"files = {st.files}", f"records_in_catalog = {n}",
                  f"coverage = {round(st.coverage, 4)}"]
        for name, values in (("sites", st.sites), ("sites_with_string_message", st.with_message),
                             ("sites_covered", st.covered), ("records", st.records),
                             ("skipped", st.skipped), ("files_skipped", st.files_skipped)):
            inner = ", ".join(f"{json.dumps(k)} = {v}" for k, v in values.items())
            lines.append(f"{name} = {{{inner}}}")
    return "\n".join(lines) + "\n"
