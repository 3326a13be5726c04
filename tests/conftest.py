"""Shared helpers: frame text the way the daemon does, find fixtures, and the full catalog with
its engine and every real log of the repository for the scan tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from debian import require_tool

from matcher import cache
from matcher.catalog.check import frame_text

# The test session is the application here: it chooses the cache directory the library may
# write — one of its own, never the user's ~/.cache/sglang-matcher (a session once wrote
# ~200 MB there). Made once by the main process and named in SGLANG_MATCHER_CACHE_DIR, so the
# xdist workers and every daemon a test starts share it (the catalog compiled once a session,
# `_full_catalog_compiled_once`), and removed when the session ends.
_SESSION_CACHE = "SGLANG_MATCHER_TEST_SESSION_CACHE"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the main process: the workers inherit its environment
        os.environ[_SESSION_CACHE] = tempfile.mkdtemp(prefix="sglang-matcher-test-cache-")
        os.environ["SGLANG_MATCHER_CACHE_DIR"] = os.environ[_SESSION_CACHE]
    cache.use(cache.default_cache_dir())


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and os.environ.get(_SESSION_CACHE):
        shutil.rmtree(os.environ.pop(_SESSION_CACHE), ignore_errors=True)

__all__ = ["FIXTURES", "REPO", "frame", "require_tool"]

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]
# Every real log of the repository: the field excerpts and launches, and the examples.
REAL_LOGS = sorted([*FIXTURES.rglob("*.log"), *(REPO / "examples" / "logs").glob("*.log")])


@pytest.fixture(scope="session", autouse=True)
def _full_catalog_compiled_once():
    """Compile the built-in catalog once, into the cache the daemons under test read.

    Where no precompiled catalog fits (a checkout, CI's editable install) a daemon reads with the
    curated layer and compiles the full catalog in a thread; every daemon a test stopped before
    that finished compiled it again, and a few of them at once took the two cores from the
    daemon a timing-sensitive test was watching (a copytruncate copy judged too late, read
    twice). Compiled here, each daemon has the full catalog from the cache in about a second,
    as a deployed one has it from the wheel's precompiled catalog."""
    from matcher.catalog import load_catalog
    from matcher.engine import Engine

    Engine(load_catalog().records)


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


@pytest.fixture(scope="module")
def loaded():
    """The full built-in catalog and its engine, made once a module: (catalog, engine)."""
    from matcher.catalog import load_catalog
    from matcher.engine import Engine

    catalog = load_catalog()
    return catalog, Engine(catalog.records)


@pytest.fixture
def real_logs():
    """Every real log of the repository (`REAL_LOGS`)."""
    return REAL_LOGS


@pytest.fixture(scope="module")
def concatenated(tmp_path_factory):
    """Every real log of the repository in one file, each ending its last line: cuts of a
    parallel scan fall inside tracebacks, multi-rank failures and repeats."""
    path = tmp_path_factory.mktemp("logs") / "all.log"
    path.write_bytes(b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in REAL_LOGS))
    return path
