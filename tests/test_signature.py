"""A method or a parameter only some releases have (`matcher.catalog.signature`), on the lines
of real threads of the train split."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.catalog import mismatch, signature

FIELD = Path(__file__).resolve().parent / "fixtures" / "field"


def _text(name: str) -> str:
    return (FIELD / name).read_text(encoding="utf-8")


def test_the_missing_arguments_are_read_from_the_message() -> None:
    m = signature.MISSING.match(
        "BatchPrefillWithPagedKVCacheWrapper.begin_forward() missing 1 required positional "
        "argument: 'page_size'")
    assert m is not None and signature.missing_names(m["names"]) == ("page_size",)
    m = signature.MISSING.match("f() missing 3 required positional arguments: 'a', 'b', and 'c'")
    assert m is not None and signature.missing_names(m["names"]) == ("a", "b", "c")


@pytest.mark.parametrize("name", [
    # sglang #1241: sglang's bench_latency against its own ScheduleBatch, no frame shown
    "sglang-b/1241-schedulebatch-no-attr-sample-bench-latency.log",
    # sglang #28660: sglang's ModelRunner calling its own MLX stub (a bug of the release)
    "sglang-h/28660-mlx-stub-initialize-signature.log",
    # sglang #88: sglang's interpreter calling its own Runtime (two modules define Runtime)
    "projects/88-runtime-no-cache-prefix.log",
    # sglang #565: flashinfer 0.0.x, older than any flashinfer the index reads
    "sglang-f/565-flashinfer-begin-forward-page-size.log",
])
def test_sglang_calling_itself_or_a_release_not_read_gets_no_pin(name: str) -> None:
    text = _text(name)
    line = next(x for x in reversed(text.splitlines())
                if "object has no attribute" in x or "required positional" in x)
    assert signature.remedy(line.strip(), None, traceback=text) is None


def test_another_projects_call_of_an_sglang_method_gets_the_releases_that_define_it() -> None:
    # the line of sglang #1241 under FastChat's real frames (fastchat-3703): the caller is a
    # project's, the method sglang's, defined in 0.2.11..0.2.14.post2 only
    line = "AttributeError: 'ScheduleBatch' object has no attribute 'sample'"
    frames = _text("sglang-f/fastchat-3703-sglang-is-multimodal-model.log")
    answer = signature.remedy(line, None, traceback=frames)
    assert answer is not None
    assert answer.documentation.startswith(
        "`sglang.srt.managers.schedule_batch.ScheduleBatch.sample` is defined in sglang 0.2.11")
    assert answer.installs == ("sglang>=0.2.14.post1,<=0.2.14.post2",)
    # no frame: whose code calls it is not known — nothing is proved
    assert signature.remedy(line, None) is None


def test_another_projects_call_missing_a_parameter_gets_the_releases_without_it() -> None:
    # the line of sglang #28660 under FastChat's real frames: releases whose stub's
    # initialize() takes no `pre_model_load_memory`
    line = ("TypeError: MlxModelRunnerStub.initialize() missing 1 required positional argument: "
            "'pre_model_load_memory'")
    frames = _text("sglang-f/fastchat-3703-sglang-is-multimodal-model.log")
    answer = signature.remedy(line, None, traceback=frames)
    assert answer is not None and "without a parameter `pre_model_load_memory`" in answer.documentation
    [install] = answer.installs
    assert install.startswith("sglang>=")


def test_builtin_types_and_names_no_index_holds_get_nothing() -> None:
    assert signature.remedy("AttributeError: 'NoneType' object has no attribute 'shape'") is None
    assert signature.remedy("AttributeError: type object 'Nope' has no attribute 'x'") is None


def test_sglangs_call_of_a_dependencys_method_gets_a_release_of_it_that_defines_it() -> None:
    # sglang #565's real frames (sglang's model runner calling flashinfer); the method is the
    # index's own: `BatchDecodeWithPagedKVCacheWrapper.end_forward`, which only the flashinfer
    # releases up to 0.6.18 define
    frames = _text("sglang-f/565-flashinfer-begin-forward-page-size.log")
    line = "AttributeError: 'BatchDecodeWithPagedKVCacheWrapper' object has no attribute 'end_forward'"
    answer = signature.remedy(line, "0.5.5", traceback=frames)
    assert answer is not None and answer.installs == ("flashinfer-python==0.5.0",)
    assert "defined in flashinfer-python 0.5.0..0.6.18" in answer.documentation
    # flashinfer's own frame reading it: not a pin's doing
    own = '  File "/usr/lib/python3.10/site-packages/flashinfer/decode.py", line 1, in f\n'
    assert signature.remedy(line, "0.5.5", traceback=own) is None


def test_a_function_lines_group_is_found_when_the_index_has_no_import_lines() -> None:
    # flashinfer's index has no `A` lines: its `F` group runs up to the pins
    d = mismatch.index_dir()
    found = signature.hits("BatchDecodeWithPagedKVCacheWrapper.end_forward",
                           [mismatch._load(d, "flashinfer-python")])
    assert [h.module for h in found] == ["flashinfer.decode"]


def test_the_pipeline_asks_signature_when_mismatch_has_no_form_for_the_message() -> None:
    from matcher import pipeline

    frames = _text("sglang-f/565-flashinfer-begin-forward-page-size.log")
    line = "AttributeError: 'BatchDecodeWithPagedKVCacheWrapper' object has no attribute 'end_forward'"
    assert mismatch.remedy(line, "0.5.5", traceback=frames) is None
    answer = pipeline._mismatch_answer(line, "0.5.5", frames)
    assert answer is not None and answer.installs == ("flashinfer-python==0.5.0",)
