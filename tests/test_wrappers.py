"""Any chain of line wrappers gives the events the bare log gives (issue: logs as they look in
the field). Each real log is wrapped, every line alike, in a chain drawn from a grammar of the
wrappers other programs put in front of sglang's text; rank wrappers are per line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher.catalog import load_catalog
from matcher.commands.scan import cmd_scan
from matcher.wrappers import unwrap

FIXTURES = Path(__file__).parent / "fixtures" / "sglang"
LOGS = sorted(FIXTURES.glob("launch/*.log")) + sorted(FIXTURES.glob("issues/*.log"))

# One wrapper each, as the programs write them (the argument is the line's number).
WRAPPERS = {
    "quote": lambda i: "> ",
    "kubectl-timestamps": lambda i: f"2026-12-02T14:32:{i % 60:02d}.{i:09d}Z ",
    "ci-bracketed-time": lambda i: f"[2026-12-02T14:32:{i % 60:02d}.123Z] ",
    "kubectl-prefix": lambda i: "[pod/sglang-0/server] ",
    "compose": lambda i: "sglang-1  | ",
    "syslog": lambda i: "Dec  2 14:32:19 gpu-node-3 sglang[2211]: ",
    "ray": lambda i: "(SGLangHttpServer pid=250977) ",
    "srun": lambda i: "0: ",
    "cloud-export": lambda i: f"ERROR 2026-12-02T14:32:{i % 60:02d}.31Z ",
    "fastchat": lambda i: f"2024-08-27 12:54:{i % 60:02d} | ERROR | stderr | ",
    "logging": lambda i: f"2025-06-30 06:18:{i % 60:02d},801 xinference.core.worker 113 ERROR    ",
}


def events(catalog, text: str, tmp: Path) -> list[tuple[str | None, str, str]]:
    log = tmp / "x.log"
    log.write_text(text, encoding="utf-8")
    out = io.StringIO()
    cmd_scan([str(log)], "json", catalog, out, err=io.StringIO())
    found = [json.loads(x) for x in out.getvalue().splitlines()]
    return [(e.get("pattern_id"), e["error_class"], e["message"].split("\n")[0]) for e in found]


@pytest.fixture(scope="module")
def curated():
    return load_catalog(generated=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log=st.sampled_from(LOGS),
       chain=st.lists(st.sampled_from(sorted(WRAPPERS)), min_size=1, max_size=3))
def test_any_chain_of_wrappers_gives_the_bare_logs_events(curated, tmp_path, log, chain):
    bare = log.read_text(encoding="utf-8")
    wrapped = "".join("".join(WRAPPERS[w](i) for w in chain) + line + "\n"
                      for i, line in enumerate(bare.splitlines()))
    expected = events(curated, bare, tmp_path)
    assert expected, log.name
    assert events(curated, wrapped, tmp_path) == expected, chain


def test_torch_rank_wrapped_tracebacks_of_interleaved_ranks_are_one_failure(curated, tmp_path):
    """torchrun's `[rankN]:` on every line, two ranks' copies of a real traceback interleaved
    line by line: one event (the ranks collapse), on both ranks, as with sglang's own prefix."""
    bare = (FIXTURES / "launch" / "int8_mamba_radix_lru.log").read_text(encoding="utf-8")
    tb = bare[bare.index("Traceback (most recent call last):"):].splitlines()
    tb = tb[:next(i for i, x in enumerate(tb) if x.startswith("ValueError")) + 1]
    lines = [f"[rank{r}]:{x}" for pair in zip(tb, tb, strict=True) for r, x in enumerate(pair)]
    log = tmp_path / "ranks.log"
    log.write_text("\n".join(lines) + "\n")
    out = io.StringIO()
    cmd_scan([str(log)], "json", curated, out, err=io.StringIO())
    (event,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert event["pattern_id"] == "4e2cdd4d6209ebbd" and sorted(event["ranks"]) == ["rank0", "rank1"]


@pytest.mark.parametrize(("line", "level"), [
    # tests/fixtures/field/projects/: gpustack#3383 (c10's letter), FastChat#167
    ("[rank1]:[W1119 17:59:26.271588084 TCPStore.cpp:125] [c10d] recvValue failed", "WARNING"),
    ("2024-02-08 09:56:23 | ERROR | stderr | Traceback (most recent call last):", "ERROR"),
    (("2025-06-30 06:18:36,801 xinference.core.worker 113 ERROR    [request b087e27a-55b4-11f0-"
      "93e7-7ac282aee84d] Leave launch_builtin_model"), "ERROR"),
    ("ERROR 2025-04-07T19:13:52.31Z KeyError: 'x'", "ERROR"),
    ("[rank6]: Traceback (most recent call last):", None),
    ("sglang  | TypeError: expected Tensor", None),
])
def test_unwrap_keeps_the_level_a_wrapper_gives(line, level):
    assert unwrap(line).level == level


@pytest.mark.parametrize(("line", "text", "rank"), [
    # Lines as users pasted them into sglang issues (tests/fixtures/field/).
    (("[rank6]:[E207 01:29:36.730311765 ProcessGroupNCCL.cpp:616] [Rank 6] Watchdog caught "
     "collective operation timeout"), "[Rank 6] Watchdog caught collective operation timeout",
     "rank6"),
    ("> [2025-11-06T02:10:00.702Z] KeyError: 'lm_head.weight'", "KeyError: 'lm_head.weight'",
     None),
    ("sglang  | TypeError: expected Tensor as element 1 in argument 0, but got NoneType",
     "TypeError: expected Tensor as element 1 in argument 0, but got NoneType", None),
    ("0: torch.distributed.DistBackendError: [1] is setting up NCCL communicator",
     "torch.distributed.DistBackendError: [1] is setting up NCCL communicator", None),
    ("(SGLangHttpServer pid=250977) [torch_memory_saver.cpp] CUresult error: 2 (out of memory)",
     "[torch_memory_saver.cpp] CUresult error: 2 (out of memory)", None),
    # sglang#3932: a paste that opens a backtick on its first line and closes it lines later.
    (("`[rank4]:[E304 12:54:52.122900428 ProcessGroupNCCL.cpp:616] [Rank 4] **Watchdog caught "
     "collective operation timeout:**"), ("[Rank 4] **Watchdog caught collective operation "
     "timeout:**"), "rank4"),
    # lm-sys/FastChat#3498: docker compose in front of FastChat's logger.
    (("ubuntu-xllm-stream-1-1  | 2024-08-27 12:54:55 | ERROR | stderr | Traceback (most recent "
     "call last):"), "Traceback (most recent call last):", None),
    # xorbitsai/inference#3745: xoscar's actor inside the message, and Python's logging in front.
    (("RuntimeError: [address=0.0.0.0:43399, pid=1793] Initialization failed. Please see the "
     "error messages above."), ("RuntimeError: Initialization failed. Please see the error "
     "messages above."), None),
    (("2025-06-30 06:18:36,801 xinference.core.worker 113 ERROR    [request b087e27a-55b4-11f0-"
     "93e7-7ac282aee84d] Leave launch_builtin_model, error: [address=0.0.0.0:43399, pid=1793] "
     "Initialization failed."), ("[request b087e27a-55b4-11f0-93e7-7ac282aee84d] Leave "
     "launch_builtin_model, error: Initialization failed."), None),
    # xorbitsai/inference#3138
    (("2025-03-28 08:30:52,932 xinference.api.restful_api 393044 ERROR    [address=0.0.0.0:44547, "
     "pid=393543] Initialization failed. Ple"), "Initialization failed. Ple", None),
    # Not wrappers: sglang's own prefix, a traceback's indentation, a plain message, a message
    # that starts with its own backticks, a level that no time follows.
    ("`A_log` must be a 1D tensor.", None, None),
    ("ERROR: Could not find a version that satisfies the requirement sglang", None, None),
    ("[2026-12-02 14:32:19 TP0] Scheduler hit an exception:", None, None),
    ('  File "/x/sglang/srt/managers/scheduler.py", line 3, in f', None, None),
    ("Traceback (most recent call last):", None, None),
    ("ValueError: --enable-int8-mamba-checkpoint only supports", None, None),
])
def test_unwrap_takes_off_wrappers_and_nothing_else(line, text, rank):
    u = unwrap(line)
    assert (u.text, u.rank, u.wrapped) == ((text, rank, True) if text else (line, None, False))


# Wrappers of no known shape, from a grammar: a host-like word, then any of a time, a level
# and a counter, behind separators no known wrapper uses. Digits vary from line to line.
_SEPARATORS = (" » ", " :: ", " ~ ", " -> ")


@st.composite
def unknown_wrapper(draw):
    host = draw(st.from_regex(r"[a-z]{3,8}", fullmatch=True))
    fields = draw(st.lists(st.sampled_from(["time", "level", "counter"]), unique=True,
                           max_size=3))
    seps = draw(st.lists(st.sampled_from(_SEPARATORS), min_size=len(fields) + 1,
                         max_size=len(fields) + 1))
    level = draw(st.sampled_from(["stderr", "ERR", "out"]))

    def wrap(i: int) -> str:
        text = f"{host}{i % 13}"
        for name, sep in zip(fields, seps, strict=False):
            value = {"time": f"17:{i % 60:02d}:{(i * 7) % 60:02d}.{i:03d}", "level": level,
                     "counter": str(i * 31)}[name]
            text += sep + value
        return text + seps[-1]

    return wrap


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log=st.sampled_from([p for p in LOGS if "Traceback (most recent call last):"
                            in p.read_text(encoding="utf-8")]),
       wrapper=unknown_wrapper())
def test_a_wrapper_never_seen_is_learned_from_the_first_traceback(curated, tmp_path, log, wrapper):
    """From the first traceback on (where the wrapper is learned), the wrapped log gives the
    events the bare log gives from that line on."""
    bare = log.read_text(encoding="utf-8")
    lines = bare.splitlines()
    first = next(i for i, x in enumerate(lines) if "Traceback (most recent call last):" in x)
    wrapped = "".join(wrapper(i) + line + "\n" for i, line in enumerate(lines))
    assert unwrap(wrapped.splitlines()[first]).text == wrapped.splitlines()[first]  # unknown

    def scanned(text: str, after: int) -> list[tuple[str | None, str, str]]:
        path = tmp_path / "x.log"
        path.write_text(text, encoding="utf-8")
        out = io.StringIO()
        cmd_scan([str(path)], "json", curated, out, err=io.StringIO())
        found = [json.loads(x) for x in out.getvalue().splitlines()]
        return [(e.get("pattern_id"), e["error_class"], e["message"].split("\n")[0])
                for e in found if e["line"] > after]

    expected = scanned("".join(x + "\n" for x in lines[first:]), 0)
    assert expected, log.name
    assert scanned(wrapped, first) == expected
