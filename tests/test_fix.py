"""`fixActions` and `sglang-matcher fix`: a failure's ways out applied to the real commands of
real sglang launches (`tests/fixtures/sglang/launch/*.cmd`, each with the log it produced)."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from matcher.catalog.load import validate_record
from matcher.catalog.schema import CatalogRecord, FixAction
from matcher.fix import apply

REPO = Path(__file__).resolve().parent.parent
LAUNCH = REPO / "tests" / "fixtures" / "sglang" / "launch"
SEED = "4e2cdd4d6209ebbd"


def command_of(name: str) -> list[str]:
    """The command a launch fixture ran (its `.cmd` file, comments left out)."""
    text = (LAUNCH / f"{name}.cmd").read_text(encoding="utf-8")
    [line] = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
    return shlex.split(line)


def fix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "matcher", "fix", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_remove_takes_the_flag_and_its_value():
    argv = command_of("int8_mamba_radix_lru")
    fixed = apply(argv, [FixAction("remove", "--radix-cache-backend")])
    assert "--radix-cache-backend" not in fixed.argv and "lru" not in fixed.argv
    assert fixed.argv == tuple(w for w in argv if w not in ("--radix-cache-backend", "lru"))
    assert fixed.removed == ("--radix-cache-backend lru",) and fixed.added == ()


def test_set_replaces_a_value_in_either_spelling_and_adds_an_absent_flag():
    argv = command_of("swa_ratio_out_of_range")
    [old] = [w for w in argv if w.startswith("--swa-full-tokens-ratio")] or [None]
    step = FixAction("set", "--swa-full-tokens-ratio", "0.8", range="(0, 1.0]")
    fixed = apply(argv, [step])
    assert fixed.argv.count("--swa-full-tokens-ratio") == 1
    i = fixed.argv.index("--swa-full-tokens-ratio")
    assert fixed.argv[i + 1] == "0.8" and fixed.added == ("--swa-full-tokens-ratio 0.8",)
    assert old is not None and any(old in r for r in fixed.removed)
    # `--flag=value` and an alias are the same flag; absent, it is appended
    assert apply(["python", "--tp-size=2"], [FixAction("set", "--tensor-parallel-size", "1",
                                                         aliases=("--tp-size",))]).argv == \
        ("python", "--tensor-parallel-size", "1")
    assert apply(["python"], [step]).argv == ("python", "--swa-full-tokens-ratio", "0.8")


def test_a_list_value_is_removed_whole_and_a_switch_added_once():
    argv = ["python", "-m", "sglang.launch_server", "--cuda-graph-bs", "1", "2", "4",
            "--enable-x"]
    fixed = apply(argv, [FixAction("remove", "--cuda-graph-bs"), FixAction("add", "--enable-x"),
                         FixAction("add", "--disable-y")])
    assert fixed.argv == ("python", "-m", "sglang.launch_server", "--enable-x", "--disable-y")


def test_env_goes_in_front_of_the_program_and_install_before_it():
    argv = ["CUDA_VISIBLE_DEVICES=0", "python", "-m", "sglang.launch_server"]
    fixed = apply(argv, [FixAction("env", name="SGLANG_X", value="1"),
                         FixAction("install", value="sgl-kernel>=0.3")])
    assert fixed.argv == ("CUDA_VISIBLE_DEVICES=0", "SGLANG_X=1", "python", "-m",
                          "sglang.launch_server")
    assert fixed.before == ("pip install 'sgl-kernel>=0.3'",)
    again = apply(fixed.argv, [FixAction("env", name="SGLANG_X", value="2")])
    assert again.argv[:2] == ("CUDA_VISIBLE_DEVICES=0", "SGLANG_X=2")


def test_a_placeholder_is_said_to_need_a_value():
    fixed = apply(command_of("argparse_missing_model_path"),
                  [FixAction("set", "--model-path", "<a HuggingFace repo id or a local dir>")])
    assert fixed.placeholders == ("--model-path <a HuggingFace repo id or a local dir>",)


@pytest.mark.parametrize(("actions", "field", "says"), [
    ([[{"op": "rm", "flag": "--a"}]], "fixActions[0][0]", "is not one of"),
    ([[{"op": "remove", "flag": "a"}]], "fixActions[0][0]", "--like-this"),
    ([[{"op": "set", "flag": "--a"}]], "fixActions[0][0]", "needs a string value"),
    ([[{"op": "remove", "flag": "--a", "value": "x"}]], "fixActions[0][0]", "unknown keys value"),
    ([{"op": "remove", "flag": "--a"}], "fixActions", "list of ways out"),
    ([[]], "fixActions", "non-empty"),
])
def test_a_bad_fix_names_the_record_and_the_step(actions, field, says):
    issues = validate_record({"id": "r", "messagePattern": "some specific message text",
                              "fixActions": actions}, "mine.json", 3, "user")
    assert isinstance(issues, list)
    [issue] = issues
    assert (issue.file, issue.index, issue.field) == ("mine.json", 3, field) and says in issue.problem


@pytest.fixture(scope="module")
def seed_with_fix(tmp_path_factory) -> Path:
    """The seed record as a user catalog with its two ways out (remove either flag)."""
    seed = json.loads((REPO / "patterns" / "sglang" / "curated" /
                       "000_seed_int8_mamba_radix_cache.json").read_text(encoding="utf-8"))
    record = seed.get("record", seed)
    record = dict(record[0] if isinstance(record, list) else record)
    record["fixActions"] = [[{"op": "remove", "flag": "--radix-cache-backend"}],
                            [{"op": "remove", "flag": "--enable-int8-mamba-checkpoint"}]]
    assert isinstance(validate_record(record, "x", 0, "user"), CatalogRecord)
    path = tmp_path_factory.mktemp("fix") / "seed.json"
    path.write_text(json.dumps([record]))
    return path


def test_fix_finds_the_failure_in_the_log_and_corrects_the_command(seed_with_fix):
    argv = command_of("int8_mamba_radix_lru")
    run = fix("--catalog", str(seed_with_fix), "--log", str(LAUNCH / "int8_mamba_radix_lru.log"),
              "--format", "json", "--", *argv)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["pattern_id"] == SEED and out["ways"] == 2
    assert out["command"] == [w for w in argv if w not in ("--radix-cache-backend", "lru")]
    assert out["other_ways"] == [["remove --enable-int8-mamba-checkpoint"]]
    second = fix("--catalog", str(seed_with_fix), "--pattern", SEED, "--way", "2", "--", *argv)
    assert second.returncode == 0 and "--enable-int8-mamba-checkpoint" not in \
        second.stdout.split("corrected command:")[1].split("\n")[1]
    assert "  - --enable-int8-mamba-checkpoint" in second.stdout


def test_fix_says_why_when_it_cannot(seed_with_fix, tmp_path):
    argv = command_of("int8_mamba_radix_lru")
    log = str(LAUNCH / "int8_mamba_radix_lru.log")
    words = json.loads(seed_with_fix.read_text())
    del words[0]["fixActions"]
    (tmp_path / "words.json").write_text(json.dumps(words))
    words_only = fix("--no-builtin", "--catalog", str(tmp_path / "words.json"), "--log", log,
                     "--", *argv)
    assert words_only.returncode == 1 and "in words only" in words_only.stdout
    assert all(s in words_only.stdout for s in words[0]["solutions"])
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"id": "x", "messagePattern": "a message not in this log"}]))
    unknown = fix("--no-builtin", "--catalog", str(other), "--log", log, "--", *argv)
    assert unknown.returncode == 1 and "no catalog record knows this failure" in unknown.stdout
    clean = tmp_path / "clean.log"
    clean.write_text("[2026-12-04 10:00:00] The server is fired up and ready to roll!\n")
    nothing = fix("--log", str(clean), "--", *argv)
    assert nothing.returncode == 0 and "nothing to fix" in nothing.stdout
    bad = fix("--pattern", "no-such-record", "--", *argv)
    assert bad.returncode == 2 and "no-such-record" in bad.stderr
    way = fix("--catalog", str(seed_with_fix), "--pattern", SEED, "--way", "3", "--", *argv)
    assert way.returncode == 2 and "has 2 ways out" in way.stderr


def test_events_carry_the_ways_out(seed_with_fix):
    run = subprocess.run([sys.executable, "-m", "matcher", "scan", "--format", "json",
                          "--catalog", str(seed_with_fix),
                          str(LAUNCH / "int8_mamba_radix_lru.log")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    [event] = [json.loads(x) for x in run.stdout.splitlines()
               if json.loads(x).get("pattern_id") == SEED]
    assert event["remediation"]["fix_actions"] == [
        [{"op": "remove", "flag": "--radix-cache-backend"}],
        [{"op": "remove", "flag": "--enable-int8-mamba-checkpoint"}]]


def test_a_step_may_name_its_flag_by_what_the_log_says():
    """argparse names the flag in its message: `{arguments}` and `{argument}` are the record's
    captures, resolved from the real log of each launch (the built-in records)."""
    unrecognized = command_of("argparse_unrecognized")
    run = fix("--log", str(LAUNCH / "argparse_unrecognized.log"), "--format", "json", "--",
              *unrecognized)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["command"] == [w for w in unrecognized if w != "--no-such-flag"]
    assert out["removed"] == ["--no-such-flag"]
    invalid = command_of("argparse_invalid_int")
    run = fix("--log", str(LAUNCH / "argparse_invalid_int.log"), "--format", "json", "--",
              *invalid)
    out = json.loads(run.stdout)
    assert "two" not in out["command"] and len(out["placeholders"]) == 1
    assert out["placeholders"][0].startswith(("--tp-size ", "--tensor-parallel-size "))
    # without the log there is nothing to name the flag with
    by_id = fix("--pattern", out["pattern_id"], "--", *invalid)
    assert by_id.returncode == 2 and "--log" in by_id.stderr


def _generated_arg_check_fixtures() -> list[str]:
    """Launch fixtures whose root cause is a generated record of sglang's argument checks
    (`arg_groups/`), read from the test table of root causes."""
    from tests.test_cli import LAUNCH_ROOT_CAUSES

    names = []
    for name, _ in LAUNCH_ROOT_CAUSES:
        text = (LAUNCH / f"{name}.log").read_text(encoding="utf-8", errors="replace")
        if "/sglang/srt/arg_groups/" in text:
            names.append(name)
    return names


def test_derived_fixes_change_real_failing_commands_and_are_proven():
    """Every real launch that failed on an argument check whose record is generated (its fix
    derived from the check's condition): `fix` finds the failure in the log, and its first way
    changes the command the launch ran — and that way is proven on the record's condition. The
    relaunch itself is `bench/verify_fixes.py`'s job (figures in docs/fix.md)."""
    from matcher.catalog import load_catalog, remedy
    from matcher.catalog.server_args import ServerArgsTable, default_path
    from matcher.commands import build_parser
    from matcher.commands.fix import cmd_fix
    from matcher.engine import Engine

    catalog = load_catalog()
    engine = Engine(catalog.records)
    flags = ServerArgsTable.load(default_path()).at("0.5.23")
    fixed = derived = 0
    for name in _generated_arg_check_fixtures():
        buf = io.StringIO()  # the command's own code, in this process: one catalog load
        args = build_parser().parse_args(["fix", "--log", str(LAUNCH / f"{name}.log"),
                                          "--format", "json", "--", *command_of(name)])
        code = cmd_fix(args, catalog, buf, engine=engine)
        text = buf.getvalue()
        if code != 0:  # a fix in words only: "<id> says how to fix it in words only"
            [said] = [x for x in text.splitlines() if "says how to fix it in words" in x]
            derived += catalog.by_id(said.split()[0]).layer == "generated"
            continue
        out = json.loads(text)
        rec = catalog.by_id(out["pattern_id"])
        if rec.layer != "generated":
            continue
        derived += 1
        way = [a.as_dict() for a in rec.fix_actions[out["way"] - 1]]
        assert remedy.proven(rec.guard.when, rec.file_path or "", flags, way), (name, way)
        if out["removed"] or out["added"]:
            fixed += 1
    assert derived >= 30
    assert fixed >= 0.8 * derived, (fixed, derived)


def test_choose_offers_the_way_that_changes_this_command_and_needs_no_value():
    """A derived record lists one way per flag: the one on a flag the command gives comes
    first; a way with a value left to fill in only when nothing else changes the command."""
    from matcher.fix import choose

    argv = command_of("int8_mamba_radix_lru")  # has --radix-cache-backend, not --enable-lmcache
    absent = [FixAction("remove", "--enable-lmcache")]
    present = [FixAction("remove", "--radix-cache-backend")]
    placeholder = [FixAction("set", "--page-size", "<page size>")]
    n, fixed = choose(argv, [absent, placeholder, present])
    assert n == 3 and fixed.removed == ("--radix-cache-backend lru",)
    n, fixed = choose(argv, [absent, placeholder])
    assert n == 2 and fixed.placeholders == ("--page-size <page size>",)
    n, fixed = choose(argv, [absent])
    assert n == 1 and not fixed.changes


def _memory_record() -> CatalogRecord:
    """The curated record of `Not enough memory. Please try to increase --mem-fraction-static.`
    (sglang's own words; real examples in patterns/sglang/curated/memory.json)."""
    from matcher.catalog import load_catalog

    catalog = load_catalog(generated=False)
    [rec] = [r for r in catalog.records if r.error_message
             == "Not enough memory. Please try to increase --mem-fraction-static."]
    return rec


def test_increase_the_flag_the_message_names_from_its_current_value_not_quantize():
    """The message asks for a higher --mem-fraction-static and the command gives 0.7: the fix
    raises it to a concrete value and says how it chose it; quantization, which changes what
    the model computes, is not offered first."""
    from matcher.fix import choose

    rec = _memory_record()
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m",
            "--mem-fraction-static", "0.7"]
    _, fixed = choose(argv, rec.fix_actions)
    assert "--mem-fraction-static 0.85" in shlex.join(fixed.argv)
    assert "--quantization" not in fixed.argv and not fixed.changes_model
    assert fixed.notes and "0.7 → 0.85" in fixed.notes[0]
    # Without the flag in the command: still that flag, its value left to choose.
    _, fixed = choose(argv[:5], rec.fix_actions)
    assert fixed.placeholders and fixed.placeholders[0].startswith("--mem-fraction-static")
    assert "--quantization" not in fixed.argv


def test_a_way_that_changes_the_models_numerics_is_ranked_last_and_marked():
    quantize = (FixAction("set", "--quantization", "fp8"),)
    more_gpus = (FixAction("set", "--tp-size", "2"),)
    from matcher.fix import choose

    n, fixed = choose(["python", "-m", "sglang.launch_server"], [quantize, more_gpus])
    assert n == 2 and not fixed.changes_model
    assert apply(["python"], quantize).changes_model
