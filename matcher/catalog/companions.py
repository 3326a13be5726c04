"""Which release of each torch companion (torchvision, torchaudio) goes with which torch.

Each companion wheel requires exactly one torch (`Requires-Dist: torch==2.9.1` in its METADATA,
which PyPI serves beside the wheel): read for the companions' releases since torchvision 0.20 /
torchaudio 2.5, written to `patterns/sglang/generated/torch-companions.tsv` (`torch`, `package`,
`version`: the newest release of the package requiring that torch). A compiled extension built
against another torch fails to load (`undefined symbol: _ZN3c10…`, `operator torchvision::nms does
not exist`); the fix is the companion built for the torch installed.

    python -m matcher.catalog.companions        # reads PyPI, writes the table
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
TABLE = GENERATED / "torch-companions.tsv"
COLUMNS = ("torch", "package", "version")
# The first release of each that goes with a torch sglang has pinned (torch 2.5).
SINCE: Mapping[str, str] = {"torchvision": "0.20.0", "torchaudio": "2.5.0"}


def read_table(path: Path = TABLE) -> dict[str, dict[str, str]]:
    """{package: {torch version (without a local tag): the package's version}}."""
    out: dict[str, dict[str, str]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines[1:]:
        torch, package, version = line.split("\t")
        out.setdefault(package, {})[torch] = version
    return out


def required_torch(package: str, version: str) -> str | None:
    from matcher.catalog import soname_sources as S

    try:
        meta = S.metadata(package, version)
    except LookupError:
        return None
    for line in meta.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        if req.name == "torch" and pinned:
            return pinned[0]
    return None


def build() -> list[tuple[str, str, str]]:
    from matcher.catalog import soname_sources as S

    rows: dict[tuple[str, str], str] = {}
    for package, first in SINCE.items():
        versions = sorted({S.version_of(f["filename"]) for f in S.files_of(package)
                           if f["filename"].endswith(".whl")}, key=Version)
        for v in versions:
            if Version(v) < Version(first) or Version(v).is_prerelease:
                continue
            torch = required_torch(package, v)
            if torch is not None:
                rows[(torch, package)] = v  # ascending: the newest wins
    return sorted((t, p, v) for (t, p), v in rows.items())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.companions", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", type=Path, default=TABLE)
    args = ap.parse_args(argv)
    rows = build()
    args.out.write_text("\n".join(["\t".join(COLUMNS), *("\t".join(r) for r in rows)]) + "\n",
                        encoding="utf-8")
    print(f"{len(rows)} rows", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
