"""A failure's fix applied to the command that failed: `sglang-matcher fix`.

A catalog record's `fixActions` are its ways out, each a sequence of steps (`FixAction`):
remove a flag, add a switch, set a flag's value, set an environment variable, install a
package. `apply` performs one way on a launch command given as its words (`argv`) and says what
changed. Pure: nothing here runs the command or installs anything.

Ways are ranked by what they change: a way that changes the resource or the flag the failure
names comes before one that changes what the model computes (`--quantization`, `--dtype`,
`--kv-cache-dtype`, a shorter `--context-length`), which is offered last and says so. A value
left to choose ("higher than the current value") is computed when the command gives the
current one: halfway to the top of the flag's range for "higher", a fifth less for "lower",
twice the count for "more GPUs", each with a note saying how it was chosen.

How a command is read, as argparse reads sglang's: words before the first `--flag` are the
program (`python -m sglang.launch_server`, or `NAME=value` assignments and then the program); a
flag's value is written `--flag=v` or as the words after it up to the next `--flag` (a
`--cuda-graph-bs 1 2 4` list included). A flag is known by any of its spellings (`aliases`).
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from matcher.catalog.schema import FixAction

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True, slots=True)
class Fixed:
    """A command after one way out: its words, what was taken out and put in, what to run
    before it (`pip install …`), and whether a value is left for the operator to choose."""

    argv: tuple[str, ...]
    removed: tuple[str, ...]
    added: tuple[str, ...]
    before: tuple[str, ...]
    placeholders: tuple[str, ...]
    steps: tuple[str, ...]
    notes: tuple[str, ...] = ()  # how a value left to choose was computed
    changes_model: bool = False  # it changes what the model computes (offered last)

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    @property
    def changes(self) -> bool:
        """It does something: a word out, a word in, or a command to run first."""
        return bool(self.removed or self.added or self.before)


def _split(argv: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """The words before the first flag, and each flag with its value words."""
    head: list[str] = []
    groups: list[list[str]] = []
    for word in argv:
        if word.startswith("--") and len(word) > 2:
            groups.append([word])
        elif groups:
            groups[-1].append(word)
        else:
            head.append(word)
    return head, groups


def _name(group: list[str]) -> str:
    return group[0].split("=", 1)[0]


class NeedsCaptures(ValueError):
    """A step names a flag by a capture (`{arguments}`) and the failure's captures lack it."""


_CAPTURE = re.compile(r"\{([A-Za-z_]\w*)\}")


def _resolve(step: FixAction, captures: dict[str, str]) -> list[FixAction]:
    """A step whose flag is a capture (`{argument}`: argparse's `--tp-size/--tensor-parallel-
    size`; `{arguments}`: `--a --b`) as steps on the flags the log named."""
    m = _CAPTURE.fullmatch(step.flag or "")
    if m is None:
        return [step]
    text = captures.get(m.group(1))
    if not text:
        raise NeedsCaptures(f"{step.describe()}: the flag is the failure's {m.group(1)!r}: "
                            "give the log of the failure (--log)")
    out = []
    for word in text.split():
        names = [n for n in word.split("/") if n.startswith("-")]
        if names:
            out.append(FixAction(step.op, names[0], step.value, (*names[1:], *step.aliases),
                                 step.one_of, step.range, step.name))
    return out


def resolved(way: Sequence[FixAction], captures: dict[str, str] | None = None
             ) -> list[FixAction]:
    """A way's steps with each flag named by a capture replaced by the flags the log names
    (NeedsCaptures when the failure's captures lack it)."""
    return [s for step in way for s in _resolve(step, captures or {})]


# Flags whose change alters what the model computes, not what it is given to run on.
MODEL_CHANGING = frozenset({"--quantization", "--dtype", "--kv-cache-dtype", "--context-length"})
_HIGHER = re.compile(r"\b(?:higher|larger|more|increase|raise)\b", re.IGNORECASE)
_LOWER = re.compile(r"\b(?:lower|smaller|fewer|less|decrease|reduce)\b", re.IGNORECASE)
_RANGE_TOP = re.compile(r"[,\s](?P<top>\d+(?:\.\d+)?)\s*[\])]\s*$")


def _concrete(step: FixAction, groups: list[list[str]]) -> tuple[FixAction, str] | None:
    """A value left to choose relative to the current one, computed from the command's
    current value (None: no numeric current value, or no direction said)."""
    if step.op != "set" or not step.placeholder or not step.flag:
        return None
    names = {step.flag, *step.aliases}
    current = next((g[1] for g in groups if _name(g) in names and len(g) == 2), None)
    if current is None:
        return None
    try:
        now = float(current)
    except ValueError:
        return None
    text = step.value or ""
    whole = "." not in current
    if _HIGHER.search(text):
        if whole:
            value, how = str(int(now) * 2 if now >= 1 else 1), "twice the current value"
        else:
            m = _RANGE_TOP.search(step.range or "")
            top = float(m.group("top")) if m else 1.0
            value = f"{min(now + (top - now) / 2, top - 0.01):.2f}"
            how = f"halfway from the current value to the top of its range ({m.group('top') if m else '1'})"
    elif _LOWER.search(text):
        if whole:
            value, how = str(max(1, int(now * 0.8))), "a fifth less than the current value"
        else:
            value, how = f"{now * 0.8:.2f}", "a fifth less than the current value"
    else:
        return None
    if value == current:
        return None
    note = f"{step.flag} {current} → {value}: {how}"
    return FixAction(step.op, step.flag, value, step.aliases, step.one_of, step.range,
                     step.name), note


def _with_current_values(way: Sequence[FixAction], groups: list[list[str]]
                         ) -> tuple[list[FixAction], list[str]]:
    """The way's steps with each value left to choose computed from the command's current
    value where it can be (`_concrete`), and the notes saying how each was computed."""
    steps: list[FixAction] = []
    notes: list[str] = []
    for step in way:
        computed = _concrete(step, groups)
        if computed is not None:
            step, note = computed
            notes.append(note)
        steps.append(step)
    return steps, notes


def _set_flag(groups: list[list[str]], step: FixAction, names: set[str],
              removed: list[str], added: list[str]) -> list[list[str]]:
    """`groups` with the flag of a `set` step given its value: in place of its first
    occurrence (a later one dropped), else appended; what changed goes to `removed`/`added`."""
    new = [step.flag or "", step.value or ""]
    found = [i for i, g in enumerate(groups) if _name(g) in names]
    for i in found[1:]:  # a flag given twice: argparse keeps the last; keep one
        removed.append(shlex.join(groups[i]))
    if not found:
        added.append(shlex.join(new))
        return [*groups, new]
    old = groups[found[0]]
    if old != new:
        removed.append(shlex.join(old))
        added.append(shlex.join(new))
    groups = [g for i, g in enumerate(groups) if i not in found[1:]]
    groups[found[0]] = new
    return groups


def _set_env(head: list[str], step: FixAction, removed: list[str],
             added: list[str]) -> list[str]:
    """The words before the flags with an `env` step's `NAME=value` among the leading
    assignments, and any other value of that name taken out; changes go to `removed`/`added`."""
    assignment = f"{step.name}={step.value}"
    kept = [w for w in head if not w.startswith(f"{step.name}=")]
    removed += [w for w in head if w.startswith(f"{step.name}=") and w != assignment]
    if assignment not in head:
        added.append(assignment)
    lead = 0
    while lead < len(kept) and _ASSIGNMENT.match(kept[lead]):
        lead += 1
    return kept[:lead] + ([assignment] if assignment not in kept else []) + kept[lead:]


def apply(argv: Sequence[str], way: Sequence[FixAction],
          captures: dict[str, str] | None = None) -> Fixed:
    """`argv` with the steps of one way out performed, in order; `captures`: the failure's,
    for steps that name their flag by a capture."""
    head, groups = _split(argv)
    steps, notes = _with_current_values(resolved(way, captures), groups)
    removed: list[str] = []
    added: list[str] = []
    before: list[str] = []
    placeholders: list[str] = []
    for step in steps:
        names = {step.flag, *step.aliases} if step.flag else set()
        if step.op == "remove":
            for group in [g for g in groups if _name(g) in names]:
                groups.remove(group)
                removed.append(shlex.join(group))
        elif step.op == "add":
            if not any(_name(g) in names for g in groups):
                groups.append([step.flag or ""])
                added.append(step.flag or "")
        elif step.op == "set":
            groups = _set_flag(groups, step, names, removed, added)
            if step.placeholder:
                placeholders.append(f"{step.flag} {step.value or ''}")
        elif step.op == "env":
            head = _set_env(head, step, removed, added)
        elif step.op == "install":
            before.append(f"pip install {shlex.quote(step.value or '')}")
    out = tuple(head + [w for g in groups for w in g])
    changes_model = any(s.flag in MODEL_CHANGING or bool(set(s.aliases) & MODEL_CHANGING)
                        for s in steps if s.op in ("set", "add"))
    return Fixed(out, tuple(removed), tuple(added), tuple(before), tuple(placeholders),
                 tuple(s.describe() for s in steps), tuple(notes), changes_model)


def choose(argv: Sequence[str], ways: Sequence[Sequence[FixAction]],
           captures: dict[str, str] | None = None) -> tuple[int, Fixed]:
    """The way to offer first for this command (its 1-based number, and the result): of the
    ways that change the command, those that keep what the model computes first, and among
    them the first that leaves nothing to fill in; else the first way. A derived record lists one way per flag; the one to take is the one on a
    flag this command gives (`remove --x` does nothing to a command without `--x`).
    NeedsCaptures when the first way names its flag by a capture the failure lacks."""
    results: list[tuple[int, Fixed]] = []
    for n, way in enumerate(ways, 1):
        with contextlib.suppress(NeedsCaptures):
            results.append((n, apply(argv, way, captures)))
    if not results:
        return 1, apply(argv, ways[0], captures)  # raises NeedsCaptures, with its message
    changing = [(n, f) for n, f in results if f.changes]
    if changing:
        return min(changing, key=lambda nf: (nf[1].changes_model, bool(nf[1].placeholders),
                                             nf[0]))
    return results[0]
