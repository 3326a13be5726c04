"""What a catalog holds, counted: by layer, severity, exception class, kind of site, the records
each sglang release holds, and where records come from (the package that prints the message, the
versions of it they cover, and the generator that made them).

`summarize` takes records (and the releases a merged catalog was extracted from, when known)
and returns counts; `render` turns them into the text `catalog stats` prints. Neither reads
files: `releases_of` reads the release list `catalog extract` writes next to a catalog.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from matcher.catalog.schema import LAYER_RANK, SEVERITIES, CatalogRecord

NO_CLASS = "(plain log line)"
OWN_SOURCE = "sglang"
NO_GENERATOR = "(none: written by hand or before the field)"


@dataclass(frozen=True, slots=True)
class Summary:
    records: int
    by_layer: Mapping[str, int]
    by_severity: Mapping[str, int]
    by_class: Mapping[str, int]  # most common first
    by_type: Mapping[str, int]  # errorType: raise / assert / log for generated records
    by_version: Mapping[str, int]  # release → records whose sglangVersions hold it
    with_remediation: int  # records that carry solutions
    # How records say to fix it (`CatalogRecord.fix_kind`), per layer: flags / stated / words /
    # unevaluable / none.
    by_fix: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    unevaluable: Sequence[CatalogRecord] = ()
    # sourcePackage (OWN_SOURCE for sglang's own messages) → records, and the versions they
    # cover (oldest bound .. newest bound over every record's sourceVersions; "" if none say).
    by_source: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    by_generator: Mapping[str, int] = field(default_factory=dict)  # NO_GENERATOR if unsaid


def summarize(records: Sequence[CatalogRecord],
              releases: Sequence[str] | None = None) -> Summary:
    """`releases`: the releases to count records for (oldest first); default: every release
    the records' `sglangVersions` name (a range's bounds, when they are ranges)."""
    from matcher.catalog.pep440 import in_ranges, parse_range, sort_versions

    if releases is None:
        releases = sort_versions(b for r in records for text in r.sglang_versions
                                 for b in parse_range(text))
    layers = Counter[str](r.layer for r in records)
    severities = Counter(r.severity for r in records)
    classes = Counter(r.class_name or NO_CLASS for r in records)
    types = Counter(r.error_type or "-" for r in records)
    versions = {v: sum(1 for r in records if r.sglang_versions and in_ranges(v, r.sglang_versions))
                for v in releases}
    return Summary(
        records=len(records),
        by_layer={k: layers[k] for k in LAYER_RANK if layers[k]},
        by_severity={k: severities[k] for k in SEVERITIES if severities[k]},
        by_class=dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_type=dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_version=versions,
        with_remediation=sum(1 for r in records if r.solutions or r.words),
        by_fix=_by_fix(records),
        unevaluable=[r for r in records if r.fix_kind == "unevaluable"],
        by_source=_by_source(records),
        by_generator=dict(sorted(Counter(r.generator or NO_GENERATOR for r in records).items(),
                                 key=lambda kv: (-kv[1], kv[0]))),
    )


def _by_source(records: Sequence[CatalogRecord]) -> dict[str, tuple[int, str]]:
    """Records per sourcePackage, most first, each with the span of versions its records name."""
    from matcher.catalog.pep440 import parse_range, sort_versions

    counts = Counter[str]()
    bounds: dict[str, set[str]] = {}
    for r in records:
        package = r.source_package or OWN_SOURCE
        counts[package] += 1
        found = bounds.setdefault(package, set())
        for text in r.source_versions:
            found.update(parse_range(text))
    out = {}
    for package, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        ordered = sort_versions(bounds[package])
        span = "" if not ordered else ordered[0] if len(ordered) == 1 \
            else f"{ordered[0]}..{ordered[-1]}"
        out[package] = (n, span)
    return out


FIX_KINDS = ("flags", "stated", "unevaluable", "words", "none")


def _by_fix(records: Sequence[CatalogRecord]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {}
    for r in records:
        out.setdefault(r.layer, Counter())[r.fix_kind] += 1
    return {layer: {k: out[layer][k] for k in FIX_KINDS if out[layer][k]}
            for layer in LAYER_RANK if layer in out}


def fix_share(counts: Mapping[str, int]) -> str:
    """`; with flag changes 1,003 of 1,111 whose guard reads server arguments (90.3%)`, from
    counts by kind (flags / unevaluable / words); empty when no guard reads any."""
    reading = counts.get("flags", 0) + counts.get("unevaluable", 0)
    if not reading:
        return ""
    return (f"; with flag changes {counts.get('flags', 0):,} of {reading:,} whose guard reads "
            f"server arguments ({100 * counts.get('flags', 0) / reading:.1f}%)")


def render_unevaluable(summary: Summary) -> str:
    """The records whose condition reads server arguments and that got no proven fix: id,
    why, and the condition."""
    lines = [(f"{len(summary.unevaluable)} records read server arguments and have no proven "
             "flag change (fix in words):")]
    for r in summary.unevaluable:
        guard = r.guard
        assert guard is not None
        lines.append(f"  {r.id}  {r.slug}: {guard.unfixed or '-'}\n      when {guard.when}")
    return "\n".join(lines) + "\n"


def render(summary: Summary, *, top: int = 15) -> str:
    def line(title: str, counts: Mapping[str, int], limit: int | None = None) -> str:
        items = list(counts.items())
        shown = items if limit is None else items[:limit]
        text = ", ".join(f"{k} {v}" for k, v in shown)
        rest = sum(v for _, v in items[len(shown):])
        if rest:
            text += f", {len(items) - len(shown)} other classes {rest}"
        return f"  {title + ':':<12}{text or '-'}"

    lines = [
        f"{summary.records} records, {summary.with_remediation} with remediation",
        line("layer", summary.by_layer),
        line("severity", summary.by_severity),
        line("errorType", summary.by_type),
        line("class", summary.by_class, top),
    ]
    if summary.by_fix:
        lines.append("how to fix (flags: fixActions proven on the guard condition; unevaluable: "
                     "reads server arguments, no proven change):")
        lines += [f"  {layer + ':':<12}" + ", ".join(f"{k} {v:,}" for k, v in counts.items())
                  + fix_share(counts) for layer, counts in summary.by_fix.items()]
    if summary.by_source:
        width = max(map(len, summary.by_source))
        lines.append("records per source (sourcePackage, the versions its records cover):")
        lines += [f"  {package:<{width}}  {n:>7,}  {span or '-'}"
                  for package, (n, span) in summary.by_source.items()]
    if summary.by_generator:
        width = max(map(len, summary.by_generator))
        lines.append("records per generator:")
        lines += [f"  {g:<{width}}  {n:>7,}" for g, n in summary.by_generator.items()]
    if len(summary.by_version) <= 1:
        lines.append(line("versions", summary.by_version))
    else:
        width = max(map(len, summary.by_version))
        lines.append(f"records per sglang release ({len(summary.by_version)} releases):")
        lines += [f"  {v:<{width}}  {n:>7,}" for v, n in summary.by_version.items()]
    return "\n".join(lines) + "\n"


def releases_of(files: Iterable[str]) -> list[str] | None:
    """The releases `catalog extract` lists in `X.stats.toml` next to each `X.jsonl` given
    (`releases = [...]`, or the older `sglang_version = "..."`), oldest first; None if none
    of them has one."""
    from matcher.catalog.pep440 import sort_versions

    found: set[str] = set()
    for name in files:
        path = Path(name)
        if path.suffix != ".jsonl":
            continue
        toml = path.with_name(path.name.removesuffix(".jsonl") + ".stats.toml")
        try:
            doc = tomllib.loads(toml.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        listed = doc.get("releases")
        if isinstance(listed, list):
            found.update(v for v in listed if isinstance(v, str))
        elif isinstance(doc.get("sglang_version"), str):
            found.add(doc["sglang_version"])
    return sort_versions(found) if found else None
