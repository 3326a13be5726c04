"""What several commands share: the usage error, the catalog options and loading, and finding
a record by a name a person types."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from pathlib import Path

from matcher.catalog import Catalog, CatalogError, load_catalog
from matcher.catalog.schema import CatalogRecord
from matcher.release import AUTO, catalog_version_setting


class UsageError(Exception):
    """Bad arguments or unreadable input: message to stderr, exit 2."""


def catalog_args(p: argparse.ArgumentParser) -> None:
    """`--catalog`, `--no-builtin`, `--sglang-version` of the one-shot commands."""
    p.add_argument("--catalog", action="append", type=Path, default=[], metavar="PATH",
                   help="extra catalog file or directory (repeatable); overrides built-in records")
    p.add_argument("--no-builtin", action="store_true",
                   help="do not load the built-in sglang catalog")
    p.add_argument("--sglang-version", metavar="V",
                   help='which sglang wrote the log: "auto" (default: learned from its '
                        'tracebacks, every release matched until then), "all", one release '
                        'such as 0.5.23 (only its records match; events and links name it), '
                        '"installed" (extracted from the sglang in this environment, cached), '
                        'or "none" (no generated layer)')


def load(args: argparse.Namespace) -> Catalog:
    """The catalog `catalog_args` describe; `CatalogError` when it has problems."""
    version = catalog_version_setting(args.sglang_version or AUTO)
    catalog = load_catalog(builtin=not args.no_builtin, user_paths=args.catalog,
                           generated=version != "none", sglang_version=version)
    if catalog.issues:
        raise CatalogError(list(catalog.issues))
    if not catalog.records:
        raise UsageError("the catalog is empty: give --catalog PATH or drop --no-builtin")
    return catalog


def catalog_for(paths: Sequence[Path]) -> Catalog:
    """The catalog files `paths` name alone, or the built-in catalog when none is named."""
    if paths:
        return load_catalog(builtin=False, user_paths=paths)
    return load_catalog()


def find_record(catalog: Catalog, record_id: str) -> CatalogRecord:
    """The record `record_id` names: its id, its slug, or a prefix of its id only it has (any
    case). Ambiguous or unknown: a `UsageError` with the candidates or the nearest names."""
    rec = catalog.by_id(record_id)
    if rec is not None:
        return rec
    key = record_id.strip().lower()
    if not key:
        raise UsageError("an empty record id: give an id (or a unique prefix of one) or a slug")
    rec = next((r for r in catalog.records if r.slug.lower() == key or r.id.lower() == key), None)
    if rec is not None:
        return rec
    found: dict[str, CatalogRecord] = {}
    for r in catalog.records:
        if r.id.lower().startswith(key):
            found.setdefault(r.id, r)
    if len(found) == 1:
        return next(iter(found.values()))
    if found:
        shown = sorted(found.values(), key=lambda r: r.id)[:5]
        more = f", and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
        raise UsageError(f"{record_id!r} is the start of {len(found)} record ids: "
                         + ", ".join(f"{r.id} ({r.slug})" for r in shown)
                         + f"{more}; give more of the id")
    names = [r.id for r in catalog.records] + [r.slug for r in catalog.records]
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.7)
    hexadecimal = all(c in "0123456789abcdef" for c in key)
    for n in range(len(key) - 1, 0, -1):  # an id prefix with a typo: the ids sharing most of it
        if close or not hexadecimal:
            break
        close = sorted({r.id for r in catalog.records if r.id.lower().startswith(key[:n])})[:3]
    raise UsageError(f"no catalog record with id, id prefix or slug {record_id!r}"
                     + (f" — did you mean {' or '.join(close)}?" if close else ""))
