"""Which sglang releases hold each source line: the answer for an exception no record knows,
raised in sglang's code at a line a later release no longer has.

`IndexError: list index out of range`, a bare `AssertionError`, `UnboundLocalError` — Python's
own messages say nothing of what failed, and no catalog record can be written for every line
that may raise them. The traceback says where: the innermost frame in sglang's code prints its
file and its source line. When a later sglang release no longer has that line in that file, the
code that raised was changed there, and upgrading to it is the way to try: the answer the
daemon gives (`matcher.changed_line`) — with the releases and GitHub's compare view, and
without claiming that the change fixed this failure.

The index is read from sglang's wheels (`build`) and shipped as one binary file
(`patterns/sglang/generated/lines.bin`), read only when such an event needs it (`History.load`):

    sglang-lines 1\\n
    <release> <release> …\\n                 the releases read, oldest first
    entries, 10 bytes each, sorted:          8 bytes: blake2b of "<path>\\0<line>"
                                             1 byte: the first release of a run that has it
                                             1 byte: the last release of that run

A line is its text stripped, runs of whitespace made one space, as a traceback prints it; the
path is the wheel's (`sglang/srt/managers/scheduler.py`). Only lines that some run of releases
has and then loses before the newest release are kept, with every run of them (a line that
comes back is kept once per run, the one into the newest release too): a line the newest
release has and no earlier one lost, or one never seen, has no answer.

    python -m matcher.catalog.line_history WHEEL… -o patterns/sglang/generated/lines.bin
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from matcher.catalog.layers import builtin_patterns_dir
from matcher.catalog.pep440 import version_key

MAGIC = b"sglang-lines 1\n"
ENTRY = 10
SHIPPED = ("sglang", "generated", "lines.bin")  # under the built-in catalog's directory
_SPACE = re.compile(r"\s+")
# Shorter lines (`)`, `):`, `else:`) say nothing of what changed, and are not kept.
MIN_LINE = 6


def normal(line: str) -> str:
    """A source line as the index keys it: stripped, runs of whitespace made one space."""
    return _SPACE.sub(" ", line.strip())


def key(path: str, line: str) -> bytes:
    return hashlib.blake2b(f"{path}\0{normal(line)}".encode(), digest_size=8).digest()


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive releases (indices into `History.releases`) that hold a line."""

    first: str
    last: str
    after: str | None  # the first release without it; None: the newest release has it


class History:
    def __init__(self, releases: Sequence[str], entries: bytes) -> None:
        self.releases = tuple(releases)
        self._entries = memoryview(entries)
        self._count = len(entries) // ENTRY

    @classmethod
    def load(cls, path: Path | None = None) -> History:
        """The history at `path`, by default the one shipped beside the built-in catalog."""
        path = path or Path(builtin_patterns_dir(), *SHIPPED)
        data = path.read_bytes()
        if not data.startswith(MAGIC):
            raise ValueError(f"{path}: not a line history (it does not start with {MAGIC!r})")
        end = data.index(b"\n", len(MAGIC))
        releases = data[len(MAGIC):end].decode().split()
        return cls(releases, data[end + 1:])

    def _hash_at(self, i: int) -> bytes:
        return bytes(self._entries[i * ENTRY:i * ENTRY + 8])

    def runs(self, path: str, line: str) -> list[Run]:
        """The runs of releases that held `line` in `path`, oldest first, when one of them
        ended before the newest release; else none."""
        k = key(path, line)
        i = bisect.bisect_left(_Keys(self), k)
        out = []
        while i < self._count and self._hash_at(i) == k:
            first, last = self._entries[i * ENTRY + 8], self._entries[i * ENTRY + 9]
            after = self.releases[last + 1] if last + 1 < len(self.releases) else None
            out.append(Run(self.releases[first], self.releases[last], after))
            i += 1
        return sorted(out, key=lambda r: version_key(r.first))


    def lone_run(self, path: str, line: str) -> Run | None:
        """The one run of releases that held `line`, when a later release dropped it (a line
        that came back has several: which one a log is from takes its release)."""
        runs = self.runs(path, line)
        return runs[0] if len(runs) == 1 and runs[0].after is not None else None


class _Keys(Sequence[bytes]):
    """The entries' hashes as a sequence `bisect` can search."""

    def __init__(self, history: History) -> None:
        self._history = history

    def __len__(self) -> int:
        return self._history._count

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        return self._history._hash_at(i)


def wheel_lines(wheel: Path) -> Iterable[tuple[str, str]]:
    """Every (path, line) of sglang's Python in one wheel, its tests left out."""
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if not name.startswith("sglang/") or not name.endswith(".py") \
                    or name.startswith("sglang/test/"):
                continue
            text = z.read(name).decode("utf-8", "replace")
            for line in text.splitlines():
                s = normal(line)
                if len(s) >= MIN_LINE and not s.startswith("#"):
                    yield name, s


def build(wheels: Sequence[tuple[str, Path]]) -> bytes:
    """The index of `(release, wheel)` pairs, in any order."""
    ordered = sorted(wheels, key=lambda vw: version_key(vw[0]))
    if len(ordered) > 255:
        raise ValueError("a line history holds at most 255 releases (one byte each)")
    masks: dict[bytes, int] = {}
    for i, (_, wheel) in enumerate(ordered):
        bit = 1 << i
        for path, line in set(wheel_lines(wheel)):
            k = key(path, line)
            masks[k] = masks.get(k, 0) | bit
    newest = len(ordered) - 1
    entries: list[bytes] = []
    for k, mask in masks.items():
        runs = list(_runs(mask))
        if runs[-1][1] < newest or len(runs) > 1:
            entries.extend(k + bytes(run) for run in runs)
    entries.sort()
    header = MAGIC + " ".join(v for v, _ in ordered).encode() + b"\n"
    return header + b"".join(entries)


def _runs(mask: int) -> Iterable[tuple[int, int]]:
    """The runs of set bits of `mask`: (first, last)."""
    i = 0
    while mask >> i:
        if not (mask >> i) & 1:
            i += 1
            continue
        first = i
        while (mask >> i) & 1:
            i += 1
        yield first, i - 1


def _wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheels", nargs="+", type=Path, help="sglang wheels, one per release")
    parser.add_argument("-o", "--output", type=Path,
                        default=Path(__file__).resolve().parents[2] / "patterns" / Path(*SHIPPED))
    args = parser.parse_args(argv)
    data = build([(_wheel_version(w), w) for w in args.wheels])
    args.output.write_bytes(data)
    entries = (len(data) - data.index(b"\n", len(MAGIC)) - 1) // ENTRY
    print(f"wrote {args.output}: {entries} entries from {len(args.wheels)} releases, "
          f"{len(data) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
