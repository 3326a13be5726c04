"""Debian tools the tests drive for real (`.ci/apt-packages`): found, or skipped — or failed in CI.

`require_tool("logrotate")` returns the tool's path. Where it is absent the test is skipped with
the reason (which tool, which Debian package) — unless the environment variable `CI` is set
(`.ci/run` sets it), where a missing tool is a failure: CI installs every package in the list,
so a tool missing there is a broken CI, not a test to skip.

Kept out of `conftest.py` (which re-exports it) so test modules can import it by a name no
other conftest shares: `from debian import require_tool`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable

import pytest

# Where Debian puts tools that are not on a non-root user's PATH.
_EXTRA_DIRS = ("/usr/sbin", "/sbin")


def require_tool(name: str, package: str | None = None, *, also: Iterable[str] = (),
                 module: bool = False) -> str:
    """The path of `name` (on PATH, in /usr/sbin, or one of the paths in `also`), else skip — or
    fail when `CI` is set. `package` is the Debian package that ships it (default: `name`);
    `module=True` when called at a test module's top level."""
    found = shutil.which(name) or next(
        (p for p in (*(os.path.join(d, name) for d in _EXTRA_DIRS), *also)
         if os.path.isfile(p) and os.access(p, os.X_OK)), None)
    if found:
        return found
    why = (f"needs {name} (Debian package {package or name}, listed in .ci/apt-packages): "
           f"not found on PATH")
    if os.environ.get("CI"):
        pytest.fail(f"{why}, and CI is set: CI must install it", pytrace=False)
    pytest.skip(why, allow_module_level=module)
