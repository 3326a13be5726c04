"""Library code keeps caches only where the application said: never in a home directory of its
own accord."""

from __future__ import annotations

import json

from matcher import cache
from matcher.catalog import load_catalog
from matcher.engine import Engine


def _big_catalog(path):
    """1,200 records and over 1 MiB: large enough for all three caches (parsed file, checked
    patterns, compiled engine) to be worth keeping."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(1200):
            f.write(json.dumps({
                "id": f"r{i:04d}",
                "messagePattern": f"unit failure {words[i % 8]} number {i:04d} in stage (\\w+)",
                "documentation": f"Record {i}: " + "filler text " * 80,
            }) + "\n")


def test_no_cache_without_a_directory_and_all_three_in_the_one_given(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("SGLANG_MATCHER_CACHE_DIR", raising=False)
    catalog_file = tmp_path / "big.jsonl"
    _big_catalog(catalog_file)
    assert catalog_file.stat().st_size > 1 << 20
    previous = cache.directory()
    try:
        cache.use(None)  # a program that imports matcher and chose nothing
        catalog = load_catalog(builtin=False, user_paths=[catalog_file])
        assert not catalog.issues and len(catalog.records) == 1200
        Engine(catalog.records)
        assert not home.exists()
        chosen = tmp_path / "chosen"
        cache.use(chosen)
        Engine(load_catalog(builtin=False, user_paths=[catalog_file]).records)
        kinds = sorted({p.name.split("-")[0] for p in chosen.iterdir()})
        assert kinds == ["engine", "parsed", "patterns"]
        assert not home.exists()
    finally:
        cache.use(previous)


def test_the_test_session_caches_in_a_temporary_directory_never_the_users():
    """The session's cache (conftest) is a temporary directory of its own, named for the daemons
    the tests start; the user's ~/.cache/sglang-matcher (or $XDG_CACHE_HOME's) is not it."""
    import os
    import tempfile
    from pathlib import Path

    chosen = cache.directory()
    assert chosen is not None and chosen == Path(os.environ["SGLANG_MATCHER_CACHE_DIR"])
    assert chosen.parent == Path(tempfile.gettempdir())
    assert chosen.name.startswith("sglang-matcher-test-cache-")
    users = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sglang-matcher"
    assert chosen != users
