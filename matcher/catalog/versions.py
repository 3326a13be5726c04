"""Which sglang the generated layer speaks for: every extracted release, one of them, or the
sglang installed next to us.

`patterns/sglang/generated/sglang.jsonl` is ONE catalog merged over every release extracted
(`catalog extract --versions 0.4.0..0.5.23`): one record per id — an id depends on the module,
the class and the message template, never on the line — whose `sglangVersions` are inclusive
ranges of releases in PEP 440 order (`["0.4.0..0.4.3.post2", "0.5.1..0.5.23"]`; a version v is
in `"A..B"` when A <= v <= B) and whose `sglangLocations` say where the site was in the releases
whose file or line differ from the newest's. `"all"` (the default) loads the catalog as it is.
A fleet that runs one release picks it (`sglang_version = "0.5.6"`): only the records whose
ranges hold it are loaded — fewer patterns, and only messages that release can print. A version
outside the releases the catalog covers is an error naming what it covers. `"installed"`
extracts from the sglang importable in this Python environment at start-up; the result is cached
per sglang version and extractor code, so only the first start pays the few seconds it takes.

Several files in the generated directory (older per-release `sglang-<version>.jsonl` files) are
merged by id (`merge_versions`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

# The release order is `pep440`'s; its names are re-exported here for the generators that
# import them from this module.
from matcher.catalog.pep440 import compact_ranges as compact_ranges
from matcher.catalog.pep440 import in_ranges as in_ranges
from matcher.catalog.pep440 import is_version
from matcher.catalog.pep440 import parse_range as parse_range
from matcher.catalog.pep440 import sort_versions as sort_versions
from matcher.catalog.pep440 import version_key as version_key
from matcher.catalog.schema import CatalogRecord, Location, pack_locations

ALL = "all"
INSTALLED = "installed"
_FILE = re.compile(r"^sglang-(?P<version>.+)\.jsonl$")


class VersionError(Exception):
    """The requested sglang version has no catalog here; the message says what there is."""


def generated_paths(generated_dir: Path, version: str) -> list[Path]:
    """The files of the generated layer (every `.jsonl` there); `version` is filtered by
    `select_version` once they are loaded."""
    found = sorted(generated_dir.glob("*.jsonl")) if generated_dir.is_dir() else []
    if not found and version != ALL:
        raise VersionError(
            f"no generated catalog in {generated_dir} for sglang {version}: set sglang_version "
            f"to \"{INSTALLED}\" to extract from the sglang installed here, or run "
            f"`sglang-matcher catalog extract --wheel sglang-{version}-*.whl -o FILE` and give "
            f"FILE as a catalog")
    return found


def covered(records: Iterable[CatalogRecord]) -> tuple[str, str] | None:
    """The oldest and newest release the records name, or None if they name none."""
    bounds = {b for r in records for text in r.sglang_versions for b in parse_range(text)}
    if not bounds:
        return None
    ordered = sort_versions(bounds)
    return ordered[0], ordered[-1]


def select_version(records: Sequence[CatalogRecord], version: str) -> list[CatalogRecord]:
    """The records whose ranges hold `version` (records that name no release are kept), each
    with its file, line and link as they are in that release (`location_for`).

    A version outside the releases the catalog covers is a `VersionError` that names them.
    """
    span = covered(records)
    if span is None:
        raise VersionError(f"the generated catalog names no sglang releases: it cannot be "
                           f"narrowed to sglang {version}; set sglang_version to \"{ALL}\"")
    lo, hi = span
    if not is_version(version) or not (version_key(lo) <= version_key(version)
                                              <= version_key(hi)):
        raise VersionError(
            f"no generated catalog for sglang {version}: the shipped catalog covers sglang "
            f"{lo}..{hi}; set sglang_version to a release in that range, to \"{ALL}\", or to "
            f"\"{INSTALLED}\" to extract from the sglang installed here, or run "
            f"`sglang-matcher catalog extract --wheel sglang-{version}-*.whl -o FILE` and give "
            f"FILE as a catalog")
    out = []
    for r in records:
        if not r.in_version(version):
            continue
        if r.locations:  # the site as it is in that release
            file_path, line_number, github_url = r.location_for(version)
            r = dataclasses.replace(r, file_path=file_path, line_number=line_number,
                                    github_url=github_url)
        out.append(r)
    return out


def merge_versions(records: Sequence[CatalogRecord]) -> list[CatalogRecord]:
    """One record per id across several generated files: the newest release's site, every
    file's ranges listed, and each file's location kept in `sglang_locations` when they differ.
    """
    by_id: dict[str, list[CatalogRecord]] = {}
    for r in records:
        by_id.setdefault(r.id, []).append(r)
    out = []
    for group in by_id.values():
        if len(group) == 1:
            out.append(group[0])
            continue

        def newest_key(r: CatalogRecord) -> tuple[tuple[int, str], ...]:
            return max((version_key(parse_range(v)[1]) for v in r.sglang_versions), default=())

        group = sorted(group, key=newest_key, reverse=True)
        newest = group[0]
        ranges = sorted({v for r in group for v in r.sglang_versions},
                        key=lambda v: tuple(version_key(b) for b in parse_range(v)))
        entries: list[Location] = []
        for r in group:
            entries.extend(r.sglang_locations)
            entries.extend((v, r.file_path, r.line_number, r.github_url)
                           for v in r.sglang_versions)
        top = (newest.file_path, newest.line_number)
        locations = (tuple(dict.fromkeys(entries))
                     if any((e[1], e[2]) != top for e in entries) else ())
        out.append(dataclasses.replace(newest, sglang_versions=tuple(ranges),
                                       locations=pack_locations(locations)))
    return out
