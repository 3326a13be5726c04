"""Where the caches go: chosen by the application, never by the library.

Loading the full catalog parses 70 MB of records, checks 30,000 patterns and compiles one
Hyperscan database; three caches (parsed files, checked patterns, the compiled engine) make a
warm start take a second instead of half a minute. Library code writes them only into the
directory the application gave here with `use()` — `sglang-matcher` gives
`default_cache_dir()` at start, a test session its own — and without one it keeps no cache:
a program importing `matcher` never finds files of ours in its home directory.
"""

from __future__ import annotations

import os
from pathlib import Path

_directory: Path | None = None


def default_cache_dir() -> Path:
    """`$SGLANG_MATCHER_CACHE_DIR`, else `$XDG_CACHE_HOME/sglang-matcher`, else ~/.cache/…"""
    explicit = os.environ.get("SGLANG_MATCHER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sglang-matcher"


def use(directory: Path | None) -> None:
    """Keep caches in `directory` from now on (None: keep none)."""
    global _directory
    _directory = directory


def directory() -> Path | None:
    """The directory the application chose, if it chose one."""
    return _directory
