"""What an HTTP error status means for a request to an sglang server or its router, and what to
do: the answer to a status a record captured (`http_status`) — from the server's access log
(uvicorn's `"POST /v1/chat/completions HTTP/1.1" 400 Bad Request`), or from the client that got
it (httpx's `Server error '503 Service Unavailable' for url '…'` and its `HTTP Request: …` log
line, requests' `503 Server Error: Service Unavailable for url: …`).

The statuses are a closed vocabulary, and what each says follows from what answers it (read in
sglang's `http_server.py` and `serving_base.py`, 0.5.5 and 0.5.23, and sglang-router 0.2.0's
`StatusCode` sites):

- the sglang server answers a request that fails its checks with 400 (FastAPI's validation
  error too, which sglang turns from 422 into 400) and writes the reason only into the body;
  a missing or wrong `--api-key` with 401 (never 403); an exception while serving with 500
  (`Error in request: …` logged with its traceback); `/health` and `/health_generate` with 503
  while starting, shutting down, or when the scheduler did not answer in time;
- the router answers 503 when no worker can take the request, 429 and 408 from its rate
  limiter and queue, 502 when a worker gave no usable answer, 413 over `--max-payload-size`;
- a 403 therefore comes from something else between the client and the server, most often an
  HTTP proxy taken from the client's environment.

A client's line does not say which server answered; every answer is worded for sglang's server
or router and says what else it can be. `matcher.pipeline.vocabulary_answered` puts it ahead of
the record's own words.
"""

from __future__ import annotations

from dataclasses import dataclass

from matcher.catalog.answer import Said, answered_by

CAPTURE = "http_status"

_BODY = ("print the body the client received (the exception's text, or the same request sent "
         "with `curl -i`)")


@dataclass(frozen=True, slots=True)
class Status:
    code: int
    name: str  # the reason phrase
    what_to_do: str  # what it means for an sglang server or router, and what to do


ANSWERS: dict[int, Status] = {s.code: s for s in (
    Status(400, "Bad Request",
           "sglang refused the request as invalid — a field of the wrong type or missing, "
           "`Content-Type` other than `application/json`, a prompt longer than the context "
           "length, a sampling parameter out of range, a LoRA adapter it has not loaded — "
           "and wrote why only into the response body (`{\"object\": \"error\", "
           "\"message\": …}`, on `/v1/responses` `{\"error\": {\"message\": …}}`), not into its "
           f"log: {_BODY} and correct the field or value its `message` names"),
    Status(401, "Unauthorized",
           "The server (or router) was started with an API key (`--api-key`) and the request "
           "did not carry it: send `Authorization: Bearer <key>` with the same key (the OpenAI "
           "SDKs send their `api_key` setting so), or start the server without `--api-key` on a "
           "trusted network"),
    Status(403, "Forbidden",
           "sglang's server and router answer a missing or wrong API key with 401, not 403, so "
           "another program answered: most often an HTTP proxy the client reached through "
           "`http_proxy`/`https_proxy`/`all_proxy` in its environment (an HTML `403 Forbidden` "
           "page as the body is a proxy's) — exempt the server's address with `no_proxy` (e.g. "
           "`NO_PROXY=localhost,127.0.0.1,<server-ip>`) or unset the proxy variables in the "
           "process that sends the request; else a gateway or firewall in front of the server, "
           "or another service on that port: `curl -v --noproxy '*' http://HOST:PORT/health` "
           "from the same machine shows who answers"),
    Status(404, "Not Found",
           "Nothing is served at that path, or (`/v1/models/<name>`) under that model name: "
           "check the URL — an OpenAI client's base URL ends in `/v1` once (not `/v1/v1/…`), "
           "native endpoints (`/generate`, `/health`) have no `/v1` — and that the sglang "
           "release (or the router in front of it) serves that endpoint"),
    Status(405, "Method Not Allowed",
           "The path exists but not for this method (a GET on `/generate` or "
           "`/v1/chat/completions`, which take POST): send the method the endpoint takes"),
    Status(408, "Request Timeout",
           "sglang's router timed the request out while it waited in its queue "
           "(`--queue-timeout-secs`): raise it or `--max-concurrent-requests`, add workers, or "
           "send fewer requests at once"),
    Status(413, "Payload Too Large",
           "The request body is larger than accepted — by sglang's router (`--max-payload-size`) "
           "or a proxy in front of the server (nginx `client_max_body_size`): raise that limit, "
           "or send smaller requests (fewer or smaller images, shorter inputs)"),
    Status(422, "Unprocessable Entity",
           "The body did not match the endpoint's schema (FastAPI's validation; sglang answers "
           "most of its endpoints' validation errors with 400 instead): the body's `detail` "
           "lists each field (`loc`) and what is wrong with it (`msg`) — correct those fields"),
    Status(429, "Too Many Requests",
           "sglang's router sheds load when its concurrency limit and queue are full "
           "(`--max-concurrent-requests`, `--queue-size`; it logs `Request queue is full, "
           "returning 429`): raise them, add workers, or lower the client's concurrency; an "
           "sglang server itself does not answer 429, so otherwise it is a gateway's rate limit"),
    Status(500, "Internal Server Error",
           "The request raised an exception inside the server: sglang logs it at that moment "
           "(`Error in request: …` with its traceback, or the scheduler's error) and puts "
           "`Internal server error: <exception>` into the body — that exception is the failure "
           "to fix; from sglang's router, its ERROR line just before names the worker or step "
           "that failed"),
    Status(502, "Bad Gateway",
           "sglang's router (or a proxy) got no usable answer from the server behind it — the "
           "worker closed the connection, crashed or restarted mid-request: the worker's own log "
           "at that time says why (a crash, an out-of-memory kill)"),
    Status(503, "Service Unavailable",
           "From an sglang server: it is not ready — `/health` and `/health_generate` answer 503 "
           "while it starts (until `The server is fired up and ready to roll!`), while it shuts "
           "down, and when its scheduler did not answer within `SGLANG_HEALTH_CHECK_TIMEOUT` "
           "seconds (logged `Health check failed…`: a hung or dead scheduler). From sglang's "
           "router: no worker could take the request (`No available workers (all circuits open "
           "or unhealthy)`) — the workers are still starting, failed their health checks or "
           "tripped the circuit breaker. Send requests only after `/health` answers 200, and "
           "read the server's or the workers' log for a crash or hang"),
    Status(504, "Gateway Timeout",
           "sglang's router (or a proxy) waited longer than its timeout for the server behind "
           "it: raise that timeout for long generations (`--request-timeout-secs` on sglang's "
           "router, the proxy's read timeout), or find in the worker's log why it stalled"),
)}


def answer(status: str) -> tuple[str, str] | None:
    """What the status means (one sentence) and what to do; None outside the vocabulary."""
    try:
        code = int(status)
    except ValueError:
        return None
    found = ANSWERS.get(code)
    if found is None:
        return None
    return f"HTTP {code} is {found.name}.", found.what_to_do



def said(captures: dict[str, str]) -> Said:
    status = captures.get(CAPTURE)
    return answer(status) if status is not None else None


remediation = answered_by(said)  # what the captured status means ahead of the record's words
