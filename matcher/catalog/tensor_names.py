"""What a checkpoint tensor's name says when weight loading cannot place it.

sglang's model classes load a checkpoint by name: `load_weights` maps each tensor's name to
one of the model's parameters and looks it up (`param = params_dict[name]`); a name the model
has no parameter for raises `KeyError: '<name>'`. The LoRA loader stacks an adapter's q/k/v
(and gate/up) weights by name the same way (`weights[v_name]` in `LoRAAdapter.
normalize_qkv_proj`). The name tells which mismatch it is:

- a LoRA tensor (`…lora_A.weight`): an adapter, loaded as an adapter or inside a checkpoint;
  or the base weight of a layer PEFT wrapped for LoRA (`…q_proj.base_layer.weight`: PEFT's
  `BaseTunerLayer` keeps the wrapped module as `base_layer`), the state dict of a PEFT model
  whose LoRA layers are still injected;
- a quantization tensor (`…weight_scale`, `…input_scale`, `qweight`, `qzeros`, `g_idx`,
  `…weight_packed`): the quantization sglang built the model for is not the checkpoint's;
- a vision or audio tower's tensor (`visual.…`, `vision_tower.…`, `vision_model.…`), or a
  multimodal layout's language model (`model.language_model.…`): the multimodal checkpoint's
  layout is not the one the chosen model class maps;
- any other parameter name (`model.embed_tokens.weight`).

Pure; `solution` gives the words for the kinds that have their own way out.
"""

from __future__ import annotations

import re

# a dotted parameter path whose last part is a tensor's own name (weight, bias, a scale …)
_TENSOR = re.compile(
    r"^[A-Za-z_]\w*\.(?:\w+\.)*(?:\w+_)?(?:weight|bias|qweight|qzeros|scales?|g_idx|zero_point|"
    r"packed|inv_freq)(?:_\w+)?$")
_LORA = re.compile(r"(?:^|\.)(?:lora_(?:A|B|embedding_A|embedding_B|magnitude_vector)|base_layer)"
                   r"(?:\.|$)")
_BASE_LAYER = re.compile(r"\.base_layer\.")
_LORA_SIBLING = re.compile(r"\.(?P<module>v_proj|k_proj|up_proj)\.lora_[AB]\.")
_QUANT = re.compile(r"(?:^|[._])(?:\w*scale\w*|qweight|qzeros|g_idx|\w*zero_point|weight_packed|"
                    r"weight_shape)$")
# a vision or audio tower's module, or the language model's of a multimodal layout
_TOWER = re.compile(r"(?:^|\.)(?:visual|vision|vision_tower|vision_model|vision_encoder|"
                    r"image_encoder|vit|mm_projector|multi_modal_projector|audio_tower|"
                    r"audio_encoder|audio_model)\.|^(?:model\.)?language_model\.")

LORA, QUANTIZATION, TOWER, OTHER = "lora", "quantization", "tower", "other"


def is_tensor_name(key: str) -> bool:
    return _TENSOR.match(key) is not None


def kind(name: str) -> str:
    if _LORA.search(name):
        return LORA
    if _QUANT.search(name):
        return QUANTIZATION
    if _TOWER.search(name):
        return TOWER
    return OTHER


def solution(name: str) -> str | None:
    """The way out the name points at, or None for a plain parameter name (its record's own
    solutions say what to check)."""
    k = kind(name)
    if k == LORA:
        return _lora(name)
    if k == QUANTIZATION:
        return (f"`{name}` is a quantization tensor (a scale, packed weight or zero point) the "
                "model as sglang built it has no parameter for: the quantization method in use "
                "is not the checkpoint's. Make `--quantization` match `quant_method` in "
                "config.json's `quantization_config`, or leave the flag out so sglang reads it "
                "from the config; if they already agree, this sglang release does not load this "
                "checkpoint's quantization for this model (or its MoE path): upgrade sglang")
    if k == TOWER:
        return (f"`{name}` is a multimodal checkpoint's tensor (its vision/audio tower, or its "
                "language model under a multimodal layout), and the model sglang built has no "
                "parameter of that name: the class config.json's `architectures` names lays "
                "its weights out otherwise — a text-only class for a multimodal checkpoint, or "
                "a checkpoint saved in another layout than the class maps (fine-tuning tools on "
                "transformers 4.52+ save Qwen2.5-VL-style models as `model.visual.*` / "
                "`model.language_model.*`, older ones as `visual.*` / `model.*`). Check "
                "`architectures`, upgrade sglang (its multimodal classes map such layouts: "
                "`hf_to_sglang_mapper`), or re-save the checkpoint in the layout of the original "
                "model release")
    return None


def is_draft_head(name: str) -> bool:
    """An EAGLE3 draft head's tensor (`midlayer.…`): its checkpoint loaded as a base model."""
    return name.startswith("midlayer.")


def layout_solution(name: str) -> str:
    """The way out for a plain parameter name (kind `OTHER`, not a draft head's) weight loading
    met: the weights are named for another layout than the model class's."""
    return (f"`{name}` is a tensor the weights carry and the model class sglang built (from "
            "config.json's `architectures`) has no parameter of that name: the weights are "
            "named for another layout — another architecture's class, another tool's export, "
            "or names with a prefix added or stripped (`model.`, `base_model.model.`). Check "
            "that `architectures` names the class the weights were saved from; re-save them "
            "with the tensor names of the original model release (merge any LoRA adapter "
            "first; a training framework that syncs weights to sglang must send the model's "
            "own names); or upgrade sglang, whose later releases map more checkpoint layouts")


def _lora(name: str) -> str:
    if _BASE_LAYER.search(name):
        return (f"`{name}` is the base weight of a layer PEFT wrapped for LoRA (PEFT keeps the "
                "wrapped module as `base_layer`): these weights are the state dict of a PEFT "
                "model whose LoRA layers are still injected, whose names the model does not "
                "have. Merge the adapter first (`merge_and_unload()`, then `save_pretrained` or "
                "send the merged weights); a framework that syncs a PEFT model's weights to the "
                "inference engine must merge them or strip `.base_layer` from the names (and "
                "send the LoRA weights as an adapter) — use its LoRA support for that engine, "
                "or a release of it that has one")
    sibling = _LORA_SIBLING.search(name)
    stacked = ""
    if sibling is not None:
        group = "gate_proj/up_proj" if sibling["module"] == "up_proj" else "q_proj/k_proj/v_proj"
        stacked = (f" For an adapter loaded with `--lora-paths`: sglang stacks the {group} LoRA "
                   f"weights of a layer into one, and the adapter has none for "
                   f"`{sibling['module']}` in a layer where it has the others — train it with "
                   f"all of {group.replace('/', ', ')} in `target_modules`.")
        if sibling["module"] == "v_proj":
            stacked += (" Where the model's layer has no `v_proj` of its own to adapt (Gemma 4's "
                        "KV-sharing layers), sglang through 0.5.23 cannot load such an adapter; "
                        "zero-filling the missing `v_proj` is proposed in sglang PR #28199.")
    return (f"`{name}` is a LoRA adapter tensor.{stacked} A model checkpoint that still holds "
            "adapter tensors cannot be loaded as `--model-path`: merge the adapter into the "
            "base weights first (PEFT `merge_and_unload()`, then `save_pretrained`), or serve "
            "the base model with the adapter as `--lora-paths NAME=ADAPTER_DIR`")
