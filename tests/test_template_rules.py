"""A model's chat template refusing a request — its own `raise_exception` (jinja2's bare
`TemplateError`) or a field it reads that the request lacks (`UndefinedError: '<type> object'
has no attribute '<field>'`) — is answered by the rule the request broke
(`matcher.catalog.template_rules`). Real lines from train-split threads
(tests/fixtures/chat_template/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import engine_of, scan

from matcher.catalog import template_rules
from matcher.engine import Engine

LOG = Path(__file__).resolve().parent / "fixtures" / "chat_template" / "template-errors.log"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("curated"), ())


@pytest.fixture(scope="module")
def events(engine: Engine) -> list[dict]:
    return scan(engine, LOG.read_text(encoding="utf-8"))


def _slug(engine: Engine, event: dict) -> str:
    return {r.id: r.slug for r in engine.records}.get(event["pattern_id"]) or "unknown"


def test_each_template_failure_of_the_threads_is_one_recognized_event(engine, events) -> None:
    assert [(_slug(engine, e), e["message"].split(": ", 1)[1]) for e in events] == [
        ("chat-template-raised",
         "Conversation roles must alternate user/assistant/user/assistant/..."),
        ("chat-template-raised", "System role not supported"),
        ("chat-template-field-undefined", "'dict object' has no attribute 'function'"),
    ]


def test_no_system_role_says_to_fold_the_system_prompt_into_the_user_turn(events) -> None:
    first = events[1]["remediation"]["solutions"][0]
    assert first.startswith("Send no `system` message") and "--chat-template" in first
    assert events[1]["remediation"]["documentation"].startswith(
        "The model's chat template has no system role")


def test_alternation_says_to_merge_same_role_turns(events) -> None:
    first = events[0]["remediation"]["solutions"][0]
    assert "merge consecutive messages of the same role" in first


def test_missing_function_names_the_openai_tool_shape(events) -> None:
    assert events[2]["captures"]["template_field"] == "function"
    assert '"function": {"name", "arguments"}' in events[2]["remediation"]["solutions"][0]


@pytest.mark.parametrize(("captures", "rule"), [
    ({"template_message": "System role not supported"}, "no system role"),
    ({"template_message": "After the optional system message, conversation roles must "
                          "alternate user/assistant/user/assistant/..."}, "alternate"),
    ({"template_message": "System message must be at the beginning."}, "only as the first"),
    ({"template_field": "content"}, "no `content`"),
])
def test_the_vocabulary(captures: dict[str, str], rule: str) -> None:
    said = template_rules.answer(captures)
    assert said is not None and rule in said[0]


def test_a_message_or_field_no_rule_knows_keeps_the_records_words() -> None:
    assert template_rules.answer({"template_message": "Unexpected message role."}) is None
    assert template_rules.answer({"template_field": "tool_call_id"}) is None
    assert template_rules.remediation({"template_field": "x"}, {"solutions": ["a"]}) is None


def test_a_template_that_does_not_parse_is_its_own_failure(engine) -> None:
    """https://github.com/vllm-project/vllm/issues/15230 (train), as pasted."""
    line = ("jinja2.exceptions.TemplateSyntaxError: expected token 'end of print statement', "
            "got 'name'\n")
    [event] = scan(engine, line)
    assert _slug(engine, event) == "chat-template-syntax-error"
    assert "--chat-template" in event["remediation"]["solutions"][0]
