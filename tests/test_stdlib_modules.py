"""`No module named 'X'` for a module of Python's own standard library: the platform (Windows
has no `resource`) or the way this Python was built (no `_lzma` without liblzma's headers), not
a package to pip install (matcher/catalog/stdlib_modules.py). Lines in tests/fixtures/stdlib/
(README.md there says where each comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import scan

from matcher.catalog import stdlib_modules

FIXTURES = Path(__file__).parent / "fixtures" / "stdlib"


@pytest.fixture(scope="module")
def engine(loaded):
    return loaded[1]


def _error(engine, name: str) -> dict:
    [e] = [e for e in scan(engine, (FIXTURES / name).read_text()) if e["pattern_id"]]
    return e


def test_a_unix_only_module_on_windows_says_linux_not_pip(engine):
    e = _error(engine, "windows-resource.log")
    solutions = e["remediation"]["solutions"]
    assert solutions[0].startswith("Run sglang on Linux: on Windows, under WSL2")
    assert not any("pip install sgl-kernel" in s or "sglang[all]" in s for s in solutions)
    assert "example_fix" not in e["remediation"] or "pip" not in e["remediation"]["example_fix"]


@pytest.mark.parametrize(("name", "headers"), [
    ("unbuilt-lzma.log", "liblzma-dev"), ("unbuilt-bz2.log", "libbz2-dev"),
    ("unbuilt-sqlite3.log", "libsqlite3-dev"), ("unbuilt-ctypes.log", "libffi-dev")])
def test_a_module_python_was_built_without_names_the_headers_and_the_rebuild(engine, name,
                                                                             headers):
    e = _error(engine, name)
    first = e["remediation"]["solutions"][0]
    assert first.startswith(f"Install the headers and rebuild this Python: `apt-get install "
                            f"{headers}`")
    assert len(e["remediation"]["solutions"]) == 3  # the record's pip advice is left out


def test_a_module_of_a_package_is_not_python_s_own():
    for module in ("vllm", "sgl_kernel", "resource_pool", "lzma_tools", "flashinfer"):
        assert stdlib_modules.answer(module) is None


def test_a_linux_only_function_on_macos_says_linux_not_a_version(engine):
    e = _error(engine, "macos-sched-getaffinity.log")
    assert e["remediation"]["documentation"].startswith(
        "`os.sched_getaffinity` is part of Python's standard library on Linux only")
    assert e["remediation"]["solutions"][0].startswith("Run sglang on Linux")
    assert not any("Install the os build" in s for s in e["remediation"]["solutions"])


def test_another_attribute_of_the_standard_library_is_the_pythons_version(engine):
    e = _error(engine, "removed-collections-mapping.log")
    solutions = e["remediation"]["solutions"]
    assert solutions[0].startswith("Run the Python the sglang release requires")
    assert "print(collections.__file__)" in solutions[1]


def test_a_package_attribute_is_not_answered_here():
    assert stdlib_modules.attribute_answer("transformers", "Qwen2VLConfig") is None
    assert stdlib_modules.attribute_answer("torch.cuda", "MemPool") is None
