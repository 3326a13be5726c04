"""Do our fixes work on real sglang? Relaunch every launch fixture's command with its fix.

For each `tests/fixtures/sglang/launch/X.cmd` (the command that produced `X.log`): find the
failure of `X.log` as `sglang-matcher fix` does, apply its first way out (`fixActions`) to the
command, run the corrected command on a real sglang, and scan what it prints. The fix works
when the original failure's record is no longer among the events: sglang got past that check
(a later, different failure is fine — a config-only model has no weights — and is recorded
with its own record; so is a launch still running at the timeout).

Installs nothing by itself: it needs an sglang 0.5.23 venv that runs the launcher on a machine
without a GPU (`--python`, default /tmp/sgvenv/bin/python; how to make one is in
`tests/fixtures/sglang/launch/README.md`). It makes the tiny model directories the commands
name (`/tmp/sgmodel/<name>`: the fixture's `config.json` and a WordLevel tokenizer built with the
venv's `tokenizers`). Not part of the test suite: each launch takes 10–60 s.

    python bench/verify_fixes.py                         # every fixture; bench/results/fixes.json
    python bench/verify_fixes.py --only int8_mamba_radix_lru --timeout 90
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "tests" / "fixtures" / "sglang" / "launch"
MODELS = ROOT / "tests" / "fixtures" / "sglang" / "models"
sys.path.insert(0, str(ROOT))

from matcher.catalog import load_catalog  # noqa: E402
from matcher.catalog.server_args import ServerArgsTable, default_path, flags_of  # noqa: E402
from matcher.fix import apply, choose, resolved  # noqa: E402
from matcher.scan import scan_events  # noqa: E402

_MODEL_DIR = re.compile(r"/tmp/sgmodel/(?P<name>[\w.-]+)")
_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i + 3 for i in range(200)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.save(sys.argv[1] + "/tokenizer.json")
open(sys.argv[1] + "/tokenizer_config.json", "w").write(
    '{"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", '
    '"unk_token": "<unk>"}')
"""


def command(path: Path) -> tuple[list[str], str]:
    text = path.read_text(encoding="utf-8")
    [line] = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
    return shlex.split(line), text


def prepare_models(python: str) -> None:
    """/tmp/sgmodel/<name>: config.json from the fixtures, a tokenizer, as the launches had."""
    for model in MODELS.iterdir():
        target = Path("/tmp/sgmodel") / model.name
        target.mkdir(parents=True, exist_ok=True)
        (target / "config.json").write_bytes((model / "config.json").read_bytes())
        if not (target / "tokenizer.json").exists():
            subprocess.run([python, "-c", _TOKENIZER, str(target)], check=True, timeout=120)


def launch(argv: list[str], python: str, timeout: float, log: Path) -> tuple[int | None, float]:
    """Run a fixture's command with `python` for its interpreter; its output to `log`."""
    words = list(argv)
    env = dict(os.environ)
    while words and re.match(r"[A-Za-z_]\w*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words and words[0].endswith("python"):
        words[0] = python
    Path("/tmp/runs").mkdir(exist_ok=True)
    start = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(words, cwd="/tmp/runs", env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            code = None
    return code, time.monotonic() - start


def argument_check(record: Any) -> bool:
    """The failure is a check of the command's arguments: argparse's own, or one raised by
    sglang's server-argument validation (`server_args.py`, `arg_groups/`)."""
    where = record.file_path or ""
    return record.slug.startswith("argparse-") or "sglang/srt/server_args.py" in where \
        or "sglang/srt/arg_groups/" in where


def fill_placeholders(way: Any, flags: dict[str, Any],
                      captures: dict[str, str]) -> tuple[list[Any], list[str]]:
    """A way's `<placeholder>` values replaced by the flag's default in sglang 0.5.23 (when it
    has one: what an operator who drops their bad value gets), else its first choice."""
    from dataclasses import replace

    out, filled = [], []
    for step in resolved(way, captures):
        spec = flags.get(step.flag or "")
        if step.placeholder and spec is not None and spec.switch is None:
            if spec.default is not None:
                value = str(spec.default).lower() if isinstance(spec.default, bool) \
                    else str(spec.default)
                why = "its default"
            elif spec.choices:
                value, why = str(spec.choices[0]), "its first choice"
            else:
                out.append(step)
                continue
            step = replace(step, value=value)
            filled.append(f"{step.flag} {value} ({why})")
        out.append(step)
    return out, filled


def first_cause(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    causes = [e for e in events if e.get("role") != "consequence" and e.get("pattern_id")
              and e.get("severity") in ("critical", "error")]
    return causes[0] if causes else None


def main() -> int:
    from matcher import cache

    cache.use(cache.default_cache_dir())  # as sglang-matcher does: warm starts
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default="/tmp/sgvenv/bin/python")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--only", action="append", help="a fixture name (repeatable)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fixes.json")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sglang-matcher-fixes"))
    ap.add_argument("--merge", action="store_true",
                    help="keep the results already in --out for the fixtures not run now")
    args = ap.parse_args()
    if not Path(args.python).exists():
        raise SystemExit(f"{args.python}: no sglang venv (see the docstring)")
    args.work.mkdir(parents=True, exist_ok=True)
    prepare_models(args.python)
    catalog = load_catalog()
    flags = flags_of(ServerArgsTable.load(default_path()).at("0.5.23").values())
    results = []
    for cmd in sorted(LAUNCH.glob("*.cmd")):
        name = cmd.stem
        if args.only and name not in args.only:
            continue
        argv, _ = command(cmd)
        events = scan_events([str(cmd.with_suffix(".log"))], catalog, err=io.StringIO()).events
        known = [e for e in events if e.get("pattern_id") and e.get("role") != "consequence"
                 and e.get("severity") in ("critical", "error")]
        chosen = next((e for e in known if catalog.by_id(e["pattern_id"]).fix_actions), None)
        row: dict[str, Any] = {"fixture": name, "command": argv}
        first = catalog.by_id(known[0]["pattern_id"]) if known else None
        row["argument_check"] = first is not None and argument_check(first)
        if chosen is None:
            row.update(status="no fix", failure=known[0]["pattern_id"] if known else None)
            results.append(row)
            print(f"{name:40} no fixActions for its failure", flush=True)
            continue
        record = catalog.by_id(chosen["pattern_id"])
        way, fixed = choose(argv, record.fix_actions, chosen.get("captures") or {})
        filled = []
        if fixed.placeholders:  # the operator's value: try the flag's default where it has one
            steps, filled = fill_placeholders(record.fix_actions[way - 1], flags,
                                              chosen.get("captures") or {})
            if not [s for s in steps if s.placeholder]:
                fixed = apply(argv, steps, chosen.get("captures") or {})
        row.update(failure=record.id, slug=record.slug, way=way, steps=list(fixed.steps),
                   fixed_command=list(fixed.argv), **({"filled": filled} if filled else {}))
        if fixed.placeholders or fixed.before:
            row.update(status="needs the operator", placeholders=list(fixed.placeholders),
                       before=list(fixed.before))
            results.append(row)
            print(f"{name:40} needs {fixed.placeholders or fixed.before}", flush=True)
            continue
        log = args.work / f"{name}.fixed.log"
        code, took = launch(list(fixed.argv), args.python, args.timeout, log)
        after = scan_events([str(log)], catalog, err=io.StringIO()).events
        gone = all(e.get("pattern_id") != record.id for e in after)
        later = first_cause(after)
        row.update(status="fixed" if gone else "still fails", exit=code,
                   seconds=round(took, 1), timed_out=code is None,
                   later_failure=(later or {}).get("pattern_id"),
                   later_message=((later or {}).get("message") or "").split("\n")[0][:200])
        results.append(row)
        print(f"{name:40} {row['status']:12} exit {code} in {took:5.1f} s; then "
              f"{row['later_failure']}: {row['later_message'][:80]}", flush=True)
    if args.merge and args.out.exists():
        ran = {r["fixture"] for r in results}
        kept = [r for r in json.loads(args.out.read_text())["results"] if r["fixture"] not in ran
                and (LAUNCH / f"{r['fixture']}.cmd").exists()]
        results = sorted(results + kept, key=lambda r: r["fixture"])
    tried = [r for r in results if r["status"] in ("fixed", "still fails")]
    checks = [r for r in results if r.get("argument_check")]
    fixed_n = sum(r["status"] == "fixed" for r in tried)
    summary = {"fixtures": len(results), "relaunched": len(tried), "fixed": fixed_n,
               "no_fix": sum(r["status"] == "no fix" for r in results),
               "needs_operator": sum(r["status"] == "needs the operator" for r in results),
               "argument_checks": len(checks),
               "argument_checks_fixed": sum(r["status"] == "fixed" for r in checks)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "results": results}, indent=1) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
