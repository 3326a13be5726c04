"""The commands of `sglang-matcher`, one module each: each `register`s its parser on the
subcommands and sets `func`, the function `matcher.cli.main` calls with the parsed arguments
(it returns the exit code). Nothing else in `matcher/` imports this package."""

from __future__ import annotations

import argparse

from matcher import __version__
from matcher.commands import catalog, explain, fix, scan, watch
from matcher.commands.parser import Parser, SubcommandParser, exit_codes


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="sglang-matcher",
        description="Recognize known sglang failures in its logs and say how to fix them.",
        epilog=exit_codes("0 nothing wrong found (or the check passed)",
                          "1 failures found in the log, or catalog examples failing",
                          "2 a usage error, unreadable input or an invalid catalog",
                          "130 interrupted (Ctrl-C). Each command's --help says its own"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=SubcommandParser)
    for command in (scan, watch, fix, explain, catalog):
        command.register(sub)
    return parser
