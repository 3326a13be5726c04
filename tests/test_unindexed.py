"""A dependency mismatch of a package with no symbol index: recognized through sglang's own
frames, and its fix decided by rule (`matcher.catalog.unindexed`) from the pin table
(`matcher.catalog.pin_table`), the release the log names and whose code ran the import.

Every line here is real: an excerpt of the field corpus's train split (its thread in
`tests/fixtures/field/sglang-f/index.json`) or a public thread's paste (URL beside it, train).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.catalog import mismatch, pin_table, unindexed

ROOT = Path(__file__).resolve().parents[1]
FIELD = ROOT / "tests" / "fixtures" / "field" / "sglang-f"
GENERATED = ROOT / "patterns" / "sglang" / "generated"


def _excerpt(name: str) -> tuple[str, str]:
    """(the excerpt, its last exception line)."""
    text = (FIELD / name).read_text(encoding="utf-8")
    line = next(x for x in reversed(text.splitlines()) if "Error: " in x)
    return text, line


def _scan(name: str) -> list[dict]:
    from matcher.catalog import load_catalog
    from matcher.scan import scan_events

    catalog = load_catalog(builtin=False, user_paths=[
        GENERATED / "mismatch.jsonl", ROOT / "patterns" / "sglang" / "curated"])
    return scan_events([str(FIELD / name)], catalog).events


@pytest.mark.parametrize(("name", "error_class"), [
    # sglang's fp8.py imports aiter's name: the import ran in sglang's frame, which names no
    # site of a record whose message Python makes — the record stands
    ("aiter-305-ck-moe-2stages-win4-sglang-fp8.log", "ImportError"),
    # sglang's quark scheme imports aiter, whose own module looks up `aiter.dtypes`
    ("22279-aiter-no-attribute-dtypes.log", "AttributeError"),
])
def test_a_mismatch_raised_under_sglangs_frames_is_recognized(name: str, error_class: str) -> None:
    events = [e for e in _scan(name) if e.get("error_class") == error_class]
    assert [e["pattern_id"] for e in events] == [
        {"ImportError": "5ed7a61f8d0e4ff5", "AttributeError": "bfe403cbb9d42dac"}[error_class]]


def test_an_unpinned_companion_gets_the_build_the_release_is_made_with() -> None:
    text, line = _excerpt("aiter-305-ck-moe-2stages-win4-sglang-fp8.log")
    answer = mismatch.remedy(line, None, traceback=text)
    assert answer is not None and answer.installs == ()
    assert "no sglang release requires aiter" in answer.documentation
    [solution] = answer.solutions
    assert "AITER_COMMIT" in solution and "lmsysorg/sglang image" in solution
    # the release in the log is named in the answer
    named = mismatch.remedy(line, "0.4.5.post1", traceback=text)
    assert named is not None and "sglang 0.4.5.post1" in named.solutions[0]


def test_the_importer_is_the_innermost_frame_outside_the_package() -> None:
    text, _ = _excerpt("22279-aiter-no-attribute-dtypes.log")
    assert unindexed.importer(text, "aiter") == "sglang"  # aiter's frames, under sglang's
    text, _ = _excerpt("fastchat-3703-sglang-is-multimodal-model.log")
    assert unindexed.importer(text, "sglang") == ""  # FastChat's worker: a project's code
    assert unindexed.importer(None, "aiter") is None


@pytest.mark.parametrize(("path", "package"), [
    ("/usr/local/sglang/python/sglang/srt/layers/quantization/fp8.py", "sglang"),
    ("sglang/srt/layers/quantization/quark/schemes/quark_w4a4_mxfp4.py", "sglang"),
    ("aiter/ops/triton/quant/fused_fp8_quant.py", "aiter"),
    ("/root/miniconda3/envs/xinf/lib/python3.10/site-packages/xinference/core/worker.py",
     "xinference"),
    ("/p/haicluster/llama/FastChat/fastchat/serve/sglang_worker.py", ""),
    ("<stdin>", ""),
])
def test_a_frames_package(path: str, package: str) -> None:
    assert unindexed.frame_package(path) == package


def test_another_projects_import_gets_its_own_requirements_not_a_pin() -> None:
    # https://github.com/huggingface/huggingface_hub/issues/2478 (train), as pasted: the user's
    # own code asked huggingface_hub for a name; what it wants is in that code's requirements
    traceback = ('Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
                 "ImportError: cannot import name 'ModelFilter' from 'huggingface_hub' "
                 r"(D:\Program Files\Python\Python310\lib\site-packages\huggingface_hub"
                 r"\__init__.py)")
    line = traceback.splitlines()[-1]
    answer = mismatch.remedy(line, "0.4.5.post1", traceback=traceback)
    assert answer is not None and answer.installs == ()
    assert answer.documentation.startswith("Your code (a script or project")
    assert answer.solutions[0].startswith("Install the huggingface-hub version your project's "
                                          "requirements name")


def test_the_pin_table_holds_every_releases_requirements() -> None:
    table = pin_table.load()
    assert table is not None
    # read from sglang 0.4.5.post1's wheel (pip's report of its metadata)
    assert table.spec("torchvision", "0.4.5.post1") == "==0.20.1"
    assert table.spec("sgl-kernel", "0.4.5.post1") == "==0.0.9.post1"
    assert table.spec("huggingface-hub", "0.4.5.post1") == ""  # required, unbounded
    assert table.spec("aiter", "0.4.5.post1") is None  # never in a wheel's requirements
    # sglang 0.1.12 still required vllm, from an open bound
    assert table.spec("vllm", "0.1.12") == ">=0.2.5"
    assert table.releases[0] == "0.1.3" and "0.5.23" in table.releases


def test_a_pinned_unindexed_package_gets_the_releases_exact_pin() -> None:
    table = pin_table.load()
    assert table is not None
    # the rule's arithmetic on the table (the name is no log's: `X`)
    answer = unindexed.answer("torchvision", "`torchvision.X`", ["0.4.5.post1"], "0.4.5.post1",
                              None, table)
    assert answer is not None and answer.installs == ("torchvision==0.20.1",)
    assert "sglang 0.4.5.post1 requires torchvision==0.20.1" in answer.documentation
    # an unbounded requirement admits the installed one too: no version to give
    free = unindexed.answer("huggingface_hub", "`huggingface_hub.X`", ["0.4.5.post1"],
                            "0.4.5.post1", None, table)
    assert free is not None and free.solutions == ()
    # the release not known: no requirement of it is bounded, nothing to say
    assert unindexed.answer("huggingface_hub", "`huggingface_hub.X`", [], None, None,
                            table) is None


def test_a_pinned_package_lists_each_releases_pin_when_the_release_is_unknown() -> None:
    table = pin_table.load()
    assert table is not None
    answer = unindexed.answer("soundfile", "`soundfile.X`", [], None, None, table)
    assert answer is not None and answer.installs == ()
    [solution] = answer.solutions
    assert "pip install 'soundfile==0.13.1'" in solution


def test_an_indexed_package_keeps_the_index_policy() -> None:
    # functionary #312 (train): transformers has an index, which finds the name in every release
    # it read — the installed one predates them; the index says so, no pin rule speaks
    _, line = _excerpt("functionary-312-transformers-pilimageresampling.log")
    answer = mismatch.remedy(line, None)
    assert answer is not None and answer.installs == ()
    assert answer.documentation.startswith("Every release of transformers read")


def test_the_pin_table_renders_what_it_parses() -> None:
    text = (GENERATED / "sglang-pins.tsv").read_text(encoding="utf-8")
    table = pin_table.PinTable.parse(text)
    per_release = {r: {d: pins[r] for d, pins in table.pins.items() if r in pins}
                   for r in table.releases}
    assert pin_table.render(per_release) == text


def test_a_name_no_read_version_has_gets_the_unread_pin_of_the_running_releases() -> None:
    # The rule's arithmetic on the thinned sgl-kernel index (the name `X` is no log's): sglang
    # 0.4.4..0.4.6 pin sgl-kernel versions the index did not read, so "no release read defines
    # it" proves nothing against them — each release's exact pin is the fix.
    line = "ImportError: cannot import name 'X' from 'sgl_kernel'"
    one = mismatch.remedy(line, "0.4.4")
    assert one is not None and one.installs == ("sgl-kernel==0.0.5",)
    assert "sglang 0.4.4 requires sgl-kernel==0.0.5, a release not read here" in \
        one.documentation
    several = mismatch.remedy(line, "0.4.4..0.4.6")
    assert several is not None and several.installs == ()
    [solution] = several.solutions
    assert "sglang 0.4.4..0.4.4.post1: pip install 'sgl-kernel==0.0.5'" in solution
    assert "sglang 0.4.5.post2..0.4.6: pip install 'sgl-kernel==0.0.9.post2'" in solution
    # no release named: nothing to pin, but whose requirement to read
    unknown = mismatch.remedy(line, None)
    assert unknown is not None and unknown.installs == ()
    assert unknown.documentation.startswith("No release of sgl-kernel read")
    assert "m.requires('sglang') if 'sgl-kernel' in r" in unknown.solutions[0]


def test_an_import_from_no_file_is_a_shadowing_folder_not_a_version() -> None:
    # https://github.com/sgl-project/sglang/issues/14398 (train, tests/fixtures/field/sglang-a):
    # sglang 0.5.6's ROCm image; every release since 0.4.4.post2 defines ServerArgs, so a pin
    # (`sglang>=0.4.4.post2`, which 0.5.6 already meets) would be no fix
    line = "ImportError: cannot import name 'ServerArgs' from 'sglang' (unknown location)"
    answer = mismatch.remedy(line, "0.5.6")
    assert answer is not None and answer.installs == ()
    assert "directory named `sglang` without an `__init__.py`" in answer.documentation
    assert "print(sglang.__path__)" in answer.solutions[0]
    assert not any("sglang>=" in s for s in answer.solutions)
    # https://github.com/vllm-project/vllm/issues/618 (train): a source tree named `vllm`
    # shadowing the install — every vllm defines LLM, so no version is to blame
    shadowed = mismatch.remedy("ImportError: cannot import name 'LLM' from 'vllm' "
                               "(unknown location)", None)
    assert shadowed is not None and shadowed.installs == ()
    assert "print(vllm.__path__)" in shadowed.solutions[0]


def test_a_projects_import_of_an_sglang_name_no_release_has_points_at_its_pins() -> None:
    # FastChat's real frames (fastchat-3703), the name `X` no log's: no sglang release read
    # defines it, and the code asking is FastChat's — its own pins of sglang decide
    text, _ = _excerpt("fastchat-3703-sglang-is-multimodal-model.log")
    line = "ImportError: cannot import name 'X' from 'sglang.srt.utils'"
    answer = mismatch.remedy(line, None, traceback=text.replace("is_multimodal_model", "X"))
    assert answer is not None and answer.installs == ()
    assert answer.documentation.startswith("No release of sglang read")
    [solution] = answer.solutions
    assert "install the sglang its project pins" in solution
    # no frame shown: whose code asked is not known — either's fix
    unknown = mismatch.remedy(line, None)
    assert unknown is not None and unknown.installs == ()
    assert unknown.solutions[0].startswith("If sglang's own code imports it, reinstall sglang")
    assert unindexed.innermost(text) == "" and unindexed.innermost(None) is None


def test_transformers_lazy_import_wrapper_is_an_import_of_its_inner_message() -> None:
    # https://github.com/luca-medeiros/lang-segment-anything/issues/67 (train), as pasted
    message = ("RuntimeError: Failed to import transformers.generation.utils because of the "
               "following error (look up to see its traceback):\ncannot import name "
               "'split_torch_state_dict_into_shards' from 'huggingface_hub' (/usr/local/lib/"
               "python3.10/dist-packages/huggingface_hub/__init__.py)")
    assert mismatch.lazy_wrapped(message)
    assert mismatch.parse(message) == mismatch.Form(
        "import", "huggingface_hub", "split_torch_state_dict_into_shards")
    # sglang requires huggingface-hub unbounded: no version to give; no frame shows whose
    # code imports it
    unknown = mismatch.remedy(message, None)
    assert unknown is not None and unknown.installs == ()
    assert "another package's: pip check" in unknown.solutions[0]
    from matcher.pipeline import _mismatch_shaped

    assert _mismatch_shaped("RuntimeError", message)
    assert not _mismatch_shaped("RuntimeError", "RuntimeError: NCCL error")


def test_transformers_lazy_import_wrapper_is_recognized(tmp_path: Path) -> None:
    # the same paste (lang-segment-anything #67, train), as a log's two lines
    from matcher.catalog import load_catalog
    from matcher.scan import scan_events

    log = tmp_path / "lazy.log"
    log.write_text(
        "RuntimeError: Failed to import transformers.generation.utils because of the following "
        "error (look up to see its traceback):\ncannot import name "
        "'split_torch_state_dict_into_shards' from 'huggingface_hub' (/usr/local/lib/python3.10/"
        "dist-packages/huggingface_hub/__init__.py)\n", encoding="utf-8")
    catalog = load_catalog(builtin=False, user_paths=[
        GENERATED / "mismatch.jsonl", ROOT / "patterns" / "sglang" / "curated"])
    [event] = [e for e in scan_events([str(log)], catalog).events
               if e.get("error_class") == "RuntimeError"]
    lazy = next(r for r in catalog.records if r.tags and r.tags[-1] == "lazy")
    assert event["pattern_id"] == lazy.id


def test_an_unpinned_module_is_no_companion_unless_sglang_or_an_install_shows_it() -> None:
    # sglang #5494 (train): the line alone, aiter's file under site-packages — an installed aiter
    _, line = _excerpt("5494-aiter-ck-moe-2stages-win4-xinference.log")
    answer = mismatch.remedy(line.split("] ", 1)[1], None)
    assert answer is not None and "AITER_COMMIT" in answer.solutions[0]
    # the same name from a path outside site-packages, no frame: maybe a script's own module
    local = "ImportError: cannot import name 'ck_moe_2stages_win4' from 'aiter.fused_moe_bf16_asm'"
    # (sglang's ROCm images install aiter in place from /sgl-workspace/aiter): no build named
    answer = mismatch.remedy(local + " (/usr/local/aiter/aiter/fused_moe_bf16_asm.py)", None)
    assert answer is not None and "AITER_COMMIT" not in " ".join(answer.solutions)
    assert "outside site-packages: a source checkout of aiter" in answer.documentation
