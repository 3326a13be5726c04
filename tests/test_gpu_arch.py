"""A GPU architecture a build or kernel library does not support — sgl-kernel's ROCm build,
AMD's aiter, PyTorch's CUDA build check — is answered by which GPU the name is and, for an NVIDIA
capability, whether the build is too old or too new for it (`matcher.catalog.gpu_arch`); an
NVML start failure by the driver state its text names (`matcher.catalog.nvml_status`); Docker's
missing GPU driver by the NVIDIA Container Toolkit. Real lines from train-split threads
(tests/fixtures/platform/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import engine_of, scan

from matcher.catalog import gpu_arch
from matcher.engine import Engine

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "platform"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("curated"), ())


def events_of(engine: Engine, name: str) -> list[tuple[str, dict]]:
    by_id = {r.id: r.slug for r in engine.records}
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return [(by_id.get(e["pattern_id"]) or "unknown", e) for e in scan(engine, text)]


def test_sgl_kernel_rocm_build_names_the_radeon_and_the_accepted_targets(engine) -> None:
    [(slug, event)] = events_of(engine, "sglang-9417.log")
    assert slug == "sgl-kernel-rocm-unsupported-gpu-arch"
    assert event["captures"]["gpu_arch"] == "gfx1100"
    doc = event["remediation"]["documentation"]
    assert doc.startswith("`gfx1100` is AMD RDNA 3 (Radeon RX 7900")
    assert "accepts: gfx942, gfx950." in doc


def test_aiter_bare_keyerror_at_its_table_names_strix_halo(engine) -> None:
    [(slug, event)] = events_of(engine, "aiter-1415.log")
    assert slug == "aiter-gfx-table-keyerror"
    assert event["captures"]["gpu_arch"] == "gfx1151"
    assert "Strix Halo" in event["remediation"]["documentation"]
    assert any("SGLANG_USE_AITER=0" in s for s in event["remediation"]["solutions"])


def test_aiter_chain_ending_in_an_older_releases_wrapper(engine) -> None:
    """The bare KeyError, re-raised, then the RuntimeError an older aiter wraps it in: the
    chain's last line is the event, and it names the same GPU."""
    found = events_of(engine, "aiter-1552.log")
    assert [s for s, _ in found] == ["aiter-unknown-gpu-arch"]
    assert found[0][1]["captures"]["gpu_arch"] == "gfx1151"


def test_aiter_empty_architecture_says_no_gpu_reached_the_check(engine) -> None:
    [(slug, event)] = events_of(engine, "aiter-1316.log")
    assert slug == "aiter-unknown-gpu-arch"
    assert event["remediation"]["documentation"].startswith("No GPU architecture reached")
    assert event["remediation"]["solutions"][0].startswith("Run `rocminfo | grep gfx`")


def test_torch_build_check_says_the_gpu_is_newer_than_the_build(engine) -> None:
    [(slug, event)] = events_of(engine, "ttcut-3.log")
    assert slug == "torch-cuda-capability-not-in-build"
    doc = event["remediation"]["documentation"]
    assert doc.startswith("sm_120 is NVIDIA Blackwell (RTX 50xx")
    assert "newer than every architecture" in doc and "sm_90." in doc
    assert "CUDA 12.8" in event["remediation"]["solutions"][0]


def test_an_older_gpu_than_the_build_is_told_to_use_an_older_torch() -> None:
    said, do = gpu_arch.answer({"cuda_sm": "70", "supported": "sm_75 sm_80 sm_86 sm_90."})
    assert said.startswith("sm_70 is NVIDIA Volta (Tesla V100")
    assert do is not None and "older PyTorch" in do


def test_a_listed_capability_or_an_unknown_name_gets_no_advice() -> None:
    assert gpu_arch.answer({"cuda_sm": "86", "supported": "sm_80 sm_90"})[1] is None
    assert gpu_arch.answer({"gpu_arch": "gfx9999"}) == ("`gfx9999` is an AMD GPU architecture.",
                                                        None)
    assert gpu_arch.answer({"other": "x"}) is None


def test_target_features_do_not_hide_the_gpu() -> None:
    said, _ = gpu_arch.answer({"gpu_arch": "gfx90a:sramecc+:xnack-"})
    assert said == "`gfx90a` is AMD CDNA 2 (Instinct MI210/MI250/MI250X)."


def test_nvml_version_mismatch_says_reboot(engine) -> None:
    [(slug, event)] = events_of(engine, "open-gpu-kernel-modules-47.log")
    assert slug == "nvml-init-failed"
    assert event["captures"]["nvml_error"] == "Driver/library version mismatch"
    assert event["remediation"]["solutions"][0].startswith("Reboot the host")


def test_nvml_unknown_error_in_a_container_says_restart_it(engine) -> None:
    [(slug, event)] = events_of(engine, "nvidia-docker-1671.log")
    assert slug == "nvml-init-failed"
    assert event["remediation"]["solutions"][0].startswith("In a container: restart it")


def test_nvml_texts_of_the_python_binding_and_unknown_ones() -> None:
    from matcher.catalog import nvml_status

    assert nvml_status.answer("RM has detected an NVML/RM version mismatch.") == \
        nvml_status.answer("Driver/library version mismatch")
    assert nvml_status.answer("Timeout") is None


def test_docker_without_the_nvidia_container_toolkit(engine) -> None:
    [(slug, event)] = events_of(engine, "xagent-273.log")
    assert slug == "docker-gpu-device-driver-missing"
    assert "nvidia-ctk runtime configure" in event["remediation"]["solutions"][0]
