"""Generated records whose message is also made elsewhere: `alsoMadeBy`.

sglang's `__getattr__` raises `'{type(self).__name__}' object has no attribute '{name}'` — the
interpreter's own words for any attribute read that fails; a log site of its prints `{X} has no
attribute {key}`; sglang and flashinfer each check `{name} must be contiguous`. Such a message
on a line says nothing of where it was made, and a record of one of those sites would name a
site the log does not show. So each generated record with a site (`filePath`) whose pattern
matches a message made by another maker carries `alsoMadeBy`, those makers; the engine matches
such a record only where the exception's traceback shows a frame at its site
(`engine._lookalikes_at_their_frame`).

The other makers' messages are

- **the interpreter's**: each snippet of `INTERPRETER_SNIPPETS` is run here, and the class and
  text of what it raises are taken as the interpreter prints them (attribute reads, indexing,
  calls, conversions, unpacking …): its maker is `python`;
- **every other generated record's template** (its `{…}` holes filled with a word), its maker
  the record's `sourcePackage` (`torch`, `transformers`, `flashinfer-python` …; `cpython` is
  `python`), or `sglang` for sglang's own source.

A record is marked with the makers, other than its own, of the messages it matches (an
exception's class must agree, as in matching). Records with no site (`mismatch`'s import
messages: made wherever the import ran) or a site no Python frame shows (the router's Rust,
sgl-kernel's C++) are left alone; flashinfer's C++ is marked, as its kernels run only under
flashinfer's Python, whose frame the engine then looks for.

    python -m matcher.catalog.lookalike patterns/sglang/generated   # rewrites the marks
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from matcher.catalog.schema import CatalogRecord
from matcher.types import ExceptionLine, Record

FIELD = "alsoMadeBy"
PYTHON = "python"
SGLANG = "sglang"

# Code whose exception carries a message the interpreter makes by itself. Each is run and its
# exception read (`interpreter_messages`): the words are the running interpreter's own.
INTERPRETER_SNIPPETS: tuple[str, ...] = (
    "object().weight_loader",                 # 'object' object has no attribute 'weight_loader'
    "int.no_such_attribute",                  # type object 'int' has no attribute …
    "import os\nos.no_such_attribute",        # module 'os' has no attribute …
    "None.shape",                             # 'NoneType' object has no attribute 'shape'
    "frozenset().add(1)",
    "[][1]", "()[1]", "''[1]",                # list / tuple / string index out of range
    "x = []\nx[1] = 0", "[].pop()",
    "1 / 0", "1 % 0", "1.0 / 0",
    "None[0]", "iter(None)", "None()", "len(1)", "-None", "None < 1", "1 in None", "None + 1",
    "t = (1,)\nt[0] = 2", "t = (1,)\ndel t[0]", "{[]: 1}", "[]['a']", "[][None:'a']",
    "def f(a): pass\nf(1, 2)", "def f(a): pass\nf(1, b=2)", "def f(a): pass\nf()",
    "def f(a): pass\nf(1, a=2)", "object(1)", "dict(**None)", "''.join([1])",
    "undefined_name_here", "def f():\n    print(v)\n    v = 1\nf()",
    "'a' + 1", "[] * 1.5", "int('abc')", "float('abc')",
    "a, b = [1]", "a, b = [1, 2, 3]", "[].index(3)", "[].remove(3)", "max([])", "range(0, 1, 0)",
    "d = {1: 1}\nfor k in d: d[2] = 2", "s = {1}\nfor k in s: s.add(2)",
    "import enum\nclass Color(enum.Enum):\n    RED = 1\nColor('blue')",
    "def f(): f()\nf()", "'{}{}'.format(1)", "b'\\xff'.decode('utf-8')",
    "list(zip([1], [1, 2], strict=True))", "open('/nonexistent/file.txt')",
)

_HOLE = re.compile(r"\{[^{}]*\}")


def interpreter_messages() -> list[tuple[str, str]]:
    """(class, message) of what each of `INTERPRETER_SNIPPETS` raises, run here."""
    out = []
    for code in INTERPRETER_SNIPPETS:
        try:
            with warnings.catch_warnings():  # `None[0]`: "perhaps you missed a comma?"
                warnings.simplefilter("ignore", SyntaxWarning)
                exec(compile(code, "<snippet>", "exec"), {})  # noqa: S102 - our own snippets
        except BaseException as e:  # noqa: BLE001 - every one raises; that is what is read
            out.append((type(e).__name__, str(e)))
        else:
            raise AssertionError(f"snippet raised nothing: {code!r}")
    return out


def maker(record: CatalogRecord) -> str | None:
    """Who makes the record's message: its package, `sglang` for sglang's own source (None:
    not a generated record of a source, or matched by its frame alone)."""
    if record.layer != "generated" or record.peek("raised_in") is not None:
        return None
    package = record.source_package
    if package:
        return PYTHON if package == "cpython" else package
    return SGLANG if "sglang/" in (record.file_path or "") else None


def samples(records: Iterable[CatalogRecord]) -> list[tuple[str, str, str]]:
    """(maker, class, message): the interpreter's messages, and each generated record's
    template with its holes filled."""
    out = [(PYTHON, cls, message) for cls, message in interpreter_messages()]
    for r in records:
        who = maker(r)
        if who is not None and r.error_message:
            text = _HOLE.sub("x", r.error_message).split("\n", 1)[0].strip()
            if text:
                out.append((who, r.error_class or "", text))
    return out


# Packages whose C++ is built into their Python package and called only through it: a check
# failing there is raised under the package's Python frames (flashinfer's `csrc/` kernels are
# compiled into modules that `flashinfer/*.py` loads and calls).
CALLED_THROUGH_PYTHON = ("flashinfer/",)


def shown_in_frames(path: str) -> bool:
    """A traceback can place a message made at `path`: a Python file, or C++ of a package
    called through its own Python (`CALLED_THROUGH_PYTHON`)."""
    return path.endswith(".py") or path.startswith(CALLED_THROUGH_PYTHON)


def marks(records: Sequence[CatalogRecord]) -> dict[str, tuple[str, ...]]:
    """By record id, the other makers of a message the record's pattern matches — for the
    records that have a site in Python (`filePath`) for a traceback's frame to show."""
    from matcher.engine import Engine

    engine = Engine([dataclasses.replace(r, also_made_by=()) if r.also_made_by else r
                     for r in records])
    found: dict[str, set[str]] = {}
    for who, cls, text in samples(records):
        line = Record("line", "", 0, 0, text, (text,), (ExceptionLine(cls, text),) if cls else ())
        for m in engine.match_all(line):
            own = maker(m.pattern)
            if m.cut or m.on_header or own is None or own == who \
                    or not shown_in_frames(m.pattern.file_path or ""):
                continue  # a site no Python frame can show (Rust, C++) is left alone
            found.setdefault(m.pattern.id, set()).add(who)
    return {rid: tuple(sorted(makers)) for rid, makers in found.items()}


_STYLES = ({"ensure_ascii": False, "separators": (",", ":")},
           {"ensure_ascii": False, "sort_keys": True},
           {"ensure_ascii": False})


def remarked(line: str, made_by: tuple[str, ...]) -> str:
    """A JSON-lines record with `alsoMadeBy` set to `made_by` (removed when empty), written in
    the style the line was written in (the generators write compact or sorted keys)."""
    raw = json.loads(line)
    style = next((s for s in _STYLES if json.dumps(raw, **s) == line.rstrip("\n")), None)
    if style is None:
        raise ValueError(f"a record line in a style of no generator: {line[:80]!r}")
    raw.pop(FIELD, None)
    if made_by:
        raw[FIELD] = list(made_by)
    return json.dumps(raw, **style) + "\n"


def mark_files(files: Sequence[Path]) -> dict[Path, int]:
    """Set `alsoMadeBy` in each JSON-lines file of generated records; per file, how many lines
    changed. Computed on the records without their marks, so running it again changes nothing."""
    from matcher.catalog.load import load_paths

    loaded = load_paths(files, "generated")
    if loaded.issues:
        raise ValueError(f"{len(loaded.issues)} problems, first: {loaded.issues[0]}")
    found = marks(loaded.records)
    changed: dict[Path, int] = {}
    for file in files:
        lines = file.read_text(encoding="utf-8").splitlines(keepends=True)
        out, n = [], 0
        for line in lines:
            rid = json.loads(line)["id"] if line.strip() else ""
            new = remarked(line, found.get(rid, ())) if rid else line
            n += new != line
            out.append(new)
        if n:
            from matcher.atomic import write_atomic

            write_atomic(file, "".join(out))
        changed[file] = n
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", type=Path, help="the generated catalog's directory")
    args = ap.parse_args(argv)
    files = sorted(args.directory.glob("*.jsonl"))
    for file, n in mark_files(files).items():
        print(f"{file}: {n} records' {FIELD} changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
