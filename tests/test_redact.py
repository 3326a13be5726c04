"""Secrets planted in sglang's own output never reach anything we emit."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from matcher.cli import cmd_scan
from matcher.catalog import load_catalog
from matcher.redact import Redactor

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


def test_console_format_is_for_people_and_still_redacted():
    import io
    from matcher.sinks.events import EventWriter
    from matcher.types import Event
    out = io.StringIO()
    EventWriter(out, Redactor(), "console").accept([Event(
        event="sglang_error", error_class="ValueError", message="bad --api-key sk-live-abcdef123456",
        source="server.log", severity="error", log_ts=None, observed_ts=0.0, ranks=("TP0",),
        occurrences=1, traceback=None, pattern_id="p1")])
    line = out.getvalue()
    assert line.startswith("sglang_error") and "pattern_id=p1" in line
    assert "sk-live-abcdef123456" not in line and "--api-key ***" in line
