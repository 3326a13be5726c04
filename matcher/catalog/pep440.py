"""sglang's release numbers in PEP 440 order, and ranges of releases (`"0.4.0..0.4.3.post2"`).

The order every catalog record's `sglangVersions` and `sglangLocations` are read in; the
bottom of the catalog's modules, so that the record type itself can ask whether it holds a
release (`CatalogRecord.in_version`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

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


def is_version(text: str) -> bool:
    """`text` is a PEP 440 version (else `version_key` sorts it after every version)."""
    return _PEP440.match(text) is not None

