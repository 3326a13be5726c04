"""The install and build failures' records (`matcher.catalog.buildjit`): the facts they come
from, the catalog they make, and real output they recognize.

Real text only: `tests/fixtures/buildjit/` holds what pip 23.2.1 and 26.3, uv 0.7.20 and 0.13.9,
nvcc 13.0 and gcc 12.2 printed when run here (its README gives each command), and the train
excerpts are lines users pasted in public threads (each with its URL in its index)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pip
import pytest
from generated_layer import engine_of, scan

from matcher.catalog import buildjit, buildjit_facts
from matcher.engine import Engine

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "patterns" / "sglang" / "generated"
REAL = ROOT / "tests" / "fixtures" / "buildjit"
FIELD = ROOT / "tests" / "fixtures" / "field"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """The curated layer and the buildjit records, as the built-in catalog holds them."""
    return engine_of(tmp_path_factory.mktemp("builtin"), ("buildjit.jsonl",))


def slugs(engine: Engine, text: str) -> list[str]:
    by_id = {r.id: r.slug for r in engine.records}
    return [by_id.get(e["pattern_id"], e["pattern_id"]) for e in scan(engine, text)]


def event_of(engine: Engine, text: str, slug: str) -> dict[str, Any]:
    by_id = {r.id: r.slug for r in engine.records}
    return next(e for e in scan(engine, text) if by_id.get(e["pattern_id"]) == slug)


# -- the generator ---------------------------------------------------------------------------

def test_the_committed_records_are_what_the_facts_make() -> None:
    made = buildjit.build(buildjit.read_facts(GENERATED / "buildjit.facts.tsv"))
    committed = (GENERATED / "buildjit.jsonl").read_text(encoding="utf-8")
    assert [r["id"] for r in made] == [line.split('"id": "')[1][:16]
                                       for line in committed.splitlines()]
    for r in made:
        assert r["solutions"], r["slug"]
        assert r["sourcePackage"] and r["generator"] == "matcher.catalog.buildjit"


def test_the_installed_pip_holds_the_literals_the_facts_say() -> None:
    """pip's own source, read again: every pip message the facts give this version is in it,
    and the messages every pip since the 2020 resolver prints are found."""
    rows = buildjit_facts.pip_rows(Path(pip.__file__).parent)
    found = {key for _, _, version, key in rows}
    assert {"pip-no-version", "pip-no-distribution", "pip-conflict",
            "pip-resolution-impossible", "pip-failed-building-wheel"} <= found
    facts = buildjit.read_facts(GENERATED / "buildjit.facts.tsv")
    said = {k for k, read in facts.read.items() if ("pip", pip.__version__) in read}
    if said:
        assert said == found


def test_the_facts_tell_pip_versions_apart() -> None:
    """pip 24.1 reworded the end of a failed build: each version read has only its own."""
    facts = buildjit.read_facts(GENERATED / "buildjit.facts.tsv")
    assert ("pip", "23.2.1") in facts.read["pip-could-not-build-wheels"]
    assert ("pip", "26.3") not in facts.read["pip-could-not-build-wheels"]
    assert facts.read["pip-failed-installable-wheels"] == (("pip", "26.3"),)


def test_torch_cpp_extension_sites_carry_what_to_do() -> None:
    made = {r["errorMessage"]: r for r in buildjit.build(
        buildjit.read_facts(GENERATED / "buildjit.facts.tsv")) if r["sourcePackage"] == "torch"}
    home = made["CUDA_HOME environment variable is not set. Please set it to your CUDA install "
                "root."]
    assert home["errorClass"] == "OSError" and "CUDA_HOME" in home["solutions"][0]
    assert home["sourceVersions"] == ["2.9.1..2.14.1"]
    assert not any(m.startswith("spec.loader") for m in made)  # internal: no record


def test_gcc_prints_what_the_header_record_reads() -> None:
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc is not None
    rows = buildjit_facts.compiler_rows("gcc", Path(gcc))
    assert [key for *_, key in rows] == ["cc-missing-header", "ld-cannot-find-library",
                                         "ld-undefined-reference"]


def test_cargo_prints_what_its_records_read() -> None:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("no cargo here: tests/fixtures/buildjit/cargo.txt holds what cargo printed")
    keys = {key for *_, key in buildjit_facts.cargo_rows(Path(cargo))}
    assert keys == {"cargo-could-not-compile", "cargo-rustc-too-old"}


def test_an_update_keeps_the_rows_of_tools_not_read_again(tmp_path: Path) -> None:
    facts = tmp_path / "facts.tsv"
    facts.write_text("literal\tpip\t26.3\tpip-conflict\nliteral\tgcc\t1.0\tcc-missing-header\n"
                     "wheels\tsglang\t0.5\t>=3.10\tsdist\n", encoding="utf-8")
    kept = buildjit_facts.kept_rows(facts, {("gcc", "1.0"), ("pip", "23.2.1")})
    assert kept == [("literal", "pip", "26.3", "pip-conflict"),
                    ("wheels", "sglang", "0.5", ">=3.10", "sdist")]


def test_nvcc_prints_what_its_records_read() -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc here: tests/fixtures/buildjit/nvcc.txt holds what nvcc 13.0 printed")
    keys = {key for *_, key in buildjit_facts.compiler_rows("nvcc", Path(nvcc))}
    assert {"nvcc-errors", "nvcc-errors-flashinfer-jit"} <= keys
    cmake = shutil.which("cmake")
    if cmake is not None:  # CMake's compiler check, run on nvcc
        keys = {key for *_, key in buildjit_facts.cmake_rows(Path(cmake))}
        assert keys == {"cmake-error", "cmake-cuda-compiler-broken"}


# -- real output, run here -------------------------------------------------------------------

def test_pip_resolution_failures(engine: Engine) -> None:
    text = (REAL / "pip_resolve.txt").read_text(encoding="utf-8")
    got = slugs(engine, text)
    assert got.count("pip-no-version-sgl-kernel") == 2
    assert got.count("pip-no-distribution-sgl-kernel") == 2
    assert got.count("pip-conflict") == 2 and got.count("pip-resolution-impossible") == 2
    event = event_of(engine, text, "pip-no-distribution-sgl-kernel")
    assert event["captures"]["package"] == "sgl-kernel"
    assert event["captures"]["spec"] == "==0.0.99"
    solutions = " ".join(event["remediation"]["solutions"])
    assert "sgl-kernel 0.3.21" in solutions and "x86_64" in solutions and "3.10" in solutions


def test_pip_platform_and_python_failures(engine: Engine) -> None:
    got = slugs(engine, (REAL / "pip_platform.txt").read_text(encoding="utf-8"))
    assert "pip-ignored-python" in got and "pip-no-distribution-sglang" in got
    assert "pip-no-version-sgl-kernel" in got
    got = slugs(engine, (REAL / "pip_short.txt").read_text(encoding="utf-8"))
    assert got == ["pip-no-version", "pip-no-distribution", "pip-no-version-sglang-kernel",
                   "pip-no-distribution-sglang-kernel"]
    got = slugs(engine, (REAL / "pip_wheeltag.txt").read_text(encoding="utf-8"))
    assert got == ["pip-unsupported-wheel", "pip-unsupported-wheel"]
    got = slugs(engine, (REAL / "pip_uv_urllib3.txt").read_text(encoding="utf-8"))
    assert {"pip-no-version", "pip-no-distribution", "uv-no-solution", "uv-no-version"} <= set(got)


def test_pip_build_failures(engine: Engine) -> None:
    got = slugs(engine, (REAL / "pip_build.txt").read_text(encoding="utf-8"))
    for slug in ("pip-subprocess-exited", "pip-step-failed", "cc-missing-header",
                 "pip-failed-building-wheel", "pip-failed-to-build",
                 "pip-could-not-build-wheels", "pip-failed-installable-wheels"):
        assert slug in got, slug


def test_uv_failures_old_and_new(engine: Engine) -> None:
    old = slugs(engine, (REAL / "uv_old.txt").read_text(encoding="utf-8"))
    new = slugs(engine, (REAL / "uv.txt").read_text(encoding="utf-8"))
    for got in (old, new):
        assert {"uv-no-solution", "uv-failed-to-build", "cc-missing-header"} <= set(got)
    assert "uv-no-version-sgl-kernel" in old and "uv-no-version-sgl-kernel" in new
    assert "uv-missing-library" in new  # 0.7.20 wraps the hint over lines


def test_nvcc_and_gcc_output(engine: Engine) -> None:
    got = slugs(engine, (REAL / "nvcc.txt").read_text(encoding="utf-8"))
    assert got.count("nvcc-errors") == 2
    assert got.count("nvcc-identifier-undefined") == 4
    assert got.count("nvcc-unsupported-gpu-architecture") == 3  # curated
    text = (REAL / "gcc_nvcc_header.txt").read_text(encoding="utf-8")
    headers = [e["captures"]["header"] for e in scan(engine, text)]
    assert headers == ["Python.h", "flashinfer/attention/missing_header.cuh"]


# -- lines users pasted (train split) --------------------------------------------------------

def test_train_pip_no_distribution_for_sgl_kernel(engine: Engine) -> None:
    # https://github.com/sgl-project/sglang/issues/4879
    text = (FIELD / "sglang-a" / "4879-sgl-kernel-windows-no-distribution.log").read_text()
    got = slugs(engine, text)
    assert got == ["pip-no-version-sgl-kernel", "pip-no-distribution-sgl-kernel"]


def test_train_uv_unsatisfiable_flashinfer_pin(engine: Engine) -> None:
    # https://github.com/zhaochenyang20/Awesome-ML-SYS-Tutorial/pull/185
    text = (FIELD / "sglang-a" /
            "awesome-ml-sys-tutorial-185-uv-verl-sglang-flashinfer-rc-unsatisfiable.log").read_text()
    got = slugs(engine, text)
    assert got[:2] == ["uv-no-solution", "uv-no-version-flashinfer-python"]
    solutions = " ".join(event_of(engine, text, "uv-no-version-flashinfer-python")
                         ["remediation"]["solutions"])
    assert "--prerelease=allow" in solutions and "flashinfer.ai/whl" in solutions


def test_train_pip_conflict_torch_flashinfer(engine: Engine) -> None:
    # https://github.com/bytedance-iaas/sglang/pull/221
    text = (FIELD / "sglang-a" /
            "bytedance-iaas-sglang-221-pip-resolution-torch-flashinfer-conflict.log").read_text()
    assert slugs(engine, text) == ["pip-conflict", "pip-resolution-impossible"]


def test_train_flashinfer_jit_compile_errors(engine: Engine) -> None:
    # https://github.com/sgl-project/sglang/issues/7855
    text = (FIELD / "sglang-e" / "7855-flashinfer-jit-sm120-compile-errors.log").read_text()
    event = event_of(engine, text, "nvcc-errors-flashinfer-jit")
    assert event["captures"]["arch"] == "120"
    assert any("~/.cache/flashinfer" in s for s in event["remediation"]["solutions"])


def test_torch_compile_backend_failure(engine: Engine) -> None:
    # https://github.com/vllm-project/vllm/issues/13255: the quoting page runs the two lines
    # together; the log prints each behind its own `[rank0]: `
    text = ("[rank0]: torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
            "[rank0]: RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported "
            "by the triton GPU compiler, which is used as the backend. Triton only supports "
            "devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.0\n")
    event = event_of(engine, text, "dynamo-backend-failed")
    assert event["captures"]["backend"] == "inductor"
    assert any("--enable-torch-compile" in s for s in event["remediation"]["solutions"])


def test_cmake_build_of_a_cuda_package(engine: Engine) -> None:
    """pip 26.3 building a scikit-build-core package whose CMake project asks nvcc 13.0 for
    sm_50: CMake's compiler check fails, quoting nvcc's fatal line."""
    got = slugs(engine, (REAL / "pip_cmake.txt").read_text(encoding="utf-8"))
    for slug in ("cmake-error", "cmake-cuda-compiler-broken", "skbuild-cmake-failed",
                 "nvcc-unsupported-gpu-architecture", "pip-failed-building-wheel"):
        assert slug in got, slug


def test_linker_failures(engine: Engine) -> None:
    text = (REAL / "gcc_link.txt").read_text(encoding="utf-8")
    events = scan(engine, text)
    by_id = {r.id: r.slug for r in engine.records}
    got = [(by_id.get(e["pattern_id"]), e["captures"]) for e in events]
    assert got == [("ld-undefined-reference", {"symbol": "missing_fn"}),
                   ("ld-cannot-find-library", {"library": "cuda"})]
    solutions = " ".join(events[1]["remediation"]["solutions"])
    assert "TRITON_LIBCUDA_PATH" in solutions and "stubs" in solutions


def test_setuptools_extension_build(engine: Engine) -> None:
    got = slugs(engine, (REAL / "setuptools_ext.txt").read_text(encoding="utf-8"))
    assert got == ["cc-missing-header", "setuptools-command-failed"]


def test_cargo_failures(engine: Engine) -> None:
    got = slugs(engine, (REAL / "cargo.txt").read_text(encoding="utf-8"))
    assert got == ["cargo-could-not-compile", "cargo-rustc-too-old"]


def test_ninja_builds_torch_and_flashinfer_shapes(engine: Engine) -> None:
    """A failed ninja build: the compilers' lines, ninja's summary, and Python's
    CalledProcessError of torch's command and of flashinfer's `-C DIR -f FILE` command."""
    got = slugs(engine, (REAL / "ninja.txt").read_text(encoding="utf-8"))
    assert got == ["nvcc-unsupported-gpu-architecture", "cc-missing-header",
                   "cuda-extension-source-build-failed", "torch-jit-ninja-subprocess-failed",
                   "torch-jit-ninja-subprocess-failed"]


def test_train_triton_launcher_build_without_libcuda(engine: Engine) -> None:
    # https://github.com/JIA-Lab-research/Seg-Zero/issues/63 (train)
    text = ("/usr/bin/ld: cannot find -lcuda\n"
            "collect2: error: ld returned 1 exit status\n\n"
            "subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpe7nu9b0l/main.c', "
            "'-O3', '-shared', '-fPIC', '-Wno-psabi', '-o', '/tmp/tmpe7nu9b0l/cuda_utils.cpython-"
            "312-x86_64-linux-gnu.so', '-lcuda', '-L/home/sim/anaconda3/envs/visionreasoner/lib/"
            "python3.12/site-packages/triton/backends/nvidia/lib', '-L/lib/x86_64-linux-gnu', "
            "'-L/lib/i386-linux-gnu', '-I/home/sim/anaconda3/envs/visionreasoner/lib/python3.12/"
            "site-packages/triton/backends/nvidia/include', '-I/tmp/tmpe7nu9b0l', '-I/home/sim/"
            "anaconda3/envs/visionreasoner/include/python3.12']' returned non-zero exit status 1.\n")
    assert slugs(engine, text) == ["ld-cannot-find-library", "triton-launcher-compile-failed"]
    event = event_of(engine, text, "triton-launcher-compile-failed")
    assert event["captures"]["source"] == "main"


def test_the_nvcc_architecture_table_is_what_ptxas_lists() -> None:
    """The curated record's table of which CUDA toolkits know which targets, checked against
    the targets each ptxas lists (tests/fixtures/buildjit/ptxas_targets.txt)."""
    known = {}
    for line in (REAL / "ptxas_targets.txt").read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            version, targets = line.split(": ")
            known[version] = set(targets.split())

    def toolkits(target: str) -> list[str]:
        return [v for v in known if target in known[v]]

    assert toolkits("sm_35") == toolkits("sm_37") == ["11.8"]
    for target in ("sm_50", "sm_61", "sm_72"):
        assert toolkits(target) == ["11.8", "12.4", "12.6", "12.8", "12.9"]
    for target in ("sm_75", "sm_80", "sm_89", "sm_90"):
        assert toolkits(target) == list(known)
    assert toolkits("sm_90a") == ["12.4", "12.6", "12.8", "12.9", "13.0"]
    for target in ("sm_100", "sm_100a", "sm_120", "sm_120a"):
        assert toolkits(target) == ["12.8", "12.9", "13.0"]
    assert toolkits("sm_101") == ["12.8", "12.9"]
    for target in ("sm_103", "sm_121", "sm_100f", "sm_120f"):
        assert toolkits(target) == ["12.9", "13.0"]
    assert toolkits("sm_88") == toolkits("sm_110") == ["13.0"]
    curated = json.loads((ROOT / "patterns" / "sglang" / "curated" / "kernels.json").read_text())
    record = next(r for r in curated if r["slug"] == "nvcc-unsupported-gpu-architecture")
    table = next(s for s in record["solutions"] if s.startswith("Which CUDA toolkits"))
    assert "sm_50 to sm_72 (Maxwell, Pascal, Volta) 11.8 to 12.9, not 13.0" in table
    assert "sm_88 and sm_110 13.0" in table


def test_pip_out_of_disk(engine: Engine) -> None:
    text = (REAL / "pip_nospace.txt").read_text(encoding="utf-8")
    event = event_of(engine, text, "pip-os-error")
    assert event["captures"]["error"] == "[Errno 28] No space left on device"
    assert "TMPDIR" in event["remediation"]["solutions"][0]


def test_torch_compile_messages_come_from_inductor_source() -> None:
    facts = buildjit.read_facts(GENERATED / "buildjit.facts.tsv")
    for key in ("inductor-cpp-compile-error", "inductor-no-cxx-compiler",
                "inductor-triton-missing", "inductor-gpu-too-old"):
        assert ("torch", "2.13.0") in facts.read[key], key
    made = {r["slug"]: r for r in buildjit.build(facts)}
    assert made["inductor-no-cxx-compiler"]["sourceVersions"] == ["2.13.0"]
    assert any("CXX" in s for s in made["inductor-cpp-compile-error"]["solutions"])


def test_torch_compile_gpu_too_old(engine: Engine) -> None:
    # https://github.com/vllm-project/vllm/issues/13255 (the backend's cause, on its own line)
    text = ("[rank0]: RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported "
            "by the triton GPU compiler, which is used as the backend. Triton only supports "
            "devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.0\n")
    event = event_of(engine, text, "inductor-gpu-too-old")
    assert event["captures"] == {"gpu": "Tesla P100-PCIE-16GB", "capability": "6.0"}


def test_torch_compile_without_a_working_compiler(engine: Engine) -> None:
    """torch 2.13's inductor, run here: CXX naming no compiler, then one that fails. Followed
    by dynamo's `Set TORCHDYNAMO_VERBOSE=1 …` line, each exception is the curated
    torch-compile-failed's (a curated record speaks for a dependency's); without it, the
    inductor records say which compiler failed."""
    text = (REAL / "inductor.txt").read_text(encoding="utf-8")
    assert slugs(engine, text) == ["torch-compile-failed", "torch-compile-failed"]
    bare = "\n".join(line for line in text.splitlines() if "TORCHDYNAMO_VERBOSE" not in line)
    got = slugs(engine, bare)
    assert "inductor-no-cxx-compiler" in got and "inductor-cpp-compile-error" in got, got
    event = event_of(engine, bare, "inductor-no-cxx-compiler")
    assert event["captures"]["compiler"] == "(None, '/tmp/buildjit/nocxx/g++')"
    event = event_of(engine, bare, "inductor-cpp-compile-error")
    assert event["captures"]["command"].startswith("/tmp/buildjit/badcxx/g++ ")
