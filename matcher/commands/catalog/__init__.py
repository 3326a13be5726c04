"""`sglang-matcher catalog …`: the commands that check, count, make and export catalogs, one
module each."""

from __future__ import annotations

from matcher.commands.catalog import export, extract, lint, precompile, server_args, stats, test
from matcher.commands.parser import SubcommandParser, Subcommands, exit_codes


def register(sub: Subcommands) -> None:
    catalog = sub.add_parser(
        "catalog", help="check catalogs",
        description="Check, count, make and export catalogs of failures.",
        epilog=exit_codes("each subcommand says its own (`catalog SUBCOMMAND --help`)",
                          "2 usage"))
    csub = catalog.add_subparsers(dest="catalog_command", required=True,
                                  parser_class=SubcommandParser)
    for command in (lint, test, stats, extract, server_args, precompile, export):
        command.register(csub)
