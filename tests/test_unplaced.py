"""A name a package lacks when no version can be computed (`matcher.catalog.unplaced`): the
answer still says what to run and do, from the importer's frame and the file imported — on
lines and frames of train-split threads."""

from __future__ import annotations

from pathlib import Path

from matcher.catalog import mismatch, unplaced

# https://github.com/vllm-project/vllm/issues/14401 (train), as pasted: lm-format-enforcer's
# module importing a name transformers dropped
LMFE_FRAMES = (
    '  File "/usr/local/lib/python3.12/dist-packages/lmformatenforcer/integrations/'
    'transformers.py", line 5, in <module>\n'
    "    from transformers.generation.logits_process import LogitsWarper, "
    "PrefixConstrainedLogitsProcessor\n")
LMFE_LINE = ("ImportError: cannot import name 'LogitsWarper' from "
             "'transformers.generation.logits_process' (/usr/local/lib/python3.12/dist-packages/"
             "transformers/generation/logits_process.py)")

# https://github.com/sgl-project/sglang/issues/7919 (train), as pasted: the installed sglang's
# own modules importing each other; its last line is cut in the paste, so the line is the same
# error's as https://github.com/sgl-project/sglang/pull/3833 (train) pasted it
SGLANG_CIRCLE_FRAMES = (
    '  File "<stdin>", line 1, in <module>\n'
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/layers/linear.py", line 30, in '
    "<module>\n    from sglang.srt.layers.quantization.base_config import (\n"
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/layers/quantization/__init__.py",'
    " line 52, in <module>\n"
    "    from sglang.srt.layers.linear import LinearBase, UnquantizedLinearMethod\n")
SGLANG_CIRCLE_LINE = ("ImportError: cannot import name 'LinearBase' from partially initialized "
                      "module 'sglang.srt.layers.linear' (most likely due to a circular import)")


def test_another_packages_import_gets_that_packages_requirement(tmp_path: Path) -> None:
    # the index withheld (an empty index directory): no version can be computed, and the
    # importer is lm-format-enforcer's installed module — its requirement is what to install
    answer = mismatch.remedy(LMFE_LINE, None, traceback=LMFE_FRAMES, directory=tmp_path)
    assert answer is not None and answer.installs == ()
    assert answer.documentation.startswith("lmformatenforcer's code uses "
                                           "`transformers.generation.logits_process.LogitsWarper`")
    act, look = answer.solutions
    assert act.startswith("Install the transformers that the installed lmformatenforcer "
                          "requires: pip check names it")
    # the import name is not the distribution's: the command looks the distribution up
    assert "m.packages_distributions()['lmformatenforcer'][0]" in act
    assert look.startswith("See which transformers is imported: pip show transformers")
    # with the index, the releases that have the name decide (a version, not this rule)
    indexed = mismatch.remedy(LMFE_LINE, None, traceback=LMFE_FRAMES)
    assert indexed is not None and indexed.installs == ("transformers==4.48.3",)


def test_a_circle_inside_the_installed_package_is_no_shadowing_file() -> None:
    answer = mismatch.remedy(SGLANG_CIRCLE_LINE, None, traceback=SGLANG_CIRCLE_FRAMES)
    assert answer is not None and answer.installs == ()
    assert "is the installed sglang's own module (/usr/local/lib/python3.10/dist-packages/" \
        in answer.documentation
    [fix] = answer.solutions
    assert fix.startswith("Reinstall sglang whole: pip install --force-reinstall --no-deps")
    assert "rename" not in fix.lower()


def test_a_circle_in_a_file_outside_site_packages_is_a_checkout_or_a_shadowing_directory() -> None:
    # https://github.com/EleutherAI/lm-evaluation-harness/issues/2562 (train), as pasted
    line = ("ImportError: cannot import name 'cli_evaluate' from partially initialized module "
            "'lm_eval.__main__' (most likely due to a circular import) (/mnt/data-disk0/project/"
            "lm-evaluation-harness/lm_eval/__main__.py)")
    answer = mismatch.remedy(line, None)
    assert answer is not None
    assert "/lm_eval/__main__.py, outside site-packages" in answer.documentation
    [fix] = answer.solutions
    assert fix.startswith("pip show lm-eval gives the installed location")


def test_a_circle_with_no_file_shown_leaves_the_records_own_words() -> None:
    # https://github.com/lyogavin/airllm/issues/74 (train), as pasted; sglang #384 (train)
    for line in (("ImportError: cannot import name 'AirLLMLlama2' from partially initialized "
                 "module 'airllm' (most likely due to a circular import)"),
                 ("ImportError: cannot import name 'function' from partially initialized module "
                 "'sglang' (most likely due to a circular import)")):
        assert mismatch.remedy(line, None) is None
    # a script named like the package, in the frames: that file is renamed
    frames = '  File "/home/user/sglang.py", line 1, in <module>\n'
    named = mismatch.remedy("ImportError: cannot import name 'function' from partially "
                            "initialized module 'sglang' (most likely due to a circular "
                            "import)", None, traceback=frames)
    assert named is not None and named.solutions[0].startswith("Rename /home/user/sglang.py")


def test_a_module_file_outside_site_packages_may_be_an_editable_install() -> None:
    # sglang #5494 / aiter #305 (train): the ROCm images install aiter in place, so a path
    # outside site-packages is not proof of a stray copy — both are named, pip show decides
    line = ("ImportError: cannot import name 'ck_moe_2stages_win4' from 'aiter.fused_moe_bf16_asm' "
            "(/usr/local/aiter/aiter/fused_moe_bf16_asm.py)")
    answer = mismatch.remedy(line, None)
    assert answer is not None
    [fix] = answer.solutions
    assert fix.startswith("pip show aiter gives the installed location: if it is not that "
                          "directory")
    assert "editable install" in fix


def test_the_distribution_of_an_import_name() -> None:
    assert unplaced.distribution("sgl_kernel") == "sglang-kernel"
    assert unplaced.distribution("PIL") == "pillow"
    assert unplaced.distribution("huggingface_hub") == "huggingface-hub"
    assert unplaced.imported_file("… from 'x' (/a/site-packages/x/__init__.py)") == \
        "/a/site-packages/x/__init__.py"
    assert unplaced.imported_file("… from 'x' (unknown location)") is None


def test_an_sglang_name_every_release_defines_is_another_copy_or_a_broken_install() -> None:
    # no "older than its first release" for sglang itself: a copy or mixed files
    got = unplaced.answer("sglang.srt.server_args", "ServerArgs", "", None, "0.1.3..0.5.23")
    assert got.documentation.startswith("Every release of sglang read (0.1.3..0.5.23) defines")
    look, reinstall = got.solutions
    assert look.startswith("See which sglang is imported")
    assert reinstall.startswith("Reinstall sglang whole")
    assert not any("older than" in s for s in got.solutions)
