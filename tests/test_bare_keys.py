"""A bare `KeyError: '…'` told by its key (`matcher.bare_keys`): a Hugging Face model type is
the model-type lookup, answered with the transformers (or sglang) release that knows it
(`matcher.catalog.model_types`); a checkpoint tensor's name is weight loading's lookup,
answered by what the name says (`matcher.catalog.tensor_names`).

Every line is real: as pasted in the public thread beside it (train split), or a run here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import curated_with

from matcher.catalog import model_types, tensor_names

ROOT = Path(__file__).resolve().parents[1]
MODEL_TYPE, WEIGHT_NAME = "13341680e05abeb3", "7384eab5e1c0de1d"
LAYER_PARAM, LORA_ADAPTER = "5858185d1080ed30", "3fcf311a16e852e1"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    # the curated layer, and of the generated one only sglang's LoRA-loading message
    return curated_with(tmp_path_factory.mktemp("catalog"), LORA_ADAPTER)


def _events(catalog, tmp_path: Path, text: str, version: str = "auto") -> list[dict]:
    from matcher.scan import scan_events

    log = tmp_path / "x.log"
    log.write_text(text + "\n", encoding="utf-8")
    return scan_events([str(log)], catalog, sglang_version=version).events


@pytest.mark.parametrize(("line", "first"), [
    ("KeyError: 'qwen3_moe'", "4.51.0"),  # https://github.com/xorbitsai/inference/issues/3471
    ("KeyError: 'gemma3'", "4.50.0"),  # https://github.com/oobabooga/textgen/issues/6789
    # https://github.com/QwenLM/Qwen3/issues/247 (a maintainer: transformers>=4.37.0)
    ("KeyError: 'qwen2'", "4.37.0"),
    ("KeyError: 'qwen2_5_omni'", "4.52.1"),  # https://github.com/vllm-project/vllm/issues/18450
])
def test_a_bare_model_type_is_the_model_type_lookup(catalog, tmp_path, line, first) -> None:
    [e] = _events(catalog, tmp_path, line)
    assert (e["event"], e["pattern_id"]) == ("sglang_error", MODEL_TYPE)
    solutions = e["remediation"]["solutions"]
    assert f"pip install 'transformers>={first}'" in " ".join(solutions)
    assert {"op": "install", "value": f"transformers>={first}"} in [
        step for way in e["remediation"]["fix_actions"] for step in way]


def test_the_release_in_the_log_decides_between_its_pin_and_an_upgrade(catalog, tmp_path):
    # sglang 0.4.5 pins transformers 4.51.0, which has qwen3_moe: the installed one is older
    [e] = _events(catalog, tmp_path, "KeyError: 'qwen3_moe'", version="0.4.5")
    assert e["remediation"]["solutions"][0].startswith(
        "Install the transformers this sglang pins: pip install 'transformers==4.51.0'")
    # 0.4.4 pins 4.48.3: the first release whose pin has it is 0.4.4.post4 (4.51.0)
    [e] = _events(catalog, tmp_path, "KeyError: 'qwen3_moe'", version="0.4.4")
    assert e["remediation"]["solutions"][0].startswith("Upgrade sglang to 0.4.4.post4 or later")


def test_a_range_of_releases_whose_pins_all_know_the_type_is_not_told_to_downgrade() -> None:
    answer = model_types.remedy("qwen3_moe", "0.5.1..0.5.3")  # pins 4.55.2, 4.56.1, 4.57.0
    assert answer is not None and answer.installs == ("transformers>=4.51.0",)
    assert answer.solutions[0].startswith("Install the transformers your sglang release pins")


def test_a_type_the_logs_release_registers_itself_is_answered_by_transformers() -> None:
    # sglang registers qwen3_next from 0.5.2: on 0.5.3 the lookup ran without sglang's
    # registry, so transformers must know it (4.57.1, pinned from 0.5.3.post2)
    answer = model_types.remedy("qwen3_next", "0.5.3")
    assert answer is not None and answer.installs == ("sglang>=0.5.3.post2", "transformers>=4.57.1")
    assert model_types.remedy("qwen3_next", "0.5.1").installs[0] == "sglang>=0.5.2"


def test_the_traceback_of_transformers_frame_gets_the_same_answer(catalog, tmp_path) -> None:
    run = (ROOT / "tests" / "fixtures" / "libs" / "transformers-4.36.2-unknown-model-type.log")
    [e] = _events(catalog, tmp_path, run.read_text(encoding="utf-8"))
    assert e["pattern_id"] == MODEL_TYPE
    assert "transformers>=4.51.0" in e["remediation"]["solutions"][1]


@pytest.mark.parametrize("line", [
    # a remote-code model type no transformers release has: https://github.com/sgl-project/sglang/issues/6732
    "KeyError: 'llava_qwen'",
    # a request's field: https://github.com/THUDM/slime/issues/1514
    "KeyError: 'weight_version'",
    # a request id: https://github.com/sgl-project/sglang/issues/2812
    "KeyError: 'dc49ad867dc144249f59f4e85c7229cd'",
])
def test_other_bare_keys_are_not_claimed(catalog, tmp_path, line) -> None:
    [e] = _events(catalog, tmp_path, line)
    assert e["pattern_id"] not in (MODEL_TYPE, WEIGHT_NAME)


def test_a_model_type_every_release_sglang_ran_with_has_is_not_in_the_vocabulary() -> None:
    assert not model_types.is_model_type("llama") and not model_types.is_model_type("mistral")
    assert model_types.is_model_type("deepseek_v3")


def test_a_model_type_only_sglang_registers_names_the_sglang_release() -> None:
    answer = model_types.remedy("deepseek_vl_v2", None)
    assert answer is not None and answer.installs[-1].startswith("sglang>=")


def test_a_model_types_key_raised_at_another_frame_keeps_its_event(catalog, tmp_path) -> None:
    # a key that is a model type looked up elsewhere: sglang 0.5.23's chat-template registry
    # (`get_chat_template('gemma3')`, its file loaded from the wheel and run here)
    run = ROOT / "tests" / "fixtures" / "bare_keys" / "sglang-0.5.23-chat-template-registry-gemma3.log"
    [e] = _events(catalog, tmp_path, run.read_text(encoding="utf-8"))
    assert e["pattern_id"] != MODEL_TYPE


@pytest.mark.parametrize(("line", "record", "kind"), [
    # https://github.com/Tencent/AngelSlim/issues/39: an EAGLE3 head loaded as a base model
    ("KeyError: 'midlayer.self_attn.qkv_proj.weight'", WEIGHT_NAME, tensor_names.OTHER),
    # https://github.com/hiyouga/LlamaFactory/issues/8254: a Qwen2.5-VL fine-tune's layout
    ("KeyError: 'language_model.embed_tokens.weight'", WEIGHT_NAME, tensor_names.TOWER),
    # https://github.com/modelscope/ms-swift/issues/4338
    ("KeyError: 'visual.patch_embed.proj.weight'", WEIGHT_NAME, tensor_names.TOWER),
    # https://github.com/vllm-project/vllm/issues/19149
    ("KeyError: 'language_model.layers.0.self_attn.qkv_proj.weight'", LAYER_PARAM,
     tensor_names.TOWER),
    # https://github.com/vllm-project/llm-compressor/issues/959
    ("KeyError: 'layers.0.mlp.down_proj.weight_scale'", LAYER_PARAM, tensor_names.QUANTIZATION),
])
def test_a_bare_tensor_name_is_weight_loading(catalog, tmp_path, line, record, kind) -> None:
    [e] = _events(catalog, tmp_path, line)
    assert (e["event"], e["pattern_id"]) == ("sglang_error", record)
    name = line.split("'")[1]
    assert tensor_names.kind(name) == kind
    first = e["remediation"]["solutions"][0]
    if kind == tensor_names.TOWER:
        assert first.startswith(f"`{name}` is a multimodal checkpoint's tensor")
        assert "fix_actions" not in e["remediation"]  # not the quantization record's steps
    elif kind == tensor_names.QUANTIZATION:
        assert "--quantization" in first
    else:
        assert "--speculative-draft-model-path" in first  # the record's own first way out


def test_a_lora_adapter_without_v_proj_says_what_the_loader_stacks(catalog, tmp_path) -> None:
    excerpt = ROOT / "tests" / "fixtures" / "field" / "sglang-e" / "28199-gemma4-lora-missing-v-proj.log"
    events = [e for e in _events(catalog, tmp_path, excerpt.read_text(encoding="utf-8"))
              if e["pattern_id"] == LORA_ADAPTER]
    assert events
    first = events[0]["remediation"]["solutions"][0]
    assert "q_proj, k_proj, v_proj" in first and "PR #28199" in first


def test_a_peft_wrapped_layers_base_weight_says_merge_first(catalog, tmp_path) -> None:
    # https://github.com/TIGER-AI-Lab/verl-tool/issues/125: a LoRA actor's weights synced to the
    # rollout engine with PEFT's layers still injected
    line = "KeyError: 'layers.0.self_attn.qkv_proj.base_layer.weight'"
    [e] = _events(catalog, tmp_path, line)
    assert e["pattern_id"] in (WEIGHT_NAME, LAYER_PARAM)
    assert tensor_names.kind(line.split("'")[1]) == tensor_names.LORA
    first = e["remediation"]["solutions"][0]
    assert "PEFT wrapped for LoRA" in first and "merge_and_unload()" in first
    assert "base_layer" not in (tensor_names.solution("model.layers.0.q_proj.lora_A.weight") or "")


@pytest.mark.parametrize("key", [
    "model.layers.20.self_attn.attn",  # a module, not a tensor
    "weight_version", "input_ids", "qwen3_moe",
])
def test_names_that_are_not_tensors(key: str) -> None:
    assert not tensor_names.is_tensor_name(key)


def _raised(e_line: str, path: str | None):
    from matcher.types import Event, RaisedAt

    at = None if path is None else RaisedAt(path=path, line=1, function="f", source_line="")
    return Event(event="sglang_unknown_error", error_class="KeyError", message=e_line,
                 source="x.log", severity="error", log_ts=None, observed_ts=0.0, ranks=(),
                 occurrences=1, traceback=None if path is None else f'  File "{path}", line 1',
                 raised_at=at)


@pytest.mark.parametrize(("path", "claimed"), [
    # a framework's own frame (verl's weight sync: https://github.com/TIGER-AI-Lab/verl-tool/issues/125)
    ("/.../verl/verl/workers/sharding_manager/fsdp_sglang.py", True),
    # no frame printed at all
    (None, True),
    # another engine's loader: vLLM's (verl-tool#125 above), vLLM-Ascend's quantization config
    # (https://github.com/vllm-project/vllm-ascend/issues/3785)
    ("/.../vllm/model_executor/models/qwen2.py", False),
    ("/mnt/kimi-k2/vllm-ascend/vllm_ascend/quantization/quant_config.py", False),
    # sglang's own frame no weight record names: its W8A8 config reads
    # `quant_description[prefix + ".weight"]` (sglang/srt/layers/quantization/w8a8_int8.py)
    ("sglang/srt/layers/quantization/w8a8_int8.py", False),
])
def test_a_tensor_name_is_weight_loading_where_no_engine_raised_it(catalog, path, claimed):
    from matcher import bare_keys

    record_of = {r.id: r for r in catalog.records}.get
    # https://github.com/modelscope/ms-swift/issues/4338 (a Qwen2.5-VL checkpoint's layout)
    e = _raised("KeyError: 'visual.patch_embed.proj.weight'", path)
    [out] = bare_keys.answered([e], record_of)
    assert (out.pattern_id == WEIGHT_NAME) is claimed


def test_a_plain_name_gets_the_layout_answer_and_a_draft_head_its_own() -> None:
    # https://github.com/Tencent/AngelSlim/issues/39: an EAGLE3 head loaded as a base model
    assert tensor_names.is_draft_head("midlayer.self_attn.qkv_proj.weight")
    # https://github.com/sgl-project/sglang/pull/12031 (train): a checkpoint named for another class
    words = tensor_names.layout_solution("lm_head.weight")
    assert "`architectures`" in words and "upgrade sglang" in words


def test_a_lora_sync_through_another_engine_keeps_the_peft_answer(catalog, tmp_path) -> None:
    run = ROOT / "tests" / "fixtures" / "bare_keys" / "verl-tool-125-lora-sync-keyerror.log"
    [e] = [e for e in _events(catalog, tmp_path, run.read_text(encoding="utf-8"))
           if e["message"].startswith("KeyError: 'layers.0")]
    assert e["pattern_id"] == LAYER_PARAM
    assert "PEFT wrapped for LoRA" in e["remediation"]["solutions"][0]
