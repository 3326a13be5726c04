"""Shared helpers: frame text the way the daemon does, and find fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from debian import require_tool

from matcher.catalog.check import frame_text

__all__ = ["FIXTURES", "REPO", "frame", "require_tool"]

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def frame():
    return frame_text
