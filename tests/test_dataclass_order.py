"""`non-default argument 'X' follows default argument`: a class that is not a valid dataclass
where it is defined, answered from its traceback (matcher/catalog/dataclass_order.py). Lines in
tests/fixtures/dataclass/ (README.md there says where each comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import scan

from matcher.catalog import dataclass_order

FIXTURES = Path(__file__).parent / "fixtures" / "dataclass"
RECORD = "fd5244c2ca1b2922"


@pytest.fixture(scope="module")
def engine(loaded):
    return loaded[1]


def _event(engine, name: str) -> dict:
    [e] = [e for e in scan(engine, (FIXTURES / name).read_text()) if e["pattern_id"]]
    assert e["pattern_id"] == RECORD
    return e


def test_a_config_class_transformers_made_a_dataclass_names_the_sglang_release(engine):
    e = _event(engine, "sglang-21510-deepseekvl2-config.log")
    remediation = e["remediation"]
    assert remediation["documentation"].startswith(
        "transformers 5.4.0 and later make every `PretrainedConfig` subclass a dataclass")
    assert "`sglang/srt/configs/deepseekvl2.py`, line 650" in remediation["documentation"]
    first, second = remediation["solutions"][:2]
    # sglang 0.5.11 is the first release of the pin table whose pins are transformers >= 5.4.0
    assert first.startswith("Upgrade sglang to 0.5.11 or later")
    assert second.startswith("Or keep this sglang (before 0.5.11)")
    assert remediation["example_fix"] == "pip install 'sglang>=0.5.11'"
    assert len(remediation["solutions"]) == 2  # the record's generic words give way


def test_an_explicit_dataclass_in_a_package_names_the_package_not_a_transformers_pin(engine):
    e = _event(engine, "ktransformers-1956-deepseek-v4-config.log")
    remediation = e["remediation"]
    assert "`.../sglang/srt/configs/deepseek_v4.py`, line 7" in remediation["documentation"]
    assert remediation["solutions"][1] == (
        "Or install another release of sglang, whose class is declared otherwise: "
        "pip install -U sglang")
    assert not any("transformers<5.4.0" in s for s in remediation["solutions"])


def test_one_s_own_dataclass_says_to_reorder_its_fields(engine):
    e = _event(engine, "own-dataclass-run-here.log")
    assert e["remediation"]["documentation"].startswith(
        "The dataclass at `/tmp/s45-deptrain-run/own_config.py`, line 4")
    assert e["remediation"]["solutions"] == [(
        "Give `model_path` a default, move it before the fields with defaults, or declare the "
        "class `@dataclass(kw_only=True)` (Python 3.10 and later)")]


def test_a_lone_line_keeps_the_record_s_words(engine):
    [e] = [e for e in scan(engine, "TypeError: non-default argument 'vision_config' follows "
                                   "default argument\n") if e["pattern_id"]]
    assert e["pattern_id"] == RECORD
    assert e["remediation"]["solutions"][0].startswith(
        "Install the transformers the package that defines the class requires")


def test_a_function_s_parameters_are_not_a_dataclass():
    assert dataclass_order.answer("non-default argument follows default argument",
                                  (FIXTURES / "own-dataclass-run-here.log").read_text()) is None


def test_the_release_that_first_pins_transformers_5_4_is_read_from_the_pin_table():
    assert dataclass_order.first_sglang_pinning_dataclass_configs() == "0.5.11"
