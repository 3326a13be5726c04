"""The fault suite's sizes and measuring helpers.

CI runs short versions of the long cases (fewer lines, fewer kills); `--full` (or
`SGLANG_MATCHER_FAULTS=full`) runs the sizes the figures of docs/reliability.md come from:

    python -m pytest -n 0 tests/faults --full -s      # each test prints its FIGURE line

Figures are counts and bounds (lines lost, duplicated, peak RSS), never durations: the machines
that run this are shared and noisy.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # faultkit
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # watch_harness


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true", default=False,
                     help="fault suite at docs/reliability.md's sizes (minutes, not seconds)")


@dataclass(frozen=True)
class Scale:
    full: bool
    storm_lines: int  # rotation storm
    kills: int  # SIGKILLs in a row
    burst_lines: int  # lines written at once
    long_line_mb: int  # a line with no newline
    traceback_lines: int  # frames in one traceback


@pytest.fixture(scope="session")
def scale(request: pytest.FixtureRequest) -> Scale:
    full = request.config.getoption("--full") or os.environ.get("SGLANG_MATCHER_FAULTS") == "full"
    if full:
        return Scale(True, 100_000, 20, 1_000_000, 100, 1_000_000)
    return Scale(False, 20_000, 5, 200_000, 100, 100_000)
