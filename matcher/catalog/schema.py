"""One catalog record, as the matcher uses it: the seed schema v2 plus our extension fields.

The record as read stays in `raw`, unknown fields included, so that what we write back out
(`explain`, `catalog extract`) loses nothing another consumer of the schema relies on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Layer = Literal["generated", "curated", "user"]
LAYER_RANK: dict[str, int] = {"generated": 0, "curated": 1, "user": 2}
SEVERITIES = ("critical", "error", "warning", "info")
ROLES = ("cause", "consequence")


@dataclass(frozen=True, slots=True)
class CatalogRecord:
    id: str
    message_pattern: str
    layer: Layer
    origin: str  # the file it was read from
    index: int  # its position in that file
    slug: str = ""
    error_message: str | None = None
    error_class: str | None = None
    error_type: str | None = None
    severity: str = "error"
    role: str = "cause"
    file_path: str | None = None
    line_number: int | None = None
    github_url: str | None = None
    documentation: str = ""
    trigger_scenarios: str = ""
    common_situations: str = ""
    solutions: tuple[str, ...] = ()
    example_fix: str | None = None
    prevention_tips: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    # Releases where the message exists: versions (`"0.5.23"`) or inclusive ranges
    # (`"0.4.0..0.4.3.post2"`, PEP 440 order), as `catalog extract` writes them.
    sglang_versions: tuple[str, ...] = ()
    # Where the site was in releases whose file or line differ from the top-level (newest) one:
    # (range, filePath, lineNumber, githubUrl) each.
    sglang_locations: tuple[tuple[str, str | None, int | None, str | None], ...] = ()
    examples_match: tuple[str, ...] = ()
    examples_no_match: tuple[str, ...] = ()
    literal_length: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def where(self) -> str:
        """`file: record N (id X)` — how errors and `explain` name this record."""
        return f"{self.origin}: record {self.index} (id {self.id})"

    @property
    def class_name(self) -> str | None:
        """The last dotted part of `errorClass`, the part compared with a log's class."""
        if not self.error_class:
            return None
        return self.error_class.rsplit(".", 1)[-1]

    def in_version(self, version: str) -> bool:
        """The message exists in this sglang release (True when the record names none)."""
        if not self.sglang_versions:
            return True
        from matcher.catalog.versions import in_ranges

        return in_ranges(version, self.sglang_versions)

    def location_for(self, version: str | None) -> tuple[str | None, int | None, str | None]:
        """(filePath, lineNumber, githubUrl) in this release: the location of the range that
        holds it, else the top-level one (the newest release's)."""
        if version is not None and self.sglang_locations:
            from matcher.catalog.versions import in_ranges

            for versions, file_path, line_number, github_url in self.sglang_locations:
                if in_ranges(version, (versions,)):
                    return file_path, line_number, github_url
        return self.file_path, self.line_number, self.github_url

    def remediation(self) -> dict[str, Any]:
        return {
            "documentation": self.documentation,
            "solutions": list(self.solutions),
            "example_fix": self.example_fix,
            "url": self.github_url,
        }
