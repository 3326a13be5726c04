"""tokenizers' and safetensors' Rust exceptions: the vocabulary read from their sdists, the
records made from it, and what they say on lines those packages printed here
(tests/fixtures/libs/, made by `tokenizers`/`safetensors` wheels of the named versions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from generated_layer import engine_of, scan

from matcher.catalog import rust_bindings as RB
from matcher.catalog.rust_source import Hole
from matcher.engine import Engine

RUN_HERE = Path(__file__).resolve().parent / "fixtures" / "libs"

# tokenizers 0.23.2's bindings/python/src/tokenizer.rs (in part), as published in its sdist
TOKENIZER_RS = '''
impl<'a, 'py> FromPyObject<'a, 'py> for TextEncodeInput<'py> {
    type Error = PyErr;

    fn extract(ob: Borrowed<'a, 'py, PyAny>) -> Result<Self, Self::Error> {
        if let Ok(i) = ob.extract::<TextInputSequence>() {
            return Ok(Self(i.into()));
        }
        Err(exceptions::PyTypeError::new_err(
            "TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]",
        ))
    }
}
'''
# safetensors 0.7.0's bindings/python/src/lib.rs and tokenizers' src/models/mod.rs (in part)
SAFETENSORS_RS = '''
        let metadata = Metadata::read(&buffer).map_err(|e| {
            SafetensorError::new_err(format!("Error while deserializing header: {e}"))
        })?;
'''
MODELS_RS = '''
#[derive(Serialize, Debug, PartialEq, Clone)]
#[serde(untagged)]
pub enum ModelWrapper {
    BPE(BPE),
    WordPiece(WordPiece),
}
'''


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("builtin"), ("rust-bindings.jsonl",))


def the_event(engine: Engine, text: str) -> dict[str, Any]:
    known = [e for e in scan(engine, text) if e["pattern_id"]]
    assert len(known) == 1, [e["message"][:80] for e in known]
    return known[0]


def record(engine: Engine, event: dict[str, Any]) -> Any:
    return next(r for r in engine.records if r.id == event["pattern_id"])


def test_the_vocabulary_holds_pyo3_raises_with_their_python_class_and_untagged_enums() -> None:
    rows = RB.vocabulary("tokenizers", "0.23.2", [
        ("bindings/python/src/tokenizer.rs", TOKENIZER_RS), ("tokenizers/src/models/mod.rs", MODELS_RS)])
    assert ("tokenizers", "0.23.2", "raise", "TypeError",
            "TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]",
            "bindings/python/src/tokenizer.rs:10") in rows
    assert ("tokenizers", "0.23.2", "untagged", "Exception", "ModelWrapper",
            "tokenizers/src/models/mod.rs") in rows
    rows = RB.vocabulary("safetensors", "0.7.0", [("bindings/python/src/lib.rs", SAFETENSORS_RS)])
    assert [r[3:5] for r in rows] == [("SafetensorError", "Error while deserializing header: {e}")]


def test_a_template_goes_back_into_text_and_holes() -> None:
    assert RB.parts_of("header: {e:?} of {{x}}") == ("header: ", Hole("e", "?"), " of {x}")
    assert RB.parts_of("plain") == ("plain",)


def test_one_record_per_message_over_releases_that_print_it_differently() -> None:
    rows = [("safetensors", "0.4.5", "raise", "SafetensorError",
             "Error while deserializing header: {err:?}", "bindings/python/src/lib.rs:300"),
            ("safetensors", "0.7.0", "raise", "SafetensorError",
             "Error while deserializing header: {e}", "bindings/python/src/lib.rs:467")]
    [rec] = RB.records(rows)
    assert rec["sourceVersions"] == ["0.4.5..0.7.0"]
    assert rec["errorMessage"] == "Error while deserializing header: {e}"
    assert rec["solutions"] and "git lfs pull" in rec["solutions"][1]


@pytest.mark.parametrize("log, inner", [
    ("safetensors-0.4.5-lfs-pointer.log", "HeaderTooLarge"),
    ("safetensors-0.7.0-lfs-pointer.log", "header too large"),
    ("safetensors-0.4.5-truncated.log", "MetadataIncompleteBuffer"),
    ("safetensors-0.7.0-truncated.log", "incomplete metadata, file not fully covered"),
])
def test_a_safetensors_file_that_is_not_whole_is_told_to_be_downloaded_again(
        engine: Engine, log: str, inner: str) -> None:
    event = the_event(engine, (RUN_HERE / log).read_text())
    assert event["message"].endswith(inner)
    assert record(engine, event).source_package == "safetensors"
    assert "huggingface-cli download" in event["remediation"]["solutions"][1]


def test_a_tokenizer_json_from_a_newer_tokenizers_is_told_to_upgrade(engine: Engine) -> None:
    event = the_event(engine, (RUN_HERE / "tokenizers-0.19.1-merges-as-pairs.log").read_text())
    assert event["captures"]["enum"] == "ModelWrapper"
    assert "pip install -U transformers tokenizers" in event["remediation"]["solutions"][0]


@pytest.mark.parametrize("log", ["tokenizers-0.19.1-encode-none.log",
                                 "tokenizers-0.23.2-lone-surrogate.log"])
def test_text_that_is_not_a_string_is_told_to_fix_the_request(engine: Engine, log: str) -> None:
    event = the_event(engine, (RUN_HERE / log).read_text())
    assert event["error_class"] == "TypeError"
    assert "send text" in event["remediation"]["solutions"][0]


def test_other_packages_words_are_not_claimed(engine: Engine) -> None:
    # serde's words from another Rust program, and a message of another class
    assert not [e for e in scan(engine, "Error: data did not match any variant of untagged "
                                        "enum Config\n") if e["pattern_id"]]
    assert not [e for e in scan(engine, "ValueError: TextEncodeInput must be Union[Text"
                                        "InputSequence, Tuple[InputSequence, InputSequence]]\n")
                if e["pattern_id"]]


def test_the_committed_records_are_made_from_the_committed_table() -> None:
    import json
    rows = RB.status_table.read_rows(RB.VOCAB)
    made = [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in RB.records(rows)]
    assert made == RB.OUTPUT.read_text(encoding="utf-8").splitlines()
