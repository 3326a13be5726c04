"""`sglang-matcher catalog export`: the catalog's patterns for grep or mtail."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from matcher.catalog import CatalogError
from matcher.commands.common import UsageError, catalog_for
from matcher.commands.parser import EXIT_OK, Subcommands, exit_codes


def register(sub: Subcommands) -> None:
    export = sub.add_parser(
        "export", help="the catalog's patterns for grep -E -f (POSIX ERE) or as an mtail program",
        description="Write the catalog's patterns for grep -E -f (POSIX ERE) or as an mtail "
                    "program; a pattern that cannot be translated is named on stderr, not "
                    "dropped silently.",
        epilog=exit_codes("0 written", "2 an invalid catalog, or the output cannot be written"))
    export.add_argument("--dialect", choices=("grep", "mtail"), required=True,
                        help="grep: patterns for grep -E -f; mtail: an mtail program")
    export.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="catalog files or directories (default: the built-in catalog)")
    export.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write here (default: stdout); what cannot be translated goes to "
                             "stderr either way")
    export.set_defaults(
        func=lambda args: cmd_export(args.dialect, args.paths, args.output, sys.stdout))


def cmd_export(dialect: str, paths: Sequence[Path], output: Path | None, out: TextIO) -> int:
    """Patterns for grep or mtail; the untranslatable ones are listed on stderr, not dropped."""
    from matcher.catalog.export import export, render

    catalog = catalog_for(paths)
    if catalog.issues:
        raise CatalogError(list(catalog.issues))
    result = export(catalog.records, dialect)  # type: ignore[arg-type]
    text = render(result, catalog_version=catalog.version)
    if output is None:
        out.write(text)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot write {output}: {e.strerror}") from e
    for record, why in result.skipped:
        print(f"sglang-matcher: not translated: {record.where}: {why}", file=sys.stderr)
    sys.stderr.write(result.summary())
    return EXIT_OK
