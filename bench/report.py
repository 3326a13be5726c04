"""docs/performance.md, rendered from the results in bench/results/.

Every figure in the page comes from a results file that a bench script wrote; each table names
its file, the command that wrote it, the date and the machine (the revision measured is in the
file). Nothing here is typed by hand but the words around the tables, so the page cannot drift
from what was measured: `tests/test_performance_page.py` fails when the page differs from what
this script renders.

    python bench/report.py            # rewrite docs/performance.md
    python bench/report.py --check    # exit 1 when the page is not what the results say
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "performance.md"

# The results the page is made of, in the order it shows them.
THROUGHPUT = "full.json"
START = "start.json"
CRASH = "quick.json"
PARALLEL = (
    "scan_parallel-1M-15-rounds.json",
    "scan_parallel-9-rounds.json",
    "scan_parallel-small-files.json",
    "scan_parallel.json",
)
GREP_FULL = "full-grep.txt"
# That file is the printed report of a full `bench/run.py`, which holds no date: the date of the
# revision it names.
GREP_FULL_DATE = "2026-12-04"

INTRO = """\
# Performance

Every figure on this page is rendered by `python bench/report.py` from the results files in
[`bench/results/`](../bench/results/) that the bench scripts write; each section names its file,
the command that wrote it, the date and the machine. How each figure is measured:
[`bench/README.md`](../bench/README.md). The machine is shared (2 CPUs): the same command runs
1.3–1.8× slower at another hour, so targets are ratios of commands run side by side in one run,
and times are medians.
"""

SHIPPED = """\
What makes the first start fast is `matcher/_precompiled`, made by `sglang-matcher catalog
precompile` (the wheel's build hook and the image build run it): `engine.bin`, the compiled
Hyperscan databases and each pattern's compiled `regex` program (read one pattern at a time,
when first confirmed); `records.pickle`, the records' matching fields as columns; and
`records.data`, the rest of each record (documentation, solutions, links, locations), read when
an event or `explain` first asks for it. A start hashes the catalog files that changed since it
last hashed them, loads the records and the databases, and compiles nothing. Where the artifact
does not fit the catalog (a checkout whose catalog changed), the built-in records compile once
into the cache directory while the curated layer already reads; a user's `--catalog` compiles
only its own records, as a second engine part merged at match time."""

def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return data


def provenance(name: str, data: dict[str, Any], command: str) -> str:
    """Where a table's figures come from: file, command, date, machine."""
    config = data.get("config", {})
    machine = config.get("machine", {})
    started = config.get("started") or data.get("started", "?")
    cpus = machine.get("cpus") or data.get("cpus", "?")
    python = machine.get("python")
    return (f"`bench/results/{name}`, written by `{command}` on {started} UTC, on this "
            f"project's shared machine ({cpus} CPUs{f', Python {python}' if python else ''})")


def number(value: float, digits: int = 3) -> str:
    if isinstance(value, int) or (float(value).is_integer() and abs(value) >= 1000):
        return f"{int(value):,}"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> list[str]:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def targets_section(name: str, data: dict[str, Any]) -> list[str]:
    rows = [(t["target"], number(t["measured"]), t["goal"], "yes" if t["met"] else "**no**")
            for t in data.get("targets", [])]
    return table(("target", "measured", "goal", "met"), rows) if rows else []


def throughput_section() -> list[str]:
    data = load(THROUGHPUT)
    config = data["config"]
    out = ["## Throughput: `scan`, grep and mtail on the same log", "",
           (f"A generated sglang log of {config['lines']:,} lines (every release's messages, "
           f"failures among traffic), medians of {config['runs']} runs, whole-command wall "
           f"time with start-up, peak RSS from `/usr/bin/time -v`. "
           f"{provenance(THROUGHPUT, data, 'python bench/run.py')}."), ""]
    rows = [(t["name"], f"{number(t['median_s'])} s", number(t["lines"]),
             number(t["lines_per_s"]), number(t["mb_per_s"], 1), number(t["peak_rss_mb"], 1))
            for t in data["throughput"]]
    out += table(("command", "median", "lines", "lines/s", "MB/s", "peak RSS MB"), rows)
    daemon = data["daemon"]
    out += ["", "The daemon in the same run:", ""]
    rows = [((f"write-to-event latency, {lat['catalog']} catalog "
             f"({lat['traffic_lines_per_s']:,} lines/s of traffic, {lat['errors_written']:,} errors)"),
             (f"p50 {number(lat['p50_ms'], 1)} ms, p99 {number(lat['p99_ms'], 1)} ms, "
             f"{lat['events_seen']:,} of {lat['errors_written']:,} events"))
            for lat in daemon.get("latency", [])]
    catch = daemon.get("catch_up")
    if catch:
        rows.append(("catch-up of a 1 GB backlog (`--from-beginning`)",
                     (f"{number(catch['mb_per_s'], 1)} MB/s against `scan`'s "
                     f"{number(catch['scan_mb_per_s'], 1)} MB/s, {catch['events_by_then']:,} events, "
                     f"peak RSS {number(catch['peak_rss_mb'], 1)} MB")))
    rows += [(f"idle, {idle['catalog']} catalog, {idle['files']:,} files, {number(idle['seconds'], 0)} s",
              (f"{number(idle['cpu_percent_of_core'])}% of a core, RSS {number(idle['rss_mb'], 1)} MB "
              f"(peak {number(idle['peak_rss_mb'], 1)} MB)"))
             for idle in daemon.get("idle", [])]
    out += table(("measure", "result"), rows)
    out += ["", "Targets of that run:", ""] + targets_section(THROUGHPUT, data)
    checks = data.get("checks", [])
    agree = sum(1 for c in checks if c["ok"])
    out += ["", f"Counts checked against the generator's ground truth: {agree} of {len(checks)} "
            "agree." + (" Where they do not: " + "; ".join(c["what"] for c in checks if not c["ok"])
                        + " (mtail cannot see an exception's class, which tells two records "
                        "apart)." if agree < len(checks) else "")]
    grep = (RESULTS / GREP_FULL).read_text().splitlines()
    full_grep = [line for line in grep if line.startswith(("grep full", "scan full ÷ grep"))]
    if full_grep:
        run = grep[0].split(": ", 1)[-1].rsplit(", git ", 1)[0]
        out += ["", (f"GNU grep with the full catalog (`bench/results/{GREP_FULL}`, the report "
                     f"`python bench/run.py` printed on {GREP_FULL_DATE}: {run}):"),
                "", "```", *full_grep, "```"]
    return out


START_COMMAND = ("python bench/run.py --quick --skip throughput --skip mtail --skip grep-full "
                 "--skip latency --skip crash --skip catchup --skip idle "
                 "--out bench/results/start.json")


def start_section() -> list[str]:
    data = load(START)
    start = data["daemon"]["start"]
    compiling = start["compiling"]
    out = ["## Start-up", "",
           (f"The daemon with the full catalog, from exec to `/readyz` answering 200; medians of "
           f"{len(start['cold_runs'])} runs. {provenance(START, data, START_COMMAND)}."), ""]
    rows = [
        (("first start, empty cache (a new pod), precompiled catalog "
         f"{start['precompiled']}"), f"{number(start['cold_readyz_s'])} s",
         number(start["cold_peak_rss_mb"], 1)),
        ("warm start (the cache as the first start left it)",
         f"{number(start['warm_readyz_s'])} s", number(start["warm_peak_rss_mb"], 1)),
        (("start without the precompiled catalog: reading (curated layer) after "
         f"{number(compiling['started_s'])} s, then `/readyz` 200 after"),
         f"{number(compiling['readyz_s'], 1)} s", number(compiling["peak_rss_mb"], 1)),
        ("`scan` of a one-line log, empty cache", f"{number(start['scan_cold_s'])} s",
         number(start["scan_cold_peak_rss_mb"], 1)),
        ("`scan` of a one-line log, warm", f"{number(start['scan_warm_s'])} s",
         number(start["scan_warm_peak_rss_mb"], 1)),
    ]
    return out + table(("start", "time", "peak RSS MB"), rows) + ["", SHIPPED]


def crash_section() -> list[str]:
    data = load(CRASH)
    out = ["## A crash that is the last line written", "",
           ("A traceback whose exception line is the last thing the server writes: no next line "
           "closes it, so the event waits the exception grace (0.1 s: a chained cause printed "
           f"within it joins the same event). {provenance(CRASH, data, 'python bench/run.py --quick')}."),
           ""]
    rows = [(c["catalog"], f"{c['events_seen']} of {c['crashes']}", number(c["p50_ms"], 1),
             number(c["p99_ms"], 1), number(c["max_ms"], 1))
            for c in data["daemon"]["crash_latency"]]
    out += table(("catalog", "events", "p50 ms", "p99 ms", "max ms"), rows)
    return out + ["", "Targets of that run:", ""] + targets_section(CRASH, data)


def parallel_section() -> list[str]:
    out = ["## Parallel scan (`scan -j 2`)", "",
           ("`python bench/scan_parallel.py`: `scan -j 1` and `-j 2` alternate round by round on "
           "the same files; the ceiling is `scan -j 1` of the two halves of the log run at "
           "once, the best a split into two processes can do on this machine. Every run checks "
           "that `-j 2` writes the same events as `-j 1`."), ""]
    wanted = ("scan -j 2 ÷ scan -j 1 (speed-up, start-up included)",
              "ceiling: scan -j 1 ÷ its halves scanned at once",
              "scan -j 2 ÷ scan -j 1 (big) (speed-up, start-up included)",
              "scan -j 2 ÷ scan -j 1, a directory of 5,000 small files")
    rows = []
    for name in PARALLEL:
        data = load(name)
        ratios = data["ratios"]
        cells = [number(ratios[key]) + "×" if key in ratios else "" for key in wanted]
        run = f"`bench/results/{name}`, {data['started']} UTC: `{parallel_command(name, data)}`"
        rows.append((run,
                     *cells, "yes" if data["same_output"] else "**no**"))
    out += table(("run (2 CPUs)", "-j 2 ÷ -j 1, 1M lines", "ceiling", "-j 2 ÷ -j 1, 1 GB",
                  "-j 2 ÷ -j 1, 5,000 small files", "same events"), rows)
    return out


def parallel_command(name: str, data: dict[str, Any]) -> str:
    """The `bench/scan_parallel.py` command that wrote `name`, from what the file measured."""
    measured = " ".join(data["median_s"])
    flags = [f"--runs {data['runs']}"]
    flags += [] if " (big)" in data["logs"] else ["--big-lines 0"]
    flags += [] if "(rotations)" in measured else ["--rotations 0"]
    flags += [] if "(small files)" in measured else ["--small-files 0"]
    return f"python bench/scan_parallel.py {' '.join(flags)} --out bench/results/{name}"


def render() -> str:
    parts = [INTRO.rstrip("\n").splitlines(), throughput_section(), start_section(),
             crash_section(), parallel_section()]
    lines: list[str] = []
    for part in parts:
        lines += part + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when docs/performance.md is not what the results render")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if PAGE.read_text() != page:
            print(f"{PAGE} differs from what bench/results renders: run python bench/report.py",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
