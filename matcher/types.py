"""The values that cross pipeline stages, and the seams between them.

Each stage takes one of these and hands the next one on; none of them knows where its input came
from or where its output goes. They are frozen so that a value seen by a sink is the value the
framer made, and slotted because millions of lines pass through them.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from matcher.catalog.schema import CatalogRecord
    from matcher.source.checkpoint import CheckpointState

Stream = Literal["stdout", "stderr", ""]

_T = TypeVar("_T", bound=type)


def pickled_as_arguments(cls: _T) -> _T:
    """Pickle a slotted dataclass as its constructor's arguments. The default restores a slotted
    dataclass field by field through `dataclasses.fields`, two to three times slower: `scan -j`
    hands every record from a worker to its parent and every event back for its JSON, and the
    parsed-catalog cache holds 30,000 catalog records."""
    values = operator.attrgetter(*(f.name for f in fields(cls)))

    def __reduce__(self: object) -> tuple[type, tuple[Any, ...]]:
        return cls, values(self)

    setattr(cls, "__reduce__", __reduce__)  # noqa: B010 - a method set on a made class
    return cls


@dataclass(frozen=True, slots=True)
class Chunk:
    """Bytes read from one source; `end_offset` is the source position just after `data`."""

    data: bytes
    source: str
    end_offset: int


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Line:
    """One log line, decoded, without its newline.

    `offset` is where the line starts in its source and `end_offset` where the next one starts:
    a checkpoint after this line is `end_offset`. `ts` is the container runtime's timestamp
    (CRI, docker) when the format carries one; sglang's own timestamp is parsed by the framer.
    """

    text: str
    source: str
    offset: int
    end_offset: int
    stream: Stream = ""
    ts: str | None = None
    truncated: bool = False
    lineno: int = 0  # 1-based within what this reader saw; 0 when unknown (resumed mid-file)


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class ExceptionLine:
    """One `Class: message` line of a traceback (or a lone line of that shape)."""

    error_class: str
    message: str


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Record:
    """A unit of meaning: one plain log line, or one whole Python traceback.

    `exceptions` lists the traceback's `Class: message` lines in the order printed: for chained
    exceptions the first is the original cause and the last the one that escaped. `header` is
    the text before `Traceback (most recent call last):` on the line that opened it (for
    example `Scheduler hit an exception:`), or the whole message of a plain line.
    """

    kind: Literal["line", "traceback"]
    source: str
    offset: int
    end_offset: int
    header: str
    lines: tuple[str, ...]
    exceptions: tuple[ExceptionLine, ...] = ()
    log_ts: str | None = None
    ranks: tuple[str, ...] = ()
    stream: Stream = ""
    truncated: bool = False
    lineno: int = 0
    level: str | None = None  # the level word a wrapper gave the line (`wrappers.unwrap`)

    @property
    def rank_key(self) -> str:
        return " ".join(self.ranks)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True, slots=True)
class Match:
    """A record recognized by one catalog record.

    `target` is the exception line or text the pattern was found in; `captures` holds the
    pattern's groups by name (`arg1`, `arg2`, … for unnamed ones).
    """

    pattern: CatalogRecord
    captures: dict[str, str]
    record: Record
    error_class: str
    message: str
    on_header: bool = False
    cut: bool = False  # the text ended inside the pattern, after its head (`Engine`)


# `Event.error_class` when neither the catalog record nor the log names a class (a plain line
# such as `NCCL WARN …`, a record without `errorClass`): never empty, in an event or a label.
UNCLASSIFIED = "UnclassifiedError"
# An event's severity, most severe first: `scan` lists by it, `min_severity` filters by it.
SEVERITY_RANK = {"critical": 0, "error": 1, "warning": 2, "info": 3}


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Event:
    """What an operator sees: one real occurrence of a failure, possibly seen on several ranks.

    `event` follows `severity` (docs/events.md): `sglang_error` is a known failure of
    severity critical or error, `sglang_warning` a known message below that (warning, info),
    `sglang_unknown_error` an exception no record knows.
    """

    event: Literal["sglang_error", "sglang_warning", "sglang_unknown_error"]
    error_class: str
    message: str
    source: str
    severity: str
    log_ts: str | None
    observed_ts: float
    ranks: tuple[str, ...]
    occurrences: int
    traceback: str | None
    pattern_id: str | None = None
    role: str = "cause"
    captures: dict[str, str] = field(default_factory=dict)
    remediation: dict[str, Any] | None = None
    fingerprint: str | None = None
    catalog_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    consequences: tuple[str, ...] = ()
    offset: int = 0
    lineno: int = 0
    suppressed: int = 0  # repeats not printed since the last printed event of this error
    quiet: bool = False  # a repeat within the rate limit: counted, not printed
    sglang_version: str | None = None  # the release (or range) that wrote it, when known
    fixed_in: FixedIn | None = None  # a later release no longer has the message
    raised_at: RaisedAt | None = None  # the frame that raised it, as the traceback prints it


@dataclass(frozen=True, slots=True)
class FixedIn:
    """A message that a later release no longer has: the release that wrote the log is known,
    and its record's release range ends before the newest release the catalog knows — the
    check was changed or removed in `release`, so upgrading to it is a way out."""

    release: str  # the first release without the message
    last: str  # the last release with it (the end of the range that holds the log's release)
    compare_url: str | None = None  # the source's changes between the two, on GitHub
    line: str | None = None  # set: the source line that raised is what changed, not a message

    def solution(self) -> str:
        where = f" (the changes: {self.compare_url})" if self.compare_url else ""
        if self.line is not None:
            return (f"Upgrade sglang to {self.release} or later: the line that raised, "
                    f"`{self.line}`, is not in that file in {self.release} (last in {self.last}): "
                    f"the code there was changed{where}. Whether the change fixes this failure "
                    f"is not known until it runs on {self.release}; if it still fails there, "
                    "report it with this traceback.")
        return (f"Upgrade sglang to {self.release} or later: this message is not in "
                f"{self.release} (last in {self.last}), the check that prints it was changed or "
                f"removed there{where}. If it was only reworded, the same condition may still "
                "fail with other words.")

    def as_dict(self) -> dict[str, str | None]:
        out = {"release": self.release, "last_release": self.last,
               "compare_url": self.compare_url}
        if self.line is not None:
            out["changed_line"] = self.line
        return out


@dataclass(frozen=True, slots=True)
class RaisedAt:
    """Where the exception was raised, read from the log's own traceback: the innermost frame
    in sglang's code, else the innermost frame. It is the log's word, not a catalog record's,
    so it holds whatever raised the exception — sglang's own check, or Python itself (an
    attribute read, an index) on a line of sglang's."""

    path: str  # from `sglang/` on for sglang's files; as printed for others
    line: int
    function: str  # "" when the traceback does not print it
    source_line: str  # the source line printed under the frame; "" when none is
    url: str | None = None  # the line on GitHub, when the release that wrote the log is known

    def as_dict(self) -> dict[str, str | int | None]:
        return {"path": self.path, "line": self.line, "function": self.function,
                "source_line": self.source_line, "url": self.url}


@dataclass(frozen=True, slots=True)
class Fed:
    """One step of the pipeline: the events it made, and what it counted while making them.

    The counts travel with the events so that no caller has to diff the pipeline's totals
    before and after a step to know what this step read."""

    events: list[Event]
    lines: int = 0
    truncated: int = 0  # lines cut at `max_line_bytes`
    malformed: int = 0  # lines not in their source's container format (read as plain text)


@dataclass(frozen=True, slots=True)
class Batch:
    """Events on their way to the sinks.

    `events` holds every event, repeats within the rate limit included (metrics count them);
    `printed` those not quiet, and `dicts` their emitted form, redacted once for every sink."""

    events: tuple[Event, ...]
    printed: tuple[Event, ...]
    dicts: tuple[dict[str, Any], ...]


class Intake(Protocol):
    """What a `Source` hands its input to: the daemon, which feeds the pipeline and passes
    the events it makes to the sinks. Sources never see the pipeline or the sinks."""

    def chunk(self, chunk: Chunk, now: float) -> Fed: ...

    def lines(self, source: str, lines: list[Line], now: float) -> Fed: ...

    def end(self, source: str, now: float) -> None: ...

    def flush_partial(self, source: str, now: float) -> None: ...

    def checkpoint_offset(self, source: str) -> int | None: ...

    def partial_line_start(self, source: str) -> int | None: ...


class Source(Protocol):
    """Log input: a set of files across rotation, stdin, or one journal unit.

    `read` takes one bounded turn (so one busy source cannot starve the others) and says
    whether it read anything; `save` writes its positions — the ones `Intake.checkpoint_offset`
    vouches for — into the checkpoint state and says whether they moved; `finished` is true
    once it can give nothing more (stdin at EOF); `close` releases it (after the final save:
    draining is reading until `read` says nothing was left).
    """

    name: str

    def read(self, now: float, intake: Intake) -> bool: ...

    def save(self, state: CheckpointState, intake: Intake, wall: float) -> bool: ...

    @property
    def finished(self) -> bool: ...

    def close(self) -> None: ...


class Sink(Protocol):
    """Event output: stdout, the events file, the `/events` ring, the metrics, the webhook, the
    OpenTelemetry logs (OTLP).

    `emit` hands a batch on; `flush` makes what was emitted durable (the daemon flushes every
    sink that `holds_checkpoint` before it saves read positions, so a position is never saved
    ahead of the events of the lines before it); `close` flushes and releases."""

    name: str
    holds_checkpoint: bool

    def emit(self, batch: Batch) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> object: ...  # what a sink says of its closing is its own (the webhook:
    #                                 how many it could not send)
