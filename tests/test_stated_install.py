"""The install a message states itself (`matcher.catalog.stated_install`), read per event.

The lines are sglang's own messages as its source prints them (the generated records' literal
templates, release named beside each) or pasted in a public thread of the train split (URL
beside it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from generated_layer import scan

from matcher.catalog import load_catalog
from matcher.catalog.stated_install import command_requirements, requirements
from matcher.engine import Engine

GENERATED = Path(__file__).resolve().parents[1] / "patterns" / "sglang" / "generated"


@pytest.mark.parametrize(("line", "wanted"), [
    # sglang 0.4.6.post2 (srt/layers/quantization/__init__.py), its {quantization} being awq
    (("ValueError: awq quantization requires some operators from vllm. Please install vllm by "
     "`pip install vllm==0.8.4`"), ("vllm==0.8.4",)),
    # sglang 0.5.8..0.5.23 (srt/layers/quantization/bitsandbytes.py)
    ("bitsandbytes version is wrong. Please install bitsandbytes>=0.46.1.",
     ("bitsandbytes>=0.46.1",)),
    # sglang 0.5.19..0.5.23 (multimodal_gen …/kitchen_w4a8.py): the command names no version,
    # the words do
    ("W4A8 checkpoints require comfy-kitchen>=0.2.27 (`pip install -U comfy-kitchen`).",
     ("comfy-kitchen>=0.2.27",)),
    # sglang 0.5.11..0.5.23 (srt/server_args.py, later srt/arg_groups/serving_hook.py)
    (("--enable-http2 requires the 'granian' package. Install it with: pip install "
     "\"sglang[http2]\""), ("sglang[http2]",)),
    # transformers before 4.35 (modeling_utils.py), two commands, the second in quotes:
    # https://github.com/huggingface/text-generation-inference/issues/1006 (train)
    (("ImportError: Loading GPTQ quantized model requires optimum library : `pip install "
      "optimum` and auto-gptq library 'pip install auto-gptq'"), ("optimum", "auto-gptq")),
    # transformers' quantizer_awq.py, its backticks lost in the paste:
    # https://github.com/oobabooga/textgen/issues/7007 (train)
    ("ImportError: Loading an AWQ quantized model requires auto-awq library (pip install autoawq)",
     ("autoawq",)),
    # https://github.com/hiyouga/LlamaFactory/issues/8544 (train)
    ("To fix: run `pip install sglang>=0.4.5` or set `DISABLE_VERSION_CHECK=1` to skip this check.",
     ("sglang>=0.4.5",)),
])
def test_the_install_a_message_names_is_read(line: str, wanted: tuple[str, ...]) -> None:
    assert requirements(line) == wanted


@pytest.mark.parametrize("line", [
    # sglang 0.4.5.post1..0.5.8.post1 (srt/disaggregation/mooncake/transfer_engine.py): a
    # project's build instructions, not a distribution name
    ("Please install mooncake by following the instructions at https://github.com/kvcache-ai/"
     "Mooncake/blob/main/doc/en/build.md to run SGLang with MooncakeTransferEngine."),
    # sglang 0.5.11..0.5.23 (srt/platforms/__init__.py): an editable install of the operator's
    # plugin
    ("SGLANG_PLATFORM='x' not found in discovered platform plugins (available: []). Install the "
     "plugin with 'pip install -e' to register its entry_point."),
    # sglang 0.5.20..0.5.23 (multimodal_gen …/modeling_qwen3.py): a wheel the operator picks
    ("Requested attn_backend='flash' but `flash_attn` is not installed. Install it (e.g. `uv pip "
     "install <flash_attn-*.whl>`) or use 'auto' / 'sdpa'."),
    # sglang 0.4.5.post2..0.5.5.post3 (srt/layers/quantization/fp8.py): a bare name in words
    "marlin FP8 requires some operators from vllm. Please install vllm.",
    # sglang 0.4.4.post2..0.4.6.post1 (srt/model_executor/model_runner.py): a GPU, not a package
    "FlashAttention v3 Backend requires SM>=90. Please use `--attention-backend flashinfer`.",
    # pip, the install that failed (https://github.com/bytedance-iaas/sglang/pull/221, train)
    ("ERROR: Cannot install sglang and sglang[srt]==0.4.9.post3 because these package versions "
     "have conflicting dependencies."),
])
def test_a_command_for_the_operator_to_complete_or_a_bare_name_gives_nothing(line: str) -> None:
    assert requirements(line) is None


def test_a_command_with_an_index_is_left_whole() -> None:
    assert command_requirements("pip install sgl-kernel -i https://docs.sglang.ai/whl/cu118") is None
    assert command_requirements("pip install -U 'a>=1' b") == ("a>=1", "b")


def test_an_event_of_such_a_record_carries_the_install(tmp_path: Path) -> None:
    # the generated record of the message (an ImportError), alone in a catalog
    line = next(raw for raw in (GENERATED / "sglang.jsonl").open(encoding="utf-8")
                if '"bitsandbytes version is wrong. Please install bitsandbytes>=0.46.1."' in raw
                and "/srt/layers/" in raw)
    assert not json.loads(line).get("fixActions")
    (tmp_path / "one.jsonl").write_text(line, encoding="utf-8")
    catalog = load_catalog(builtin=False, user_paths=[tmp_path / "one.jsonl"])
    [event] = [e for e in scan(Engine(catalog.records, cache=None),
                               "ImportError: bitsandbytes version is wrong. Please install "
                               "bitsandbytes>=0.46.1.\n") if e["pattern_id"]]
    remediation = event["remediation"]
    assert remediation["fix_actions"][0] == [{"op": "install", "value": "bitsandbytes>=0.46.1"}]
    assert remediation["solutions"][0] == \
        "Install what the message names: pip install 'bitsandbytes>=0.46.1'"
