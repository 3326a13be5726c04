"""One catalog record, as the matcher uses it: the seed schema v2 plus our extension fields.

The record as read stays in `raw`, unknown fields included, so that what we write back out
(`explain`, `catalog extract`) loses nothing another consumer of the schema relies on.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from matcher.catalog.pep440 import in_ranges
from matcher.types import pickled_as_arguments

Layer = Literal["generated", "curated", "user"]
LAYER_RANK: dict[str, int] = {"generated": 0, "curated": 1, "user": 2}
SEVERITIES = ("critical", "error", "warning", "info")
ROLES = ("cause", "consequence")


Location = tuple[str, str | None, int | None, str | None]


FIX_OPS = ("remove", "add", "set", "env", "install")
# The tag of a generated record whose `fixActions` its message states (`message_fix`).
STATED_TAG = "message-fix"
# errorType of a record bound to its exception class: matched only in the message of an
# exception of its `errorClass`, never in a plain line, a traceback's header or an error body.
# Such messages start at a record-start sign (`framing.RECORD_START_SIGNS`) or inside a record
# already open, so the class's name is the record's prefilter cover (`compile`), whatever its
# message's own literals are (Triton's `CompilationError: at 8:11:` and the kernel's source).
EXCEPTION = "exception"


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class FixAction:
    """One step of a way out (`fixActions`), applied to the launch command or its environment.

    `remove` a flag (and its value), `add` a value-less switch, `set` a flag's value (`one_of`:
    the allowed values, `range`: their range as text; a value in angle brackets is a
    placeholder the operator fills in), `env` a variable, `install` a pip requirement (in
    `value`).
    """

    op: str
    flag: str | None = None
    value: str | None = None
    aliases: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()
    range: str | None = None
    name: str | None = None  # env

    @property
    def placeholder(self) -> bool:
        """The value is for the operator to choose (`<a local model dir>`)."""
        return self.value is not None and self.value.startswith("<") and self.value.endswith(">")

    def describe(self) -> str:
        """`remove --radix-cache-backend`, `set --swa-full-tokens-ratio 0.8 (in (0, 1.0])`."""
        if self.op == "env":
            return f"set the environment variable {self.name}={self.value}"
        if self.op == "install":
            return f"install {self.value} (pip install '{self.value}')"
        if self.op in ("remove", "add"):
            return f"{self.op} {self.flag}"
        text = f"set {self.flag} {self.value}"
        if self.one_of:
            text += f" (one of {', '.join(self.one_of)})"
        if self.range:
            text += f" (in {self.range})"
        return text

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        for key, value in (("flag", self.flag), ("name", self.name), ("value", self.value),
                           ("aliases", list(self.aliases)), ("oneOf", list(self.one_of)),
                           ("range", self.range)):
            if value:
                out[key] = value
        return out


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Guard:
    """`guard`: when a generated record's site fails (`when`, a Python expression over the
    site's variables: an `if` test, an assert's test negated), the server arguments it reads,
    and, when no flag change is proven to make it false, why (`unfixed`). Written by `catalog
    extract` (`matcher.catalog.remedy`); `catalog stats` counts records by it."""

    when: str
    reads: tuple[str, ...] = ()
    unfixed: str | None = None


COMPUTED = "*"  # a raisedIn source no traceback prints: see `RaisedIn.computed`


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class RaisedIn:
    """`raisedIn`: the traceback frame that raises a record's exception, for messages that do
    not say what failed (a bare `AssertionError`, `KeyError: '<request id>'`).

    Each part that is set must agree with the frame: `path` is a suffix of the printed path at
    a `/` (`sglang/srt/managers/scheduler.py`), `function` the name after `, in `, `source` the
    line printed under the frame, its runs of whitespace made one space (by the loader, as
    `matcher.frames` does for the frame read from a log).
    """

    path: str | None = None
    function: str | None = None
    source: str | None = None

    def holds(self, path: str, function: str, source: str) -> bool:
        if self.path is not None and not _same_file(path, self.path):
            return False
        if self.function is not None and function != self.function:
            return False
        return self.source is None or self.source == source

    @property
    def computed(self) -> bool:
        """`{"source": "*"}`: no frame is named; the daemon decides at event time which
        exceptions are this record's (`matcher.changed_line`), and the engine never looks it up."""
        return self.source == COMPUTED and self.path is None and self.function is None

    @property
    def file_name(self) -> str | None:
        """The last part of `path`: what the engine looks frames up by."""
        return self.path.rsplit("/", 1)[-1] if self.path else None

    def label(self) -> str:
        """`sglang/srt/x.py:f: assert y` — how `explain` and lint name the frame."""
        return ": ".join(p for p in (self.path, self.function, self.source) if p)


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class CatalogRecord:
    id: str
    message_pattern: str
    layer: Layer
    origin: str  # the file it was read from
    index: int  # its position in that file
    slug: str = ""
    error_message: str | None = None
    error_class: str | None = None
    error_type: str | None = None
    severity: str = "error"
    role: str = "cause"
    file_path: str | None = None
    line_number: int | None = None
    github_url: str | None = None
    documentation: str = ""
    trigger_scenarios: str = ""
    common_situations: str = ""
    solutions: tuple[str, ...] = ()
    example_fix: str | None = None
    prevention_tips: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    # Releases where the message exists: versions (`"0.5.23"`) or inclusive ranges
    # (`"0.4.0..0.4.3.post2"`, PEP 440 order), as `catalog extract` writes them.
    sglang_versions: tuple[str, ...] = ()
    # What the record's message comes from when it is not sglang's own Python: the package
    # (`sourcePackage`: `flashinfer-python`, `sglang-router`, `cuda-runtime` …), that package's
    # versions as `sglangVersions` ranges are written (`sourceVersions`), and the generator in
    # `matcher.catalog` that made the record (`generator`). Empty: sglang's source, or unsaid.
    source_package: str = ""
    source_versions: tuple[str, ...] = ()
    generator: str = ""
    # `alsoMadeBy`: who else makes this very message (`python` for the interpreter's own words,
    # a dependency's package): matched only where a traceback's frame is at the record's site
    # (`matcher.catalog.lookalike`).
    also_made_by: tuple[str, ...] = ()
    # Where the site was in releases whose file or line differ from the top-level (newest) one,
    # packed (`pack_locations`); read them as `sglang_locations`.
    locations: str = ""
    examples_match: tuple[str, ...] = ()
    examples_no_match: tuple[str, ...] = ()
    literal_length: int = 0
    raised_in: RaisedIn | None = None  # set: matched only at that frame (`matcher.frames`)
    # `consequenceOf`: ids of records this one follows as part of the same failure (itself
    # included: a message printed once per GPU thread); see `matcher.aggregate`.
    consequence_of: tuple[str, ...] = ()
    # `fixActions`: the ways out, each a sequence of steps (`FixAction`), first the preferred.
    fix_actions: tuple[tuple[FixAction, ...], ...] = ()
    guard: Guard | None = None
    # The solutions are the words `remedy.words` derives from the record itself (a generated
    # record no flag fixes): not kept, made again when asked for (`how_to_fix`): kept for every
    # generated record, they would be a large part of the parsed catalog.
    words: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def peek(self, name: str) -> Any:
        """A field, read as a table of every record reads it: a stored record
        (`precompiled.StoredRecord`) gives it without setting its fields, which a scan reads
        of the few records it meets."""
        return getattr(self, name)

    @property
    def sglang_locations(self) -> tuple[Location, ...]:
        """(range, filePath, lineNumber, githubUrl) per release range whose site differs."""
        return unpack_locations(self.locations)

    @property
    def where(self) -> str:
        """`file: record N (id X)` — how errors and `explain` name this record."""
        return f"{self.origin}: record {self.index} (id {self.id})"

    @property
    def class_name(self) -> str | None:
        """The last dotted part of `errorClass`, the part compared with a log's class."""
        if not self.error_class:
            return None
        return self.error_class.rsplit(".", 1)[-1]

    @property
    def bound_class(self) -> str | None:
        """The class this record is bound to (errorType `exception`), its last dotted part."""
        return self.class_name if self.error_type == EXCEPTION else None

    def in_version(self, version: str) -> bool:
        """The message exists in this sglang release (True when the record names none)."""
        if not self.sglang_versions:
            return True
        return in_ranges(version, self.sglang_versions)

    def location_for(self, version: str | None) -> tuple[str | None, int | None, str | None]:
        """(filePath, lineNumber, githubUrl) in this release: the location of the range that
        holds it, else the top-level one (the newest release's)."""
        if version is not None and self.sglang_locations:
            for versions, file_path, line_number, github_url in self.sglang_locations:
                if in_ranges(version, (versions,)):
                    return file_path, line_number, github_url
        return self.file_path, self.line_number, self.github_url

    @property
    def how_to_fix(self) -> tuple[str, ...]:
        """The solutions: what to do, as written. A generated record whose check no flag
        decides has none: its derived words point at the source and the issues
        (`references`)."""
        return self.solutions

    @property
    def references(self) -> tuple[str, ...]:
        """Where to read more — the check at this release, a search of sglang's issues —
        derived again from the record (`words`); not a way out."""
        if not self.words:
            return ()
        return _derived_words(self.error_type, self.github_url, self.error_message,
                              self.guard.when if self.guard is not None else None)

    @property
    def fix_kind(self) -> str:
        """How this record says to fix it: `flags` (fixActions), `stated` (fixActions its
        message states, `message_fix`: no check proves them), `words` (solutions only),
        `unevaluable` (reads server arguments, no fix proven: words only), or `none`."""
        if self.fix_actions:
            return "stated" if STATED_TAG in self.tags else "flags"
        if self.guard is not None and self.guard.reads:
            return "unevaluable"
        return "words" if self.solutions or self.words else "none"

    def remediation(self) -> dict[str, Any]:
        return {
            "documentation": self.documentation,
            "solutions": list(self.how_to_fix),
            **({"references": list(self.references)} if self.words else {}),
            "example_fix": self.example_fix,
            "url": self.github_url,
            **({"fix_actions": [[a.as_dict() for a in way] for way in self.fix_actions]}
               if self.fix_actions else {}),
        }


_FIELDS = tuple(f.name for f in fields(CatalogRecord))


@functools.lru_cache(maxsize=1024)
def _derived_words(error_type: str | None, github_url: str | None, error_message: str | None,
                   when: str | None) -> tuple[str, ...]:
    """`how_to_fix` of a words-only record, made once per record while it keeps firing (an
    event of it needs them each time, and making them quotes an issue-search URL)."""
    from matcher.catalog.wording import words

    return tuple(words({"errorType": error_type, "githubUrl": github_url,
                        "errorMessage": error_message}, when))


def _same_file(printed: str, suffix: str) -> bool:
    """The printed path ends with `suffix` at a `/`; a path a paste cut to `.../managers/x.py`
    (or `…/`) agrees when what is left of it ends `suffix`."""
    if printed == suffix or printed.endswith("/" + suffix):
        return True
    rest = printed.lstrip(".…")
    return rest != printed and rest.startswith("/") and len(rest) > 1 \
        and ("/" + suffix).endswith(rest)


# --- sglangLocations, packed ------------------------------------------------------------------
# The merged generated catalog holds tens of thousands of locations. As tuples of four objects
# each they would cost the daemon memory and start time; they are read only when an event is
# written. Packed, a location is one line of text: `range\tpath\tline\turl`, where an empty path
# repeats the previous line's, an empty url is the release's GitHub link for that path and line
# (what `catalog extract` writes), and NUL stands for null. Text that cannot be packed this way
# (a tab, newline or NUL in a value) is kept as JSON.

_NULL = "\x00"
_GITHUB = "https://github.com/sgl-project/sglang/blob/v{release}/{path}#L{line}"


def _release_url(versions: str, path: str | None, line: int | None) -> str | None:
    if path is None or line is None:
        return None
    return _GITHUB.format(release=versions.rsplit("..", 1)[-1], path=path, line=line)


def pack_locations(locations: Iterable[Location]) -> str:
    """The packed text of `sglangLocations` entries; `unpack_locations` gives them back."""
    items: list[Location] = [(v, p, n, u) for v, p, n, u in locations]
    if not items:
        return ""
    if any(isinstance(v, str) and ("\t" in v or "\n" in v or _NULL in v or v == "")
           for item in items for v in (item[0], item[1], item[3])) or items[0][0].startswith("["):
        return json.dumps(items)  # starts with "[": never a packed line
    lines = []
    previous: str | None = None
    for versions, path, line, url in items:
        path_text = _NULL if path is None else ("" if path == previous else path)
        url_text = (_NULL if url is None
                    else "" if url == _release_url(versions, path, line) else url)
        lines.append(f"{versions}\t{path_text}\t{'' if line is None else line}\t{url_text}")
        previous = path
    return "\n".join(lines)


def unpack_locations(text: str) -> tuple[Location, ...]:
    if not text:
        return ()
    if text.startswith("["):
        return tuple((v, p, n, u) for v, p, n, u in json.loads(text))
    out: list[Location] = []
    previous: str | None = None
    for row in text.split("\n"):
        versions, path_text, line_text, url_text = row.split("\t")
        path = None if path_text == _NULL else (previous if path_text == "" else path_text)
        line = int(line_text) if line_text else None
        url = (None if url_text == _NULL
               else _release_url(versions, path, line) if url_text == "" else url_text)
        out.append((versions, path, line, url))
        previous = path
    return tuple(out)
