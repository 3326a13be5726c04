"""What a catalog holds, counted: by layer, severity, exception class, kind of site and version.

`summarize` takes records and returns counts; `render` turns them into the text `catalog stats`
prints. Neither reads files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from matcher.catalog.schema import LAYER_RANK, SEVERITIES, CatalogRecord

NO_CLASS = "(plain log line)"


@dataclass(frozen=True, slots=True)
class Summary:
    records: int
    by_layer: Mapping[str, int]
    by_severity: Mapping[str, int]
    by_class: Mapping[str, int]  # most common first
    by_type: Mapping[str, int]  # errorType: raise / assert / log for generated records
    by_version: Mapping[str, int]
    with_remediation: int  # records that carry solutions


def summarize(records: Sequence[CatalogRecord]) -> Summary:
    layers = Counter[str](r.layer for r in records)
    severities = Counter(r.severity for r in records)
    classes = Counter(r.class_name or NO_CLASS for r in records)
    types = Counter(r.error_type or "-" for r in records)
    versions = Counter(v for r in records for v in r.sglang_versions)
    return Summary(
        records=len(records),
        by_layer={k: layers[k] for k in LAYER_RANK if layers[k]},
        by_severity={k: severities[k] for k in SEVERITIES if severities[k]},
        by_class=dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_type=dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_version=dict(sorted(versions.items())),
        with_remediation=sum(1 for r in records if r.solutions),
    )


def render(summary: Summary, *, top: int = 15) -> str:
    def line(title: str, counts: Mapping[str, int], limit: int | None = None) -> str:
        items = list(counts.items())
        shown = items if limit is None else items[:limit]
        text = ", ".join(f"{k} {v}" for k, v in shown)
        rest = sum(v for _, v in items[len(shown):])
        if rest:
            text += f", {len(items) - len(shown)} other classes {rest}"
        return f"  {title + ':':<12}{text or '-'}"

    return "\n".join([
        f"{summary.records} records, {summary.with_remediation} with remediation",
        line("layer", summary.by_layer),
        line("severity", summary.by_severity),
        line("errorType", summary.by_type),
        line("class", summary.by_class, top),
        line("versions", summary.by_version),
    ]) + "\n"
