"""The message inside an HTTP API error body, where a client or a log shows one.

sglang's OpenAI-compatible server answers a failed request with a JSON error body whose
`message` is the text of the exception it caught (`create_error_response(str(e))`: a
`ValueError` raised in the tokenizer manager, the chat template, the request checks) or one it
wrote for the client. What the operator sees is that body, not the traceback: printed by the
client as `openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': "…", …}`
(the OpenAI SDK before 3.38; from 3.38 on it prints the body's message alone, `Error code: 400 -
…`), by curl as `{"object":"error","message":"…",…}`, streamed as `data: {"error": {…}}`, or
`{"detail": "…"}` from a FastAPI `HTTPException`. The message is the same text the raising site
wrote, so every record of that site can recognize it once it is taken out of the body:
`message_of` does that, and the engine searches it as a target of its own, with no exception
class (the body's `type` is the HTTP status's name, not the Python class).
"""

from __future__ import annotations

import re

# A body's message: after `'object': 'error',`, among the keys of an `'error': {…}` object (the
# router's `{"error": {"type": …, "code": …, "message": …}}` too), or the first key of a
# `{"detail": …}` body; quoted with `'` or `"` (Python's repr picks `"` when the text holds a
# `'`), backslash escapes kept until `_unescape`. A body cut by the terminal or a collector
# (no closing quote) gives its message up to the end of the text.
_BODY_MESSAGE = re.compile(
    r"""(?:
          ['"]object['"]\s*:\s*['"]error['"]\s*,\s*['"]message['"]\s*:\s*
        | ['"]error['"]\s*:\s*\{[^{}"']*(?:(?:'[^'\\]*'|"[^"\\]*")[^{}"']*)*?
          ['"]message['"]\s*:\s*
        | \{\s*['"]detail['"]\s*:\s*
        )
        (?P<q>['"])(?P<message>(?:\\.|(?!(?P=q))[^\\])*)
    """,
    re.VERBOSE,
)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
# The OpenAI SDK from 3.38 on (`_make_status_error_from_response`): `Error code: STATUS - ` and
# the body's `message` alone, not the body; a body it prints whole (before 3.38) opens with `{`.
_SDK_MESSAGE = re.compile(r"\bError code: [45]\d\d - (?P<message>[^{\[\s][^\n]*)")
# What a body holds before its message: a cheap test before the regex, which runs on every
# record's targets.
_SIGNS = ("message'", 'message"', "detail'", 'detail"')
MIN_MESSAGE = 8  # shorter messages (`''`, `'400'`) say nothing a record could recognize


def message_of(text: str) -> str | None:
    """The message of the first API error body in `text`, unescaped; None when there is none
    (or it is too short to be a site's)."""
    if not any(sign in text for sign in _SIGNS):
        return _sdk_message(text)
    m = _BODY_MESSAGE.search(text)
    if m is None:
        return _sdk_message(text)
    message = _unescape(m.group("message"))
    return message if len(message.strip()) >= MIN_MESSAGE else None


def _sdk_message(text: str) -> str | None:
    """The message the OpenAI SDK (3.38 on) prints after `Error code: STATUS - `, as it is."""
    if "Error code: " not in text:
        return None
    m = _SDK_MESSAGE.search(text)
    if m is None:
        return None
    message = m.group("message").rstrip()
    return message if len(message) >= MIN_MESSAGE else None


def _unescape(text: str) -> str:
    """`\\'`, `\\"`, `\\\\`, `\\n`, `\\uXXXX` as Python's repr and JSON write them."""
    if "\\" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e.startswith("u") and len(e) == 5:
            return chr(int(e[1:], 16))
        return _ESCAPES.get(e, e)

    return _ESCAPE.sub(one, text)
