"""The command line shared by the closed-vocabulary generators (`cu_result`, `ur_result`,
`rocm_status`, `hsa_status`, `ascend`): `--build` reads the packages (or a source clone) and
writes the vocabulary table (TSV, a header line then one status a line); without it, the
records are made from the committed table alone (no network) and written as JSONL."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from matcher.atomic import write_atomic


def read_rows(vocab: Path) -> list[tuple[str, ...]]:
    """The table's rows, its header left out."""
    return [tuple(line.split("\t")) for line in vocab.read_text(encoding="utf-8").splitlines()[1:]]


def write_rows(vocab: Path, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    vocab.write_text("\n".join(["\t".join(columns), *("\t".join(r) for r in rows)]) + "\n",
                     encoding="utf-8")


def main(argv: Sequence[str] | None, *, prog: str, doc: str | None, vocab: Path,
         columns: Sequence[str], output: Path, build: Callable[[], Iterable[Sequence[str]]],
         records: Callable[[list[tuple[str, ...]]], list[dict[str, Any]]]) -> int:
    ap = argparse.ArgumentParser(prog=prog, description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="store_true", help="read the wheels, write the vocabulary")
    ap.add_argument("-o", "--out", type=Path, default=output)
    args = ap.parse_args(argv)
    if args.build:
        write_rows(vocab, columns, build())
    rows = read_rows(vocab)
    recs = records(rows)
    write_atomic(args.out, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                                   for r in recs))
    print(f"{len(recs)} records from {len(rows)} statuses", flush=True)
    return 0
