"""Which records of the built-in catalog say what to do when they fire: counted per layer,
generator, source package and (for sglang's own generated records) exception class.

A record **has a fix** when it carries `fixActions` or at least one solution that is not a
pointer (`field_recall.is_pointer`: the source at a release, a search of the issues, "the
check must hold"). A record whose fix is computed when its event is made (the version
mismatch records, `matcher.catalog.mismatch`) is counted under `computed`. Everything else is
**no fix**: its event tells the operator what failed, not what to do.

    python bench/remedy_coverage.py              # the tables
    python bench/remedy_coverage.py --by class   # one table only (layer, generator, package, class, group)
    python bench/remedy_coverage.py --list GROUP # the no-fix records of one group (`router/worker`)
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from field_recall import is_pointer  # noqa: E402

from matcher.catalog import load_catalog  # noqa: E402

_COMPUTED = frozenset({"matcher.catalog.mismatch"})


def status(record: Any) -> str:
    """`fix`, `computed` or `none` (see the module's doc)."""
    if record.peek("fix_actions"):
        return "fix"
    if any(not is_pointer(s) for s in record.peek("how_to_fix")):
        return "fix"
    if record.peek("generator") in _COMPUTED:
        return "computed"
    return "none"


def _group(record: Any) -> str:
    """A finer family: the router's module, a native record's package, a deps record's
    package, sglang's own generated records by their top module directory."""
    gen = record.peek("generator") or ""
    pkg = record.peek("source_package") or ""
    path = record.peek("file_path") or ""
    if gen.endswith("router"):
        part = path.split("/src/", 1)[-1].split("/")[0] if "/src/" in path else path
        return f"router/{part.removesuffix('.rs') or '?'}"
    if gen:
        return f"{gen.rsplit('.', 1)[-1]}/{pkg}"
    if record.layer != "generated":
        return record.layer
    parts = path.split("/")
    rest = parts[parts.index("sglang") + 1:] if "sglang" in parts else parts
    if rest[:1] == ["srt"]:
        return "sglang/srt/" + (rest[1] if len(rest) > 2 else "(top)")
    return "sglang/" + (rest[0] if len(rest) > 1 else "(top)")


KEYS: dict[str, Callable[[Any], str]] = {
    "layer": lambda r: r.layer,
    "generator": lambda r: r.peek("generator") or "(sglang's source)",
    "package": lambda r: r.peek("source_package") or "(sglang)",
    "class": lambda r: (r.peek("error_class") or "(log line)").rsplit(".", 1)[-1]
    if r.layer == "generated" and not r.peek("generator") else "(not sglang's source)",
    "group": _group,
}


def table(records: Iterable[Any], key: Callable[[Any], str], name: str, top: int = 30) -> str:
    counts: dict[str, Counter[str]] = {}
    for r in records:
        counts.setdefault(key(r), Counter())[status(r)] += 1
    rows = sorted(counts.items(), key=lambda kv: (-kv[1]["none"], kv[0]))
    lines = [f"{name:<34} {'records':>8} {'fix':>7} {'computed':>8} {'no fix':>7} {'% fix':>6}"]
    total: Counter[str] = Counter()
    for _, c in rows:
        total.update(c)
    for k, c in [*rows[:top], ("all", total)]:
        n = sum(c.values())
        share = 100 * (c["fix"] + c["computed"]) / n if n else 0.0
        lines.append(f"{k[:34]:<34} {n:>8} {c['fix']:>7} {c['computed']:>8} {c['none']:>7} "
                     f"{share:>5.1f}%")
    if len(rows) > top:
        lines.insert(-1, f"({len(rows) - top} more)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from matcher import cache

    cache.use(cache.default_cache_dir())
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--by", choices=sorted(KEYS), action="append",
                    help="the tables to print (default: all)")
    ap.add_argument("--list", metavar="GROUP", help="print the no-fix records of this group")
    ap.add_argument("--top", type=int, default=30, help="rows per table")
    args = ap.parse_args(argv)
    records = load_catalog().records
    if args.list:
        for r in records:
            if _group(r) == args.list and status(r) == "none":
                print(f"{r.id}  {(r.peek('error_message') or r.message_pattern)[:150]}")
        return 0
    for name in args.by or ["layer", "generator", "package", "group", "class"]:
        print(table(records, KEYS[name], name, args.top))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
