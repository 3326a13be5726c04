"""Writer processes for the fault suite: a rotation storm, many files rotated at once, a burst.

Run as `python tests/faults/writers.py MODE …` by the tests, so each fault happens in a real
process next to a real daemon. Error lines are `matcher.testing.line_for(seq)` (one event each);
the other lines are sglang-like INFO noise no pattern matches.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from matcher.testing import line_for

NOISE = "[2026-01-01 00:00:00 TP0] Decode batch. #running-req: 12, #token: 48213, gen throughput (token/s): 1523.4\n"


def storm(path: Path, lines: int, every_ms: float, error_every: int) -> None:
    """Append `lines` lines, renaming the file away (`server.log.<n>`, never renumbered) and
    starting a new one every `every_ms` milliseconds, as a logger with a tiny size limit does."""
    f = open(path, "a")  # noqa: SIM115
    gen, last = 0, time.monotonic()
    for i in range(lines):
        f.write(line_for(i) + "\n" if i % error_every == 0 else NOISE)
        now = time.monotonic()
        if now - last >= every_ms / 1000:
            f.close()
            gen += 1
            os.replace(path, path.with_name(f"{path.name}.{gen}"))
            f = open(path, "a")  # noqa: SIM115
            last = now
        elif i % 10 == 0:
            f.flush()
            time.sleep(0.0005)  # a writer that also computes: lines arrive spread out
    f.close()
    print(gen, flush=True)  # rotations made


def many(directory: Path, files: int, lines: int, rotate_every: int) -> None:
    """`files` logs written round-robin; every `rotate_every` rounds all are renamed at once."""
    handles = [open(directory / f"w{k:03d}.log", "a") for k in range(files)]  # noqa: SIM115
    gen = 0
    for i in range(lines):
        for k, h in enumerate(handles):
            h.write(line_for(i * files + k) + "\n")
            h.flush()
        if (i + 1) % rotate_every == 0:
            gen += 1
            for k, h in enumerate(handles):
                h.close()
                p = directory / f"w{k:03d}.log"
                os.replace(p, p.with_name(f"{p.name}.{gen}"))
                handles[k] = open(p, "a")  # noqa: SIM115
        time.sleep(0.001)
    for h in handles:
        h.close()


def burst(path: Path, lines: int, error_every: int) -> None:
    """`lines` lines in as few writes as possible: a server that dumps at once."""
    block = []
    with open(path, "a") as f:
        for i in range(lines):
            block.append(line_for(i) + "\n" if i % error_every == 0 else NOISE)
            if len(block) == 10_000:
                f.write("".join(block))
                block.clear()
        f.write("".join(block))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["storm", "many", "burst"])
    p.add_argument("--path", type=Path, required=True)
    p.add_argument("--lines", type=int, required=True)
    p.add_argument("--every-ms", type=float, default=10.0)
    p.add_argument("--error-every", type=int, default=1)
    p.add_argument("--files", type=int, default=100)
    p.add_argument("--rotate-every", type=int, default=20)
    a = p.parse_args()
    if a.mode == "storm":
        storm(a.path, a.lines, a.every_ms, a.error_every)
    elif a.mode == "many":
        many(a.path, a.files, a.lines, a.rotate_every)
    else:
        burst(a.path, a.lines, a.error_every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
