"""`write_atomic`: the old content or the new, never half; no temporary file left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from matcher.atomic import write_atomic


def test_replaces_text_and_bytes_and_makes_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "state.json"
    write_atomic(target, "é1")
    assert target.read_text(encoding="utf-8") == "é1"
    write_atomic(target, b"\x00two", durable=True)
    assert target.read_bytes() == b"\x00two"
    assert os.listdir(target.parent) == ["state.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["state.json"]


def test_no_other_module_writes_through_a_temporary_file_of_its_own() -> None:
    """The write-to-temp-then-rename dance lives in matcher/atomic.py only."""
    package = Path(__file__).resolve().parents[1] / "matcher"
    own = {p.relative_to(package).as_posix() for p in package.rglob("*.py")
           if "mkstemp(" in p.read_text(encoding="utf-8")}
    assert own == {"atomic.py"}
