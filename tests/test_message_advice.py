"""The step an sglang message states (`matcher.catalog.message_advice`), on messages users
pasted (train split) and on the shipped records."""

from __future__ import annotations

import json
import re
from pathlib import Path

from matcher.catalog import message_advice

ROOT = Path(__file__).resolve().parent.parent
FIELD = ROOT / "tests" / "fixtures" / "field"
GENERATED = ROOT / "patterns" / "sglang" / "generated" / "sglang.jsonl"


def _pasted(name: str, first: str, lines: int) -> str:
    """`lines` lines of an excerpt from the one starting with `first`, wrappers dropped."""
    text = (FIELD / name).read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(text) if first in line)
    return "\n".join(re.sub(r"^[\w-]+\s+\|\s?|^\[[^\]]+\]\s*", "", line)
                     for line in text[at:at + lines])


def test_a_numbered_list_of_solutions_gives_its_first_step() -> None:
    # https://github.com/sgl-project/sglang/issues/11218 (train), docker compose's prefix dropped
    message = _pasted("gpu/11218-capture-failed-torch-compile-compose.log",
                      "Capture cuda graph failed", 6).split(": ", 1)[1]
    assert message_advice.advice(message) == (
        "Set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        ("--mem-fraction-static",))


def test_a_work_around_clause_is_a_step() -> None:
    # https://github.com/sgl-project/sglang/issues/27811 (train)
    message = _pasted("sglang-a/27811-piecewise-graph-forward-context-num-tokens-amd.log",
                      "To work around this error", 1)
    assert message_advice.advice(message) == (
        "Add --disable-piecewise-cuda-graph to your launch command.",
        ("--disable-piecewise-cuda-graph",))


def test_facts_and_flagless_advice_are_no_step() -> None:
    assert message_advice.advice("--dsv4-attn-backend trtllm requires an SM100/SM103 "
                                 "(Blackwell) GPU.") is None
    assert message_advice.advice("Please report this issue at https://github.com/sgl-project/"
                                 "sglang/issues/new/choose") is None
    # a value sglang fills at run time is not copied into a fix
    assert message_advice.advice("Please use --attention-backend {backend}.") is None


def test_shipped_records_carry_the_step_only_where_every_release_has_the_flags() -> None:
    records = [json.loads(line) for line in GENERATED.read_text(encoding="utf-8").splitlines()]
    advised = [r for r in records if message_advice.ADVICE_TAG in (r.get("tags") or [])]
    assert len(advised) > 100
    streaming = next(r for r in advised
                     if r["errorMessage"].startswith("Streaming sessions are disabled."))
    assert streaming["solutions"][0] == ("Do what the message says: Relaunch with "
                                         "--enable-streaming-session.")
    # the diffusion server's flags are not in the table of sglang's parser: left as they were
    fsdp = [r for r in records if "Run without --use-fsdp-inference" in (r.get("errorMessage") or "")]
    assert fsdp and all(message_advice.ADVICE_TAG not in r["tags"] for r in fsdp)


def test_a_bound_the_message_states_for_a_flag_is_its_fix() -> None:
    # a launch here: tests/fixtures/sglang/launch/cuda_graph_prefill_max_context_zero.cmd
    log = (ROOT / "tests" / "fixtures" / "sglang" / "launch"
           / "cuda_graph_prefill_max_context_zero.log").read_text(encoding="utf-8")
    message = next(line for line in log.splitlines()
                   if line.startswith("ValueError: ")).split(": ", 1)[1]
    assert message_advice.bound_advice(message) == (
        "--cuda-graph-prefill-max-context", "a positive integer", 0.0, False)
    records = [json.loads(line) for line in GENERATED.read_text(encoding="utf-8").splitlines()]
    record = next(r for r in records if r.get("errorMessage") == message)
    # no default: the check runs only on a value given (the same launch without it passes it)
    assert record["solutions"][0] == (
        "Give `--cuda-graph-prefill-max-context` a value that is a positive integer, as the "
        "message says, or leave `--cuda-graph-prefill-max-context` out of the launch command "
        "(it has no default value).")


def test_a_bound_naming_another_flag_or_inside_a_sentence_is_no_fix() -> None:
    assert message_advice.bound_advice("--speculative-draft-window-size must be >= "
                                       "--speculative-num-draft-tokens (block_size).") is None
    assert message_advice.bound_advice("The value of --max-ep-size must be a positive "
                                       "integer.") is None
    assert message_advice.bound_advice("--linear-replayssm-cache-len must be >= 1, got 0.")[2:] \
        == (1.0, True)
    assert message_advice.bound_advice("--lora-drain-wait-threshold must be non-negative.")[3]
