"""Which sglang the generated layer speaks for: every shipped version, one of them, or the
sglang installed next to us.

`patterns/sglang/generated/` holds one `sglang-<version>.jsonl` per release we extracted. A fleet
that runs one release picks it (`sglang_version = "0.5.23"`): fewer patterns, and every
`filePath`/`lineNumber` points into the code that actually runs. `"all"` (the default) merges
the shipped files: a raise site present in several releases is one record (its id does not
depend on the line number) whose `sglangVersions` lists them all and whose location is the
newest release's. `"installed"` extracts from the sglang importable in this Python environment
at start-up; the result is cached per sglang version and extractor code, so only the first
start pays the few seconds it takes.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from matcher.catalog.load import code_fingerprint, default_cache_dir
from matcher.catalog.schema import CatalogRecord

ALL = "all"
INSTALLED = "installed"
_FILE = re.compile(r"^sglang-(?P<version>.+)\.jsonl$")


class VersionError(Exception):
    """The requested sglang version has no catalog here; the message says what there is."""


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """`0.5.10` after `0.5.9`; a suffix (`rc1`) sorts after the release's digits."""
    return tuple((int(part), "") if part.isdigit() else (-1, part)
                 for part in re.findall(r"\d+|[A-Za-z]+", version))


def shipped_versions(generated_dir: Path) -> dict[str, Path]:
    """Version → its file, for every `sglang-<version>.jsonl` in the directory."""
    found = {}
    if generated_dir.is_dir():
        for path in generated_dir.iterdir():
            m = _FILE.match(path.name)
            if m:
                found[m.group("version")] = path
    return dict(sorted(found.items(), key=lambda kv: version_key(kv[0])))


def generated_paths(generated_dir: Path, version: str) -> list[Path]:
    """The files of the generated layer for a `sglang_version` setting (not "installed")."""
    shipped = shipped_versions(generated_dir)
    if version == ALL:
        return list(shipped.values())
    if version in shipped:
        return [shipped[version]]
    have = ", ".join(shipped) or "none"
    raise VersionError(
        f"no generated catalog for sglang {version} (shipped: {have}); set sglang_version to "
        f"one of those, to \"{ALL}\", or to \"{INSTALLED}\" to extract from the sglang installed "
        f"here, or run `sglang-matcher catalog extract --wheel sglang-{version}-*.whl -o FILE` "
        f"and give FILE as a catalog")


def installed_catalog(cache_dir: Path | None = None) -> Path:
    """A generated catalog of the sglang in this environment, extracted once and cached."""
    from matcher.catalog import extract

    try:
        package, version = extract.find_installed()
    except FileNotFoundError as e:
        raise VersionError(f"sglang_version = \"{INSTALLED}\": {e}") from e
    for name in ("_version.py", "version.py"):  # a checkout on the path has no metadata
        if version is None and (package / name).is_file():
            version = extract.version_in((package / name).read_text(errors="replace"))
    code = code_fingerprint("matcher.catalog.extract", "matcher.catalog.patterns")
    directory = cache_dir or default_cache_dir()
    safe = re.sub(r"[^\w.+-]", "_", version or "unknown")
    cached = directory / f"generated-sglang-{safe}-{code}.jsonl"
    if cached.is_file():
        return cached
    source = extract.read_tree(package)
    result = extract.extract_files(source.files, version=version or source.version or "unknown")
    text = "".join(extract.iter_jsonl(result.records))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".generated-", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, cached)
        return cached
    except OSError:
        # No writable cache dir: a fixed name in the temp dir, so restarts reuse it.
        fallback = Path(tempfile.gettempdir()) / cached.name
        fallback.write_text(text, encoding="utf-8")
        return fallback


def merge_versions(records: Sequence[CatalogRecord]) -> list[CatalogRecord]:
    """One record per id: the newest release's site, with every release's version listed."""
    by_id: dict[str, list[CatalogRecord]] = {}
    for r in records:
        by_id.setdefault(r.id, []).append(r)
    out = []
    for group in by_id.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        newest = max(group, key=lambda r: max((version_key(v) for v in r.sglang_versions),
                                              default=()))
        versions = sorted({v for r in group for v in r.sglang_versions}, key=version_key)
        out.append(dataclasses.replace(newest, sglang_versions=tuple(versions)))
    return out
