"""`sglang-matcher fix`: a failure's way out applied to the launch command that failed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from matcher.catalog import Catalog
from matcher.catalog.schema import CatalogRecord
from matcher.commands.common import UsageError, catalog_args, find_record, load
from matcher.commands.parser import (
    EXIT_FOUND,
    EXIT_OK,
    Parser,
    Subcommands,
    exit_codes,
    positive_int,
)
from matcher.engine import Engine
from matcher.release import AUTO
from matcher.scan import scan_events

if TYPE_CHECKING:
    from matcher.catalog.schema import FixAction
    from matcher.fix import Fixed


def register(sub: Subcommands) -> None:
    fix = sub.add_parser(
        "fix", help="apply a failure's fix to the command that failed",
        description="Find the failure in --log (or take --pattern), apply its first way out to "
                    "the command given after --, and print the corrected command and what "
                    "changed; other ways out are listed.",
        epilog=exit_codes("0 fixed (or nothing to fix)",
                          "1 a failure without a fix of its command", "2 usage"))
    if isinstance(fix, Parser):
        fix.launch_hint = True  # its errors show where the launch command goes
    fix.add_argument("launch", nargs="+", metavar="-- COMMAND",
                     help="the sglang launch command that failed, after --")
    what = fix.add_mutually_exclusive_group(required=True)
    what.add_argument("--log", metavar="FILE", help="the log of the failed launch")
    what.add_argument("--pattern", metavar="ID",
                      help="a catalog record id (or a unique prefix of one, any case), or a slug")
    fix.add_argument("--way", type=positive_int, default=None, metavar="N",
                     help="apply the Nth way out (default: the first that changes this "
                          "command and leaves no value to fill in)")
    fix.add_argument("--format", choices=("text", "json"), default="text",
                     help="text for people (default), json: one object")
    catalog_args(fix)
    fix.set_defaults(func=lambda args: cmd_fix(args, load(args), sys.stdout))


def _failure_of_log(args: argparse.Namespace, catalog: Catalog, out: TextIO,
                    engine: Engine | None) -> tuple[CatalogRecord, dict[str, str], str] | int:
    """The record of the log's first root cause that has a fix (else its first), its captured
    values and how it is named; an exit code when there is nothing to apply."""
    events = scan_events([args.log], catalog, sglang_version=args.sglang_version or AUTO,
                         engine=engine).events
    causes = [e for e in events if e.get("role") != "consequence"
              and e.get("severity") in ("critical", "error")]
    if not causes:
        out.write(f"no failure found in {args.log}: nothing to fix\n")
        return EXIT_OK
    records = {e["pattern_id"]: r for e in causes
               if (r := catalog.by_id(e.get("pattern_id") or "")) is not None}
    known = [e for e in causes if e.get("pattern_id") in records]
    if not known:
        out.write(f"{args.log}: {causes[0]['error_class']}: {causes[0]['message'][:200]}\n"
                  "no catalog record knows this failure: no fix to apply\n")
        return EXIT_FOUND
    first = next((e for e in known if records[e["pattern_id"]].fix_actions), known[0])
    rec = records[first["pattern_id"]]
    failure = f"{rec.id} ({rec.slug}): {first['message'].splitlines()[0][:200]}"
    return rec, first.get("captures") or {}, failure


def cmd_fix(args: argparse.Namespace, catalog: Catalog, out: TextIO, *,
            engine: Engine | None = None) -> int:
    """`fix`: the failure of `--log` (its first root cause) or `--pattern`, its first way out
    (or `--way N`) applied to the command."""
    from matcher.fix import NeedsCaptures, apply, choose

    command = list(args.launch)
    captures: dict[str, str] = {}
    if args.pattern is not None:
        rec = find_record(catalog, args.pattern)
        failure = f"{rec.id} ({rec.slug})"
    else:
        found = _failure_of_log(args, catalog, out, engine)
        if isinstance(found, int):
            return found
        rec, captures, failure = found
    ways = rec.fix_actions
    if not ways:
        out.write(f"failure: {failure}\n{rec.id} says how to fix it in words only:\n")
        out.write("".join(f"  - {s}\n" for s in rec.how_to_fix) or "  (no solutions given)\n")
        out.write("".join(f"  see: {s}\n" for s in rec.references))
        return EXIT_FOUND
    if args.way is not None and not 1 <= args.way <= len(ways):
        raise UsageError(f"--way {args.way}: {rec.id} has {len(ways)} ways out")
    try:
        if args.way is None:
            way, fixed = choose(command, ways, captures)
        else:
            way, fixed = args.way, apply(command, ways[args.way - 1], captures)
    except NeedsCaptures as e:
        raise UsageError(str(e)) from e
    others = [(n, w) for n, w in enumerate(ways, 1) if n != way]
    if args.format == "json":
        out.write(json.dumps({
            "pattern_id": rec.id, "way": way, "ways": len(ways),
            "steps": list(fixed.steps), "command": list(fixed.argv), "removed": list(fixed.removed),
            "added": list(fixed.added), "before": list(fixed.before),
            "placeholders": list(fixed.placeholders), "notes": list(fixed.notes),
            "changes_model": fixed.changes_model,
            "other_ways": [[a.describe() for a in w] for _, w in others]},
            ensure_ascii=False) + "\n")
        return EXIT_OK
    out.write(_fixed_text(failure, way, len(ways), fixed, others))
    return EXIT_OK


def _fixed_text(failure: str, way: int, ways: int, fixed: Fixed,
                others: Sequence[tuple[int, Sequence[FixAction]]]) -> str:
    lines = [f"failure: {failure}",
             f"fix {way} of {ways}: " + "; ".join(fixed.steps)]
    lines += [f"  - {w}" for w in fixed.removed] + [f"  + {w}" for w in fixed.added]
    lines += [f"  ({note})" for note in fixed.notes]
    if fixed.changes_model:
        lines.append("  note: this changes what the model computes (its numerics or its "
                     "context), not only what it runs on; no other way applied here")
    if fixed.before:
        lines += ["first run:"] + [f"  {c}" for c in fixed.before]
    if not fixed.changes:
        lines.append("this changes nothing in the command given (its flags are already so): "
                     "the failure comes from elsewhere — see the other ways and the solutions")
    lines += ["corrected command:", f"  {fixed.command}"]
    if fixed.placeholders:
        lines.append("fill in before running: " + ", ".join(fixed.placeholders))
    if others:
        lines.append("other ways out (--way N):")
        lines += [f"  {n}. " + "; ".join(a.describe() for a in w) for n, w in others]
    return "\n".join(lines) + "\n"
