"""`catalog test`: every record's own examples prove it, against the whole compiled catalog.

A `match` example must be recognized by its record — not merely matched, but chosen, so an
example taken by a more specific record fails; the record decided at event time
(`sglang-changed-line`) needs a traceback no record takes, raised at a line a later release
dropped, and the family of messages that say what to install (`message-states-install`) an
exception no record takes whose message names an install. A `noMatch` example must not be
matched by the
record at all. Examples are framed exactly as a log would be, so a traceback example is tested
the way the daemon will see it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matcher.catalog import stated_install
from matcher.catalog.line_history import History
from matcher.catalog.schema import CatalogRecord
from matcher.engine import Engine, of_a_dependency
from matcher.frames import raising_frame
from matcher.framing import Framer
from matcher.types import Line, Record


@dataclass(frozen=True, slots=True)
class ExampleFailure:
    record: CatalogRecord
    kind: str  # "match" | "noMatch" | "none"
    example: str
    problem: str

    def __str__(self) -> str:
        first = self.example.strip().splitlines()[-1] if self.example.strip() else ""
        return f"{self.record.where}: examples.{self.kind}: {self.problem}\n    {first[:200]}"


def frame_text(text: str, source: str = "example") -> list[Record]:
    """Frame a log excerpt as the daemon would frame the same lines."""
    framer = Framer()
    records: list[Record] = []
    offset = 0
    for raw in text.splitlines():
        end = offset + len(raw.encode()) + 1
        records.extend(framer.feed(Line(raw, source, offset, end)))
        offset = end
    records.extend(framer.finish())
    return records


def check_examples(
    engine: Engine, records: Sequence[CatalogRecord], *, require_examples: bool = False
) -> list[ExampleFailure]:
    failures: list[ExampleFailure] = []
    for rec in records:
        if require_examples and not rec.examples_match:
            failures.append(ExampleFailure(rec, "none", "", "no examples.match lines"))
        computed = rec.raised_in is not None and rec.raised_in.computed
        for example in rec.examples_match:
            if computed:
                problem = _computed_example_problem(engine, rec, example)
                if problem:
                    failures.append(ExampleFailure(rec, "match", example, problem))
                continue
            framed = frame_text(example)
            winners = [m for m in (engine.match(r) for r in framed) if m is not None]
            if any(m.pattern.id == rec.id for m in winners):
                continue
            if winners:
                taken = ", ".join(sorted({f"{m.pattern.id} ({m.pattern.slug})" for m in winners}))
                problem = f"taken by a more specific record: {taken}"
            else:
                problem = "not matched by this record"
            failures.append(ExampleFailure(rec, "match", example, problem))
        for example in rec.examples_no_match:
            for r in frame_text(example):
                if any(m.pattern.id == rec.id for m in engine.match_all(r)):
                    failures.append(ExampleFailure(rec, "noMatch", example, "matched, must not be"))
                    break
    return failures


def _computed_example_problem(engine: Engine, rec: CatalogRecord, text: str) -> str:
    """Why an example of a record decided at event time is not one ("" when it is)."""
    if rec.id == stated_install.FAMILY_RECORD:
        if _stated_install_example(engine, text):
            return ""
        return "no exception that no record takes whose message names what to install"
    if _changed_line_example(engine, text):
        return ""
    return "no traceback that no record takes, raised at an sglang line a later release dropped"


def _stated_install_example(engine: Engine, text: str) -> bool:
    """An example of `message-states-install` (`matcher.install_stated`): an exception no
    record takes, of a class and with words that make it the family's."""
    for record in frame_text(text):
        if record.exceptions and engine.match(record) is None:
            last = record.exceptions[-1]
            if stated_install.of_the_family(last.error_class, last.message):
                return True
    return False


def _changed_line_example(engine: Engine, text: str) -> bool:
    """An example of the record decided at event time (`matcher.changed_line`, the only one:
    `raisedIn.source` `*`): a traceback no record takes (or only a dependency's record with no
    way to fix it, which the event keeps), raised in sglang's code at a line the line history
    says a later release dropped."""
    history = History.load()
    for record in frame_text(text):
        frame = raising_frame(record) if record.kind == "traceback" else None
        if frame is None or not frame.package_path.startswith("sglang/"):
            continue
        m = engine.match(record)
        open_to = m is None or (of_a_dependency(m.pattern) and not m.pattern.solutions)
        if open_to and history.lone_run(frame.package_path, frame.source):
            return True
    return False
