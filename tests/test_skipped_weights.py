"""A weight loader's `{name} not found in params_dict.` (`matcher.skipped_weights`): the warning's
record, with what the skipped tensor's name says first; dots3's `ValueError` of the same words
keeps its own record. And sglang 0.1.x's `Unsupported architectures: …` with its way out.

Lines are real (the public thread beside them, train split) or formatted from sglang's source
where said.
"""

from __future__ import annotations

import pytest
from generated_layer import scan

SKIPPED, RAISED = "3b0083ad5f342380", "21bb067d015e3427"


@pytest.fixture(scope="module")
def engine(loaded):
    return loaded[1]


@pytest.mark.parametrize("line", [
    # https://github.com/sgl-project/sglang/issues/23142, as pasted (its header's '[' cut off)
    "2026-04-18 22:34:20 TP0] model.eh_proj.weight_scale not found in params_dict.",
    "[2026-04-18 22:34:20 TP0] model.eh_proj.weight_scale not found in params_dict.",
])
def test_a_skipped_scale_is_the_loader_warning_with_the_quantization_words(engine, line):
    [e] = scan(engine, line)
    assert (e["event"], e["pattern_id"]) == ("sglang_warning", SKIPPED)
    first = e["remediation"]["solutions"][0]
    assert first.startswith("`model.eh_proj.weight_scale` is a quantization tensor")
    assert "--quantization" in first


def test_the_same_words_as_a_valueerror_keep_the_raise_record(engine):
    # formatted from sglang 0.5.23 dots3_common/modeling.py:2001
    # (`raise ValueError(f"{param_name} not found in params_dict.")`)
    [e] = scan(engine, "ValueError: model.layers.0.self_attn.qkv_proj.weight not found in "
                       "params_dict.")
    assert (e["event"], e["pattern_id"]) == ("sglang_error", RAISED)


@pytest.mark.parametrize("line", [
    # https://github.com/sgl-project/sglang/issues/1331 (the supported list shortened)
    ("ValueError: Unsupported architectures: ChatGLMForConditionalGeneration. Supported list: "
     "['ChatGLMForCausalLM', 'ChatGLMModel', 'Qwen2ForCausalLM']"),
    "ValueError: Unsupported architectures: LlavaQwenForCausalLM",  # sglang #467
])
def test_an_unsupported_architecture_of_0_1_says_upgrade(engine, line):
    [e] = scan(engine, line)
    assert e["event"] == "sglang_error"
    assert e["remediation"]["solutions"][0].startswith("Upgrade sglang to a release that")
