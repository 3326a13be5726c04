"""Which code raises the text we do not know: the train split's unknown exceptions by the
package of the frame that raised them, and the records that did fire by the package they read.

Every excerpt of the train split (`tests/fixtures/field/`; never the test split) is scanned
with the built-in catalog as `bench/field_recall.py` scans it. Over ALL events (not only the
root causes) it counts

- each `sglang_unknown_error` event by where its exception was raised: the innermost frame
  printed above that exception in its traceback, as `pkg/module` from `site-packages/` (or
  `dist-packages/`) on, `sglang/…` for sglang's own code, `stdlib/…` for Python's, `no frame`
  when the event carries no traceback frame; then by exception class; and whether
  `matcher.catalog.deps.SCOPES` already reads that file (`in scope`: the miss is not one of
  scope);
- each record's event by the record's `sourcePackage` (`sglang` when it names none);
- every exception event (a record's or unknown) whose innermost frame is another package's,
  by that package and by what spoke for it (`unknown`, `curated`, or the generator of the
  record). The train split is the one records were written from: most of its exceptions are
  known by now, so this table, not the unknown one alone, says which packages' code raises the
  failures users meet (and so which ones the test split's unknown exceptions likely come from).

This is the data for widening `deps.SCOPES`: a package that raises many unknown exceptions
here is worth reading; one that raises none is not worth its memory.

    python bench/unknown_origins.py            # the tables
    python bench/unknown_origins.py --top 30   # longer tables
    python bench/unknown_origins.py --list     # also every unknown event with its excerpt
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from field_recall import ROOT, corpus, scan

from matcher.catalog import load_catalog
from matcher.catalog.check import frame_text
from matcher.engine import Engine
from matcher.frames import Frame, frames_by_exception

_INSTALLED = re.compile(r"(?:site|dist)-packages/")
_STDLIB = re.compile(r"/(?:lib|Lib)/python3(?:\.\d+)?/")


def innermost_frame(traceback: str, error_class: str) -> Frame | None:
    """The innermost frame printed above the event's exception (the last one of its class in
    the traceback, else the traceback's last exception)."""
    framed = [r for r in frame_text(traceback, "tb") if r.exceptions]
    if not framed:
        return None
    record = framed[-1]
    per_exception = frames_by_exception(record)
    chosen: tuple[Frame, ...] = ()
    for exc, frames in zip(record.exceptions, per_exception, strict=False):
        if frames and (not chosen or exc.error_class == error_class):
            chosen = frames
    return chosen[-1] if chosen else None


def origin(path: str) -> tuple[str, str]:
    """(package, `package/module` path from the package on) of a frame's file."""
    installed = list(_INSTALLED.finditer(path))  # the last: a venv inside a site-packages
    if installed:
        inside = path[installed[-1].end():]
    elif "sglang/" in path:
        inside = path[path.rfind("sglang/"):]
    elif (s := _STDLIB.search(path)) is not None:
        inside = "stdlib/" + path[s.end():]
    else:
        return "other", path.rsplit("/", 1)[-1]
    return inside.split("/", 1)[0], inside


def module(inside: str, depth: int = 2) -> str:
    """`torch/_dynamo/x.py` → `torch/_dynamo`: the package and its first subpackage."""
    parts = inside.split("/")
    return "/".join(parts[:depth]) if len(parts) > depth else inside


def in_scope(inside: str) -> bool:
    from matcher.catalog.deps import SCOPES

    return any(scope(inside) for scope, _ in SCOPES.values())


def survey(top: int, listing: bool) -> None:
    catalog = load_catalog()
    engine = Engine(catalog.records)
    by_id = {r.id: r for r in catalog.records}
    by_package: Counter[str] = Counter()
    by_module: Counter[str] = Counter()
    by_class: Counter[str] = Counter()
    fired: Counter[str] = Counter()
    raised: Counter[str] = Counter()
    raised_by: Counter[str] = Counter()
    scoped = unscoped = 0
    excerpts = corpus()
    for ex in excerpts:
        for e in scan(engine, catalog, ex.path):
            record = by_id.get(e.get("pattern_id") or "")
            if e.get("traceback") and e.get("error_class"):
                package, _, mod = _where(e)
                if package not in ("no frame", "sglang"):
                    who = "unknown" if record is None else record.generator or "curated"
                    raised[mod] += 1
                    raised_by[f"{package} ({who})"] += 1
                    if listing:
                        print(f"raised outside sglang: [{_where(e)[1]}] {who} "
                              f"{e.get('pattern_id') or ''}: {(e.get('message') or '')[:120]}")
            if e.get("pattern_id"):
                fired[(record.source_package if record else "") or "sglang"] += 1
                continue
            if e.get("event") != "sglang_unknown_error":
                continue
            package, inside, mod = _where(e)
            by_package[package] += 1
            by_module[mod] += 1
            by_class[f"{package}: {e.get('error_class') or '?'}"] += 1
            covered = package not in ("no frame", "sglang", "other") and in_scope(inside)
            scoped += covered
            unscoped += not covered and package not in ("no frame", "sglang")
            if listing:
                rel = ex.path.relative_to(ROOT / "tests" / "fixtures").as_posix()
                print(f"{rel}: [{inside}{' in scope' if covered else ''}] "
                      f"{(e.get('message') or '')[:140]}")
    total = sum(by_package.values())
    print(f"train split: {len(excerpts)} excerpts, {total} unknown exception events "
          f"({scoped} raised in a file deps.SCOPES reads, {unscoped} in another package's)")
    _print("unknown exceptions by package of the innermost frame", by_package, top)
    _print("… by package/subpackage", by_module, top)
    _print("… by package and exception class", by_class, top)
    _print("record events by sourcePackage", fired, top)
    _print("exception events raised outside sglang, by package/subpackage", raised, top)
    _print("… by package and what spoke for them", raised_by, top)


def _where(event: dict[str, Any]) -> tuple[str, str, str]:
    frame = innermost_frame(event.get("traceback") or "", event.get("error_class") or "")
    if frame is None:
        return "no frame", "", "no frame"
    package, inside = origin(frame.path)
    return package, inside, module(inside)


def _print(title: str, counts: Counter[str], top: int) -> None:
    print(f"\n{title}:")
    for name, n in counts.most_common(top):
        print(f"  {n:4d}  {name}")


def main(argv: list[str] | None = None) -> int:
    from matcher import cache

    cache.use(cache.default_cache_dir())
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=15, help="rows per table")
    ap.add_argument("--list", action="store_true", help="also print every unknown event")
    args = ap.parse_args(argv)
    survey(args.top, args.list)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
