"""`sglang-matcher catalog server-args`: each sglang release's flags, read by its own parser,
into one table (for the fixes `catalog extract` derives)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from matcher.commands.common import UsageError
from matcher.commands.parser import EXIT_OK, EXIT_USAGE, Subcommands, exit_codes, positive_int


def register(sub: Subcommands) -> None:
    sargs = sub.add_parser(
        "server-args", help="read each sglang release's flags (spellings, defaults, choices, "
                            "help) from its own argparse parser, for `catalog extract`",
        description="Read each sglang release's flags (spellings, defaults, choices, help) "
                    "from its own argparse parser, built by a Python with sglang's "
                    "dependencies, and write them as one table.",
        epilog=exit_codes("0 every release read", "2 a release skipped (the others are "
                          "written), none readable, or a usage error"))
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
    sargs.add_argument("--jobs", type=positive_int, metavar="N", help="releases read at once "
                                                            "(default: the CPU count)")
    sargs.add_argument("-o", "--output", type=Path, metavar="OUT.json.gz", required=True,
                       help="the table, gzip-compressed JSON")
    sargs.set_defaults(func=cmd_server_args)


def _wheels(args: argparse.Namespace) -> tuple[list[Path], list[str]]:
    from matcher.catalog import releases

    wheel_dir = args.wheel_dir or releases.default_wheel_dir()
    try:
        if args.versions is not None:
            listed = releases.list_releases(args.versions)
            wheels = [releases.download(v, wheel_dir) for v in listed.wanted]
        else:
            wheels = list(args.wheel)
        return wheels, [releases.wheel_version(w) for w in wheels]
    except (releases.ReleaseError, OSError, ValueError) as e:
        raise UsageError(str(e)) from e


def cmd_server_args(args: argparse.Namespace) -> int:
    import gzip
    import json
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from matcher.catalog.server_args import DumpError, ServerArgsTable, dump_release

    out = sys.stdout
    wheels, versions = _wheels(args)
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
