"""`sglang-matcher catalog test`: every record's examples match it, its noMatch lines do not."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from matcher.catalog import CatalogError, load_catalog
from matcher.catalog.check import check_examples
from matcher.commands.common import catalog_for
from matcher.commands.parser import EXIT_FOUND, EXIT_OK, Subcommands, exit_codes
from matcher.engine import Engine


def register(sub: Subcommands) -> None:
    test = sub.add_parser(
        "test", help="every record's examples match it and its noMatch lines do not",
        description="Match every record's example lines against the catalog (the built-in one "
                    "plus PATH, when given): each must be taken by its record, and no noMatch "
                    "line by it.",
        epilog=exit_codes("0 every example as stated", "1 examples failing",
                          "2 an invalid catalog"))
    test.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                      help="catalog files or directories (default: the built-in catalog)")
    test.set_defaults(func=lambda args: cmd_test(args.paths, sys.stdout))


def cmd_test(paths: Sequence[Path], out: TextIO) -> int:
    catalog = catalog_for(paths)
    if catalog.issues:
        raise CatalogError(list(catalog.issues))
    engine = Engine(load_catalog(user_paths=paths).records if paths else catalog.records)
    failures = check_examples(engine, catalog.records)
    for f in failures:
        out.write(f"FAIL {f}\n")
    n_examples = sum(len(r.examples_match) + len(r.examples_no_match) for r in catalog.records)
    out.write(f"{len(catalog.records)} records, {n_examples} examples, {len(failures)} failures\n")
    return EXIT_FOUND if failures else EXIT_OK
