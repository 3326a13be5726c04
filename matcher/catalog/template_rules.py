"""What a model's chat template said about a request, and what to do — decided per event.

Two exceptions of jinja2 come out of rendering a chat template (`apply_chat_template` in
transformers, called by sglang's chat endpoint):

    jinja2.exceptions.TemplateError: System role not supported
    jinja2.exceptions.UndefinedError: 'dict object' has no attribute 'content'

jinja2 itself never raises a bare `TemplateError` (its own errors are the subclasses
`TemplateSyntaxError`, `UndefinedError`, `SecurityError` …): a bare one is the template's own
check, `{{ raise_exception('…') }}`, which transformers' sandbox turns into
`TemplateError(message)`. The message says which rule of the model the request's `messages`
broke; the rules below are the ones models' templates state (Gemma's missing system role, the
user/assistant alternation of Llama-2, Mistral and Zephyr templates, Qwen's system message
first). `UndefinedError`'s `'<type> object' has no attribute '<field>'` (jinja2's
`Undefined._undefined_message`) is a field the template reads that the request's item lacks.

The records (`patterns/sglang/curated/chat_template.json`) capture the message
(`template_message`) or the field (`template_field`); `remediation` puts the rule's answer
ahead of the record's words.
"""

from __future__ import annotations

import re

from matcher.catalog.answer import answered_by

MESSAGE = "template_message"
FIELD = "template_field"
CAPTURES = frozenset({MESSAGE, FIELD})

_SYSTEM = (
    ("The model's chat template has no system role (Gemma's and other templates raise this "
     "for any `system` message)."),
    ("Send no `system` message: put the system prompt at the start of the first `user` message "
     "(clients such as Open WebUI add a system message of their own: turn it off there), or "
     "launch with `--chat-template <a .jinja file that renders a system message>`."),
)
_ALTERNATE = (
    ("The model's chat template accepts only turns that alternate user, assistant, user … "
     "after an optional leading system message."),
    ("Make the request's `messages` alternate: merge consecutive messages of the same role "
     "into one, start with a `user` message (after the system message, if any), and send no "
     "other roles; or launch with `--chat-template <a .jinja file without that check>`."),
)
_SYSTEM_FIRST = (
    "The model's chat template accepts a system message only as the first message.",
    ("Send at most one `system` message, first in `messages` (merge any later system text "
     "into it or into a user message)."),
)

# (the template's message, what it means, what to do), first match wins
_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"(?i)\bsystem role (?:is )?not supported"), *_SYSTEM),
    (re.compile(r"(?i)\broles must alternate\b"), *_ALTERNATE),
    (re.compile(r"(?i)\bsystem message must be at the beginning"), *_SYSTEM_FIRST),
)

_FIELDS: dict[str, tuple[str, str]] = {
    "content": (
        ("A message of the request has no `content` where the template reads it (an assistant "
         "turn that carries only `tool_calls`, a message of content parts)."),
        ("Give every message a `content` (an empty string when it has none, plain text where "
         "the template does not take content parts), or launch with `--chat-template <a .jinja "
         "file that tests `content is defined`>`."),
    ),
    "function": (
        ("A tool or a tool call of the request has no `function` object where the template "
         "reads `.function`."),
        ("Send each tool as `{\"type\": \"function\", \"function\": {\"name\", \"description\", "
         "\"parameters\"}}` and each assistant tool call as `{\"id\", \"type\": \"function\", "
         "\"function\": {\"name\", \"arguments\"}}`; if the request already does, the template "
         "wants another shape: launch with `--chat-template <a .jinja file for OpenAI-shaped "
         "tools>`."),
    ),
}


def answer(captures: dict[str, str]) -> tuple[str, str] | None:
    """(what it means, what to do) for the captured template message or field; None when no
    rule knows it (the record's own words stand)."""
    message = captures.get(MESSAGE)
    if message is not None:
        for pattern, meaning, what_to_do in _RULES:
            if pattern.search(message):
                return meaning, what_to_do
        return None
    field = captures.get(FIELD)
    return _FIELDS.get(field) if field is not None else None



remediation = answered_by(answer)  # the rule the request broke ahead of the record's words
