"""An unknown exception whose message says what to install: an event of the family record.

Packages say what to install when something is missing or too old, in words the catalog has
no site for — a dependency's module no scope reads, a release no generator read:

    ImportError: Loading an AWQ quantized model requires auto-awq library (`pip install autoawq`)
    ValueError: 4 bit quantization requires bitsandbytes>=0.39.0 - please upgrade your bitsandbytes version

Such an exception, no record's (`sglang_unknown_error`), of a class packages raise these in,
whose message names a plain install (`matcher.catalog.stated_install.of_the_family`), is made an
event of the curated record `message-states-install`; the pipeline's `mismatched` then puts the
install read from its message ahead of the record's words, as it does for every record's event
of that shape. The record names no site (`raisedIn.source` `*`: the engine never matches it):
the event keeps the frame its traceback shows, and an exception a record knows keeps that
record, however few words the record matched.
"""

from __future__ import annotations

import dataclasses

from matcher.catalog.schema import CatalogRecord
from matcher.catalog.stated_install import FAMILY_RECORD as RECORD_ID
from matcher.catalog.stated_install import of_the_family
from matcher.types import Event

__all__ = ["RECORD_ID", "answered"]


def answered(events: list[Event], record: CatalogRecord | None) -> list[Event]:
    """`events` with each unknown exception whose message says what to install made an event
    of `record` (its remediation the record's own; the install is added by `mismatched`)."""
    if record is None:
        return events
    out = events
    for i, e in enumerate(events):
        if e.event != "sglang_unknown_error" or not of_the_family(e.error_class, e.message):
            continue
        if out is events:
            out = list(events)
        out[i] = dataclasses.replace(
            e, event="sglang_error", pattern_id=record.id, severity=record.severity,
            role=record.role, captures={}, remediation=record.remediation(), fingerprint=None)
    return out
