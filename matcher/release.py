"""Which sglang release wrote a log: set by the operator, or learned from the log itself.

sglang does not print its version where a log would show it. From 0.4 to 0.5.23 the server's
start-up prints `server_args=…` without one, and the only version lines are the `sglang version`
command's (`sglang version: 0.5.23`) and the `/get_server_info` endpoint's — neither is in the
server's log. (Read in the source of the releases; the fixtures' real launch logs agree.)

What a log does show is tracebacks, and a traceback names the file and line that raised. The
catalog knows, per release range, where each message is raised (`sglangLocations`), so the
raising frame says which releases can have written the line; and a message that exists only in
some releases says the same, more coarsely. Each source (one log file, one journal) keeps what
its failures have taught it, intersected; evidence that contradicts it (an upgraded server
writing to the same file) replaces it. A range that reaches the newest (or oldest) release the
catalog knows stays open on that side: a release newer than the catalog may raise the same line.

Nothing here reads files or clocks: records, matches and catalog records in, sets of releases out.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from matcher import frames
from matcher.catalog.pep440 import parse_range, version_key
from matcher.catalog.schema import CatalogRecord
from matcher.types import FixedIn, Match, RaisedAt, Record

if TYPE_CHECKING:
    from matcher.engine import Engine

COMPARE = "https://github.com/sgl-project/sglang/compare"
BLOB = "https://github.com/sgl-project/sglang/blob"


def source_url(version: str, package_path: str, line: int) -> str:
    """The line `package_path:line` (`sglang/srt/…`, as a traceback's frame names it) of
    release `version` on GitHub, where the package lives under `python/`."""
    return f"{BLOB}/v{version}/python/{package_path}#L{line}"

# A source link into sglang's tree at one release (`source_url`, a record's `githubUrl`).
_BLOB_LINE = re.compile(re.escape(BLOB) + r"/v(?P<release>[^/]+)/python/(?P<path>sglang/[^#]+)#L\d+")
# A source tree unpacked from a release's archive is named after it:
# `/hy-tmp/sglang-0.4.7/python/sglang/srt/managers/scheduler.py`.
_RELEASE_DIR = re.compile(r"/sglang-(\d+(?:\.\d+)+(?:\.post\d+)?)/(?:python/)?sglang/")


def agreeing_url(url: str | None, at: str, raised: RaisedAt | None) -> str | None:
    """A source link for a log written by release `at`: a link into another release's copy of
    the file the traceback's raising frame is in becomes that frame's line at `at` — the link
    then shows what the log shows, not what the file holds at a release the log did not run."""
    m = _BLOB_LINE.fullmatch(url or "")
    if m is None or not at or m["release"] == at or raised is None or raised.path != m["path"]:
        return url
    return source_url(at, raised.path, raised.line)


def release_in_paths(record: Record) -> str | None:
    """The release a traceback's frame paths name (a tree unpacked from its archive), if any."""
    for frame in frames.all_frames(record):
        m = _RELEASE_DIR.search(frame.path)
        if m is not None:
            return m[1]
    return None

AUTO = "auto"
UNNAMED = ("all", "none", "installed")  # settings that name no release for the events


def catalog_version_setting(setting: str) -> str:
    """What the catalog loader is asked for: "auto" learns per log, so it loads every release."""
    return "all" if setting == AUTO else setting
Key = tuple[tuple[int, str], ...]
_LOW: Key = ()  # below every version
_HIGH: Key = ((1 << 62, ""),)  # above every version


@dataclass(frozen=True, slots=True)
class Span:
    """Releases from `lo` to `hi`, inclusive; an empty name is open on that side."""

    lo: str
    hi: str

    @property
    def keys(self) -> tuple[Key, Key]:
        return (version_key(self.lo) if self.lo else _LOW,
                version_key(self.hi) if self.hi else _HIGH)

    def label(self) -> str:
        if self.lo and self.lo == self.hi:
            return self.lo
        return f"{self.lo}..{self.hi}"


@dataclass(frozen=True, slots=True)
class Releases:
    """A set of sglang releases as disjoint spans, oldest first."""

    spans: tuple[Span, ...]

    @classmethod
    def of(cls, ranges: Iterable[str], *, oldest: str = "", newest: str = "") -> Releases:
        """From catalog ranges (`"0.4.0..0.4.9"`, `"0.5.2"`); a bound equal to the catalog's
        `oldest`/`newest` release is left open."""
        spans = []
        for text in ranges:
            lo, sep, hi = text.partition("..")  # "A", "A..B", or open: "A..", "..B"
            if not sep:
                hi = lo
            spans.append(Span("" if lo == oldest else lo, "" if hi == newest else hi))
        return cls(tuple(sorted(spans, key=lambda s: s.keys)))

    def intersect(self, other: Releases) -> Releases:
        out = []
        for a in self.spans:
            for b in other.spans:
                (alo, ahi), (blo, bhi) = a.keys, b.keys
                lo = a.lo if alo >= blo else b.lo
                hi = a.hi if ahi <= bhi else b.hi
                lo_k = max(alo, blo)
                hi_k = min(ahi, bhi)
                if lo_k <= hi_k:
                    out.append(Span(lo, hi))
        return Releases(tuple(sorted(set(out), key=lambda s: s.keys)))

    def __bool__(self) -> bool:
        return bool(self.spans)

    def contains(self, version: str) -> bool:
        k = version_key(version)
        return any(lo <= k <= hi for lo, hi in (s.keys for s in self.spans))

    def newest(self) -> str:
        """The newest release named (empty when the set is open above)."""
        return self.spans[-1].hi if self.spans else ""

    def label(self) -> str:
        """`0.5.23`, `0.5.2..0.5.4`, `0.5.20..` (that or newer), `..0.4.9`; empty when the set
        says nothing (every release)."""
        if self.spans == (Span("", ""),):
            return ""
        return ", ".join(s.label() for s in self.spans)


def _suffix(file_path: str) -> str:
    """`python/sglang/srt/x.py` → `sglang/srt/x.py`: how an installed tree ends."""
    i = file_path.find("sglang/")
    return file_path[i:] if i >= 0 else file_path


def raising_file(record: Record) -> str | None:
    """The sglang file of a traceback's innermost sglang frame (`sglang/srt/x.py`), if any."""
    frame = frames.raising_frame(record)
    return frame.package_path if frame is not None and frame.ours else None


def by_raising_file(record: Record, matches: list[Match]) -> list[Match]:
    """Among the records of the best match's layer (not curated), those raised in the file
    the traceback shows raising come first: the same message raised in two places (moved between releases, or two sites) is
    told apart by where it was raised, not by which record is more specific."""
    if len(matches) < 2 or matches[0].pattern.layer == "curated":
        return matches  # a curated record's remediation wins wherever it says it is raised
    best = matches[0]
    if best.on_header:
        return matches  # no exception line matched: nothing to tell apart
    where = raising_file(record)  # the frames are read only when there is a choice to make
    if where is None:
        return matches
    # Only records of the same exception line compete: a generic record of the traceback's
    # header (`Scheduler hit an exception:`, raised in scheduler.py) must not pass over the
    # exception's own record because the traceback passes through its file.
    layer = best.pattern.layer  # a user record is never passed over for another layer's
    first = [m for m in matches
             if m.pattern.layer == layer and not m.on_header and m.message == best.message
             and _suffix(m.pattern.file_path or "") == where]
    return first + [m for m in matches if m not in first] if first else matches


def table_of(engine: Engine) -> ReleaseTable:
    """`engine`'s release table, made at its first use (a scan under "all", or a worker of
    `matcher.parallel`, never needs one) and kept as long as the engine: every pipeline reading
    with it shares the table (0.1 s to make with the full catalog)."""
    table = _TABLES.get(engine)
    if table is None:
        table = _TABLES[engine] = ReleaseTable(engine.records)
    return table


class ReleaseTable:
    """What the catalog says about releases: the range it covers, each record's ranges."""

    def __init__(self, records: Sequence[CatalogRecord]) -> None:
        # Distinct ranges first: 30,000 records name a few hundred, and `peek` leaves a stored
        # record's fields unset (`CatalogRecord.peek`).
        ranges = {text for r in records for text in r.peek("sglang_versions")}
        keyed = [(version_key(v), v) for v in {v for t in ranges for v in t.split("..") if v}]
        self.oldest = min(keyed)[1] if keyed else ""
        self.newest = max(keyed)[1] if keyed else ""
        # The releases the ranges name, oldest first: a range that ends at B ends because the
        # next release, the first bound after B, does not hold the record.
        self._named = sorted(keyed)
        self._records = records
        self._by_template: dict[str, list[CatalogRecord]] | None = None

    def releases(self, pattern: CatalogRecord, *, exact: bool = False) -> Releases | None:
        """Where the message exists (None: the record says nothing about releases). A curated
        record's `sglangVersions` say where its examples were seen, not where its message is
        raised: no claim about other releases. Not `exact`: open at the catalog's ends."""
        if not pattern.sglang_versions or pattern.layer == "curated":
            return None
        if exact:  # a release the operator named: compared with the ranges as written
            return Releases.of(pattern.sglang_versions)
        return Releases.of(pattern.sglang_versions, oldest=self.oldest, newest=self.newest)

    def evidence(self, match: Match) -> Releases | None:
        """The releases that can have written this match: those whose raise site is the frame
        the traceback shows raising, else those where the message exists; the one release its
        frames' paths name, when they name one the catalog knows (`release_in_paths`)."""
        named = release_in_paths(match.record) if match.record.kind == "traceback" else None
        if named is not None and any(v == named for _, v in self._named):
            return Releases.of((named,))
        pattern = match.pattern
        known = self.releases(pattern)
        if known is None:
            return None
        suffix = _suffix(pattern.file_path or "")
        raised = [f.line for f in frames.all_frames(match.record)
                  if suffix and f.path.endswith(suffix)]
        if not raised:
            return known
        line = raised[-1]  # the innermost frame in the raising file
        # Where the raise site sits in each release range (`sglangLocations`; the top-level
        # location is the newest release's, for the ranges no location entry names).
        located = getattr(pattern, "sglang_locations", ()) or ()
        same = [versions for versions, file_path, line_number, _url in located
                if line_number == line and suffix == _suffix(file_path or "")]
        elsewhere = {versions for versions, *_ in located}
        if pattern.line_number == line:
            same += [text for text in pattern.sglang_versions
                     if not any(Releases.of((v,)).intersect(Releases.of((text,)))
                                for v in elsewhere)]
        if not same:
            return known  # a release the catalog has not seen, or a patched tree
        return Releases.of(same, oldest=self.oldest, newest=self.newest).intersect(known)


    def fixed_in(self, pattern: CatalogRecord, known: Releases) -> FixedIn | None:
        """The release that no longer has this generated record's message, when the log's
        release (`known`) is in a range of the record that ends before the newest release —
        and the message is not raised elsewhere in that release (moved to another module), nor
        back in a later one. None otherwise."""
        if pattern.layer != "generated" or not pattern.sglang_versions or not known \
                or not pattern.peek("error_message"):
            return None
        wanted = [s.keys for s in known.spans]
        texts = list(pattern.sglang_versions)
        # The range that holds every release the log can be (open below at the catalog's
        # oldest release, as `releases` reads it: a log learned from this record alone is).
        holding = [t for t in texts
                   if [s.keys for s in known.intersect(
                       Releases.of((t,), oldest=self.oldest)).spans] == wanted]
        if not holding or holding[-1] != texts[-1]:
            return None  # not in one range, or the message comes back later
        last = parse_range(holding[-1])[1]
        after = next((v for k, v in self._named if k > version_key(last)), None)
        if after is None:
            return None
        for other in self._kin(pattern):
            if other is not pattern and other.in_version(after):
                return None  # the same message or check goes on there (moved, or reworded)
        file_path = pattern.location_for(last)[0] or ""
        anchor = f"#diff-{hashlib.sha256(file_path.encode()).hexdigest()}" if file_path else ""
        return FixedIn(after, last, f"{COMPARE}/v{last}...v{after}{anchor}")

    def _kin(self, pattern: CatalogRecord) -> list[CatalogRecord]:
        """The generated records that say the same thing: the same message (moved to another
        module), the same head (the text before its first value, reworded after it), or the
        same check in the same file (`guard.when`: the message reworded as a whole)."""
        if self._by_template is None:  # built once, on the first event that needs it
            table: dict[str, list[CatalogRecord]] = {}
            for r in self._records:
                if r.layer == "generated":
                    for key in _kin_keys(r):
                        table.setdefault(key, []).append(r)
            self._by_template = table
        return [r for key in _kin_keys(pattern) for r in self._by_template.get(key, ())]


def _kin_keys(record: CatalogRecord) -> list[str]:
    from matcher.catalog.wording import stable_head

    message = record.peek("error_message")
    if not message:
        return []
    keys = [f"message\n{message}"]
    head = stable_head(message)
    if head:
        keys.append(f"head\n{record.class_name}\n{head}")
    guard = record.peek("guard")
    if guard is not None and guard.when:
        keys.append(f"check\n{_suffix(record.peek('file_path') or '')}\n{guard.when}")
    # The same function of the same file still raising (or logging) the same class: the
    # message was reworded there (`Pyspy failed to dump PID {pid}` → `Pyspy failed ({cmd})`).
    # The end of its longest literal run, of the same class: the message moved and its start
    # was reworded (`self.cur_batch.batch_size()=` → `scheduler.cur_batch.batch_size()=`).
    runs = [r.strip() for r in re.split(r"\{[^{}]*\}", message)]
    longest = max(runs, key=len, default="")
    if len(longest) >= 20:
        keys.append(f"run\n{record.class_name}\n{longest[-20:]}")
    # (Its first two words too: a big function, `ServerArgs.__post_init__`, holds many checks.)
    site = _SITE.match(record.peek("documentation") or "")
    opening = " ".join(re.findall(r"[A-Za-z][\w.-]*", message.split("{", 1)[0])[:2])
    if site is not None and opening:
        keys.append(f"site\n{site.group(2)}\n{site.group(1)}\n"
                    f"{record.peek('error_class') or record.peek('error_type')}\n{opening}")
    return keys


_SITE = re.compile(r"`([^`]+)\(\)` in (sglang/[^:\s]+):\d+ ")


class Tracker:
    """Per source, the releases its failures are consistent with."""

    def __init__(self) -> None:
        self._known: dict[str, Releases] = {}

    def learn(self, source: str, evidence: Releases | None) -> None:
        if evidence is None:
            return
        have = self._known.get(source)
        both = have.intersect(evidence) if have is not None else evidence
        self._known[source] = both if both else evidence  # contradiction: the server changed

    def known(self, source: str) -> Releases | None:
        return self._known.get(source)


_TABLES: weakref.WeakKeyDictionary[Engine, ReleaseTable] = weakref.WeakKeyDictionary()
