"""The fix for a dependency mismatch the symbol index cannot date, decided by rule.

`matcher.catalog.mismatch` answers `cannot import name 'X' from 'P.m'` (and `module 'P' has no
attribute 'X'`, `No module named 'P.m'`) from the index of P's releases. When there is no index
of P, what is still known is: which distribution P is, what each sglang release requires of it (the pin table,
`matcher.catalog.pin_table`), which release wrote the log when it says so, and whose code ran
the import (the traceback's frames). From those:

- **pinned**: sglang requires P and sglang's code (or code the log does not show) imported it:
  the installed P is not the one the release pins. With the release known and its pin exact,
  `pip install 'P==v'`; with it unknown, each release's pin.
- **unpinned**: sglang's code imported P (its frame shows it, or the message shows an installed
  P) but no sglang release requires it (aiter, deep_gemm, flash-attn …: built from source or
  installed by sglang's Docker images): the installed build is another than the one the release
  was written against — install the build its image uses.

Another package's or a project's code importing P gets no answer here: what that code wants of
P is in its own requirements, which the matcher does not have. Pure but for reading the table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from matcher.catalog.answer import Answer
from matcher.catalog.pin_table import PinTable, runs
from matcher.catalog.symbols import DISTRIBUTION_OF_MODULE

# Import names whose distribution is not the import name normalized (`_` → `-`, lower case).
IMPORT_DISTRIBUTION: Mapping[str, str] = {
    "PIL": "pillow", "zmq": "pyzmq", "yaml": "pyyaml", "cv2": "opencv-python-headless",
    "google": "protobuf", "sklearn": "scikit-learn", "attr": "attrs", "dateutil":
    "python-dateutil", "multipart": "python-multipart", "flash_attn": "flash-attn",
}
MAX_LISTED = 8  # pins listed per release range when the running release is not known

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+')
_SITE = re.compile(r"(?:site|dist)-packages/(?P<top>[A-Za-z_][\w]*)")


def distributions(top: str, table: PinTable) -> list[str]:
    """The distributions that may install the import name `top`, those sglang pins first."""
    named = [*DISTRIBUTION_OF_MODULE.get(top, ()), IMPORT_DISTRIBUTION.get(top, ""),
             re.sub(r"[-_.]+", "-", top).lower()]
    out = list(dict.fromkeys(n for n in named if n))
    return sorted(out, key=lambda d: d not in table.pins)


def frame_package(path: str) -> str:
    """The package a traceback frame's file belongs to: `sglang` for sglang's own modules (a
    source checkout's `…/python/sglang/srt/…` too), else the top package under site-packages,
    else the first component of a relative path (pastes shorten them), else ``."""
    parts = path.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "sglang" and parts[i + 1] not in ("python", ""):
            return "sglang"
    site = _SITE.search(path)
    if site:
        return site.group("top")
    if not path.startswith(("/", "<")) and len(parts) > 1:
        return parts[0]
    return ""


def innermost(traceback: str | None) -> str | None:
    """The package of the traceback's innermost frame (`` for a script or project); None
    when the log shows no frame."""
    frames = [m["path"] for m in _FRAME.finditer(traceback or "")]
    return frame_package(frames[-1]) if frames else None


def importer(traceback: str | None, top: str) -> str | None:
    """Whose code asked for P: the innermost frame not in P itself (`sglang`, another
    package's name, or `` for a script or project); None when the log shows no frame."""
    if not traceback:
        return None
    frames = [frame_package(m["path"]) for m in _FRAME.finditer(traceback)]
    for pkg in reversed(frames):
        if pkg != top:
            return pkg
    return None


def answer(top: str, what: str, releases: Sequence[str], label: str | None,
           traceback: str | None, table: PinTable | None, *, installed: bool = False
           ) -> Answer | None:
    """`what`: the missing thing as the message names it (`` `aiter.dtypes` ``); `releases`:
    the sglang releases the log names (`label`, as it says them); `installed`: the message
    shows P's file under site-packages (an installed distribution, not a local module)."""
    if top == "sglang" or table is None:
        return None
    who = importer(traceback, top)
    if who not in (None, "sglang"):
        return None  # another package's or a project's code: its own requirements decide
    dists = distributions(top, table)
    pinned = next((d for d in dists if d in table.pins), None)
    if pinned is None:
        # a package no wheel requires is called a companion only when sglang's frame asked for
        # it, or the message shows an installed one: else it may be a script's own module
        return _unpinned(top, what, label) if who == "sglang" or installed else None
    return _pinned(pinned, what, releases, label, table)


def _pinned(dist: str, what: str, releases: Sequence[str], label: str | None,
            table: PinTable) -> Answer | None:
    lead = f"The installed {dist} does not have {what}."
    specs = sorted({s for r in releases if (s := table.spec(dist, r)) is not None})
    if releases and specs:
        doc = f"{lead} sglang {label} requires {' or '.join(dist + s for s in specs)}."
        exact = [s for s in specs if s.startswith("==")]
        if len(specs) != 1 or not exact:
            return Answer(doc, (), ())  # a range admits the installed one too: say no more
        req = dist + exact[0]
        return Answer(doc, ((f"Install the {dist} that sglang {label} pins: pip install '{req}' "
                            f"(check with pip show {dist})"),), (req,))
    # an unbounded requirement (`numpy`) admits whatever is installed: it says nothing
    by_spec = {spec: rs for spec, rs in table.pinned_by(dist).items() if spec}
    if not by_spec:
        return None
    if len(by_spec) > MAX_LISTED:
        return Answer(
            f"{lead} Every sglang release requires {dist}; the release that wrote this log is "
            "not known.",
            ((f"Put back the {dist} your sglang release pins: pip install \"sglang==<the release "
             f"you run>\" (pip show sglang) installs it again when the installed {dist} is not "
             "the one it requires"),), ())
    order = list(table.releases)
    listed = "; ".join(f"sglang {runs(rs, order)}: pip install '{dist}{spec}'"
                       for spec, rs in sorted(by_spec.items(), key=lambda kv: kv[1][0]))
    return Answer(f"{lead} The release that wrote this log is not known.",
                  (f"Install the {dist} your sglang release pins (pip show sglang): {listed}",), ())


def _unpinned(top: str, what: str, label: str | None) -> Answer:
    release = f"sglang {label}" if label else "your sglang release"
    doc = (f"sglang's code uses {what}, but no sglang release requires {top} in its wheel: it is "
           "built from source or installed by sglang's Docker images, and the installed build is "
           f"another than the one {release} was written against.")
    return Answer(doc, (
        (f"Install the {top} build that {release} is made with: the version or commit sglang's "
        "Dockerfile for it builds (ROCm's aiter: AITER_COMMIT in docker/rocm.Dockerfile), or run "
        f"the lmsysorg/sglang image of a release whose {top} matches its code"),), ())
