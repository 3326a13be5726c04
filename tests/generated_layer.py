"""An engine of the curated layer and some generated files, as the built-in catalog holds
them, and a scan of text through the daemon's pipeline: what the generators' tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matcher.catalog import Catalog, load_catalog
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.redact import Redactor
from matcher.sinks.events import event_dict
from matcher.types import Chunk

GENERATED = Path(__file__).resolve().parent.parent / "patterns" / "sglang" / "generated"


def engine_of(base: Path, files: tuple[str, ...], tables: tuple[str, ...] = ()) -> Engine:
    """The curated layer and `files` of the generated layer, built in `base`; `tables` (the
    data events' fixes are computed from) linked beside them."""
    generated = base / "sglang" / "generated"
    generated.mkdir(parents=True)
    for name in files:
        (generated / name).write_bytes((GENERATED / name).read_bytes())
    for name in tables:
        (generated / name).symlink_to(GENERATED / name)
    (base / "sglang" / "curated").symlink_to(GENERATED.parent / "curated")
    catalog = load_catalog(builtin_dir=base, precompiled=False)
    assert not catalog.issues
    return Engine(catalog.records, cache=None)


def curated_with(base: Path, *ids: str) -> Catalog:
    """The curated layer and, of sglang's generated records, those with `ids` (written into a
    file in `base`), as a user's catalog: a test of records that answer another's events."""
    wanted = {f'"id":"{rid}"' for rid in ids}
    lines = [line for line in (GENERATED / "sglang.jsonl").read_text(encoding="utf-8").splitlines()
             if any(w in line for w in wanted)]
    assert len(lines) == len(ids), ids
    chosen = base / "generated.jsonl"
    chosen.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_catalog(builtin=False, user_paths=[GENERATED.parent / "curated", chosen])


def scan(engine: Engine, text: str) -> list[dict[str, Any]]:
    """The events of `text` read as one log, in log order, as the daemon emits them."""
    pipeline = Pipeline(engine, catalog_version="test")
    data = text.encode()
    events = pipeline.feed(Chunk(data, "log", len(data))).events
    events += pipeline.end_of_source("log") + pipeline.finish()
    return [event_dict(e, Redactor()) for e in sorted(events, key=lambda e: e.offset)]
