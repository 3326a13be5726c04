"""What a bare `KeyError: '<key>'` says when the key is one sglang reads from a file or an
output it does not write itself: a LoRA adapter's `adapter_config.json`, or the output of a
model's Hugging Face processor.

- sglang reads a LoRA adapter's config as PEFT writes it (`LoRAConfig.__init__`,
  `srt/lora/lora_config.py`, 0.4.0 to 0.5.23: `hf_config["target_modules"]`, `["r"]`,
  `["lora_alpha"]`; `LoRAAdapter.__init__`, `srt/lora/lora.py`: `hf_config["peft_type"]`).
  PEFT's `LoraConfig.save_pretrained` writes every field, so a missing one means the directory
  is not a PEFT LoRA adapter: another PEFT method, another tool's format, a full model. `r`
  alone is too common a key to take from a line without its frame.
- sglang's multimodal processors (`srt/multimodal/processors/`, formerly
  `srt/managers/multimodal_processors/`) read the feature tensors a model's HF processor
  returns for each modality (`ret["pixel_values"]`, `["image_grid_thw"]`, `["input_features"]`
  …): the names below are those subscripts in the processors of sglang 0.3.3 to 0.5.23 that
  are a processor's outputs (not request fields or config values). A `BatchFeature` without
  one was built from no data of that modality.

Pure; `lookup` gives the record a key belongs to and the words for it.
"""

from __future__ import annotations

LORA_CONFIG_RECORD = "a34a902f32a263f0"  # lora-adapter-config-key-missing
PROCESSOR_OUTPUT_RECORD = "f012033e7a1bc692"  # multimodal-processor-output-key-missing

# the adapter_config.json keys sglang reads, and those a bare line is enough for
LORA_CONFIG_KEYS = frozenset({"peft_type", "target_modules", "r", "lora_alpha"})
_LORA_CONFIG_BARE = LORA_CONFIG_KEYS - {"r"}

IMAGE, VIDEO, AUDIO = "image", "video", "audio"
PROCESSOR_OUTPUTS: dict[str, str] = {
    **dict.fromkeys((
        "pixel_values", "image_grid_thw", "image_sizes", "tgt_sizes", "aspect_ratio_ids",
        "aspect_ratio_mask", "pixel_attention_mask", "spatial_shapes", "images_spatial_crop",
        "images_seq_mask", "images_emb_mask", "image_grid_hws", "patch_pixel_values",
        "image_attention_mask", "input_image_embeds"), IMAGE),
    **dict.fromkeys(("pixel_values_videos", "video_grid_thw", "second_per_grid_ts"), VIDEO),
    **dict.fromkeys(("audio_features", "audio_feature_lens", "input_features",
                     "feature_attention_mask", "input_values"), AUDIO),
}
_CONTENT_PART = {IMAGE: "image_url", VIDEO: "video_url", AUDIO: "audio_url"}


def lookup(key: str, *, bare: bool) -> tuple[str, str] | None:
    """(the record, the words) for a KeyError on `key`; a `bare` line (no frame) is taken only
    for keys no other lookup is likely to use."""
    if key in (_LORA_CONFIG_BARE if bare else LORA_CONFIG_KEYS):
        return LORA_CONFIG_RECORD, lora_config_words(key)
    if key in PROCESSOR_OUTPUTS:
        return PROCESSOR_OUTPUT_RECORD, processor_output_words(key)
    return None


def lora_config_words(key: str) -> str:
    return (f"The adapter's `adapter_config.json` has no `{key}`: sglang serves PEFT LoRA "
            "adapters and reads the config PEFT's `LoraConfig` writes (`peft_type: \"LORA\"`, "
            "`r`, `lora_alpha`, `target_modules`, all written by `save_pretrained`). The "
            "directory given to `--lora-paths` (or `/load_lora_adapter`) holds something else: "
            "another PEFT method (prompt tuning, IA3 …, which sglang cannot serve), an adapter "
            "saved in another tool's format (MLX's `lora_parameters`, …), or a full model. "
            "Re-save the adapter with PEFT (`get_peft_model(model, LoraConfig(...))`, then "
            "`save_pretrained(DIR)`) or convert it to PEFT's format; serve a merged or fully "
            "fine-tuned model as `--model-path` instead")


def processor_output_words(key: str) -> str:
    modality = PROCESSOR_OUTPUTS[key]
    return (f"`{key}` is what the model's Hugging Face processor returns for {modality} input, "
            f"and its output for this request had none: the processor was given no {modality}. "
            f"Either the prompt has no {modality} placeholder of this model for the data to go "
            f"with (a prompt written by hand for `/generate` or the frontend language without "
            f"the model's own {modality} token, or the data sent as another modality — a video "
            f"where an image was expected), or the processor loaded is not the one sglang's "
            f"processor for this architecture reads (another model's or another transformers "
            f"release's processor class returns other keys). Send the {modality} as a "
            f"`{_CONTENT_PART[modality]}` content part of `/v1/chat/completions`, so the "
            f"model's chat template places its token; when writing the prompt yourself, put "
            f"the model's {modality} token in it once per item")
