"""sglang's client helper giving up on a server (`matcher.catalog.client_remedies`), on the line
a run of sglang 0.5.8.post1's own `wait_for_server` printed here (tests/fixtures/client)."""

from __future__ import annotations

import json
from pathlib import Path

import regex

from matcher.catalog import client_remedies
from matcher.catalog.server_args import ServerArgsTable, default_path

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "patterns" / "sglang" / "generated" / "sglang.jsonl"
LOG = ROOT / "tests" / "fixtures" / "client" / "wait-for-server-401.log"


def _record() -> dict[str, object]:
    for line in GENERATED.read_text(encoding="utf-8").splitlines():
        if "Server did not become ready" in line:
            return json.loads(line)
    raise AssertionError("no record of wait_for_server's timeout")


def test_the_timeout_line_gets_what_a_non_200_answer_means() -> None:
    record = _record()
    message = LOG.read_text(encoding="utf-8").splitlines()[-1].split(": ", 1)[1]
    assert regex.search(str(record["messagePattern"]), message)
    solutions = record["solutions"]
    assert isinstance(solutions, list)
    assert solutions[0].startswith("`wait_for_server` got an answer other than 200")
    assert "`--api-key`" in solutions[0] and "curl -i <base_url>/v1/models" in solutions[0]
    assert client_remedies.CLIENT_TAG in record["tags"]  # type: ignore[operator]


def test_the_rule_keeps_to_its_file_and_applies_once() -> None:
    table = ServerArgsTable.load(default_path())
    record = _record()
    assert not client_remedies.apply(dict(record), table)  # already given: not twice
    elsewhere = {**record, "filePath": "python/sglang/srt/server_args.py",
                 "tags": ["sglang", "generated", "raise"],
                 "solutions": record["solutions"][1:]}  # type: ignore[index]
    assert not client_remedies.apply(elsewhere, table)
    # the same pointer-only record at its own file is given the words
    own = {**elsewhere, "filePath": record["filePath"]}
    assert client_remedies.apply(own, table) and own["solutions"] == record["solutions"]
