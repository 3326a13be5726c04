"""`sglang-matcher catalog precompile`: the built-in catalog compiled once, loaded as it is by
every start that fits it (`matcher.precompiled`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from matcher.catalog import CatalogError, load_catalog
from matcher.commands.parser import EXIT_OK, Subcommands, exit_codes


def register(sub: Subcommands) -> None:
    pre = sub.add_parser(
        "precompile", help="compile the built-in catalog into the artifact a start loads as it "
                           "is (matcher/_precompiled; part of the catalog build)",
        description="Compile the built-in catalog into the artifact a start loads as it is, "
                    "keyed on the catalog files, the code, Hyperscan and the machine.",
        epilog=exit_codes("0 written (or, with --if-needed, it already fits)",
                          "2 an invalid catalog"))
    pre.add_argument("-o", "--output", type=Path, metavar="DIR",
                     help="where to write it (default: the package's matcher/_precompiled)")
    pre.add_argument("--patterns", type=Path, metavar="DIR",
                     help="the built-in catalog's directory (default: the package's)")
    pre.add_argument("--if-needed", action="store_true",
                     help="only if the artifact there does not fit this catalog, code, "
                          "Hyperscan and machine (the container image's build runs this)")
    pre.set_defaults(func=lambda args: cmd_precompile(args.output, args.patterns, sys.stdout,
                                                      if_needed=args.if_needed))


def cmd_precompile(output: Path | None, patterns: Path | None, out: TextIO, *,
                   if_needed: bool = False) -> int:
    from matcher import precompiled
    from matcher.catalog import builtin_patterns_dir

    start = time.perf_counter()
    dest = output or precompiled.default_dir()
    base = patterns or builtin_patterns_dir()
    if if_needed:
        fits, note = precompiled.check(base, dest)
        if fits is not None:
            out.write(f"{dest}: fits, nothing to do\n")
            return EXIT_OK
        out.write(f"{dest}: {note}\n")
    catalog = load_catalog(builtin_dir=base, precompiled=False)
    if catalog.issues:
        raise CatalogError(list(catalog.issues))
    manifest = precompiled.build(dest, base, catalog.records, catalog.version)
    size = sum(f.stat().st_size for f in dest.iterdir() if f.is_file())
    out.write(f"wrote {dest}: {manifest['records']} records ({manifest['matched']} compiled), "
              f"{size / 1e6:.1f} MB, catalog {manifest['version']}, in "
              f"{time.perf_counter() - start:.0f} s\n")
    return EXIT_OK
