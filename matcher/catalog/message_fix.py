"""The fix an sglang message states itself: "try to increase --mem-fraction-static", "Please set
a smaller number for `--max-running-requests`", "increase --hicache-size or --hicache-ratio".

sglang's own messages often name the server argument to change and the direction, when the
check that raised them reads no flag (`self.max_total_num_tokens <= 0`), so the guard-based
derivation (`matcher.catalog.remedy`) proves nothing for them and the record used to carry only
pointers. A message that puts a direction word right before a flag — with at most a few
function words between (`a smaller number for`) — gets that flag set higher or lower than its
current value, one way per flag the message offers (`--a or --b`); `sglang-matcher fix`
computes the new value from the launch command (`matcher.fix`). A direction word elsewhere in
the sentence (`pick a lower tier or a higher --resolution-scale`) counts only for the flag
right after it.

A message can name a flag its release no longer has (0.5.23's MegaMoE check says
`--cuda-graph-max-bs`, which 0.5.23 renamed `--cuda-graph-max-bs-decode`), so a flag is taken
only when the argparse parser of every release that prints the message (`server-args.json.gz`)
defines it and it takes a number; records of releases the table does not hold (before 0.4.0,
and the diffusion server's own flags in `multimodal_gen`) keep their words.

`catalog extract` applies it after the guard-based derivation (`remedy.remediate_all`); for a
catalog file already written, `python -m matcher.catalog.message_fix FILE` rewrites the records
it applies to in place (the other lines byte for byte as they were).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matcher.catalog.schema import STATED_TAG, FixAction
from matcher.catalog.server_args import ServerArgsTable, default_path, flags_of
from matcher.catalog.versions import in_ranges
from matcher.catalog.wording import words

_UP = r"increase|raise|enlarge|larger|higher|bigger|greater"
_DOWN = r"decrease|lower|reduce|smaller|fewer"
_FILLER = r"(?:\s+(?:the|your|a|an|its|value|values|number|numbers|size|of|for|to|via|with))*"
_FLAG = r"[`'\"]?--(?P<{name}>[a-z][a-z0-9]*(?:-[a-z0-9]+)*)[`'\"]?"
_STATED = re.compile(
    rf"\b(?P<dir>{_UP}|{_DOWN})\b{_FILLER}\s+{_FLAG.format(name='flag')}"
    rf"(?P<more>(?:\s*(?:,|or|and/or)\s+{_FLAG.format(name='other')})*)", re.IGNORECASE)
_MORE = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")
_IS_UP = re.compile(rf"^(?:{_UP})$", re.IGNORECASE)


def stated_fix(message: str | None, keep: Mapping[str, Any] | set[str] | None = None
               ) -> tuple[str, tuple[tuple[FixAction, ...], ...]] | None:
    """(the solution in words, one way per flag) when the message says to raise or lower a
    flag, else None; `keep`: only these flags (`--x`)."""
    if not message or "--" not in message:
        return None
    m = _STATED.search(message)
    if m is None:
        return None
    up = bool(_IS_UP.match(m.group("dir")))
    flags = [f for f in dict.fromkeys([m.group("flag"), *_MORE.findall(m.group("more") or "")])
             if keep is None or f"--{f}" in keep]
    if not flags:
        return None
    value = "<higher than the current value>" if up else "<lower than the current value>"
    ways = tuple((FixAction("set", f"--{f}", value),) for f in flags)
    listed = " or ".join(f"`--{f}`" for f in flags)
    text = (f"Set {listed} {'higher' if up else 'lower'} than its current value, as the message "
            "says (`sglang-matcher fix` computes a value from the launch command)")
    return text, ways


def _numeric_everywhere(flag: str, versions: Sequence[str], table: ServerArgsTable) -> bool:
    """Every release of `versions` (ranges) that the table read defines `flag`, taking a
    number; and at least one such release exists."""
    held = [v for v in table.releases if in_ranges(v, versions)]
    for version in held:
        spec = flags_of(table.at(version).values()).get(flag)
        if spec is None or spec.type not in ("int", "float"):
            return False
    return bool(held)


def apply(record: dict[str, Any], table: ServerArgsTable) -> bool:
    """Give a generated record whose fix is only words the fix its message states (in place);
    True when it did. A record with `fixActions`, or hand-written solutions, is left alone."""
    guard = record.get("guard") or {}
    if STATED_TAG in (record.get("tags") or []):  # applied already: the same again
        return False
    if record.get("fixActions") or record.get("solutions") != words(record, guard.get("when")):
        return False
    stated = stated_fix(record.get("errorMessage"))
    if stated is None:
        return False
    versions = record.get("sglangVersions") or []
    ways = [w for w in stated[1] if _numeric_everywhere(w[0].flag or "", versions, table)]
    if not ways:
        return False
    if len(ways) < len(stated[1]):  # the words name only the flags kept
        stated = stated_fix(record.get("errorMessage"), keep={w[0].flag or "" for w in ways}) \
            or stated
    record["solutions"] = [stated[0], *record["solutions"]]
    record["fixActions"] = [[a.as_dict() for a in way] for way in ways]
    record["tags"] = [*(record.get("tags") or []), STATED_TAG]
    return True


def rewrite(path: Path, table: ServerArgsTable, *,
            rule: Callable[[dict[str, Any], ServerArgsTable], bool] | None = None,
            lines_with: str = "--") -> int:
    """`rule` (this module's `apply` by default) on every record of a JSONL catalog file on a
    line holding `lines_with`, rewriting only the lines it changes; how many it changed."""
    rule = rule or apply
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    changed = 0
    for i, line in enumerate(lines):
        if lines_with not in line:
            continue
        record = json.loads(line)
        if rule(record, table):
            lines[i] = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
            changed += 1
    path.write_text("".join(lines), encoding="utf-8")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m matcher.catalog.message_fix",
                                description="give generated records the fix their message states")
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--server-args", type=Path, default=None,
                   help="the table of server arguments (default: the shipped one)")
    args = p.parse_args(argv)
    table = ServerArgsTable.load(args.server_args or default_path())
    for f in args.files:
        print(f"{f}: {rewrite(f, table)} records given the fix their message states",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
