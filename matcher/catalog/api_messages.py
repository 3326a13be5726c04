r"""sglang's API error messages → catalog records: the text its HTTP server writes into an error
body for the client, not raised and not logged, so `catalog extract` (raise, assert, logger
call) never sees it.

    python -m matcher.catalog.api_messages [--wheels DIR] [-o patterns/sglang/generated/api.jsonl]

A site is a call that answers a request with an error of its own words:

- `create_error_response(message, …)` and `create_streaming_error_response(…)` — the OpenAI
  serving classes' methods and the older adapter's functions — and `_create_error_response`;
- `ErrorResponse(message=…)`, the body itself;
- `HTTPException(status_code, detail=…)`, whose `detail` FastAPI sends as `{"detail": …}`;
- a `return "…"` in a `_validate_request`, whose text the caller answers with.

Its message is read as `extract` reads a raise's (`extract_templates.message_parts`): a string,
an f-string, `%` or `.format()`. A message that is only a hole — `str(e)`, the usual case — is
the caught exception's text, which the raising site's own record recognizes; it makes no record
here. The engine searches the message of an API error body as a target of its own
(`matcher.api_error`), so the pattern is anchored at the message's start, as a raise's is.

A 4xx answer is the client's request refused (a missing field, an unknown model): severity
`warning`; a 5xx one is the server's failure: `error`. Releases are merged as `catalog extract
--versions` merges them (`releases.merge_releases`): one record per module and template, with
the runs of releases that print it. The fix a message states itself ("Please relaunch without
--is-embedding") is added as for the raise records (`message_fix`).
"""

from __future__ import annotations

import argparse
import ast
import http
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.catalog.extract_records import GITHUB, REPO, record_id, slugify
from matcher.catalog.extract_sources import module_name, read_wheel
from matcher.catalog.extract_templates import (
    MIN_LITERAL_RUN,
    Hole,
    Part,
    merge_literals,
    message_parts,
    pattern_of,
    template_of,
)
from matcher.catalog.load import check_pattern
from matcher.catalog.patterns import analyze
from matcher.catalog.releases import default_wheel_dir, merge_releases, wheel_version

GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
DEFAULT_OUTPUT = GENERATED / "api.jsonl"
DEFAULT_WHEELS = default_wheel_dir()
# The class name a record of this generator carries in its id: not an exception's.
KIND = "api-error"
_RESPONDERS = frozenset({"create_error_response", "create_streaming_error_response",
                         "_create_error_response"})
# Words a file must hold to be parsed at all: most of a release has none of them.
_SIGNS = ("create_error_response", "ErrorResponse(", "HTTPException(", "_validate_request")


@dataclass(frozen=True, slots=True)
class ApiSite:
    """One answer with an error message: where, in which function, with what status."""

    line: int
    function: str
    status: int
    parts: list[Part]
    via: str  # what answers: `create_error_response()`, `HTTPException(detail=…)`, …


def _call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _status(node: ast.expr | None, default: int) -> int:
    """`400`, `HTTPStatus.BAD_REQUEST`, `status.HTTP_404_NOT_FOUND` → the number; else `default`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    name = node.attr if isinstance(node, ast.Attribute) else ""
    if name.startswith("HTTP_") and name[5:8].isdigit():
        return int(name[5:8])
    try:
        return http.HTTPStatus[name].value
    except KeyError:
        return default


class _Walker(ast.NodeVisitor):
    """The error answers of one module, with the function each is in."""

    def __init__(self) -> None:
        self.sites: list[ApiSite] = []
        self._functions: list[str] = []

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._functions.append(node.name)
        self.generic_visit(node)
        self._functions.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def _add(self, node: ast.AST, message: ast.expr | None, status: int, via: str) -> None:
        parts = message_parts(message) if message is not None else None
        if parts:
            self.sites.append(ApiSite(getattr(node, "lineno", 0), ".".join(self._functions),
                                      status, parts, via))

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        name = _call_name(node.func)
        if name in _RESPONDERS:
            message = node.args[0] if node.args else _keyword(node, "message")
            status = _status(_keyword(node, "status_code")
                             or (node.args[2] if len(node.args) > 2 else None), 400)
            self._add(node, message, status, f"{name}()")
        elif name == "ErrorResponse":
            self._add(node, _keyword(node, "message"),
                      _status(_keyword(node, "code"), 400), "ErrorResponse(message=…)")
        elif name == "HTTPException":
            detail = _keyword(node, "detail") or (node.args[1] if len(node.args) > 1 else None)
            status = _status(_keyword(node, "status_code") or (node.args[0] if node.args else None),
                             500)
            self._add(node, detail, status, "HTTPException(detail=…)")

    def visit_Return(self, node: ast.Return) -> None:
        self.generic_visit(node)
        if self._functions and self._functions[-1].endswith("_validate_request") \
                and node.value is not None:
            self._add(node, node.value, 400, "the request check's returned message")


def sites_of(text: str) -> list[ApiSite]:
    """The error answers of one module's source (none when it does not parse)."""
    if not any(sign in text for sign in _SIGNS):
        return []
    try:
        tree = ast.parse(text.removeprefix("\ufeff"))
    except (SyntaxError, ValueError):
        return []
    walker = _Walker()
    walker.visit(tree)
    return walker.sites


def message_template(parts: list[Part]) -> tuple[str, str] | None:
    """The site's template and anchored pattern; None when a record could not tell it from
    other text: a hole alone (`str(e)`), or too little literal text (as `extract.message_of`)."""
    parts = merge_literals(parts)
    if all(isinstance(p, Hole) or not p.strip() for p in parts):
        return None
    template = template_of(parts)
    pattern = pattern_of(parts, anchored=True)
    if not isinstance(check_pattern(pattern), int):
        return None
    if max(map(len, analyze(pattern).required_literals), default=0) < MIN_LITERAL_RUN:
        return None
    return template, pattern


def site_record(site: ApiSite, path: str, version: str) -> dict[str, Any] | None:
    made = message_template(site.parts)
    if made is None:
        return None
    template, pattern = made
    module = module_name(path)
    file_path = f"python/{path}"
    fn = f"`{site.function}()`" if site.function else "module-level code"
    return {
        "id": record_id(module, KIND, template),
        "repo": REPO,
        "slug": slugify(template.strip("'\"")) or slugify(module),
        "errorMessage": template,
        "messagePattern": pattern,
        "errorType": "response",
        "errorClass": None,
        "severity": "error" if site.status >= 500 else "warning",
        "filePath": file_path,
        "lineNumber": site.line,
        "githubUrl": f"{GITHUB}/blob/v{version}/{file_path}#L{site.line}",
        "documentation": (
            f"{fn} in sglang/{path.removeprefix('sglang/')}:{site.line} answers the request "
            f"with HTTP {site.status} and this message ({site.via}): the client sees it in the "
            "error body (`{\"object\": \"error\", \"message\": …}`), the server logs only the "
            "status."),
        "tags": ["sglang", "generated", "response", KIND,
                 *("client-error" if site.status < 500 else "server-error",)],
        "sglangVersions": [version],
        "schemaVersion": 2,
    }


def release_records(files: Iterable[tuple[str, str]], version: str) -> list[dict[str, Any]]:
    """One release's records, one per module and template (the first site's line)."""
    out: dict[str, dict[str, Any]] = {}
    for path, text in files:
        for site in sites_of(text):
            rec = site_record(site, path, version)
            if rec is not None and rec["id"] not in out:
                out[rec["id"]] = rec
    return list(out.values())


def build(wheels: Sequence[Path]) -> list[dict[str, Any]]:
    per_release: dict[str, list[dict[str, Any]]] = {}
    for wheel in wheels:
        source = read_wheel(wheel)
        version = source.version or wheel_version(wheel)
        per_release[version] = release_records(source.files, version)
    records = merge_releases(per_release)
    _remediate(records)
    return records


def _remediate(records: list[dict[str, Any]]) -> None:
    """Each record's fix as `catalog extract` gives it (`remedy.remediate_all`): in words, and
    the one its message states (`message_fix`) where the release's flags hold it."""
    from matcher.catalog import remedy
    from matcher.catalog.server_args import ServerArgsTable, default_path

    remedy.remediate_all(records, ServerArgsTable.load(default_path()))


def iter_jsonl(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    for r in records:
        yield json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS,
                    help="a directory of sglang wheels (sglang-*.whl)")
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    wheels = sorted(args.wheels.glob("sglang-*.whl"))
    if not wheels:
        print(f"no sglang wheels in {args.wheels}", file=sys.stderr)
        return 2
    records = build(wheels)
    args.output.write_text("".join(iter_jsonl(records)), encoding="utf-8")
    print(f"wrote {args.output}: {len(records)} records from {len(wheels)} releases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
