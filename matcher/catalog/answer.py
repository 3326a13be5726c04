"""What a computed remedy says for one event: why, what to do, and what to install.

Shared by the answers computed at event time (`mismatch`, `abi`), below both of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# What a closed vocabulary makes of an event's captures: (what it means, what to do or None),
# or None when the captures are not the vocabulary's.
Said = tuple[str, str | None] | None


@dataclass(frozen=True, slots=True)
class Answer:
    documentation: str
    solutions: tuple[str, ...]
    installs: tuple[str, ...]  # pip requirements, in the order of `solutions` they go with
    # The record's own words are wrong for this event (`pip install X` of a module pip cannot
    # install): only these are given.
    replaces: bool = False

    def remediation(self, base: dict[str, Any] | None = None) -> dict[str, Any]:
        """The event's `remediation`: these solutions first, then the record's own."""
        base = dict(base or {})
        if self.replaces:  # nor the record's account, install or example, which go with them
            for key in ("documentation", "fix_actions", "example_fix"):
                base.pop(key, None)
        own = [] if self.replaces else [
            s for s in base.get("solutions") or () if s not in self.solutions]
        out: dict[str, Any] = {
            **base,
            "documentation": self.documentation + (
                "\n\n" + base["documentation"] if base.get("documentation") else ""),
            "solutions": [*self.solutions, *own],
        }
        if self.installs:
            ways = [[{"op": "install", "value": req}] for req in self.installs]
            out["fix_actions"] = [*ways, *(base.get("fix_actions") or [])]
            out["example_fix"] = "pip install " + " ".join(f"'{r}'" for r in self.installs[:1])
        return out


def said_first(base: dict[str, Any] | None, meaning: str, what_to_do: str | None
               ) -> dict[str, Any]:
    """`base` (an event's remediation) with a closed vocabulary's answer ahead of its own words:
    what the captured value means before its documentation, what to do before its solutions."""
    base = base or {}
    solutions = [s for s in base.get("solutions") or () if s != what_to_do]
    documentation = base.get("documentation") or ""
    return {**base,
            "documentation": f"{meaning} {documentation}".strip(),
            "solutions": [what_to_do, *solutions] if what_to_do else solutions}


def answered_by(said: Callable[[dict[str, str]], Said]
                ) -> Callable[[dict[str, str], dict[str, Any] | None], dict[str, Any] | None]:
    """A vocabulary's `remediation(captures, remediation)`: the record's remediation with what
    `said` makes of the captures ahead of it (`said_first`); None when it makes nothing of them."""
    def remediation(captures: dict[str, str], base: dict[str, Any] | None
                    ) -> dict[str, Any] | None:
        found = said(captures)
        return None if found is None else said_first(base, *found)

    return remediation


def requires(package: str, containing: str = "") -> str:
    """The command that prints what `package` requires (pip show gives the names only)."""
    pick = f" if '{containing}' in r" if containing else ""
    return (f"python -c \"import importlib.metadata as m; print([r for r in m.requires('{package}')"
            f"{pick}])\"")
