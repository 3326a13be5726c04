"""The argument parsers of `sglang-matcher`: errors that say "did you mean", a subcommand's
mistakes said with its own usage, and the exit codes every command's `--help` ends with."""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, TypeAlias

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2

_INVALID_CHOICE = re.compile(r"invalid choice: (?P<value>.+?) \(choose from (?P<choices>.+)\)$")


def exit_codes(*codes: str) -> str:
    """A `--help` epilog: `exit status: 0 …; 1 …; 2 …`."""
    return "exit status: " + "; ".join(codes) + "."


class Parser(argparse.ArgumentParser):
    """argparse whose errors say "did you mean": a misspelled option or choice gets its nearest
    spellings (`difflib`), after the usage of the (sub)command the mistake was made in."""

    _args: Sequence[str] = ()
    # `fix`: its errors show where the launch command goes.
    launch_hint = False

    def parse_known_args(self, args: Iterable[str] | None = None,  # type's as argparse's
                         namespace: Any = None) -> tuple[Any, list[str]]:
        self._args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        # `fix --pattren X`: "one of --log --pattern is required" would hide the real mistake.
        unknown = self._unknown_options() if "required" in message else []
        if unknown:
            message = f"unrecognized arguments: {' '.join(unknown)}"
        self.print_usage(sys.stderr)
        hint = self._launch_hint(message) or self._suggestion(message)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}{hint}\n")

    def _launch_hint(self, message: str) -> str:
        """`fix` given the launch command without `--` before it: its words are taken for
        options of fix (or the command is missing): say where it goes."""
        if not self.launch_hint or "--" in self._args or not (
                message.startswith("unrecognized arguments: ") or "-- COMMAND" in message):
            return ""
        return (" — put the launch command after --, e.g. sglang-matcher fix --log FILE -- "
                "python -m sglang.launch_server --model-path …")

    def _unknown_options(self) -> list[str]:
        """The options given to this parser that it has no spelling (or abbreviation) of."""
        known = self._option_string_actions
        out = []
        for arg in self._args:
            if arg == "--" or (self._subparsers is not None and not arg.startswith("-")):
                break  # what follows is positional, or the subcommand's
            name = arg.split("=", 1)[0]
            if (arg.startswith("-") and arg != "-" and not self._negative_number_matcher.match(arg)
                    and name not in known and not any(o.startswith(name) for o in known)):
                out.append(arg)
        return out

    def _suggestion(self, message: str) -> str:
        m = _INVALID_CHOICE.search(message)
        if m:
            try:
                value = ast.literal_eval(m["value"])
                choices = ast.literal_eval(f"[{m['choices']}]")
            except (ValueError, SyntaxError):
                return ""
            close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=3)
            return f" — did you mean {' or '.join(close)}?" if close else ""
        if message.startswith("unrecognized arguments: "):
            options = [o for a in self._actions if a.help is not argparse.SUPPRESS
                       for o in a.option_strings if o.startswith("--")]
            hints = []
            for arg in message.removeprefix("unrecognized arguments: ").split():
                if arg.startswith("-"):
                    close = difflib.get_close_matches(arg.split("=", 1)[0], options, n=1)
                    hints += [f"did you mean {c}?" for c in close]
            return f" — {'; '.join(hints)}" if hints else ""
        return ""


class SubcommandParser(Parser):
    """A subcommand's parser: what it does not recognize is its error, said with its usage
    (argparse hands a subparser's leftovers to the top-level parser, whose usage says nothing
    of the subcommand's options)."""

    def parse_known_args(self, args: Iterable[str] | None = None,  # type's as argparse's
                         namespace: Any = None) -> tuple[Any, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


# What `add_subparsers` returns: each command module's `register` adds its parser to it.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more")
    return n
