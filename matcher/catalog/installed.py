"""`sglang_version = "installed"`: extract a generated catalog from the sglang importable here.

A catalog tool (it runs `extract`), so it sits above the engine and the catalog data; the
loader reaches it only when asked for the installed release.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from matcher.atomic import write_atomic
from matcher.catalog import extract
from matcher.catalog.load import code_fingerprint
from matcher.catalog.versions import INSTALLED, VersionError


def installed_catalog(cache_dir: Path | None = None) -> Path:
    """A generated catalog of the sglang in this environment, extracted once and cached in
    `cache_dir` (the caller's: see `matcher.cache`); with no `cache_dir`, in the
    temporary directory."""
    try:
        package, version = extract.find_installed()
    except FileNotFoundError as e:
        raise VersionError(f"sglang_version = \"{INSTALLED}\": {e}") from e
    for name in ("_version.py", "version.py"):  # a checkout on the path has no metadata
        if version is None and (package / name).is_file():
            version = extract.version_in((package / name).read_text(errors="replace"))
    code = code_fingerprint(*extract.EXTRACTOR_MODULES, "matcher.catalog.patterns")
    directory = cache_dir if cache_dir is not None else Path(tempfile.gettempdir())
    safe = re.sub(r"[^\w.+-]", "_", version or "unknown")
    cached = directory / f"generated-sglang-{safe}-{code}.jsonl"
    if cached.is_file():
        return cached
    source = extract.read_tree(package)
    result = extract.extract_files(source.files, version=version or source.version or "unknown")
    text = "".join(extract.iter_jsonl(result.records))
    try:
        write_atomic(cached, text)
        return cached
    except OSError:
        # No writable cache dir: a fixed name in the temp dir, so restarts reuse it.
        fallback = Path(tempfile.gettempdir()) / cached.name
        write_atomic(fallback, text)
        return fallback
