"""`require_tool`: a missing Debian tool skips its test with the reason, and fails it in CI."""

from __future__ import annotations

import ast
import stat
from pathlib import Path

import debian
import pytest
from debian import require_tool

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds one empty directory, and /usr/sbin is not searched either."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(debian, "_EXTRA_DIRS", ())
    return empty


def test_missing_tool_skips_with_the_reason(bare_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_tool("logrotate")
    assert "needs logrotate (Debian package logrotate" in str(skipped.value)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_tool("promtool", "prometheus")
    assert "Debian package prometheus" in str(skipped.value)


def test_missing_tool_fails_when_ci_is_set(bare_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_tool("logrotate")
    assert "needs logrotate" in str(failed.value) and "CI" in str(failed.value)


def test_present_tool_is_its_path(bare_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    tool = bare_path / "logrotate"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert require_tool("logrotate") == str(tool)
    elsewhere = bare_path.parent / "libexec-tool"
    elsewhere.write_text("#!/bin/sh\n")
    elsewhere.chmod(0o755)
    assert require_tool("libexec-tool", also=(str(elsewhere),)) == str(elsewhere)


def test_ci_run_sets_ci() -> None:
    """`.ci/run` exports CI, so a tool CI failed to install fails the run instead of skipping."""
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert "export CI=1" in lines
    assert lines.index("export CI=1") < lines.index("python3 -m pytest")


def test_every_required_tool_comes_from_a_package_ci_installs() -> None:
    """Each `require_tool(name, package)` in the tests names a package in .ci/apt-packages."""
    listed = {line.strip() for line in (REPO / ".ci" / "apt-packages").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    needed: set[tuple[str, str]] = set()
    for path in Path(__file__).parent.rglob("*.py"):
        if path.name == Path(__file__).name:  # this file's made-up tools
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require_tool" \
                    and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                name = node.args[0].value
                package = node.args[1].value if len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant) else name
                needed.add((name, str(package)))
    assert {"logrotate", "mtail", "journalctl", "systemd-analyze"} <= {n for n, _ in needed}
    assert {(n, p) for n, p in needed if p not in listed} == set()
