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

What an alert can say: `sglang_error_pattern_info{pattern_id, error_class, severity, summary,
fix, doc_url} 1`, one series per pattern that has fired since start (never one per record of the
catalog), set before its counter moves so that a scrape which sees the failure sees its words.
The shipped alert joins it (`group_left`) to put what happened and the first fix in the page.
Its text is the record's, never the log's: `summary` the first sentence of the record's
documentation (a generated record's: its message, since its documentation describes the source
site), `fix` its first solution (else its first way out, as `explain` writes it), `doc_url` the
record's source at the release that wrote the event (else at its newest, else an issue search
for its message) — https only, never the matcher's own address. Each redacted and cut short
(`SUMMARY_CHARS`, `FIX_CHARS`, `URL_CHARS`), at most `pattern_info_limit` patterns (the alert
falls back to its generic words past that).
"""

from __future__ import annotations

import collections
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from matcher.catalog.schema import SEVERITIES
from matcher.precompiled import resident_columns
from matcher.redact import Redactor
from matcher.types import UNCLASSIFIED, Batch, Event

OTHER = "other"
LAYERS = ("generated", "curated", "user")
ZERO_LAYERS = ("curated", "user")

# The label names this sink's series use, which a static label may not take.
_OWN_LABELS = ("pattern_id", "error_class", "severity", "layer", "version", "catalog_version",
               "summary", "fix", "doc_url")
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_MAX_CLASS_CHARS = 120
# sglang_error_pattern_info: label values short enough to read in a page, and bounded.
SUMMARY_CHARS = 120
FIX_CHARS = 200
URL_CHARS = 300
ISSUE_SEARCH = "https://github.com/sgl-project/sglang/issues?q="
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s+(?=[A-Z])")
_LINKED = re.compile(r"\s*\([^()]*\bhttps?://[^()\s]*\)")  # "(the source at …: https://…)"


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
    """The `Sink` that turns events into `sglang_log_*` series (docs/metrics.md).

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
        pattern_info_limit: int = 200,
        zero_layers: Sequence[str] = ZERO_LAYERS,
        wall: Callable[[], float] = time.time,
        redactor: Redactor | None = None,
    ) -> None:
        self._static = check_static_labels(static_labels or {}, _OWN_LABELS)
        self._wall = wall
        self._zero_layers = tuple(zero_layers)
        self._register_series(registry, tuple(self._static))
        self._redactor = redactor or Redactor()
        self._info_limit = pattern_info_limit
        # pattern id → (its info labels, the link its first event carried)
        self._fired: dict[str, tuple[tuple[str, ...], str | None]] = {}
        self._build_version = build_version
        self._catalog_version: str | None = None
        self._records: dict[str, RecordLike] = {}
        self._unknown_classes = BoundedValues(unknown_class_limit, pinned=(OTHER,))
        self.reload(catalog, catalog_version=catalog_version)

    def _register_series(self, registry: CollectorRegistry, names: tuple[str, ...]) -> None:
        """The sink's series on `registry`, each with the static label `names` after its own."""
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
        self._info = Gauge(
            "sglang_error_pattern_info",
            "Always 1: what a pattern that fired since start means, for alerts to join: a "
            "one-line summary, the first fix and a stable link (source or issue search).",
            ("pattern_id", "error_class", "severity", "summary", "fix", "doc_url", *names),
            registry=registry,
        )

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
            self._describe(record, e)  # before the count: a scrape seeing one sees both
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

    def reload(self, catalog: CatalogLike, *, catalog_version: str | None = None,
               redactor: Redactor | None = None) -> None:
        """Take a new catalog: counters kept, zero series added for its new curated records.

        Records that left the catalog keep their series (no expiry) and stay countable, so an
        event still in flight from the old catalog is counted under its own id. A fired
        pattern's info series is written again from its record as now loaded (and with the
        new `redactor`, if given): still one series per pattern.
        """
        if redactor is not None:
            self._redactor = redactor
        version = (catalog_version if catalog_version is not None
                   else str(getattr(catalog, "version", "")))
        records = catalog.records
        # Columns, not each record's fields: a stored record read field by field is settled
        # (`matcher.precompiled`), which for the built-in catalog's records cost every start.
        ids, layers, error_classes = resident_columns(records, ("id", "layer", "error_class"))
        self._records.update(zip(ids, records, strict=True))
        for record, layer in zip(records, layers, strict=True):
            if layer in self._zero_layers:
                self._errors.labels(**self._error_labels(record))
        classes = {c.rsplit(".", 1)[-1] for c in set(error_classes) if c}
        self._unknown_classes.pin(classes)
        for cls in sorted({OTHER, *classes}):
            self._unknown.labels(error_class=cls, **self._static)
        counts = dict.fromkeys(LAYERS, 0)
        for layer, count in collections.Counter(layers).items():  # in order of first appearance
            counts[layer] = counts.get(layer, 0) + count
        for layer, count in counts.items():
            self._patterns.labels(layer=layer, **self._static).set(count)
        for pid, (_, url) in list(self._fired.items()):  # a fired pattern's words, as now written
            record = self._records[pid]
            self._set_info(record, url)
        if version != self._catalog_version:
            if self._catalog_version is not None:
                self._build.remove(self._build_version, self._catalog_version,
                                   *self._static.values())
            self._build.labels(version=self._build_version, catalog_version=version,
                               **self._static).set(1)
            self._catalog_version = version

    def _describe(self, record: RecordLike, e: Event) -> None:
        if record.id in self._fired or len(self._fired) >= self._info_limit:
            return
        url = (e.remediation or {}).get("url")
        self._set_info(record, url if isinstance(url, str) else None)

    def _set_info(self, record: RecordLike, event_url: str | None) -> None:
        """One series per fired pattern: a changed record (a reload) replaces it, never adds."""
        values = (record.id, record.error_class or UNCLASSIFIED, record.severity,
                  *pattern_words(record, self._redactor, event_url),
                  *self._static.values())
        old = self._fired.get(record.id)
        if old is not None and old[0] != values:
            self._info.remove(*old[0])
        self._info.labels(*values).set(1)
        self._fired[record.id] = (values, event_url)

    def _error_labels(self, record: RecordLike) -> dict[str, str]:
        return {"pattern_id": record.id, "error_class": record.error_class or UNCLASSIFIED,
                "severity": record.severity, **self._static}

    def _unknown_class(self, error_class: str) -> str:
        """The class's own name (`torch.OutOfMemoryError` → `OutOfMemoryError`, as records name
        classes and as fingerprints see them), if it is a name at all; then bounded."""
        if len(error_class) > _MAX_CLASS_CHARS or not _CLASS_NAME.fullmatch(error_class):
            return OTHER
        return self._unknown_classes(error_class.rsplit(".", 1)[-1])


# -- sglang_error_pattern_info's words -----------------------------------------------------------


def pattern_words(record: Any, redactor: Redactor,
                  event_url: str | None = None) -> tuple[str, str, str]:
    """(summary, fix, doc_url) of a record, redacted and short: see the module's docstring.
    `record` is read by duck typing (a `CatalogRecord`, or anything with some of its fields)."""
    return (_summary(record, redactor), _fix(record, redactor),
            doc_url(record, redactor, event_url))


def _summary(record: Any, redactor: Redactor) -> str:
    documentation = _text(getattr(record, "documentation", ""))
    message = _text(getattr(record, "error_message", None))
    if getattr(record, "layer", "") == "generated" and message:
        text = message  # its documentation names the source site, not the failure
    else:
        text = _SENTENCE_END.split(documentation, 1)[0] if documentation else message
    return shorten(redactor.text(text or f"pattern {record.id}"), SUMMARY_CHARS)


def _fix(record: Any, redactor: Redactor) -> str:
    solutions = getattr(record, "how_to_fix", None)
    if solutions is None:
        solutions = getattr(record, "solutions", ())
    for solution in solutions or ():
        text = _LINKED.sub("", _text(solution))
        if text:
            return shorten(redactor.text(text), FIX_CHARS)
    for way in getattr(record, "fix_actions", ()) or ():
        steps = [str(a.describe()) for a in way if hasattr(a, "describe")]
        if steps:
            return shorten(redactor.text("; ".join(steps)), FIX_CHARS)
    return ""


def doc_url(record: Any, redactor: Redactor, event_url: str | None = None) -> str:
    """The record's source at the event's release (`event_url`: the link the pipeline put in the
    event's remediation), else its own link, else a search of sglang's issues for its message
    — always https, never longer than `URL_CHARS` (a longer link is not cut: it falls back)."""
    for url in (event_url, getattr(record, "github_url", None)):
        if isinstance(url, str) and url.startswith("https://") and not any(
                c.isspace() for c in url):
            url = redactor.text(url)
            if len(url) <= URL_CHARS:
                return url
    message = _text(getattr(record, "error_message", None))
    # The longest run of the message's own words (a `{placeholder}` is what the log fills in).
    literal = max((p.strip(" :,;") for p in re.split(r"\{[^{}]*\}", message)), key=len,
                  default="") or _text(getattr(record, "error_class", None)) or str(record.id)
    literal = shorten(redactor.text(literal), 80).rstrip("…")
    query = urllib.parse.quote_plus(f'is:issue "{literal}"')
    return (ISSUE_SEARCH + query)[:URL_CHARS]


def shorten(text: str, limit: int) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (… marks a cut)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def _text(value: object) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""
