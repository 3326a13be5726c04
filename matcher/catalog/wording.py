"""A generated record's fix in words, made from the record alone (catalog data layer).

`catalog extract` (through `remedy`) writes these words into a record's `solutions`; the loader
keeps words-only solutions out of memory and `CatalogRecord.how_to_fix` makes them again on
demand, word for word. Both need the same function, and the loader sits below the catalog tools,
so it lives here, next to the schema, and `remedy` imports it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

__all__ = ["ISSUES", "issue_search", "stable_head", "words"]

ISSUES = "https://github.com/sgl-project/sglang/issues"


def issue_search(head: str) -> str:
    """A search of sglang's issue tracker for a message's stable head."""
    return f"{ISSUES}?q={urllib.parse.quote_plus(f'is:issue {chr(34)}{head}{chr(34)}')}"


def stable_head(template: str | None, limit: int = 80) -> str | None:
    """The message's text before its first `{hole}`, if it says something (≥ 12 chars)."""
    if not template:
        return None
    head = template.split("{", 1)[0].strip().strip("'\":,.")
    head = head[:limit].rsplit(" ", 1)[0] if len(head) > limit else head
    return head if len(head) >= 12 else None


def words(record: Mapping[str, Any], when: str | None) -> list[str]:
    """The fix in words for a check no flag decides: what must hold, where, who saw it."""
    out = []
    if when:
        shown = when if len(when) <= 160 else when[:159] + "…"
        if record.get("errorType") == "assert":
            out.append(f"The check `{shown[5:-1] if shown.startswith('not (') else shown}` "
                       "must hold for this code path: read the source at this release for "
                       f"where its values come from ({record.get('githubUrl')}).")
        else:
            out.append(f"sglang fails here when `{shown}`: change what makes it true (the "
                       f"source at this release: {record.get('githubUrl')}).")
    else:
        out.append(f"Read the source at this release for what leads here: "
                   f"{record.get('githubUrl')}.")
    head = stable_head(record.get("errorMessage"))
    if head:
        out.append(f"Search sglang's issues for this message: {issue_search(head)}")
    return out
