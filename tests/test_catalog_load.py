"""Catalog files in every form load unchanged; every kind of mistake names file, record and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matcher.catalog import load_catalog, merge_layers
from matcher.catalog.load import load_paths

# The seed record as it was given to us (a `.txt` file holding one envelope), kept byte for byte
# in the curated catalog.
SEED = Path(__file__).resolve().parents[1] / "patterns" / "sglang" / "curated" / "000_seed_int8_mamba_radix_cache.json"


def seed_envelope() -> dict:
    return json.loads(SEED.read_text())


def bare(**over) -> dict:
    rec = {"id": "r1", "messagePattern": "Not enough memory\\. Please try", "errorClass": "RuntimeError"}
    rec.update(over)
    return rec


def test_seed_file_loads_unchanged_from_its_own_txt_file(tmp_path):
    """The seed's envelope, read as is: same id, pattern, remediation; unknown fields kept."""
    as_given = tmp_path / "000_972a8038c9daed36.txt"
    as_given.write_bytes(SEED.read_bytes())
    (rec,) = load_paths([as_given], "user").records
    raw = seed_envelope()["record"]
    assert (rec.id, rec.message_pattern, rec.error_class, rec.solutions) == (
        raw["id"], raw["messagePattern"], raw["errorClass"], tuple(raw["solutions"]))
    assert rec.raw == raw  # backgroundTag, sourceCode, analyzedAt … all still there


@pytest.mark.parametrize("form", ["bare.json", "envelope.json", "list.json", "many.jsonl", "doc.yaml"])
def test_every_file_form_loads(tmp_path, form):
    raw = seed_envelope()["record"]
    env = seed_envelope()
    other = dict(raw, id="other", messagePattern="Received sigquit from a child process")
    path = tmp_path / form
    if form == "bare.json":
        path.write_text(json.dumps(raw))
        want = [raw["id"]]
    elif form == "envelope.json":
        path.write_text(json.dumps(env))
        want = [raw["id"]]
    elif form == "list.json":
        path.write_text(json.dumps([env, other]))
        want = [raw["id"], "other"]
    elif form == "many.jsonl":
        path.write_text(json.dumps(env) + "\n\n" + json.dumps(other) + "\n")
        want = [raw["id"], "other"]
    else:
        import yaml
        path.write_text(yaml.safe_dump([raw, other]))
        want = [raw["id"], "other"]
    result = load_paths([path], "user")
    assert result.issues == ()
    assert [r.id for r in result.records] == want


def test_directory_is_read_recursively_in_order(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.json").write_text(json.dumps(bare(id="b1")))
    (tmp_path / "a.jsonl").write_text(json.dumps(bare(id="a1")) + "\n")
    (tmp_path / "notes.md").write_text("not a catalog")
    assert [r.id for r in load_paths([tmp_path], "user").records] == ["a1", "b1"]


MALFORMED = [
    ("bad JSON", '{"id": "x", ', None, None, "not valid JSON at line 1"),
    ("no pattern and no message", [bare(messagePattern=None)], 0, "messagePattern",
     "required: a messagePattern, or an errorMessage"),
    ("invalid regex", [bare(), bare(id="r2", messagePattern="Scheduler hit (an exception")], 1,
     "messagePattern", "invalid regex"),
    ("empty-matching regex", [bare(messagePattern="(?:Not enough memory)?")], 0, "messagePattern",
     "matches the empty string"),
    ("too little literal text", [bare(messagePattern="Er.*r")], 0, "messagePattern",
     "too little literal text"),
    ("solutions not a list", [bare(solutions="use less memory")], 0, "solutions",
     "expected a list of strings"),
    ("lineNumber a string", [bare(lineNumber="91")], 0, "lineNumber", "expected an integer"),
    ("errorClass a number", [bare(errorClass=3)], 0, "errorClass", "expected a string or null"),
    ("severity unknown", [bare(severity="fatal")], 0, "severity", "is not one of"),
    ("examples not lists", [bare(examples={"match": "one line"})], 0, "examples.match",
     "expected a list of strings"),
    ("id missing", [{"messagePattern": "Not enough memory"}], 0, "id", "required"),
    ("record not an object", ["just a string"], 0, None, "expected an object"),
]


@pytest.mark.parametrize("name,content,index,field,problem", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_catalog_names_file_record_and_field(tmp_path, name, content, index, field, problem):
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    result = load_paths([path], "user")
    assert len(result.issues) == 1, result.issues
    issue = result.issues[0]
    assert (issue.file, issue.index, issue.field) == (str(path), index, field)
    assert problem in issue.problem
    text = str(issue)
    assert text.startswith(str(path))
    if index is not None:
        assert f"record {index}" in text
    if field is not None:
        assert f"field '{field}'" in text


def test_malformed_yaml_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("- id: x\n  messagePattern: [unclosed\n")
    result = load_paths([path], "user")
    assert [(i.file, i.index, i.field) for i in result.issues] == [(str(path), None, None)]
    assert result.issues[0].problem.startswith("not valid YAML: ")
    assert result.records == ()


def test_one_bad_record_does_not_cost_the_others(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([json.dumps(bare(id="a")), "{oops", json.dumps(bare(id="c"))]))
    result = load_paths([path], "user")
    assert [r.id for r in result.records] == ["a", "c"]
    assert [(i.index, i.problem.split(":")[0]) for i in result.issues] == [(1, "line 2")]


def test_error_message_alone_gives_a_pattern():
    """A record with only an `errorMessage` template is matched through the template."""
    (rec,) = load_paths_from([bare(messagePattern=None, errorMessage="Invalid value {v!r} for --tp-size.")])
    assert rec.message_pattern == r"Invalid value (.+?) for --tp-size\."


def load_paths_from(records, tmp=None):
    import tempfile
    d = Path(tempfile.mkdtemp())
    (d / "c.json").write_text(json.dumps(records))
    result = load_paths([d / "c.json"], "user")
    assert result.issues == ()
    return result.records


def test_text_fields_are_never_executed(tmp_path):
    """validationCode / typeGuard / tryCatchPattern stay text, even when they are code."""
    marker = tmp_path / "pwned"
    code = f"open({str(marker)!r}, 'w').write('x')"
    (rec,) = load_paths_from([bare(validationCode=code, typeGuard=code, tryCatchPattern=code)])
    from matcher.catalog.check import frame_text
    from matcher.engine import Engine
    Engine([rec]).match(frame_text("RuntimeError: Not enough memory. Please try")[0])
    assert not marker.exists()
    assert rec.raw["validationCode"] == code


def test_later_layer_overrides_by_id_and_by_template():
    gen = load_paths_from([
        bare(id="g1", errorMessage="Not enough memory. Please try to increase --mem-fraction-static."),
        bare(id="same", messagePattern="generated version of it"),
    ])
    cur = load_paths_from([
        bare(id="c1", errorMessage="Not enough memory. Please try to increase --mem-fraction-static."),
        bare(id="same", messagePattern="curated version of it"),
    ])
    gen = [type(r)(**{**{f: getattr(r, f) for f in r.__slots__}, "layer": "generated"}) for r in gen]
    cur = [type(r)(**{**{f: getattr(r, f) for f in r.__slots__}, "layer": "curated"}) for r in cur]
    merged = merge_layers(gen + cur)
    assert sorted((r.id, r.layer, r.message_pattern) for r in merged) == [
        ("c1", "curated", r"Not enough memory\. Please try"),
        ("same", "curated", "curated version of it"),
    ]


# Values a template's hole takes in real lines, tried in turn (`{len(x)}` a number, `{names}` a
# list or set, `{module}` a dotted name …): a line the replaced record matches with some filling.
_FILLINGS = ("3", "0.5", "x", "True", "['x']", "{'x'}", "[1, 2]", "sglang.srt.models.llama")


def test_a_curated_record_that_takes_a_template_matches_the_lines_it_takes():
    """A curated record takes the message template of the generated records that share it
    (`merge_layers`): they are not loaded. Where its pattern is narrower than theirs, the lines
    in between became unknown: the curated `sgl_kernel` record's `{library}: undefined symbol`
    hid the general record of every other extension, and the scheduler's watchdog record hid
    every other process's watchdog timeout. Each generated record given way is filled in, hole
    by hole, with values as lines have them: where it matches such a line, the records that took
    its template must match it too."""
    import regex

    import matcher.catalog as catalog_module
    from matcher.catalog.layers import _shape

    loaded: list = []
    real_merge = catalog_module.merge_layers

    def keep(records):
        loaded.extend(records)
        return real_merge(records)

    catalog_module.merge_layers = keep
    try:
        merged = catalog_module.load_catalog(precompiled=False)
    finally:
        catalog_module.merge_layers = real_merge
    kept = {id(r) for r in merged.records}
    takers: dict[str, list] = {}
    for r in merged.records:
        if r.error_message and r.layer != "generated":
            takers.setdefault(_shape(r.error_message), []).append(r)
    narrowed, checked = [], 0
    for r in loaded:
        if id(r) in kept or r.layer != "generated" or not r.error_message:
            continue
        winners = takers.get(_shape(r.error_message), [])
        lines = [line for filling in _FILLINGS
                 if regex.search(r.message_pattern, line := regex.sub(
                     r"\{[^{}]*\}", lambda _, f=filling: f, r.error_message))]
        if lines:
            checked += 1
            if not any(regex.search(w.message_pattern, line) for w in winners for line in lines):
                narrowed.append((r.id, [w.id for w in winners], lines[0]))
    assert checked > 100
    assert narrowed == []


def test_builtin_catalog_loads_clean():
    catalog = load_catalog()
    assert catalog.issues == ()
    assert catalog.by_id("4e2cdd4d6209ebbd") is not None


def test_no_builtin_record_says_a_thing_twice():
    """What an operator reads at 3 a.m. says each thing once: no record's documentation
    repeats a sentence, and no solution is listed twice (a curated NCCL record's closing
    sentence was there twice, from two edits that each added it)."""
    import re

    repeated = []
    for record in load_catalog().records:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", record.documentation or "")
                     if len(s) > 30]
        solutions = list(record.solutions or ())
        if len(set(sentences)) < len(sentences) or len(set(solutions)) < len(solutions):
            repeated.append(record.id)
    assert repeated == []


def test_parsed_cache_gives_the_records_a_parse_gives(tmp_path, monkeypatch, cache_dir):
    """A large file's records come from the cache on the second load — the same records, issues
    included — and a damaged entry, or a changed file, is parsed again."""
    import matcher.catalog.load as load

    monkeypatch.setattr(load, "PARSED_CACHE_MIN_BYTES", 0)
    catalog = tmp_path / "many.jsonl"
    generated = Path(__file__).resolve().parents[1] / "patterns" / "sglang" / "generated" / "sglang.jsonl"
    with generated.open() as f:
        lines = [next(f) for _ in range(200)]
    lines.append('{"id": "bad", "messagePattern": "("}\n')
    catalog.write_text("".join(lines))

    parsed = load_paths([catalog], "generated")
    entries = list((tmp_path / "cache").glob("parsed-*.pickle"))
    assert len(entries) == 1
    cached = load_paths([catalog], "generated")
    assert cached.records == parsed.records and cached.issues == parsed.issues
    assert len(parsed.records) == 200 and len(parsed.issues) == 1
    assert any(r.sglang_locations for r in cached.records)
    assert [r.sglang_locations for r in cached.records] == [r.sglang_locations for r in parsed.records]

    entries[0].write_bytes(entries[0].read_bytes()[:100])  # damaged: parsed again, rewritten
    assert load_paths([catalog], "generated").records == parsed.records
    assert entries[0].stat().st_size > 100

    catalog.write_text("".join(lines[:50]))  # a new version of the file: its own entry
    assert len(load_paths([catalog], "generated").records) == 50
    assert len(list((tmp_path / "cache").glob("parsed-*.pickle"))) == 2


def test_packed_locations_read_back_as_written():
    """`sglangLocations` are kept packed in memory; every form reads back unchanged."""
    from matcher.catalog.schema import pack_locations, unpack_locations

    url = "https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/x.py#L4"
    cases = [
        (),
        (("0.4.0..0.5.9", "python/sglang/x.py", 4, url),),  # the release's own link: not stored
        (("0.4.0..0.5.9", "python/sglang/x.py", 4, url), ("0.5.10", "python/sglang/x.py", 9, None),
         ("0.5.11", None, None, "https://example.com/other"), ("0.5.12", "y.py", None, None)),
        (("0.5.1", "tab\there.py", 3, None),),  # not packable: JSON
        (("[0.5.1", "", 3, ""),),
    ]
    for locations in cases:
        assert unpack_locations(pack_locations(locations)) == locations
    assert url not in pack_locations(cases[1])


def test_a_frame_records_pattern_vouches_for_no_plain_record(tmp_path, cache_dir):
    """`^$` is a bare exception at a frame; in a plain record it matches every line. The
    checked-pattern cache, filled by the built-in catalog's 9,000 frame records, must not
    let a user's plain `^$` through."""
    load_catalog()  # fills the cache with every pattern the built-in layers checked
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps([{"id": "r1", "messagePattern": "^$"}]))
    catalog = load_catalog(user_paths=[mine])
    [issue] = [i for i in catalog.issues if i.record_id == "r1"]
    assert issue.field == "messagePattern" and "empty string" in issue.problem
