"""A site → its catalog record (seed-schema v2): the id, the slug, the documentation sentence,
the frame a traceback prints for a bare site, and the tags and fixes of a failed import."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from matcher.catalog import remedy
from matcher.catalog.extract_sites import IMPORTED, Site
from matcher.catalog.extract_stats import FRAME

REPO = "sgl-project/sglang"
GITHUB = f"https://github.com/{REPO}"
ID_PREFIX = "sglang-matcher/generated/"
# A frame record's message: none at all (`AssertionError` printed alone).
FRAME_PATTERN = "^$"
# Tags: a message passed to a helper that raises or logs it; a warning that reports a failure
# (`_failure_of`: kept with `--severity failure`).
VIA_HELPER = "via-helper"
FAILURE = "failure"


def record_id(module: str, error_class: str, template: str) -> str:
    """Stable across versions while the message, its class and its module stay the same."""
    key = f"{ID_PREFIX}{module}\n{error_class}\n{template}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def slugify(text: str, limit: int = 48) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].rstrip("-")


def raised_in(site: Site, path: str, lines: Sequence[str]) -> dict[str, str]:
    """The frame a traceback prints for a site: path from `sglang/` on, `co_name`, and the
    site's line stripped, as `traceback` strips it."""
    source = lines[site.line - 1].strip() if site.line <= len(lines) else ""
    return {"path": path, "function": site.code_name, "source": source}


def _documentation(site: Site, path: str, *, frame: bool) -> str:
    where = f"sglang/{path.removeprefix('sglang/')}:{site.line}"
    fn = f"`{site.function}()`" if site.function else "module-level code"
    cond = site.condition if len(site.condition) <= 200 else site.condition[:199] + "…"
    if frame and site.kind == "assert":
        return (f"{fn} in {where} asserts `{cond}`: the assertion failed, and Python printed no "
                "message — the traceback's frame (raisedIn) tells the site.")
    if frame:
        when = f" when `{cond}`" if cond else ""
        return (f"{fn} in {where} raises {site.error_class} without a message{when} — the "
                "traceback's frame (raisedIn) tells the site.")
    what = {"raise": f"raises {site.error_class}", "assert": "asserts",
            "log": f"logs at level {site.severity}"}[site.kind]
    if site.via:
        doc = f"{fn} in {where} passes this message to `{site.via}`, which {what} with it"
    else:
        doc = f"{fn} in {where} {what} with this message"
    if cond:
        doc += f": the assertion `{cond}` failed" if site.kind == "assert" else f" when `{cond}`"
    doc += "."
    if site.failure == "gave up":
        doc += " The warning says sglang tried and gave up: what it tried is not in effect."
    elif site.failure:
        doc += (f" It is logged where sglang caught an exception (`{site.failure}`) and carried "
                "on without what failed: the text after the colon is that exception.")
    return doc


def site_record(rid: str, site: Site, template: str | None, pattern: str, path: str, module: str,
            version: str, *, frame: dict[str, str] | None = None) -> dict[str, Any]:
    """`template` is None for a frame record: its `frame` (raisedIn) names it instead — by the
    whole test for an assert, since its printed line may be `assert (` alone."""
    file_path = f"python/{path}"
    if frame is None:
        named_by = (template or "").strip("'\"")
    else:
        named_by = f"assert {site.condition}" if site.kind == "assert" else frame["source"]
    parts = PurePosixPath(path).parts
    return {
        "id": rid,
        "repo": REPO,
        "slug": slugify(named_by) or slugify(module),
        "errorMessage": template,
        "messagePattern": pattern,
        "errorType": site.kind,
        "errorClass": site.error_class,
        "severity": site.severity,
        "filePath": file_path,
        "lineNumber": site.line,
        "githubUrl": f"{GITHUB}/blob/v{version}/{file_path}#L{site.line}",
        **({"raisedIn": frame} if frame is not None else {}),
        **({"guard": {"when": remedy.when_of(site.kind, site.guard or site.condition)}}
           if site.condition else {}),
        "documentation": _documentation(site, path, frame=frame is not None),
        "tags": ["sglang", "generated", site.kind, *([FRAME] if frame is not None else []),
                 *([VIA_HELPER] if site.via else []), *([FAILURE] if site.failure else []),
                 *(["import-error"] if site.failure.endswith(IMPORTED) else []),
                 *parts[1:-1][:2]],
        **({"solutions": list(IMPORT_FIX)} if site.failure.endswith(IMPORTED) else {}),
        "sglangVersions": [version],
        "schemaVersion": 2,
    }


# What a warning that prints a failed import (`Ignore import error when loading {name}: {e}`)
# tells the operator to do: the exception's text after the colon says which of these.
IMPORT_FIX = (
    ("`No module named 'X'`: install the package that provides module X into the environment "
     "that runs sglang (`pip install X` when the package has the module's name; `No module "
     "named 'X.y'` with X installed: X is another version than this release expects)."),
    ("`cannot import name 'N' from 'M'`: the installed M is not the version this sglang "
     "release was built against: reinstall the versions it pins (`pip install "
     "sglang==<release>` resolves them; for sgl-kernel and flashinfer, the versions its "
     "requirements name)."),
    ("A shared library that fails to load (`lib….so: cannot open shared object file`, "
     "`undefined symbol`): install the CUDA/ROCm runtime and the kernel package built for it, "
     "or use the sglang container image."),
)
