"""hatch_build.py, the wheel's build hook, in the cases a full build does not show here: pip's
build environment kept for the precompiling child, and a platform without Hyperscan (a working
wheel, no precompiled catalog, and a message). The real build: tests/test_image.py."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def hook_module() -> Any:
    spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_precompiling_child_keeps_pips_build_environment():
    """pip's isolated build reaches its environment through PYTHONPATH: the child gets the
    source tree first and every entry that was there after it (replacing it lost `regex`)."""
    hook = hook_module()
    pip = os.pathsep.join(["/tmp/pip-build-env-x/site", "/tmp/pip-build-env-x/overlay"])
    env = hook.child_env(Path("/src"), {"PYTHONPATH": pip, "PATH": "/bin"})
    assert env == {"PYTHONPATH": os.pathsep.join(["/src", pip]), "PATH": "/bin"}
    assert hook.child_env(Path("/src"), {})["PYTHONPATH"] == "/src"


class _App:
    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []

    def display_warning(self, text: str) -> None:
        self.said.append(("warning", text))

    def display_info(self, text: str) -> None:
        self.said.append(("info", text))


def test_without_hyperscan_the_wheel_is_built_plain_and_the_build_says_so(tmp_path,
                                                                          monkeypatch):
    """Hyperscan not importable in the build environment: no precompile is attempted, the
    wheel stays pure Python (`py3-none-any`) with nothing force-included, and the build prints
    why and what it costs."""
    hook = hook_module()
    monkeypatch.setitem(sys.modules, "hyperscan", None)  # `import hyperscan` raises ImportError
    monkeypatch.delenv("SGLANG_MATCHER_SKIP_PRECOMPILE", raising=False)
    app = _App()
    plugin = hook.PrecompileHook(str(REPO), {}, None, None, str(tmp_path), "wheel", app)
    build_data: dict[str, Any] = {"force_include": {}, "pure_python": True, "infer_tag": False}
    plugin.initialize("standard", build_data)
    assert build_data == {"force_include": {}, "pure_python": True, "infer_tag": False}
    [(kind, text)] = app.said
    assert kind == "warning"
    assert text.startswith("the wheel ships no precompiled catalog (Hyperscan is not "
                           "installable for this platform")
    assert text.endswith("its first start compiles the built-in catalog (one to two minutes, "
                         "cached afterwards)")
    assert not list(tmp_path.iterdir())
