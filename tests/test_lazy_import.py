"""transformers' lazy importer re-raises a failed import as `RuntimeError: Failed to import X
because of the following error (look up to see its traceback):` with the import's own message
on the next line: that message is matched as the failure it is (`matcher.wrappers.
lazy_import_inner`, a target of its own in `engine.targets_of`)."""

from __future__ import annotations

from matcher.catalog.check import frame_text
from matcher.engine import targets_of
from matcher.wrappers import lazy_import_inner

# dottxt-ai/outlines#1523 (transformers' tokenizer for Phi-3 without sentencepiece installed)
SENTENCEPIECE = (
    "RuntimeError: Failed to import transformers.models.llama.tokenization_llama because of the "
    "following error (look up to see its traceback):\n"
    "No module named 'sentencepiece'\n")
# modelscope/facechain#485: an import failing inside another lazy import; the thread's paste
# ends inside the library's path, as here
NESTED = (
    "RuntimeError: Failed to import transformers.modeling_utils because of the following error "
    "(look up to see its traceback):\n"
    "Failed to import transformers.generation.utils because of the following error (look up to "
    "see its traceback):\n"
    "/usr/local/lib/python3.8/dist-packages/transformer_engine_extensions.cpython-38-x86_64-li")


def test_the_import_message_is_read_from_inside_every_level() -> None:
    assert lazy_import_inner(SENTENCEPIECE.split(": ", 1)[1]) == "No module named 'sentencepiece'"
    assert lazy_import_inner(NESTED.split(": ", 1)[1]) == \
        "/usr/local/lib/python3.8/dist-packages/transformer_engine_extensions.cpython-38-x86_64-li"


def test_other_messages_have_no_inner_import() -> None:
    assert lazy_import_inner("No module named 'sentencepiece'") is None
    # the sentence with nothing after it: nothing to match
    assert lazy_import_inner("Failed to import transformers.x because of the following error "
                             "(look up to see its traceback):") is None
    assert lazy_import_inner("Import failed because of the following error: disk full") is None


def test_the_inner_message_is_a_target_without_a_class() -> None:
    [record] = frame_text(SENTENCEPIECE)
    inner = [t for t in targets_of(record) if t.message == "No module named 'sentencepiece'"]
    assert [(t.error_class, t.on_header, t.in_body) for t in inner] == [("", False, False)]


def test_a_missing_module_inside_the_lazy_importer_is_the_missing_module(loaded) -> None:
    _, engine = loaded
    [record] = frame_text(SENTENCEPIECE)
    best = engine.match_all(record)[0]
    assert best.pattern.slug == "missing-python-module"
    assert best.captures.get("module") == "sentencepiece"
