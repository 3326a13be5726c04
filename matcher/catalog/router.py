r"""sglang's Rust router / model gateway (PyPI `sglang-router`, later `smg`) → catalog records.

    python -m matcher.catalog.router --sdist-dir DIR [-o patterns/sglang/generated/router.jsonl]
    python -m matcher.catalog.router --package smg --sdist-dir DIR \
        --skip-known patterns/sglang/generated/router.jsonl --specific 30   # → smg.jsonl

The router was published as `sglang-router` up to 0.3.2 and as `smg` since (its own layout of
crates, `LAYOUTS`); each package's records name it, its releases and `pip install -U` it.
`--skip-known` leaves out the messages the older package's file already holds (same id) and
`--specific N` keeps the most specific sites only (`specific`), for the catalog's memory budget.

Each release's sdist carries the crate's Rust source; `rust_source.sites` finds its message
sites and this module turns them into records, merged over releases (one record per id, with
the releases that hold it in `sourceVersions`):

- a **log** site (`error!`, `warn!`): the message pattern, searched anywhere in a line — the
  tracing format (`2026-12-06 00:40:13  WARN smg::workflow::event: /…/src/workflow/event.rs:233:
  Step failed …`, 0.1.5 on) and env_logger's (`[Router (Rust)] 2025-03-18 14:17:58 - WARN - …`,
  before) both print the message after their own prefix;
- a **panic** (`panic!`, `.expect("…")`, `assert!(…, "…")`, `unreachable!`): Rust prints
  `thread 'tokio-runtime-worker' (7516) panicked at src/server.rs:25:27:` and the message on the
  next line (pyo3 raises it in Python as `pyo3_runtime.PanicException: <message>`). The pattern
  takes either line: the header with the site's file and its `LINE:COL` in every release (the
  frame), or the message at the start of a line;
- a panic **without a message of its own** (`.unwrap()`, a bare `assert!`, `.expect(var)`):
  `called \`Option::unwrap()\` on a \`None\` value` names no site, so the record is its frame
  alone — `panicked at …/src/policies/cache_aware.rs:(?:212:50|230:50)`;
- an **error value** (`Err(format!(…))`, `anyhow!`, `bail!`, `XError::Variant(format!(…))`,
  pyo3's `PyValueError::new_err(…)`, `.map_err(|e| format!(…))`): the text reaches a log line
  (`Step failed … error="…"`), an HTTP error body or a Python exception; searched anywhere.

A message whose literal text is too thin to tell one site from another (no literal run of 12
characters, as `catalog extract` requires) gives no message record; a panic then keeps its
frame. Ids: the first 16 hex digits of `sha256("sglang-matcher/router/" + key)`, the key being
the kind, level and template of a message, or `frame`, the file, the function and the stripped
source line of a frame — stable across releases while the site keeps its words.

Remediation is derived only where the words say what to do (`REMEDIES`: a worker that does not
answer, a timeout, a port in use, a payload too large…), naming flags that the release's own
`router_args.py` defines; else by the rules of `router_remedies` (a panic whose code a later
release no longer has: upgrade to it; a panic in a policy, history backend or the gRPC path:
choose another; a message that names one of the release's flags: change it); elsewhere
`solutions` stays empty and `documentation` says what happened and where.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import tarfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matcher.catalog import router_remedies as RR
from matcher.catalog.extract import extract_module
from matcher.catalog.patterns import analyze, escape_literal
from matcher.catalog.rust_source import Hole, RustSite, plain_text, sites
from matcher.catalog.versions import compact_ranges, sort_versions, version_key

PACKAGE = "sglang-router"
GENERATOR = "matcher.catalog.router"
ID_PREFIX = "sglang-matcher/router/"
REPO_URL = "https://github.com/sgl-project/sglang"
REPOS = {"sglang-router": "sgl-project/sglang", "smg": "smg-project/smg"}  # smg's pyproject URL
MIN_LITERAL_RUN = 12
MIN_LITERAL_CHARS = 8
DEFAULT_OUTPUT = Path("patterns/sglang/generated/router.jsonl")

_FLAG = re.compile(r"""["']--(?:\{prefix\})?([a-z0-9][a-z0-9-]*)["']""")
_SKIP_DIRS = ("tests/", "benches/", "e2e_test/", "examples/", "py_test/", "scripts/")


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a package's sdist keeps its Rust crates and its Python package."""

    package: str  # the PyPI name, as `pip install -U` takes it
    sdist: re.Pattern[str]  # the sdist's file name; group 1 the version
    rust: re.Pattern[str]  # a Rust source path inside the sdist that is the router's
    python: str  # the Python package's directory name (`sglang_router`, `smg`)
    repo_dir: str  # where the sdist's `src/` lives in the package's repository


# sglang-router (0.0.1 … 0.3.2): one crate at the sdist's root, bindings under `bindings/*/src`.
# smg (0.4.0 on, the router renamed and split into crates): the gateway in `model_gateway/src`,
# the other crates in `X/src` (0.4.0 … 1.x) or `crates/X/src` (later), the pyo3 bindings in
# `bindings/python/src`; the Python package in `src/smg` (not Rust: `src/*.py`).
LAYOUTS = {
    "sglang-router": Layout("sglang-router", re.compile(r"sglang_router-(.+)\.tar\.gz$"),
                            re.compile(r"(?:src/|bindings/[^/]+/src/)"), "sglang_router",
                            "sgl-router/"),
    "smg": Layout("smg", re.compile(r"smg-(.+)\.tar\.gz$"),
                  re.compile(r"(?:crates/|bindings/)?[^/]+/src/"),
                  "smg", ""),
}


@dataclass(frozen=True, slots=True)
class Release:
    version: str
    files: tuple[tuple[str, str], ...]  # (path inside the crate as Rust prints it, text)
    flags: frozenset[str]  # the router's command-line flags, without `--` and `--router-`
    python: tuple[tuple[str, str], ...] = ()  # the package's Python (`sglang_router/…`)
    package: str = PACKAGE


def _wanted(name: str, layout: Layout) -> bool:
    """A Rust source of the router (not a test, bench or example) or a module of its Python
    package (not a test)."""
    if name.endswith(".rs"):
        return (layout.rust.match(name) is not None
                and not any(name.startswith(d) or f"/{d}" in name for d in _SKIP_DIRS))
    return (name.endswith(".py") and f"/{layout.python}/" in f"/{name}"
            and not any(d in name for d in ("test", "/e2e")))


def read_sdist(path: Path, layout: Layout = LAYOUTS[PACKAGE]) -> Release | None:
    """An sdist's Rust sources (see `LAYOUTS`) and the flags its `router_args.py` /
    `launch_router.py` define; None without Rust source."""
    m = layout.sdist.match(path.name)
    if m is None:
        return None
    files: list[tuple[str, str]] = []
    py_files: list[tuple[str, str]] = []
    flags: set[str] = set()
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            name = member.name.split("/", 1)[1] if "/" in member.name else member.name
            if not member.isfile() or not _wanted(name, layout):
                continue
            f = tar.extractfile(member)
            if f is None:
                continue
            text = io.TextIOWrapper(f, encoding="utf-8", errors="replace").read()
            if name.endswith(".py"):
                if name.endswith(("router_args.py", "launch_router.py", "launch_server.py")):
                    flags.update(_FLAG.findall(text))
                py = f"{layout.python}/" + f"/{name}".split(f"/{layout.python}/", 1)[1]
                py_files.append((py, text))
            else:
                files.append((name, text))
    if not files:
        return None
    return Release(m.group(1), tuple(sorted(files)), frozenset(flags), tuple(sorted(py_files)),
                   layout.package)


@dataclass(slots=True)
class _Merged:
    """One record's sites over releases."""

    key: str
    kind: str
    first: RustSite  # the newest release's site (after merging, see `merge`)
    versions: set[str] = field(default_factory=set)
    places: dict[str, set[tuple[str, int, int]]] = field(default_factory=dict)  # version → sites
    flags: frozenset[str] = frozenset()
    newest: str = ""
    kinds: set[str] = field(default_factory=set)  # log, error (the same words as both)
    python_pattern: str = ""  # a Python site's pattern, as `catalog extract` makes it
    severities: set[str] = field(default_factory=set)
    package: str = PACKAGE


def site_key(site: RustSite) -> str:
    """A frame by its file, function and source line; a panic by its message; a log line and
    an error value by their text alone — the router often logs an error and returns it (0.1.4:
    `error!("Timeout {}s waiting …")` then `Err(format!("Timeout {}s waiting …"))`): one
    failure, one record."""
    if site.kind == "frame":
        return f"frame\n{site.path}\n{site.function}\n{site.source}"
    if site.kind == "panic":
        return f"panic\n{site.template}"
    return f"message\n{site.template}"


def record_id(key: str) -> str:
    return hashlib.sha256((ID_PREFIX + key).encode()).hexdigest()[:16]


def longest_literal(parts: Sequence[str | Hole]) -> int:
    return max((len(p.strip()) for p in parts if isinstance(p, str)), default=0)


# Words other programs print as well: a glog line of Mooncake or an Ascend transport (`E1210 …
# ascend_direct_transport.cpp:820] Failed to connect to target: …`) is not the router's.
_SHARED_WORDING = frozenset({"Failed to connect to"})


def usable(site: RustSite) -> bool:
    """A message with enough literal text to be one site's (see the module doc), and not
    wording other programs print as well (`_SHARED_WORDING`)."""
    head = site.parts[0] if site.parts and isinstance(site.parts[0], str) else ""
    if head.strip() in _SHARED_WORDING:  # the wording, then the values: nothing of its own
        return False
    text = plain_text(site.parts).strip()
    return (longest_literal(site.parts) >= MIN_LITERAL_RUN and len(text) >= MIN_LITERAL_CHARS
            and " " in text)  # words, not an identifier (`ContextValueNotFound("step_id")`)


_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _group_name(expr: str, used: Counter[str]) -> str | None:
    """A capture name from a hole's expression: `self.url` → `url`, `worker.url()` → `url`."""
    text = re.sub(r"\(.*\)$", "", expr.strip())
    text = re.sub(r"\.(?:as_str|to_string|clone|len|as_secs|display)$", "", text)
    last = re.split(r"[.:]+", text)[-1] if text else ""
    if not _NAME_OK.fullmatch(last) or last in ("self",):
        return None
    used[last] += 1
    return last if used[last] == 1 else f"{last}_{used[last]}"


def message_pattern(parts: Sequence[str | Hole], *, anchored: bool) -> str:
    """Literal text escaped, each hole a lazy group named after its argument (the last one
    greedy); a leading hole is dropped (the search is unanchored), and only a message that
    opens with literal text is anchored at the start of the line (`anchored`)."""
    items = list(parts)
    while items and isinstance(items[0], Hole):
        items.pop(0)
    if items and isinstance(items[0], str):
        items[0] = items[0].lstrip()
    first_line: list[str | Hole] = []
    for p in items:  # a log line holds the message's first line only
        if isinstance(p, str) and "\n" in p:
            first_line.append(p.split("\n", 1)[0])
            break
        first_line.append(p)
    items = first_line
    while items and isinstance(items[-1], str) and not items[-1].strip():
        items.pop()
    used: Counter[str] = Counter()
    out: list[str] = []
    for k, p in enumerate(items):
        if isinstance(p, str):
            out.append(escape_literal(p.replace("{", "{{").replace("}", "}}")))
            continue
        name = _group_name(p.expr, used)
        body = ".+" if k == len(items) - 1 else ".+?"
        out.append(f"(?P<{name}>{body})" if name else f"({body})")
    text = "".join(out)
    if anchored and items and isinstance(items[0], str):
        return r"(?<![\s\S])\s*" + text
    return QUIET_LEVELS + text


# A message searched anywhere in a line is not this site's when the line was logged at INFO,
# DEBUG or TRACE (the same words at another level: a retry's progress, an older release's
# `info!`): tracing prints ` INFO `, env_logger `- INFO -`.
QUIET_LEVELS = r"(?<!\b(?:INFO|DEBUG|TRACE)\b[^\n]*)"


def frame_pattern(path: str, places: Iterable[tuple[int, int]]) -> str:
    """`panicked at …/src/x.rs:(?:463:40|470:12)`: the panic header of one site, its file and
    every line and column it had (the path before `src/` is the build's: the wheels' CI
    checkout, a cargo registry)."""
    spots = sorted(set(places))
    alternatives = "|".join(f"{line}:{col}" for line, col in spots)
    tail = escape_literal(path.split("src/", 1)[1] if "src/" in path else path)
    head = "src/" if "src/" in path else ""
    return rf"panicked at (?:[^\s:]*/)?{escape_literal(head)}{tail}:(?:{alternatives})\b"


# What an operator can do, by what the message says. Each: the words that select it (searched
# in the message's literal text, case ignored), the flags it names (kept only when the release
# defines them), and the text; `{flags}` is filled with those flags.
@dataclass(frozen=True, slots=True)
class Remedy:
    name: str
    words: re.Pattern[str]
    flags: tuple[str, ...]
    text: str
    documentation: str


REMEDIES: tuple[Remedy, ...] = (
    Remedy("startup-timeout",
           re.compile(r"timeout.*waiting for workers|waiting for workers to become healthy|"
                      r"workers? (?:failed to become|did not become) healthy", re.I),
           ("worker-startup-timeout-secs", "worker-startup-check-interval"),
           "The workers did not pass their health check before the router's start-up timeout: "
           "check that each worker finished loading (its log says `The server is fired up and "
           "ready to roll!`) and answers `curl <worker-url>/health` from the router's host; if "
           "it is only slow (large model, CUDA graph capture, torch.compile), raise {flags} "
           "(with `sglang_router.launch_server`, spelled `--router-…`).",
           "The router waits for every worker to answer its health check before it serves; "
           "this one did not in time."),
    Remedy("circuit-open",
           re.compile(r"circuit breaker open|circuits open", re.I),
           ("cb-failure-threshold", "cb-timeout-duration-secs", "disable-circuit-breaker"),
           "The router's circuit breaker stopped sending requests to workers that failed "
           "several in a row (5xx answers, timeouts, connection errors) and tries them again "
           "after a cool-down: find why they failed in the workers' own logs and the router's "
           "earlier lines; if the failures were transient (a burst of client timeouts, a busy "
           "worker), tune or turn off the breaker ({flags}).",
           "The router's circuit breaker is open for the workers a request could go to."),
    Remedy("worker-unreachable",
           re.compile(r"health.?check.*fail|failed to connect|connection (?:refused|failed)|"
                      r"error sending request|is not healthy|unhealthy|not reachable|"
                      r"failed to send request|connect(?:ion)? error|transport error|"
                      r"removing failed worker", re.I),
           ("health-check-timeout-secs", "health-failure-threshold"),
           "Make sure the worker URL is right (`--worker-urls`, `--prefill`/`--decode`: scheme `http://`/`https://`, or `grpc://` for a "
           "gRPC worker; host and port as the worker was launched) and that the worker is up and "
           "answers `curl <worker-url>/health` from the router's host (a proxy variable such as "
           "`http_proxy` can divert it: set `no_proxy` for the workers' hosts); if the worker is "
           "busy rather than down, raise {flags}.",
           "The router could not reach a worker, or the worker failed its health check."),
    Remedy("no-workers",
           re.compile(r"no (?:available|healthy)? ?(?:prefill |decode )?(?:workers?|servers?)|"
                      r"no worker (?:available|found)|all workers are unhealthy|no healthy|"
                      r"no available (?:PD )?worker pairs?|failed to select (?:PD pair|worker "
                      r"pair|prefill worker|decode worker)", re.I),
           ("worker-urls", "prefill", "decode", "service-discovery"),
           "Give the router workers that are up ({flags}, or `POST /workers` at run time) and "
           "check the router's earlier lines for why the ones it had were removed (failed "
           "health checks).",
           "The router had no worker to send the request to."),
    Remedy("worker-error-status",
           re.compile(r"(?<!queue )returned error status|server returned (?:an? )?error|"
                      r"(?:prefill|decode|worker) server error|request failed with server error|"
                      r"request to \S* ?failed \(attempt|(?:prefill|decode) server failed|"
                      r"server returned status|upstream request failed",
                      re.I),
           (),
           "A worker failed the request, or the router answered it with a 5xx itself: when a "
           "worker (the prefill, decode or regular sglang server named in the line) answered "
           "with an error status, its own log at that moment holds the cause, so fix it there; "
           "when the request could not be sent, check that the worker is up and reachable from "
           "the router; a 503 of the router's own (no worker available, circuit open) is "
           "explained by the router's earlier ERROR/WARN lines.",
           "The router passed on a worker's failure, or could not send the request to it."),
    Remedy("not-installed",
           re.compile(r"rust router is not installed", re.I),
           (),
           "The router's Rust extension (`sglang_router_rs`) could not be imported: install the "
           "sglang-router wheel built for this platform and Python (`pip install -U "
           "sglang-router`; a source install needs the Rust toolchain to build it), and check "
           "with `python -c \"import sglang_router_rs\"`.",
           "sglang-router's Python package is there but its compiled router is not."),
    Remedy("port-in-use",
           re.compile(r"address already in use|failed to bind|os error 98", re.I),
           ("port", "prometheus-port"),
           "Another process holds the port: stop it, or start the router on a free port "
           "({flags}).",
           "The router could not listen on its port."),
    Remedy("payload-too-large",
           re.compile(r"payload too large|body too large|exceeds? (?:the )?max(?:imum)? payload|"
                      r"length limit exceeded", re.I),
           ("max-payload-size",),
           "Raise the router's request size limit ({flags}, in bytes) or send smaller requests.",
           "A request was larger than the router accepts."),
    Remedy("rate-limit",
           re.compile(r"rate limit|too many (?:concurrent )?requests|queue (?:is )?full|"
                      r"queue timeout|queue returned error status", re.I),
           ("max-concurrent-requests", "queue-size", "queue-timeout-secs"),
           "The router is shedding load: raise {flags}, or add workers.",
           "The router rejected a request because its concurrency limit and queue were full."),
    Remedy("request-timeout",
           re.compile(r"request timed out|timed out waiting for (?:response|worker)|"
                      r"request timeout", re.I),
           ("request-timeout-secs",),
           "A worker did not answer in time: raise {flags} for long generations, or find why the "
           "worker stalls (its own log).",
           "A request to a worker timed out."),
    Remedy("tokenizer",
           re.compile(r"tokenizer", re.I),
           ("tokenizer-path", "model-path"),
           "Point the router at the model's tokenizer: {flags} (a local directory with "
           "`tokenizer.json`, or a Hugging Face model id the router can download; set `HF_TOKEN` "
           "for a gated model).",
           "The router could not load or use the model's tokenizer."),
    Remedy("service-discovery",
           re.compile(r"kubernetes|service discovery|k8s", re.I),
           ("service-discovery-namespace", "selector"),
           "Check the router's Kubernetes access: its service account needs `list`/`watch` on "
           "pods in the namespace ({flags}), and the selector must match the workers' labels.",
           "The router's Kubernetes service discovery failed."),
    Remedy("tls",
           re.compile(r"certificate|\btls\b|\bca cert", re.I),
           ("tls-cert-path", "tls-key-path", "ca-cert-paths", "client-cert-path",
            "client-key-path"),
           "Check the certificate files the router is given ({flags}): the paths exist, are "
           "PEM, and the key matches the certificate.",
           "The router could not load or use a TLS certificate."),
    Remedy("api-key",
           re.compile(r"api key|unauthori[sz]ed|\b401\b|invalid token|jwt", re.I),
           ("api-key", "control-plane-api-keys", "jwt-issuer", "jwt-jwks-uri"),
           "Give the router (and its clients) the right credentials: {flags}.",
           "A request or worker was rejected for its credentials."),
    Remedy("policy",
           re.compile(r"unknown policy|invalid policy|unsupported policy", re.I),
           ("policy", "prefill-policy", "decode-policy"),
           "Set {flags} to one of the policies the router lists in `--help`.",
           "The router was given a load-balancing policy it does not know."),
)


def remedy_for(text: str) -> Remedy | None:
    for r in REMEDIES:
        if r.words.search(text):
            return r
    return None


def _fill(remedy: Remedy, flags: frozenset[str]) -> str:
    named = [f"`--{f}`" for f in remedy.flags if f in flags]
    listed = ", ".join(named) if named else "the router's matching flags"
    return remedy.text.replace("{flags}", listed)


def _kind_words(site: RustSite) -> str:
    if site.kind == "log":
        return f"logs at {'ERROR' if site.severity == 'error' else 'WARN'} level"
    if site.kind == "error":
        if site.py_class:
            return f"raises Python's {site.py_class} with this message"
        return "returns this error (it reaches a log line, an HTTP error body or a Python exception)"
    return "panics (the thread that runs it dies; in the main thread the router exits)"


def _code_key(site: RustSite) -> str:
    """A panic's code wherever its file: a frame by its function and source line, a panic by
    its message."""
    if site.kind == "frame":
        return f"frame\n{site.function}\n{site.source}"
    return f"{site.kind}\n{site.template}"


def _code_releases(merged: Iterable[_Merged]) -> dict[str, set[str]]:
    """For each panic's code (`_code_key`), every release that holds it in any file."""
    out: dict[str, set[str]] = {}
    for m in merged:
        if m.first.kind in ("panic", "frame"):
            out.setdefault(_code_key(m.first), set()).update(m.versions)
    return out


def _solutions(m: _Merged, releases: Sequence[str], remedy: Remedy | None,
               same_code: Iterable[str]) -> list[str]:
    """The message rule's fix, else the rules of `router_remedies` (see there)."""
    site = m.first
    if remedy is not None:
        return [_fill(remedy, m.flags)]
    out: list[str] = []
    if site.kind in ("panic", "frame"):
        gone = RR.first_release_without(m.versions, releases, same_code)
        if gone is not None:
            out.append(RR.upgrade_text(gone, f"{site.path}, `{site.function}()`"
                                       if site.function else site.path, m.package))
        workaround = RR.module_text(site.path, m.flags)
        if workaround is not None:
            out.append(workaround)
    else:
        named = RR.named_flags(plain_text(site.parts), m.flags)
        if named:
            out.append(RR.flag_text(named))
    return out


# A record's `errorType` by site kind (a site that also logs its error is "log").
_ERROR_TYPES = {"panic": "panic", "frame": "panic", "error": "error", "python": "python"}


def _file_path(site: RustSite, package: str) -> str:
    """The site's file in its repository (sglang-router's lives under sglang's `sgl-router/`;
    smg's Python package under `src/`)."""
    if package != PACKAGE:
        return f"src/{site.path}" if site.kind == "python" else site.path
    return (f"sgl-router/{site.path}" if site.path.startswith("src/")
            else f"sgl-router/py_src/{site.path}" if site.kind == "python"
            else site.path)


def _python_site(m: _Merged, remedy: Remedy | None) -> tuple[str | None, str, str, str]:
    """A site of the router's Python launcher: message, pattern, documentation, severity."""
    site = m.first
    message = site.parts[0] if isinstance(site.parts[0], str) else site.template
    documentation = (f"{m.package}'s Python launcher ({m.package} {m.newest}) "
                     + (f"raises {site.py_class}" if site.py_class else "logs this")
                     + f" in {site.path}:{site.line}.")
    if remedy is not None:
        documentation += " " + remedy.documentation
    return message, m.python_pattern, documentation, site.severity


def _frame_site(m: _Merged, spots: Sequence[tuple[int, int]],
                where: str) -> tuple[str | None, str, str, str]:
    """A panic known by its frame alone: message (none), pattern, documentation, severity."""
    site = m.first
    what = (f"`{site.source}`" if site.source else "this line")
    documentation = (
        f"The router ({m.package} {m.newest}) panicked at {where}: `{site.macro}` "
        f"found no value or an error where the code assumed one ({what}). Rust prints "
        "the site as `panicked at FILE:LINE:COL` and a message that names no site "
        "(`called `Option::unwrap()` on a `None` value`), so the record is known by its "
        "frame; the line after the header says what it found.")
    return None, frame_pattern(site.path, spots), documentation, "critical"


def _rust_site(m: _Merged, spots: Sequence[tuple[int, int]], where: str,
               remedy: Remedy | None) -> tuple[str | None, str, str, str]:
    """A Rust panic, error or log with a message: message, pattern, documentation,
    severity."""
    site = m.first
    body = message_pattern(site.parts, anchored=site.kind == "panic")
    if site.kind == "panic":
        pattern = f"(?:{frame_pattern(site.path, spots)}|{body})"
    else:
        pattern = body
    documentation = f"The router ({m.package} {m.newest}) {_kind_words(site)} in {where}"
    if m.kinds == {"log", "error"}:
        documentation += " (it logs the error and returns it)"
    if site.condition:
        documentation += f", when `{site.condition}` does not hold"
    documentation += "."
    if site.suffix:
        documentation += " Rust appends `: ` and the error it found."
    if remedy is not None:
        documentation += " " + remedy.documentation
    severity = "error" if "error" in m.severities else site.severity
    return site.template, pattern, documentation, severity


def build_record(m: _Merged, releases: Sequence[str], same_code: Iterable[str] = ()
                 ) -> dict[str, Any]:
    """One record in the catalog schema from a merged site (`same_code`: the releases that
    hold a panic's code in any file, `_code_releases`)."""
    site = m.first
    rid = record_id(m.key)
    ranges = compact_ranges(m.versions, releases)
    spots = sorted({(line, col) for places in m.places.values() for p, line, col in places
                    if p == site.path})
    other_files = sorted({p for places in m.places.values() for p, _, _ in places} - {site.path})
    where = f"`{site.function}()` in {site.path}:{site.line}" if site.function else \
        f"{site.path}:{site.line}"
    text = plain_text(site.parts)
    remedy = remedy_for(text) if site.kind != "frame" else None
    if site.kind == "python":
        message, pattern, documentation, severity = _python_site(m, remedy)
    elif site.kind == "frame":
        message, pattern, documentation, severity = _frame_site(m, spots, where)
    else:
        message, pattern, documentation, severity = _rust_site(m, spots, where, remedy)
    if other_files:
        documentation += " Same message also in: " + ", ".join(other_files[:5]) + "."
    record: dict[str, Any] = {
        "id": rid,
        "repo": REPOS[m.package],
        "slug": _slug(message or f"panic-{site.path}-{site.function}"),
        "errorMessage": message,
        "messagePattern": pattern,
        "errorType": "log" if "log" in m.kinds else _ERROR_TYPES[site.kind],
        "errorClass": site.py_class,
        "severity": severity,
        "filePath": _file_path(site, m.package),
        "lineNumber": site.line,
        "githubUrl": None,
        "documentation": documentation,
        "solutions": _solutions(m, releases, remedy, same_code),
        "tags": [m.package, "rust", "generated", site.kind, site.macro],
        "sourcePackage": m.package,
        "sourceVersions": ranges,
        "generator": GENERATOR,
        "sourceLocations": _locations(m, releases),
        "schemaVersion": 2,
    }
    if site.kind in ("panic", "frame"):
        record["tags"].append("frame")
    return record


def _locations(m: _Merged, releases: Sequence[str]) -> list[dict[str, Any]]:
    """Where the site was, per run of releases with the same places: `{"versions": "A..B",
    "sites": ["src/router.rs:463:40", …]}`."""
    by_places: dict[tuple[str, ...], list[str]] = {}
    for v in releases:
        if v in m.places:
            spots = tuple(sorted(f"{p}:{line}:{col}" for p, line, col in m.places[v]))
            by_places.setdefault(spots, []).append(v)
    out = []
    for spots, vs in by_places.items():
        for r in compact_ranges(vs, releases):
            out.append({"versions": r, "sites": list(spots)})
    out.sort(key=lambda e: version_key(str(e["versions"]).split("..")[0]))
    return out


def _slug(text: str, limit: int = 48) -> str:
    s = re.sub(r"\{[^{}]*\}", " ", text.lower())
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s[:limit].rstrip("-") or "router"


@dataclass(slots=True)
class Result:
    records: list[dict[str, Any]]
    counts: Counter[str]
    per_release: dict[str, Counter[str]]


def _merge_rust_sites(rel: Release, merged: dict[str, _Merged], c: Counter[str]) -> None:
    """One release's Rust sites into `merged` by key, counted in `c`; a panic with too little
    literal text is kept as a frame site."""
    for path, text in rel.files:
        for site in sites(text, path):
            c[f"sites:{site.kind}"] += 1
            if site.kind != "frame" and not usable(site):
                if site.kind != "panic":
                    c["dropped: too little literal text"] += 1
                    continue
                site = RustSite("frame", "critical", site.macro, (), site.path, site.line,
                                site.col, site.function, site.source)
            key = site_key(site)
            m = merged.get(key)
            if m is None:
                m = merged[key] = _Merged(key, site.kind, site)
            # the newest release's site describes the record
            m.first, m.newest, m.flags = site, rel.version, rel.flags
            m.package = rel.package
            m.versions.add(rel.version)
            m.kinds.add(site.kind)
            m.severities.add(site.severity)
            m.places.setdefault(rel.version, set()).add((site.path, site.line, site.col))
            c[f"records:{site.kind}"] += 1


def _merge_python_sites(rel: Release, merged: dict[str, _Merged], c: Counter[str]) -> None:
    """One release's Python launcher sites (`extract_module`'s message records) into `merged`,
    counted in `c`."""
    for path, text in rel.python:
        for rec in extract_module(text, path, version=rel.version).records:
            if rec.get("raisedIn") or not rec.get("errorMessage"):
                continue
            c["sites:python"] += 1
            py = RustSite("python", rec.get("severity") or "error",
                          rec.get("errorClass") or rec.get("errorType") or "log",
                          (rec["errorMessage"],), path, int(rec.get("lineNumber") or 0), 0,
                          "", "", py_class=rec.get("errorClass"))
            key = f"python\n{rec.get('errorClass') or ''}\n{rec['errorMessage']}"
            m = merged.get(key)
            if m is None:
                m = merged[key] = _Merged(key, "python", py)
            m.first, m.newest, m.flags = py, rel.version, rel.flags
            m.package = rel.package
            m.python_pattern = rec["messagePattern"]
            m.versions.add(rel.version)
            m.kinds.add("python")
            m.severities.add(py.severity)
            m.places.setdefault(rel.version, set()).add((path, py.line, 0))
            c["records:python"] += 1


def extract(releases: Sequence[Release]) -> Result:
    """Every release's sites merged into records (see the module doc)."""
    order = sort_versions(r.version for r in releases)
    merged: dict[str, _Merged] = {}
    counts: Counter[str] = Counter()
    per_release: dict[str, Counter[str]] = {}
    for rel in sorted(releases, key=lambda r: version_key(r.version)):
        c: Counter[str] = Counter()
        _merge_rust_sites(rel, merged, c)
        _merge_python_sites(rel, merged, c)
        per_release[rel.version] = c
        counts.update(c)
    elsewhere = _code_releases(merged.values())
    records = [build_record(m, order, elsewhere.get(_code_key(m.first), ()))
               for m in merged.values()]
    records.sort(key=lambda r: r["id"])
    counts["records"] = len(records)
    return Result(records, counts, per_release)


def check(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Problems the loader would reject: a pattern that does not compile, matches the empty
    string or holds under 8 literal characters."""
    import regex

    for r in records:
        try:
            compiled = regex.compile(r["messagePattern"])
        except regex.error as e:
            yield f"{r['id']}: {e}"
            continue
        if compiled.search("") is not None:
            yield f"{r['id']}: matches the empty string"
        if analyze(r["messagePattern"]).literal_length < MIN_LITERAL_CHARS:
            yield f"{r['id']}: under {MIN_LITERAL_CHARS} literal characters"


def write_jsonl(records: Iterable[dict[str, Any]], out: Path) -> None:
    with out.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")


def stats_text(result: Result, sdists: Sequence[Path], package: str = PACKAGE) -> str:
    lines = [f"# {package}: what `python -m matcher.catalog.router` read and made", ""]
    lines.append(f"records = {result.counts['records']}")
    for k in sorted(k for k in result.counts if k != "records"):
        lines.append(f'"{k}" = {result.counts[k]}')
    lines.append("")
    lines.append("[sdists]")
    for p in sdists:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        lines.append(f'"{p.name}" = "{digest}"')
    return "\n".join(lines) + "\n"


def sdist_urls(package: str = PACKAGE) -> dict[str, tuple[str, str]]:
    """version → (sdist URL, sha256), from PyPI's JSON API."""
    import urllib.parse
    import urllib.request

    url = f"https://pypi.org/pypi/{package}/json"
    with urllib.request.urlopen(url, timeout=60) as r:
        data = json.load(r)
    out = {}
    for v, files in data["releases"].items():
        for f in files:
            if f["packagetype"] == "sdist" and not f.get("yanked"):
                out[v] = (urllib.parse.urljoin(url, f["url"]), f["digests"]["sha256"])
    return out


def fetch_sdists(versions: Iterable[str] | None, dest: Path,
                 package: str = PACKAGE) -> list[Path]:
    """The releases' sdists in `dest` (downloaded when missing, checked against PyPI's sha256):
    `pip download --no-binary` would build each one's metadata with maturin first."""
    import urllib.request

    dest.mkdir(parents=True, exist_ok=True)
    urls = sdist_urls(package)
    wanted = list(versions) if versions is not None else sort_versions(urls)
    out = []
    for v in wanted:
        if v not in urls:
            raise OSError(f"PyPI has no sdist of {package} {v}")
        url, digest = urls[v]
        path = dest / url.rsplit("/", 1)[1]
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            with urllib.request.urlopen(url, timeout=300) as r:
                data = r.read()
            if hashlib.sha256(data).hexdigest() != digest:
                raise OSError(f"{url}: sha256 differs from PyPI's")
            path.write_bytes(data)
        out.append(path)
    return out


def known_ids(path: Path | None) -> set[str]:
    """The record ids of a JSON-lines catalog file (none without one)."""
    if path is None:
        return set()
    return {json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()}


# Crates of the package that are not the router a user runs (smg's mock worker is a test aid).
_NOT_THE_ROUTER = ("crates/mock_worker/",)


def specific(record: dict[str, Any], min_run: int) -> bool:
    """A record kept under a memory budget: a panic with a message (not one known by its
    frame alone), an error-level log line or the Python launcher's error — what a
    failing run prints — and an error value only when a rule gives it
    a fix or its text holds a literal run of `min_run` characters (the most specific of the many
    `Err(format!(…))` sites). Warning-level logs are left out: many are printed by a router that
    works (a store not configured, a fallback taken), and an event for each would be noise."""
    if record["filePath"].startswith(_NOT_THE_ROUTER):
        return False
    kind = record["errorType"]
    if kind == "panic" and record["errorMessage"] is None:
        return False  # a bare `.unwrap()`: known by one release's line and column alone
    severity: str = record["severity"]
    if kind in ("panic", "python"):
        return severity != "warning"
    if kind == "log":
        return severity in ("error", "critical")
    return bool(record["solutions"]) or longest_literal(
        _literal_runs(record["errorMessage"] or "")) >= min_run


def _literal_runs(template: str) -> list[str]:
    return re.split(r"\{[^{}]*\}", template)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m matcher.catalog.router", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sdist-dir", type=Path, required=True,
                   help="a folder of the package's sdists (PyPI's, one per release)")
    p.add_argument("--package", choices=sorted(LAYOUTS), default=PACKAGE)
    p.add_argument("--fetch", action="store_true",
                   help="first download every release's sdist from PyPI into --sdist-dir")
    p.add_argument("--versions", nargs="*", default=None,
                   help="only these releases (with --fetch: only these are downloaded)")
    p.add_argument("--skip-known", type=Path, default=None,
                   help="leave out records whose id this JSON-lines file already holds")
    p.add_argument("--specific", type=int, default=None, metavar="N",
                   help="keep only the failures (see `specific`), error values with a literal "
                        "run of N characters")
    p.add_argument("-o", "--output", type=Path, default=None)
    return p.parse_args(argv)


def _releases(args: argparse.Namespace) -> tuple[list[Path], list[Release]]:
    layout = LAYOUTS[args.package]
    if args.fetch:
        fetch_sdists(args.versions, args.sdist_dir, args.package)
    found = [(m.group(1), q) for q in args.sdist_dir.iterdir()
             if (m := layout.sdist.match(q.name)) is not None]
    sdists = [q for v, q in sorted(found, key=lambda x: version_key(x[0]))
              if args.versions is None or v in args.versions]
    return sdists, [r for r in (read_sdist(q, layout) for q in sdists) if r is not None]


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    output = args.output or (DEFAULT_OUTPUT if args.package == PACKAGE
                             else DEFAULT_OUTPUT.with_name(f"{args.package}.jsonl"))
    sdists, releases = _releases(args)
    if not releases:
        print(f"no {args.package} sdist with Rust source in {args.sdist_dir}", file=sys.stderr)
        return 2
    result = extract(releases)
    skip = known_ids(args.skip_known)
    result.records = [r for r in result.records if r["id"] not in skip
                      and (args.specific is None or specific(r, args.specific))]
    result.counts["records"] = len(result.records)
    problems = list(check(result.records))
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        return 1
    write_jsonl(result.records, output)
    output.with_suffix(".stats.toml").write_text(stats_text(result, sdists, args.package))
    print(f"{len(result.records)} records from {len(releases)} releases "
          f"({releases[0].version}..{releases[-1].version}) → {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
