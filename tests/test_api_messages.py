"""sglang's API error messages → records: the sites that answer with words of their own, and
only those (a bare `str(e)` is the raising site's record's)."""

from __future__ import annotations

import re

from matcher.catalog.api_messages import (
    KIND,
    message_template,
    release_records,
    sites_of,
)
from matcher.catalog.extract_templates import Hole

SOURCE = '''
from fastapi import HTTPException
from http import HTTPStatus


class OpenAIServingChat:
    def _validate_request(self, request):
        if not request.messages:
            return "Messages cannot be empty."
        if request.tool_choice == "required" and not request.tools:
            return "Tools cannot be empty if tool choice is set to required."
        return None

    async def handle(self, request):
        try:
            ...
        except ValueError as e:
            return self.create_error_response(str(e))
        except Exception as e:
            return self.create_error_response(
                message=f"Internal server error: {str(e)}",
                err_type="InternalServerError",
                status_code=500,
            )
        if request.model not in self.models:
            return self.create_error_response(f"The model '{request.model}' does not exist",
                                              status_code=HTTPStatus.NOT_FOUND)


def check_rank(value):
    raise HTTPException(status_code=400, detail=f"Invalid rank parameter: {value!r}")
'''


def test_each_answer_with_words_of_its_own_is_a_site():
    sites = sites_of(SOURCE)
    found = sorted((s.function, s.status) for s in sites)
    assert found == [
        ("OpenAIServingChat._validate_request", 400),
        ("OpenAIServingChat._validate_request", 400),
        ("OpenAIServingChat.handle", 404),
        ("OpenAIServingChat.handle", 500),
        ("check_rank", 400),
    ]
    assert "HTTPException(detail=…)" in {s.via for s in sites}


def test_records_are_anchored_and_graded_by_status():
    records = {r["errorMessage"]: r for r in release_records(
        [("sglang/srt/entrypoints/openai/serving_chat.py", SOURCE)], "0.5.23")}
    assert set(records) == {
        "Messages cannot be empty.",
        "Tools cannot be empty if tool choice is set to required.",
        "Internal server error: {str(e)}",
        "The model '{request.model}' does not exist",
        "Invalid rank parameter: {value!r}",
    }
    internal = records["Internal server error: {str(e)}"]
    assert (internal["severity"], internal["errorType"], internal["errorClass"]) == (
        "error", "response", None)
    assert records["Messages cannot be empty."]["severity"] == "warning"
    assert KIND in internal["tags"]
    model = records["The model '{request.model}' does not exist"]
    assert re.search(model["messagePattern"], "The model 'qwen' does not exist")
    assert not re.search(model["messagePattern"], "Error: The model 'qwen' does not exist")


def test_a_hole_alone_or_too_few_words_make_no_record():
    assert message_template(["  "]) is None
    assert message_template([Hole("str(e)")]) is None
    assert message_template(["Error: ", Hole("e")]) is None
