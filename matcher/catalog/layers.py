"""The catalog's layers: where the built-in ones are shipped, and how layers merge.

A later layer replaces an earlier record with the same `id`, or with the same `errorMessage`
template (`merge_layers`). Below `matcher.catalog` so that the catalog tools that need it
(the extractor, the server-argument table) do not import the package that loads them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from matcher.catalog.schema import LAYER_RANK, CatalogRecord


def builtin_patterns_dir() -> Path:
    """The catalog shipped with the package: inside the wheel, or `patterns/` in a checkout."""
    shipped = resources.files("matcher").joinpath("_patterns")
    if shipped.is_dir():
        return Path(str(shipped))
    return Path(__file__).resolve().parents[2] / "patterns"


def merge_layers(records: Sequence[CatalogRecord]) -> tuple[CatalogRecord, ...]:
    """Keep, for each id and each message template, the record of the latest layer."""
    ordered = sorted(records, key=lambda r: LAYER_RANK[r.layer])  # stable within a layer
    by_id: dict[str, CatalogRecord] = {}
    for r in ordered:
        by_id.pop(r.id, None)
        by_id[r.id] = r
    # A template belongs to the latest layer that uses it: every record of an earlier layer with
    # that template gives way — all of them when several share it (a message raised and logged,
    # or raised in two modules), and even when the record that took it is itself replaced by id.
    # Templates are compared with their holes blanked: releases name the same value differently
    # (`{self.radix_cache_backend!r}` in 0.5.14, `{cfg.radix_cache_backend!r}` in 0.5.23), and the
    # line a user sees is the same.
    top: dict[str, int] = {}
    for r in ordered:
        if r.error_message:
            top[_shape(r.error_message)] = LAYER_RANK[r.layer]
    return tuple(
        r for r in by_id.values()
        if not r.error_message or LAYER_RANK[r.layer] >= top[_shape(r.error_message)]
    )


def _shape(template: str) -> str:
    return _HOLE.sub("{}", template)


_HOLE = re.compile(r"\{[^{}]*\}")
