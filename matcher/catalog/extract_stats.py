"""What extraction saw and why a site gave no record: the skip reasons, `Stats` (counts by
site kind and by reason), `Extraction` (records with their stats) and the stats file's TOML."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from matcher.catalog.extract_templates import MIN_LITERAL_RUN

# The key under which `Stats.covered` and `Stats.records` count frame records (the sites are
# counted under "raise" and "assert" in `Stats.sites`, as every site is).
FRAME = "frame"


# Skip reasons, as printed by `catalog extract` and kept in the stats file.
NO_MESSAGE = "no message"  # a logger call without arguments; a bare raise or assert is a frame
RERAISE = "re-raise of an existing exception"
CALL_RESULT = "raises what a function returns"
NOT_TEMPLATE = "message is not a string template (variable, call, tuple)"
KEYWORD_ONLY = "message only in keyword arguments"
SEVERAL_ARGS = "several arguments (printed as a tuple)"
TOO_VAGUE = "too little literal text (under 8 characters, the loader's minimum)"
MOSTLY_HOLES = f"mostly holes (no literal run of {MIN_LITERAL_RUN} characters)"
DUPLICATE = "same message as an earlier site in the module (merged into its record)"
PARAMETER = ("message made of its function's parameters (a helper's: read at each call, "
             "with the message passed)")
DUPLICATE_FRAME = ("same frame (function and source line) as an earlier bare site in the module "
                   "(merged into its record)")


@dataclass(frozen=True, slots=True)
class Stats:
    """What extraction saw: counts by site kind, and why sites gave no record.

    A bare raise or assert is a "raise" or "assert" site, without a message; the frame record it
    gives is counted under "frame" in `covered` and `records`, so "raise" and "assert" there
    stay the message records that `coverage` is about.
    """

    files: int = 0
    sites: Mapping[str, int] = field(default_factory=dict)  # kind → sites seen
    with_message: Mapping[str, int] = field(default_factory=dict)  # kind → string-message sites
    covered: Mapping[str, int] = field(default_factory=dict)  # kind or "frame" → sites recognized
    records: Mapping[str, int] = field(default_factory=dict)  # kind or "frame" → records made
    skipped: Mapping[str, int] = field(default_factory=dict)  # reason → sites
    files_skipped: Mapping[str, int] = field(default_factory=dict)  # reason → files

    def __add__(self, other: Stats) -> Stats:
        def add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
            return dict(sorted((Counter(a) + Counter(b)).items()))
        return Stats(self.files + other.files, add(self.sites, other.sites),
                     add(self.with_message, other.with_message), add(self.covered, other.covered),
                     add(self.records, other.records), add(self.skipped, other.skipped),
                     add(self.files_skipped, other.files_skipped))

    @property
    def coverage(self) -> float:
        """Share of raise/assert sites with a string message that a record recognizes."""
        n = sum(self.with_message.get(k, 0) for k in ("raise", "assert"))
        got = sum(self.covered.get(k, 0) for k in ("raise", "assert"))
        return got / n if n else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "sites": dict(self.sites),
            "sites_with_string_message": dict(self.with_message),
            "sites_covered": dict(self.covered),
            "records": dict(self.records),
            "skipped": dict(self.skipped),
            "files_skipped": dict(self.files_skipped),
            "coverage": round(self.coverage, 4),
        }


@dataclass(frozen=True, slots=True)
class Extraction:
    records: tuple[dict[str, Any], ...]
    stats: Stats

    def without(self, ids: Iterable[str], reason: str) -> Extraction:
        """These records left out, and counted under `reason`."""
        drop = set(ids)
        gone = Counter(record_kind(r) for r in self.records if r["id"] in drop)
        st = self.stats
        return Extraction(
            tuple(r for r in self.records if r["id"] not in drop),
            Stats(st.files, st.sites, st.with_message, st.covered,
                  {k: n - gone.get(k, 0) for k, n in st.records.items()},
                  {**st.skipped, reason: sum(gone.values())} if gone else st.skipped,
                  st.files_skipped),
        )


def record_kind(record: Mapping[str, Any]) -> str:
    """The key a record is counted under in `Stats.records`: "frame", or its `errorType`."""
    return FRAME if "raisedIn" in record else record["errorType"]


def stats_toml(stats: Stats, *, version: str, source: str) -> str:
    """The stats as TOML (a suffix the catalog loader does not read)."""
    import json  # a JSON string is a TOML basic string

    def table(name: str, values: Mapping[str, int]) -> list[str]:
        return [f"\n[{name}]"] + [f"{json.dumps(k)} = {v}" for k, v in values.items()]

    lines = [
        ("# written by `sglang-matcher catalog extract`; coverage = sites_covered / "
         "sites_with_string_message over raise and assert sites; \"frame\": bare raise and "
         "assert sites (no message), recognized by their traceback frame"),
        f"sglang_version = {json.dumps(version)}",
        f"source = {json.dumps(source)}",
        f"files = {stats.files}",
        f"coverage = {round(stats.coverage, 4)}",
    ]
    lines += table("sites", stats.sites)
    lines += table("sites_with_string_message", stats.with_message)
    lines += table("sites_covered", stats.covered)
    lines += table("records", stats.records)
    lines += table("skipped", stats.skipped)
    lines += table("files_skipped", stats.files_skipped)
    return "\n".join(lines) + "\n"
