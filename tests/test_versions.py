"""`sglang_version`: which release the generated layer speaks for.

Two releases of the same module are extracted for real (a raise site that moved between them,
one that exists only in the newer one), each written to its own `sglang-<version>.jsonl`, the
layout before one merged file (`tests/test_releases.py` tests the merged file): several files in
the generated directory are still merged by id.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from matcher.catalog import load_catalog
from matcher.catalog.extract import extract_module, iter_jsonl
from matcher.catalog.load import load_paths
from matcher.catalog.versions import VersionError, merge_versions, select_version, version_key

MODULE = "sglang/srt/server_args_check.py"
OLD = '''
def check(args):
    if args.tp_size < 1:
        raise ValueError(f"tp_size must be at least 1, got {args.tp_size}")
'''
NEW = '''
import os


def check(args):
    if args.page_size > 1024:
        raise ValueError(f"page_size above the supported maximum: {args.page_size}")
    if args.tp_size < 1:
        raise ValueError(f"tp_size must be at least 1, got {args.tp_size}")
'''
CURATED = Path(__file__).resolve().parents[1] / "patterns" / "sglang" / "curated"


def shipped(tmp_path: Path) -> Path:
    """A patterns dir: the real curated layer and two extracted releases."""
    base = tmp_path / "patterns"
    gen = base / "sglang" / "generated"
    gen.mkdir(parents=True)
    (base / "sglang" / "curated").symlink_to(CURATED)
    for version, source in (("0.5.9", OLD), ("0.5.10", NEW)):
        records = extract_module(source, MODULE, version=version).records
        (gen / f"sglang-{version}.jsonl").write_text("".join(iter_jsonl(records)))
    return base


def generated_records(catalog):
    return {r.error_message: r for r in catalog.records if r.layer == "generated"}


def test_all_merges_releases_one_record_per_site_newest_location(tmp_path):
    catalog = load_catalog(builtin_dir=shipped(tmp_path), sglang_version="all")
    assert not catalog.issues
    got = generated_records(catalog)
    moved = got["tp_size must be at least 1, got {args.tp_size}"]
    assert moved.sglang_versions == ("0.5.9", "0.5.10")  # 0.5.10 sorts after 0.5.9
    assert moved.line_number == 9 and "v0.5.10/" in moved.github_url
    assert moved.location_for("0.5.9")[1:] == (4, ("https://github.com/sgl-project/sglang/blob/"
                                               "v0.5.9/python/sglang/srt/server_args_check.py#L4"))
    assert moved.location_for("0.5.10")[1] == 9 and moved.location_for(None)[1] == 9
    assert moved.in_version("0.5.9") and not moved.in_version("0.5.9.post1")
    new_only = got["page_size above the supported maximum: {args.page_size}"]
    assert new_only.sglang_versions == ("0.5.10",)


def test_one_version_loads_that_release_only(tmp_path):
    catalog = load_catalog(builtin_dir=shipped(tmp_path), sglang_version="0.5.9")
    got = generated_records(catalog)
    assert list(got) == ["tp_size must be at least 1, got {args.tp_size}"]
    assert got["tp_size must be at least 1, got {args.tp_size}"].line_number == 4


def test_an_unshipped_version_is_an_issue_that_says_what_is_shipped(tmp_path):
    base = shipped(tmp_path)
    catalog = load_catalog(builtin_dir=base, sglang_version="0.4.0")
    (issue,) = catalog.issues
    assert "sglang 0.4.0" in issue.problem and "covers sglang 0.5.9..0.5.10" in issue.problem
    records = merge_versions(load_paths([base / "sglang" / "generated"], "generated").records)
    with pytest.raises(VersionError):
        select_version(records, "0.4.0")


def test_version_order_is_pep_440():
    assert sorted(["0.5.10", "0.5.9", "0.5.10rc1", "0.4.99", "0.5.9.post1"], key=version_key) == \
        ["0.4.99", "0.5.9", "0.5.9.post1", "0.5.10rc1", "0.5.10"]


def fake_sglang(root: Path, version: str) -> None:
    pkg = root / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text(f'__version__ = "{version}"\n')
    (pkg / "srt" / "__init__.py").write_text("")
    (pkg / "srt" / "server_args_check.py").write_text(NEW)


def test_installed_extracts_the_sglang_of_this_environment_once_and_caches_it(tmp_path):
    """A daemon-like run in a fresh process: the sglang on its path is read, not imported."""
    fake_sglang(tmp_path / "site", "9.9.9")
    (tmp_path / "site" / "sglang" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 12:00:00] ValueError: page_size above the supported maximum: "
                   "4096\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"),
           "SGLANG_MATCHER_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "matcher", "scan", "--format", "json",
           "--sglang-version", "installed", str(log)]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 1, first.stderr
    (event,) = [json.loads(x) for x in first.stdout.splitlines()]
    assert event["captures"] == {"page_size": "4096"}
    assert "v9.9.9/python/sglang/srt/server_args_check.py#L7" in event["remediation"]["url"]
    (cached,) = (tmp_path / "cache").glob("generated-sglang-9.9.9-*.jsonl")
    stamp = cached.stat().st_mtime_ns
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert second.stdout == first.stdout
    assert cached.stat().st_mtime_ns == stamp  # read from the cache, not extracted again


def test_installed_without_sglang_says_so(tmp_path):
    env = {**os.environ, "SGLANG_MATCHER_CACHE_DIR": str(tmp_path / "cache"),
           "SGLANG_MATCHER_SGLANG_VERSION": "installed"}
    r = subprocess.run([sys.executable, "-m", "matcher", "watch", "--check", "x.log"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "sglang is not installed" in r.stderr
