r"""sglang's own source → catalog records: one per raise, assert and logger call with a message,
and one per bare raise or assert, recognized by the traceback frame that raises it.

`extract_module` is pure: it takes one module's source text and its path inside the package
(`sglang/srt/arg_groups/mamba_hook.py`) and returns seed-schema v2 records plus the counts that
say what was seen and why a site gave no record. Reading a source tree, an installed package or
a wheel happens at the edge (`read_tree`, `read_wheel`, `find_installed`), never in the middle.

What a site's message becomes:
- `errorMessage`: the message as the code builds it, written as one template whatever the source
  used — literal text with `{` and `}` doubled, each hole `{expression}` with its conversion and
  format spec (`{cfg.radix_cache_backend!r}`, `{n:.2f}`); `%` and `.format()` holes are written
  the same way. A `KeyError`'s message is quoted, as Python prints it.
- `messagePattern`: literal text escaped, each hole a lazy group named after its expression when
  that is a name or an attribute (`(?P<radix_cache_backend>.+?)`), unnamed otherwise; a hole that
  ends the pattern is greedy, so its capture is the whole rest of the line. A raise or assert
  pattern is anchored (`(?<![\s\S])\s*`) at the start of the message, which is where Python
  prints it after `Class: `: the same words inside another line (a warning, a wrapped error) are
  not this site; a hole that opens such a pattern takes no whitespace (it is a name or a value,
  not a phrase). A variable's message is read from its assignment and the `+=` that follow it.

A site that raises without a message — `assert cond`, `raise ValueError`, `raise ValueError()` —
prints `AssertionError` (or `ValueError`) alone: nothing in the message says which site failed,
but the traceback's last frame does. Such a site becomes a frame record: `messagePattern` `^$`,
no `errorMessage`, and `raisedIn` — the frame as a traceback prints it: the path from `sglang/`
on, the function's bare name (`co_name`: the innermost `def` or `class`, `<module>` at module
level) and the one physical line printed under it, stripped: a raise's first line; for an
assert spread over lines, the line 3.10 and 3.11 print (`assert_line`). Its id is made of that
function and line instead of a template (`frame:get_next_batch_to_run:assert x is not None`),
so it too survives a line move; two sites of one module that print the same frame are one
record. (A class that makes its own message, `raise MyError()`, prints one: its frame record
then matches nothing, which costs only its place in the catalog.)

What is lost, and counted by reason: messages that are not string templates at all (a variable,
`str(e)`, a tuple), re-raises, raises whose message is only in keyword arguments, logger calls
without a message, and templates whose literal text is too short to recognize one site: under
the loader's 8 literal characters (`f"{e}"`, `f"Error: {e}"`), or without one literal run of 12
characters (`f"{path}.{key} must be {p}"`, `f"x.shape={x.shape!r}"`), which among thousands of
records would claim other libraries' errors. A logger call's message keeps its first line only:
a log line's continuation is a line of its own in the log.

The parts, one job each: `extract_templates` (a message's template and pattern, from the AST),
`extract_sites` (the sites of one module), `extract_helpers` (the release's helpers that raise
or log their parameters), `extract_records` (a site's record), `extract_stats` (counts and skip
reasons), `extract_sources` (where the source comes from). This module drives them, one module
and one release at a time, and names what callers use from all of them.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from matcher.catalog.extract_helpers import (
    Callees,
    HelperIndex,
    index_helpers,
)
from matcher.catalog.extract_records import (
    FAILURE,
    FRAME_PATTERN,
    GITHUB,
    ID_PREFIX,
    IMPORT_FIX,
    REPO,
    VIA_HELPER,
    raised_in,
    record_id,
    site_record,
    slugify,
)
from matcher.catalog.extract_sites import (
    IMPORTED,
    Helper,
    Sink,
    Site,
    SiteWalker,
    assert_line,
    substitute,
)
from matcher.catalog.extract_sources import (
    SourceFiles,
    excluded,
    find_installed,
    module_name,
    package_dir,
    physical_lines,
    read_tree,
    read_wheel,
    version_in,
)
from matcher.catalog.extract_stats import (
    CALL_RESULT,
    DUPLICATE,
    DUPLICATE_FRAME,
    FRAME,
    KEYWORD_ONLY,
    MOSTLY_HOLES,
    NO_MESSAGE,
    NOT_TEMPLATE,
    PARAMETER,
    RERAISE,
    SEVERAL_ARGS,
    TOO_VAGUE,
    Extraction,
    Stats,
    record_kind,
    stats_toml,
)
from matcher.catalog.extract_templates import (
    MIN_LITERAL_RUN,
    Hole,
    Part,
    Resolver,
    format_parts,
    merge_literals,
    message_parts,
    pattern_of,
    percent_parts,
    quoted,
    recognizable,
    template_of,
)
from matcher.catalog.load import check_pattern
from matcher.catalog.patterns import analyze
from matcher.catalog.schema import CatalogRecord

# What callers import from `matcher.catalog.extract`: its own names and its parts'.
__all__ = [
    "CALL_RESULT",
    "DEFERRED",
    "DUPLICATE",
    "DUPLICATE_FRAME",
    "EXTRACTOR_MODULES",
    "FAILURE",
    "FRAME",
    "FRAME_PATTERN",
    "GITHUB",
    "ID_PREFIX",
    "IMPORTED",
    "IMPORT_FIX",
    "KEYWORD_ONLY",
    "MIN_LITERAL_RUN",
    "MOSTLY_HOLES",
    "NOT_SELECTED",
    "NOT_TEMPLATE",
    "NO_MESSAGE",
    "PARAMETER",
    "REPO",
    "RERAISE",
    "SEVERAL_ARGS",
    "TOO_VAGUE",
    "VIA_HELPER",
    "Callees",
    "Extraction",
    "Helper",
    "HelperIndex",
    "Hole",
    "ModuleRecords",
    "Part",
    "Resolver",
    "Sink",
    "Site",
    "SiteWalker",
    "SourceFiles",
    "Stats",
    "assert_line",
    "defer_to",
    "excluded",
    "extract_files",
    "extract_module",
    "find_installed",
    "format_parts",
    "index_helpers",
    "iter_jsonl",
    "merge_literals",
    "message_of",
    "message_parts",
    "module_name",
    "package_dir",
    "pattern_of",
    "percent_parts",
    "physical_lines",
    "quoted",
    "raised_in",
    "read_tree",
    "read_wheel",
    "recognizable",
    "record_id",
    "record_kind",
    "selected",
    "site_record",
    "slugify",
    "stats_toml",
    "substitute",
    "template_of",
    "version_in",
]

# The extractor's code, all its parts: a cache of what it made is named after their source.
EXTRACTOR_MODULES = ("matcher.catalog.extract", "matcher.catalog.extract_templates",
                     "matcher.catalog.extract_sites", "matcher.catalog.extract_helpers",
                     "matcher.catalog.extract_records", "matcher.catalog.extract_stats",
                     "matcher.catalog.extract_sources")



def extract_module(text: str, path: str, *, version: str,
                   helpers: HelperIndex | None = None, joined_lines: bool = False,
                   variable_holes: bool = False) -> Extraction:
    """Records for one module's source; `path` is inside the package: `sglang/srt/x.py`.
    `helpers` (`index_helpers` of the whole release): each call of a function that raises or
    logs its argument is a site too, with the message passed. `joined_lines`: a message raised
    as `"\n".join(lines)` of a list of templates is read too (off for the catalogs made
    without it: sglang's, flashinfer's, the router's). `variable_holes`: a raised f-string's
    hole that is a local name bound once to a template is read as that template (off for the
    same catalogs)."""
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark (qwen2_classification.py)
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return Extraction((), Stats(files=1, files_skipped={"syntax error": 1}))
    module = module_name(path)
    walker = SiteWalker(tree, Callees(helpers, module) if helpers is not None else None,
                        joined_lines=joined_lines, variable_holes=variable_holes)
    walker.visit(tree)
    made = ModuleRecords(path, module, version, physical_lines(text))
    for site in sorted(walker.sites, key=lambda s: s.line):
        made.add(site)
    return made.extraction()


@dataclass(slots=True)
class ModuleRecords:
    """One module's records by id, made site by site in line order, with the counts `Stats`
    keeps (a site whose record an earlier site made is merged into it, not made twice)."""

    path: str
    module: str
    version: str
    lines: list[str]  # the module's physical lines, for the frame of a bare site
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    sites: Counter[str] = field(default_factory=Counter)
    with_message: Counter[str] = field(default_factory=Counter)
    covered: Counter[str] = field(default_factory=Counter)
    made: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, site: Site) -> None:
        self.sites[site.kind] += 1
        if site.frame:
            self._add_frame(site)
        else:
            self._add_message(site)

    def _add_frame(self, site: Site) -> None:
        """A bare raise or assert: a frame record, named by its function and printed line."""
        frame = raised_in(site, self.path, self.lines)
        rid = record_id(self.module, site.error_class or "",
                        f"frame:{frame['function']}:{frame['source']}")
        self.covered[FRAME] += 1
        if self._merged(rid, site, DUPLICATE_FRAME):
            return
        self.made[FRAME] += 1
        self.records[rid] = site_record(rid, site, None, FRAME_PATTERN, self.path, self.module,
                                        self.version, frame=frame)

    def _add_message(self, site: Site) -> None:
        """A site with a message: a record when its template is recognizable."""
        if site.parts is None:
            self.skipped[site.skip or NOT_TEMPLATE] += 1
            return
        self.with_message[site.kind] += 1
        if site.skip is not None:
            self.skipped[site.skip] += 1
            return
        template, pattern, unrecognized = message_of(site, site.parts)
        if unrecognized is not None:
            self.skipped[unrecognized] += 1
            return
        rid = record_id(self.module, site.error_class or f"logger.{site.severity}", template)
        self.covered[site.kind] += 1
        if self._merged(rid, site, DUPLICATE):
            return
        self.made[site.kind] += 1
        self.records[rid] = site_record(rid, site, template, pattern, self.path, self.module,
                                        self.version)

    def _merged(self, rid: str, site: Site, reason: str) -> bool:
        """Whether an earlier site made this record: then this site's line joins its `alsoAt`,
        and the site is counted as skipped for `reason`."""
        if rid not in self.records:
            return False
        self.records[rid].setdefault("alsoAt", []).append(site.line)
        self.skipped[reason] += 1
        return True

    def extraction(self) -> Extraction:
        stats = Stats(1, dict(self.sites), dict(self.with_message), dict(self.covered),
                      dict(self.made), dict(self.skipped))
        return Extraction(tuple(self.records.values()), stats)


def message_of(site: Site, parts: list[Part]) -> tuple[str, str, str | None]:
    """A message site's template and pattern, and why they cannot make a record (None: they
    can): under the loader's minimum of literal text, or no literal run of `MIN_LITERAL_RUN`
    characters (`PARAMETER` when the holes are the function's parameters)."""
    parts = merge_literals(parts)
    if site.error_class is not None and site.error_class.rsplit(".", 1)[-1] == "KeyError":
        parts = quoted(parts)
    template = template_of(parts)
    pattern = pattern_of(parts, first_line_only=site.kind == "log", anchored=site.kind != "log")
    if not isinstance(check_pattern(pattern), int):
        return template, pattern, PARAMETER if site.from_params else TOO_VAGUE
    if max(map(len, analyze(pattern).required_literals), default=0) < MIN_LITERAL_RUN:
        return template, pattern, PARAMETER if site.from_params else MOSTLY_HOLES
    return template, pattern, None


def extract_files(files: Iterable[tuple[str, str]], *, version: str,
                  flow: bool = True) -> Extraction:
    """Records for many modules, `(path inside the package, source text)` each. `flow`:
    messages passed to the release's helpers that raise or log them (`index_helpers`) too."""
    files = list(files)
    helpers = index_helpers(files) if flow else None
    records: list[dict[str, Any]] = []
    stats = Stats()
    for path, text in files:
        ex = extract_module(text, path, version=version, helpers=helpers)
        records.extend(ex.records)
        stats = stats + ex.stats
    records.sort(key=lambda r: (r["filePath"], r["lineNumber"], r["id"]))
    return Extraction(tuple(records), stats)


def iter_jsonl(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    import json

    for r in records:
        yield json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"


def selected(record: Mapping[str, Any], severities: Iterable[str]) -> bool:
    """`--severity` (repeated): a record of one of these severities; `failure` selects the
    warnings that report a failure (tagged `failure`: `_failure_of`)."""
    chosen = set(severities)
    return record["severity"] in chosen or (
        FAILURE in chosen and FAILURE in (record.get("tags") or ()))


DEFERRED = "its lines are a curated record's examples (left to that record)"
NOT_SELECTED = "severity not selected (--severity)"


def defer_to(
    records: Sequence[dict[str, Any]], curated: Sequence[CatalogRecord]
) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """Leave out the records that would take a curated record's own example lines.

    A curated record with the same template already replaces a generated one when the layers
    merge. This is for the curated record that covers several sites with one pattern (a port
    in use, said three ways): the generated record of each other site is more specific and
    would win its lines, so the operator would get the site without the remediation. A record
    decided at event time (`raisedIn.source` `*`) takes only what no record takes: a site that
    takes its example lines is kept.
    """
    from matcher.catalog.check import frame_text
    from matcher.catalog.layers import merge_layers
    from matcher.catalog.load import validate_record
    from matcher.engine import Engine

    generated = []
    for i, raw in enumerate(records):
        rec = validate_record(raw, "<generated>", i, "generated")
        if isinstance(rec, CatalogRecord):
            generated.append(rec)
    dropped: set[str] = set()
    while True:
        merged = merge_layers([*(g for g in generated if g.id not in dropped), *curated])
        engine = Engine(merged, use_hyperscan=False, cache=None)
        taken: set[str] = set()
        for rec in curated:
            if rec.raised_in is not None and rec.raised_in.computed:
                continue  # decided at event time: an event no record takes (the engine never)
            for example in rec.examples_match:
                winners = [m for m in map(engine.match, frame_text(example)) if m is not None]
                if winners and not any(m.pattern.id == rec.id for m in winners):
                    taken.update(m.pattern.id for m in winners if m.pattern.layer == "generated")
        if not taken:
            break
        dropped |= taken
    return tuple(r for r in records if r["id"] not in dropped), tuple(sorted(dropped))
