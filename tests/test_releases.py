"""One catalog merged over many sglang releases (`catalog extract --wheel … --wheel …`).

The releases are real: two sglang modules copied out of eight real wheels
(`tests/fixtures/sglang/releases/README.md` says which and what changes between them).
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from matcher.catalog import load_catalog
from matcher.catalog.extract import extract_files, iter_jsonl, record_id
from matcher.catalog.load import load_paths, validate_record
from matcher.catalog.releases import (
    ReleaseError,
    list_releases,
    merge_releases,
    records_per_release,
)
from matcher.catalog.versions import (
    VersionError,
    compact_ranges,
    in_ranges,
    select_version,
    version_key,
)

RELEASES = Path(__file__).parent / "fixtures" / "sglang" / "releases"
CURATED = Path(__file__).resolve().parents[1] / "patterns" / "sglang" / "curated"
VERSIONS = ["0.5.8", "0.5.10", "0.5.11", "0.5.17", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
LORA = "sglang/srt/lora/lora_config.py"
AUX = "sglang/srt/layers/aux_hidden_states.py"
PARSE_FAILED = "c77f9013c26b2245"  # logger.warning("Failed to parse added_tokens.json: {e}")
CAPTURED = "9f2f87c7ddcd4fd1"  # RuntimeError("captured … of … aux hidden states")
# `raise NotImplementedError()` in `get_lora_config`: no message, a frame record in every release
NO_DUMMY = record_id("sglang.srt.lora.lora_config", "NotImplementedError",
                     "frame:get_lora_config:raise NotImplementedError()")
URL = "https://github.com/sgl-project/sglang/blob/v{}/python/{}#L{}"


def sources(version: str) -> list[tuple[str, str]]:
    root = RELEASES / version
    return [(p.relative_to(root).as_posix().removesuffix(".source"), p.read_text())
            for p in sorted(root.rglob("*.py.source"))]


def extracted(order: list[str]) -> dict[str, tuple]:
    """Each release extracted, inserted in `order`."""
    return {v: extract_files(sources(v), version=v).records for v in order}


def merged_text(order: list[str]) -> str:
    return "".join(iter_jsonl(merge_releases(extracted(order))))


def by_id(records):
    return {r["id"]: r for r in records}


def test_fixtures_are_the_eight_releases():
    assert sorted(p.name for p in RELEASES.iterdir() if p.is_dir()) == sorted(VERSIONS)


def test_same_releases_in_any_order_give_the_same_bytes():
    first = merged_text(VERSIONS)
    assert first == merged_text(VERSIONS)  # twice
    assert first == merged_text(VERSIONS[::-1])
    shuffled = VERSIONS[:]
    random.Random(7).shuffle(shuffled)
    assert first == merged_text(shuffled)
    ids = [json.loads(x)["id"] for x in first.splitlines()]
    assert ids == sorted(ids)


def test_ranges_and_locations_of_real_releases():
    got = by_id(merge_releases(extracted(VERSIONS)))
    # Present in all eight; moved in 0.5.10 and again in 0.5.11.
    parse = got[PARSE_FAILED]
    assert parse["sglangVersions"] == ["0.5.8..0.5.23"]
    assert parse["sglangLocations"] == [
        {"versions": "0.5.8", "filePath": f"python/{LORA}", "lineNumber": 89,
         "githubUrl": URL.format("0.5.8", LORA, 89)},
        {"versions": "0.5.10", "filePath": f"python/{LORA}", "lineNumber": 113,
         "githubUrl": URL.format("0.5.10", LORA, 113)},
        {"versions": "0.5.11..0.5.23", "filePath": f"python/{LORA}", "lineNumber": 107,
         "githubUrl": URL.format("0.5.23", LORA, 107)},
    ]
    assert (parse["lineNumber"], parse["githubUrl"]) == (107, URL.format("0.5.23", LORA, 107))
    # The assert of 0.5.17 became a RuntimeError in 0.5.20: two records; then it moves.
    captured = got[CAPTURED]
    assert captured["sglangVersions"] == ["0.5.20..0.5.23"]
    assert [(x["versions"], x["lineNumber"]) for x in captured["sglangLocations"]] == [
        ("0.5.20", 46), ("0.5.21", 59), ("0.5.22", 78), ("0.5.23", 87)]
    assert captured["documentation"].startswith("`AuxHiddenStatePacker.")  # the newest's
    old_assert = got[record_id("sglang.srt.layers.aux_hidden_states", "AssertionError",
                               "captured {self._idx} of {self._num_captures} aux hidden states")]
    assert old_assert["sglangVersions"] == ["0.5.17"] and "sglangLocations" not in old_assert
    assert old_assert["githubUrl"] == URL.format("0.5.17", AUX, 46)
    # A template changed in 0.5.23 ({hidden.dtype} → {like.dtype}): one record each.
    shapes = {r["errorMessage"][-14:]: r["sglangVersions"] for r in got.values()
              if (r["errorMessage"] or "").startswith("aux hidden output buffer")}
    assert shapes == {"{hidden.dtype}": ["0.5.22"], "} {like.dtype}": ["0.5.23"]}
    # In one release only, between others.
    (added,) = [r for r in got.values()
                if (r["errorMessage"] or "").startswith("LoRA adapter has")]
    assert added["sglangVersions"] == ["0.5.10"]
    # A bare raise: one frame record over the eight releases, its frame carried, its line moving.
    dummy = got[NO_DUMMY]
    assert (dummy["sglangVersions"], dummy["errorMessage"], dummy["messagePattern"]) == (
        ["0.5.8..0.5.23"], None, "^$")
    assert dummy["raisedIn"] == {"path": LORA, "function": "get_lora_config",
                                 "source": "raise NotImplementedError()"}
    assert [(x["versions"], x["lineNumber"]) for x in dummy["sglangLocations"]] == [
        ("0.5.8", 55), ("0.5.10", 83), ("0.5.11..0.5.23", 77)]
    # Every record is the newest release's text but for the versions fields.
    assert all(r["schemaVersion"] == 2 and list(r)[-1] == "schemaVersion" for r in got.values())


def test_an_id_never_changes_when_a_release_is_added():
    fewer = by_id(merge_releases(extracted(["0.5.22", "0.5.23"])))
    more = by_id(merge_releases(extracted(VERSIONS)))
    assert set(fewer) <= set(more)
    assert fewer[PARSE_FAILED]["sglangVersions"] == ["0.5.22..0.5.23"]
    assert "sglangLocations" not in fewer[PARSE_FAILED]  # same line in both


def test_a_gap_makes_two_ranges():
    def rec(v, line):
        return {"id": "x", "errorMessage": "m", "filePath": "python/sglang/a.py",
                "lineNumber": line, "githubUrl": URL.format(v, "sglang/a.py", line),
                "sglangVersions": [v], "schemaVersion": 2}
    got = merge_releases({"0.4.0": [rec("0.4.0", 1)], "0.4.0.post1": [rec("0.4.0.post1", 1)],
                          "0.4.1": [], "0.4.10": [rec("0.4.10", 5)],
                          "0.4.9": [rec("0.4.9", 5)]})
    (r,) = got
    assert r["sglangVersions"] == ["0.4.0..0.4.0.post1", "0.4.9..0.4.10"]
    assert [(x["versions"], x["lineNumber"]) for x in r["sglangLocations"]] == [
        ("0.4.0..0.4.0.post1", 1), ("0.4.9..0.4.10", 5)]
    with pytest.raises(ReleaseError):
        merge_releases({"0.5": [], "0.5.0": []})  # the same release twice


def test_compact_ranges():
    order = ["0.4.0", "0.4.0.post1", "0.4.1", "0.4.2", "0.5.1"]
    assert compact_ranges(["0.4.0", "0.4.0.post1", "0.4.2", "0.5.1"], order) == [
        "0.4.0..0.4.0.post1", "0.4.2..0.5.1"]
    assert compact_ranges(["0.4.1"], order) == ["0.4.1"]
    assert compact_ranges([], order) == []


def test_version_order_is_pep_440():
    versions = ["0.4.0", "0.4.0.post1", "0.4.0.post2", "0.4.1", "0.4.10", "0.4.9.post6", "0.5",
                "0.5.0rc0", "0.5.0rc2", "0.5.1", "0.5.10rc0", "0.5.10", "0.5.10.post1",
                "0.5.2", "0.5.23", "1.0.dev1", "1.0a1", "1.0b2", "1.0.post1.dev0", "1!0.1"]
    assert sorted(versions, key=version_key) == sorted(versions, key=Version)
    for a in versions:
        for b in versions:
            assert (version_key(a) == version_key(b)) == (Version(a) == Version(b))
    assert in_ranges("0.4.3.post1", ["0.4.0..0.4.3.post2"])
    assert not in_ranges("0.4.3.post3", ["0.4.0..0.4.3.post2"])
    assert in_ranges("0.5.10", ["0.4.0..0.4.1", "0.5.9..0.5.23"])
    assert in_ranges("0.5.23", ["0.5.23"]) and not in_ranges("0.5.2", ["0.5.23"])


# --- loading ------------------------------------------------------------------------------------

def loaded(records) -> dict:
    out = {}
    for i, raw in enumerate(records):
        rec = validate_record(raw, "gen.jsonl", i, "generated")
        assert not isinstance(rec, list), rec
        out[rec.id] = rec
    return out


def test_in_version_and_location_for():
    got = loaded(merge_releases(extracted(VERSIONS)))
    parse = got[PARSE_FAILED]
    assert parse.sglang_versions == ("0.5.8..0.5.23",)
    assert all(parse.in_version(v) for v in VERSIONS)
    assert not parse.in_version("0.5.7") and not parse.in_version("0.5.23.post1")
    assert parse.location_for("0.5.8") == (f"python/{LORA}", 89, URL.format("0.5.8", LORA, 89))
    assert parse.location_for("0.5.10")[1:] == (113, URL.format("0.5.10", LORA, 113))
    assert parse.location_for("0.5.17")[1:] == (107, URL.format("0.5.23", LORA, 107))
    assert parse.location_for(None) == parse.location_for("9.9.9") == (
        f"python/{LORA}", 107, URL.format("0.5.23", LORA, 107))
    captured = got[CAPTURED]
    assert captured.location_for("0.5.21")[1] == 59 and captured.in_version("0.5.21")
    assert not captured.in_version("0.5.17")


def test_old_per_version_lists_and_no_versions_still_load():
    (old, bare) = loaded([
        {"id": "a", "errorMessage": "the scheduler lost its way", "sglangVersions":
            ["0.5.9", "0.5.10"], "filePath": "x.py", "lineNumber": 3, "githubUrl": "u"},
        {"id": "b", "errorMessage": "the scheduler lost its way again"}]).values()
    assert old.in_version("0.5.9") and old.in_version("0.5.10")
    assert not old.in_version("0.5.9.post1")  # a list names releases, not the ones between
    assert old.location_for("0.5.9") == ("x.py", 3, "u")
    assert bare.in_version("0.1.0") and bare.location_for("0.5.9") == (None, None, None)


def test_a_malformed_locations_field_is_named():
    problems = validate_record({"id": "a", "errorMessage": "the scheduler lost its way",
                                "sglangLocations": [{"versions": 1}]}, "f.jsonl", 0, "user")
    assert [p.field for p in problems] == ["sglangLocations"]


def shipped(tmp_path: Path, order=VERSIONS) -> Path:
    """A patterns dir holding the merged catalog of the fixture releases, and the real curated
    layer."""
    base = tmp_path / "patterns"
    gen = base / "sglang" / "generated"
    gen.mkdir(parents=True)
    (base / "sglang" / "curated").symlink_to(CURATED)
    (gen / "sglang.jsonl").write_text(merged_text(order))
    return base


def generated(catalog):
    return {r.id: r for r in catalog.records if r.layer == "generated"}


def test_sglang_version_keeps_the_records_of_that_release_at_its_lines(tmp_path):
    base = shipped(tmp_path)
    everything = generated(load_catalog(builtin_dir=base, sglang_version="all"))
    assert len(everything) == 7
    one = load_catalog(builtin_dir=base, sglang_version="0.5.10")
    assert not one.issues
    got = generated(one)
    assert {(r.error_message or r.raised_in.source)[:24] for r in got.values()} == {
        "Failed to parse added_to", "LoRA adapter has {self.l", "raise NotImplementedErro"}
    assert (got[PARSE_FAILED].line_number, got[PARSE_FAILED].github_url) == (
        113, URL.format("0.5.10", LORA, 113))
    assert set(generated(load_catalog(builtin_dir=base, sglang_version="0.5.21"))) == {
        PARSE_FAILED, CAPTURED, NO_DUMMY}
    # A release between two extracted ones is in the ranges around it.
    assert PARSE_FAILED in generated(load_catalog(builtin_dir=base, sglang_version="0.5.9"))


@pytest.mark.parametrize("version", ["0.5.7", "0.5.24", "0.6.0", "latest"])
def test_a_version_outside_the_catalog_is_an_issue_naming_the_covered_range(tmp_path, version):
    base = shipped(tmp_path)
    catalog = load_catalog(builtin_dir=base, sglang_version=version)
    (issue,) = catalog.issues
    assert issue.file == "sglang_version"
    assert f"sglang {version}" in issue.problem and "covers sglang 0.5.8..0.5.23" in issue.problem
    assert not generated(catalog)
    with pytest.raises(VersionError, match=r"0\.5\.8\.\.0\.5\.23"):
        select_version(load_paths([base / "sglang" / "generated"], "generated").records, version)


def test_records_per_release():
    records = merge_releases(extracted(VERSIONS))
    assert records_per_release(records, VERSIONS) == {
        "0.5.8": 2, "0.5.10": 3, "0.5.11": 2, "0.5.17": 3, "0.5.20": 3, "0.5.21": 3,
        "0.5.22": 4, "0.5.23": 4}


def test_list_releases_keeps_final_and_post_releases_in_the_range():
    wheel = [{"packagetype": "bdist_wheel", "yanked": False}]
    index = {"0.3.9": wheel, "0.4.0": wheel, "0.4.0.post1": wheel, "0.5.0rc0": wheel,
             "0.5.1": [{"packagetype": "bdist_wheel", "yanked": True}],
             "0.5.2": [{"packagetype": "sdist", "yanked": False}], "0.5.10": wheel,
             "0.5.23": wheel, "0.5.24": wheel}
    listed = list_releases("0.4.0..0.5.23", index=index)
    assert listed.wanted == ("0.4.0", "0.4.0.post1", "0.5.10", "0.5.23")
    assert listed.skipped == (("0.5.0rc0", "not a final or .postN release"),
                              ("0.5.1", "yanked"), ("0.5.2", "no wheel on PyPI"))
    with pytest.raises(ReleaseError):
        list_releases("0.5.23..0.4.0", index=index)


# --- the command --------------------------------------------------------------------------------

def wheel_of(version: str, directory: Path) -> Path:
    """A wheel holding the fixture release's modules (and the package's __init__)."""
    path = directory / f"sglang-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("sglang/__init__.py", "")
        for name, text in sources(version):
            zf.writestr(name, text)
        zf.writestr(f"sglang-{version}.dist-info/METADATA",
                    f"Name: sglang\nVersion: {version}\n")
    return path


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "matcher", *args], capture_output=True,
                          text=True, check=False, cwd=cwd)


def test_extract_command_merges_wheels_the_same_in_any_order(tmp_path):
    wheels = [wheel_of(v, tmp_path) for v in VERSIONS]
    outs = []
    for i, order in enumerate((wheels, wheels[::-1])):
        out = tmp_path / f"run{i}" / "sglang.jsonl"
        out.parent.mkdir()
        args = [a for w in order for a in ("--wheel", str(w))]
        run = cli("catalog", "extract", *args, "--wheel-dir", str(tmp_path / f"cache{i}"),
                  "-o", str(out))
        assert run.returncode == 0, run.stderr
        outs.append(out)
    # the command also derives each record's fix (`remedy`, tested in test_remedy.py)
    from matcher.commands.catalog.extract import remediate

    records = merge_releases(extracted(VERSIONS))
    remediate(records, None, io.StringIO())
    assert outs[0].read_bytes() == outs[1].read_bytes() == "".join(iter_jsonl(records)).encode()
    stats = [p.with_name("sglang.stats.toml").read_text() for p in outs]
    assert stats[0] == stats[1]
    doc = tomllib.loads(stats[0])
    # 5 templates: the `captured …` assert and RuntimeError share one; the frame record has none.
    assert doc["releases"] == VERSIONS and doc["records"] == 7 and doc["templates"] == 5
    assert doc["release"]["0.5.22"]["records_in_catalog"] == 4
    assert "run0" not in stats[0] and "cache0" not in stats[0]  # no path of this machine
    # `catalog stats` counts records per release from the stats file.
    run = cli("catalog", "stats", str(outs[0]))
    assert run.returncode == 0, run.stderr
    table = run.stdout.split("records per sglang release (8 releases):\n")[1].splitlines()
    assert [line.split() for line in table] == [
        ["0.5.8", "2"], ["0.5.10", "3"], ["0.5.11", "2"], ["0.5.17", "3"], ["0.5.20", "3"],
        ["0.5.21", "3"], ["0.5.22", "4"], ["0.5.23", "4"]]


def test_extract_command_rejects_the_same_release_twice(tmp_path):
    a = wheel_of("0.5.8", tmp_path)
    b = tmp_path / "copy" / a.name
    b.parent.mkdir()
    b.write_bytes(a.read_bytes())
    run = cli("catalog", "extract", "--wheel", str(a), "--wheel", str(b), "--wheel-dir",
              str(tmp_path / "cache"))
    assert run.returncode == 2 and "both sglang 0.5.8" in run.stderr
