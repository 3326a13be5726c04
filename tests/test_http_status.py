"""An HTTP error status of a request to an sglang server or router, wherever it is printed — the
server's access log, httpx's request log and `HTTPStatusError`, requests' `HTTPError`, aiohttp's
`ClientResponseError`, the OpenAI SDK's `Error code: N`, sglang's own error body — is answered by what the status means (`matcher.catalog.http_status`).
Real lines from train-split threads and from runs here (tests/fixtures/client/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import engine_of, scan

from matcher.catalog import http_status
from matcher.engine import Engine

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# https://github.com/THUDM/slime/issues/1542 (train): slime's rollout against an sglang server
SLIME_403 = (
    'INFO: "POST /generate HTTP/1.1" 403 Forbidden\n'
    "(RolloutManager pid=1790326) [2026-02-03 22:13:47] http_utils.py:186 - Error: Client error "
    "'403 Forbidden' for url 'http://xxx/generate'\n")
# https://github.com/allenai/olmocr/issues/79 (train): olmocr polling its sglang server
OLMOCR_403 = ('INFO:httpx: HTTP Request: GET http://localhost:30000/v1/models '
              '"HTTP/1.1 403 Forbidden"\n')
# https://github.com/sgl-project/sglang/issues/8924 (train): gpt-oss evals against sglang
ACCESS_400 = ('[2025-08-07 20:17:13] INFO:     127.0.0.1:37734 - "POST /v1/chat/completions '
              'HTTP/1.1" 400 Bad Request\n')
# https://github.com/THUDM/slime/issues/1514 (train): an sglang server inside slime
ACCESS_LINES = (
    '(SGLangEngine pid=720234, ip=11.251.213.106) [2026-01-29 06:53:43] INFO:     '
    '11.251.218.253:45400 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n'
    '(SGLangEngine pid=720234, ip=11.251.213.106) [2026-01-29 06:53:43] INFO:     '
    '11.251.218.253:52558 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("curated"), ())


def slugs_and_statuses(engine: Engine, text: str) -> list[tuple[str, str]]:
    by_id = {r.id: r.slug for r in engine.records}
    return [(by_id.get(e["pattern_id"]) or "unknown", e["captures"].get("http_status", ""))
            for e in scan(engine, text)]


def test_a_403_says_sglang_answers_keys_with_401_and_names_the_proxy(engine) -> None:
    events = scan(engine, SLIME_403)
    assert [e["captures"]["http_status"] for e in events] == ["403", "403"]
    for e in events:
        first = e["remediation"]["solutions"][0]
        assert "401, not 403" in first and "no_proxy" in first
        assert e["remediation"]["documentation"].startswith("HTTP 403 is Forbidden.")


def test_httpx_request_log_line(engine) -> None:
    assert slugs_and_statuses(engine, OLMOCR_403) == [
        ("http-client-request-log-error-status", "403")]


def test_a_400_access_line_says_the_reason_is_in_the_body(engine) -> None:
    [event] = scan(engine, ACCESS_400)
    assert event["captures"]["http_status"] == "400"
    assert "response body" in event["remediation"]["solutions"][0]


def test_an_access_line_with_an_error_status_but_not_200(engine) -> None:
    assert slugs_and_statuses(engine, ACCESS_LINES) == [("http-access-line-error-status", "500")]


def test_health_probes_are_left_out(engine) -> None:
    """An sglang server answers `/health` 503 until it is ready: no failure of its own."""
    line = '[2025-08-07 20:16:40] INFO:     127.0.0.1:37700 - "GET /health HTTP/1.1" 503 ' \
           'Service Unavailable\n'
    assert scan(engine, line) == []


def test_the_clients_lines_run_here(engine) -> None:
    text = (FIXTURES / "client" / "http-status-clients.log").read_text(encoding="utf-8")
    found = slugs_and_statuses(engine, text)
    assert ("http-client-request-log-error-status", "503") in found
    assert ("http-client-status-error-httpx", "503") in found
    assert ("http-client-status-error-requests", "503") in found
    assert ("http-client-status-error-requests", "403") in found
    assert ("http-client-status-error-aiohttp", "503") in found
    assert [status for slug, status in found if slug == "http-client-status-error-urllib"] == \
        ["403", "400", "503"]
    assert all(status in ("503", "403", "400") for _, status in found)


def test_an_https_host_is_left_to_its_own_records(engine) -> None:
    line = ("requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
            "https://127.0.0.1:42595/generate/503\n")
    assert ("http-client-status-error-requests", "503") not in slugs_and_statuses(engine, line)


def test_a_known_body_message_wins_over_the_sdk_status(engine) -> None:
    """https://github.com/sgl-project/sglang/issues/4300 (train): the body's text is known."""
    line = ("qwen_infer error, idx: 130 Error code: 400 - {'object': 'error', 'message': '400', "
            "'type': 'Failed to parse fc related info to json format!', 'param': None, "
            "'code': 400}\n")
    assert [s for s, _ in slugs_and_statuses(engine, line)] == ["tool-call-output-unparsable"]


BODY = "http-error-body-openai-compatible"


def test_sglang_error_bodies_are_answered_by_their_status(engine) -> None:
    """sglang's own error-body code run here: a bare body (curl), a streamed request's error
    chunk, the frontend's `RuntimeError({...})`; the status in `code` is answered."""
    text = (FIXTURES / "client" / "sglang-error-bodies.log").read_text(encoding="utf-8")
    events = scan(engine, text)
    assert slugs_and_statuses(engine, text) == [(BODY, "400")] * 3 + [(BODY, "404"), (BODY, "400")]
    assert "correct the field" in events[0]["remediation"]["solutions"][0]
    assert "model name" in events[3]["remediation"]["solutions"][0]


def test_a_known_body_message_wins_over_the_body_status(engine) -> None:
    """https://github.com/QwenLM/Qwen3/issues/1321 (train): curl's output of an sglang server
    whose message a record knows; that record's event, not the body's status."""
    line = (r'''{"object":"error","message":"The input (61709 tokens) is longer than the '''
            r'''model\'s context length (40960 tokens).","type":"BadRequestError","param":null,'''
            r'''"code":400}''' + "\n")
    assert slugs_and_statuses(engine, line) == [("input-longer-than-context-length", "")]


def test_the_openai_sdk_before_and_after_3_38(engine) -> None:
    """openai 3.63 and 2.54 run here against sglang's own 400 body and starlette's plain-text
    500, and curl's output of the latter (tests/fixtures/client/openai-sdk-status-errors.log)."""
    text = (FIXTURES / "client" / "openai-sdk-status-errors.log").read_text(encoding="utf-8")
    sdk, plain = "http-client-status-error-openai-sdk", "http-500-plain-text-body"
    assert slugs_and_statuses(engine, text) == [
        (plain, ""), (sdk, "400"), (sdk, "500"), (sdk, "400"), (plain, "")]


def test_a_plain_text_500_printed_in_a_thread(engine) -> None:
    """https://github.com/sgl-project/sglang/issues/3805 (train): curl's output of an sglang
    server sent a body that is not valid JSON; the access log's line is its own record's."""
    text = ('root@kebe-dev:~# curl 127.0.0.1:30000/v1/chat/completions  -H "Content-Type: '
            'application/json"     -d \'{"model": "model", "messages": [{"role": "user", '
            '"content": "13x^2 + 5x - 102 = 0, x = ? "}],"temperature": 0.7, "stream": true, x}\'  '
            '// x is invalid\nInternal Server Error\n')
    [event] = scan(engine, text)
    assert event["message"] == "Internal Server Error"
    assert "Exception in ASGI application" in event["remediation"]["solutions"][0]


def router_line(release: str, log: str) -> str:
    text = (FIXTURES / "router-runs" / release / log).read_text(encoding="utf-8")
    return next(line for line in text.splitlines(keepends=True)
                if "request failed with server error" in line)


def test_the_router_request_line_is_answered_by_its_span_status(engine) -> None:
    """The router's end-of-request line, run here (sglang-router 0.2.1 with no workers, 0.3.2 —
    smg's code — against a worker answering 500), as printed with its ANSI colours."""
    no_workers = scan(engine, router_line("0.2.1", "rt-no-workers.log"))
    worker_500 = scan(engine, router_line("0.3.2", "rt-worker-500.log"))
    assert [(e["captures"]["http_status"], e["captures"]["side"]) for e in no_workers + worker_500] \
        == [("503", "server"), ("500", "server")]
    assert "No available workers" in no_workers[0]["remediation"]["solutions"][0]
    assert "exception" in worker_500[0]["remediation"]["solutions"][0]


def test_every_answer_is_one_sentence_of_meaning_and_a_fix() -> None:
    for code, status in http_status.ANSWERS.items():
        meaning, fix = http_status.answer(str(code))
        assert meaning == f"HTTP {code} is {status.name}."
        assert fix == status.what_to_do and not fix.endswith(".")
    assert http_status.answer("418") is None and http_status.answer("x") is None


def test_the_answer_goes_ahead_of_the_record_words() -> None:
    base = {"documentation": "A client got an error status.", "solutions": ["Read the log"]}
    out = http_status.remediation({"http_status": "503"}, base)
    assert out["documentation"] == "HTTP 503 is Service Unavailable. A client got an error status."
    assert out["solutions"][1:] == ["Read the log"] and "/health" in out["solutions"][0]
    assert http_status.remediation({"path": "/x"}, base) is None


def test_client_exceptions_without_a_status_are_answered_by_their_own_records(engine) -> None:
    """A closed connection, a refused one, a timeout: the clients' own words, run here."""
    text = (FIXTURES / "client" / "http-client-exceptions.log").read_text(encoding="utf-8")
    found = [s for s, _ in slugs_and_statuses(engine, text)]
    assert found.count("http-client-server-closed-connection") == 2  # requests, httpx
    for slug in ("http-client-server-disconnected-aiohttp", "http-client-cannot-connect-aiohttp",
                 "openai-client-request-timed-out", "http-client-read-timed-out-requests"):
        assert slug in found
    assert found.count("openai-client-connection-error") == 2
    assert "unknown" not in found[:7]  # httpx's refused connection: its errno's record
    assert found[-1] == "http-client-connect-failed-httpx-async"  # the async client's words


def test_a_health_probe_logged_by_httpx_is_left_out(engine) -> None:
    line = ('INFO:httpx: HTTP Request: GET http://127.0.0.1:42595/health_generate '
            '"HTTP/1.0 503 Service Unavailable"\n')
    assert scan(engine, line) == []
