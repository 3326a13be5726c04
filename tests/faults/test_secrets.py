"""Credentials in a log never leave the daemon: every common kind, by its shape or by the key it
is given to, in every syntax a log writes them in, on every output (stdout, the events file,
`/events`, the webhook, OTLP, stderr) and in a configuration error.

The property test generates each kind in each syntax; the daemon test runs a real `watch` with
every output on, over a log holding one of each."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from faultkit import served_url
from hypothesis import given, settings
from hypothesis import strategies as st
from watch_harness import REPO, DaemonProcess, wait_for

from matcher.redact import MASK, Redactor

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0234567"


def _chars(alphabet: str, n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=n, max_size=n)


# Credentials recognized by their shape alone, whatever key they are given to.
SHAPES: dict[str, st.SearchStrategy[str]] = {
    "aws_access_key_id": st.tuples(st.sampled_from(["AKIA", "ASIA"]), _chars(_UPPER, 16)).map("".join),
    "github_classic": st.tuples(st.sampled_from(["ghp_", "gho_", "ghs_"]), _chars(_ALNUM, 36)).map("".join),
    "github_fine_grained": _chars(_ALNUM, 22).map(lambda s: f"github_pat_11{s}_{s[::-1]}"),
    "slack_bot": _chars(_ALNUM, 24).map(lambda s: f"xoxb-1234567890-987654321-{s}"),
    "google_api_key": _chars(_ALNUM + "_-", 35).map(lambda s: "AIza" + s),
    "jwt": st.tuples(_chars(_ALNUM, 20), _chars(_ALNUM, 30)).map(
        lambda p: f"eyJhbGciOiJIUzI1NiJ9.eyJ{p[0]}.{p[1]}"),
    "hf": _chars(_ALNUM, 34).map(lambda s: "hf_" + s),
    "openai": _chars(_ALNUM, 40).map(lambda s: "sk-proj-" + s),
    "npm": _chars(_ALNUM, 36).map(lambda s: "npm_" + s),
    "stripe": st.tuples(st.sampled_from(["sk_live_", "rk_test_"]), _chars(_ALNUM, 24)).map("".join),
    "gitlab": _chars(_ALNUM, 20).map(lambda s: "glpat-" + s),
    "azure_client_secret": _chars(_ALNUM, 34).map(lambda s: f"xY{s[0]}8Q~{s}"),
}
# Keys whose value is a secret whatever it looks like (`_ALNUM` values here), and the one whose
# value must look like a key (`key`: 8 or more key characters).
KEYS = ["password", "db_pass", "pwd", "passwd", "secret", "client_secret", "token", "auth",
        "api_key", "aws_secret_access_key", "X-Amz-Signature", "sig", "private_key",
        "AccountKey", "apiKey", "_authToken", "HF_TOKEN", "key", "encryption_key"]

# Each syntax a log gives a key its value in; `{k}` the key, `{v}` the value.
SYNTAXES = {
    "assign": "{k}={v}",
    "spaced": "{k} = {v}",
    "colon": "{k}: {v}",
    "arrow": "{k} => {v}",
    "ruby_symbol": ":{k} => '{v}'",
    "go": '{k} := "{v}"',
    "dict": "{{'{k}': '{v}', 'port': 30000}}",
    "json": '{{"{k}": "{v}", "port": 30000}}',
    "repr": "Args({k}='{v}', port=30000)",
    "env": "export {K}={v}",
    "env_quoted": 'Environment="{K}={v}"',
    "flag": "--{kf} {v} --port 30000",
    "flag_eq": "--{kf}={v}",
    "bytes_dict": "{{'{k}': b'{v}'}}",
    "bytes_assign": "{k}=b\"{v}\"",
    "query": "GET https://h.example/p?x=1&{k}={v}&y=2",
    "header": "{K}: {v}",
    "toml": '{k} = "{v}"',
}


def _fill(syntax: str, key: str, value: str) -> str:
    flag = key.strip("_").replace("_", "-").lower()
    return SYNTAXES[syntax].format(k=key, K=key.upper().replace("-", "_"), kf=flag, v=value)


def _leaks(value: str, out: str) -> list[str]:
    """The 8-character pieces of `value` still in `out` (a secret masked only in part leaks)."""
    return [value[i:i + 8] for i in range(len(value) - 7) if value[i:i + 8] in out]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(SHAPES)).flatmap(lambda kind: SHAPES[kind]),
       st.sampled_from(sorted(SYNTAXES)), st.sampled_from(["note", "value", "x", "id"]))
def test_every_token_shape_is_masked_in_every_syntax(token, syntax, key):
    text = f"[2026-01-01 12:00:00] RuntimeError: {_fill(syntax, key, token)} failed"
    out = Redactor().text(text)
    assert not _leaks(token, out), (text, out)
    assert MASK in out
    bare = Redactor().text(f"ValueError: got {token}. Retrying")  # in prose, no key at all
    assert not _leaks(token, bare) and bare.endswith(". Retrying")


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(KEYS), st.sampled_from(sorted(SYNTAXES)), _chars(_ALNUM, 24))
def test_every_secret_key_is_masked_in_every_syntax(key, syntax, value):
    text = f"[2026-01-01 12:00:00] RuntimeError: {_fill(syntax, key, value)} failed"
    out = Redactor().text(text)
    assert not _leaks(value, out), (text, out)
    assert MASK in out


@pytest.mark.parametrize("text, redacted", [
    ("{'api_key': b'Zq0secret0value1'}", "{'api_key': b'***'}"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2026&X-Amz-Signature=0a1b2c3d4e5f&X-Amz-Date=1",
     "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Date=1"),
    ("connect db_pass=hunter22 user=x", "connect db_pass=*** user=x"),
    ("proxy auth=Zq0abcdef retry", "proxy auth=*** retry"),
    ("POST https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefSECRETxyz failed",
     "POST https://hooks.slack.com/services/*** failed"),
    ("Cookie: session=abc123; csrftoken=def", "Cookie: ***"),
    ("AccountName=a;AccountKey=Zq0abc+def/ghi==;EndpointSuffix=core.windows.net",
     "AccountName=a;AccountKey=***;EndpointSuffix=core.windows.net"),
    ("-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\n-----END PRIVATE KEY-----\\n",
     "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----\\n"),
    ('{"type": "service_account", "private_key_id": "0123abcd", "private_key": "-----BEGIN PRIVATE KEY-----\\nMII\\n"}',
     '{"type": "service_account", "private_key_id": "***", "private_key": "***"}'),
    ("HF_TOKEN_hf_abcdefghijklmnopqrstuvwxyz", "HF_TOKEN_***"),
    # not secrets: sglang's own words stay
    ("max_total_tokens=1234, tokenizer_path=/t, #new-token: 6, pad_token=<pad>, key_len=5",
     "max_total_tokens=1234, tokenizer_path=/t, #new-token: 6, pad_token=<pad>, key_len=5"),
    ("KeyError: key=model.layers.0.self_attn.k_proj.weight", "KeyError: key=model.layers.0.self_attn.k_proj.weight"),
    ("bypass: 3, passes=2, signature_len: 4", "bypass: 3, passes=2, signature_len: 4"),
])
def test_the_forms_issue_34_found_leaking(text, redacted):
    assert Redactor().text(text) == redacted


# -- a real daemon ------------------------------------------------------------------------------

PLANTED = {
    "aws_id": "AKIAZQ0PLANTED0KEY01",
    "aws_secret": "Zq0wJalrXUtnFEMIK7MDENGbPxRfiCYPLANTED1",
    "github": "ghp_Zq0PLANTEDabcdefghijklmnopqrstuvwxyz",
    "slack": "xoxb-1234-5678-Zq0PLANTEDslack",
    "google": "AIzaZq0PLANTEDabcdefghijklmnopqrstuvwxy",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJaq0PLANTED.Zq0PLANTEDsignature",
    "hf": "hf_Zq0PLANTEDabcdefghijklmnopqrstu",
    "signature": "Zq0PLANTEDsig0123456789abcdef",
    "db_pass": "Zq0PLANTEDdbpass",
    "auth": "Zq0PLANTEDauth",
    "bytes": "Zq0PLANTEDbytes",
    "webhook": "Zq0PLANTEDwebhookPath",
}
LOG_LINES = [
    (f"RuntimeError: upload failed with aws_access_key_id={PLANTED['aws_id']} "
     f"aws_secret_access_key={PLANTED['aws_secret']}"),
    f"ValueError: clone with {PLANTED['github']} refused",
    f"ConnectionError: slack {PLANTED['slack']} at https://hooks.slack.com/services/T1/B2/{PLANTED['webhook']}",
    f"PermissionError: key {PLANTED['google']} and bearer-less {PLANTED['jwt']}",
    f"OSError: download as token_{PLANTED['hf']} failed",
    f"TimeoutError: GET https://b.s3.amazonaws.com/x?X-Amz-Signature={PLANTED['signature']}&a=1",
    f"RuntimeError: connect db_pass={PLANTED['db_pass']} auth={PLANTED['auth']}",
    f"TypeError: server_args={{'api_key': b'{PLANTED['bytes']}', 'port': 30000}}",
]


class _Receiver:
    """A webhook and an OTLP collector in one: keeps every body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                receiver.bodies.append(self.rfile.read(length))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_planted_credentials_reach_no_output_of_a_running_daemon(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    events_file = tmp_path / "events.jsonl"
    receiver = _Receiver()
    try:
        d = DaemonProcess(tmp_path, [str(log)], "--metrics-addr", "127.0.0.1:0",
                          "--webhook-url", receiver.url + "/hook",
                          "--otlp-endpoint", receiver.url + "/v1/logs",
                          env={"SGLANG_MATCHER_EVENTS_FILE": str(events_file)})
        with d:
            url = wait_for(lambda: served_url(d), 20)
            with log.open("a") as f:
                for n, line in enumerate(LOG_LINES):
                    f.write(f"[2026-01-01 12:00:0{n}] {line}\n")
            assert wait_for(lambda: len(d.events()) >= len(LOG_LINES), 20), d.err.read_text()
            assert wait_for(lambda: sum(b.count(b'"event"') for b in receiver.bodies)
                            >= len(LOG_LINES), 20)
            ring = urllib.request.urlopen(url + "/events", timeout=10).read().decode()
            assert d.stop() == 0
        outputs = {"stdout": d.out.read_text(), "events_file": events_file.read_text(),
                   "/events": ring, "stderr": d.err.read_text(),
                   "webhook+otlp": b"".join(receiver.bodies).decode("utf-8", "replace")}
    finally:
        receiver.close()
    assert any(b"/v1/logs" not in b for b in receiver.bodies)
    leaked = {(where, kind) for where, text in outputs.items()
              for kind, value in PLANTED.items() if value in text}
    assert not leaked
    assert outputs["stdout"].count(MASK) >= len(PLANTED)
    assert "b'***'" in outputs["stdout"]


def test_a_slack_webhook_url_in_a_configuration_error_is_masked(tmp_path):
    secret = "Zq0PLANTEDwebhookSecret"
    proc = subprocess.run(
        [sys.executable, "-m", "matcher", "watch", "--no-builtin", "--state-dir", str(tmp_path),
         "--webhook-url", f"ftp://hooks.slack.com/services/T1/B2/{secret}", str(tmp_path / "x.log")],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "invalid configuration" in proc.stderr
    assert secret not in proc.stderr and "hooks.slack.com/services/***" in proc.stderr
    assert json.dumps(secret) not in proc.stdout
