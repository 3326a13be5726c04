"""Shared helpers: frame text the way the daemon does, and find fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.catalog.check import frame_text

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def frame():
    return frame_text
