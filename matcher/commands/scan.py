"""`sglang-matcher scan`: the failures in saved logs, reported once they are read whole."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from matcher.catalog import Catalog
from matcher.commands.common import UsageError, catalog_args, load
from matcher.commands.parser import EXIT_OK, EXIT_USAGE, Subcommands, exit_codes, positive_int
from matcher.decode import INPUT_FORMATS
from matcher.progress import Progress
from matcher.release import AUTO
from matcher.report import escape_controls, exit_code, render
from matcher.scan import json_line, scan_events
from matcher.sinks.events import stream_gone
from matcher.source import saved


def register(sub: Subcommands) -> None:
    scan = sub.add_parser(
        "scan", help="post-mortem: report the failures in saved logs",
        description="Read saved logs whole and report each known failure once (the same error "
                    "from several ranks is one entry), with what happened and how to fix it.",
        epilog=exit_codes("0 no failure found", "1 failures found",
                          "2 a usage error, an invalid catalog, or an input not read whole "
                          "(when no failure was found)", "130 interrupted"))
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
    scan.add_argument("-j", "--jobs", type=positive_int, metavar="N",
                      help="worker processes: files, and parts of a large file, are read in "
                           "parallel with the same output as one (default: the usable cores)")
    catalog_args(scan)
    scan.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from matcher.parallel import usable_cores  # the worker processes' module: `scan`'s only

    return cmd_scan(args.inputs, args.format, load(args), sys.stdout,
                    input_format=args.input_format, sglang_version=args.sglang_version or AUTO,
                    jobs=args.jobs or usable_cores(), progress=args.progress)


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
