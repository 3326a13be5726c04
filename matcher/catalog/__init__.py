"""The catalog: records loaded from layers, later layers overriding earlier ones.

Layers are `generated` (from sglang's source), `curated` (ours, with remediation) and `user`
(directories from config). A later layer replaces an earlier record with the same `id`, or with
the same `errorMessage` template — so a curated record takes over the generated record of the
raise site it describes, and one log line never counts twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matcher import cache
from matcher.cache import default_cache_dir
from matcher.catalog import versions
from matcher.catalog.layers import builtin_patterns_dir, merge_layers
from matcher.catalog.load import (
    CatalogError,
    CatalogIssue,
    LoadResult,
    PatternFactsCache,
    fields_text,
    load_paths,
)
from matcher.catalog.schema import LAYER_RANK, CatalogRecord, Layer

__all__ = [
    "Catalog",
    "CatalogError",
    "CatalogIssue",
    "CatalogRecord",
    "builtin_patterns_dir",
    "default_cache_dir",
    "load_catalog",
    "merge_layers",
]


@dataclass(frozen=True, slots=True)
class Catalog:
    records: tuple[CatalogRecord, ...]
    issues: tuple[CatalogIssue, ...]
    version: str  # content hash of the merged records: changes whenever matching can change
    files: tuple[str, ...]
    # The precompiled built-in catalog (`matcher.precompiled`): "used", or why not ("" when
    # the built-in catalog was not asked for every release).
    precompiled: str = ""

    def by_id(self, record_id: str) -> CatalogRecord | None:
        for r in self.records:
            if r.id == record_id:
                return r
        return None

    def count_by_layer(self) -> dict[str, int]:
        counts = dict.fromkeys(LAYER_RANK, 0)
        for r in self.records:
            counts[r.layer] += 1
        return counts




def load_catalog(
    *,
    builtin: bool = True,
    generated: bool = True,
    user_paths: Sequence[Path] = (),
    builtin_dir: Path | None = None,
    sglang_version: str = versions.ALL,
    installed_cache_dir: Path | None = None,
    precompiled_dir: Path | None = None,
    precompiled: bool = True,
) -> Catalog:
    """Load the built-in layers and the user's paths; issues are returned, not raised.

    `sglang_version` picks the generated layer: "all" (every release it covers), one release
    (only the records whose `sglangVersions` ranges hold it), or "installed" (extracted from
    the sglang in this environment, cached in `installed_cache_dir`, else in the application's
    cache directory (`matcher.cache`), else the temporary directory); see `versions`.

    The built-in catalog of every release comes precompiled (`matcher.precompiled`, from
    `precompiled_dir` or the package's) when the artifact fits its files and this code.
    """
    base = builtin_dir or builtin_patterns_dir()
    store, note = None, ""
    if precompiled and builtin and generated and sglang_version == versions.ALL:
        from matcher.precompiled import load

        store, note = load(base, precompiled_dir)
    results = [LoadResult(store.records, (), store.files)] if store is not None else []
    layers, problems = _layers_to_read(
        base, builtin=builtin and store is None, generated=generated, user_paths=user_paths,
        sglang_version=sglang_version, installed_cache_dir=installed_cache_dir)
    results += problems
    results.extend(_read_layers(layers, sglang_version))
    loaded = [r for res in results for r in res.records]
    records: tuple[CatalogRecord, ...]
    if store is not None and len(loaded) == len(store.records):  # merged when it was built
        records, version = store.records, store.version
    else:
        records = merge_layers(loaded)
        version = _version(records)
    return Catalog(
        records=records,
        issues=tuple(i for res in results for i in res.issues),
        version=version,
        files=tuple(f for res in results for f in res.files),
        precompiled=note,
    )


def _layers_to_read(
    base: Path, *, builtin: bool, generated: bool, user_paths: Sequence[Path],
    sglang_version: str, installed_cache_dir: Path | None,
) -> tuple[list[tuple[Layer, list[Path]]], list[LoadResult]]:
    """The layers to read from files, in order (`builtin`: the built-in catalog did not come
    precompiled), and the results that say why the generated layer has no files."""
    layers: list[tuple[Layer, list[Path]]] = []
    problems: list[LoadResult] = []
    if builtin and generated:
        found, problem = _generated_paths(base, sglang_version, installed_cache_dir)
        if problem is not None:
            problems.append(problem)
        if found:
            layers.append(("generated", found))
    if builtin:
        layers.append(("curated", [base / "sglang" / "curated"]))
    if user_paths:
        layers.append(("user", list(user_paths)))
    return layers, problems


def _generated_paths(base: Path, sglang_version: str,
                     installed_cache_dir: Path | None) -> tuple[list[Path], LoadResult | None]:
    """The generated layer's files for `sglang_version`, or why there are none (a result
    holding the issue)."""
    try:
        if sglang_version == versions.INSTALLED:
            # A catalog tool (it runs the extractor): imported only when asked for.
            from matcher.catalog.installed import installed_catalog

            return [installed_catalog(
                installed_cache_dir if installed_cache_dir is not None
                else cache.directory())], None
        return versions.generated_paths(base / "sglang" / "generated", sglang_version), None
    except (versions.VersionError, OSError) as e:
        return [], LoadResult((), (CatalogIssue("sglang_version", str(e)),), ())


def _read_layers(layers: Sequence[tuple[Layer, list[Path]]],
                 sglang_version: str) -> list[LoadResult]:
    """Each layer's files read and checked; the generated layer merged across releases and
    narrowed to `sglang_version`."""
    # A large catalog (the generated layer) costs seconds to check: reuse earlier checks. None
    # to check (the built-in catalog came precompiled, no user layer): the 1.8 MB of earlier
    # checks are not read, which was a twentieth of each start.
    facts = PatternFactsCache.default() if layers else None  # None: no cache, or no use for it
    known = facts.load() if facts is not None else {}
    checked: dict[str, int] = {}  # every pattern checked, before a version narrows the layer
    results: list[LoadResult] = []
    for layer, paths in layers:
        result = load_paths(paths, layer, known=known)
        # (A framed record's pattern was not held to `check_pattern`: `^$` is fine at a frame.)
        checked.update((r.message_pattern, r.literal_length) for r in result.records
                       if r.raised_in is None)
        if layer == "generated":
            result = _generated_for(result, len(paths), sglang_version)
        results.append(result)
    if facts is not None and any(p not in known for p in checked):
        # merged: a small user layer's checks must not push out the generated layer's
        facts.store({**known, **checked})
    return results


def _generated_for(result: LoadResult, n_files: int, sglang_version: str) -> LoadResult:
    """The generated layer: one record per site across its files (one file per release), and
    only the records of `sglang_version` when that names one release."""
    if n_files > 1:
        result = LoadResult(tuple(versions.merge_versions(result.records)), result.issues,
                            result.files)
    if sglang_version not in (versions.ALL, versions.INSTALLED):
        try:
            result = LoadResult(
                tuple(versions.select_version(result.records, sglang_version)),
                result.issues, result.files)
        except versions.VersionError as e:
            result = LoadResult((), (*result.issues, CatalogIssue("sglang_version", str(e))),
                                result.files)
    return result


def _version(records: Sequence[CatalogRecord]) -> str:
    h = hashlib.sha256()
    h.update(fields_text((r.id, r.layer, r.message_pattern, r.error_class,
                          r.raised_in.label() if r.raised_in else None)
                         for r in sorted(records, key=lambda r: r.id)))
    return h.hexdigest()[:12]
