"""Dependencies: sglang's pins, the symbol index of what each dependency release defines, the
`pip install` an import/attribute/keyword mismatch gets at event time (`matcher.catalog.mismatch`),
and the dependencies' own raise sites (`deps.jsonl`, `matcher.catalog.deps`).

Every log line here is real: pasted in a public thread that `bench/field_split.py` puts in the
train split (URL beside it), or printed by the real library (`tests/fixtures/deps/*/README`
says how each was obtained).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matcher.catalog import deps, mismatch, pins, symbols
from matcher.catalog.load import load_paths

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "patterns" / "sglang" / "generated"
INDEX = GENERATED / "symbols"
FIXTURES = Path(__file__).parent / "fixtures" / "deps"


def _index(dist: str) -> symbols.Index:
    return symbols.Index.load(INDEX / f"{dist}.txt.gz", dist)


# --- pins ---------------------------------------------------------------------------------------

def test_server_pins_read_the_cuda_install_of_a_real_wheel() -> None:
    # sglang 0.4.6's METADATA (its Requires-Dist lines, unedited): the server's pins are behind
    # the `srt` and `runtime_common` extras, ROCm's behind `srt_hip`
    text = (FIXTURES / "sglang-0.4.6-METADATA").read_text()
    got = pins.server_pins(text)
    assert got["torch"] == "==2.6.0"
    assert got["flashinfer-python"] == "==0.2.3"
    assert got["sgl-kernel"] == "==0.0.9.post2"
    assert got["transformers"] == "==4.51.1"
    assert got["outlines"] in ("<=0.1.11,>=0.0.44", ">=0.0.44,<=0.1.11")
    assert "vllm" not in got  # only the ROCm extra pins vllm in 0.4.6
    assert "sentence-transformers" not in got  # the test extra


def test_the_shipped_index_holds_each_release_pin() -> None:
    torch = _index("torch").pins()
    assert torch["0.4.6"][0] == "torch==2.6.0"
    assert torch["0.5.23"][0] == "torch==2.14.1"
    order = _index("torch").versions
    assert [order[i] for i in range(len(order)) if torch["0.5.23"][1] >> i & 1] == ["2.14.1"]
    kernel = _index("sgl-kernel").pins()
    assert kernel["0.5.23"][0] == "sglang-kernel==0.4.10"  # renamed, one index
    assert kernel["0.4.6"][0] == "sgl-kernel==0.0.9.post2"


# --- the symbol index ---------------------------------------------------------------------------

def test_module_facts_bind_what_from_import_finds() -> None:
    src = (
        "import os\nfrom typing import TYPE_CHECKING\nfrom .sub import *\n"
        "try:\n    from ._ext import fast as _fast\nexcept ImportError:\n    _fast = None\n"
        "if TYPE_CHECKING:\n    from .models import Model\n"
        "def f(a, *, b=1): ...\nclass C:\n    def m(self, x, **kw): ...\n    def n(self, y): ...\n"
    )
    facts = symbols.module_facts(src, "p", is_package=True)
    assert facts is not None
    assert {"os", "TYPE_CHECKING", "_fast", "Model", "f", "C"} <= facts.names
    assert facts.stars == ["p.sub"]
    assert facts.functions == {"f": ("a", "b"), "C.n": ("self", "y")}  # C.m takes **kw
    assert ("_fast", "p._ext", "fast") in facts.imports


def test_outlines_index_knows_when_fsm_regex_went_away() -> None:
    idx = _index("outlines")
    have, _ = idx.module("outlines.fsm.regex")
    versions = idx.versions_of(have)
    assert "0.0.46" in versions
    assert "0.1.11" not in versions


def test_the_vllm_index_holds_the_pins_of_sglang_before_0_5() -> None:
    # sglang 0.1.x–0.4.4 imported vllm's layers; their wheels' Requires-Dist, read for the index
    idx = _index("vllm")
    got = idx.pins()
    assert got["0.1.14"][0] == "vllm>=0.3.3"
    assert got["0.2.14"][0] == "vllm==0.5.5"
    assert got["0.4.3"][0] == "vllm<=0.7.2,>=0.6.4.post1"
    assert "0.5.0" not in got  # 0.5 dropped the dependency
    assert idx.versions_of(got["0.2.14"][1]) == ["0.5.5"]
    # read from sdists, which hold no compiled module: `vllm` itself proves no name absent
    assert idx.module("vllm") == ((1 << len(idx.versions)) - 1, True)


def test_the_vllm_index_knows_what_sglang_0_1_imported() -> None:
    # https://github.com/sgl-project/sglang/issues/391 (train): sglang 0.1.x's model_runner.py
    # `from vllm.model_executor.model_loader import _set_default_torch_dtype`, failing on a newer
    # vllm; and its models' `vllm.model_executor.input_metadata`, gone in vllm 0.4
    idx = _index("vllm")
    name = idx.name("vllm.model_executor.model_loader", "_set_default_torch_dtype")
    assert idx.versions_of(name) == ["0.2.5", "0.3.3"]
    have, _ = idx.module("vllm.model_executor.input_metadata")
    assert idx.versions_of(have) == ["0.2.5", "0.3.3"]


# --- mismatches, on real lines ------------------------------------------------------------------

def test_sglang_api_moved_says_which_sglang_has_it() -> None:
    # https://github.com/sgl-project/sglang/issues/23535 (train): sglang-router 0.3.2 on
    # sglang 0.5.10, whose sglang.srt.utils no longer re-exports is_port_available
    line = "ImportError: cannot import name 'is_port_available' from 'sglang.srt.utils'"
    answer = mismatch.remedy(line, "0.5.10")
    assert answer is not None
    # sglang 0.5.10..0.5.19 lack the re-export; 0.5.20 restored it (0.1.17 brought it)
    assert "sglang 0.1.17..0.5.9, 0.5.20..0.5.23" in answer.documentation
    assert answer.installs == ("sglang>=0.5.20", "sglang==0.5.9")
    assert "pip install 'sglang>=0.5.20'" in answer.solutions[0]


def test_module_gone_from_outlines_gets_the_outlines_that_has_it() -> None:
    # https://github.com/pzs19/TokenSelect/issues/2 (train): sglang's constrained/__init__.py
    # importing outlines.fsm.regex under outlines >= 0.1.0
    line = "ModuleNotFoundError: No module named 'outlines.fsm.regex'"
    answer = mismatch.remedy(line, None)
    assert answer is not None
    assert answer.installs[0].startswith("outlines==0.0.")
    assert "pip install 'outlines==0.0." in answer.solutions[0]


def _last_line(name: str) -> str:
    return (FIXTURES / "torch-2.13.0" / name).read_text().rstrip("\n").rsplit("\n", 1)[-1]


def test_a_torch_name_of_the_pinned_release_gets_that_pin() -> None:
    # printed by torch 2.13.0 (8.log); sglang 0.5.22 pins torch 2.14.1, which has the name
    line = _last_line("8.log")
    assert line.startswith("ImportError: cannot import name 'gather_into_tensor'")
    answer = mismatch.remedy(line, "0.5.22")
    assert answer is not None
    assert answer.installs == ("torch==2.14.1",)
    assert "sglang 0.5.22 requires torch==2.14.1" in answer.documentation
    # a release that pins 2.13.0 has no torch with it among its pins: the newest that has it
    older = mismatch.remedy(line, "0.5.18")
    assert older is not None and older.installs == ("torch==2.14.1",)
    assert "no release it admits defines" in older.documentation


@pytest.mark.parametrize(("name", "callee", "keyword"), [
    ("6.log", "compile", "dynamic_shapes"),
    ("7.log", "init_process_group", "enable_reconfigure"),
])
def test_an_unexpected_keyword_names_the_torch_that_takes_it(name: str, callee: str,
                                                            keyword: str) -> None:
    line = _last_line(name)
    assert line == f"TypeError: {callee}() got an unexpected keyword argument '{keyword}'"
    answer = mismatch.remedy(line, "0.5.23")
    assert answer is not None
    assert answer.installs == ("torch==2.14.1",)
    assert f"takes `{keyword}` in torch 2.14.1, not in 2.5.1..2.13.0" in answer.documentation


def test_a_cpu_build_is_not_called_a_version_mismatch() -> None:
    # torch 2.13.0+cpu: `torch.cuda.set_device(0)` (tests/fixtures/deps/torch-2.13.0/README):
    # every torch declares _cuda_setDevice; a CPU build lacks it — no pin to give, but the
    # CUDA build to install
    line = "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'"
    answer = mismatch.remedy(line, "0.5.21")
    assert answer is not None and answer.installs == ()
    assert answer.documentation.startswith("Every release of torch read (2.5.1..2.14.1) defines")
    assert "CPU-only build" in answer.documentation
    assert answer.solutions[0].startswith("If pip show torch gives a `+cpu` version, install "
                                          "the CUDA build")
    # a name that is no CUDA part: no word of CPU builds
    other = mismatch.remedy("AttributeError: module 'torch.library' has no attribute "
                            "'custom_op'", "0.5.21")
    assert other is not None and not any("+cpu" in s for s in other.solutions)


def test_a_scan_event_carries_the_pip_install() -> None:
    # https://github.com/sgl-project/sglang/issues/23535 (train), the two lines as pasted
    from matcher.catalog import load_catalog
    from matcher.scan import scan_events

    catalog = load_catalog(builtin=False, user_paths=[
        GENERATED / "mismatch.jsonl", ROOT / "patterns" / "sglang" / "curated"])
    scanned = scan_events([str(FIXTURES / "sglang-23535.log")], catalog, sglang_version="0.5.10")
    [event] = [e for e in scanned.events if e.get("error_class") == "ImportError"]
    rem = event["remediation"]
    assert rem["fix_actions"][0] == [{"op": "install", "value": "sglang>=0.5.20"}]
    assert "pip install 'sglang>=0.5.20'" in rem["solutions"][0]


def test_generic_records_match_their_real_lines() -> None:
    records = load_paths([GENERATED / "mismatch.jsonl"], "generated").records
    assert {r.generator for r in records} == {mismatch.GENERATOR}
    # Python makes their messages, but for transformers' lazy importer's re-raise
    assert {r.tags[-1]: r.source_package for r in records if r.source_package != "cpython"} == {
        "lazy": "transformers"}
    by_kind = {r.tags[-1]: r for r in records}
    import regex

    for kind, (lines, _) in mismatch.EXAMPLES.items():
        for line in lines:
            message = line.split(": ", 1)[1]
            assert regex.search(by_kind[kind].message_pattern, message), (kind, line)


# --- the dependencies' own raise sites ----------------------------------------------------------

@pytest.mark.parametrize("template", [
    "list index out of range",
    "'{type(self).__name__}' object has no attribute '{name}'",
    "{a} != {b}",
])
def test_generic_templates_make_no_record(template: str) -> None:
    assert deps.generic(template)


def test_deps_records_are_attributed_and_have_no_generic_template() -> None:
    records = [json.loads(line) for line in
               (GENERATED / "deps.jsonl").read_text().splitlines() if line.strip()]
    assert records
    for r in records:
        assert r["generator"] == deps.GENERATOR
        assert r["sourcePackage"] and r["sourceVersions"]
        assert "sglangVersions" not in r and "raisedIn" not in r
        assert not deps.generic(r["errorMessage"])
    assert {r["sourcePackage"] for r in records} >= {
        "torch", "xgrammar", "outlines", "transformers"}
    # flashinfer's Python is flashinfer.jsonl's (`matcher.catalog.flashinfer`)
    assert "flashinfer-python" not in {r["sourcePackage"] for r in records}


@pytest.mark.parametrize("name", ["1.log", "2.log", "3.log", "4.log", "5.log"])
def test_real_torch_tracebacks_match_a_torch_site(name: str) -> None:
    # printed by torch 2.13.0+cpu itself (tests/fixtures/deps/torch-2.13.0/README)
    text = (FIXTURES / "torch-2.13.0" / name).read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    cls, _, message = last.partition(": ")
    records = [json.loads(line) for line in
               (GENERATED / "deps.jsonl").read_text().splitlines() if line.strip()]
    import regex

    hits = [r for r in records if r["sourcePackage"] == "torch"
            and r["errorClass"] == cls and regex.search(r["messagePattern"], message)]
    assert hits, last
    assert any("2.13.0" in r["documentation"] or _holds(r["sourceVersions"], "2.13.0")
               for r in hits)


def _holds(ranges: list[str], version: str) -> bool:
    from matcher.catalog.versions import in_ranges

    return in_ranges(version, ranges)


def test_a_circular_import_is_told_apart_and_gets_its_own_fix() -> None:
    # https://github.com/sgl-project/sglang/issues/384 (train), its first line
    line = (FIXTURES.parent / "field" / "sglang-a" / "384-circular-import-function.log"
            ).read_text().splitlines()[0].rstrip()
    assert mismatch.parse(line) is None  # no version to pin
    records = load_paths([GENERATED / "mismatch.jsonl"], "generated").records
    [circular] = [r for r in records if r.tags[-1] == "circular"]
    import regex

    assert regex.search(circular.message_pattern, line.split(": ", 1)[1])
    assert any("Rename the script" in s for s in circular.solutions)
    [plain] = [r for r in records if r.tags[-1] == "import"]
    assert not regex.search(plain.message_pattern, line.split(": ", 1)[1])


# --- vllm, which sglang 0.1.x–0.4.4 pinned ------------------------------------------------------

def test_a_vllm_module_gets_the_vllm_an_sglang_release_pinned() -> None:
    # https://github.com/intel/ipex-llm/issues/12151 (train), the line as pasted
    line = "ModuleNotFoundError: No module named 'vllm.distributed'"
    answer = mismatch.remedy(line, None)
    assert answer is not None
    assert "exists in vllm 0.4.1..0.8.5" in answer.documentation
    assert "sglang releases whose pins admit such a vllm: 0.1.3..0.4.4.post1" in answer.documentation
    # the newest having it that a release's specifier names, not the newest an open `>=` admits
    assert answer.installs == ("vllm==0.7.2",)
    # sglang 0.1.16 pins vllm>=0.4.2: the release it was written against
    pinned = mismatch.remedy(line, "0.1.16")
    assert pinned is not None and pinned.installs == ("vllm==0.4.2",)
    assert "sglang 0.1.16 requires vllm>=0.4.2" in pinned.documentation


@pytest.mark.parametrize("line", [
    # https://github.com/meta-llama/llama/issues/1384 (train): the compiled extension is
    # missing (a build without it): not a module any version lacks
    "ModuleNotFoundError: No module named 'vllm._C'",
    # https://github.com/vllm-project/vllm/issues/19131 (train): vllm 0.9's, after every
    # release any sglang pinned: nothing to pin
    "ModuleNotFoundError: No module named 'vllm.vllm_flash_attn.layers'",
])
def test_vllm_lines_that_are_not_a_pinned_version_get_no_pin(line: str) -> None:
    assert mismatch.remedy(line, None) is None


def test_preferred_takes_the_version_a_specifier_names() -> None:
    assert mismatch.preferred(["0.3.3", "0.4.1", "0.8.5"], ["vllm>=0.3.3"]) == "0.3.3"
    assert mismatch.preferred(["0.4.1", "0.8.5"], ["vllm>=0.3.3"]) == "0.8.5"
    assert mismatch.preferred(["0.6.3.post1", "0.6.4.post1"],
                              ["vllm<=0.6.4.post1,>=0.6.3.post1"]) == "0.6.4.post1"


# --- torchao, pinned by sglang 0.4.x–0.5.17 ----------------------------------------------------

def test_a_torchao_name_older_installs_lack_gets_a_pinned_torchao() -> None:
    # https://github.com/pytorch/ao/issues/1146 (train), its title as pasted: an old torchao
    # (Windows) without `quantize_`
    line = (r"cannot import name 'quantize_' from 'torchao.quantization' "
            r"(C:\ai\Meissonic\venv\lib\site-packages\torchao\quantization\__init__.py)")
    answer = mismatch.remedy(line, None)
    assert answer is not None
    assert "`torchao.quantization.quantize_` is defined in torchao 0.5.0..0.18.0" in \
        answer.documentation
    assert answer.installs == ("torchao==0.17.0",)  # the newest a release pins exactly
    pinned = mismatch.remedy(line, "0.4.7")
    assert pinned is not None and pinned.installs == ("torchao==0.9.0",)
    assert "sglang 0.4.7 requires torchao==0.9.0" in pinned.documentation


def test_a_name_no_torchao_defines_gets_no_pin() -> None:
    # https://github.com/pytorch/ao/issues/1403 (train), torchao 0.7.0 installed: a caller
    # written for another API — no release read has the name, so no version is offered
    line = ("ImportError: cannot import name 'weight_only_quant_qconfig' from "
            r"'torchao.quantization' (R:\CogVideoX_v3\CogVideo\venv\Lib\site-packages"
            r"\torchao\quantization\__init__.py)")
    answer = mismatch.remedy(line, None)
    assert answer is not None and answer.installs == ()
    assert answer.documentation.startswith("No release of torchao read (0.1..0.18.0) defines")


def test_an_installed_module_lacking_a_name_every_release_read_has_is_older_than_them() -> None:
    # https://github.com/MeetKai/functionary/issues/312 (train): transformers 4.48.3..5.25.0
    # all define it, so the installed one predates them
    line = ("ImportError: cannot import name 'PILImageResampling' from 'transformers.image_utils' "
            "(/home/user/functionary-venv/lib/python3.12/site-packages/transformers/image_utils.py)")
    answer = mismatch.remedy(line, None)
    assert answer is not None and answer.installs == ()
    assert "installed transformers is older than 4.48.3" in answer.documentation
    assert answer.solutions[0].startswith("Install the transformers that your sglang pins")
    pinned = mismatch.remedy(line, "0.5.6")
    assert pinned is not None and pinned.installs == ("transformers==4.57.1",)
    # a compiled module (a CPU build lacks CUDA functions every release declares): not proved
    # older — what to check, no version
    compiled = mismatch.remedy("ImportError: cannot import name 'PILImageResampling' from "
                               "'transformers.image_utils' (/x/site-packages/transformers/"
                               "image_utils.cpython-312-x86_64-linux-gnu.so)", None)
    assert compiled is not None and compiled.installs == ()
    assert compiled.documentation.startswith("Every release of transformers read (4.48.3..5.25.0)")
    assert "pip show transformers" in compiled.solutions[0]


def test_the_importing_sglang_frame_tells_the_release_of_a_vllm_import() -> None:
    # https://github.com/sgl-project/sglang/issues/391 (train): the traceback's frames as pasted
    # (a source checkout, `…/sglang/python/sglang/…`); the paste's last line is cut inside the
    # module's name, which the source line above it gives whole
    traceback = (FIXTURES / "sglang-391.log").read_text()
    form = mismatch.Form("import", "vllm.model_executor.model_loader", "_set_default_torch_dtype")
    label = mismatch.importer_releases(traceback, form, None)
    assert label is not None and label.startswith("0.1.")
    answer = mismatch.remedy("ImportError: cannot import name '_set_default_torch_dtype' from "
                             "'vllm.model_executor.model_loader'", label)
    assert answer is not None and answer.installs == ("vllm==0.3.3",)
    assert f"sglang {label} requires vllm>=" in answer.documentation


# --- a guarded import's name, the release not in the log ---------------------------------------

FIELD = Path(__file__).parent / "fixtures" / "field"


def test_an_undefined_kernel_name_lists_each_releases_pin_when_the_release_is_unknown() -> None:
    # https://github.com/sgl-project/sglang/pull/3582 (train), the excerpt as pasted: the traceback's
    # sglang frames show which releases bind the name, not which one ran — their pins differ,
    # so one version for all (the newest any admits) would be wrong for some
    path = FIELD / "sglang-e" / "3582-nextn-sgl-build-tree-kernel-undefined.log"
    text = path.read_text()
    line = next(x for x in text.splitlines() if x.startswith("NameError:"))
    answer = mismatch.remedy(line, None, traceback=text)
    assert answer is not None and answer.installs == ()
    [solution] = answer.solutions
    assert "sglang 0.4.4..0.4.4.post1: pip install 'sgl-kernel==0.0.5'" in solution
    assert "sglang 0.4.3.post3..0.4.3.post4: pip install 'sgl-kernel==0.0.3.post6'" in solution
    assert "0.2.6" not in solution
    # the log's own release: that release's exact pin, though the thinned index did not read it
    known = mismatch.remedy(line, "0.4.4")
    assert known is not None and known.installs == ("sgl-kernel==0.0.5",)


def test_an_exclusive_bound_is_not_a_version_to_read() -> None:
    # sglang 0.5.8 pins apache-tvm-ffi `<0.2,>=0.1.5`: no release runs 0.2 (and PyPI has none)
    release_pins = {"0.5.8": {"apache-tvm-ffi": "<0.2,>=0.1.5"},
                    "0.5.12": {"apache-tvm-ffi": "==0.1.9"}}
    assert deps._admitted(release_pins, ["apache-tvm-ffi"]) == ["0.1.5", "0.1.9"]


def test_an_unpinned_dependency_takes_the_floors_its_pinned_user_requires(tmp_path: Path) -> None:
    import zipfile

    # transformers 4.57.0's and 5.19.0's own Requires-Dist lines for huggingface-hub
    for version, spec in (("4.57.0", "huggingface-hub<1.0,>=0.34.0"),
                          ("5.19.0", "huggingface-hub<3.0,>=1.31.0")):
        with zipfile.ZipFile(tmp_path / f"transformers-{version}-py3-none-any.whl", "w") as z:
            z.writestr(f"transformers-{version}.dist-info/METADATA",
                       f"Metadata-Version: 2.1\nName: transformers\nVersion: {version}\n"
                       f"Requires-Dist: {spec}\n")
    release_pins = {"0.5.3": {"transformers": "==4.57.0", "huggingface-hub": ""},
                    "0.5.22": {"transformers": "==5.19.0", "huggingface-hub": ""}}
    assert deps._pinned_through("huggingface-hub", "transformers", release_pins,
                                tmp_path) == ["0.34.0", "1.31.0"]


def test_a_huggingface_hub_record_matches_the_real_repo_id_line() -> None:
    # huggingface_hub's own traceback in a train excerpt (sglang issue 302)
    text = (ROOT / "tests" / "fixtures" / "field" / "model-runtime"
            / "302-gptq-branch-repo-id.log").read_text()
    line = next(t for t in text.splitlines() if t.startswith("huggingface_hub."))
    message = line.split(": ", 1)[1]
    records = [json.loads(text) for text in
               (GENERATED / "deps.jsonl").read_text().splitlines() if text.strip()]
    import regex

    hits = [r for r in records if r["sourcePackage"] == "huggingface-hub"
            and regex.search(r["messagePattern"], message)]
    assert [(r["errorClass"], r["filePath"]) for r in hits] == [
        ("HFValidationError", "huggingface_hub/utils/_validators.py")]


# tvm_ffi/cpp/extension.py (apache-tvm-ffi 0.1.11), as it raises a failed JIT build
_TVM_FFI_BUILD = '''
def build_ninja(build_dir):
    status = subprocess.run(check=False, args=command, cwd=build_dir, capture_output=True)
    if status.returncode != 0:
        msg = [f"ninja exited with status {status.returncode}"]
        encoding = "oem" if IS_WINDOWS else "utf-8"
        if status.stdout:
            msg.append(f"stdout:\\n{status.stdout.decode(encoding)}")
        if status.stderr:
            msg.append(f"stderr:\\n{status.stderr.decode(encoding)}")

        raise RuntimeError("\\n".join(msg))
'''


def test_a_message_joined_from_a_list_of_lines_is_read_when_asked() -> None:
    from matcher.catalog import extract

    def templates(joined: bool) -> list[str]:
        got = extract.extract_module(_TVM_FFI_BUILD, "tvm_ffi/cpp/extension.py",
                                     version="0.1.11", joined_lines=joined)
        return [r["errorMessage"] for r in got.records if r.get("errorMessage")]

    assert templates(False) == []
    assert templates(True) == ["ninja exited with status {status.returncode}"]


def test_the_tvm_ffi_build_record_matches_the_real_line() -> None:
    # sglang issue 26545 (train split): tvm_ffi's JIT build of a kernel failed to link
    text = (ROOT / "tests" / "fixtures" / "field" / "sglang-a"
            / "26545-tvm-ffi-jit-fused-rope-link-fail.log").read_text()
    line = next(t for t in text.splitlines() if t.startswith("RuntimeError: ninja exited"))
    records = [json.loads(t) for t in (GENERATED / "deps.jsonl").read_text().splitlines() if t]
    import regex

    hits = [r for r in records if r["errorClass"] == "RuntimeError"
            and regex.search(r["messagePattern"], line.split(": ", 1)[1])]
    assert [(r["sourcePackage"], r["filePath"]) for r in hits] == [
        ("apache-tvm-ffi", "tvm_ffi/cpp/extension.py")]


# real templates of deps.jsonl (apache-tvm-ffi, huggingface-hub), each with what it says to do
_STATED = [
    (("Cannot reach {request.url}: offline mode is enabled. To disable it, please unset the "
     "`HF_HUB_OFFLINE` environment variable."),
     "Unset the environment variable HF_HUB_OFFLINE (as p's message says)."),
    ("Could not find CUDA installation. Please set CUDA_HOME environment variable.",
     "Set the environment variable CUDA_HOME (as p's message says)."),
    ("CUDA bindings not available. Install with: pip install cuda-python",
     "Run `pip install cuda-python` (as p's message says)."),
    (("To use optimized download using Xet storage, you need to install the hf_xet package. "
     "Try `pip install \"huggingface_hub[hf_xet]\"` or `pip install hf_xet`."),
     ("Run `pip install \"huggingface_hub[hf_xet]\"` or `pip install hf_xet` (as p's message "
     "says).")),
]


@pytest.mark.parametrize(("message", "solution"), _STATED)
def test_a_dependency_message_that_says_what_to_do_gets_that_fix(message: str,
                                                                  solution: str) -> None:
    from matcher.catalog.dep_fixes import stated_solutions

    assert stated_solutions(message, "p") == [solution]


# real templates of deps.jsonl (torch, tokenizers, transformers) that name a setting, a
# package or a command without telling the reader to do only that
_UNSTATED = [
    ("torch._nccl_ep is unavailable; this PyTorch was not built with USE_NCCL_EP (or, for a "
    "USE_SYSTEM_NCCL=ON build, the nccl4py wheel is missing)."),
    ("You don't seem to have the required protobuf file, in order to use this function you need "
    "to run `pip install protobuf` and `wget https://raw.githubusercontent.com/google/"
    "sentencepiece/master/python/src/sentencepiece/sentencepiece_model_pb2.py` for us to be "
    "able to read the intrinsics of your spm_file. `pip install sentencepiece` is not required."),
    ("Kernels are not available. Please install a compatible version ({KERNELS_MIN_VERSION} <= "
    "version < {KERNELS_MAX_VERSION}), e.g. `pip install kernels=={KERNELS_MIN_VERSION}`"),
    "The package `optimum` is required to use Better Transformer.",
]


@pytest.mark.parametrize("message", _UNSTATED)
def test_a_message_that_only_mentions_a_setting_gets_no_fix(message: str) -> None:
    from matcher.catalog.dep_fixes import stated_solutions

    assert stated_solutions(message, "p") == []


# transformers/modeling_utils.py (4.57.0), `_check_and_enable_flash_attn_2`: the message's
# first words are a variable's
_FLASH_ATTN_CHECK = '''
def _check_and_enable_flash_attn_2(self):
    if not is_flash_attn_2_available():
        preface = "FlashAttention2 has been toggled on, but it cannot be used due to the following error:"
        install_message = "Please refer to the documentation of https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install Flash Attention 2."

        # package `flash-attn` can not be installed on Ascend NPU, following validation logics can be ignored.
        if is_torch_npu_available():
            logger.info("Detect using FlashAttention2 on Ascend NPU.")
            return True

        if importlib.util.find_spec("flash_attn") is None:
            raise ImportError(f"{preface} the package flash_attn seems to be not installed. {install_message}")
'''


def test_a_raised_f_strings_variable_is_read_through_its_assignment_when_asked() -> None:
    from matcher.catalog import extract

    def templates(through: bool) -> list[str]:
        got = extract.extract_module(_FLASH_ATTN_CHECK, "transformers/modeling_utils.py",
                                     version="4.57.0", variable_holes=through)
        return [r["errorMessage"] for r in got.records if r.get("severity") == "error"]

    assert templates(False) == [
        "{preface} the package flash_attn seems to be not installed. {install_message}"]
    assert templates(True) == [
        ("FlashAttention2 has been toggled on, but it cannot be used due to the following error: "
        "the package flash_attn seems to be not installed. Please refer to the documentation of "
        "https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install "
        "Flash Attention 2.")]


def test_the_flash_attention_record_takes_the_real_line_cut_short() -> None:
    # https://github.com/kijai/ComfyUI-Florence2/issues/17 (train split): the reporter's line,
    # cut where the title ends
    line = ("FlashAttention2 has been toggled on, but it cannot be used due to the following "
            "error: the package flash_attn seems to be not installed. Please refer to the "
            "documentation of https://huggingface.co/doc")
    records = [json.loads(t) for t in (GENERATED / "deps.jsonl").read_text().splitlines() if t]
    import regex

    hits = [r["errorMessage"] for r in records if r["errorClass"] == "ImportError"
            and r["filePath"] == "transformers/modeling_utils.py"
            and regex.match(r["messagePattern"], line, partial=True)]
    # 4.x's words, its first ones read through the variable (5.x's name the version in a hole)
    assert line + "s/transformers/perf_infer_gpu_one#flashattention-2 to install Flash " \
        "Attention 2." in hits
