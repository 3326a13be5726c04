"""The glob walk: glob's answers where glob ends, an end where it does not, and honest gaps."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from matcher.source.discovery import DiscoveryStopped, expand, why_nothing


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    for rel in ("x.log", "x.log.1", "a/y.log", "a/b/z.log", "c/w.log", "c/w.txt", ".h/q.log",
                "a/.hidden.log", "pods/ns_p_1/sglang/0.log", "pods/ns_p_1/sglang/1.log.20260101"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x\n")
    (tmp_path / "c" / "link.log").symlink_to("../x.log")
    return tmp_path


@pytest.mark.parametrize("pattern", [
    "*.log", "*.log*", "*/*.log", "**/*.log", "a/**/*.log", "pods/*/sglang/*.log*",
    "[ac]/*.log", "?/y.log", "x.log", "nothing/*.log", "a/b/z.log", "**/z.log", ".h/*.log",
])
def test_same_paths_as_glob_on_a_tree_without_loops(tree, pattern, monkeypatch):
    """Where glob terminates, the walk finds exactly what it finds."""
    monkeypatch.chdir(tree)
    assert sorted(expand(pattern).paths) == sorted(glob.glob(pattern, recursive=True))
    absolute = str(tree / pattern)
    assert sorted(expand(absolute).paths) == sorted(glob.glob(absolute, recursive=True))


def test_symlink_loops_are_walked_once(tmp_path):
    """Two loops: each directory is listed once, the walk ends, the real file is found once."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "up").symlink_to("../..")
    (tmp_path / "a" / "peer").symlink_to("../c")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "back").symlink_to("../a")
    (tmp_path / "a" / "b" / "server.log").write_text("x\n")
    found = expand(str(tmp_path / "**" / "*.log"))
    assert found.paths == [str(tmp_path / "a" / "b" / "server.log")]
    assert found.complete and found.entries < 20


def test_the_entry_cap_stops_the_walk_and_says_so(tmp_path):
    for k in range(50):
        (tmp_path / f"f{k:02d}.log").write_text("x\n")
    found = expand(str(tmp_path / "*.log"), max_entries=10)
    assert found.capped and not found.complete


def test_a_stop_request_ends_the_walk(tmp_path):
    for k in range(600):
        (tmp_path / f"f{k:03d}.log").write_text("x\n")
    with pytest.raises(DiscoveryStopped):
        expand(str(tmp_path / "*.log"), should_stop=lambda: True)


def test_an_unlistable_directory_makes_the_result_incomplete(tmp_path, monkeypatch):
    """A listing error other than 'not there' is a gap, with its reason — never 'no files'."""
    (tmp_path / "d").mkdir()
    real_scandir = os.scandir

    def failing(path):  # what EMFILE looks like from inside the walk
        if str(path).endswith("/d"):
            raise OSError(24, "Too many open files")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", failing)
    found = expand(str(tmp_path / "d" / "*.log"))
    assert (found.paths, found.complete, found.descriptors_exhausted) == ([], False, True)
    assert found.problems == [f"{tmp_path / 'd'}: Too many open files"]


def test_why_nothing_names_the_likely_mistake(tmp_path):
    (tmp_path / "logs").mkdir()
    assert why_nothing(str(tmp_path / "logs")).startswith(f"{tmp_path / 'logs'} is a directory")
    assert "does not exist" in why_nothing(str(tmp_path / "lgos" / "*.log"))
    assert "no file matches it now" in why_nothing(str(tmp_path / "logs" / "*.log"))
