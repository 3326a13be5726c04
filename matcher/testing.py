"""Helpers for testing a log pipeline against real files: a writer process that rotates.

Shipped with the package (as structlog ships `structlog.testing`) so that users can prove their
own deployment — their globs, their logrotate config — the way our tests prove ours:

    python -m matcher.testing write --path /var/log/sglang/server.log --lines 10000 \\
        --rotate-every 1000 --rotate rename --interval 0.001

Every line is `[<ts> TP0] injected failure seq=<n> end`, so the events a matcher emits can be
compared with what was written, number by number. `--catalog` prints the catalog record that
recognizes those lines.
"""

from __future__ import annotations

import argparse
import json
import logging
import logging.handlers
import os
import shutil
import sys
import time
from pathlib import Path

SEQ_RECORD = {
    "id": "injected-failure",
    "slug": "injected-failure",
    "messagePattern": r"injected failure seq=(?P<seq>\d+) end",
    "errorClass": None,
    "severity": "error",
    "documentation": "A line written by matcher.testing's writer.",
}

ROTATIONS = ("none", "rename", "copytruncate", "recreate", "symlink")


def line_for(seq: int, rank: str = "TP0") -> str:
    ts = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"[{ts} {rank}] injected failure seq={seq} end"


def rotate(path: Path, how: str, generation: int) -> None:
    """Rotate `path` the way logrotate (or a container runtime) would."""
    if how == "rename":
        for n in range(generation, 0, -1):
            older = path.with_name(f"{path.name}.{n}")
            if older.exists():
                os.replace(older, path.with_name(f"{path.name}.{n + 1}"))
        os.replace(path, path.with_name(f"{path.name}.1"))
    elif how == "copytruncate":
        shutil.copyfile(path, path.with_name(f"{path.name}.{generation}"))
        with open(path, "r+b") as f:
            f.truncate(0)
    elif how == "recreate":
        os.unlink(path)
    elif how == "symlink":
        target = path.with_name(f"{path.name}.target{generation}")
        target.touch()
        tmp = path.with_name(f".{path.name}.swap")
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()
        os.symlink(target.name, tmp)
        os.replace(tmp, path)


def write(path: Path, lines: int, start: int, rotate_every: int, how: str, interval: float,
          partial_every: int = 0) -> None:
    """Write through `WatchedFileHandler`, which reopens the path when it changes (as real
    loggers do under logrotate's `create`)."""
    if how == "symlink" and not path.is_symlink():
        target = path.with_name(f"{path.name}.target0")
        target.touch()
        if path.exists():
            path.unlink()
        os.symlink(target.name, path)
    handler = logging.handlers.WatchedFileHandler(path, delay=False)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("matcher.testing.writer")
    log.propagate = False
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    generation = 0
    for i in range(start, start + lines):
        if rotate_every and i > start and (i - start) % rotate_every == 0 and how != "none":
            generation += 1
            rotate(path, how, generation)
        text = line_for(i)
        if partial_every and i % partial_every == 0:
            # The line reaches the file in two writes, as a busy writer's does.
            handler.acquire()
            try:
                handler.reopenIfNeeded()
                assert handler.stream is not None
                handler.stream.write(text[: len(text) // 2])
                handler.stream.flush()
                time.sleep(interval)
                handler.stream.write(text[len(text) // 2 :] + "\n")
                handler.stream.flush()
            finally:
                handler.release()
        else:
            log.info(text)
        if interval:
            time.sleep(interval)
    handler.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m matcher.testing")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write numbered failure lines, rotating as asked")
    w.add_argument("--path", type=Path, required=True)
    w.add_argument("--lines", type=int, default=1000)
    w.add_argument("--start", type=int, default=0)
    w.add_argument("--rotate-every", type=int, default=0)
    w.add_argument("--rotate", choices=ROTATIONS, default="none")
    w.add_argument("--interval", type=float, default=0.0)
    w.add_argument("--partial-every", type=int, default=0)
    sub.add_parser("catalog", help="print the catalog record for the writer's lines")
    args = p.parse_args(argv)
    if args.cmd == "catalog":
        print(json.dumps(SEQ_RECORD))
        return 0
    write(args.path, args.lines, args.start, args.rotate_every, args.rotate, args.interval,
          args.partial_every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
