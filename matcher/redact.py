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

Keys also end in `pass`, `pwd`, `auth`, `signature`, `sig` (`db_pass=`, `X-Amz-Signature=`,
an Azure SAS's `sig=`), `cookie`, or a secret word with no separator (`apiKey`, `AccountKey`,
`_authToken`, `APIKEY`); `=>` and `:=` give values too, and a bytes literal (`b'…'`) loses its
bytes whole. A key whose last word is only `key` is masked when its value looks like one (8 or
more key characters). Tokens are recognized by their shape wherever they are: AWS access key
ids, GitHub, GitLab, Slack, npm, Stripe, Hugging Face and OpenAI tokens, Google API keys and
OAuth tokens, Azure client secrets, JWTs, the body of a PEM private key, and the path of a
Slack or Discord webhook URL.

Redact before any cut: a secret cut in two is no longer recognizable, so whoever shortens text
that will be emitted redacts the whole of it first (`text`). Text whose end was lost without
being seen (a line cut at `max_line_bytes`) loses what could be the head of a secret at the cut
(`without_cut_value`); the rest is redacted with the text around it, in one pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import regex

MASK = "***"

# The last word of a key that names a secret (case-insensitive). Tokenizer words are not, nor
# a model's forward or backward pass (`in the forward pass: …`).
_SECRET_WORD = (
    r"(?:(?:api|access|secret|private|auth|account|shared[_-]?access|master|signing|encryption"
    r"|client|service|subscription|session|storage)[_-]?key|private[_-]?key[_-]?id"
    r"|(?<!(?:pad|eos|bos|unk|sep|cls|mask|special|start|end|stop|image|audio|video)[_-])token"
    r"|secrets?|password|passwd|passphrase|(?<!(?:forward|backward)[ \t])pass|pwd|credentials?"
    r"|auth|signature|sig|cookie)"
)
# The same words closing a camelCase, PascalCase or upper-case key with no separator
# (`apiKey`, `AccountKey` of an Azure connection string, npm's `_authToken`, `APIKEY`),
# matched with case.
_CAMEL_WORD = (r"(?-i:_?[A-Za-z][A-Za-z0-9]*?[a-z0-9]"
               r"(?:Key|Token|Secrets?|Password|Passwd|Pwd|Pass|Auth|Signature|Credentials?|Sig)"
               r"|_?[A-Z][A-Z0-9]*"
               r"(?:KEY|TOKEN|SECRETS?|PASSWORD|PASSWD|PWD|PASS|AUTH|SIGNATURE|CREDENTIALS?|SIG))")
# A key: words joined by `_` or `-`, its last word a secret word, ending there.
_SECRET_KEY = rf"(?:_?(?:[a-z0-9]+[_-])*?{_SECRET_WORD}|{_CAMEL_WORD})(?![\w-])"
# A key standing alone: not part of a longer word, a flag (`--…`, handled on its own) or one of
# sglang's counters (`#new-token: 6`).
_BARE_KEY = rf"(?<![\w#-]){_SECRET_KEY}"
# What gives a key its value: `=`, `:`, `=>` (Ruby, Perl, PHP), `:=` (Go).
_SEP = r"(?:=>|:=|=(?!>)|:)"
# A quoted value: up to its closing quote (backslash escapes kept inside), or, when the text was
# cut before it closed, to the end of the line. A bytes or raw literal's prefix (`b'…'`) is kept.
_QUOTED = (r"""(?P<pre>[bru]{0,2})(?P<q>['"])(?P<secret>(?:\\.|(?!(?P=q))[^\n\\])+)"""
           r"""(?:(?P=q)|(?=\n)|\Z)""")
# An unquoted value: up to white space or punctuation that ends a value; not None/null/true/false
# (an unset key says nothing), nor the prefix of a quoted literal.
_BARE = (r"""(?![bru]{1,2}['"])(?!(?:none|null|true|false|nil)(?![^\s'",;&)}\]]))"""
         r"""(?P<secret>[^\s'",;&)}\]]+)""")
# `x-auth-token: Bearer x`: the scheme is kept, the credential goes.
_SCHEME = r"(?:(?:bearer|basic|token)[ \t]+)?"
# A key whose last word is only `key` (`key=`, `cache_key:`, `KEY=`) names a secret only when
# its value looks like one: 8 or more key characters and nothing else (a weight's name,
# `model.layers.0.k_proj`, is not masked).
_PLAIN_KEY = r"(?<![\w#-])(?:[a-z0-9]+[_-])*?key(?![\w-])"

DEFAULT_PATTERNS: tuple[str, ...] = (
    # Authorization: Bearer x / Authorization: Basic x / bearer tokens anywhere
    r"""(?i)(?P<keep>\b(?:proxy-)?authorization['"]?\s*[:=]\s*['"]?(?:bearer\s+|basic\s+|token\s+)?)(?P<secret>[^\s'",}]+)""",
    r"""(?i)(?P<keep>\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]{8,})""",
    # 'api_key': 'x' / "hf_token": "x" / {'x-api-key': b'x'} / "password" => "x"
    rf"""(?i)(?P<keep>['"]{_SECRET_KEY}['"]\s*{_SEP}\s*){_QUOTED}""",
    # 'api_key': x   (a quoted key, a bare value)
    rf"""(?i)(?P<keep>['"]{_SECRET_KEY}['"]\s*{_SEP}\s*{_SCHEME}){_BARE}""",
    # api_key='x' / api_key = "x" / api_key: 'x' / :password => 'x'  (reprs, YAML, assignments)
    rf"""(?i)(?P<keep>{_BARE_KEY}\s*{_SEP}\s*){_QUOTED}""",
    # HF_TOKEN=x / api_key = x / OPENAI_API_KEY: x / db_pass=x / X-Amz-Signature=x
    rf"""(?i)(?P<keep>{_BARE_KEY}[ \t]*(?:=>|:=|=(?!>)|:(?!//))[ \t]*{_SCHEME}){_BARE}""",
    # --api-key x / --api_key=x / --hf-token x / --password 'x y' / --authtoken x
    rf"""(?i)(?P<keep>--(?:[a-z0-9_-]*?{_SECRET_WORD}|{_CAMEL_WORD})(?![\w-])(?:=|\s+)(?!--))(?:{_QUOTED}|(?P<bare>[^\s'"]+))""",
    # Hugging Face and OpenAI-style keys, also right after `_` (`HF_TOKEN_hf_…`)
    r"""(?P<secret>(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,})""",
    r"""(?P<secret>(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{8,})""",
    # scheme://user:password@host, the user maybe empty, the password up to the last @ before
    # the host (an unescaped @ in a password is common enough)
    r"""(?i)(?P<keep>\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?P<secret>[^\s/]+)(?=@[^\s@/]*)""",
    # key=, cache_key: …, --key … with a value shaped like a key (see _PLAIN_KEY)
    rf"""(?i)(?P<keep>(?:['"]?{_PLAIN_KEY}['"]?\s*{_SEP}\s*|--(?:[a-z0-9]+[_-])*?key(?:=|\s+))[bru]{{0,2}}['"]?)(?P<secret>[A-Za-z0-9+/=_~-]{{8,}})(?![\w.:/+=~-])""",
    # Cookie: a=1; b=2   (the whole header value)
    r"""(?im)(?P<keep>(?<![\w-])(?:set-)?cookie[ \t]*:[ \t]*)(?P<secret>[^\s'"][^\n'"]*)""",
    # A PEM private key's body, up to its END line (or the end of the text)
    r"""(?s)(?P<keep>-----BEGIN[A-Z ]{0,20} PRIVATE KEY-----)(?P<secret>.+?)(?=-----END[A-Z ]{0,20} PRIVATE KEY-----|\Z)""",
    # A JWT (header.payload.signature, base64url, the header a JSON object: `eyJ`)
    r"""(?P<secret>(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)""",
    # AWS access key ids
    r"""(?P<secret>(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}(?![A-Z0-9]))""",
    # GitHub (classic and fine-grained), GitLab, Slack, npm, Stripe tokens
    r"""(?P<secret>(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}|xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}|npm_[A-Za-z0-9]{30,}|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,}))""",
    # Google API keys and OAuth access tokens
    r"""(?P<secret>(?<![A-Za-z0-9_-])(?:AIza[A-Za-z0-9_-]{30,}|ya29\.[A-Za-z0-9_-]{20,}))""",
    # An Azure AD client secret (`abc8Q~…`)
    r"""(?P<secret>(?<![\w~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![\w~-])(?!\.[\w~-]))""",
    # Webhook URLs whose secret is their path (Slack, Discord)
    r"""(?i)(?P<keep>\bhooks\.slack\.com/(?:services|workflows|triggers)/)(?P<secret>[^\s'"?#]+)""",
    r"""(?i)(?P<keep>\bdiscord(?:app)?\.com/api/webhooks/)(?P<secret>[^\s'"?#]+)""",
)

# What may be the head of a secret at the end of a cut text: the last run of characters that
# could all belong to one value.
_TAIL = regex.compile(r"""[^\s'"=:,;(){}\[\]<>@/]+\Z""")


def without_cut_value(value: str) -> str:
    """`value` is the head of a longer text whose rest is gone unseen: its last run of value
    characters, which may be the head of a secret too short to be known by its shape, goes.
    What stays is redacted like any text, once, by whoever cuts or emits it next."""
    tail = _TAIL.search(value)
    return value[: tail.start()] if tail is not None else value


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
_SECRET_WORDS = ("key", "token", "secret", "pass", "pwd", "credential", "auth", "sig", "cookie")


# Where the five key patterns can match: a secret word that ends a key given a value — the
# word, maybe a closing quote, then `:` or `=` — or a `--` flag's. A superset of what they
# match (each key ends in one of `_SECRET_WORDS`), in one search of the lower-cased text:
# `tokenizer_manager.py` in every traceback of sglang's scheduler no longer sends the whole
# traceback through the five.
_WORDS = "|".join(_SECRET_WORDS)
_KEY_GIVEN = re.compile(
    rf"""(?:{_WORDS})[a-z]*['"]?\s*[:=]|--[a-z0-9_-]*(?:{_WORDS})[a-z]*(?:=|\s)""")
# The literal heads of the token shapes, lower-cased: a pattern runs only when one is there.
_AWS = ("akia", "asia", "abia", "acca", "agpa", "aida", "aipa", "anpa", "anva", "apka", "aroa",
        "asca")
_TOKENS = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "xapp-",
           "npm_", "_live_", "_test_", "whsec_")


# The literal heads of everything but the key patterns, in one search: a line with none of
# them (most) costs one failed scan, not some thirty substring tests.
_HEADS = re.compile("|".join(re.escape(w) for w in sorted(
    {"authorization", "bearer", "hf_", "sk-", "://", "cookie", "-----begin", "eyj", "aiza",
     "ya29.", "q~", "hooks.slack.com", "discord", *_AWS, *_TOKENS}, key=len, reverse=True)))
_NO_HEADS: frozenset[str] = frozenset()


def _needed(low: str) -> tuple[bool, ...]:
    """Which of `DEFAULT_PATTERNS` can match the lower-cased text at all, in their order: each
    needs its words. A traceback that says `KeyError` runs none of the five key patterns unless
    a key is given a value in it (`_KEY_GIVEN`); the URL pattern needs both `://` and an `@` (a
    catalog's documentation links have the first only)."""
    secret = any(w in low for w in _SECRET_WORDS) and _KEY_GIVEN.search(low) is not None
    heads = frozenset(_HEADS.findall(low)) if _HEADS.search(low) else _NO_HEADS
    return ("authorization" in heads, "bearer" in heads, secret, secret, secret, secret, secret,
            "hf_" in heads, "sk-" in heads, "://" in heads and "@" in low,
            secret and "key" in low, "cookie" in heads, "-----begin" in heads, "eyj" in heads,
            not heads.isdisjoint(_AWS), not heads.isdisjoint(_TOKENS),
            "aiza" in heads or "ya29." in heads, "q~" in heads, "hooks.slack.com" in heads,
            "discord" in heads)


assert len(_needed("")) == len(DEFAULT_PATTERNS)

# `DEFAULT_PATTERNS` compiled, each the first time a text needs it, shared by every Redactor:
# compiling them all would cost every start (one Redactor is made at import, by
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
    prefix = groups.get("pre") or ""  # b'…': the literal's kind stays, its bytes go
    return f"{keep}{prefix}{quote}{MASK}{quote}"
