"""The step an sglang message tells the operator to take, as the record's fix: "Please relaunch
with --enable-streaming-session", "Please use `--attention-backend flashinfer`", "Run without
--use-fsdp-inference".

Many of sglang's checks read no flag the guard-based derivation (`matcher.catalog.remedy`) can
prove a fix from, yet the message itself says what to do. A clause of the message that begins
with an imperative verb of launching or setting (`relaunch with`, `use`, `set`, `pass`, `run
without`, `specify` …, after an optional `please`) and names a flag is that step; the record
gets it in words, ahead of its pointers, no `fixActions` (the value is the message's, in
words). Flag-less advice, requirements stated as facts (`X requires --y`) and clauses with a
value the message fills at run time (`{…}`) are left out. A message that opens with the bound of a
flag (`--x must be a positive integer`, `… non-negative`, `… >= 1`, `… at least 2`) states the
fix too: give the flag a value within the bound, or leave it out when its default (read from the
table) is unset or within the bound.

A message can name a flag its release no longer has, so the step is taken only when the
argparse parser of every release that prints the message (`server-args.json.gz`) defines every
flag the clause names (`matcher.catalog.message_fix` does the same for the direction it
states). `catalog extract` applies it after the other rules; `python -m
matcher.catalog.message_advice FILE` rewrites a written catalog.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import area_remedies, message_fix
from matcher.catalog.server_args import ServerArgsTable, flags_of
from matcher.catalog.versions import in_ranges
from matcher.catalog.wording import words

ADVICE_TAG = "message-advice"
_FLAG = re.compile(r"--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# where a clause may start: the message's start, after a sentence, or after `please`
_CLAUSES = re.compile(r"(?<=[.;!?])\s+|\n+|,\s+(?=please\b)|:\s+(?=please\b)|\s+-\s+",
                      re.IGNORECASE)
_IMPERATIVE = re.compile(
    r"^(?:\d+\.\s+)?(?:to work around this error,\s+)?(?:please\s+)?(?P<clause>(?:(?:re)?launch|restart|start|run|use|set|pass|specify|add|"
    r"enable|disable|remove|drop|try|consider using)\b.*)$", re.IGNORECASE | re.DOTALL)


def advice(message: str | None) -> tuple[str, tuple[str, ...]] | None:
    """(the clause, the flags it names) of the first imperative clause naming a flag."""
    if not message or "--" not in message:
        return None
    for part in _CLAUSES.split(message):
        m = _IMPERATIVE.match(part.strip().strip("`'\""))
        if m is None or "{" in m["clause"]:
            continue
        flags = tuple(dict.fromkeys(_FLAG.findall(m["clause"])))
        if flags:
            clause = m["clause"].strip()
            return clause[0].upper() + clause[1:], flags
    return None


# The bound a message states for the flag it opens with; a bound naming another flag is left out.
_BOUND = re.compile(
    r"^[`'\"]?(?P<flag>--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)[`'\"]? must be (?P<bound>"
    r"(?:a )?(?:positive|non-negative)(?: integer| number| value)?"
    r"|(?:>=|>|at least|greater than or equal to|greater than) (?P<n>-?\d+(?:\.\d+)?))(?=[\s.,;:(]|$)")


def bound_advice(message: str | None) -> tuple[str, str, float, bool] | None:
    """(flag, the bound in words, its limit, whether the limit itself is allowed) when the
    message opens with the bound of a flag."""
    m = _BOUND.match((message or "").strip())
    if m is None:
        return None
    bound = m["bound"]
    if m["n"] is not None:
        return m["flag"], bound, float(m["n"]), not bound.startswith((">", "greater than")) \
            or bound.startswith((">=", "greater than or equal"))
    return m["flag"], bound, 0.0, "non-negative" in bound


def _within(value: Any, limit: float, inclusive: bool) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return number >= limit if inclusive else number > limit


def _bound_solution(record: dict[str, Any], table: ServerArgsTable) -> str | None:
    """The fix of a message that states a flag's bound, when every release that prints it
    defines the flag; the default is offered when it is unset or within the bound in all."""
    found = bound_advice(record.get("errorMessage"))
    versions = record.get("sglangVersions") or []
    if found is None or not _flags_everywhere((found[0],), versions, table):
        return None
    flag, bound, limit, inclusive = found
    defaults = {flags_of(table.at(v).values())[flag].default
                for v in table.releases if in_ranges(v, versions)}
    text = f"Give `{flag}` a value that is {bound}, as the message says"
    if defaults == {None}:
        return text + f", or leave `{flag}` out of the launch command (it has no default value)."
    if all(_within(d, limit, inclusive) for d in defaults):
        shown = ", ".join(str(d) for d in sorted(defaults, key=str))
        return text + f", or leave `{flag}` out of the launch command (its default is {shown})."
    return text + "."


def _flags_everywhere(flags: Sequence[str], versions: Sequence[str],
                      table: ServerArgsTable) -> bool:
    held = [v for v in table.releases if in_ranges(v, versions)]
    return bool(held) and all(f in flags_of(table.at(v).values()) for v in held for f in flags)


def apply(record: dict[str, Any], table: ServerArgsTable) -> bool:
    """Put the message's step ahead of a pointer-only record's words (in place); True when it
    did."""
    guard = record.get("guard") or {}
    tags = record.get("tags") or []
    if ADVICE_TAG in tags or record.get("fixActions") \
            or record.get("solutions") != words(record, guard.get("when")):
        return False
    found = advice(record.get("errorMessage"))
    step: str | None
    if found is not None and _flags_everywhere(found[1], record.get("sglangVersions") or [],
                                               table):
        step = f"Do what the message says: {found[0].rstrip('.;:, ')}."
    else:
        step = _bound_solution(record, table)
    if step is None:
        return False
    record["solutions"] = [step, *record["solutions"]]
    record["tags"] = [*tags, ADVICE_TAG]
    return True


def rewrite(path: Path, table: ServerArgsTable) -> int:
    """`apply` to the records of a JSONL catalog file whose line names a flag, rewriting only
    the lines it changes."""
    return message_fix.rewrite(path, table, rule=apply, lines_with="--")


def main(argv: Sequence[str] | None = None) -> int:
    return area_remedies.run_cli(argv, "python -m matcher.catalog.message_advice",
                                 "give records the step their message states", rewrite)


if __name__ == "__main__":
    raise SystemExit(main())
