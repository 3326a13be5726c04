"""How many real failures from public threads we recognize, and for how many we say how to fix
them: the field corpus scanned as `sglang-matcher scan` scans a file, with the built-in catalog.

The corpus has two splits (`bench/field_split.py` gives the rule): **train**
(`tests/fixtures/field/`), which records and rules may be written from, and **test**
(`tests/fixtures/field-test/`), which nobody reads while writing them. The test figure is the
one that predicts a user's next failure; of the test split this prints only figures per family.

Each excerpt is text a user pasted into a public sglang issue or PR, unedited but for secrets
and user names; its `index.json` entry names the thread, the family and the one line a person
reading it names as the root cause. An excerpt counts as

- **recognized** when an event of a catalog record (not an unknown error, not a consequence;
  of any severity: a root cause sglang logs as a warning is recognized by a warning event)
  is that root cause: the event's message is the root-cause line's text (behind whatever
  wrapper the line carries), or — for a line that is a traceback's source line, such as a bare
  `assert x is not None` — the event is the exception that traceback ends in;
- **with a fix** when that record's remediation lists at least one solution that says what to
  do: a pointer (the source at a release, a search of the issues) is counted apart, as
  **pointer only**.

A generic record that matched only a header (`Scheduler hit an exception:`) does not count:
the operator learns that something failed, not what.

The **precision check**: every event matched on a traceback's exception names, through its
record, the site that raised it; when the traceback shows sglang's frames, the record's file
(at some release that has it) must be the innermost of them. Each disagreement is counted (in
both splits: a wrong site is wrong wherever it is), the train split's printed, and `tests/test_field_precision.py` fails
on any.

Each split's misses are also counted by what the root cause became (`miss_kind`): an unknown
exception (with a frame in sglang's code or not), a record's warning or consequence, a
traceback pasted only up to its `raise`/`assert` line (no exception line), or no event of it —
aggregate figures, which tell what kind of rule would reach them.

    python bench/field_recall.py              # the tables per family, then every train miss
    python bench/field_recall.py --json F     # also the train outcomes as JSON
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from field_split import TEST_DIR, TRAIN_DIR  # noqa: E402

CORPUS = TRAIN_DIR

from matcher.catalog import Catalog, load_catalog  # noqa: E402
from matcher.engine import Engine  # noqa: E402
from matcher.pipeline import Pipeline  # noqa: E402
from matcher.redact import Redactor  # noqa: E402
from matcher.release import AUTO  # noqa: E402
from matcher.sinks.events import event_dict  # noqa: E402
from matcher.types import Chunk  # noqa: E402


@dataclass(frozen=True)
class Excerpt:
    path: Path
    url: str
    family: str
    sglang_version: str | None
    root_cause: str
    split: str = "train"


@dataclass(frozen=True)
class Outcome:
    file: str
    url: str
    family: str
    recognized: bool
    with_fix: bool
    pointer_only: bool
    pattern_id: str | None
    root_cause: str
    events: list[str]
    missed_as: str = ""  # for a miss: what the root cause became (`miss_kind`)


def corpus(root: Path = CORPUS, split: str = "train") -> list[Excerpt]:
    """Every excerpt of every `index.json` under `root`, checked as the tests check them."""
    out = []
    for index in sorted(root.rglob("index.json")):
        for entry in json.loads(index.read_text(encoding="utf-8")):
            path = index.parent / entry["file"]
            out.append(Excerpt(path, entry["url"], entry["family"], entry.get("sglang_version"),
                               entry["root_cause"], split))
    return out


# The words a generated record gives when no flag decides its check: where to read, what to
# search. They help a person dig; they do not say what to change.
_POINTER = re.compile(
    r"^(?:Read the source\b|Search sglang's issues\b|The check `.*` must hold for this code path"
    r"|sglang fails here when `)", re.DOTALL)


def is_pointer(solution: str) -> bool:
    """A solution that only points at the source or at an issue search."""
    return bool(_POINTER.match(solution.strip()))


_SPACE = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def is_root_cause(event: dict[str, Any], root_cause: str, *, specific: bool = False) -> bool:
    """The event of a record, and its matched exception is the excerpt's root-cause line
    (`specific`: the event's record is not a generic shape of the native vocabularies, such
    as any `thread '…' panicked at …`; only a specific one recognizes a Rust panic)."""
    if event.get("event") not in ("sglang_error", "sglang_warning") or event.get("role", "cause") != "cause":
        return False
    # The message's first line: the root-cause line is one line, a message may go on.
    message = _norm((event.get("message") or "").split("\n", 1)[0])
    line = _norm(root_cause)
    cls = event.get("error_class") or ""
    on_exception = bool(cls) and message.startswith(cls)
    panic = _panic_header(event)
    if panic is not None:
        # A Rust panic has no class: its header names the site, the line after it the failure
        # — one root cause either way, recognized by a record of that site (matched on the
        # header: `panicked at …/src/x.rs:463:40`) or of that message, not by the generic
        # panic record.
        return specific and (line in (panic, message) or (len(message) >= 8 and message in line))
    if event.get("traceback") and not on_exception:
        return False  # matched on a traceback's header: a failure, not which one
    if message and line and (message in line or line in message):
        return True
    # The message of an API error body (`matcher.api_error`) is matched, and shown, unescaped.
    unescaped = line.replace("\\'", "'").replace('\\"', '"')
    if message and unescaped != line and message in unescaped:
        return True
    if on_exception and ":" in message:  # `Class: message`: also the message alone
        text = message.split(":", 1)[1].strip()
        if len(text) >= 8 and text in line:
            return True
    # A traceback's source line (`assert …`, `raise …`, a kernel's `Assertion … failed.`): the
    # exception the traceback that prints it ends in.
    if not on_exception or _EXCEPTION_LINE.search(line):
        return False
    return any(line == _norm(t) for t in (event.get("traceback") or "").splitlines())


_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)\b(?::|$)")

# A Rust panic's header (`thread 'x' (7516) panicked at src/server.rs:25:27:`), as the matcher's
# framing opens a panic's record with it (`matcher.framing._PANIC`).
_PANIC_HEADER = re.compile(r"thread '[^'\n]*'(?: \(\d+\))? panicked at \S+:\d+:\d+:$")


def _panic_header(event: dict[str, Any]) -> str | None:
    """The header of the Rust panic the event was matched in; None for another record."""
    lines = (event.get("traceback") or "").splitlines()
    header = _norm(lines[0]) if lines else ""
    return header if _PANIC_HEADER.search(header) else None


@dataclass(frozen=True)
class Disagreement:
    file: str
    pattern_id: str
    message: str
    record_files: tuple[str, ...]
    raised_in: str


def _from_package(path: str) -> str:
    i = path.rfind("sglang/")
    return path[i:] if i >= 0 else path


def site_disagreement(event: dict[str, Any], catalog: Catalog) -> tuple[tuple[str, ...], str] | None:
    """(the record's files, the traceback's innermost sglang frame) when they disagree: the
    event is matched on its traceback's last exception, its record names an sglang file, and
    that traceback's innermost sglang frame is in none of the files the record has at any
    release. None when they agree or nothing can be compared."""
    from matcher.catalog.check import frame_text
    from matcher.frames import frames_by_exception, message_sites

    tb = event.get("traceback")
    cls = event.get("error_class") or ""
    message = event.get("message") or ""
    if not tb or not event.get("pattern_id") or not cls or not message.startswith(cls):
        return None
    record = _records(catalog).get(event["pattern_id"])
    if record is None or record.raised_in is not None or not record.file_path:
        return None
    files = {_from_package(record.file_path)}
    files.update(_from_package(loc[1]) for loc in record.sglang_locations if loc[1])
    if not any(f.startswith("sglang/") for f in files):
        return None
    framed = [r for r in frame_text(tb, "tb") if r.exceptions]
    if not framed:
        return None
    per_exception = frames_by_exception(framed[-1])
    shown = message_sites(per_exception[-1]) if per_exception else ()
    if not shown or files & set(shown):
        return None
    return tuple(sorted(files)), shown[0]


_BY_ID: dict[int, dict[str, Any]] = {}


def _records(catalog: Catalog) -> dict[str, Any]:
    kept = _BY_ID.get(id(catalog))
    if kept is None:
        kept = _BY_ID[id(catalog)] = {r.id: r for r in catalog.records}
    return kept


def scan(engine: Engine, catalog: Catalog, path: Path) -> list[dict[str, Any]]:
    """The events `sglang-matcher scan --format json PATH` prints, as dicts."""
    pipeline = Pipeline(engine, catalog_version=catalog.version, sglang_version=AUTO)
    data = path.read_bytes()
    events = pipeline.feed(Chunk(data, str(path), len(data))).events
    events += pipeline.end_of_source(str(path)) + pipeline.finish()
    redactor = Redactor()
    return [event_dict(e, redactor) for e in sorted(events, key=lambda e: e.offset)]


def score(excerpts: Iterable[Excerpt], catalog: Catalog,
          disagreements: list[Disagreement] | None = None) -> list[Outcome]:
    engine = Engine(catalog.records)
    generic = {r.id for r in catalog.records if r.error_type == "native"}
    outcomes = []
    for ex in excerpts:
        events = scan(engine, catalog, ex.path)
        if disagreements is not None:
            for e in events:
                found = site_disagreement(e, catalog)
                if found is not None:
                    disagreements.append(Disagreement(
                        ex.path.relative_to(ROOT / "tests" / "fixtures").as_posix(),
                        e["pattern_id"], (e.get("message") or "")[:160], *found))
        hit = next((e for e in events if is_root_cause(
            e, ex.root_cause, specific=e.get("pattern_id") not in generic)), None)
        solutions = (hit.get("remediation") or {}).get("solutions") or [] if hit else []
        fix = any(not is_pointer(s) for s in solutions)
        outcomes.append(Outcome(
            file=ex.path.relative_to(ROOT / "tests" / "fixtures").as_posix(), url=ex.url,
            family=ex.family, recognized=hit is not None, with_fix=fix,
            pointer_only=bool(solutions) and not fix,
            pattern_id=hit.get("pattern_id") if hit else None, root_cause=ex.root_cause,
            events=[f"{e.get('pattern_id') or 'unknown'}: {(e.get('message') or '')[:100]}"
                    for e in events],
            missed_as="" if hit else miss_kind(events, ex.root_cause)))
    return outcomes


# A traceback's source line under a frame that raises: `    raise X(…)`, `    assert …`.
_SOURCE_RAISE = re.compile(r"^\s+(?:raise|assert)\b")


def miss_kind(events: list[dict[str, Any]], root_cause: str) -> str:
    """What a missed root cause became: an unknown exception (with or without a frame in
    sglang's code), a record's warning or consequence, or nothing — only other events (a
    traceback's header, another failure), or no event at all. A root cause that is a frame's
    `raise …`/`assert …` source line is a traceback cut before its exception line."""
    if _SOURCE_RAISE.match(root_cause):
        return "traceback cut at its raise line"
    for e in events:
        as_cause = {**e, "event": "sglang_error", "role": "cause"}
        if not is_root_cause(as_cause, root_cause):
            continue
        if e.get("event") == "sglang_unknown_error":
            framed = (e.get("raised_at") or {}).get("path", "").startswith("sglang/")
            return "unknown exception, sglang frame" if framed else "unknown exception"
        return "a record's warning or consequence"
    return "other events only" if events else "no event"


def miss_table(outcomes: list[Outcome]) -> str:
    kinds: dict[str, int] = {}
    for o in outcomes:
        if o.missed_as:
            kinds[o.missed_as] = kinds.get(o.missed_as, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))


def table(outcomes: list[Outcome]) -> str:
    families = sorted({o.family for o in outcomes})
    rows = [("family", "excerpts", "recognized", "with a fix", "pointer only")]
    for fam in [*families, "all"]:
        group = [o for o in outcomes if fam in ("all", o.family)]
        n = len(group)
        rec = sum(o.recognized for o in group)
        fix = sum(o.with_fix for o in group)
        ptr = sum(o.pointer_only for o in group)
        rows.append((fam, str(n), f"{rec} ({100 * rec / n:.0f}%)", f"{fix} ({100 * fix / n:.0f}%)",
                     str(ptr)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def figures(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    """Per family and in all: excerpts, recognized, with a fix, pointer only."""
    out: dict[str, dict[str, int]] = {}
    for fam in [*sorted({o.family for o in outcomes}), "all"]:
        group = [o for o in outcomes if fam in ("all", o.family)]
        out[fam] = {"excerpts": len(group), "recognized": sum(o.recognized for o in group),
                    "with_fix": sum(o.with_fix for o in group),
                    "pointer_only": sum(o.pointer_only for o in group)}
    return out


def main(argv: list[str] | None = None) -> int:
    from matcher import cache

    cache.use(cache.default_cache_dir())  # as sglang-matcher does: warm starts
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="write every outcome as JSON here")
    ap.add_argument("--corpus", type=Path, default=CORPUS,
                    help="the train corpus (default: tests/fixtures/field)")
    ap.add_argument("--test-corpus", type=Path, default=TEST_DIR,
                    help="the test corpus: only its figures are printed")
    args = ap.parse_args(argv)
    catalog = load_catalog()
    wrong: list[Disagreement] = []
    outcomes = score(corpus(args.corpus), catalog, wrong)
    tested = score(corpus(args.test_corpus, "test"), catalog, wrong) \
        if args.test_corpus.is_dir() else []
    print(f"train split ({len(outcomes)} excerpts, {len({o.url for o in outcomes})} threads):")
    print(table(outcomes))
    print(f"missed as: {miss_table(outcomes)}")
    if tested:
        print(f"\ntest split, never read while writing records ({len(tested)} excerpts, "
              f"{len({o.url for o in tested})} threads):")
        print(table(tested))
        print(f"missed as: {miss_table(tested)}")
    misses = [o for o in outcomes if not o.with_fix]
    if misses:
        print("\ntrain: not recognized, or no fix:")
    for o in misses:
        said = "missed" if not o.recognized else \
            "recognized, a pointer only" if o.pointer_only else "recognized, no fix"
        print(f"- {o.file} ({o.family}, {said})"
              f"  {o.url}\n    root cause: {o.root_cause[:160]}")
        for e in o.events[:4]:
            print(f"    event: {e}")
    print(f"\nprecision: {len(wrong)} events name a site their traceback contradicts")
    for d in wrong:
        if not d.file.startswith("field/"):  # the test split: counted, never shown
            continue
        print(f"- {d.file}: {d.pattern_id} ({', '.join(d.record_files)}) but raised in "
              f"{d.raised_in}\n    {d.message}")
    if args.json:  # the train outcomes; the test split's as its figures alone
        summary = {"train": [asdict(o) for o in outcomes], "test": figures(tested)}
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
