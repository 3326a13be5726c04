"""How many lines does `watch` deliver again after a SIGKILL? (docs/reliability.md)

Each trial: a daemon follows a file that a writer process fills at RATE lines/s; the daemon is
SIGKILLed at a random moment, restarted, and every line's events are counted. Lost lines must be
0; duplicates are the lines read after the last checkpoint. Prints per-trial figures, the median
and the maximum, in lines and in seconds of input.

    python bench/sigkill_redelivery.py --trials 10 --rate 2000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from matcher.testing import SEQ_RECORD

REPO = Path(__file__).resolve().parents[1]


def seqs(out: Path) -> Counter[int]:
    text = out.read_text()
    text = text[: text.rfind("\n") + 1]
    return Counter(int(json.loads(x)["captures"]["seq"]) for x in text.splitlines() if x.strip())


def daemon(tmp: Path, out: Path) -> subprocess.Popen[bytes]:
    catalog = tmp / "catalog.json"
    catalog.write_text(json.dumps(SEQ_RECORD))
    return subprocess.Popen(
        [sys.executable, "-m", "matcher", "watch", "--state-dir", str(tmp / "state"),
         "--catalog", str(catalog), "--no-builtin", str(tmp / "server.log")],
        stdout=open(out, "ab"), stderr=subprocess.DEVNULL, cwd=REPO,
        env={**os.environ, "SGLANG_MATCHER_AGGREGATE_WINDOW": "0.5"})


def trial(rate: int, lines: int, rng: random.Random) -> tuple[int, int]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "server.log").touch()
        out = tmp / "events.jsonl"
        proc = daemon(tmp, out)
        time.sleep(1.0)
        writer = subprocess.Popen(
            [sys.executable, "-m", "matcher.testing", "write", "--path", str(tmp / "server.log"),
             "--lines", str(lines), "--interval", str(1 / rate)], cwd=REPO)
        time.sleep(rng.uniform(0.5, lines / rate * 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        writer.wait()
        proc = daemon(tmp, out)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(seqs(out)) < lines:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        got = seqs(out)
        lost = lines - len(got)
        dups = sum(c - 1 for c in got.values())
        return lost, dups


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--rate", type=int, default=2000, help="lines per second written")
    p.add_argument("--seconds", type=float, default=4.0, help="length of each writer run")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    lines = int(args.rate * args.seconds)
    results = []
    for n in range(args.trials):
        lost, dups = trial(args.rate, lines, rng)
        results.append((lost, dups))
        print(f"trial {n + 1}: lost {lost}, re-delivered {dups} lines ({dups / args.rate:.2f} s of input)")
    d = [r[1] for r in results]
    print(f"lost: {sum(r[0] for r in results)} in total; re-delivered: median {statistics.median(d):.0f} "
          f"lines ({statistics.median(d) / args.rate:.2f} s), max {max(d)} lines "
          f"({max(d) / args.rate:.2f} s); checkpoint interval 1 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
