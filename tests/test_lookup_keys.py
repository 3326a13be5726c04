"""A KeyError on a key sglang reads from what it does not write (`matcher.catalog.lookup_keys`):
a field of a LoRA adapter's `adapter_config.json`, or a feature a model's Hugging Face processor
returns. Bare lines are made events of their record (`matcher.bare_keys`), with words naming
the key; tracebacks are matched at their frame.

Every line is real: a run here of sglang's own code, or as pasted in the public thread beside
it (train split); see tests/fixtures/lookup_keys/README.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import curated_with

from matcher.catalog import lookup_keys

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "lookup_keys"
LORA_CONFIG, OUTPUT = lookup_keys.LORA_CONFIG_RECORD, lookup_keys.PROCESSOR_OUTPUT_RECORD
LORA_ADAPTER = "3fcf311a16e852e1"  # sglang's `Failed to load LoRA adapter {name}: {error}`


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    # the curated layer, and of the generated one only sglang's LoRA-loading message
    return curated_with(tmp_path_factory.mktemp("catalog"), LORA_ADAPTER)


def _events(catalog, tmp_path: Path, text: str) -> list[dict]:
    from matcher.scan import scan_events

    log = tmp_path / "x.log"
    log.write_text(text + "\n", encoding="utf-8")
    return [e for e in scan_events([str(log)], catalog, sglang_version="auto").events
            if e["event"] != "sglang_unknown_error"]


@pytest.mark.parametrize(("fixture", "key"), [
    ("sglang-0.5.9-lora-config-prompt-tuning-adapter.log", "target_modules"),
    ("sglang-0.5.9-lora-config-without-lora-alpha.log", "lora_alpha"),
])
def test_sglangs_read_of_an_adapter_config_at_its_frame(catalog, tmp_path, fixture, key):
    [e] = _events(catalog, tmp_path, (FIXTURES / fixture).read_text(encoding="utf-8"))
    assert e["pattern_id"] == LORA_CONFIG
    first = e["remediation"]["solutions"][0]
    assert first.startswith(f"The adapter's `adapter_config.json` has no `{key}`")
    assert "save_pretrained" in first


@pytest.mark.parametrize("fixture", [
    "llama3.2-vision-finetune-1-no-image.log",  # a text-only sample
    "qwen-vl-series-finetune-1-video-not-image.log",  # a video where an image was read
])
def test_a_processor_output_without_the_feature_at_its_frame(catalog, tmp_path, fixture):
    [e] = _events(catalog, tmp_path, (FIXTURES / fixture).read_text(encoding="utf-8"))
    assert e["pattern_id"] == OUTPUT
    assert e["remediation"]["solutions"][0].startswith("`pixel_values` is what the model's")
    assert "`image_url` content part" in e["remediation"]["solutions"][0]


@pytest.mark.parametrize(("line", "record", "says"), [
    ("KeyError: 'lora_alpha'", LORA_CONFIG, "has no `lora_alpha`"),
    ("KeyError: 'target_modules'", LORA_CONFIG, "has no `target_modules`"),
    ("KeyError: 'pixel_values'", OUTPUT, "given no image"),
    ("KeyError: 'pixel_values_videos'", OUTPUT, "`video_url` content part"),
    ("KeyError: 'input_features'", OUTPUT, "given no audio"),
])
def test_the_last_line_alone_is_made_its_records_event(catalog, tmp_path, line, record, says):
    # the KeyError lines of the fixtures above, and other keys of the same reads, pasted alone
    [e] = _events(catalog, tmp_path, line)
    assert (e["event"], e["pattern_id"]) == ("sglang_error", record)
    assert says in e["remediation"]["solutions"][0]
    # the record's own first solution speaks of any key: the key's words take its place
    assert len(e["remediation"]["solutions"]) == 2


def test_sglangs_report_of_a_failed_adapter_gets_the_config_words(catalog, tmp_path) -> None:
    # what LoRAManager.init_lora_adapters (0.4.9.post4+) raises with the KeyError's text
    # (str(KeyError('lora_alpha')) of the run in sglang-0.5.9-lora-config-without-lora-alpha.log)
    [e] = _events(catalog, tmp_path, "RuntimeError: Failed to load LoRA adapter sql: 'lora_alpha'")
    assert e["pattern_id"] == LORA_ADAPTER
    assert e["remediation"]["solutions"][0].startswith(
        "The adapter's `adapter_config.json` has no `lora_alpha`")


@pytest.mark.parametrize("line", [
    "KeyError: 'r'",  # too common a key without the frame that reads it
    "KeyError: 'image_url'",  # a request's field, not a processor's output
    "KeyError: 'images'",
])
def test_keys_not_taken_from_a_bare_line(catalog, tmp_path, line) -> None:
    assert not _events(catalog, tmp_path, line)


def test_the_vocabularies_are_sglangs_reads() -> None:
    assert {"peft_type", "target_modules", "r", "lora_alpha"} == lookup_keys.LORA_CONFIG_KEYS
    assert lookup_keys.lookup("r", bare=False) is not None
    assert lookup_keys.lookup("r", bare=True) is None
    assert lookup_keys.PROCESSOR_OUTPUTS["video_grid_thw"] == lookup_keys.VIDEO
    assert lookup_keys.lookup("input_ids", bare=True) is None
