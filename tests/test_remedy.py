"""Fixes derived from a check's own guard condition and the release's flags (`remedy`), checked
on the very condition they come from; the flag table (`server_args`, `argdump`)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import types
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from matcher.catalog import remedy
from matcher.catalog.load import load_paths
from matcher.catalog.server_args import ArgSpec, ServerArgsTable, default_path
from matcher.catalog.versions import parse_range

REPO = Path(__file__).resolve().parent.parent
GENERATED = REPO / "patterns" / "sglang" / "generated" / "sglang.jsonl"
CLI = [sys.executable, "-m", "matcher"]


@lru_cache(maxsize=1)
def table() -> ServerArgsTable:
    return ServerArgsTable.load(default_path())


@lru_cache(maxsize=1)
def generated() -> list[dict[str, Any]]:
    with open(GENERATED, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def newest(record: dict[str, Any]) -> str:
    return parse_range(record["sglangVersions"][-1])[1]


def args_523() -> dict[str, ArgSpec]:
    return dict(table().at("0.5.23"))


HOOK = "python/sglang/srt/arg_groups/kv_cache_hook.py"


# --- real guard conditions of sglang 0.5.23, with its real flags ------------------------------

def test_a_switch_that_must_be_off_is_removed():
    d = remedy.derive("cfg.disable_radix_cache", args_523(), HOOK)
    assert d.reads == ("disable_radix_cache",)
    assert [[(s.field, s.op) for s in way] for way in d.ways] == [[("disable_radix_cache",
                                                                    "remove")]]


def test_a_value_the_check_wants_is_set():
    d = remedy.derive("not (cfg.speculative_eagle_topk == 1)", args_523(), HOOK)
    [way] = d.ways
    action = remedy.fix_action(way[0], args_523()["speculative_eagle_topk"])
    assert action == {"op": "set", "flag": "--speculative-eagle-topk", "value": "1"}


def test_a_conjunction_has_a_way_out_per_flag():
    """`and`: dropping either flag is a way out — both are offered, each proven."""
    when = "cfg.enable_lmcache and cfg.enable_hierarchical_cache"
    d = remedy.derive(when, args_523(), HOOK)
    assert sorted(s.field for way in d.ways for s in way) == ["enable_hierarchical_cache",
                                                              "enable_lmcache"]
    a = args_523()
    for way in d.ways:
        assert remedy.proven(when, HOOK, a, [remedy.fix_action(s, a[s.field]) for s in way])


def test_a_disjunction_needs_every_term_made_false():
    """sglang 0.5.23 kv_shard_hook: DSA KV sharding wants four settings at once."""
    when = ("cfg.dsa_prefill_backend != 'trtllm' or cfg.dsa_decode_backend != 'trtllm' or "
            "cfg.kv_cache_dtype != 'fp8_e4m3' or (cfg.page_size != 64)")
    a = args_523()
    d = remedy.derive(when, a, "python/sglang/srt/arg_groups/kv_shard_hook.py")
    [way] = d.ways
    assert {(s.field, s.value) for s in way} == {
        ("dsa_prefill_backend", "trtllm"), ("dsa_decode_backend", "trtllm"),
        ("kv_cache_dtype", "fp8_e4m3"), ("page_size", 64)}


def test_a_term_no_flag_decides_leaves_the_record_unevaluable():
    """`not (cfg.device == 'cuda' and is_sm100_supported())`: no flag makes it false for sure,
    so no fix is made up; the reason is kept."""
    d = remedy.derive("not (cfg.device == 'cuda' and is_sm100_supported())", args_523(), HOOK)
    assert d.reads == ("device",) and not d.ways and d.unfixed


def test_an_and_with_an_unknown_term_is_still_fixed_by_its_flag():
    d = remedy.derive("cfg.enable_lmcache and some_runtime_check()", args_523(), HOOK)
    assert [[(s.field, s.op) for s in w] for w in d.ways] == [[("enable_lmcache", "remove")]]


def test_outside_the_argument_modules_only_names_that_say_server_args_count():
    a = args_523()
    runtime = "python/sglang/srt/mem_cache/allocator.py"
    assert remedy.derive("self.page_size > 1", a, runtime).reads == ()
    assert remedy.derive("self.server_args.page_size > 1", a, runtime).reads == ("page_size",)
    assert remedy.derive("get_global_server_args().page_size > 1", a, runtime).reads == (
        "page_size",)


def test_not_is_pushed_inward():
    tree = remedy.normalized(ast.parse("not (a.x == 1 and not b.y)", mode="eval").body)
    assert ast.unparse(tree) == "a.x != 1 or b.y"


def test_solution_quotes_the_flags_help_and_example_fix_shows_before_and_after():
    a = args_523()
    record = {"guard": {"when": "cfg.disable_radix_cache"}, "filePath": HOOK,
              "errorMessage": "--enable-lmcache requires radix cache to be enabled",
              "errorType": "raise", "githubUrl": "https://example.invalid/x.py#L1"}
    remedy.remediate(record, a)
    assert record["fixActions"] == [[{"op": "remove", "flag": "--disable-radix-cache"}]]
    assert record["solutions"][0].startswith("Remove --disable-radix-cache from the launch")
    assert a["disable_radix_cache"].help in record["solutions"][0]
    assert record["exampleFix"].splitlines()[:2] == ["# before", "--disable-radix-cache"]
    assert "issues?q=is%3Aissue" in record["solutions"][-1]


def test_runtime_record_gets_words_the_source_and_an_issue_search():
    record = {"guard": {"when": "H % patch_h != 0"}, "filePath": "python/sglang/srt/x.py",
              "errorMessage": "image ({H}, {W}) not divisible by ({patch_h}, {patch_w})",
              "errorType": "raise", "githubUrl": "https://github.com/sgl-project/sglang/blob/"
                                                 "v0.5.23/python/sglang/srt/x.py#L110"}
    remedy.remediate(record, args_523())
    assert "fixActions" not in record and "reads" not in record["guard"]
    assert "`H % patch_h != 0`" in record["solutions"][0]
    assert record["githubUrl"] in record["solutions"][0]
    # the message's head before its first hole: too short here ("image (") to search for
    assert len(record["solutions"]) == 1


# --- the evaluator is Python's, where it claims to know --------------------------------------

def _python_truth(when: str, values: dict[str, Any], path: str) -> bool | None:
    """`when` by Python itself, every base name bound to the arguments; None if it needs
    anything else."""
    ns = types.SimpleNamespace(**values)
    bases = dict.fromkeys(("self", "cfg", "view", "server_args", "args", "parallel", "server_args_"), ns)
    bases["global_server_args_dict"] = values
    bases["get_global_server_args"] = lambda: ns
    try:
        tree = ast.parse(when, mode="eval")
        return bool(eval(compile(tree, path, "eval"), {"__builtins__": {
            "len": len, "int": int, "float": float, "str": str, "bool": bool, "abs": abs,
            "min": min, "max": max, "True": True, "False": False, "None": None}}, bases))
    except Exception:  # noqa: BLE001 - it needed something that is not a server argument
        return None


def test_three_valued_evaluation_agrees_with_python_on_the_catalogs_real_conditions():
    """Over the generated catalog's conditions that read server arguments (their release's
    defaults, and the failing launches `derive` finds): wherever the evaluator says true or
    false, Python says the same; and it says something on most of them."""
    checked = 0
    for record in generated():
        guard = record.get("guard") or {}
        if not guard.get("reads") or ("arg_groups" not in record["filePath"] \
                and "server_args" not in record["filePath"]):
            continue
        a = table().at(newest(record))
        cond = ast.parse(guard["when"], mode="eval").body
        ev = remedy.Evaluator(a, record["filePath"])
        full = {d: s.default for d, s in a.items()}
        d = remedy.derive(guard["when"], a, record["filePath"])
        for w in ({}, *d.witnesses):
            values = {**full, **{k: v for k, v in w.items() if v is not remedy.CHOSEN}}
            mine = ev.truth(cond, values)
            theirs = _python_truth(guard["when"], values, record["filePath"])
            if mine is None or theirs is None:
                continue
            checked += 1
            assert mine == theirs, (record["id"], guard["when"], w)
    assert checked > 1000


# --- part of the catalog: every derived fix proven, the rest counted -------------------------

def test_every_generated_fix_makes_its_guard_condition_false_on_the_failing_launches():
    """Read back from the catalog file (not from `derive`): each way of each generated record,
    applied to launches that fail there (the release's defaults plus the flags that make the
    condition true), leaves the condition false."""
    proven = 0
    for record in generated():
        if not record.get("fixActions") or "message-fix" in record.get("tags", []):
            continue  # (a fix the message states is checked in test_remedy_rules.py)
        a = table().at(newest(record))
        for way in record["fixActions"]:
            assert remedy.proven(record["guard"]["when"], record["filePath"], a, way), (
                record["id"], record["guard"]["when"], way)
            proven += 1
    assert proven > 1000


def test_ninety_percent_of_records_reading_server_arguments_carry_flag_fixes():
    reading = [r for r in generated() if (r.get("guard") or {}).get("reads")]
    flagged = [r for r in reading if r.get("fixActions")]
    assert len(flagged) >= 0.9 * len(reading), (len(flagged), len(reading))
    assert all(r["solutions"] for r in generated())
    unevaluable = [r for r in reading if not r.get("fixActions")]
    assert all(r["guard"].get("unfixed") for r in unevaluable)


def test_catalog_stats_prints_the_share_and_lists_the_unevaluable():
    run = subprocess.run([*CLI, "catalog", "stats", "--unevaluable", str(GENERATED)],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert run.returncode == 0, run.stderr
    # A fix the message states (`message-fix`) is counted as its own kind, not as a guard's.
    reading = [r for r in generated() if (r.get("guard") or {}).get("reads")
               and "message-fix" not in (r.get("tags") or [])]
    flagged = sum(1 for r in reading if r.get("fixActions"))
    assert f"with flag changes {flagged:,} of {len(reading):,}" in run.stdout
    listed = [line for line in run.stdout.splitlines() if line.startswith("      when ")]
    assert len(listed) == len(reading) - flagged


# --- the table of flags ----------------------------------------------------------------------

def test_table_stores_a_flag_once_per_run_of_releases_and_answers_for_unlisted_ones():
    spec = {"flags": ["--x"], "default": 1, "choices": None, "type": "int",
            "action": "_StoreAction", "nargs": None, "help": "x"}
    changed = {**spec, "default": 2}
    t = ServerArgsTable.from_releases({"0.4.0": {"x": spec}, "0.4.1": {"x": spec},
                                       "0.5.0": {"x": changed}})
    assert [run["versions"] for run in t.dump()["arguments"]["x"]] == [["0.4.0..0.4.1"],
                                                                       ["0.5.0"]]
    assert t.at("0.4.1")["x"].default == 1 and t.at("0.5.0")["x"].default == 2
    assert t.at("0.4.5")["x"].default == 1  # not in the table: the nearest older release
    assert t.at("0.5.9")["x"].default == 2


def test_server_args_command_reads_a_release_by_its_own_parser(tmp_path):
    """A wheel whose server_args imports a module that is not installed: argdump stubs it and
    reads the parser; `catalog server-args` writes the table `catalog extract` reads."""
    src = '''
import argparse, dataclasses
import not_installed_anywhere_lib
from not_installed_anywhere_lib.sub import helper

@dataclasses.dataclass
class ServerArgs:
    tp_size: int = 1
    enable_thing: bool = False

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int,
                            default=ServerArgs.tp_size, help="The tensor parallelism size.")
        parser.add_argument("--enable-thing", action="store_true", help="Turn it on.")
'''
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("sglang/__init__.py", "")
        z.writestr("sglang/srt/__init__.py", "")
        z.writestr("sglang/srt/server_args.py", src)
    out = tmp_path / "args.json.gz"
    run = subprocess.run([*CLI, "catalog", "server-args", "--wheel", str(wheel), "--python",
                          sys.executable, "-o", str(out)], capture_output=True, text=True,
                         cwd=REPO, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    a = ServerArgsTable.load(out).at("9.9.9")
    assert a["tp_size"].flags == ("--tp-size", "--tensor-parallel-size")
    assert a["tp_size"].default == 1 and a["tp_size"].type == "int"
    assert a["enable_thing"].switch is True and a["enable_thing"].help == "Turn it on."


def test_a_bad_guard_is_named_by_the_loader(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"id": "g1", "messagePattern": "boom", "guard": {"when": 3}}))
    loaded = load_paths([path], "user")
    [issue] = [i for i in loaded.issues if i.field == "guard"]
    assert "g1" in str(issue) and '"when"' in str(issue)


@pytest.mark.parametrize("word,expected", [("1", 1), ("0.5", 0.5)])
def test_stored_values_read_back_as_the_flag_parses_them(word, expected):
    a = args_523()
    spec = a["tp_size"] if isinstance(expected, int) else a["mem_fraction_static"]
    assert remedy._parsed(spec, word) == expected


def test_a_way_on_a_flag_the_message_names_comes_first():
    """sglang's own words say which flag to change ("… Omit --radix-cache-backend."): of the
    proven ways, that one is offered first."""
    a = args_523()
    base = {"guard": {"when": "cfg.enable_lmcache and cfg.enable_hierarchical_cache"},
            "filePath": HOOK, "errorType": "raise", "githubUrl": "https://example.invalid/"}
    first = {**base, "errorMessage": "lmcache and hierarchical cache: drop --enable-lmcache"}
    second = {**base, "errorMessage": "Omit --enable-hierarchical-cache when using lmcache"}
    remedy.remediate(first, a)
    remedy.remediate(second, a)
    assert first["fixActions"][0][0]["flag"] == "--enable-lmcache"
    assert second["fixActions"][0][0]["flag"] == "--enable-hierarchical-cache"


def test_words_only_solutions_are_not_kept_in_memory_but_read_the_same():
    """A generated record whose solutions are the derived words keeps none (`words`); what it
    says is the file's text, word for word — as `references`, not as solutions: they point at
    the source and the issues, they do not say what to change."""
    loaded = {r.id: r for r in load_paths([GENERATED], "generated").records}
    compared = 0
    for raw in generated()[::97]:
        rec = loaded[raw["id"]]
        if not raw.get("fixActions") and rec.words:
            assert rec.references == tuple(raw["solutions"]), raw["id"]
            assert rec.how_to_fix == () and rec.remediation()["solutions"] == []
            compared += 1
        else:
            assert rec.how_to_fix == tuple(raw["solutions"]), raw["id"]
    assert compared > 200
