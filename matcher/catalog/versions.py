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
import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from matcher.catalog.schema import CatalogRecord, Location, pack_locations

ALL = "all"
INSTALLED = "installed"
_FILE = re.compile(r"^sglang-(?P<version>.+)\.jsonl$")


class VersionError(Exception):
    """The requested sglang version has no catalog here; the message says what there is."""


_PEP440 = re.compile(
    r"^\s*v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre_l>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_n>\d+)?)?"
    r"(?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?\s*$", re.IGNORECASE)
_PRE = {"a": "a", "alpha": "a", "b": "b", "beta": "b", "c": "rc", "rc": "rc", "pre": "rc",
        "preview": "rc"}
_NONE = 1 << 40  # "no dev part": after every .devN


@functools.lru_cache(maxsize=4096)
def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """A sort key in PEP 440 order: `0.5.10` after `0.5.9`, `0.5.10rc1` before `0.5.10`,
    `0.4.3.post2` after `0.4.3` and before `0.4.4`; `0.5` equals `0.5.0`.

    Written out here (not `packaging.version`, which the daemon does not depend on) for the
    public version scheme (epoch, release, a/b/rc, .post, .dev; a local `+label` is ignored);
    the tests check it against `packaging`. Every key is a tuple of `(int, str)` pairs of one
    length, so keys compare with each other and with `()` (below all). A text that is not a
    PEP 440 version sorts after every version, by its digit and letter runs.
    """
    m = _PEP440.match(version)
    if m is None:
        return ((1 << 50, ""),) + tuple(
            (int(part), "") if part.isdigit() else (-1, part)
            for part in re.findall(r"\d+|[A-Za-z]+", version))
    release = [int(x) for x in m.group("release").split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    release += [0] * (8 - len(release))
    post = m.group("post_n1") or m.group("post_n2")
    has_post = m.group("post_n1") is not None or m.group("post_l") is not None
    dev = m.group("dev_n")
    has_dev = m.group("dev_l") is not None
    if m.group("pre_l"):
        pre = (-1, _PRE[m.group("pre_l").lower()]), (int(m.group("pre_n") or 0), "")
    elif has_dev and not has_post:
        pre = (-2, ""), (0, "")  # 1.0.dev0 before 1.0a0
    else:
        pre = (0, "~"), (0, "")  # a final release: after every a/b/rc
    return (
        (int(m.group("epoch") or 0), ""),
        *((n, "") for n in release[:8]),
        *pre,
        ((int(post or 0) if has_post else -1), ""),
        ((int(dev or 0) if has_dev else _NONE), ""),
    )


def parse_range(text: str) -> tuple[str, str]:
    """`"0.4.0..0.4.3.post2"` → its bounds; `"0.5.23"` → `("0.5.23", "0.5.23")`."""
    lo, sep, hi = text.partition("..")
    return lo.strip(), (hi.strip() if sep else lo.strip())


def in_ranges(version: str, ranges: Iterable[str]) -> bool:
    """`version` lies in one of the ranges: `A <= version <= B` in PEP 440 order."""
    k = version_key(version)
    for text in ranges:
        lo, hi = parse_range(text)
        if version_key(lo) <= k <= version_key(hi):
            return True
    return False


def compact_ranges(present: Iterable[str], releases: Sequence[str]) -> list[str]:
    """The runs of consecutive `releases` (already in PEP 440 order) that are in `present`:
    `["0.4.0..0.4.3.post2", "0.5.1..0.5.23"]`; a run of one release is just its name."""
    have = set(present)
    out: list[str] = []
    run: list[str] = []
    for v in [*releases, None]:
        if v is not None and v in have:
            run.append(v)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}")
            run = []
    return out


def sort_versions(versions: Iterable[str]) -> list[str]:
    return sorted(set(versions), key=lambda v: (version_key(v), v))


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
    if _PEP440.match(version) is None or not (version_key(lo) <= version_key(version)
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
