"""The performance figures a reader sees are the ones the bench scripts measured.

`docs/performance.md` is rendered from `bench/results/` by `bench/report.py`; the README's
performance lines quote that page. A result file rewritten by a bench run, or a figure typed
into the README, fails here until the page is rendered again or the figure matches.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import report  # noqa: E402

NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)")


def readme_performance_lines() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## How it is built and how fast it is", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def figures(text: str) -> list[str]:
    return [m.group(1) for m in NUMBER.finditer(text)]


def quoted(figure: str, page_figures: list[float]) -> bool:
    """`figure` is one of the page's, rounded as the README writes it."""
    value = float(figure.replace(",", ""))
    decimals = len(figure.split(".", 1)[1]) if "." in figure else 0
    return any(round(p, decimals) == value for p in page_figures)


def test_the_page_is_what_the_results_render():
    assert (REPO / "docs" / "performance.md").read_text(encoding="utf-8") == report.render(), (
        "docs/performance.md differs from bench/results: run `python bench/report.py`")


def test_every_readme_figure_is_on_the_page():
    page = [float(f.replace(",", "")) for f in figures(report.render())]
    lines = readme_performance_lines()
    assert len(lines) >= 4
    unsourced = [(figure, line) for line in lines for figure in figures(line)
                 if figure not in {"1", "2"} and not quoted(figure, page)]
    assert unsourced == [], "README figures not on docs/performance.md: " + repr(unsourced)


def test_the_check_fails_on_a_figure_the_results_do_not_hold():
    page = [float(f.replace(",", "")) for f in figures(report.render())]
    assert quoted("0.64", page)
    assert not quoted("0.63", page)


def test_the_readme_stays_short_and_its_performance_part_is_five_lines_with_a_link():
    """README.md is at most 200 lines; its performance part is the figures' lines and one line
    linking docs/performance.md, each short."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    section = text.split("## How it is built and how fast it is", 1)[1].split("\n## ", 1)[0]
    figures_lines = readme_performance_lines()
    [link] = [line for line in section.splitlines() if "(docs/performance.md)" in line]
    assert len(figures_lines) + 1 <= 5
    assert all(len(line) <= 160 for line in [*figures_lines, link])
