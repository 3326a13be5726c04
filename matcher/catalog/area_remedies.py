"""What to do about sglang's PD-disaggregation failures, by rule over the generated records of
`srt/disaggregation/`: messages about the bootstrap server, about Mooncake's and Ascend's
transfer engines, and about a KV transfer that failed. No check there reads a flag, so the guard-based
derivation (`matcher.catalog.remedy`) gives them only pointers; what to do follows from how
sglang's PD disaggregation is set up (its guide, `docs/advanced_features/pd_disaggregation.md`):
the prefill server runs a bootstrap server on `--disaggregation-bootstrap-port` (8998 by
default) that the decode server and the router reach; Mooncake moves the KV cache over the RDMA
devices given with `--disaggregation-ib-device`; a transfer fails when that path does not carry
data or the peer died.

A rule names a flag only when every release that prints the message defines it
(`server-args.json.gz`); the words are added ahead of the record's pointers, no `fixActions`
(the device or address is the operator's to give). `catalog extract` applies it after the
guard derivation; `python -m matcher.catalog.area_remedies FILE` rewrites a written catalog.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.catalog import message_fix
from matcher.catalog.server_args import ServerArgsTable, default_path, flags_of
from matcher.catalog.versions import in_ranges
from matcher.catalog.wording import words

AREA_TAG = "area-remedy"


@dataclass(frozen=True, slots=True)
class AreaRule:
    name: str
    path: re.Pattern[str]  # the record's filePath
    message: re.Pattern[str]  # its errorMessage
    flags: tuple[str, ...]  # each must exist in every release that prints the message
    text: str


_RDMA_CHECK = ("check the RDMA path: `ibv_devices` must list the devices inside the container "
               "or pod, their ports ACTIVE (`ibstat`), `ib_write_bw` between the two nodes on "
               "them, and GPUDirect RDMA loaded (`lsmod | grep nvidia_peermem`)")

RULES: tuple[AreaRule, ...] = (
    AreaRule(
        "bootstrap-unreachable",
        re.compile(r"/srt/disaggregation/"),
        re.compile(r"(?i)bootstrap.*\b(?:connect|fetch|register|query)|"
                   r"(?:Could not|Error) fetch\w* prefill|(?:Lost|Losing) connection with prefill"),
        ("--disaggregation-bootstrap-port",),
        "The prefill server's bootstrap server (on the prefill's `--host`, port "
        "`--disaggregation-bootstrap-port`, 8998 by default) did not answer: check that the "
        "prefill server is up (its own log says why not), that it was started with `--host` an "
        "address the decode node reaches (not 127.0.0.1 across nodes) and the port is open "
        "between the nodes, and that the bootstrap port the router is given for that prefill "
        "(`--prefill URL PORT`) is that port; with Mooncake, also " + _RDMA_CHECK),
    AreaRule(
        "mooncake-engine",
        re.compile(r"/srt/disaggregation/mooncake/transfer_engine\.py$"),
        re.compile(r"(?i)initialization failed|(?<!de)registration failed|Return Error|"
                   r"ib_device|does not exist"),
        ("--disaggregation-ib-device",),
        "Mooncake's transfer engine could not start on, register memory with, or move data "
        "over the RDMA devices it was given: give `--disaggregation-ib-device` devices this "
        "node has (a comma-separated list such as `mlx5_0,mlx5_1`, or a JSON file mapping GPUs "
        "to devices), " + _RDMA_CHECK + "; memory registration also needs an unlimited "
        "locked-memory limit (`ulimit -l unlimited`, docker `--ulimit memlock=-1`)"),
    AreaRule(
        "kv-transfer-failed",
        re.compile(r"/srt/disaggregation/(?:mooncake/conn|decode|prefill|common/conn)\.py$"),
        re.compile(r"(?i)transfer (?:failed|thread failed)|Bulk RDMA transfer failed|"
                   r"it might be dead|is dead"),
        ("--disaggregation-ib-device",),
        "The KV cache did not move between prefill and decode: if the peer server died, its "
        "own log has the cause (restart it); otherwise give Mooncake RDMA devices that reach "
        "the peer (`--disaggregation-ib-device`) and " + _RDMA_CHECK),
    AreaRule(
        # the Ascend backend (`--disaggregation-transfer-backend ascend`) joins its transfer
        # engine through the MemFabric config store named by ASCEND_MF_STORE_URL, created by
        # the prefill server of node rank 0 (sglang's tokenizer manager, `create_config_store`);
        # unset or unreachable, `AscendTransferEngine.initialize` fails (sglang#22840).
        "ascend-engine",
        re.compile(r"/srt/disaggregation/ascend/transfer_engine\.py$"),
        re.compile(r"(?i)initialization failed"),
        (),
        "The Ascend transfer engine could not join the MemFabric config store: export "
        "`ASCEND_MF_STORE_URL=tcp://<IP of the first prefill server>:<free port>` with the same "
        "value on every prefill and decode server before starting them (the prefill server of "
        "node rank 0 creates the store there), and make that port reachable from every node; "
        "if it is set so, the MemFabric lines above this one say what else failed"),
)


def rule_for(record: dict[str, Any], rules: Sequence[AreaRule] = RULES) -> AreaRule | None:
    path = record.get("filePath") or ""
    message = record.get("errorMessage") or ""
    for rule in rules:
        if rule.path.search(path) and rule.message.search(message):
            return rule
    return None


def _flags_everywhere(flags: Sequence[str], versions: Sequence[str],
                      table: ServerArgsTable) -> bool:
    held = [v for v in table.releases if in_ranges(v, versions)]
    return bool(held) and all(f in flags_of(table.at(v).values()) for v in held for f in flags)


def apply(record: dict[str, Any], table: ServerArgsTable,
          rules: Sequence[AreaRule] = RULES, tag: str = AREA_TAG) -> bool:
    """Add the area's words ahead of a pointer-only record's (in place); True when it did.
    `rules` and `tag`: another area's (`matcher.catalog.quant_remedies`)."""
    guard = record.get("guard") or {}
    tags = record.get("tags") or []
    if tag in tags or record.get("fixActions") \
            or record.get("solutions") != words(record, guard.get("when")):
        return False
    rule = rule_for(record, rules)
    if rule is None or not _flags_everywhere(rule.flags, record.get("sglangVersions") or [],
                                              table):
        return False
    record["solutions"] = [rule.text, *record["solutions"]]
    record["tags"] = [*tags, tag]
    return True


def rewrite(path: Path, table: ServerArgsTable) -> int:
    """`apply` to the disaggregation records of a JSONL catalog file, rewriting only the lines
    it changes."""
    return message_fix.rewrite(path, table, rule=apply, lines_with="/srt/disaggregation/")


def run_cli(argv: Sequence[str] | None, prog: str, description: str,
            rewrite: Callable[[Path, ServerArgsTable], int]) -> int:
    """The command line of a remedy rule: `rewrite` each file given, saying how many changed."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--server-args", type=Path, default=None)
    args = p.parse_args(argv)
    table = ServerArgsTable.load(args.server_args or default_path())
    for f in args.files:
        print(f"{f}: {rewrite(f, table)} records given their rule's remedy", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(argv, "python -m matcher.catalog.area_remedies",
                   "give PD-disaggregation records what to do", rewrite)


if __name__ == "__main__":
    raise SystemExit(main())
