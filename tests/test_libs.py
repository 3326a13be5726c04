"""Shared libraries that cannot be loaded, compiled packages built for another torch, and
packages that check another's version: the generated records and the fixes computed per event,
on real lines (public threads, the train split, and failures run here: tests/fixtures/libs/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import regex
from generated_layer import engine_of, scan

from matcher.catalog import abi, cu_result, hsa_status, load_catalog, rocm_status, sonames
from matcher.catalog import soname_sources as S
from matcher.catalog.stats import summarize
from matcher.catalog.version_checks import read_table, templates
from matcher.engine import Engine

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "patterns" / "sglang" / "generated"
FIELD = ROOT / "tests" / "fixtures" / "field"
RUN_HERE = ROOT / "tests" / "fixtures" / "libs"
FILES = ("sonames.jsonl", "abi.jsonl", "mismatch.jsonl")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """The curated layer and these generated files, as the built-in catalog holds them (with
    the tables the events' fixes are computed from)."""
    return engine_of(tmp_path_factory.mktemp("builtin"), FILES,
                     ("symbols", "sonames.tsv", "torch-companions.tsv"))


def slugs(engine: Engine) -> dict[str, str]:
    return {r.id: r.slug for r in engine.records}


def the_event(engine: Engine, text: str) -> tuple[str, dict[str, Any]]:
    """The slug and remediation of the one known event of `text`."""
    known = [e for e in scan(engine, text) if e["pattern_id"]]
    assert len(known) == 1, [e["message"][:80] for e in known]
    return slugs(engine)[known[0]["pattern_id"]], known[0]["remediation"]


# -- the sources -----------------------------------------------------------------------------------

def test_debian_contents_lines_give_the_package_of_each_soname() -> None:
    # lines of bookworm's main/non-free Contents-amd64 as Debian publishes them
    lines = [
        "usr/lib/x86_64-linux-gnu/libnuma.so.1                   libs/libnuma1\n",
        "usr/lib/x86_64-linux-gnu/libnuma.so.1.0.0               libs/libnuma1\n",
        "usr/lib/x86_64-linux-gnu/libGL.so.1                     libs/libgl1\n",
        "usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1    non-free/libs/libcuda1\n",
        "usr/lib/gcc/x86_64-linux-gnu/12/libgomp.so              libdevel/libgcc-12-dev\n",
        "usr/lib/x86_64-linux-gnu/libfoo.so.1                    libs/libfoo1\n",
    ]
    rows = list(S.debian_rows(lines, "debian bookworm main"))
    assert [(r.soname, r.kind, r.package) for r in rows] == [
        ("libnuma.so.1", "apt", "libnuma1"), ("libGL.so.1", "apt", "libgl1"),
        ("libcuda.so.1", "driver", "libcuda1")]


def test_the_table_names_pip_wheels_per_torch_and_debian_packages() -> None:
    rows = S.read_tsv(GENERATED / "sonames.tsv")
    pip = {(r.soname, r.package, r.version, r.source) for r in rows if r.kind == "pip"}
    # torch 2.9.1's METADATA requires nvidia-cufile-cu12==1.13.1.3, whose RECORD has libcufile.so.0
    assert ("libcufile.so.0", "nvidia-cufile-cu12", "1.13.1.3", "torch 2.9.1") in pip
    # torch 2.11.0 requires cuda-toolkit[…]==13.0.2, which requires nvidia-cufile==1.15.1.6.*
    assert any(so == "libcufile.so.0" and p == "nvidia-cufile" and s == "torch 2.11.0"
               for so, p, _, s in pip)
    apt = {(r.soname, r.package) for r in rows if r.kind == "apt"}
    assert ("libnuma.so.1", "libnuma1") in apt and ("libibverbs.so.1", "libibverbs1") in apt


def test_the_committed_records_are_what_the_generators_write(tmp_path: Path) -> None:
    out = tmp_path / "sonames.jsonl"
    sonames.main(["-o", str(out)])
    assert out.read_bytes() == (GENERATED / "sonames.jsonl").read_bytes(), \
        "run `python -m matcher.catalog.sonames` and commit its output"
    out = tmp_path / "abi.jsonl"
    abi.main(["-o", str(out)])
    assert out.read_bytes() == (GENERATED / "abi.jsonl").read_bytes(), \
        "run `python -m matcher.catalog.abi` and commit its output"


def test_a_library_a_curated_record_knows_is_left_to_it() -> None:
    slug_list = [json.loads(line)["slug"] for line in (GENERATED / "sonames.jsonl").open()]
    assert "shared-library-missing-libnuma" in slug_list
    assert "shared-library-missing-libcuda" not in slug_list  # curated: cuda-driver-library-missing
    assert "shared-library-missing-libnvrtc" not in slug_list  # curated: cuda-runtime-library-missing
    assert not any(s.endswith("-a34b3233") for s in slug_list)  # a wheel's vendored copy


def test_check_sites_are_read_from_the_source() -> None:
    # transformers/utils/versions.py, as transformers 5.25.0 ships it (in part)
    source = '''
def _compare_versions(op, got_ver, want_ver, requirement, pkg, hint):
    if got_ver is None or want_ver is None:
        raise ValueError(
            f"Unable to compare versions for {requirement}: need={want_ver} found={got_ver}. This is"
            f" unusual. Consider reinstalling {pkg}."
        )
    if not ops[op](version.parse(got_ver), version.parse(want_ver)):
        raise ImportError(
            f"{requirement} is required for a normal functioning of this module, but found {pkg}=={got_ver}.{hint}"
        )
'''
    found = list(templates(source))
    assert ("ImportError", ("{requirement} is required for a normal functioning of this module, "
            "but found {pkg}=={got_ver}.{hint}")) in found
    table = {(d, t) for d, _, _, t in read_table()}
    assert any(d == "intel-extension-for-pytorch" and "needs to work with PyTorch" in t
               for d, t in table)


def test_stats_list_the_records_per_source() -> None:
    catalog = load_catalog(builtin=False, user_paths=[GENERATED / "sonames.jsonl",
                                                      GENERATED / "abi.jsonl"])
    summary = summarize(catalog.records)
    assert summary.by_generator["matcher.catalog.sonames"] > 50
    assert summary.by_generator["matcher.catalog.abi"] >= 5
    assert summary.by_source["intel-extension-for-pytorch"][1] == "2.5.0..2.8.0"


# -- shared libraries --------------------------------------------------------------------------

def test_libnuma_missing_says_which_package_installs_it(engine: Engine) -> None:
    text = (FIELD / "projects/odysseus-6257-sgl-kernel-libnuma-missing.log").read_text()
    events = [e for e in scan(engine, text) if e["pattern_id"]]
    first = events[0]
    assert "libnuma.so.1: cannot open shared object file" in first["message"]
    assert slugs(engine)[first["pattern_id"]] == "shared-library-missing-libnuma"
    assert any("apt-get install -y libnuma1" in s for s in first["remediation"]["solutions"])


def test_a_cuda_extension_on_a_cpu_torch_names_torchs_own_library(engine: Engine) -> None:
    # torchaudio 2.9.1 (CUDA build) imported with torch 2.13.0+cpu, run here
    text = (RUN_HERE / "torchaudio-2.9.1-on-torch-2.13.0.log").read_text()
    events = {slugs(engine)[e["pattern_id"]]: e for e in scan(engine, text) if e["pattern_id"]}
    missing = events["shared-library-missing-libtorch-cuda"]
    assert any("only in torch's CUDA builds" in s for s in missing["remediation"]["solutions"])


def test_a_library_of_a_nvidia_wheel_names_the_wheel_torch_requires(engine: Engine) -> None:
    # glibc's loader, asked for it here (ctypes), where no nvidia-cufile wheel is installed
    slug, remediation = the_event(engine, "OSError: libcufile.so.0: cannot open shared object "
                                          "file: No such file or directory\n")
    assert slug == "shared-library-missing-libcufile"
    assert {"op": "install", "value": "nvidia-cufile-cu12==1.13.1.3"} in \
        [s for way in remediation["fix_actions"] for s in way]


def test_plugins_that_healthy_launches_fail_to_open_are_not_errors(engine: Engine) -> None:
    # printed by healthy launches without the NCCL net plugin or an mlx4 NIC (train logs)
    text = ("ubuntu:162637:162637 [6] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open "
            "shared object file: No such file or directory No plugin found (libnccl-net.so), "
            "using internal implementation\n"
            "libibverbs: Warning: couldn't load driver 'libmlx4-rdmav34.so': libmlx4-rdmav34.so: "
            "cannot open shared object file: No such file or directory\n")
    assert [e for e in scan(engine, text) if e["pattern_id"]] == []


def test_an_old_libstdcxx_says_how_to_get_a_newer_one(engine: Engine) -> None:
    # https://github.com/kvcache-ai/ktransformers/issues/439
    slug, remediation = the_event(engine, (
        "ImportError: /home/ubuntu/anaconda3/envs/ktransformers-0.3/bin/../lib/libstdc++.so.6: "
        "version `GLIBCXX_3.4.32' not found (required by /home/ubuntu/anaconda3/envs/"
        "ktransformers-0.3/lib/python3.11/site-packages/KTransformersOps.cpython-311-x86_64-linux-"
        "gnu.so)\n"))
    assert slug == "libstdcxx-version-not-found"
    assert any("libstdcxx-ng" in s for s in remediation["solutions"])


# -- undefined symbols and companions ----------------------------------------------------------------

def test_an_undefined_torch_symbol_reinstalls_the_pinned_package() -> None:
    # https://github.com/flashinfer-ai/flashinfer/issues/911
    line = ("ImportError: /usr/local/lib/python3.10/dist-packages/flashinfer/flashinfer_kernels.abi3"
            ".so: undefined symbol: _ZN5torch3jit17parseSchemaOrNameERKSsb")
    answer = abi.remedy(line, "0.5.10")
    assert answer is not None and answer.installs == ("flashinfer-python==0.6.7.post2",)
    assert "torch's C++ API" in answer.documentation and "'torch==2.9.1'" in answer.solutions[0]


def test_an_undefined_symbol_of_an_unpinned_package_rebuilds_it_for_the_torch_installed() -> None:
    # https://github.com/Dao-AILab/flash-attention/issues/1691
    line = ("ImportError: /data/user/qxiao183/xqf/miniconda3/envs/quanllm/lib/python3.10/site-"
            "packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c105"
            "ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE")
    answer = abi.remedy(line, None)
    assert answer is not None and "flash-attn" in answer.solutions[0]
    assert "--no-build-isolation" in answer.solutions[0]


def test_an_undefined_driver_symbol_says_upgrade_the_driver() -> None:
    text = (FIELD / "distributed-build/8131-undefined-symbol-cugreenctx.log").read_text()
    answer = abi.remedy(text, None)
    assert answer is not None and "driver" in answer.documentation
    assert answer.solutions[0].startswith("Upgrade the NVIDIA driver")


def test_sgl_kernels_loader_message_is_answered_by_the_cause_it_carries() -> None:
    symbol = (FIELD / "distributed-build/13948-sgl-kernel-common-ops-undefined-symbol.log").read_text()
    answer = abi.remedy(symbol, "0.5.10")
    assert answer is not None and answer.installs == ("sglang-kernel==0.4.1",)
    cpu = (FIELD / "sglang-a/17460-sgl-kernel-cpu-torch-210-critical.log").read_text()
    answer = abi.remedy(cpu, None)
    # a library was found and failed: not "no GPU" (the CPU build of sgl_kernel was there)
    assert answer is not None and "GPU visible" not in " ".join(answer.solutions)


def test_torchvision_for_another_torch_installs_the_one_built_for_the_pinned_torch(
        engine: Engine) -> None:
    # torchvision 0.24.1 (for torch 2.9.1) imported with torch 2.13.0+cpu, run here
    text = (RUN_HERE / "torchvision-0.24.1-on-torch-2.13.0.log").read_text()
    events = {slugs(engine)[e["pattern_id"]]: e for e in scan(engine, text) if e["pattern_id"]}
    assert "torchvision-operator-does-not-exist" in events
    answer = abi.remedy("RuntimeError: operator torchvision::nms does not exist", "0.5.10")
    assert answer is not None and answer.installs == ("torchvision==0.24.1",)  # torch 2.9.1
    assert abi.companion_for("torchvision", "2.14.1") == ("0.29.0", "2.14.0")


# -- version checks ---------------------------------------------------------------------------------

def test_ipex_needing_another_torch_installs_it(engine: Engine) -> None:
    text = (FIELD / "sglang-a/7547-cpu-ipex-torch-version-mismatch.log").read_text()
    events = {slugs(engine)[e["pattern_id"]]: e for e in scan(engine, text) if e["pattern_id"]}
    ipex = next(e for s, e in events.items() if s.startswith("version-check-intel"))
    assert ipex["remediation"]["fix_actions"][0] == [{"op": "install", "value": "torch==2.6.*"}]
    assert any("intel-extension-for-pytorch==2.7.*" in s for s in ipex["remediation"]["solutions"])


def test_transformers_requiring_another_tokenizers_installs_the_requirement(engine: Engine) -> None:
    # transformers 5.25.0 imported with tokenizers 0.21.1, run here
    text = (RUN_HERE / "transformers-5.25.0-tokenizers-0.21.1.log").read_text()
    slug, remediation = the_event(engine, text)
    assert slug.startswith("version-check-transformers")
    assert remediation["fix_actions"][0] == [{"op": "install", "value": "tokenizers>=0.23.1,<0.24.0"}]


def test_a_required_distribution_not_installed_installs_the_requirement(engine: Engine) -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/8544 (train): transformers' require_version
    # called by the project for sglang
    text = (FIELD / "sglang-j/llamafactory-8544-sglang-require-version-missing.log").read_text()
    known = [e for e in scan(engine, text) if e["pattern_id"]]
    [event] = [e for e in known if "distribution was not found" in e["message"]]
    assert slugs(engine)[event["pattern_id"]].startswith("version-check-transformers")
    assert event["remediation"]["fix_actions"][0] == [{"op": "install", "value": "sglang>=0.4.5"}]


def test_a_check_raised_as_a_dotted_class_is_read() -> None:
    # transformers/utils/versions.py, as transformers 4.46.3 ships it (in part)
    source = '''
def require_version(requirement: str, hint: Optional[str] = None) -> None:
    try:
        got_ver = importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        raise importlib.metadata.PackageNotFoundError(
            f"The '{requirement}' distribution was not found and is required by this application. {hint}"
        )
'''
    assert list(templates(source)) == [("PackageNotFoundError", (
        "The '{requirement}' distribution was not found and is required by this application. "
        "{hint}"))]


def test_a_model_type_older_transformers_lacks_is_told_at_its_frame(engine: Engine) -> None:
    # transformers 4.36.2 run here: AutoConfig of a config.json whose model_type it predates
    text = (RUN_HERE / "transformers-4.36.2-unknown-model-type.log").read_text()
    slug, remediation = the_event(engine, text)
    assert slug == "transformers-config-mapping-unknown-model-type"
    # the release that knows the type first (matcher.bare_keys), then the record's own words
    assert "model type `qwen3_moe` (added in transformers 4.51.0)" in remediation["solutions"][0]
    assert any("older than 4.37" in s for s in remediation["solutions"])
    # the bare line is no match of the record's; the pipeline makes it one by its key
    assert [e["pattern_id"] for e in scan(engine, "KeyError: 'qwen3_moe'\n")] == [
        "13341680e05abeb3"]


def test_older_torchs_formatted_cuda_mismatch_says_match_the_toolkit(engine: Engine) -> None:
    # https://github.com/Adamdad/rational_kat_cu/issues/4 (train): torch's message, as pasted
    text = ("RuntimeError:\nThe detected CUDA version (12.1) mismatches the version that was used "
            "to compile\nPyTorch (11.8). Please make sure to use the same CUDA versions.\n")
    slug, remediation = the_event(engine, text)
    assert slug == "torch-cpp-extension-cuda-major-mismatch-formatted"
    assert "CUDA_HOME" in remediation["solutions"][0]


# -- ROCm's management libraries ------------------------------------------------------------------

def test_rocm_statuses_are_read_from_amds_bindings() -> None:
    # pyrsmi 1.1.0's rocml.py, as published on PyPI (in part)
    source = '''
    RSMI_STATUS_INIT_ERROR = 0x8
    RSMI_INITIALIZATION_ERROR = RSMI_STATUS_INIT_ERROR
    rsmi_status_t.RSMI_STATUS_PERMISSION: 'Permission denied',
    rsmi_status_t.RSMI_INITIALIZATION_ERROR: 'Error occured during rsmi initialization',
'''
    assert rocm_status.vocabulary(source) == [
        ("RSMI_STATUS_INIT_ERROR", "Error occured during rsmi initialization"),
        ("RSMI_STATUS_PERMISSION", "Permission denied")]


def test_rocm_smi_failing_to_start_says_make_the_gpu_visible() -> None:
    text = (FIELD / "sglang-a/27209-gfx950-rocm714-mori-rocm-smi-init-error.log").read_text()
    line = next(x for x in text.splitlines() if "RSMI_STATUS_INIT_ERROR" in x)
    recs = [json.loads(x) for x in (GENERATED / "rocm.jsonl").open()]
    hit = [r for r in recs if regex.search(r["messagePattern"], line)]
    assert [r["slug"] for r in hit] == ["rocm-rsmi-status-init-error"]
    assert "--device=/dev/kfd" in hit[0]["solutions"][0]
    # statuses tools print for a metric a GPU lacks are no failure
    assert not any(r["errorMessage"].endswith("_NOT_SUPPORTED") for r in recs)


# -- ROCm's HSA runtime ----------------------------------------------------------------------------

def test_hsa_statuses_and_fault_reasons_are_read_from_the_runtimes_source() -> None:
    # ROCR-Runtime rocm-6.2.4: src/core/runtime/hsa.cpp and runtime.cpp (in part)
    status_source = '''
    case HSA_STATUS_SUCCESS:
      *status_string = "HSA_STATUS_SUCCESS: The function has been executed successfully.";
      break;
    case HSA_STATUS_ERROR_EXCEPTION:
      *status_string =
          "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception.";
      break;
    case HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION:
      *status_string =
          "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond "
          "the largest legal address.";
      break;
'''
    assert hsa_status.statuses(status_source) == [
        ("HSA_STATUS_ERROR_EXCEPTION", "An HSAIL operation resulted in a hardware exception."),
        ("HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
         "The agent attempted to access memory beyond the largest legal address."),
        ("HSA_STATUS_SUCCESS", "The function has been executed successfully.")]
    fault_source = '''
      std::string reason = "";
      if (fault.Failure.NotPresent == 1) {
        reason += "Page not present or supervisor privilege";
      } else if (fault.Failure.ReadOnly == 1) {
        reason += "Write access to a read-only page";
      }
      fprintf(stderr,
          "Memory access fault by GPU node-%u (Agent handle: %p) on address %p%s. Reason: %s.\\n",
'''
    assert hsa_status.fault_reasons(fault_source) == [
        "Page not present or supervisor privilege", "Write access to a read-only page"]


def test_the_committed_hsa_catalog_is_what_the_generator_writes(tmp_path: Path) -> None:
    out = tmp_path / "hsa.jsonl"
    assert hsa_status.main(["-o", str(out)]) == 0
    assert out.read_bytes() == (GENERATED / "hsa.jsonl").read_bytes(), \
        "run `python -m matcher.catalog.hsa_status` and commit its output"


HSA_LINES = [
    # https://github.com/sgl-project/sglang/issues/22714 (train): MiniMax-M2.7 on MI300X
    ((FIELD / "sglang-h/22714-mi300x-hsa-status-error-exception.log").read_text().splitlines()[0],
     "hsa-status-error-exception"),
    # https://github.com/ollama/ollama/issues/8851 (train)
    (("ollama  | Memory access fault by GPU node-1 (Agent handle: 0x559ee9967590) on address "
      "0x7fe05f439000. Reason: Page not present or supervisor privilege."),
     "hsa-memory-fault-page-not-present-or-supervisor-privilege"),
]


@pytest.mark.parametrize(("line", "slug"), HSA_LINES)
def test_a_gpu_kernel_fault_on_rocm_says_how_to_find_the_kernel(line: str, slug: str) -> None:
    recs = [json.loads(x) for x in (GENERATED / "hsa.jsonl").open()]
    hit = [r for r in recs if regex.search(r["messagePattern"], line)]
    assert [r["slug"] for r in hit] == [slug]
    assert "AMD_SERIALIZE_KERNEL=3" in hit[0]["solutions"][0]
    assert not any(r["errorMessage"] == "HSA_STATUS_SUCCESS" for r in recs)


# -- the CUDA driver's statuses ---------------------------------------------------------------------

def test_cuda_driver_statuses_are_read_from_nvidias_bindings() -> None:
    # cuda-bindings 12.9.4's cydriver.pxd and driver.pyx, as published on PyPI (in part)
    pxd = "    cdef enum cudaError_enum:\n        CUDA_SUCCESS = 0\n        CUDA_ERROR_OUT_OF_MEMORY = 2\n"
    pyx = ("    #: The API call failed because it was unable to allocate enough memory\n"
           "    #: or other resources to perform the requested operation.\n"
           "    CUDA_ERROR_OUT_OF_MEMORY = cydriver.cudaError_enum.CUDA_ERROR_OUT_OF_MEMORY\n")
    assert cu_result.vocabulary(pxd, pyx) == [
        (0, "CUDA_SUCCESS", ""),
        (2, "CUDA_ERROR_OUT_OF_MEMORY", ("The API call failed because it was unable to allocate "
         "enough memory or other resources to perform the requested operation."))]


def test_a_curesult_number_is_named() -> None:
    text = (FIELD / "sglang-a/torch_memory_saver-35-resume-curesult-error-child-failed.log").read_text()
    line = text.splitlines()[0]
    recs = [json.loads(x) for x in (GENERATED / "cuda-driver.jsonl").open()]
    hit = [r["slug"] for r in recs if regex.search(r["messagePattern"], line)]
    assert hit == ["cuda-driver-invalid-value"]
    oom = next(r for r in recs if r["slug"] == "cuda-driver-out-of-memory")
    assert oom["solutions"]  # the runtime's cudaErrorMemoryAllocation remedy
