"""`sglang-matcher`: flags in, one orchestrating call, an exit code out.

Exit codes: 0 — nothing wrong found (or the check passed); 1 — errors found in the log, or
catalog examples failing; 2 — usage error, unreadable input (for `scan`, an input not read
whole when no error was found), or an invalid catalog.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import gc
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from matcher import __version__, cache
from matcher.catalog import Catalog, CatalogError, load_catalog
from matcher.catalog.check import check_examples
from matcher.catalog.patterns import MIN_CUT_HEAD, cut_head
from matcher.catalog.schema import CatalogRecord
from matcher.decode import INPUT_FORMATS
from matcher.engine import Engine
from matcher.parallel import usable_cores
from matcher.progress import Progress
from matcher.release import AUTO, catalog_version_setting
from matcher.report import escape_controls, exit_code, render
from matcher.scan import UnreadableInput, json_line, scan_events
from matcher.sinks.events import stream_gone
from matcher.source import saved

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad arguments or unreadable input: message to stderr, exit 2."""


_INVALID_CHOICE = re.compile(r"invalid choice: (?P<value>.+?) \(choose from (?P<choices>.+)\)$")


class Parser(argparse.ArgumentParser):
    """argparse whose errors say "did you mean": a misspelled option or choice gets its nearest
    spellings (`difflib`), after the usage of the (sub)command the mistake was made in."""

    _args: Sequence[str] = ()

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

    launch_hint = False

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


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more")
    return n


def _label(text: str) -> str:
    """`--label NAME=VALUE`, checked as the config checks labels (an invalid or reserved name)."""
    from matcher.config import label_problem

    name, sep, _ = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (e.g. --label cluster=a)")
    problem = label_problem(name)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text


def _catalog_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--catalog", action="append", type=Path, default=[], metavar="PATH",
                   help="extra catalog file or directory (repeatable); overrides built-in records")
    p.add_argument("--no-builtin", action="store_true",
                   help="do not load the built-in sglang catalog")
    p.add_argument("--sglang-version", metavar="V",
                   help='which sglang wrote the log: "auto" (default: learned from its '
                        'tracebacks, every release matched until then), "all", one release '
                        'such as 0.5.23 (only its records match; events and links name it), '
                        '"installed" (extracted from the sglang in this environment, cached), '
                        'or "none" (no generated layer)')


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="sglang-matcher",
        description="Recognize known sglang failures in its logs and say how to fix them.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=SubcommandParser)

    scan = sub.add_parser("scan", help="post-mortem: report the failures in saved logs")
    scan.add_argument("inputs", nargs="+", metavar="PATH",
                      help="log files (gzip, bzip2 and xz read decompressed), directories (every "
                           "file below, each log's rotations oldest first), or - for stdin")
    scan.add_argument("--format", choices=("text", "json"), default="text",
                      help="text for people (default), json: one event per line")
    scan.add_argument("--input-format", choices=INPUT_FORMATS, default="auto",
                      help="how the log is wrapped: plain text, Kubernetes CRI (/var/log/pods), "
                           "docker json-file, or auto (default: judged from each file's first "
                           "line)")
    scan.add_argument("--progress", action=argparse.BooleanOptionalAction,
                      help="how much is read, on one line of stderr redrawn each second "
                           "(default: when stderr is a terminal)")
    scan.add_argument("-j", "--jobs", type=_positive_int, metavar="N",
                      help="worker processes: files, and parts of a large file, are read in "
                           "parallel with the same output as one (default: the usable cores)")
    _catalog_args(scan)

    watch = sub.add_parser(
        "watch", help="the daemon: tail logs, emit events as they happen",
        description="The daemon: follow sglang's log files (globs, rotations included), stdin "
                    "or a systemd unit's journal, and write one event per known failure on "
                    "stdout as it is written, with its remediation (JSON, or for a person on a "
                    "terminal: --format). Read positions are kept "
                    "in the state directory, so a restart goes on where it stopped. Settings "
                    "come from flags, SGLANG_MATCHER_* variables and --config "
                    "(docs/configuration.md); SIGHUP reloads config and catalog.",
        epilog="exit status: 0 after SIGTERM or SIGINT; 1 when the reader of its events went "
               "away (stdout a broken pipe: restart it, it goes on from its last checkpoint); "
               "2 on a bad config or catalog. With --check: 0 valid, 2 problems.")
    watch.add_argument("paths", nargs="*", metavar="PATH|GLOB",
                       help="log files or globs (default: from config, else /var/log/sglang/*.log); "
                            "- for stdin")
    watch.add_argument("--config", type=Path, metavar="FILE", help="TOML config file")
    watch.add_argument("--from-beginning", action="store_true", default=None,
                       help="read files present at first start from their beginning")
    watch.add_argument("--state-dir", type=Path, help="where read positions are kept")
    watch.add_argument("--metrics-addr", metavar="HOST:PORT", help="serve /metrics and health here")
    watch.add_argument("--events-access", choices=("local", "any", "off"),
                       help="who may read /events on the metrics port: local (default: "
                            "clients on this host), any, or off")
    watch.add_argument("--catalog", action="append", type=Path, metavar="PATH",
                       help="extra catalog file or directory (repeatable)")
    watch.add_argument("--no-builtin", action="store_true", default=None,
                       help="do not load the built-in sglang catalog")
    watch.add_argument("--sglang-version", metavar="V",
                       help='which sglang wrote the logs: "auto" (default: learned per log), '
                            '"all", a release such as 0.5.23, "installed" or "none"')
    watch.add_argument("--input-format", choices=INPUT_FORMATS,
                       help="how the log is wrapped, as for scan (default auto, decided per file)")
    watch.add_argument("--format", "--log-format", dest="log_format",
                       choices=("auto", "json", "human", "console"),
                       help="how events are written to stdout: json (one object per line), "
                            "human (as scan prints them), or auto (default: human on a "
                            "terminal, json otherwise); --input-format is the log's format")
    watch.add_argument("--min-severity", choices=("info", "warning", "error", "critical"),
                       help="print and send only events of this severity or above (default "
                            "info: all); the metrics count every event")
    watch.add_argument("--no-checkpoints", dest="checkpoints", action="store_false",
                       default=None, help="run without read positions in the state dir "
                       "(every start a first start); for a state dir that cannot be written")
    watch.add_argument("--poll-only", action="store_true", default=None,
                       help="no inotify: find changes by polling only (network filesystems)")
    watch.add_argument("--poll-interval", type=float, metavar="SECONDS",
                       help="seconds between polls of the followed files and globs (default 1; "
                            "inotify wakes the daemon sooner where it works)")
    watch.add_argument("--journal-unit", action="append", metavar="UNIT",
                       help="follow this systemd unit's journal (repeatable); with no PATH "
                            "given, the journal only")
    watch.add_argument("--journal-directory", type=Path, metavar="DIR",
                       help="read the journal from DIR (a copied or remote journal)")
    watch.add_argument("--webhook-url", metavar="URL", help="also POST each event as JSON here")
    watch.add_argument("--otlp-endpoint", metavar="URL",
                       help="also send each event as an OpenTelemetry log record (OTLP/HTTP "
                            "protobuf) to this logs URL, e.g. http://collector:4318/v1/logs")
    watch.add_argument("--label", action="append", metavar="NAME=VALUE", type=_label,
                       help="static label on every event and metric (repeatable)")
    watch.add_argument("--check", action="store_true",
                       help="validate config and catalog, then exit 0 (ok) or 2")

    fix = sub.add_parser(
        "fix", help="apply a failure's fix to the command that failed",
        description="Find the failure in --log (or take --pattern), apply its first way out to "
                    "the command given after --, and print the corrected command and what "
                    "changed; other ways out are listed. Exit 0: fixed (or nothing to fix), "
                    "1: a failure without a fix of its command, 2: usage.")
    fix.launch_hint = True  # its errors show where the launch command goes
    fix.add_argument("launch", nargs="+", metavar="-- COMMAND",
                     help="the sglang launch command that failed, after --")
    what = fix.add_mutually_exclusive_group(required=True)
    what.add_argument("--log", metavar="FILE", help="the log of the failed launch")
    what.add_argument("--pattern", metavar="ID",
                      help="a catalog record id (or a unique prefix of one, any case), or a slug")
    fix.add_argument("--way", type=_positive_int, default=None, metavar="N",
                     help="apply the Nth way out (default: the first that changes this "
                          "command and leaves no value to fill in)")
    fix.add_argument("--format", choices=("text", "json"), default="text")
    _catalog_args(fix)

    explain = sub.add_parser("explain", help="show one catalog record and its remediation")
    explain.add_argument("id", help="a pattern id (or a unique prefix of one, any case), or a slug")
    _catalog_args(explain)

    catalog = sub.add_parser("catalog", help="check catalogs")
    csub = catalog.add_subparsers(dest="catalog_command", required=True,
                                  parser_class=SubcommandParser)
    for name, help_text in (
        ("lint", "validate catalog files: schema, patterns (exit 2 on any problem)"),
        ("test", "every record's examples match it and its noMatch lines do not"),
    ):
        c = csub.add_parser(name, help=help_text)
        c.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                       help="catalog files or directories (default: the built-in catalog)")
    stats = csub.add_parser("stats", help="count a catalog's records by layer, severity, class, "
                                          "and records per sglang release")
    stats.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                       help="catalog files or directories (default: the built-in catalog)")
    stats.add_argument("--unevaluable", action="store_true",
                       help="also list the records whose guard reads server arguments and that "
                            "have no proven flag change, with why and the condition")
    extract = csub.add_parser(
        "extract", help="make a catalog from sglang's source: one record per raise/assert/log site")
    where = extract.add_mutually_exclusive_group(required=True)
    where.add_argument("--sglang-source", type=Path, metavar="DIR",
                       help="a checkout (python/sglang), a site-packages dir, or the package dir")
    where.add_argument("--installed", action="store_true",
                       help="the sglang installed in this Python environment")
    where.add_argument("--wheel", type=Path, metavar="FILE", action="append",
                       help="an sglang wheel (.whl); repeat it for several releases, merged "
                            "into one catalog (one record per id, sglangVersions as ranges)")
    where.add_argument("--versions", metavar="A..B",
                       help="every final and .postN release of sglang on PyPI from A to B "
                            "(inclusive, PEP 440 order), each fetched with `pip download "
                            "--no-deps` into --wheel-dir, merged into one catalog")
    extract.add_argument("--wheel-dir", type=Path, metavar="DIR",
                         help="where --versions keeps the wheels, and extractions are cached "
                              "(default: $SGLANG_MATCHER_CACHE_DIR/wheels, else "
                              "~/.cache/sglang-matcher/wheels)")
    extract.add_argument("--jobs", type=_positive_int, metavar="N",
                         help="releases extracted at once (default: the CPU count)")
    extract.add_argument("-o", "--output", type=Path, metavar="OUT.jsonl",
                         help="write the records here (and the counts to OUT.stats.toml); "
                              "default: records on stdout, counts on stderr")
    extract.add_argument("--version", dest="sglang_version", metavar="V",
                         help="the sglang version (default: read from the source)")
    extract.add_argument("--severity", action="append", choices=("error", "warning", "failure"),
                         help="keep only records of this severity (repeatable; default: all); "
                              "`failure`: the warnings that report a failure (an exception "
                              "caught and printed, a retry given up)")
    extract.add_argument("--no-flow", dest="flow", action="store_false",
                         help="do not follow messages into the release's helpers that raise or "
                              "log them (`raise_error_or_warn(…, msg)`)")
    extract.add_argument("--curated", type=Path, metavar="DIR",
                         help="leave out generated records that would take the example lines "
                              "of a record here (the built-in catalog's sglang/curated)")
    extract.add_argument("--server-args", type=Path, metavar="FILE",
                         help="each release's flags, for the fixes derived from guard "
                              "conditions (default: the built-in sglang/generated/"
                              "server-args.json.gz; written by `catalog server-args`)")
    sargs = csub.add_parser(
        "server-args", help="read each sglang release's flags (spellings, defaults, choices, "
                            "help) from its own argparse parser, for `catalog extract`")
    swhere = sargs.add_mutually_exclusive_group(required=True)
    swhere.add_argument("--wheel", type=Path, metavar="FILE", action="append",
                        help="an sglang wheel; repeat it for several releases")
    swhere.add_argument("--versions", metavar="A..B",
                        help="every release from A to B, fetched as `catalog extract` does")
    sargs.add_argument("--python", required=True, metavar="PY",
                       help="a Python with sglang's dependencies installed (torch, transformers, "
                            "…): each release's parser is built by it")
    sargs.add_argument("--wheel-dir", type=Path, metavar="DIR",
                       help="where --versions keeps the wheels (as for `catalog extract`)")
    sargs.add_argument("--jobs", type=_positive_int, metavar="N", help="releases read at once "
                                                             "(default: the CPU count)")
    sargs.add_argument("-o", "--output", type=Path, metavar="OUT.json.gz", required=True)
    pre = csub.add_parser(
        "precompile", help="compile the built-in catalog into the artifact a start loads as it "
                           "is (matcher/_precompiled; part of the catalog build)")
    pre.add_argument("-o", "--output", type=Path, metavar="DIR",
                     help="where to write it (default: the package's matcher/_precompiled)")
    pre.add_argument("--patterns", type=Path, metavar="DIR",
                     help="the built-in catalog's directory (default: the package's)")
    pre.add_argument("--if-needed", action="store_true",
                     help="only if the artifact there does not fit this catalog, code, "
                          "Hyperscan and machine (the container image's build runs this)")
    export = csub.add_parser(
        "export", help="the catalog's patterns for grep -E -f (POSIX ERE) or as an mtail program")
    export.add_argument("--dialect", choices=("grep", "mtail"), required=True)
    export.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="catalog files or directories (default: the built-in catalog)")
    export.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write here (default: stdout); what cannot be translated goes to "
                             "stderr either way")
    return parser


def run() -> int:
    """The command's entry point (`sglang-matcher`, `python -m matcher`): `main`, then what the
    process holds is left for the operating system to take back. The collection Python makes as
    it exits walked the loaded catalog (its records point at their store, and it at them: freed
    only by the collector) for 37 ms of a 0.43 s `scan`; frozen, nothing is walked. Objects
    are still finalized as modules are torn down; only cyclic garbage is left to the exit.
    Ctrl-C in a one-shot command (`scan` of a large log) ends it with 130, as a shell does,
    and a line instead of a traceback (the daemon handles SIGINT itself: a clean stop)."""
    try:
        code = main()
    except KeyboardInterrupt:
        print("sglang-matcher: interrupted", file=sys.stderr)
        code = 130
    gc.freeze()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # The application, not the library, decides where caches go (`matcher.cache`).
    cache.use(cache.default_cache_dir())
    try:
        if args.command == "scan":
            return cmd_scan(args.inputs, args.format, _load(args), sys.stdout,
                            input_format=args.input_format,
                            sglang_version=args.sglang_version or AUTO,
                            jobs=args.jobs or usable_cores(), progress=args.progress)
        if args.command == "watch":
            return cmd_watch(args)
        if args.command == "explain":
            return cmd_explain(args.id, _load(args), sys.stdout)
        if args.command == "fix":
            return cmd_fix(args, _load(args), sys.stdout)
        if args.command == "catalog" and args.catalog_command == "lint":
            return cmd_lint(args.paths, sys.stdout)
        if args.command == "catalog" and args.catalog_command == "test":
            return cmd_test(args.paths, sys.stdout)
        if args.command == "catalog" and args.catalog_command == "stats":
            return cmd_stats(args.paths, sys.stdout, unevaluable=args.unevaluable)
        if args.command == "catalog" and args.catalog_command == "extract":
            return cmd_extract(args, sys.stdout)
        if args.command == "catalog" and args.catalog_command == "server-args":
            return cmd_server_args(args, sys.stdout)
        if args.command == "catalog" and args.catalog_command == "export":
            return cmd_export(args.dialect, args.paths, args.output, sys.stdout)
        if args.command == "catalog" and args.catalog_command == "precompile":
            return cmd_precompile(args.output, args.patterns, sys.stdout,
                                  if_needed=args.if_needed)
    except (UsageError, UnreadableInput) as e:
        print(f"sglang-matcher: {e}", file=sys.stderr)
        return EXIT_USAGE
    except CatalogError as e:
        print(f"sglang-matcher: invalid catalog:\n{e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except OSError as e:  # an output that cannot be written (a full disk): said, not a traceback
        stream_gone(sys.stdout)
        where = f": {e.filename}" if e.filename else ""
        print(f"sglang-matcher: {e.strerror or e}{where}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_USAGE


def cmd_precompile(output: Path | None, patterns: Path | None, out: TextIO, *,
                   if_needed: bool = False) -> int:
    """`catalog precompile`: the built-in catalog compiled once, loaded as it is by every start
    that fits it (`matcher.precompiled`)."""
    import time

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


def watch_flags(args: argparse.Namespace) -> dict[str, Any]:
    """`watch`'s flags as `Config` settings (None: not given, the environment or the file
    decides). The one place a flag is tied to its setting: `matcher.reference` reads it to
    document each setting's flag."""
    read_stdin = "-" in args.paths
    paths = [p for p in args.paths if p != "-"]
    return {
        "paths": paths or ([] if read_stdin else None),
        "from_beginning": args.from_beginning,
        "state_dir": args.state_dir,
        "metrics_addr": args.metrics_addr,
        "events_access": args.events_access,
        "catalogs": args.catalog,
        "builtin_catalog": False if args.no_builtin else None,
        "sglang_version": args.sglang_version,
        "input_format": args.input_format,
        "log_format": args.log_format,
        "min_severity": args.min_severity,
        "poll_only": args.poll_only,
        "checkpoints": args.checkpoints,
        "poll_interval": args.poll_interval,
        "journal_units": args.journal_unit,
        "journal_directory": args.journal_directory,
        "webhook_url": args.webhook_url,
        "otlp_endpoint": args.otlp_endpoint,
        "labels": dict(x.split("=", 1) for x in args.label) if args.label else None,
    }


def cmd_watch(args: argparse.Namespace) -> int:
    """Build the topology the config describes (`--check`: and stop there), then run it.

    A bad setting, flag or environment value, a port that cannot be bound, an events file that
    cannot be opened: one line naming it and what to do, exit 2, before anything is read."""
    closed = _closed_std_streams()  # first: before anything opens a descriptor
    from matcher.config import ConfigError, load_config
    from matcher.daemon import EXIT_STOP_DEADLINE, Daemon, Wakeup, stderr_logger
    from matcher.source.checkpoint import StateDirError
    from matcher.topology import Hooks, build

    read_stdin = "-" in args.paths
    flags = watch_flags(args)
    log = stderr_logger(sys.stderr)
    if "stdout" in closed and not args.check:
        log.warning("stdout_closed", detail="started with stdout closed: events are not "
                    "printed, only sent to the other outputs (events_file, /events, the "
                    "webhook, OTLP) and counted")
    wakeup = Wakeup()
    daemon: Daemon | None = None
    hooks = Hooks(wake=wakeup.set, should_stop=lambda: daemon is not None and daemon.stopping,
                  compile_later=not args.check)
    try:
        config = load_config(file=args.config, flags=flags)
        topology = build(config, log=log, hooks=hooks,
                         stdin=sys.stdin.buffer if read_stdin else None)
        # After the build (a bad setting is said first, and makes no state dir), before
        # anything is read.
        try:
            state_lock = _claim_state(config, check=args.check)
        except BaseException:
            topology.close()
            raise
    except StateDirError as e:  # in use, or not writable: one line, exit 2
        print(f"sglang-matcher: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as e:
        from matcher.redact import Redactor  # a value echoed back may be a credential
        print(f"sglang-matcher: invalid configuration: {Redactor().text(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        topology.close()  # built — port bound, files opened — and released, nothing read
        _warn_unmatched(config.paths, config.exclude)
        catalog = topology.catalog
        print(f"configuration ok: {len(config.paths)} path patterns, state in {config.state_dir}, "
              f"catalog {catalog.version} with {len(catalog.records)} records")
        return EXIT_OK
    daemon = Daemon(topology, log=log, wakeup=wakeup, config_file=args.config, flags=flags)
    daemon.install_signal_handlers()
    try:
        code = daemon.run()
    finally:
        if state_lock is not None:
            state_lock.close()
    if code == EXIT_STOP_DEADLINE:
        # An output is blocked: the interpreter's exit would flush stdout and stderr and wait
        # on them again. Nothing is left to save (`Daemon._stopped_at_deadline`).
        os._exit(code)
    return code


def _closed_std_streams() -> list[str]:
    """`watch` started with stdout or stderr closed (`>&-`, a supervisor that gives none):
    each is pointed at /dev/null, so that no file the daemon opens takes descriptor 1 or 2
    (a log opened as descriptor 1 would be taken for its own stdout), and the daemon runs
    without it. Before: an AttributeError traceback at start. The names of those closed."""
    closed = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            if getattr(sys, name) is not None:
                continue
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))  # noqa: SIM115
        closed.append(name)
    return closed


def _claim_state(config: Any, *, check: bool) -> Any:
    """The state dir's lock (None with `--check`, which only sees that it is writable, or
    without checkpoints); `StateDirError` when another daemon holds it or it is not writable:
    a daemon that cannot keep its positions loses the lines written while it is stopped."""
    from matcher.source.checkpoint import StateLock, probe_writable

    if not config.checkpoints:
        return None
    lock = None if check else StateLock(config.state_dir)
    try:
        probe_writable(config.state_dir, keep=not check)
    except BaseException:
        if lock is not None:
            lock.close()
        raise
    return lock


def _warn_unmatched(paths: Sequence[str], exclude: Sequence[str]) -> None:
    """`--check`: a path that follows nothing now is a warning, not an error (the log may not
    exist before sglang starts), said with the likeliest reason."""
    from matcher.source.checkpoint import CheckpointState
    from matcher.source.discovery import why_nothing
    from matcher.source.files import FileSet

    files = FileSet(tuple(paths), tuple(exclude), CheckpointState(), from_beginning=False,
                    fingerprint_bytes=1, rotate_wait=0, clock=lambda: 0.0)
    found = files.paths()
    for pattern, walk in files.discoveries.items():
        if not any(p_ == pattern and os.path.isfile(path) for path, p_ in found.items()):
            print(f"sglang-matcher: warning: {pattern} matches no file now: "
                  f"{why_nothing(pattern)}", file=sys.stderr)
        for problem in walk.problems[:5]:
            print(f"sglang-matcher: warning: {pattern}: cannot list {problem}", file=sys.stderr)


def _load(args: argparse.Namespace) -> Catalog:
    version = catalog_version_setting(args.sglang_version or AUTO)
    catalog = load_catalog(builtin=not args.no_builtin, user_paths=args.catalog,
                           generated=version != "none", sglang_version=version)
    if catalog.issues:
        raise CatalogError(list(catalog.issues))
    if not catalog.records:
        raise UsageError("the catalog is empty: give --catalog PATH or drop --no-builtin")
    return catalog


def cmd_scan(inputs: Sequence[str], fmt: str, catalog: Catalog, out: TextIO, *,
             input_format: str = "auto", err: TextIO | None = None,
             sglang_version: str = AUTO, jobs: int = 1, progress: bool | None = False) -> int:
    """`scan`: the exit code is 1 when failures were found; else 2 when an input was not read
    whole (a file in a directory that could not be opened, compressed data damaged part way):
    "nothing wrong" cannot be said of what was not read; else 0. `progress`: drawn on `err`
    (None: when it is a terminal)."""
    err = err or sys.stderr
    try:
        found = saved.find(inputs)
    except saved.NotReadable as e:
        raise UsageError(str(e)) from e
    for line in (*found.unreadable, *found.skipped):
        print(escape_controls(f"sglang-matcher: not read: {line}"), file=err)
    if not found.paths:
        raise UsageError(f"no log file to read in {', '.join(inputs)}")
    paths = list(found.paths)
    shown = _progress(err, paths) if progress or (progress is None and err.isatty()) else None
    try:
        scanned = scan_events(paths, catalog, input_format=input_format, err=err,
                              sglang_version=sglang_version, jobs=jobs, progress=shown,
                              encode=json_line if fmt == "json" else None)
    finally:
        if shown is not None:
            shown.close()
    if fmt == "json":
        code = int(any(failure for _line, failure in scanned.events))
    else:
        code = exit_code(scanned.events)
    try:
        if fmt == "json":
            out.writelines(line for line, _failure in scanned.events)
        else:
            out.write(render(scanned.events, inputs=list(inputs), lines=scanned.lines,
                             files=len(paths)))
        out.flush()
    except BrokenPipeError:
        # The reader stopped reading (`scan … | head`): what was found still decides the
        # exit code (0 said "nothing wrong" of a log full of failures, under `pipefail`).
        stream_gone(out)
    except OSError as e:  # a full disk under `> report.txt`: the report is not there
        stream_gone(out)
        print(f"sglang-matcher: cannot write the report: {e.strerror or e}", file=err)
        return EXIT_USAGE
    if code == EXIT_OK and (found.unreadable or scanned.not_read):
        return EXIT_USAGE
    return code


def _progress(err: TextIO, paths: Sequence[str]) -> Progress:
    """The progress of reading `paths`: their size on disk in all (not known with stdin)."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += os.stat(path).st_size if path != "-" else 0
    return Progress(err, total_bytes=0 if "-" in paths else total, files=len(paths),
                    redraw=err.isatty())


def cmd_fix(args: argparse.Namespace, catalog: Catalog, out: TextIO, *,
            engine: Engine | None = None) -> int:
    """`fix`: the failure of `--log` (its first root cause) or `--pattern`, its first way out
    (or `--way N`) applied to the command."""
    from matcher.fix import NeedsCaptures, apply, choose

    command = list(args.launch)
    captures: dict[str, str] = {}
    if args.pattern is not None:
        rec = _record(catalog, args.pattern)
        failure = f"{rec.id} ({rec.slug})"
    else:
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
        captures = first.get("captures") or {}
        failure = f"{rec.id} ({rec.slug}): {first['message'].splitlines()[0][:200]}"
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
    if args.format == "json":
        out.write(json.dumps({
            "pattern_id": rec.id, "way": way, "ways": len(ways),
            "steps": list(fixed.steps), "command": list(fixed.argv), "removed": list(fixed.removed),
            "added": list(fixed.added), "before": list(fixed.before),
            "placeholders": list(fixed.placeholders), "notes": list(fixed.notes),
            "changes_model": fixed.changes_model,
            "other_ways": [[a.describe() for a in w] for n, w in enumerate(ways, 1)
                           if n != way]}, ensure_ascii=False) + "\n")
        return EXIT_OK
    lines = [f"failure: {failure}",
             f"fix {way} of {len(ways)}: " + "; ".join(fixed.steps)]
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
    others = [(n, w) for n, w in enumerate(ways, 1) if n != way]
    if others:
        lines.append("other ways out (--way N):")
        lines += [f"  {n}. " + "; ".join(a.describe() for a in w) for n, w in others]
    out.write("\n".join(lines) + "\n")
    return EXIT_OK


def _record(catalog: Catalog, record_id: str) -> CatalogRecord:
    """The record `record_id` names: its id, its slug, or a prefix of its id only it has (any
    case). Ambiguous or unknown: a `UsageError` with the candidates or the nearest names."""
    rec = catalog.by_id(record_id)
    if rec is not None:
        return rec
    key = record_id.strip().lower()
    if not key:
        raise UsageError("an empty record id: give an id (or a unique prefix of one) or a slug")
    rec = next((r for r in catalog.records if r.slug.lower() == key or r.id.lower() == key), None)
    if rec is not None:
        return rec
    found: dict[str, CatalogRecord] = {}
    for r in catalog.records:
        if r.id.lower().startswith(key):
            found.setdefault(r.id, r)
    if len(found) == 1:
        return next(iter(found.values()))
    if found:
        shown = sorted(found.values(), key=lambda r: r.id)[:5]
        more = f", and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
        raise UsageError(f"{record_id!r} is the start of {len(found)} record ids: "
                         + ", ".join(f"{r.id} ({r.slug})" for r in shown)
                         + f"{more}; give more of the id")
    names = [r.id for r in catalog.records] + [r.slug for r in catalog.records]
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.7)
    hexadecimal = all(c in "0123456789abcdef" for c in key)
    for n in range(len(key) - 1, 0, -1):  # an id prefix with a typo: the ids sharing most of it
        if close or not hexadecimal:
            break
        close = sorted({r.id for r in catalog.records if r.id.lower().startswith(key[:n])})[:3]
    raise UsageError(f"no catalog record with id, id prefix or slug {record_id!r}"
                     + (f" — did you mean {' or '.join(close)}?" if close else ""))


def cmd_explain(record_id: str, catalog: Catalog, out: TextIO) -> int:
    rec = _record(catalog, record_id)
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
    if rec.examples_match:
        lines += ["", "Seen in logs as:"] + [
            "  " + x.strip().splitlines()[-1][:200] for x in rec.examples_match[:3]]
    lines.append(f"\n  defined in {rec.origin} (record {rec.index})")
    out.write("\n".join(lines) + "\n")
    return EXIT_OK


def _catalog_for(paths: Sequence[Path]) -> Catalog:
    if paths:
        return load_catalog(builtin=False, user_paths=paths)
    return load_catalog()


def cmd_lint(paths: Sequence[Path], out: TextIO) -> int:
    catalog = _catalog_for(paths)
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


def cmd_test(paths: Sequence[Path], out: TextIO) -> int:
    catalog = _catalog_for(paths)
    if catalog.issues:
        raise CatalogError(list(catalog.issues))
    engine = Engine(load_catalog(user_paths=paths).records if paths else catalog.records)
    failures = check_examples(engine, catalog.records)
    for f in failures:
        out.write(f"FAIL {f}\n")
    n_examples = sum(len(r.examples_match) + len(r.examples_no_match) for r in catalog.records)
    out.write(f"{len(catalog.records)} records, {n_examples} examples, {len(failures)} failures\n")
    return EXIT_FOUND if failures else EXIT_OK


def cmd_stats(paths: Sequence[Path], out: TextIO, *, unevaluable: bool = False) -> int:
    from matcher.catalog.stats import releases_of, render, render_unevaluable, summarize

    catalog = _catalog_for(paths)
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


def cmd_export(dialect: str, paths: Sequence[Path], output: Path | None, out: TextIO) -> int:
    """Patterns for grep or mtail; the untranslatable ones are listed on stderr, not dropped."""
    from matcher.catalog.export import export, render

    catalog = _catalog_for(paths)
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


def cmd_extract(args: argparse.Namespace, out: TextIO) -> int:
    import zipfile

    from matcher.catalog import extract
    from matcher.catalog.load import load_paths

    if args.wheel is not None or args.versions is not None:
        return _extract_releases(args, out)
    try:
        if args.installed:
            pkg, installed_version = extract.find_installed()
            source, label = extract.read_tree(pkg), "--installed"
            source = extract.SourceFiles(source.files, installed_version or source.version,
                                         source.excluded)
        else:
            source = extract.read_tree(args.sglang_source)
            label = f"--sglang-source {args.sglang_source}"
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise UsageError(f"cannot read sglang's source: {e}") from e
    version = args.sglang_version or source.version
    if not version:
        raise UsageError("cannot tell the sglang version from the source: give --version V")
    if not source.files:
        raise UsageError("no sglang Python source found there")
    result = extract.extract_files(source.files, version=version, flow=getattr(args, "flow", True))
    result = extract.Extraction(result.records, result.stats + extract.Stats(
        files_skipped={"tests and benchmarks": source.excluded} if source.excluded else {}))
    if args.severity:
        result = result.without(
            (r["id"] for r in result.records if not extract.selected(r, args.severity)),
            extract.NOT_SELECTED)
        label += "".join(f" --severity {s}" for s in args.severity)
    if args.curated is not None:
        curated = load_paths([args.curated], "curated")
        if curated.issues:
            raise CatalogError(list(curated.issues))
        _, dropped = extract.defer_to(result.records, curated.records)
        result = result.without(dropped, extract.DEFERRED)
        label += f" --curated {args.curated}"
    _remediate(result.records, args.server_args, sys.stderr)
    report = out if args.output else sys.stderr
    if args.output:
        stats_path = args.output.with_name(args.output.name.removesuffix(".jsonl") + ".stats.toml")
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.writelines(extract.iter_jsonl(result.records))
            stats_path.write_text(extract.stats_toml(result.stats, version=version, source=label))
        except OSError as e:
            raise UsageError(f"cannot write {args.output}: {e.strerror}") from e
    else:
        out.writelines(extract.iter_jsonl(result.records))
    report.write(_extract_summary(result.stats, version=version, label=label))
    if args.output:
        report.write(f"wrote {args.output} ({len(result.records)} records) and {stats_path}\n")
    return EXIT_OK


def _remediate(records: Sequence[dict[str, Any]], table_path: Path | None,
               report: TextIO) -> None:
    """Each generated record's fix, derived from its guard condition and its newest release's
    flags (`matcher.catalog.remedy`), in place."""
    from matcher.catalog import remedy
    from matcher.catalog.server_args import ServerArgsTable, default_path
    from matcher.catalog.stats import fix_share

    path = table_path or default_path()
    try:
        table: ServerArgsTable | None = ServerArgsTable.load(path)
    except FileNotFoundError:
        if table_path is not None:
            raise UsageError(f"{path}: no such file (write it with `sglang-matcher catalog "
                             "server-args`)") from None
        table = None
        report.write(f"no table of server arguments at {path}: fixes in words only\n")
    except (OSError, ValueError, KeyError) as e:
        raise UsageError(f"cannot read {path}: {e}") from e
    kinds = remedy.remediate_all(records, table)
    report.write(f"fixes: flags {kinds['flags']:,}, unevaluable {kinds['unevaluable']:,}, "
                 f"words {kinds['words']:,}{fix_share(kinds)}\n")


def cmd_server_args(args: argparse.Namespace, out: TextIO) -> int:
    """`catalog server-args`: each release's flags, by its own parser, into one table."""
    import gzip
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from matcher.catalog import releases
    from matcher.catalog.server_args import DumpError, ServerArgsTable, dump_release

    wheel_dir = args.wheel_dir or releases.default_wheel_dir()
    try:
        if args.versions is not None:
            listed = releases.list_releases(args.versions)
            wheels = [releases.download(v, wheel_dir) for v in listed.wanted]
        else:
            wheels = list(args.wheel)
        versions = [releases.wheel_version(w) for w in wheels]
    except (releases.ReleaseError, OSError, ValueError) as e:
        raise UsageError(str(e)) from e
    jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(wheels)))

    def one(wheel: Path) -> dict[str, Any] | str:
        try:
            return dump_release(wheel, args.python)
        except (DumpError, OSError, ValueError, subprocess.TimeoutExpired) as e:
            return str(e)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, wheels))
    per: dict[str, dict[str, Any]] = {}
    failed = 0
    for version, result in zip(versions, results):
        if isinstance(result, str):
            failed += 1
            out.write(f"sglang {version}: skipped: {result}\n")
        else:
            per[version] = result
            out.write(f"sglang {version}: {len(result)} arguments\n")
    if not per:
        raise UsageError("no release's arguments could be read")
    doc = ServerArgsTable.from_releases(per).dump()
    try:
        with gzip.open(args.output, "wt", encoding="utf-8", compresslevel=9) as f:
            json.dump(doc, f, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except OSError as e:
        raise UsageError(f"cannot write {args.output}: {e.strerror}") from e
    out.write(f"wrote {args.output}: {len(per)} releases, {len(doc['arguments'])} arguments\n")
    return EXIT_USAGE if failed else EXIT_OK


def _extract_releases(args: argparse.Namespace, out: TextIO) -> int:
    """`--wheel` (repeated) or `--versions A..B`: one catalog merged over the releases."""
    import zipfile

    from matcher.catalog import extract, releases
    from matcher.catalog.load import load_paths
    from matcher.catalog.versions import version_key

    wheel_dir = args.wheel_dir or releases.default_wheel_dir()
    report = out if args.output else sys.stderr
    skipped: list[tuple[str, str]] = []
    try:
        if args.versions is not None:
            listed = releases.list_releases(args.versions)
            skipped.extend(listed.skipped)
            wheels = []
            for version in listed.wanted:
                try:
                    wheels.append(releases.download(version, wheel_dir))
                except releases.ReleaseError as e:
                    skipped.append((version, str(e)))
            label = f"--versions {args.versions}"
        else:
            if args.sglang_version and len(args.wheel) > 1:
                raise UsageError("--version names one release: give it with one --wheel only")
            wheels = list(args.wheel)
            label = " ".join(f"--wheel {w.name}" for w in sorted(wheels, key=lambda w: w.name))
        if not wheels:
            raise UsageError("no wheel to extract" + "".join(
                f"; {v}: {why}" for v, why in skipped))
        done = releases.extract_wheels(wheels, cache_dir=wheel_dir, jobs=args.jobs,
                                       flow=getattr(args, "flow", True))
    except releases.ReleaseError as e:
        raise UsageError(str(e)) from e
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise UsageError(f"cannot read sglang's source: {e}") from e
    if args.sglang_version:
        done = [releases.ReleaseExtraction(args.sglang_version, d.source, d.sha256, d.extraction)
                for d in done]
    seen: dict[str, str] = {}
    for d in done:
        if d.version in seen:
            raise UsageError(f"{seen[d.version]} and {d.source} are both sglang {d.version}")
        seen[d.version] = d.source
    done.sort(key=lambda d: version_key(d.version))
    per: dict[str, extract.Extraction] = {}
    for d in done:
        result = d.extraction
        if args.severity:
            result = result.without(
                (r["id"] for r in result.records if not extract.selected(r, args.severity)),
                extract.NOT_SELECTED)
        per[d.version] = result
    if args.severity:
        label += "".join(f" --severity {s}" for s in sorted(set(args.severity)))
    merged = releases.merge_releases({v: e.records for v, e in per.items()})
    if args.curated is not None:
        curated = load_paths([args.curated], "curated")
        if curated.issues:
            raise CatalogError(list(curated.issues))
        _, dropped = extract.defer_to(merged, curated.records)
        merged = [r for r in merged if r["id"] not in set(dropped)]
        per = {v: e.without(dropped, extract.DEFERRED) for v, e in per.items()}
        label += f" --curated {args.curated}"
    _remediate(merged, args.server_args, report)
    if args.output:
        stats_path = args.output.with_name(args.output.name.removesuffix(".jsonl") + ".stats.toml")
        text = releases.stats_toml(
            [(d.version, d.source, d.sha256, per[d.version].stats, len(per[d.version].records))
             for d in done],
            records=merged, command=f"sglang-matcher catalog extract {label}",
            skipped_releases=skipped)
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.writelines(extract.iter_jsonl(merged))
            stats_path.write_text(text, encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot write {args.output}: {e.strerror}") from e
    else:
        out.writelines(extract.iter_jsonl(merged))
    total = extract.Stats()
    for d in done:
        st = per[d.version].stats
        total = total + st
        report.write(f"sglang {d.version} ({d.source}): {st.files} modules, "
                     f"{sum(st.sites.values())} sites, {len(per[d.version].records)} records\n")
    for version, why in skipped:
        report.write(f"sglang {version}: skipped: {why}\n")
    report.write(_extract_summary(total, version=f"{len(done)} releases", label=label))
    templates = {r["errorMessage"] for r in merged} - {None}  # a frame record has none
    report.write(f"{len(merged)} records, {len(templates)} distinct "
                 f"templates, over {len(done)} releases ({done[0].version}..{done[-1].version})\n")
    if args.output:
        report.write(f"wrote {args.output} ({len(merged)} records) and {stats_path}\n")
    return EXIT_OK


def _extract_summary(stats: Any, *, version: str, label: str) -> str:
    def kinds(counts: dict[str, int]) -> str:
        named = ("raise", "assert", "log")
        shown = [*named, *sorted(set(counts) - set(named))]  # "frame": bare raise/assert records
        return f"{sum(counts.values())} (" + ", ".join(
            f"{k} {counts.get(k, 0)}" for k in shown) + ")"

    msg = sum(stats.with_message.get(k, 0) for k in ("raise", "assert"))
    got = sum(stats.covered.get(k, 0) for k in ("raise", "assert"))
    lines = [
        (f"sglang {version} ({label}): {stats.files} modules read"
         + "".join(f", {n} files skipped: {why}" for why, n in stats.files_skipped.items())),
        f"sites seen:            {kinds(dict(stats.sites))}",
        f"with a string message: {kinds(dict(stats.with_message))}",
        f"records made:          {kinds(dict(stats.records))}",
        (f"coverage: {got} of {msg} raise/assert sites with a string message are recognized "
         f"({100 * stats.coverage:.2f}%)"),
        "skipped, by reason:",
        *(f"  {n:>6}  {why}" for why, n in sorted(stats.skipped.items(), key=lambda kv: -kv[1])),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
