"""`scan -j 2` side by side with `scan -j 1` and `grep -E -c -f` with the same patterns (issue 18).

One run, commands interleaved (a busy minute slows each alike), medians of `--runs` runs after
a warm-up of each, whole command wall time, start-up included; also the start-up alone (a scan
of an empty file), to give the ratios net of it. Two logs of the same generator: the bench log
(`--lines`, 1M lines, 168 MB) and the catch-up backlog's size (`--big-lines`, 6M lines, 1 GB),
where the start-up weighs a sixth as much; and the bench log as a node keeps it, a directory of
`--rotations` rotations, all but the newest two gzip-compressed (`scan DIR`), and as a node's many
small logs, a directory of `--small-files` files (`scan DIR`: each file is one read or less, and
the workers get them in batches). Outputs of -j 1
and -j 2 are compared, and the machine's load average is recorded at start and end: the
machine is shared. Each speed-up is given twice: the ratio of the medians, and the median of
the rounds' own ratios (-j 1 and -j 2 ran seconds apart in a round, so a slow minute weighs on
both sides of one ratio); and the CPU time each command took, workers included, gives what
-j 2 costs in all beside -j 1 — the part of the speed-up two cores cannot give back.

The ceiling: each log is also cut in two at the line end nearest its middle, and the halves are
scanned by two independent `scan -j 1` started together. That is the ideal split — nothing
shared, nothing sent between processes, even the start-up on both cores at once — so `-j 1`
÷ that time is the most two cores of this machine give this work, whatever the code; `-j 2`
÷ it says how close `-j 2` comes (two busy cores of a shared VM each run slower than one).

grep with the full catalog takes minutes per million lines: it reads a smaller log of the
same generator (`--grep-full-lines`), once by default, and is compared per line.

    python bench/scan_parallel.py                 # 1M and 6M lines, 5 runs: ~4 minutes
    python bench/scan_parallel.py --lines 200000 --big-lines 0 --runs 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import CURATED, GREP, ROOT, SCAN, compiled, export, generate


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


Command = list[str] | tuple[list[str], ...]  # one command, or several run at once


def timed(cmd: Command, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system, of the command and every process it waited for:
    `scan -j N`'s workers) and stdout of one run; of several commands started together, the
    time until the last ends, their CPU time in all, and their outputs one after another."""
    cmds = list(cmd) if isinstance(cmd, tuple) else [cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT, env=env) for c in cmds]
    outs = [p.communicate() for p in procs]
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for c, p, (_, err) in zip(cmds, procs, outs, strict=True):
        if p.returncode not in (0, 1):
            raise SystemExit(f"{c}: exit {p.returncode}\n{err[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, "".join(out for out, _ in outs)


def paired(a: list[float], b: list[float]) -> float:
    """The median of a ÷ b round by round: each pair ran a few seconds apart, so a slow minute
    of the shared machine weighs on both sides of one ratio, not on one side of the medians."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--big-lines", type=int, default=6_000_000, help="0: no big log")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--grep-full-lines", type=int, default=100_000)
    ap.add_argument("--grep-full-runs", type=int, default=1)
    ap.add_argument("--rotations", type=int, default=8,
                    help="the bench log cut into this many rotations, all but the newest two "
                         "gzip-compressed as logrotate leaves them, scanned as a directory "
                         "(0: not)")
    ap.add_argument("--small-files", type=int, default=5000,
                    help="the bench log cut into this many files of a directory; 0: none")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sglang-bench"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scan_parallel.json")
    args = ap.parse_args(argv)
    compiled()
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SGLANG_MATCHER_REPEAT_INTERVAL": "0"}
    logs = {"": (work / f"sglang-{args.lines}.log", args.lines)}
    if args.big_lines:
        logs[" (big)"] = (work / f"sglang-{args.big_lines}.log", args.big_lines)
    truths = {tag: generate(path, n, 1, 1000) for tag, (path, n) in logs.items()}
    small = work / f"sglang-{args.grep_full_lines}.log"
    small_truth = generate(small, args.grep_full_lines, 1, 1000)
    empty = work / "empty.log"
    empty.write_bytes(b"")
    pats = work / "patterns"
    pats.mkdir(exist_ok=True)
    full_grep = export("grep", pats / "full.grep")
    cur_grep = export("grep", pats / "curated.grep", CURATED)
    curated = [*SCAN, "--no-builtin", "--catalog", str(CURATED)]
    commands: dict[str, Command] = {
        "start-up (scan -j 1 of an empty file)": [*SCAN, "-j", "1", str(empty)],
        "start-up curated": [*curated, "-j", "1", str(empty)],
    }
    for tag, (path, _) in logs.items():
        first, second = halves(path)
        commands.update({
            f"scan -j 1{tag}": [*SCAN, "-j", "1", str(path)],
            f"scan -j 2{tag}": [*SCAN, "-j", "2", str(path)],
            f"two scan -j 1, a half each, at once{tag}": ([*SCAN, "-j", "1", str(first)],
                                                         [*SCAN, "-j", "1", str(second)]),
            f"scan curated -j 1{tag}": [*curated, "-j", "1", str(path)],
            f"scan curated -j 2{tag}": [*curated, "-j", "2", str(path)],
            f"grep -E -c -f curated{tag}": [*GREP, str(cur_grep), str(path)],
        })
    rotated = rotations(logs[""][0], args.rotations) if args.rotations else None
    if rotated is not None:
        commands.update({"scan -j 1 (rotations)": [*SCAN, "-j", "1", str(rotated)],
                         "scan -j 2 (rotations)": [*SCAN, "-j", "2", str(rotated)]})
    small_dir = many_files(logs[""][0], args.small_files) if args.small_files else None
    if small_dir is not None:
        commands.update({"scan -j 1 (small files)": [*SCAN, "-j", "1", str(small_dir)],
                         "scan -j 2 (small files)": [*SCAN, "-j", "2", str(small_dir)]})
    started = load()
    runs: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    outputs: dict[str, str] = {}
    for i in range(args.runs + 1):  # the first round warms caches and is not counted
        for name, cmd in commands.items():
            wall, cpu, out = timed(cmd, env)
            outputs[name] = out
            if i:
                runs[name].append(wall)
                cpus[name].append(cpu)
        print(f"[bench] round {i}/{args.runs}: " + ", ".join(
            f"{n} {r[-1]:.2f} s" for n, r in runs.items() if r and i), file=sys.stderr,
            flush=True)
    grep_full = [timed([*GREP, str(full_grep), str(small)], env)[0]
                 for _ in range(args.grep_full_runs)]
    ended = load()
    med = {n: statistics.median(r) for n, r in runs.items()}
    med_cpu = {n: statistics.median(r) for n, r in cpus.items()}
    same = all(outputs[f"scan -j 1{tag}"] == outputs[f"scan -j 2{tag}"]
               and outputs[f"scan curated -j 1{tag}"] == outputs[f"scan curated -j 2{tag}"]
               for tag in logs) and all(outputs[f"scan -j 1 ({kind})"]
                                        == outputs[f"scan -j 2 ({kind})"]
                                        for kind, made in (("rotations", rotated),
                                                           ("small files", small_dir)) if made)
    start = med["start-up (scan -j 1 of an empty file)"]
    start_curated = med["start-up curated"]
    per_line_grep_full = statistics.median(grep_full) / small_truth["lines"]
    ratios: dict[str, float] = {}
    for tag in logs:
        j1, j2 = med[f"scan -j 1{tag}"], med[f"scan -j 2{tag}"]
        c1, c2 = med[f"scan curated -j 1{tag}"], med[f"scan curated -j 2{tag}"]
        grep_cur = med[f"grep -E -c -f curated{tag}"]
        pair = med[f"two scan -j 1, a half each, at once{tag}"]
        ratios.update({
            f"scan -j 2 ÷ scan -j 1{tag} (speed-up, start-up included)": j1 / j2,
            f"ceiling: scan -j 1 ÷ its halves scanned at once{tag}": j1 / pair,
            f"the same, median of the rounds' ratios, ceiling{tag}":
                paired(runs[f"scan -j 1{tag}"], runs[f"two scan -j 1, a half each, at once{tag}"]),
            f"scan -j 2 ÷ that ceiling{tag} (1: as fast as the ideal split)": pair / j2,
            f"the same, median of the rounds' ratios{tag}":
                paired(runs[f"scan -j 1{tag}"], runs[f"scan -j 2{tag}"]),
            f"the same, net of start-up{tag}": (j1 - start) / (j2 - start),
            f"CPU time of scan -j 2 ÷ scan -j 1{tag} (its cost)":
                med_cpu[f"scan -j 2{tag}"] / med_cpu[f"scan -j 1{tag}"],
            f"scan curated -j 2 ÷ scan curated -j 1{tag}": c1 / c2,
            f"the same, net of start-up, curated{tag}": (c1 - start_curated)
            / (c2 - start_curated),
            f"scan -j 2 ÷ grep -E full{tag} (speed-up, per line)":
                per_line_grep_full * truths[tag]["lines"] / j2,
            f"scan curated -j 2 ÷ grep -E curated{tag} (speed-up)": grep_cur / c2,
        })
    if rotated is not None:
        ratios["scan -j 2 ÷ scan -j 1, a directory of rotations (speed-up)"] = \
            med["scan -j 1 (rotations)"] / med["scan -j 2 (rotations)"]
        ratios["the same, median of the rounds' ratios (rotations)"] = \
            paired(runs["scan -j 1 (rotations)"], runs["scan -j 2 (rotations)"])
    if small_dir is not None:
        ratios[f"scan -j 2 ÷ scan -j 1, a directory of {args.small_files:,} small files"] = \
            med["scan -j 1 (small files)"] / med["scan -j 2 (small files)"]
        ratios["the same, median of the rounds' ratios (small files)"] = \
            paired(runs["scan -j 1 (small files)"], runs["scan -j 2 (small files)"])
    result: dict[str, Any] = {
        "logs": {tag or "bench": {"lines": t["lines"], "bytes": t["bytes"]}
                 for tag, t in truths.items()},
        "runs": args.runs, "cpus": os.cpu_count(), "load_start": started, "load_end": ended,
        "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=ROOT).stdout.strip(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "median_s": {n: round(v, 3) for n, v in med.items()},
        "runs_s": {n: [round(x, 3) for x in r] for n, r in runs.items()},
        "cpu_median_s": {n: round(v, 3) for n, v in med_cpu.items()},
        "cpu_s": {n: [round(x, 3) for x in r] for n, r in cpus.items()},
        "grep_full": {"lines": small_truth["lines"], "runs_s": [round(x, 2) for x in grep_full]},
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "same_output": same,
    }
    sizes = ", ".join(f"{t['lines']:,} lines ({t['bytes'] / 1e6:.0f} MB)" for t in truths.values())
    print(f"scan -j 1 / -j 2 / grep over {sizes}, median of {args.runs}, {os.cpu_count()} CPUs, "
          f"load {started} → {ended}")
    for n, v in med.items():
        print(f"  {n:<45} {v:8.3f} s   CPU {med_cpu[n]:7.3f} s")
    print(f"  {'grep -E -c -f full':<45} {statistics.median(grep_full):8.1f} s "
          f"({small_truth['lines']:,} lines; compared per line)")
    for k, v in ratios.items():
        print(f"  {k:<62} {v:6.2f}")
    print(f"  -j 1 and -j 2 print the same events: {'yes' if same else 'NO'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return 0 if same else 1


def rotations(log: Path, n: int) -> Path:
    """`log` cut at line ends into `n` rotations as logrotate with `compress` and
    `delaycompress` leaves them: `server.log`, `server.log.1`, then `server.log.2.gz` … the
    oldest; made once per log and count."""
    out = log.with_name(f"{log.stem}-rotations-{n}")
    done = out / "server.log"
    if done.exists():
        return out
    out.mkdir(exist_ok=True)
    data = log.read_bytes()
    cuts = [0]
    for i in range(1, n):
        cuts.append(data.index(b"\n", len(data) * i // n) + 1)
    cuts.append(len(data))
    for i in range(n):  # part 0 is the oldest
        generation = n - 1 - i
        part = data[cuts[i]:cuts[i + 1]]
        if generation >= 2:
            (out / f"server.log.{generation}.gz").write_bytes(gzip.compress(part, 6))
        else:
            (out / ("server.log" if generation == 0 else "server.log.1")).write_bytes(part)
    return out


def halves(log: Path) -> tuple[Path, Path]:
    """`log` cut at the line end nearest its middle into two files: scanned by two independent
    `scan -j 1` at once, they are the ideal split — no coordination, start-up on both cores —
    and what they take is the most two cores of this machine give this work (its ceiling)."""
    first, second = log.with_name(f"{log.stem}-half-1.log"), log.with_name(f"{log.stem}-half-2.log")
    if not second.exists():
        data = log.read_bytes()
        cut = data.index(b"\n", len(data) // 2) + 1
        first.write_bytes(data[:cut])
        second.write_bytes(data[cut:])
    return first, second


def many_files(log: Path, n: int) -> Path:
    """`log` cut at line ends into `n` files of one directory, as a node keeps the logs of many
    short-lived pods; made once per log and count."""
    out = log.with_name(f"{log.stem}-files-{n}")
    last = out / f"pod-{n - 1:06d}.log"
    if last.exists():
        return out
    out.mkdir(exist_ok=True)
    data = log.read_bytes()
    start = 0
    for i in range(n):
        end = len(data) if i == n - 1 else data.index(b"\n", len(data) * (i + 1) // n) + 1
        (out / f"pod-{i:06d}.log").write_bytes(data[start:end])
        start = end
    return out


if __name__ == "__main__":
    raise SystemExit(main())
