"""Every distribution each sglang release pins, as one table: `sglang-pins.tsv`.

The symbol indexes (`symbols/<dist>.txt.gz`) carry sglang's pins of the dozen distributions they
index. A mismatch can name any other one sglang requires (numpy, pydantic, torchvision,
huggingface-hub, partial-json-parser …): this table holds, for every release the sglang index
reads, the specifier its wheel's `Requires-Dist` gives each distribution for a CUDA server
install (`pins.server_pins`), so the fix can name the version the running release wants even
without an index of that distribution.

    R <release> <release> …                  the releases, oldest first
    P <distribution> <spec> <ranges>         the releases (`0.4.0..0.4.3, 0.5.1`) pinning it so

`python -m matcher.catalog.pin_table` reads each release's metadata through pip
(`pip install --dry-run --no-deps --report`: the wheel's metadata alone, PEP 658) and writes the
table. Reading it (`PinTable.load`) is pure but for opening the file.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from matcher.catalog.pep440 import version_key

FILE = ("sglang", "generated", "sglang-pins.tsv")


@dataclass(frozen=True, slots=True)
class PinTable:
    releases: tuple[str, ...]  # oldest first
    pins: Mapping[str, Mapping[str, str]]  # distribution → release → spec ("" unbounded)

    @staticmethod
    def parse(text: str) -> PinTable:
        releases: list[str] = []
        pins: dict[str, dict[str, str]] = {}
        for line in text.splitlines():
            parts = line.split("\t")
            if parts[0] == "R":
                releases = parts[1].split()
            elif parts[0] == "P" and len(parts) == 4:
                spec = "" if parts[2] == "*" else parts[2]
                into = pins.setdefault(parts[1], {})
                for r in expand(parts[3], releases):
                    into[r] = spec
        return PinTable(tuple(releases), pins)

    def spec(self, distribution: str, release: str) -> str | None:
        """What `release` requires of `distribution` (None: it does not require it)."""
        return self.pins.get(distribution, {}).get(release)

    def pinned_by(self, distribution: str) -> dict[str, list[str]]:
        """spec → the releases (oldest first) that require `distribution` so."""
        out: dict[str, list[str]] = {}
        for release in self.releases:
            spec = self.spec(distribution, release)
            if spec is not None:
                out.setdefault(spec, []).append(release)
        return out


def expand(ranges: str, order: Sequence[str]) -> list[str]:
    """`0.4.0..0.4.2, 0.5.1` over `order` → every release it names."""
    at = {v: i for i, v in enumerate(order)}
    out: list[str] = []
    for part in ranges.split(", "):
        lo, _, hi = part.partition("..")
        if lo not in at or (hi and hi not in at):
            continue
        out.extend(order[at[lo]:at[hi or lo] + 1])
    return out


def runs(chosen: Sequence[str], order: Sequence[str]) -> str:
    """The releases of `chosen` as runs over `order` (`0.4.0..0.4.2, 0.5.1`): `expand`'s
    inverse."""
    picked = set(chosen)
    out: list[list[str]] = []
    previous = False
    for v in order:
        if v in picked:
            if previous:
                out[-1].append(v)
            else:
                out.append([v])
        previous = v in picked
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}..{r[-1]}" for r in out)


def default_path() -> Path:
    from matcher.catalog import builtin_patterns_dir

    return builtin_patterns_dir().joinpath(*FILE)


@functools.lru_cache(maxsize=1)
def load(path: Path | None = None) -> PinTable | None:
    """The shipped table (None when it is missing or unreadable)."""
    try:
        return PinTable.parse((path or default_path()).read_text(encoding="utf-8"))
    except OSError:
        return None


def render(per_release: Mapping[str, Mapping[str, str]]) -> str:
    order = sorted(per_release, key=version_key)
    lines = [("# sglang release → the specifier its wheel requires of each distribution "
             "(CUDA server install); python -m matcher.catalog.pin_table"),
             "R\t" + " ".join(order)]
    by: dict[tuple[str, str], list[str]] = {}
    for release in order:
        for dist, spec in per_release[release].items():
            by.setdefault((dist, spec), []).append(release)
    for (dist, spec), releases in sorted(by.items(), key=lambda kv: (kv[0][0], version_key(kv[1][0]))):
        lines.append(f"P\t{dist}\t{spec or '*'}\t{runs(releases, order)}")
    return "\n".join(lines) + "\n"


def read_release(version: str) -> dict[str, str] | None:
    """The server pins of sglang `version`, from its metadata as pip resolves it."""
    from matcher.catalog.pins import server_pins

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        run = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
             "--ignore-installed", "--quiet", "--report", str(report), f"sglang=={version}"],
            capture_output=True, text=True, timeout=600, check=False)
        if run.returncode != 0 or not report.is_file():
            return None
        installs = json.loads(report.read_text(encoding="utf-8")).get("install") or []
    if not installs:
        return None
    requires = installs[0].get("metadata", {}).get("requires_dist") or []
    return server_pins("".join(f"Requires-Dist: {r}\n" for r in requires))


def main(argv: Sequence[str] | None = None) -> int:
    from matcher.atomic import write_atomic
    from matcher.catalog import builtin_patterns_dir
    from matcher.catalog.symbols import Index

    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.pin_table",
                                 description="write every sglang release's pins as one table")
    ap.add_argument("-o", "--out", type=Path, default=None)
    ap.add_argument("-j", "--jobs", type=int, default=3)
    args = ap.parse_args(argv)
    # the releases the sglang symbol index reads (`matcher.catalog.depindex`)
    sglang = Index.load(builtin_patterns_dir().joinpath(*FILE[:2], "symbols", "sglang.txt.gz"),
                        "sglang")
    with ThreadPoolExecutor(args.jobs) as pool:
        got = dict(zip(sglang.versions, pool.map(read_release, sglang.versions), strict=True))
    missing = [v for v, p in got.items() if p is None]
    if missing:
        print(f"not read: {' '.join(missing)}", file=sys.stderr)
    write_atomic(args.out or default_path(),
                 render({v: p for v, p in got.items() if p is not None}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
