"""`scan` of one log by two revisions of sglang-matcher, side by side: is a change slower?

Each revision runs from its own git worktree (made under the work dir, left there for reuse)
with the built-in catalog of that revision. One untimed run each warms its compile cache; then
the timed runs alternate between the two, so a busy machine slows both alike. Prints each run,
the medians, the ratio (this tree ÷ base) and whether both gave the same events.

    python bench/compare_revisions.py --base e4bcbb0 --log /tmp/sglang-bench/sglang-1000000.log
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import ROOT, compiled


def worktree(rev: str, work: Path) -> Path:
    path = work / f"rev-{rev}"
    if not (path / "matcher").is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(path), rev],
                       check=True, capture_output=True)
    return path


def scan(tree: Path, log: Path, extra: list[str], cache: Path) -> tuple[float, Counter[str]]:
    # a cache directory per revision: revisions whose caches share one evict each other's
    # (a file named after the code that wrote it replaces the others), and the last to write
    # one would start warm while the other checks its catalog again
    env = {**os.environ, "PYTHONPATH": str(tree),
           "SGLANG_MATCHER_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "matcher", "scan", "--format", "json", *extra,
                          str(log)], cwd=tree, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if out.returncode not in (0, 1):
        raise SystemExit(f"{tree}: scan exited {out.returncode}: {out.stderr[-2000:]}")
    events = Counter(json.loads(x).get("pattern_id") or "unknown" for x in out.stdout.splitlines())
    return took, events


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the git revision to compare with")
    ap.add_argument("--log", type=Path, required=True, help="the log both scan (bench/genlog.py)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/sglang-matcher-compare"))
    ap.add_argument("scan_args", nargs="*", default=["--sglang-version", "all"],
                    help="more arguments for scan (default: --sglang-version all)")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    trees = {"base": worktree(args.base, args.work), "this": ROOT}
    for tree in trees.values():
        # As a wheel has them: the package's bytecode and the precompiled built-in catalog,
        # which git does not hold (a worktree without it loaded the catalog from the cache
        # instead, and its start-up was not the installed one).
        compiled(tree)
        subprocess.run([sys.executable, "-m", "matcher", "catalog", "precompile", "--if-needed"],
                       cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
                       capture_output=True)
    caches = {name: args.work / f"cache-{name}" for name in trees}
    events = {name: scan(tree, args.log, args.scan_args, caches[name])[1]
              for name, tree in trees.items()}
    times: dict[str, list[float]] = {name: [] for name in trees}
    for i in range(args.runs):
        for name, tree in trees.items():
            took, _ = scan(tree, args.log, args.scan_args, caches[name])
            times[name].append(took)
            print(f"run {i + 1} {name:4} {took:6.2f} s", flush=True)
    base, this = (statistics.median(times[n]) for n in ("base", "this"))
    print(f"median: base ({args.base}) {base:.2f} s, this tree {this:.2f} s, "
          f"this ÷ base {this / base:.2f}")
    same = events["base"] == events["this"]
    print("events: the same" if same else f"events differ: base {sum(events['base'].values())}, "
          f"this {sum(events['this'].values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
