"""A urllib3 client that could not reach a plain-HTTP server (`HTTPConnectionPool(…): Max retries
exceeded …`) is one failure whatever prints it; the errno inside says why, answered from the
errno vocabulary. Real lines from train-split threads."""

from __future__ import annotations

import pytest
from generated_layer import engine_of, scan

from matcher.engine import Engine

SLUG = "http-client-connection-pool-max-retries"
# https://github.com/sgl-project/sglang/issues/25084 (an evaluation client of an sglang server)
REFUSED = (
    "Error: HTTPConnectionPool(host='10.192.132.208', port=30033): Max retries exceeded with url: "
    "/v1/chat/completions (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object "
    "at 0x7f607c17e250>: Failed to establish a new connection: [Errno 111] Connection refused'))\n")
# https://github.com/MeetKai/functionary/issues/67 (the pre-1.0 OpenAI SDK, on Windows)
WINDOWS = (
    "APIConnectionError: Error communicating with OpenAI: HTTPConnectionPool(host='localhost', "
    "port=5000): Max retries exceeded with url: /v1/chat/completions (Caused by "
    "NewConnectionError('<urllib3.connection.HTTPConnection object at 0x00000229AB3CECA0>: Failed "
    "to establish a new connection: [WinError 10061] No connection could be made because the "
    "target machine actively refused it'))\n")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("curated"), ())


def only_event(engine: Engine, text: str) -> dict:
    events = scan(engine, text)
    by_id = {r.id: r.slug for r in engine.records}
    assert [by_id.get(e["pattern_id"]) for e in events] == [SLUG]
    return events[0]


def test_a_refused_connection_is_answered_by_its_errno_first(engine) -> None:
    event = only_event(engine, REFUSED)
    assert event["captures"]["host"] == "10.192.132.208"
    assert event["captures"]["os_errno"] == "111"
    solutions = event["remediation"]["solutions"]
    assert solutions[0].startswith("Nothing listens at the address and port")
    assert any("--host 0.0.0.0" in s for s in solutions[1:])


def test_without_a_linux_errno_the_record_answers_alone(engine) -> None:
    event = only_event(engine, WINDOWS)
    assert "os_errno" not in event["captures"]
    assert event["remediation"]["solutions"][0].startswith("When `host`:`port` is an sglang server")
