"""The precompiled built-in catalog (`matcher.precompiled`) and the daemon's start while a catalog
compiles (`topology.Compilation`).

The artifact is built here from a small built-in catalog (the curated layer and the first records
of the generated one), so that every test compiles in a second or two: what is compared is the
precompiled path against loading the same files from their sources.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from matcher import release, topology
from matcher.catalog import load_catalog
from matcher.catalog.check import frame_text
from matcher.config import Config
from matcher.daemon import Daemon, Wakeup, stderr_logger
from matcher.engine import Engine
from matcher.precompiled import StoredRecord, build, resident_columns
from matcher.sinks.metrics import MetricsSink

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
GENERATED = REPO / "patterns" / "sglang" / "generated" / "sglang.jsonl"
CURATED = REPO / "patterns" / "sglang" / "curated"
SEED_FILE = CURATED / "000_seed_int8_mamba_radix_cache.json"
_RUN = topology.Compilation._run


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """(base, artifact dir): a small built-in catalog and its precompiled artifact."""
    root = tmp_path_factory.mktemp("shipped")
    base = root / "patterns"
    (base / "sglang" / "generated").mkdir(parents=True)
    with GENERATED.open(encoding="utf-8") as f:
        (base / "sglang" / "generated" / "sglang.jsonl").write_text(
            "".join(itertools.islice(f, 1500)), encoding="utf-8")
    shutil.copytree(CURATED, base / "sglang" / "curated")
    catalog = load_catalog(builtin_dir=base, precompiled=False)
    assert not catalog.issues
    build(root / "pre", base, catalog.records, catalog.version)
    return base, root / "pre"


def _lines(records) -> list:
    """Real logs' records, and a line made from each record's message template."""
    out = []
    for log in sorted((FIXTURES / "sglang").rglob("*.log"))[:40]:
        out += frame_text(log.read_text(encoding="utf-8", errors="replace"))
    for r in records:
        if r.error_message:
            out += frame_text(f"{r.error_class or 'RuntimeError'}: "
                              + re.sub(r"\{[^{}]*\}", "7", r.error_message))
    return out


def _matches(engine: Engine, lines: list) -> list:
    return [[(m.pattern.id, m.captures, m.on_header, m.cut) for m in engine.match_all(r)]
            for r in lines]


def test_the_artifact_loads_the_same_catalog_and_matches_the_same(shipped):
    base, pre = shipped
    source = load_catalog(builtin_dir=base, precompiled=False)
    loaded = load_catalog(builtin_dir=base, precompiled_dir=pre)
    assert loaded.precompiled == "used"
    assert (loaded.version, [r.peek("id") for r in loaded.records]) == (
        source.version, [r.id for r in source.records])
    assert all(type(r) is StoredRecord for r in loaded.records)
    store = loaded.records[0]._store
    fast, slow = Engine(loaded.records, cache=None), Engine(source.records, cache=None)
    assert fast.stats.cache == "precompiled"
    # Loading and building the engine read no record's fields: they are set when first read.
    # What reads a field of every record (the release range, records by id) peeks at it.
    span, source_span = release.ReleaseTable(fast.records), release.ReleaseTable(slow.records)
    assert (span.oldest, span.newest) == (source_span.oldest, source_span.newest)
    assert [r.peek("origin") for r in loaded.records] == [r.origin for r in source.records]
    assert fast._framed_index() == slow._framed_index()
    assert store.settled == 0 and fast.patterns.made == 0
    lines = _lines(source.records)
    assert len(lines) > 1000
    got = _matches(fast, lines)
    assert got == _matches(slow, lines)
    assert sum(map(bool, got)) > 1000
    assert 0 < store.settled < len(loaded.records)
    assert 0 < fast.patterns.made < len(fast.patterns)  # the candidates only
    assert [(r.id, r.message_pattern, r.layer, r.origin, r.raised_in) for r in loaded.records] \
        == [(r.id, r.message_pattern, r.layer, r.origin, r.raised_in) for r in source.records]
    # Nothing but the matching fields was read; the rest comes when asked for, as it was.
    assert store.filled == 0
    by_id = {r.id: r for r in source.records}
    for r in loaded.records[:50]:
        assert r.remediation() == by_id[r.id].remediation()
        assert (r.documentation, r.tags, r.sglang_locations) == (
            by_id[r.id].documentation, by_id[r.id].tags, by_id[r.id].sglang_locations)
    assert store.filled == 50
    # A stored record copied with a change has fields of its own: `peek` reads them.
    assert dataclasses.replace(loaded.records[0], id="mine").peek("id") == "mine"


def _exposition(catalog) -> list[str]:
    """The metrics sink's series for `catalog`, without the times they were created at."""
    registry = CollectorRegistry()
    MetricsSink(registry, catalog=catalog, build_version="v", catalog_version="c")
    return [line for line in generate_latest(registry).decode().splitlines()
            if "_created" not in line]


def test_counting_the_catalog_reads_its_columns_and_settles_no_record(shipped):
    base, pre = shipped
    source = load_catalog(builtin_dir=base, precompiled=False)
    loaded = load_catalog(builtin_dir=base, precompiled_dir=pre)
    store = loaded.records[0]._store
    assert resident_columns(loaded.records, ("id", "layer", "origin")) == [
        tuple(r.id for r in source.records), tuple(r.layer for r in source.records),
        tuple(r.origin for r in source.records)]
    series = _exposition(loaded)
    # the zero series of the curated records read their fields: those records only
    assert 0 < store.settled < 300 < len(loaded.records)
    assert series == _exposition(source)
    assert any('layer="generated"' in line for line in series)


def test_the_columns_hold_each_equal_value_once(shipped):
    """Equal strings and tuples of strings are one object in the columns (as pickle loads what
    it wrote once): the records' shared patterns and version lists are not held twice."""
    base, pre = shipped
    store = load_catalog(builtin_dir=base, precompiled_dir=pre).records[0]._store
    for name in ("message_pattern", "sglang_versions", "error_message", "locations"):
        column = store.column(name)
        first: dict[object, object] = {}
        assert all(v is first.setdefault((type(v), v), v) for v in column), name
    versions = store.column("sglang_versions")
    assert len({id(v) for v in versions}) < len(versions) / 2


def test_a_user_layer_compiles_on_its_own_with_the_same_precedence(shipped, tmp_path):
    base, pre = shipped
    source = load_catalog(builtin_dir=base, precompiled=False)
    generated = [r for r in source.records if r.layer == "generated" and r.error_message
                 and r.raised_in is None]
    by_id, by_template, other = generated[3], generated[7], generated[11]
    user = tmp_path / "user.json"
    user.write_text(json.dumps([
        # replaces a built-in record by id, with a pattern of its own
        {"id": by_id.id, "messagePattern": re.escape(other.error_message.split("{")[0])
         + ".*", "errorClass": other.error_class},
        # takes a built-in record's template: the built-in one gives way
        {"id": "user-template", "errorMessage": by_template.error_message,
         "errorClass": by_template.error_class},
        {"id": "user-new", "messagePattern": r"a brand new failure of (?P<what>\w+)"},
    ]))
    fast_cat = load_catalog(builtin_dir=base, precompiled_dir=pre, user_paths=[user])
    slow_cat = load_catalog(builtin_dir=base, precompiled=False, user_paths=[user])
    assert [r.id for r in fast_cat.records] == [r.id for r in slow_cat.records]
    assert fast_cat.version == slow_cat.version
    fast, slow = Engine(fast_cat.records, cache=None), Engine(slow_cat.records, cache=None)
    assert fast.stats.cache == "precompiled+off"  # the user's three records compiled alone
    assert len(fast.patterns) == len(load_catalog(builtin_dir=base, precompiled_dir=pre)
                                     .records[0]._store.matched_records) + 3
    lines = _lines(source.records) + frame_text("RuntimeError: a brand new failure of gpus")
    got = _matches(fast, lines)
    assert got == _matches(slow, lines)
    ids = {m[0] for found in got for m in found}
    assert {"user-template", "user-new", by_id.id} <= ids
    assert by_template.id not in ids
    assert by_id.id not in {r.id for r in fast.records if r.layer == "generated"}


def test_an_artifact_that_does_not_fit_is_not_used_and_says_why(shipped, tmp_path):
    base, pre = shipped
    changed = tmp_path / "patterns"
    shutil.copytree(base, changed)
    seed = changed / "sglang" / "curated" / "runtime.json"
    seed.write_text(seed.read_text() + "\n")
    catalog = load_catalog(builtin_dir=changed, precompiled_dir=pre)
    assert catalog.precompiled.startswith("stale (the catalog's files changed")
    assert not any(type(r) is StoredRecord for r in catalog.records)
    assert load_catalog(builtin_dir=base, precompiled_dir=tmp_path / "none").precompiled \
        .startswith("absent")


def test_a_catalog_file_is_hashed_again_only_when_it_changed(shipped, tmp_path, cache_dir,
                                                             monkeypatch):
    """Each start checks the artifact against the catalog's files; a file whose size, times and
    inode are those it had when it was hashed keeps its digest (kept in the cache directory),
    and a write — even one that keeps its size — makes it hashed again, and the artifact stale."""
    from matcher import cache, precompiled

    base, _pre = shipped
    copy = tmp_path / "patterns"
    shutil.copytree(base, copy)
    hashed: list[str] = []
    real = precompiled.hashlib.file_digest
    monkeypatch.setattr(precompiled.hashlib, "file_digest",
                        lambda f, name: hashed.append(f.name) or real(f, name))
    first = precompiled._file_rows(copy)
    assert len(hashed) == len(first) >= 2  # a new cache directory: every file
    assert (cache_dir / "precompiled-digests.json").is_file()
    hashed.clear()
    assert precompiled._file_rows(copy) == first and hashed == []
    seed = copy / "sglang" / "curated" / "runtime.json"
    text = seed.read_text(encoding="utf-8")
    at = text.index('"')
    seed.write_text(text[:at] + "'" + text[at + 1:], encoding="utf-8")  # same size
    again = precompiled._file_rows(copy)
    assert hashed == [str(seed)]
    changed = {rel for (rel, _, digest), (_, _, before) in zip(again, first, strict=True)
               if digest != before}
    assert changed == {"sglang/curated/runtime.json"}
    cache.use(None)  # no cache directory chosen: every file hashed, nothing written
    hashed.clear()
    (cache_dir / "precompiled-digests.json").unlink()
    assert precompiled._file_rows(copy) == again and len(hashed) == len(again)
    assert not (cache_dir / "precompiled-digests.json").exists()


def test_earlier_pattern_checks_are_read_only_with_patterns_to_check(shipped, cache_dir,
                                                                      monkeypatch):
    """The memory of checked patterns (1.8 MB with the full catalog) is for loading from
    sources: a start on the artifact alone does not read it; a user layer on top, or the
    sources themselves, do."""
    from matcher.catalog.load import PatternFactsCache

    base, pre = shipped
    reads: list[Path] = []
    real = PatternFactsCache.load
    monkeypatch.setattr(PatternFactsCache, "load", lambda self: reads.append(self.path)
                        or real(self))
    alone = load_catalog(builtin_dir=base, precompiled_dir=pre)
    assert alone.precompiled == "used" and reads == []
    user = load_catalog(builtin_dir=base, precompiled_dir=pre, user_paths=[SEED_FILE])
    assert user.precompiled == "used" and len(reads) == 1
    sources = load_catalog(builtin_dir=base, precompiled=False)
    assert [r.id for r in sources.records] == [r.id for r in alone.records]
    assert len(reads) == 2


def test_a_damaged_engine_is_compiled_instead_and_says_so(shipped, tmp_path):
    base, pre = shipped
    damaged = tmp_path / "pre"
    shutil.copytree(pre, damaged)
    data = (damaged / "engine.bin").read_bytes()
    (damaged / "engine.bin").write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    catalog = load_catalog(builtin_dir=base, precompiled_dir=damaged)
    engine = Engine(catalog.records, cache=None)
    assert engine.stats.note.startswith("precompiled engine unusable (damaged)")
    assert engine.stats.cache == "off"
    lines = _lines(catalog.records)[:300]
    source = load_catalog(builtin_dir=base, precompiled=False)
    assert _matches(engine, lines) == _matches(Engine(source.records, cache=None), lines)


def test_the_engine_file_is_checked_whole_once_until_it_changes(shipped, tmp_path, cache_dir,
                                                                  monkeypatch):
    """The engine's 30 MB are hashed at the first start only: later starts know the file by its
    size, times and inode (kept in the cache directory). A write, even one keeping its size,
    has it checked again, and damage found: the engine compiles from the catalog instead."""
    from matcher import precompiled

    base, pre = shipped
    copy = tmp_path / "pre"
    shutil.copytree(pre, copy)
    verified: list[bool] = []
    real = precompiled.decode_form
    monkeypatch.setattr(precompiled, "decode_form", lambda *a, verify=True: verified.append(
        verify) or real(*a, verify=verify))
    notes = []
    for _ in range(3):
        catalog = load_catalog(builtin_dir=base, precompiled_dir=copy)
        notes.append(Engine(catalog.records, cache=None).stats.note)
    assert verified == [True, False, False]
    assert all("unusable" not in n for n in notes)
    data = (copy / "engine.bin").read_bytes()
    (copy / "engine.bin").write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    catalog = load_catalog(builtin_dir=base, precompiled_dir=copy)
    engine = Engine(catalog.records, cache=None)
    assert verified[-1] is True
    assert engine.stats.note.startswith("precompiled engine unusable (damaged)")


# -- the daemon while the catalog compiles -----------------------------------------------------

def _events(out: io.StringIO) -> list[tuple]:
    return [(d["source"], d["offset"], d["event"], d.get("pattern_id"))
            for d in map(json.loads, out.getvalue().splitlines())]


def _run_daemon(log: Path, state: Path, base: Path, *, compile_later: bool, monkeypatch,
                during=None, reads: int | None = None) -> tuple[list[tuple], str]:
    """Run the daemon over `log` from its beginning until it has read it all, with the built-in
    catalog under `base` loaded from its sources; `during(daemon)` runs while the catalog
    compiles (which waits for it). `reads`: the bytes it reads (default: the whole log)."""
    def load(config):
        return load_catalog(builtin_dir=base, precompiled=False,
                            generated=config.sglang_version != "none")

    monkeypatch.setattr(topology, "load_checked_catalog", load)
    gate = threading.Event()

    def held(self):
        gate.wait(60)
        _RUN(self)

    monkeypatch.setattr(topology.Compilation, "_run", held)
    monkeypatch.setattr(topology, "_needs_compiling",
                        lambda config: "the precompiled catalog is absent (test)")
    config = Config(paths=(str(log),), state_dir=state, from_beginning=True,
                    repeat_interval=0.0, poll_interval=0.05, checkpoint_interval=0.2)
    out, err = io.StringIO(), io.StringIO()
    wakeup = Wakeup()
    log_ = stderr_logger(err)
    topo = topology.build(config, log=log_, stdout=out, hooks=topology.Hooks(
        wake=wakeup.set, compile_later=compile_later))
    daemon = Daemon(topo, log=log_, wakeup=wakeup, stdout=out)
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        if compile_later:
            assert topo.compilation is not None
            if during is not None:
                during(daemon)
            gate.set()
            deadline = time.monotonic() + 60
            while daemon.topo.compilation is not None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert daemon.topo.compilation is None, err.getvalue()[-3000:]
        size = log.stat().st_size if reads is None else reads
        deadline = time.monotonic() + 30
        while daemon.topo.pipeline.stats.bytes < size and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        daemon.request_stop()
        thread.join(30)
    return _events(out), err.getvalue()


def test_lines_read_while_the_catalog_compiles_are_matched_again_without_duplicates(
        shipped, tmp_path, monkeypatch):
    """Real logs, half written before the start and half while the catalog compiles: the
    daemon emits at once what the curated layer knows, and in the end exactly the events of a
    daemon that had the full catalog from the start — none lost, none twice."""
    logs = sorted((FIXTURES / "sglang").rglob("*.log"))
    text = "".join(p.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n"
                   for p in logs)
    half = text.index("\n", len(text) // 2) + 1
    whole = tmp_path / "whole.log"
    whole.write_text(text, encoding="utf-8")
    base = shipped[0]
    want, _ = _run_daemon(whole, tmp_path / "s1", base, compile_later=False,
                          monkeypatch=monkeypatch)
    log = tmp_path / "server.log"
    log.write_text(text[:half], encoding="utf-8")
    early: list[tuple] = []

    def during(daemon):
        deadline = time.monotonic() + 30
        while daemon._catch_up.bytes < half and time.monotonic() < deadline:
            time.sleep(0.02)
        with log.open("a", encoding="utf-8") as f:
            f.write(text[half:])
        while daemon._catch_up.bytes < len(text.encode()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert daemon._catch_up.bytes == len(text.encode()), (daemon._catch_up.bytes, half)
        early.extend(_events(daemon.stdout))
        assert daemon.topo.compilation.reason == "loading catalog"

    got, err = _run_daemon(log, tmp_path / "s2", base, compile_later=True,
                           monkeypatch=monkeypatch, during=during)
    rename = {str(log): str(whole)}
    got = [(rename[s], *rest) for s, *rest in got]
    assert len(want) > 100
    assert sorted(got) == sorted(want)
    assert len(set(got)) == len(got)
    assert 0 < len(early) < len(want)  # the curated layer's events came first
    assert all(pid is not None for _, _, _, pid in early)
    done = [json.loads(x) for x in err.splitlines() if '"catalog_compiled"' in x]
    assert done and done[0]["events_already_emitted"] >= len(early)
    # (the rest: tracebacks and groups still open when it came in)
    assert done[0]["events_added"] <= len(want) - done[0]["events_already_emitted"]


def test_a_stop_while_the_catalog_compiles_waits_for_it_and_stays_exactly_once(
        shipped, tmp_path, monkeypatch):
    """SIGTERM before the full catalog is in: the daemon waits for it, emits what it adds and
    saves its positions; started again, it emits nothing twice."""
    logs = sorted((FIXTURES / "sglang" / "launch").glob("*.log"))[:20]
    log = tmp_path / "server.log"
    log.write_text("".join(p.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n"
                           for p in logs), encoding="utf-8")
    size = log.stat().st_size
    base = shipped[0]
    want, _ = _run_daemon(log, tmp_path / "s1", base, compile_later=False,
                          monkeypatch=monkeypatch)

    def during(daemon):
        deadline = time.monotonic() + 30
        while daemon._catch_up.bytes < size and time.monotonic() < deadline:
            time.sleep(0.02)
        daemon.request_stop()  # the compile is still held: the stop waits for it

    got, err = _run_daemon(log, tmp_path / "s2", base, compile_later=True,
                           monkeypatch=monkeypatch, during=during)
    assert len(want) > 10
    assert sorted(got) == sorted(want)
    assert '"stopping_while_compiling"' not in err
    again, _ = _run_daemon(log, tmp_path / "s2", base, compile_later=False,
                           monkeypatch=monkeypatch, reads=0)
    assert again == []
