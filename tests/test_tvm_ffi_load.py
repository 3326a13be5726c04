"""tvm-ffi's `Failed to load dynamic shared library <module> <dlerror>`: the cause the loader's
error names, answered per event (matcher/catalog/abi.py), on tracebacks of runs here
(tests/fixtures/tvm_ffi/README.md)."""

from __future__ import annotations

from pathlib import Path

from matcher.catalog import abi

FIXTURES = Path(__file__).parent / "fixtures" / "tvm_ffi"


def _last_line(name: str) -> str:
    return (FIXTURES / name).read_text().rstrip("\n").rsplit("\n", 1)[-1]


def test_a_missing_library_names_the_module_and_the_library() -> None:
    line = _last_line("load-module-missing-library.log")
    assert abi.computes(line)
    got = abi.remedy(line, None)
    assert got is not None
    assert got.documentation.startswith("tvm-ffi could not load /tmp/s44-tvmffi/so/libfoo.so: "
                                        "it links libmissing.so.13")
    assert got.solutions[0].startswith("Install what provides libmissing.so.13")
    assert "for the CUDA your torch uses" in got.solutions[1]


def test_a_library_of_the_soname_table_gets_its_package_then_the_rebuild() -> None:
    got = abi.tvm_ffi_answer("/venv/lib/python3.12/site-packages/deep_gemm/_C.so",
                             "libcudart.so.13")
    assert "the deep-gemm package's _C.so" in got.documentation
    assert "libcudart.so.13 is installed by the pip package nvidia-cuda-runtime" \
        in got.documentation
    assert got.installs and got.installs[0].startswith("nvidia-cuda-runtime==")
    assert "install a build of deep-gemm for the CUDA your torch uses" in got.solutions[-1]


def test_an_undefined_symbol_is_the_symbol_answer() -> None:
    line = _last_line("load-module-undefined-symbol.log")
    got = abi.remedy(line, None)
    assert got is not None
    assert "needs `undefined_var`, which no library loaded defines" in got.documentation
