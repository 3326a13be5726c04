"""Catalog files to `CatalogRecord`s, with errors that name the file, the record and the field.

A catalog is data written by people and by `catalog extract`; a mistake in one record must not
cost the others. `load_paths` therefore returns the good records *and* the problems; callers
decide whether a problem is fatal (`catalog lint`, `--check`) or reported and skipped (the
daemon). Text fields such as `validationCode` are carried as text and never executed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import pickle
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from matcher import cache
from matcher.atomic import write_atomic
from matcher.catalog.patterns import MIN_LITERAL_CHARS, analyze, pattern_from_template
from matcher.catalog.schema import (
    EXCEPTION,
    FIX_OPS,
    ROLES,
    SEVERITIES,
    CatalogRecord,
    FixAction,
    Guard,
    Layer,
    RaisedIn,
    pack_locations,
)

CATALOG_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class CatalogIssue:
    """One thing wrong with a catalog file; `index`/`record_id`/`field` are None when unknown."""

    file: str
    problem: str
    index: int | None = None
    record_id: str | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.file
        if self.index is not None:
            where += f": record {self.index}"
            if self.record_id:
                where += f" (id {self.record_id})"
        if self.field:
            where += f": field '{self.field}'"
        return f"{where}: {self.problem}"


class CatalogError(Exception):
    """Raised where a catalog must be clean (lint, `--check`, reload); lists every issue."""

    def __init__(self, issues: list[CatalogIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


@dataclass(frozen=True, slots=True)
class LoadResult:
    records: tuple[CatalogRecord, ...]
    issues: tuple[CatalogIssue, ...]
    files: tuple[str, ...]


def catalog_files(path: Path) -> list[Path]:
    """A file as given, or the catalog files under a directory in a stable order."""
    if path.is_dir():
        return sorted(
            p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in CATALOG_SUFFIXES
        )
    return [path]


def load_paths(
    paths: Iterable[Path], layer: Layer, *, known: Mapping[str, int] | None = None
) -> LoadResult:
    """`known`: literal lengths of patterns checked before (see `PatternFactsCache`)."""
    records: list[CatalogRecord] = []
    issues: list[CatalogIssue] = []
    files: list[str] = []
    for path in paths:
        if not path.exists():
            issues.append(CatalogIssue(str(path), "no such file or directory"))
            continue
        for file in catalog_files(path):
            files.append(str(file))
            cached = _parsed_cache(file, layer)
            if cached is not None and cached.hit is not None:
                records.extend(cached.hit[0])
                issues.extend(cached.hit[1])
                continue
            first_record, first_issue = len(records), len(issues)
            for item in _read_file(file):
                if isinstance(item, CatalogIssue):
                    issues.append(item)
                    continue
                index, raw = item
                result = validate_record(raw, str(file), index, layer, known=known)
                if isinstance(result, CatalogRecord):
                    records.append(result)
                else:
                    issues.extend(result)
            if cached is not None:
                cached.store(records[first_record:], issues[first_issue:])
    return LoadResult(tuple(records), tuple(issues), tuple(files))


PARSED_CACHE_MIN_BYTES = 1 << 20  # the generated layer (39 MB); small files parse in no time
PARSED_CACHE_KEEP = 4


class _ParsedFile:
    """A large catalog file's validated records, pickled in the cache dir by content hash (and
    the loader's code): validating every record at every start and every `scan` costs far
    more than unpickling them. Any problem with the cache only costs the parse."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hit: tuple[list[CatalogRecord], list[CatalogIssue]] | None = None
        try:
            with self.path.open("rb") as f:
                self.hit = pickle.load(f)
        except FileNotFoundError:
            pass
        except Exception:  # noqa: BLE001 — damaged, foreign, truncated: parse instead
            self.hit = None

    def store(self, records: list[CatalogRecord], issues: list[CatalogIssue]) -> None:
        try:
            write_atomic(self.path, pickle.dumps((records, issues),
                                                 protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:  # noqa: BLE001 — a full disk, an unpicklable value: parse next time
            return
        try:  # each version of a catalog file leaves one entry behind: keep the newest few
            entries = sorted(self.path.parent.glob("parsed-*.pickle"),
                             key=lambda p: p.stat().st_mtime, reverse=True)
            for old in [e for e in entries if e != self.path][PARSED_CACHE_KEEP - 1:]:
                old.unlink(missing_ok=True)
        except OSError:
            pass


def _parsed_cache(file: Path, layer: Layer) -> _ParsedFile | None:
    chosen = cache.directory()
    if chosen is None:
        return None
    try:
        if file.stat().st_size < PARSED_CACHE_MIN_BYTES:
            return None
        digest = hashlib.sha256(file.read_bytes())
    except OSError:
        return None
    digest.update(f"{file}\0{layer}\0".encode())
    digest.update(code_fingerprint("matcher.catalog.load", "matcher.catalog.schema",
                                   "matcher.catalog.patterns", "matcher.catalog.wording"
                                   ).encode())
    return _ParsedFile(chosen / f"parsed-{digest.hexdigest()[:24]}.pickle")


def _read_file(file: Path) -> Iterator[tuple[int, Any] | CatalogIssue]:
    """Yield (index, bare record) for each record in a file, unwrapping `{"record": …}`."""
    name = str(file)
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        # Line by line: the generated layer is 14 MB, and holding its text and its lines at once
        # would set the daemon's peak memory.
        index = 0
        try:
            with file.open(encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        doc = json.loads(line)
                    except json.JSONDecodeError as e:
                        yield CatalogIssue(name, f"line {lineno}: not valid JSON: {e.msg}",
                                           index=index)
                    else:
                        yield index, _unwrap(doc)
                    index += 1
        except (OSError, UnicodeDecodeError) as e:
            yield CatalogIssue(name, f"cannot read: {e}")
        return
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        yield CatalogIssue(name, f"cannot read: {e}")
        return
    if suffix in (".yaml", ".yml"):
        # Imported here: the built-in catalog is JSON, and importing yaml would cost every start
        # (`scan` included).
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            yield CatalogIssue(name, f"not valid YAML: {e}")
            return
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            yield CatalogIssue(name, f"not valid JSON at line {e.lineno} column {e.colno}: {e.msg}")
            return
    items = doc if isinstance(doc, list) else [doc]
    for index, item in enumerate(items):
        yield index, _unwrap(item)


def _unwrap(doc: Any) -> Any:
    if isinstance(doc, dict) and isinstance(doc.get("record"), dict):
        return doc["record"]
    return doc


_STR_FIELDS = (
    "slug", "errorMessage", "errorClass", "errorType", "filePath", "githubUrl", "documentation",
    "triggerScenarios", "commonSituations", "exampleFix", "messagePattern", "severity", "role",
    "sourcePackage", "generator",
)
_STR_LIST_FIELDS = ("solutions", "preventionTips", "tags", "sglangVersions", "consequenceOf",
                    "sourceVersions", "alsoMadeBy")


def validate_record(
    raw: Any, file: str, index: int, layer: Layer, *, known: Mapping[str, int] | None = None
) -> CatalogRecord | list[CatalogIssue]:
    """Check one bare record's fields and pattern; return the record or every problem found."""
    if not isinstance(raw, dict):
        return [CatalogIssue(file, f"expected an object, got {type(raw).__name__}", index=index)]
    rid = raw.get("id")
    rid_text = rid if isinstance(rid, str) else None
    issues: list[CatalogIssue] = []

    def bad(field: str, problem: str) -> None:
        issues.append(CatalogIssue(file, problem, index=index, record_id=rid_text, field=field))

    fields = _checked_fields(raw, layer, bad)
    pattern, pattern_field = _message_pattern(raw, fields.raised_in, issues, bad)
    literal_length = 0
    if isinstance(pattern, str):
        literal_length = _literal_length(pattern, pattern_field, fields.raised_in, known, bad)
    if issues:
        return issues
    assert isinstance(pattern, str) and isinstance(rid, str)
    return _catalog_record(raw, rid, file, index, layer, fields, pattern, literal_length)


@dataclass(frozen=True, slots=True)
class _CheckedFields:
    """A record's fields that need more than a copy: checked, and read into what
    `CatalogRecord` holds."""

    locations: tuple[tuple[str, str | None, int | None, str | None], ...]
    line_number: Any  # an int or None once checked
    severity: Any
    role: Any
    examples_match: tuple[str, ...]
    examples_no_match: tuple[str, ...]
    raised_in: RaisedIn | None
    fix_actions: tuple[tuple[FixAction, ...], ...]
    guard: Guard | None
    solutions: tuple[Any, ...]
    derived_words: bool  # the solutions are the words the guard gives: kept as `words` only


def _checked_fields(raw: Mapping[str, Any], layer: Layer, bad: Any) -> _CheckedFields:
    """Every field but the pattern, checked in the order problems are reported."""
    _check_types(raw, bad)
    locations = _locations(raw.get("sglangLocations"), bad)
    line_number = raw.get("lineNumber")
    if line_number is not None and (isinstance(line_number, bool) or not isinstance(line_number, int)):
        bad("lineNumber", f"expected an integer or null, got {type(line_number).__name__}")
    severity = _one_of(raw, "severity", "error", SEVERITIES, bad)
    role = _one_of(raw, "role", "cause", ROLES, bad)
    ex_match, ex_no = _examples(raw.get("examples"), bad)
    if raw.get("errorType") == EXCEPTION and not raw.get("errorClass"):
        bad("errorType", '"exception" binds the record to its errorClass: name one')
    raised_in = _raised_in(raw.get("raisedIn"), bad)
    fix_actions = _fix_actions(raw.get("fixActions"), bad)
    guard = _guard(raw.get("guard"), bad)
    listed = raw.get("solutions")
    solutions = tuple(listed) if isinstance(listed, list) else ()  # else: `bad` said so above
    derived_words = layer == "generated" and not fix_actions and bool(solutions) \
        and list(solutions) == _words(raw, guard)
    return _CheckedFields(locations, line_number, severity, role, tuple(ex_match), tuple(ex_no),
                          raised_in, fix_actions, guard, solutions, derived_words)


def _check_types(raw: Mapping[str, Any], bad: Any) -> None:
    """The id, and the fields that are a string or a list of strings."""
    rid = raw.get("id")
    if not isinstance(rid, str) or not rid.strip():
        bad("id", "required: a non-empty string")
    for name in _STR_FIELDS:
        if raw.get(name) is not None and not isinstance(raw[name], str):
            bad(name, f"expected a string or null, got {type(raw[name]).__name__}")
    for name in _STR_LIST_FIELDS:
        value = raw.get(name)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            bad(name, "expected a list of strings")


def _one_of(raw: Mapping[str, Any], name: str, default: str, allowed: Iterable[str],
            bad: Any) -> Any:
    """A field that names one of a few words (`severity`, `role`); absent: `default`."""
    value = raw.get(name) or default
    if isinstance(value, str) and value not in allowed:
        bad(name, f"{value!r} is not one of {', '.join(allowed)}")
    return value


def _examples(examples: Any, bad: Any) -> tuple[list[str], list[str]]:
    """`examples`: the lines the pattern must match, and those it must not."""
    ex_match: list[str] = []
    ex_no: list[str] = []
    if examples is None:
        return ex_match, ex_no
    if not isinstance(examples, dict):
        bad("examples", "expected an object {match: [...], noMatch: [...]}")
        return ex_match, ex_no
    for key, target in (("match", ex_match), ("noMatch", ex_no)):
        value = examples.get(key, [])
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            target.extend(value)
        else:
            bad(f"examples.{key}", "expected a list of strings")
    return ex_match, ex_no


def _message_pattern(raw: Mapping[str, Any], raised_in: RaisedIn | None,
                     issues: list[CatalogIssue], bad: Any) -> tuple[str | None, str]:
    """The record's pattern and the field it comes from: `messagePattern`, else one derived
    from `errorMessage`, else any message at all for a record named by its frame."""
    pattern = raw.get("messagePattern")
    message = raw.get("errorMessage")
    if isinstance(pattern, str) and pattern:
        return pattern, "messagePattern"
    if isinstance(message, str) and message:
        return pattern_from_template(message), "errorMessage"
    if "messagePattern" in [i.field for i in issues]:
        return None, "messagePattern"
    if raised_in is not None:
        return ANY_MESSAGE, "messagePattern"  # the frame alone says what failed
    bad("messagePattern", "required: a messagePattern, or an errorMessage to derive one "
                          "from (or a raisedIn frame)")
    return None, "messagePattern"


def _literal_length(pattern: str, pattern_field: str, raised_in: RaisedIn | None,
                    known: Mapping[str, int] | None, bad: Any) -> int:
    """The pattern's literal length, or 0 with the problem said (`check_pattern`)."""
    checked = known.get(pattern) if known else None
    if raised_in is not None:
        # At its frame a message needs no literal text to be specific: `^$` is a bare
        # `AssertionError` there. (`known` holds what `check_pattern` said.)
        problem = check_framed_pattern(pattern)
    else:
        problem = check_pattern(pattern) if checked is None else checked
    if isinstance(problem, str):
        bad(pattern_field, problem)
        return 0
    return problem


def _catalog_record(raw: dict[str, Any], rid: str, file: str, index: int, layer: Layer,
                    fields: _CheckedFields, pattern: str, literal_length: int) -> CatalogRecord:
    """A checked record as the engine holds it."""
    return CatalogRecord(
        id=rid,
        message_pattern=pattern,
        layer=layer,
        origin=file,
        index=index,
        slug=raw.get("slug") or "",
        error_message=raw.get("errorMessage"),
        error_class=_shared(raw.get("errorClass") or None),
        error_type=_shared(raw.get("errorType")),
        severity=_shared(fields.severity),
        role=_shared(fields.role),
        file_path=_shared(raw.get("filePath")),
        line_number=fields.line_number,
        github_url=raw.get("githubUrl"),
        documentation=raw.get("documentation") or "",
        trigger_scenarios=raw.get("triggerScenarios") or "",
        common_situations=raw.get("commonSituations") or "",
        solutions=() if fields.derived_words else fields.solutions,
        words=fields.derived_words,
        example_fix=raw.get("exampleFix"),
        prevention_tips=tuple(raw.get("preventionTips") or ()),
        tags=tuple(map(_shared, raw.get("tags") or ())),
        sglang_versions=tuple(map(_shared, raw.get("sglangVersions") or ())),
        source_package=_shared(raw.get("sourcePackage") or ""),
        source_versions=tuple(map(_shared, raw.get("sourceVersions") or ())),
        generator=_shared(raw.get("generator") or ""),
        also_made_by=tuple(map(_shared, raw.get("alsoMadeBy") or ())),
        locations=pack_locations(fields.locations),
        examples_match=fields.examples_match,
        examples_no_match=fields.examples_no_match,
        literal_length=literal_length,
        raised_in=fields.raised_in,
        consequence_of=tuple(raw.get("consequenceOf") or ()),
        fix_actions=fields.fix_actions,
        guard=fields.guard,
        # The generated layer is our own output, nothing unknown to keep: 15,000 dicts less.
        raw=raw if layer != "generated" else {},
    )


def _shared(value: Any) -> Any:
    """One string object for the values thousands of records repeat (classes, tags, files,
    release ranges): json gives each record its own copy, some 10 MB over the generated layer."""
    return sys.intern(value) if isinstance(value, str) else value


def _locations(value: Any, bad: Any) -> tuple[tuple[str, str | None, int | None, str | None], ...]:
    """`sglangLocations`: `[{"versions": "A..B", "filePath", "lineNumber", "githubUrl"}, …]`."""
    if value is None:
        return ()
    out = []
    if isinstance(value, list):
        for item in value:
            if not (isinstance(item, dict) and isinstance(item.get("versions"), str)
                    and isinstance(item.get("filePath"), str | None)
                    and (item.get("lineNumber") is None or (
                        isinstance(item["lineNumber"], int)
                        and not isinstance(item["lineNumber"], bool)))
                    and isinstance(item.get("githubUrl"), str | None)):
                break
            out.append((item["versions"], item.get("filePath"), item.get("lineNumber"),
                        item.get("githubUrl")))
        else:
            return tuple(out)
    bad("sglangLocations", 'expected a list of {"versions": "A..B", "filePath": …, '
                           '"lineNumber": …, "githubUrl": …}')
    return ()


def _raised_in(value: Any, bad: Any) -> RaisedIn | None:
    """`raisedIn`: `{"path": "sglang/srt/x.py", "function": "f", "source": "assert y"}`."""
    if value is None:
        return None
    parts = ("path", "function", "source")
    if not isinstance(value, dict) or set(value) - set(parts) or not all(
            isinstance(value.get(k), str | None) for k in parts):
        bad("raisedIn", 'expected {"path": …, "function": …, "source": …} (strings; any of them)')
        return None
    path, function, source = (value.get(k) or None for k in parts)
    if source is not None:
        source = " ".join(source.split()) or None  # as `matcher.frames` reads a frame's line
    frame = RaisedIn(_shared(path), _shared(function), source)
    if frame.path is None and frame.source is None:
        bad("raisedIn", "needs a path or a source line: a function name alone is no frame")
        return None
    if frame.path is not None and (frame.path.startswith("/") or "\\" in frame.path):
        bad("raisedIn.path", f"{frame.path!r}: give the path from the package on, with `/` "
                             "(`sglang/srt/managers/scheduler.py`)")
        return None
    return frame


def _words(raw: Mapping[str, Any], guard: Guard | None) -> list[str] | None:
    """The words `remedy` derives for this record (None if its fields are not what a record
    `catalog extract` wrote has)."""
    from matcher.catalog.wording import words

    try:
        return words(raw, guard.when if guard is not None else None)
    except (TypeError, AttributeError, ValueError):
        return None


def _guard(value: Any, bad: Any) -> Guard | None:
    """`guard`: `{"when": "cfg.x and not cfg.y", "reads": ["x", "y"], "unfixed": "why"}`."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"when", "reads", "unfixed"} \
            or not isinstance(value.get("when"), str) \
            or not isinstance(value.get("reads", []), list) \
            or not all(isinstance(x, str) for x in value.get("reads", [])) \
            or not isinstance(value.get("unfixed", ""), str):
        bad("guard", 'expected {"when": "<python expression>", "reads": [field names], '
                     '"unfixed": "<why no fix>"} (reads and unfixed optional)')
        return None
    return Guard(value["when"], tuple(map(_shared, value.get("reads", ()))),
                 value.get("unfixed") or None)


_FIX_KEYS = {"remove": {"flag", "aliases"}, "add": {"flag", "aliases"},
             "set": {"flag", "value", "aliases", "oneOf", "range"},
             "env": {"name", "value"}, "install": {"value"}}
# A flag as written, or the name of a capture holding it (`{arguments}`: argparse names the
# flag in its message).
_FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*|\{[A-Za-z_]\w*\}")


def _fix_actions(value: Any, bad: Any) -> tuple[tuple[FixAction, ...], ...]:
    """`fixActions`: `[[{"op": "remove", "flag": "--x"}, …], …]` — ways out, each its steps."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(w, list) and w for w in value):
        bad("fixActions", "expected a list of ways out, each a non-empty list of steps "
                          '([[{"op": "remove", "flag": "--x"}], …])')
        return ()
    ways = []
    for i, way in enumerate(value):
        steps = []
        for j, step in enumerate(way):
            where = f"fixActions[{i}][{j}]"
            op = step.get("op") if isinstance(step, dict) else None
            if op not in FIX_OPS:
                bad(where, f"op {op!r} is not one of {', '.join(FIX_OPS)}")
                return ()
            extra = set(step) - {"op"} - _FIX_KEYS[op]
            if extra:
                bad(where, f"{op}: unknown keys {', '.join(sorted(extra))} (it takes "
                           f"{', '.join(sorted(_FIX_KEYS[op]))})")
                return ()
            flags = [step.get("flag"), *(step.get("aliases") or [])] if op in (
                "remove", "add", "set") else []
            if not all(isinstance(f, str) and _FLAG.fullmatch(f) for f in flags):
                bad(where, f"{op}: flags are written --like-this (or {{capture}}): {flags!r}")
                return ()
            if op in ("set", "env", "install") and not isinstance(step.get("value"), str):
                bad(where, f"{op}: needs a string value")
                return ()
            if op == "env" and not isinstance(step.get("name"), str):
                bad(where, "env: needs the variable's name")
                return ()
            one_of = step.get("oneOf") or []
            if not (isinstance(one_of, list) and all(isinstance(v, str) for v in one_of)) or \
                    not isinstance(step.get("range"), str | None):
                bad(where, "set: oneOf is a list of strings, range a string")
                return ()
            steps.append(FixAction(op, step.get("flag"), step.get("value"),
                                   tuple(step.get("aliases") or ()), tuple(one_of),
                                   step.get("range"), step.get("name")))
        ways.append(tuple(steps))
    return tuple(ways)


# A framed record without a messagePattern takes any message its class prints there.
ANY_MESSAGE = r"(?s:.*)"


@functools.lru_cache(maxsize=4096)
def check_framed_pattern(pattern: str) -> int | str:
    """A framed record's pattern: valid and quick; its literal length, for ranking."""
    try:
        compiled = regex.compile(pattern)
        compiled.search("x" * 64, timeout=0.1)
    except (regex.error, OverflowError, RecursionError) as e:
        return f"invalid regex: {e}"
    except TimeoutError:
        return "regex times out on a short message"
    return analyze(pattern).literal_length


def check_pattern(pattern: str) -> int | str:
    """The pattern's literal length, or why it cannot be used."""
    try:
        compiled = regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError) as e:
        return f"invalid regex: {e}"
    try:
        if compiled.fullmatch("", timeout=0.1) is not None:
            return "matches the empty string: it would match every line"
    except TimeoutError:
        return "regex times out on the empty string"
    facts = analyze(pattern)
    if facts.literal_length < MIN_LITERAL_CHARS:
        return (
            f"too little literal text to be specific ({facts.literal_length} literal characters, "
            f"at least {MIN_LITERAL_CHARS} needed)"
        )
    return facts.literal_length


def fields_text(rows: Iterable[tuple[str | None, ...]]) -> bytes:
    """Rows of strings as one unambiguous text to hash (each value prefixed with its length):
    cheaper than `json.dumps` per record at every start."""
    return "".join(f"{-1 if v is None else len(v)}:{v or ''}" for row in rows for v in row
                   ).encode()


def code_fingerprint(*modules: str) -> str:
    """A hash of modules' source, so a cache never outlives the code that computed it."""
    import importlib.util

    h = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        try:
            h.update(Path(origin).read_bytes() if origin else name.encode())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()[:16]


class PatternFactsCache:
    """Checked patterns' literal lengths, kept across runs: checking 16,000 patterns takes 4 s.

    What a pattern is worth depends on its text alone, so an entry can only ever be missing,
    never wrong; the file is named after the checking code, and a damaged one is ignored.
    """

    def __init__(self, directory: Path) -> None:
        code = code_fingerprint(__name__, "matcher.catalog.patterns")
        self.path = directory / f"patterns-{code}.json"

    @classmethod
    def default(cls) -> PatternFactsCache | None:
        """In the application's cache directory (`matcher.cache`); None if it chose none."""
        chosen = cache.directory()
        return cls(chosen) if chosen is not None else None

    def load(self) -> dict[str, int]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and type(v) is int}

    def store(self, facts: Mapping[str, int]) -> bool:
        try:
            write_atomic(self.path, json.dumps(dict(facts), ensure_ascii=False,
                                               separators=(",", ":")))
        except OSError:
            return False
        for old in self.path.parent.glob("patterns-*.json"):
            if old != self.path:
                old.unlink(missing_ok=True)
        return True
