"""Secrets planted in sglang's own output never reach anything we emit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher.catalog import load_catalog
from matcher.commands.scan import cmd_scan
from matcher.redact import _SEEN_MAX, Redactor, without_cut_value

secret = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                 min_size=28, max_size=40).map(lambda s: "Zq" + s)

CONTEXTS = [
    "[2026-01-01 12:00:00] server_args={{'model_path': '/m', 'api_key': '{s}', 'port': 30000}}",
    "[2026-01-01 12:00:00] server_args=ServerArgs(model_path='/m', api_key='{s}', port=30000)",
    "[2026-01-01 12:00:00] server_args={{'admin_api_key': \"{s}\", 'hf_token': None}}",
    "python -m sglang.launch_server --model-path /m --api-key {s} --port 30000",
    "python -m sglang.launch_server --api-key={s}",
    "curl -H 'Authorization: Bearer {s}' http://127.0.0.1:30000/generate",
    "token=hf_{s}",
    "downloading with hf_{s} as credential",
    "OPENAI_API_KEY=sk-{s}",
    "redis://default:{s}@10.0.0.5:6379/0",
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CONTEXTS), secret)
def test_secret_never_survives_redaction(context, value):
    assert value not in Redactor().text(context.format(s=value))


def test_redaction_keeps_the_key_and_the_rest_of_the_line():
    r = Redactor()
    assert r.text("server_args={'api_key': 'sk-abc123456789', 'tp_size': 8, 'tokenizer_path': '/t'}") == \
        "server_args={'api_key': '***', 'tp_size': 8, 'tokenizer_path': '/t'}"
    assert r.value({"m": ["--api-key s3cr3tvalue"]}) == {"m": ["--api-key ***"]}
    assert r.text("max_total_tokens=1234, max_prefill_tokens=16384") == \
        "max_total_tokens=1234, max_prefill_tokens=16384"


def test_extra_patterns_from_config():
    assert Redactor([r"(?P<keep>cluster-)(?P<secret>\d{6})"]).text("cluster-123456 up") == "cluster-*** up"


def test_scan_output_carries_no_planted_secret(tmp_path):
    """A crash whose traceback shows the start-up args: the event names the error, not the key."""
    key = "sk-live-PLANTEDsecret0042"
    log = tmp_path / "server.log"
    log.write_text(
        f"[2026-01-01 12:00:00] server_args=ServerArgs(model_path='/m', api_key='{key}')\n"
        "Traceback (most recent call last):\n"
        f"  File \"/x.py\", line 1, in f\n    launch(api_key='{key}')\n"
        f"RuntimeError: bad config api_key='{key}'\n")
    import io
    for fmt in ("json", "text"):
        out = io.StringIO()
        assert cmd_scan([str(log)], fmt, load_catalog(), out) == 1
        assert key not in out.getvalue()
        assert "***" in out.getvalue()


def test_human_format_is_for_people_and_still_redacted():
    import io

    from matcher.sinks.events import EventWriter
    from matcher.types import Event
    out = io.StringIO()
    EventWriter(out, Redactor(), "human").accept([Event(
        event="sglang_error", error_class="ValueError", message="bad --api-key sk-live-abcdef123456",
        source="server.log", severity="error", log_ts=None, observed_ts=0.0, ranks=("TP0",),
        occurrences=1, traceback=None, pattern_id="p1")])
    line = out.getvalue()
    assert line.startswith("── ERROR  ValueError  pattern p1") and "ranks TP0" in line
    assert "sk-live-abcdef123456" not in line and "--api-key ***" in line


# -- the forms that leaked (issue 16) ----------------------------------------------------------

LEAKED = [
    ("connecting to redis://:{s}@10.0.0.5:6379/0", "redis://:***@10.0.0.5:6379/0"),
    ("db=postgres://u:p@ss{s}@db.internal/app", "db=postgres://u:***@db.internal/app"),
    ("api_key = {s}", "api_key = ***"),
    ("OPENAI_API_KEY: {s}", "OPENAI_API_KEY: ***"),
    ("headers={{'x-api-key': '{s}'}}", "headers={'x-api-key': '***'}"),
    ("python -m sglang.launch_server --api_key {s} --port 1", "--api_key *** --port 1"),
    ('{{"client_secret": "{s}", "id": 3}}', '{"client_secret": "***", "id": 3}'),
    ("db_password: '{s}'", "db_password: '***'"),
    ("HF_TOKEN = \"{s}\"", 'HF_TOKEN = "***"'),
    ("credentials={s}", "credentials=***"),
    ("x-auth-token: Bearer {s}", "x-auth-token: Bearer ***"),
    ("url=http://h/v1?api_key={s}&model=m", "url=http://h/v1?api_key=***&model=m"),
]


@pytest.mark.parametrize("form, expected", LEAKED)
def test_forms_that_leaked(form, expected):
    value = "PLANTEDvalue42"
    out = Redactor().text(form.format(s=value))
    assert value not in out and "p@ss" not in out
    assert expected in out


def test_a_text_redacted_again_is_redacted_the_same():
    """The memo of redacted texts (a fix text goes out with every event of its pattern) hands
    back the redacted form, never the original, and stays bounded."""
    r = Redactor()
    text = "Set --api-key PLANTEDvalue42 and see https://docs.example/tokens"
    first = r.text(text)
    assert "PLANTEDvalue42" not in first
    assert r.text(text) == first
    for i in range(3000):  # more texts than the memo holds: it empties and starts over
        assert r.text(f"token={i}x") == "token=***"
        assert r.text(f"clean {i}") == f"clean {i}"  # texts needing nothing are kept too
        assert f"clean {i}" in r._seen
    assert len(r._seen) <= _SEEN_MAX
    assert r.text(text) == first


def test_values_are_walked_whole_with_their_types():
    """Every string in nested dicts, lists and tuples (keys too) is redacted, a str subclass
    included; tuples come out as lists, and numbers, booleans and None as they are."""
    class Name(str):
        pass

    r = Redactor()
    event = {"a": 1, "b": 2.5, "c": True, "d": None, Name("token=k1"): ("token=v1", [Name("x")]),
             "e": {"f": ["api_key='s3cr3t'", {"g": "--hf-token hf_abcdefghijklmnopqrstu"}]}}
    for _ in range(2):  # the second time from the memo
        out = r.value(event)
        assert out == {"a": 1, "b": 2.5, "c": True, "d": None, "token=***": ["token=***", ["x"]],
                       "e": {"f": ["api_key='***'", {"g": "--hf-token ***"}]}}
        assert type(out["c"]) is bool and type(out["a"]) is int


NOT_SECRETS = [
    "tokenizer_path='/models/t', max_tokens=128, key_len=64, max_new_tokens: 16",
    "server_args={'tokenizer_mode': 'auto', 'skip_tokenizer_init': False, 'pad_token': '<pad>'}",
    "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #queue-req: 0",
    "Decode batch. #running-req: 1, #token: 48, token usage: 0.00, gen throughput (token/s): 5.1",
    "eos_token: </s>, bos_token = <s>, api_key: None, hf_token=None",
    "connecting to http://10.0.0.5:8080/generate and redis://cache:6379/0",
    "KeyError: 'model.layers.0.self_attn.k_proj.weight'",
    "Unsupported architecture in the forward pass: `deep_gemm.fp8_mqa_logits` needs SM90",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_what_only_looks_like_a_secret_is_kept(text):
    assert Redactor().text(text) == text


def test_a_cut_text_loses_what_may_be_a_secrets_head():
    """A line cut unseen loses its last value (`without_cut_value`); what stays is redacted
    once, as the record it joins is."""
    r = Redactor()
    assert r.text(without_cut_value("connect redis://:pa")) == "connect redis://:"
    assert r.text(without_cut_value("x api_key='pass wo")) == "x api_key='***'"
    assert r.text(without_cut_value("x api_key='pass wo") + "\n  next line") \
        == "x api_key='***'\n  next line"
    assert r.text(without_cut_value("fetch with sk-abc")) == "fetch with "
    assert r.text(without_cut_value("postgres://u:p@ss@db.int")) == "postgres://u:***@"
    assert r.cut("api_key='abcdef' and more", 12) == "api_key='***"


# -- secrets at every cut, through the real pipeline ----------------------------------------------
#
# The cuts between a log and an event: a traceback's text at MAX_TRACEBACK_CHARS (its head and
# its tail), an exception's message at the framer's max_message_chars, and a line at
# max_line_bytes. A secret of each form is planted so that it straddles each cut, at every
# offset; no output field may hold the secret or any 4 characters of it.

# Secrets are runs of consonants: no 4 of them in a row occur in the text around them.
SECRET_CHARS = "BCDFGHJKLMNPQRSTVWXZ"
cut_secret = st.text(alphabet=SECRET_CHARS, min_size=8, max_size=24)

FORMS = [
    "launch(api_key='{s}', port=30000)",
    "server_args={{'model_path': '/m', 'api_key': '{s}', 'port': 30000}}",
    "server_args={{\"hf_token\": \"{s}\", \"port\": 30000}}",
    "cmd: --api-key {s} --port 30000",
    "cmd: --api_key={s} --port 30000",
    "env: api_key = {s} and more",
    "env: OPENAI_API_KEY: {s}",
    "headers={{'x-api-key': '{s}'}}",
    "cache=redis://:{s}@10.0.0.5:6379/0",
    "db=postgres://u:{s}@db.internal/app",  # the secret holds an @ (see _planted)
    "curl -H 'Authorization: Bearer {s}' http://127.0.0.1:30000/generate",
    "key sk-{s} refused",
    "token hf_{s} refused",  # hf_ tokens are long: the value is tripled (see _planted)
    "db_password = \"{s}\"",
]

HEAD = "[2026-12-02 14:35:46 TP0] Scheduler hit an exception: Traceback (most recent call last):"
FRAME = ('  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2291, in run_scheduler_process'
         '\n    scheduler.event_loop_overlap()')
LOG_AFTER = "[2026-12-02 14:35:47 TP0] Load weight end."
CUT_ENGINE = None


def _planted(form: str, value: str) -> tuple[str, str]:
    """The form's text with the secret, and the secret as it stands in the text."""
    if "postgres" in form:
        value = value[: len(value) // 2] + "@" + value[len(value) // 2:]
    if "hf_" in form:
        value = value * 3
    return form.format(s=value), value


def _emitted(data: str, **kw) -> list[str]:
    """Every string of every event the real pipeline emits for `data`, redacted on the way out."""
    global CUT_ENGINE
    from matcher.engine import Engine
    from matcher.pipeline import Pipeline
    from matcher.sinks.events import event_dict
    from matcher.types import Chunk
    if CUT_ENGINE is None:
        CUT_ENGINE = Engine([])
    pipeline = Pipeline(CUT_ENGINE, **kw)
    raw = data.encode()
    events = pipeline.feed(Chunk(raw, "server.log", len(raw))).events + pipeline.finish()
    assert events, "the planted traceback made no event"
    out: list[str] = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
    for e in events:
        walk(event_dict(e, Redactor()))
    return out


def _assert_gone(secret: str, fields: list[str]) -> None:
    grams = {secret[i:i + 4] for i in range(len(secret) - 3)}
    for f in fields:
        assert secret not in f
        leaked = [g for g in grams if g in f]
        assert not leaked, f"{leaked} of {secret!r} in {f!r}"


def _traceback(planted: str, *, pad_before: int = 0, pad_after: int = 0, frames_after: int = 2,
               exception: str = "ValueError: bad thing") -> tuple[str, int, int]:
    """A traceback with `planted` on a code line between two padding lines; the log text, where
    the planted text starts in the record's text, and the record text's length."""
    lines = [HEAD, FRAME, "    x = '" + "a" * pad_before + "'", "    " + planted,
             "    y = '" + "a" * pad_after + "'", *[FRAME] * frames_after, exception]
    start = len("\n".join(lines[:3])) + 1 + 4
    text = "\n".join(lines)
    return text + "\n" + LOG_AFTER + "\n", start, len(text)


def _into(secret: str, k: int) -> int:
    """`k` drawn in [-4, 40]: a cut from 4 characters before the secret to 4 after it."""
    return min(k, len(secret) + 4)


@settings(max_examples=300, deadline=None)
@given(form=st.sampled_from(FORMS), value=cut_secret, k=st.integers(-4, 40),
       side=st.sampled_from(["head", "tail"]))
def test_no_secret_through_the_traceback_cut(form, value, k, side):
    from matcher.aggregate import MAX_TRACEBACK_CHARS
    half = MAX_TRACEBACK_CHARS // 2
    planted, secret = _planted(form, value)
    at = planted.index(secret)
    k = _into(secret, k)
    if side == "head":  # the head keeps text[:half]: the cut falls k characters into the secret
        _, start, _ = _traceback(planted, frames_after=70)
        data, start, length = _traceback(planted, pad_before=half - start - at - k,
                                         frames_after=70)
        assert start + at + k == half
    else:  # the tail keeps text[-half:]: its first character is k characters into the secret
        _, start, base = _traceback(planted, pad_before=4500)
        data, start, length = _traceback(planted, pad_before=4500,
                                         pad_after=start + at + k + half - base)
        assert length - half == start + at + k
    assert length > MAX_TRACEBACK_CHARS
    _assert_gone(secret, _emitted(data))


@settings(max_examples=100, deadline=None)
@given(form=st.sampled_from(FORMS), value=cut_secret, k=st.integers(-4, 40))
def test_no_secret_through_the_message_cut(form, value, k):
    """An exception message past the framer's `max_message_chars` is cut there."""
    from matcher.framing import DEFAULT_MAX_MESSAGE_CHARS
    planted, secret = _planted(form, value)
    at = planted.index(secret)
    pad = "m" * (DEFAULT_MAX_MESSAGE_CHARS - at - _into(secret, k))
    data, _, _ = _traceback("pass", exception=f"ValueError: {pad}{planted} and then more")
    _assert_gone(secret, _emitted(data))


@settings(max_examples=200, deadline=None)
@given(form=st.sampled_from(FORMS), value=cut_secret, k=st.integers(-4, 40),
       where=st.sampled_from(["exception", "code"]))
def test_no_secret_through_the_line_cut(form, value, k, where):
    """A line past `max_line_bytes` is cut there and the rest never read: its end is unknown."""
    limit = 2048
    planted, secret = _planted(form, value)
    at = planted.index(secret)
    if where == "exception":
        lead = "ValueError: "
        pad = "m" * (limit - len(lead) - at - _into(secret, k))
        data, _, _ = _traceback("pass", exception=f"{lead}{pad}{planted} and then more")
    else:
        lead = "    "
        pad = "m" * (limit - len(lead) - at - _into(secret, k))
        data, _, _ = _traceback(pad + planted + " and then more")
    _assert_gone(secret, _emitted(data, max_line_bytes=limit))


# -- the default patterns compile on first use ----------------------------------------------------

def _as_before(value: str, extra: tuple[str, ...] = ()) -> str:
    """Every pattern run on the text, in order, each compiled anew: the reference that the
    lazy patterns, the memo and the choice of patterns by the words a text holds (`_needed`)
    must equal, byte for byte."""
    import regex

    from matcher.redact import DEFAULT_PATTERNS, _replace
    for p in (*DEFAULT_PATTERNS, *extra):
        value = regex.compile(p).sub(_replace, value)
    return value


def test_default_patterns_compile_only_when_a_text_needs_them(monkeypatch):
    """Making a Redactor compiles nothing (a start makes two before any text); a text compiles
    the patterns whose words it holds, once for every Redactor."""
    import regex

    from matcher import redact
    compiled: list[str] = []
    compile_ = regex.compile

    def counting(pattern, *args, **kwargs):
        compiled.append(pattern)
        return compile_(pattern, *args, **kwargs)

    monkeypatch.setattr(redact, "_COMPILED", {}, raising=False)  # none compiled yet
    monkeypatch.setattr(regex, "compile", counting)
    first, second = Redactor(), Redactor()
    assert compiled == []
    assert first.text("[2026-01-01 12:00:00 TP0] Load weight end.") == \
        "[2026-01-01 12:00:00 TP0] Load weight end."
    assert compiled == []  # no pattern's words in it: no pattern needed
    assert first.text("x-auth-token: Bearer abcdefgh12345") == "x-auth-token: Bearer ***"
    secret_patterns = list(redact.DEFAULT_PATTERNS[1:7])  # bearer, then the five key patterns
    assert compiled == secret_patterns
    assert second.text("Bearer abcdefgh12345") == "Bearer ***"
    assert Redactor().text("api_key='abc'") == "api_key='***'"
    plain_key = redact.DEFAULT_PATTERNS[10]  # a `key` given a value: only its first time
    assert compiled == [*secret_patterns, plain_key]  # compiled once, shared
    assert Redactor([r"(?P<keep>seq=)(?P<secret>\d+)"]).text("seq=12") == "seq=***"
    assert compiled == [*secret_patterns, plain_key, r"(?P<keep>seq=)(?P<secret>\d+)"]


def test_a_bad_extra_pattern_still_fails_when_the_redactor_is_made():
    import regex
    with pytest.raises(regex.error):
        Redactor(["(unclosed"])


_PIECES = ["api_key", "API-KEY", "x-api-key", "hf_token", "pad_token", "token", "Token",
           "client_secret", "db_password", "passwd", "credentials", "authorization", "Bearer ",
           "basic ", "--api-key", "--hf_token=", "hf_", "sk-", "://", "redis", "@", "u:p", "=",
           ": ", ":", " = ", "'", '"', "{", "}", "(", ")", ",", ";", "&", "\n", " ", "  ", "#",
           "None", "null", "true", "abcdefgh1234", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789",
           "PLANTEDvalue42", "\\", "/", "-", "_", "é", "tokenizer_manager.py", "KeyError",
           "key ", "--max-tokens ", "passphrase", "\t", "Secrets"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=24).map("".join),
       st.sampled_from([(), (r"(?P<keep>seq=)(?P<secret>\d+)", r"(?i)internal-\w+")]))
def test_lazy_patterns_redact_as_the_eager_ones_did(text, extra):
    r = Redactor(extra)
    assert r.text(text) == _as_before(text, extra)
    assert r.text(text) == _as_before(text, extra)  # from the memo


@pytest.mark.parametrize("text", [
    *(c.format(s="ZqPLANTEDsecret0123456789abcdef") for c in CONTEXTS),
    *(f.format(s="PLANTEDvalue42") for f, _ in LEAKED), *NOT_SECRETS,
    *(f.format(s="BCDFGHJKLMNP") for f in FORMS)])
def test_every_known_form_redacts_as_before(text):
    assert Redactor().text(text) == _as_before(text)
