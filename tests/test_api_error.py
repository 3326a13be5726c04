"""The message inside an API error body: taken out as a client, curl or a stream shows it, and
matched by the records of the site that wrote it — a response record only there."""

from __future__ import annotations

import pytest

from matcher.api_error import message_of
from matcher.catalog.check import frame_text
from matcher.catalog.load import validate_record
from matcher.engine import Engine

CONTEXT = "The input (85050 tokens) is longer than the model's context length (32768 tokens)."


@pytest.mark.parametrize("text", [
    # the openai client's exception: Python's repr of the body, `"` around a text with `'`
    "Error code: 400 - {'object': 'error', 'message': \"" + CONTEXT + "\", 'type': "
    "'BadRequestError', 'param': None, 'code': 400}",
    # curl: the JSON body, the `'` escaped as sglang's ORJSON answer showed it
    '{"object":"error","message":"' + CONTEXT.replace("'", "\\'") + '","type":"BadRequest'
    'Error","param":null,"code":400}',
    # a stream's error event
    'data: {"error": {"object": "error", "message": "' + CONTEXT + '", "code": 400}}',
])
def test_the_body_message_is_taken_out_unescaped(text):
    assert message_of(text) == CONTEXT


def test_the_openai_sdk_from_3_38_prints_the_message_alone():
    """openai 3.63 run here against a server answering sglang's own error body
    (tests/fixtures/client/openai-sdk-status-errors.log): `Error code: N - <message>`."""
    assert message_of("Error code: 400 - Conversation roles must alternate user/assistant/user/"
                      "assistant/...") == "Conversation roles must alternate user/assistant/user/assistant/..."
    assert message_of("Error code: 500") is None  # a body that is not JSON: no message
    assert message_of("Error code: 400 - short") is None


def test_the_message_among_other_keys_of_an_error_object():
    """The router's body puts `type` and `code` before the message."""
    assert message_of('{"error":{"type":"service_unavailable","code":"no_available_workers",'
                      '"message":"No available workers (all circuits open or unhealthy)"}}') \
        == "No available workers (all circuits open or unhealthy)"


def test_detail_body_escapes_and_a_cut_body():
    assert message_of('{"detail":"Invalid rank parameter\\nsee \\u0060rank\\u0060"}') \
        == "Invalid rank parameter\nsee `rank`"
    assert message_of('{"error":{"message":"Tools cannot be empty if tool ch') \
        == "Tools cannot be empty if tool ch"


@pytest.mark.parametrize("text", [
    "{'object': 'error', 'message': '', 'type': 'BadRequestError', 'param': None, 'code': 400}",
    "{'object': 'error', 'message': '400', 'type': 'Failed to parse fc related info'}",
    "the error message was long",  # no body
    '{"message": "a body that is not an error"}',
])
def test_no_message_without_a_body_or_words(text):
    assert message_of(text) is None


def rec(rid, pattern, **extra):
    r = validate_record({"id": rid, "messagePattern": pattern, **extra}, "t.jsonl", 0,
                        "generated")
    assert not isinstance(r, list), r
    return r


def one(text):
    (r,) = frame_text(text)
    return r


@pytest.mark.parametrize("use_hs", [True, False], ids=["hyperscan", "literal-prefilter"])
def test_a_raise_record_recognizes_its_message_in_a_client_exception(use_hs):
    raised = rec("raised", r"(?<![\s\S])\s*The input \((?P<n>\d+) tokens\) is longer than",
                 errorClass="ValueError")
    line = one("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \""
               + CONTEXT + "\", 'type': 'BadRequestError', 'param': None, 'code': 400}")
    m = Engine([raised], use_hyperscan=use_hs).match(line)
    assert (m.pattern.id, m.captures, m.message) == ("raised", {"n": "85050"}, CONTEXT)


@pytest.mark.parametrize("use_hs", [True, False], ids=["hyperscan", "literal-prefilter"])
def test_a_raise_record_recognizes_its_message_as_the_new_sdk_prints_it(use_hs):
    raised = rec("raised", r"(?<![\s\S])\s*The input \((?P<n>\d+) tokens\) is longer than",
                 errorClass="ValueError")
    line = one("openai.BadRequestError: Error code: 400 - " + CONTEXT)
    m = Engine([raised], use_hyperscan=use_hs).match(line)
    assert (m.pattern.id, m.captures, m.message) == ("raised", {"n": "85050"}, CONTEXT)


@pytest.mark.parametrize("use_hs", [True, False], ids=["hyperscan", "literal-prefilter"])
def test_a_response_record_matches_only_a_body_message(use_hs):
    answered = rec("answered", r"(?<![\s\S])\s*Messages cannot be empty\.",
                   errorType="response")
    engine = Engine([answered], use_hyperscan=use_hs)
    body = one('{"object":"error","message":"Messages cannot be empty.","type":"BadRequestError"}')
    assert engine.match(body).pattern.id == "answered"
    assert engine.match(one("ValueError: Messages cannot be empty.")) is None
    assert engine.match(one("Messages cannot be empty. Retrying with a default prompt")) is None
