"""Secrets out of everything we emit.

sglang prints its arguments at start-up — `server_args={'api_key': 'sk-…', …}` in 0.5.x and
`ServerArgs(api_key='sk-…', …)` before — and request logs may hold tokens and headers. Every
string that leaves the process (event fields, traceback text, captures, labels) goes through a
`Redactor`. The value is replaced, the key is kept, so an operator still sees that a key was set.

A key names a secret when its last word is one (`api_key`, `OPENAI_API_KEY`, `x-api-key`,
`hf_token`, `token`, `client_secret`, `db_password`, `passwd`, `credentials`, `authorization`,
…), in any of `name=value`, `name = value`, `name: value`, `'name': 'value'`, `"name": "value"`,
`name='value'` and `--name value` / `--name=value` (hyphens or underscores); `max_tokens`,
`tokenizer_path`, `key_len`, `pad_token` and sglang's `#new-token: 6` are not. URLs lose their
password, whether the user is empty (`redis://:pw@host`) or the password holds `@` (everything up
to the last `@` before the host goes).

Redact before any cut: a secret cut in two is no longer recognizable, so whoever shortens text
that will be emitted redacts the whole of it first (`text`), and text whose end was lost without
being seen (a line cut at `max_line_bytes`) goes through `truncated`, which also drops what could
be the head of a secret at the cut.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import regex

MASK = "***"

# The last word of a key that names a secret (case-insensitive). Tokenizer words are not.
_SECRET_WORD = (
    r"(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?key"
    r"|(?<!(?:pad|eos|bos|unk|sep|cls|mask|special|start|end|stop|image|audio|video)[_-])token"
    r"|secrets?|password|passwd|passphrase|credentials?)"
)
# A key: words joined by `_` or `-`, its last word a secret word, ending there.
_SECRET_KEY = rf"(?:[a-z0-9]+[_-])*?{_SECRET_WORD}(?![\w-])"
# A key standing alone: not part of a longer word, a flag (`--…`, handled on its own) or one of
# sglang's counters (`#new-token: 6`).
_BARE_KEY = rf"(?<![\w#-]){_SECRET_KEY}"
# A quoted value: up to its closing quote (backslash escapes kept inside), or, when the text was
# cut before it closed, to the end of the line.
_QUOTED = r"""(?P<q>['"])(?P<secret>(?:\\.|(?!(?P=q))[^\n\\])+)(?:(?P=q)|(?=\n)|\Z)"""
# An unquoted value: up to white space or punctuation that ends a value; not None/null/true/false
# (an unset key says nothing).
_BARE = r"""(?!(?:none|null|true|false)(?![^\s'",;&)}\]]))(?P<secret>[^\s'",;&)}\]]+)"""
# `x-auth-token: Bearer x`: the scheme is kept, the credential goes.
_SCHEME = r"(?:(?:bearer|basic|token)[ \t]+)?"

DEFAULT_PATTERNS: tuple[str, ...] = (
    # Authorization: Bearer x / Authorization: Basic x / bearer tokens anywhere
    r"""(?i)(?P<keep>\bauthorization['"]?\s*[:=]\s*['"]?(?:bearer\s+|basic\s+|token\s+)?)(?P<secret>[^\s'",}]+)""",
    r"""(?i)(?P<keep>\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]{8,})""",
    # 'api_key': 'x' / "hf_token": "x" / {'x-api-key': 'x'}   (Python dict repr, JSON)
    rf"""(?i)(?P<keep>['"]{_SECRET_KEY}['"]\s*[:=]\s*){_QUOTED}""",
    # 'api_key': x   (a quoted key, a bare value)
    rf"""(?i)(?P<keep>['"]{_SECRET_KEY}['"]\s*[:=]\s*{_SCHEME}){_BARE}""",
    # api_key='x' / api_key = "x" / api_key: 'x'   (dataclass repr, YAML, assignments)
    rf"""(?i)(?P<keep>{_BARE_KEY}\s*[:=]\s*){_QUOTED}""",
    # HF_TOKEN=x / api_key = x / OPENAI_API_KEY: x   (environment, key=value logs, YAML)
    rf"""(?i)(?P<keep>{_BARE_KEY}[ \t]*(?:=|:(?!//))[ \t]*{_SCHEME}){_BARE}""",
    # --api-key x / --api_key=x / --hf-token x
    rf"""(?i)(?P<keep>--{_SECRET_KEY}(?:=|\s+)(?!--))(?P<secret>[^\s'"]+)""",
    # Hugging Face and OpenAI-style keys
    r"""(?P<secret>\bhf_[A-Za-z0-9]{20,})""",
    r"""(?P<secret>\bsk-[A-Za-z0-9_-]{8,})""",
    # scheme://user:password@host, the user maybe empty, the password up to the last @ before
    # the host (an unescaped @ in a password is common enough)
    r"""(?i)(?P<keep>\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?P<secret>[^\s/]+)(?=@[^\s@/]*)""",
)

# What may be the head of a secret at the end of a cut text: the last run of characters that
# could all belong to one value.
_TAIL = regex.compile(r"""[^\s'"=:,;(){}\[\]<>@/]+\Z""")


# The memo of texts seen and what they became: at most this many, each at most this long (a
# traceback, unique to its event, is longer and would only push the catalog's texts out).
_SEEN_MAX = 1024
_SEEN_LONGEST = 2048


class Redactor:
    """Replaces secrets in strings and in nested JSON-like values."""

    def __init__(self, extra_patterns: Iterable[str] = ()) -> None:
        # A user's patterns: compiled now (a bad one fails here, not at the first text), and run
        # on every text (no words known to need). The default ones compile on first use.
        self._extra = tuple(regex.compile(p) for p in extra_patterns)
        # Texts seen, and what they became (most often themselves). An event is ~45 strings,
        # and most recur in every event: its field names, a pattern's id, class and fix text
        # (a word like `tokens` in one sends it through all the patterns each time), the
        # source's name. Looked up first, they cost a dict probe each instead of the lower-cased
        # copy and word tests `_needed` makes (`event_dict` of the bench log's 1,000 events:
        # 0.19 s before, 0.12 s).
        self._seen: dict[str, str] = {}

    def text(self, value: str) -> str:
        done = self._seen.get(value)
        if done is not None:
            return done
        needed = _needed(value.lower())
        if not self._extra and not any(needed):
            redacted = value  # the common case, decided without a regex
        else:
            redacted = self._patterns(value, needed)
        if len(value) <= _SEEN_LONGEST:
            if len(self._seen) >= _SEEN_MAX:
                self._seen.clear()
            self._seen[value] = redacted
        return redacted

    def _patterns(self, value: str, needed: tuple[bool, ...]) -> str:
        """`value` through the default patterns it needs, then the user's."""
        redacted = value
        # A pattern whose words are not in the text is not run: it could not match, neither
        # there nor in what the patterns before it made of it (a mask adds no word).
        for pattern, run in zip(DEFAULT_PATTERNS, needed, strict=True):
            if run:
                redacted = _compiled(pattern).sub(_replace, redacted)
        for p in self._extra:
            redacted = p.sub(_replace, redacted)
        return redacted

    def truncated(self, value: str) -> str:
        """`value` is the head of a longer text whose rest is gone: redact it, and drop its last
        run of value characters, which may be the head of a secret cut at the end."""
        value = self.text(value)
        tail = _TAIL.search(value)
        return value[: tail.start()] if tail is not None else value

    def cut(self, value: str, limit: int) -> str:
        """The first `limit` characters of `value`, redacted over the whole of it first."""
        if len(value) <= limit:
            return value
        return self.text(value)[:limit]

    def value(self, obj: Any) -> Any:
        """Redact every string inside `obj` (dicts, lists, tuples), keys included."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.value(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.value(v) for v in obj]
        return obj

# The last words of a secret key (`_SECRET_WORD`), as they are in lower-cased text.
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "passphrase", "credential")


# Where the five key patterns can match: a secret word that ends a key given a value — the
# word, maybe a closing quote, then `:` or `=` — or a `--` flag's. A superset of what they
# match (each key ends in one of `_SECRET_WORDS`), in one search of the lower-cased text:
# `tokenizer_manager.py` in every traceback of sglang's scheduler no longer sends the whole
# traceback through the five.
_WORDS = "|".join(_SECRET_WORDS)
_KEY_GIVEN = re.compile(
    rf"""(?:{_WORDS})s?['"]?\s*[:=]|--[a-z0-9_-]*(?:{_WORDS})s?(?:=|\s)""")


def _needed(low: str) -> tuple[bool, ...]:
    """Which of `DEFAULT_PATTERNS` can match the lower-cased text at all, in their order: each
    needs its words. A traceback that says `KeyError` runs none of the five key patterns unless
    a key is given a value in it (`_KEY_GIVEN`); the URL pattern needs both `://` and an `@` (a
    catalog's documentation links have the first only)."""
    secret = any(w in low for w in _SECRET_WORDS) and _KEY_GIVEN.search(low) is not None
    return ("authorization" in low, "bearer" in low, secret, secret, secret, secret, secret,
            "hf_" in low, "sk-" in low, "://" in low and "@" in low)


assert len(_needed("")) == len(DEFAULT_PATTERNS)

# `DEFAULT_PATTERNS` compiled, each the first time a text needs it, shared by every Redactor:
# compiling all ten took ~22 ms of every start (one Redactor is made at import, by
# `matcher.aggregate`), and most texts need none of them.
_COMPILED: dict[str, regex.Pattern[str]] = {}


def _compiled(pattern: str) -> regex.Pattern[str]:
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        compiled = _COMPILED[pattern] = regex.compile(pattern)
    return compiled


def _replace(m: regex.Match[str]) -> str:
    groups = m.groupdict()
    keep = groups.get("keep") or ""
    quote = groups.get("q") or ""
    return f"{keep}{quote}{MASK}{quote}"
