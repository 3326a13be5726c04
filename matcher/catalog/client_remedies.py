"""What to do when sglang's client helpers give up waiting for a server, by rule over the
generated records of `sglang/utils.py`.

`wait_for_server(base_url, timeout)` (the helper sglang's docs and notebooks launch servers
with) polls `GET {base_url}/v1/models` with the header `Authorization: Bearer None`: a refused
connection only makes it wait again, and its timeout is checked only after an answer that is
not 200. So `Server did not become ready within timeout period` says something answered on that
port, with another status, for the whole timeout: an sglang server started with `--api-key`
(its key check answers 401 to `Bearer None`), or another service holding the port. The guard
(`timeout and … > timeout`) reads no flag, so the guard-based derivation gives only pointers.

Words ahead of the pointers, no `fixActions`; a flag is named only where every release that
prints the message defines it (`matcher.catalog.area_remedies`, whose mechanism this reuses).
`catalog extract` applies it; `python -m matcher.catalog.client_remedies FILE` rewrites a
written catalog.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import area_remedies, message_fix
from matcher.catalog.area_remedies import AreaRule
from matcher.catalog.server_args import ServerArgsTable

CLIENT_TAG = "client-remedy"

RULES: tuple[AreaRule, ...] = (
    AreaRule(
        "wait-for-server-non-200",
        re.compile(r"(?:^|/)sglang/utils\.py$"),
        re.compile(r"^Server did not become ready within timeout period"),
        ("--api-key",),
        "`wait_for_server` got an answer other than 200 from `GET <base_url>/v1/models` for the "
        "whole timeout (a server not listening yet only makes it wait): see the answer with "
        "`curl -i <base_url>/v1/models`. 401: the server was started with `--api-key`, and the "
        "helper sends `Bearer None` — start it without `--api-key` for this helper, or poll "
        "`/v1/models` with your key yourself; another status: the port is another service's "
        "(or another server's) — launch sglang on a free `--port` and pass that base_url"),
)


def apply(record: dict[str, Any], table: ServerArgsTable) -> bool:
    """Add the rule's words ahead of a pointer-only record's (in place); True when it did."""
    return area_remedies.apply(record, table, RULES, CLIENT_TAG)


def rewrite(path: Path, table: ServerArgsTable) -> int:
    """`apply` to the records of sglang/utils.py in a JSONL catalog file, rewriting only the
    lines it changes."""
    return message_fix.rewrite(path, table, rule=apply, lines_with="sglang/utils.py")


def main(argv: Sequence[str] | None = None) -> int:
    return area_remedies.run_cli(argv, "python -m matcher.catalog.client_remedies",
                                 "give sglang's client-helper records what to do", rewrite)


if __name__ == "__main__":
    raise SystemExit(main())
