"""`sglang-matcher`: flags in, one command's function called, an exit code out.

The commands and their flags are `matcher.commands`; here is what every command shares: the
cache directory chosen, and each kind of error turned into one line on stderr and its exit
code (`--help` of each command lists its codes).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

from matcher import cache
from matcher.catalog import CatalogError
from matcher.commands import build_parser
from matcher.commands.common import UsageError
from matcher.commands.parser import EXIT_OK, EXIT_USAGE
from matcher.scan import UnreadableInput
from matcher.sinks.events import stream_gone


def run() -> int:
    """The command's entry point (`sglang-matcher`, `python -m matcher`): `main`, then what the
    process holds is left for the operating system to take back. The collection Python makes as
    it exits would walk the loaded catalog (its records point at their store, and it at them:
    freed only by the collector); frozen, nothing is walked. Objects are still finalized as
    modules are torn down; only cyclic garbage is left to the exit. Ctrl-C in a one-shot
    command (`scan` of a large log) ends it with 130, as a shell does, and a line instead of a
    traceback (the daemon handles SIGINT itself: a clean stop)."""
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
        code: int = args.func(args)
        return code
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


if __name__ == "__main__":
    raise SystemExit(run())
