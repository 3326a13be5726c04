"""`sglang-matcher catalog stats`: a catalog's records counted."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from matcher.commands.common import catalog_for
from matcher.commands.parser import EXIT_OK, EXIT_USAGE, Subcommands, exit_codes


def register(sub: Subcommands) -> None:
    stats = sub.add_parser(
        "stats", help="count a catalog's records by layer, severity, class, and records per "
                      "sglang release",
        description="Count a catalog's records by layer, severity and class, and the records "
                    "of each sglang release.",
        epilog=exit_codes("0 counted", "2 the catalog has problems (listed first)"))
    stats.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                       help="catalog files or directories (default: the built-in catalog)")
    stats.add_argument("--unevaluable", action="store_true",
                       help="also list the records whose guard reads server arguments and that "
                            "have no proven flag change, with why and the condition")
    stats.set_defaults(
        func=lambda args: cmd_stats(args.paths, sys.stdout, unevaluable=args.unevaluable))


def cmd_stats(paths: Sequence[Path], out: TextIO, *, unevaluable: bool = False) -> int:
    from matcher.catalog.stats import releases_of, render, render_unevaluable, summarize

    catalog = catalog_for(paths)
    for issue in catalog.issues:
        out.write(f"{issue}\n")
    out.write(f"catalog {catalog.version}: {len(catalog.files)} files, "
              f"{len(catalog.issues)} problems\n")
    # Records per release: the releases the catalog was extracted from (its stats file), else
    # the bounds its ranges name.
    summary = summarize(catalog.records, releases_of(catalog.files))
    out.write(render(summary))
    if unevaluable:
        out.write(render_unevaluable(summary))
    return EXIT_USAGE if catalog.issues else EXIT_OK
