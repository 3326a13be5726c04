"""`sglang-matcher explain`: one catalog record, all it says about its failure."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from matcher.catalog import Catalog
from matcher.catalog.schema import CatalogRecord
from matcher.commands.common import catalog_args, find_record, load
from matcher.commands.parser import EXIT_OK, Subcommands, exit_codes


def register(sub: Subcommands) -> None:
    explain = sub.add_parser(
        "explain", help="show one catalog record and its remediation",
        description="Show one catalog record: its pattern, where sglang raises it, what "
                    "happened, how to fix it, its ways out for `fix`, and lines it is seen in.",
        epilog=exit_codes("0 shown", "2 no record of that name, or an invalid catalog"))
    explain.add_argument("id", help="a pattern id (or a unique prefix of one, any case), or a slug")
    catalog_args(explain)
    explain.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return cmd_explain(args.id, load(args), sys.stdout)


def cmd_explain(record_id: str, catalog: Catalog, out: TextIO) -> int:
    rec = find_record(catalog, record_id)
    out.write("\n".join([*_head(rec), *_remedy(rec), *_seen(rec)]) + "\n")
    return EXIT_OK


def _head(rec: CatalogRecord) -> list[str]:
    lines = [
        f"{rec.id}  {rec.slug}",
        f"  layer: {rec.layer}   severity: {rec.severity}   class: {rec.error_class or '-'}"
        + ("   role: consequence" if rec.role == "consequence" else ""),
        f"  pattern: {rec.message_pattern}",
    ]
    if rec.raised_in is not None:
        lines.append(f"  raised in: {rec.raised_in.label()}")
    if rec.file_path:
        lines.append(f"  source: {rec.file_path}" + (f":{rec.line_number}" if rec.line_number else ""))
    if rec.github_url:
        lines.append(f"  url: {rec.github_url}")
    if rec.documentation:
        lines += ["", "What happened:", f"  {rec.documentation}"]
    if rec.trigger_scenarios:
        lines += ["", "When it happens:", f"  {rec.trigger_scenarios}"]
    return lines


def _remedy(rec: CatalogRecord) -> list[str]:
    lines: list[str] = []
    if rec.how_to_fix:
        lines += ["", "How to fix:"] + [f"  {n}. {s}" for n, s in enumerate(rec.how_to_fix, 1)]
    if rec.references:
        lines += ["", "No fix is known; to dig further:"] + [f"  - {s}" for s in rec.references]
    if rec.example_fix:
        lines += ["", "Example fix:"] + ["  " + x for x in rec.example_fix.splitlines()]
    if rec.fix_actions:
        lines += ["", "Ways out (`sglang-matcher fix --pattern ID --way N -- COMMAND…`):"] + [
            f"  {n}. " + "; ".join(a.describe() for a in way)
            for n, way in enumerate(rec.fix_actions, 1)]
    if rec.guard is not None:
        lines += ["", "Fails when:", f"  {rec.guard.when}"]
        if rec.guard.unfixed:
            lines.append(f"  no flag change proven: {rec.guard.unfixed}")
    if rec.prevention_tips:
        lines += ["", "Prevention:"] + [f"  - {t}" for t in rec.prevention_tips]
    return lines


def _seen(rec: CatalogRecord) -> list[str]:
    lines: list[str] = []
    if rec.examples_match:
        lines += ["", "Seen in logs as:"] + [
            "  " + x.strip().splitlines()[-1][:200] for x in rec.examples_match[:3]]
    lines.append(f"\n  defined in {rec.origin} (record {rec.index})")
    return lines
