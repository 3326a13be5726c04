"""A weight loader's `{name} not found in params_dict.`: the tensor it skipped, and what its name says.

sglang's DeepSeek-family loader (and longcat_flash's, deepseek_v4's, dots3's) logs this warning
for a checkpoint tensor it has no parameter for and loads on without it. The tensor's name tells
the way out (`matcher.catalog.tensor_names`: a quantization scale, a LoRA tensor, a vision
tower's weight), so an event of the warning's record gets those words first.

dots3's fused-qkv loader raises `ValueError` with the same words. The warning's record names no
class and wins every line both records match (curated over generated), so a match on an
exception of that class is given back to the raise's record here: a log statement writes no
exception class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from matcher.bare_keys import first_solution, made
from matcher.catalog.schema import CatalogRecord
from matcher.types import Event

SKIPPED_RECORD = "3b0083ad5f342380"  # weight-name-skipped-not-found-in-params-dict (warning)
RAISED_RECORD = "21bb067d015e3427"  # dots3's `raise ValueError(f"{param_name} not found …")`
RAISED_CLASS = "ValueError"


def answered(events: list[Event], record_of: Callable[[str], CatalogRecord | None]
             ) -> list[Event]:
    """`events` with the warning's events given the way out their tensor's name points at,
    and its matches on a `ValueError` made events of the raise's record."""
    out = events
    for i, e in enumerate(events):
        if e.pattern_id != SKIPPED_RECORD:
            continue
        name = e.captures.get("param_name", "")
        if e.error_class.rsplit(".", 1)[-1] == RAISED_CLASS:
            new = made(e, record_of(RAISED_RECORD), None, {"param_name": name})
        else:
            new = _answered(e, name)
        if new is not None:
            if out is events:
                out = list(events)
            out[i] = new
    return out


def _answered(e: Event, name: str) -> Event | None:
    from matcher.catalog import tensor_names

    words = tensor_names.solution(name) if tensor_names.is_tensor_name(name) else None
    if not words:
        return None
    return dataclasses.replace(e, remediation=first_solution(words, e.remediation or {}))
