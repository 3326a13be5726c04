"""`sglang-matcher catalog lint`: catalog files validated (schema, patterns)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from matcher.catalog.patterns import MIN_CUT_HEAD, cut_head
from matcher.commands.common import catalog_for
from matcher.commands.parser import EXIT_OK, EXIT_USAGE, Subcommands, exit_codes


def register(sub: Subcommands) -> None:
    lint = sub.add_parser(
        "lint", help="validate catalog files: schema, patterns (exit 2 on any problem)",
        description="Validate catalog files (each record's fields and its patterns) and say "
                    "each problem on a line, with where it is.",
        epilog=exit_codes("0 no problem", "2 problems found"))
    lint.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                      help="catalog files or directories (default: the built-in catalog)")
    lint.set_defaults(func=lambda args: cmd_lint(args.paths, sys.stdout))


def cmd_lint(paths: Sequence[Path], out: TextIO) -> int:
    catalog = catalog_for(paths)
    for issue in catalog.issues:
        out.write(f"{issue}\n")
    out.write(f"{len(catalog.records)} records in {len(catalog.files)} files, "
              f"{len(catalog.issues)} problems\n")
    # Not problems: records a line cut short by a collector cannot be matched to.
    headless = [r for r in catalog.records
                if r.raised_in is None and cut_head(r.message_pattern) is None]
    for r in headless:
        if r.layer != "generated":
            out.write(f"note: {r.where}: no run of {MIN_CUT_HEAD}+ literal characters in "
                      f"its pattern: a line cut short is not recognized as this record\n")
    generated = sum(r.layer == "generated" for r in headless)
    if generated:
        out.write(f"note: {generated} generated records have no such run (short messages): "
                  f"a line cut short is not recognized as them\n")
    return EXIT_USAGE if catalog.issues else EXIT_OK
