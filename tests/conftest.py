"""Shared helpers: frame text the way the daemon does, and find fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from debian import require_tool

from matcher import cache
from matcher.catalog.check import frame_text

# The test session is the application here: it chooses the cache directory the library may
# write (the user's, as `sglang-matcher` would), so that in-process catalog loads stay warm.
cache.use(cache.default_cache_dir())

__all__ = ["FIXTURES", "REPO", "frame", "require_tool"]

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache_dir(tmp_path):
    """A cache directory of the test's own, chosen as the application would (`matcher.cache`)."""
    previous = cache.directory()
    chosen = tmp_path / "cache"
    cache.use(chosen)
    yield chosen
    cache.use(previous)


@pytest.fixture
def frame():
    return frame_text
