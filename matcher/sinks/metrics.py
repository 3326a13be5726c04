"""Events to Prometheus counters an operator can alert on, on a registry the caller injects.

What is counted: one failure per event, however many ranks printed it. sglang prints the same
traceback once per rank, and the aggregator collapses them into one `Event` with `ranks` and
`occurrences`; a TP=8 crash (occurrences=8) is one failure and adds 1, so an alert fires once
per crash and `increase()` reads as "crashes", not "crashes × world size". Repeats that the
aggregator rate-limits reach this sink all the same (as `quiet` events, which are not printed), so
a crash loop writing the same error 100 times raises the counter by 100 even if two events print.

What is never lost: series are not expired and not reset by `reload()`; a pattern's counter lives
as long as the process. Series of curated (and user) records exist at 0 from the start so that
`increase(sglang_log_errors_total[…]) > 0` sees the very first error; generated records (several
thousand, from sglang's source) get a series when they first match.

What is bounded: label values come from the catalog (pattern ids, their classes and severities,
layers) and from fixed sets, never from log text or captures. An event whose class differs from
its record's is counted under the record's class; a record without a class under
`UnclassifiedError` (`types.UNCLASSIFIED`), never an empty label. Unknown errors are counted by
their class's own name (the last dotted part): the classes the catalog names have a series from
the start (at 0, for the same `increase()` reason), the first `unknown_class_limit` other
classes get one when first seen, and every later class — or anything that is not a class name —
counts as `other`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from matcher.catalog.schema import SEVERITIES
from matcher.types import UNCLASSIFIED, Batch, Event

OTHER = "other"
LAYERS = ("generated", "curated", "user")
ZERO_LAYERS = ("curated", "user")

_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_MAX_CLASS_CHARS = 120


class RecordLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def error_class(self) -> str | None: ...
    @property
    def severity(self) -> str: ...
    @property
    def layer(self) -> str: ...


class CatalogLike(Protocol):
    @property
    def records(self) -> Sequence[RecordLike]: ...


def check_static_labels(static_labels: Mapping[str, str],
                        reserved: Iterable[str] = ()) -> dict[str, str]:
    """Static labels (from config), checked: ValueError/TypeError names the label at fault."""
    reserved = set(reserved)
    out: dict[str, str] = {}
    for name, value in static_labels.items():
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise ValueError(f"static label {name!r}: not a valid Prometheus label name")
        if name in reserved:
            raise ValueError(f"static label {name!r}: the matcher already uses this label name")
        if not isinstance(value, str):
            raise TypeError(f"static label {name!r}: value must be a string")
        out[name] = value
    return out


class BoundedValues:
    """Label values from an open set, bounded: the pinned values, then the first `limit` others
    seen, then `other` — a series count that cannot grow with the input."""

    def __init__(self, limit: int, pinned: Iterable[str] = ()) -> None:
        self.limit = limit
        self._pinned = set(pinned)
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._pinned or value in self._seen:
            return value
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) < self.limit:
                self._seen.add(value)
                return value
        return OTHER

    def pin(self, values: Iterable[str]) -> None:
        self._pinned.update(values)


class MetricsSink:
    """The `Sink` that turns events into `sglang_log_*` series (README, "Outputs").

    `catalog` is anything with `.records` (each with `.id`, `.error_class`, `.severity`,
    `.layer`). `static_labels` (from config: cluster, pod, model…) are added to every series this
    sink creates. `wall` gives the time written to `sglang_log_last_error_timestamp_seconds`.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        catalog: CatalogLike,
        static_labels: Mapping[str, str] | None = None,
        build_version: str,
        catalog_version: str,
        unknown_class_limit: int = 20,
        zero_layers: Sequence[str] = ZERO_LAYERS,
        wall: Callable[[], float] = time.time,
    ) -> None:
        reserved = ("pattern_id", "error_class", "severity", "layer", "version", "catalog_version")
        self._static = check_static_labels(static_labels or {}, reserved)
        names = tuple(self._static)
        self._wall = wall
        self._zero_layers = tuple(zero_layers)
        self._errors = Counter(
            "sglang_log_errors_total",
            "Recognized sglang failures; an error printed by several ranks counts once.",
            ("pattern_id", "error_class", "severity", *names),
            registry=registry,
        )
        self._unknown = Counter(
            "sglang_log_unknown_errors_total",
            "sglang exceptions no catalog pattern recognizes, by exception class (bounded).",
            ("error_class", *names),
            registry=registry,
        )
        self._last = Gauge(
            "sglang_log_last_error_timestamp_seconds",
            "Unix time the matcher last saw a failure of this pattern.",
            ("pattern_id", *names),
            registry=registry,
        )
        self._patterns = Gauge(
            "sglang_matcher_catalog_patterns",
            "Catalog records in use, by layer.",
            ("layer", *names),
            registry=registry,
        )
        self._build = Gauge(
            "sglang_matcher_build_info",
            "Always 1: the matcher's version and the version (content hash) of its catalog.",
            ("version", "catalog_version", *names),
            registry=registry,
        )
        self._build_version = build_version
        self._catalog_version: str | None = None
        self._records: dict[str, RecordLike] = {}
        self._unknown_classes = BoundedValues(unknown_class_limit, pinned=(OTHER,))
        self.reload(catalog, catalog_version=catalog_version)

    def accept(self, events: list[Event]) -> None:
        now = self._wall()
        for e in events:
            n = 1  # quiet (rate-limited) events come here too: every failure counts once
            if e.event == "sglang_unknown_error":
                self._unknown.labels(error_class=self._unknown_class(e.error_class),
                                     **self._static).inc(n)
                continue
            record = self._records.get(e.pattern_id or "")
            if record is None:
                # Not a record this process ever loaded: no label value can be trusted.
                self._errors.labels(pattern_id=OTHER, error_class=OTHER, severity=OTHER,
                                    **self._static).inc(n)
                continue
            labels = self._error_labels(record)
            if e.severity in SEVERITIES:  # a generated record yields to the log's INFO/WARNING
                labels["severity"] = e.severity  # so the alert on error doesn't fire for it
            self._errors.labels(**labels).inc(n)
            self._last.labels(pattern_id=record.id, **self._static).set(now)

    # -- Sink: every event counts, printed or rate-limited -----------------------------------

    name = "metrics"
    holds_checkpoint = False  # counters live in memory; a scrape reads them

    def emit(self, batch: Batch) -> None:
        self.accept(list(batch.events))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def reload(self, catalog: CatalogLike, *, catalog_version: str | None = None) -> None:
        """Take a new catalog: counters kept, zero series added for its new curated records.

        Records that left the catalog keep their series (no expiry) and stay countable, so an
        event still in flight from the old catalog is counted under its own id.
        """
        version = (catalog_version if catalog_version is not None
                   else str(getattr(catalog, "version", "")))
        for record in catalog.records:
            self._records[record.id] = record
            if record.layer in self._zero_layers:
                self._errors.labels(**self._error_labels(record))
        classes = {r.error_class.rsplit(".", 1)[-1] for r in catalog.records if r.error_class}
        self._unknown_classes.pin(classes)
        for cls in sorted({OTHER, *classes}):
            self._unknown.labels(error_class=cls, **self._static)
        counts = dict.fromkeys(LAYERS, 0)
        for record in catalog.records:
            counts[record.layer] = counts.get(record.layer, 0) + 1
        for layer, count in counts.items():
            self._patterns.labels(layer=layer, **self._static).set(count)
        if version != self._catalog_version:
            if self._catalog_version is not None:
                self._build.remove(self._build_version, self._catalog_version,
                                   *self._static.values())
            self._build.labels(version=self._build_version, catalog_version=version,
                               **self._static).set(1)
            self._catalog_version = version

    def _error_labels(self, record: RecordLike) -> dict[str, str]:
        return {"pattern_id": record.id, "error_class": record.error_class or UNCLASSIFIED,
                "severity": record.severity, **self._static}

    def _unknown_class(self, error_class: str) -> str:
        """The class's own name (`torch.OutOfMemoryError` → `OutOfMemoryError`, as records name
        classes and as fingerprints see them), if it is a name at all; then bounded."""
        if len(error_class) > _MAX_CLASS_CHARS or not _CLASS_NAME.fullmatch(error_class):
            return OTHER
        return self._unknown_classes(error_class.rsplit(".", 1)[-1])
