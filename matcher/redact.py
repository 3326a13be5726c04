"""Secrets out of everything we emit.

sglang prints its arguments at start-up — `server_args={'api_key': 'sk-…', …}` in 0.5.x and
`ServerArgs(api_key='sk-…', …)` before — and request logs may hold tokens and headers. Every
string that leaves the process (event fields, traceback text, captures, labels) goes through a
`Redactor`. The value is replaced, the key is kept, so an operator still sees that a key was set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import regex

MASK = "***"

_SECRET_KEY = r"(?:[A-Za-z_]*(?:api_key|apikey|token(?!izer|s)|secret|password|passwd|credential)[A-Za-z_]*)"

DEFAULT_PATTERNS: tuple[str, ...] = (
    # 'api_key': 'x' / "hf_token": "x"   (Python dict repr, JSON)
    rf"""(?i)(?P<keep>['"]{_SECRET_KEY}['"]\s*:\s*)(?P<q>['"])(?P<secret>(?:(?!(?P=q)).)+)(?P=q)""",
    # api_key='x'   (dataclass repr: ServerArgs(api_key='x', ...))
    rf"""(?i)(?P<keep>\b{_SECRET_KEY}=)(?P<q>['"])(?P<secret>(?:(?!(?P=q)).)+)(?P=q)""",
    # HF_TOKEN=x / api_key=x  (environment, key=value logs)
    rf"""(?i)(?P<keep>\b{_SECRET_KEY}=)(?P<secret>[^\s'",)}}]+)""",
    # --api-key x / --api-key=x / --hf-token x
    r"""(?i)(?P<keep>--[a-z-]*(?:api-key|token(?!s|izer)|secret|password)[a-z-]*(?:=|\s+))(?P<secret>[^\s'"]+)""",
    # Authorization: Bearer x / Authorization: Basic x / bearer tokens anywhere
    r"""(?i)(?P<keep>\bauthorization['"]?\s*[:=]\s*['"]?(?:bearer\s+|basic\s+|token\s+)?)(?P<secret>[^\s'",}]+)""",
    r"""(?i)(?P<keep>\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]{8,})""",
    # Hugging Face and OpenAI-style keys
    r"""(?P<secret>\bhf_[A-Za-z0-9]{20,})""",
    r"""(?P<secret>\bsk-[A-Za-z0-9_-]{8,})""",
    # scheme://user:password@host
    r"""(?P<keep>\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)(?P<secret>[^\s@/]+)(?=@)""",
)


class Redactor:
    """Replaces secrets in strings and in nested JSON-like values."""

    def __init__(self, extra_patterns: Iterable[str] = ()) -> None:
        extra = tuple(extra_patterns)
        self._extra = len(extra)
        self._patterns = [regex.compile(p) for p in (*DEFAULT_PATTERNS, *extra)]

    def text(self, value: str) -> str:
        if self._extra == 0 and not _might_hold_a_secret(value):
            return value  # the common case, decided without a regex
        for p in self._patterns:
            value = p.sub(_replace, value)
        return value

    def value(self, obj: Any) -> Any:
        """Redact every string inside `obj` (dicts, lists, tuples), keys included."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.value(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.value(v) for v in obj]
        return obj


# Every default pattern needs one of these (case-insensitively) to match at all.
_TRIGGERS = ("key", "token", "secret", "password", "passwd", "credential", "authorization",
             "bearer", "hf_", "sk-", "://")


def _might_hold_a_secret(value: str) -> bool:
    low = value.lower()
    return any(t in low for t in _TRIGGERS)


def _replace(m: regex.Match[str]) -> str:
    groups = m.groupdict()
    keep = groups.get("keep") or ""
    quote = groups.get("q") or ""
    return f"{keep}{quote}{MASK}{quote}"
