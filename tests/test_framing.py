"""Framing: sglang's prefix, ANSI codes and Python tracebacks become the right records."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.catalog.check import frame_text
from matcher.framing import SLOW_LINE_LIMIT, Framer, split_prefix, strip_ansi
from matcher.types import ExceptionLine, Line


def test_prefix_gives_timestamp_ranks_and_message():
    """Rank tags of every parallelism kind are parsed; milliseconds are kept."""
    p = split_prefix("[2026-01-01 12:00:00.123 DP1 TP1 EP1] Load weight end.")
    assert (p.log_ts, p.ranks, p.message, p.has_prefix) == (
        "2026-01-01 12:00:00.123", ("DP1", "TP1", "EP1"), "Load weight end.", True)
    p = split_prefix("[2026-01-01 12:00:00 DP0 PP0] x")
    assert p.ranks == ("DP0", "PP0")
    p = split_prefix("[2026-01-01 12:00:00] server_args=ServerArgs()")
    assert (p.ranks, p.message) == ((), "server_args=ServerArgs()")
    p = split_prefix("INFO:     Started server process [1234]")
    assert (p.has_prefix, p.message) == (False, "INFO:     Started server process [1234]")


def test_ansi_codes_are_stripped_real_and_literal():
    """Colour codes written as bytes and written out as `\\u001b[..m` text both disappear."""
    assert strip_ansi("\x1b[32mINFO\x1b[0m:  ok") == "INFO:  ok"
    assert strip_ansi("\\u001b[31mERROR\\u001b[0m x") == "ERROR x"
    records = frame_text("\x1b[33m[2026-01-01 12:00:00 TP0] Decode batch.\x1b[0m")
    assert [(r.ranks, r.header) for r in records] == [(("TP0",), "Decode batch.")]


def test_bare_traceback_is_one_record_with_caret_lines():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/runpy.py", line 198, in _run_module_as_main\n'
        "    return _run_code(code, main_globals, None,\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "ValueError: bad flag\n"
    )
    records = frame_text(text)
    assert len(records) == 1
    r = records[0]
    assert (r.kind, r.header, r.exceptions, r.lines[0], len(r.lines)) == (
        "traceback", "", (ExceptionLine("ValueError", "bad flag"),),
        "Traceback (most recent call last):", 5)


def test_header_traceback_chained_and_multiline_message():
    """`Scheduler hit an exception:` heads the record; causes and the final exception are kept."""
    text = (
        "[2026-01-01 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/model_runner.py", line 10, in capture\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/x/scheduler.py", line 3, in run_scheduler_process\n'
        "Exception: Capture cuda graph failed: CUDA out of memory.\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        "[2026-01-01 12:00:01] Received sigquit from a child process. It usually means the child failed.\n"
    )
    tb, sigquit = frame_text(text)
    assert tb.header == "Scheduler hit an exception:"
    assert tb.ranks == ("TP0",) and tb.log_ts == "2026-01-01 12:00:00"
    assert tb.exceptions == (
        ExceptionLine("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 20.00 MiB."),
        ExceptionLine("Exception", "Capture cuda graph failed: CUDA out of memory.\n"
                      "Possible solutions:\n"
                      "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)"),
    )
    assert (sigquit.kind, sigquit.ranks) == ("line", ())
    assert sigquit.header.startswith("Received sigquit")


def test_exception_group_records_group_and_members():
    text = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "/x/a.py", line 1, in <module>\n'
        "  | ExceptionGroup: startup failed (2 sub-exceptions)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        '    |   File "/x/b.py", line 2, in f\n'
        "    | ValueError: bad a\n"
        "    +---------------- 2 ----------------\n"
        "    | TypeError: bad b\n"
        "    +------------------------------------\n"
        "[2026-01-01 12:00:00] next\n"
    )
    group, nxt = frame_text(text)
    assert [e.error_class for e in group.exceptions] == ["ExceptionGroup", "ValueError", "TypeError"]
    assert nxt.header == "next"


def _eight_rank_log() -> str:
    """Scheduler crashes on TP0–TP7 as sglang writes them: one block per rank, interleaved."""
    blocks = []
    for rank in (3, 0, 7, 1, 5, 2, 6, 4):
        blocks.append(
            f"[2026-03-01 10:00:0{rank % 3} TP{rank}] Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2981, in run_scheduler_process\n'
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
            "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            f"RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled system error, rank {rank}\n"
        )
        if rank == 7:
            blocks.append("[2026-03-01 10:00:01 TP7] Decode batch. #running-req: 0\n")
    blocks.append("[2026-03-01 10:00:03] Received sigquit from a child process. It usually means the child failed.\n")
    return "".join(blocks)


def test_eight_interleaved_rank_tracebacks_give_one_record_per_rank():
    records = frame_text(_eight_rank_log())
    tracebacks = [r for r in records if r.kind == "traceback"]
    assert sorted(r.ranks for r in tracebacks) == [(f"TP{i}",) for i in range(8)]
    for r in tracebacks:
        rank = r.ranks[0][2:]
        assert r.exceptions[-1].message.endswith(f"rank {rank}")
        assert len(r.lines) == 5
    assert records[-1].header.startswith("Received sigquit")


def test_line_level_interleaving_keeps_frames_with_their_rank():
    """A prefixed line of another rank in the middle of a traceback's frames does not cut it."""
    text = (
        "[2026-01-01 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/a.py", line 1, in f\n'
        "[2026-01-01 12:00:00 TP1] Prefill batch. #new-seq: 1\n"
    )
    framer = Framer()
    out = []
    for i, raw in enumerate(text.splitlines()):
        out += framer.feed(Line(raw, "s", i, i + 1))
    assert [r.kind for r in out] == ["line"]  # TP0's traceback still open
    assert framer.open_tracebacks == 1
    out += framer.feed(Line("ValueError: late", "s", 9, 10))
    out += framer.finish()
    assert [(r.kind, r.ranks) for r in out] == [("line", ("TP1",)), ("traceback", ("TP0",))]


def test_cut_off_traceback_still_yields_a_record_at_end_of_input():
    records = frame_text("Traceback (most recent call last):\n  File \"/x\", line 1, in f")
    assert [(r.kind, r.exceptions) for r in records] == [("traceback", ())]


def test_long_traceback_is_capped_but_keeps_its_exception():
    framer = Framer(max_traceback_lines=10)
    lines = ["Traceback (most recent call last):"] + ['  File "/x", line 1, in f'] * 1000 + [
        "RecursionError: maximum recursion depth exceeded"]
    out = []
    for i, raw in enumerate(lines):
        out += framer.feed(Line(raw, "s", i, i + 1))
    out += framer.finish()
    (r,) = out
    assert (len(r.lines), r.truncated, r.exceptions[-1].error_class) == (10, True, "RecursionError")


def test_a_traceback_cut_off_in_its_frames_is_flushed_after_flush_after():
    framer = Framer(flush_after=5.0, exception_grace=0.1)
    assert framer.feed(Line("Traceback (most recent call last):", "s", 0, 1), now=100.0) == []
    assert framer.feed(Line('  File "x.py", line 1, in f', "s", 1, 2), now=100.5) == []
    assert framer.due_in(100.5) == pytest.approx(5.0)
    assert framer.tick(104.0) == []
    (r,) = framer.tick(105.5)
    assert (r.kind, r.exceptions) == ("traceback", ())


def test_a_traceback_whose_next_line_is_still_being_written_stays_open():
    """A slow writer (a byte every 100 ms): while bytes of the next line come, a traceback in
    its frames counts idle from the last byte (up to `SLOW_LINE_LIMIT` after its last line),
    and one past its exception line waits up to `flush_after` instead of `exception_grace`."""
    framer = Framer(flush_after=5.0, exception_grace=0.1)
    framer.feed(Line("Traceback (most recent call last):", "s", 0, 1), now=100.0)
    framer.line_growing(103.0)
    framer.line_growing(106.0)
    assert framer.tick(110.5) == []  # 4.5 s after the last byte
    assert framer.due_in(110.5) == pytest.approx(0.5)
    framer.feed(Line('  File "x.py", line 1, in f', "s", 1, 2), now=111.0)
    framer.line_growing(111.0 + SLOW_LINE_LIMIT + 30)  # no line takes that long to write
    assert framer.due_in(111.0) == pytest.approx(SLOW_LINE_LIMIT + 5.0)
    framer.feed(Line("KeyError: 'x'", "s", 2, 3), now=200.0)
    framer.line_growing(200.05)
    assert framer.tick(200.2) == []  # past the grace: its next line is on its way
    (r,) = framer.tick(205.0)
    assert (r.offset, len(r.lines), r.exceptions) == (0, 3, (ExceptionLine("KeyError", "'x'"),))


def test_a_traceback_at_its_exception_line_closes_after_the_grace_unless_it_goes_on():
    """The last thing a dying server writes is its exception line: no next line closes it,
    so `exception_grace` after it does. A chained cause printed at once keeps it open."""
    framer = Framer(flush_after=5.0, exception_grace=0.1)
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1, in f',
             "KeyError: 'x'", "", ("During handling of the above exception, another exception "
             "occurred:"), "", "Traceback (most recent call last):", '  File "y.py", line 2, in g',
             "RuntimeError: lost 'x'"]
    for i, text in enumerate(lines[:3]):
        assert framer.feed(Line(text, "s", i, i + 1), now=100.0) == []
    assert framer.due_in(100.0) == pytest.approx(0.1)
    assert framer.tick(100.05) == []
    for i, text in enumerate(lines[3:], start=3):  # the chain, within the grace
        assert framer.feed(Line(text, "s", i, i + 1), now=100.08) == []
    assert framer.tick(100.15) == []  # the clock restarted at the last line
    (r,) = framer.tick(100.18)
    assert r.exceptions == (ExceptionLine("KeyError", "'x'"),
                            ExceptionLine("RuntimeError", "lost 'x'"))
    assert framer.due_in(100.18) is None


def test_lone_exception_line_is_parsed_as_one():
    (r,) = frame_text("[2026-01-01 12:00:00 TP2] torch.distributed.DistBackendError: NCCL error")
    assert (r.kind, r.exceptions) == ("line", (ExceptionLine("torch.distributed.DistBackendError", "NCCL error"),))
    (r,) = frame_text("INFO:     127.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK")
    assert r.exceptions == ()


def test_logger_exception_traceback_inherits_the_message_lines_ranks():
    """`logger.exception("…")`: the prefixed message line, then an unprefixed traceback."""
    text = (
        "[2026-01-01 12:00:00 TP2] Port is already in use. Try another --port.\n"
        "Traceback (most recent call last):\n"
        '  File "/x/http_server.py", line 1, in launch\n'
        "OSError: [Errno 98] Address already in use\n"
    )
    line, tb = frame_text(text)
    assert (line.kind, line.ranks) == ("line", ("TP2",))
    assert (tb.kind, tb.ranks, tb.log_ts, tb.exceptions) == (
        "traceback", ("TP2",), "2026-01-01 12:00:00",
        (ExceptionLine("OSError", "[Errno 98] Address already in use"),))


def test_lone_exception_line_keeps_its_continuation_lines():
    """sglang logs `f"{type(e).__name__}: {e}\\n{hint}"` without a traceback: one record."""
    text = (
        "[2026-01-01 12:00:00 TP0] AcceleratorError: CUDA error: an illegal memory access was encountered\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        "\n"
        "Fail when using backend: tc_piecewise for prefill runner.\n"
        "[2026-01-01 12:00:01 TP0] next\n"
    )
    lone, nxt = frame_text(text)
    assert (lone.kind, lone.ranks, len(lone.lines)) == ("line", ("TP0",), 4)
    assert lone.exceptions == (ExceptionLine(
        "AcceleratorError", "CUDA error: an illegal memory access was encountered\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n"
        "Fail when using backend: tc_piecewise for prefill runner."),)
    assert nxt.header == "next"


def test_message_with_blank_lines_stays_whole_and_warnings_end_it():
    text = (
        "Traceback (most recent call last):\n"
        "Exception: Capture cuda graph failed: CUDA error: misaligned address\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        "\n"
        "Possible solutions:\n"
        "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:182: UserWarning: CUDA initialization\n"
    )
    tb, warning = frame_text(text)
    assert tb.exceptions[-1].message.endswith("device-side assertions.\n\nPossible solutions:")
    assert warning.header.startswith("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:182")


def test_open_offsets_are_where_each_record_still_being_assembled_starts():
    """Two ranks' tracebacks and a lone exception line, all open: their first lines' offsets."""
    text = (
        "[2026-01-01 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "[2026-01-01 12:00:00 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
        "[2026-01-01 12:00:00 TP1] Decode batch. #running-req: 1\n"
        "[2026-01-01 12:00:00 TP2] torch.distributed.DistBackendError: NCCL error\n"
    )
    framer = Framer()
    out = []
    for i, raw in enumerate(text.splitlines()):
        out += framer.feed(Line(raw, "s", 10 * i, 10 * i + 10))
    assert [(r.kind, r.ranks, r.offset) for r in out] == [
        ("traceback", ("TP1",), 10), ("line", ("TP1",), 20)]
    assert sorted(framer.open_offsets()) == [0, 30]
    framer.finish()
    assert framer.open_offsets() == []


def test_a_native_error_line_after_an_exception_ends_it_and_each_failure_is_its_own_record():
    """An unknown exception, at once an `NCCL WARN` line, then a CUDA illegal-access traceback
    (real lines: sglang #4048's exception, #5594's NCCL line, #3713's traceback): a record
    each, the first exception's message without the NCCL line."""
    field = Path(__file__).parent / "fixtures" / "field"
    first = (field / "model-runtime" / "4048-max-new-tokens-none-typeerror.log"
             ).read_text().splitlines()[:2]
    nccl = next(x for x in (field / "distributed-build" / "5594-nccl-socket-connect-abort.log"
                            ).read_text().splitlines() if "NCCL WARN" in x)
    ima = (field / "gpu" / "3713-ima-lora-stream-sync.log").read_text().splitlines()
    text = "\n".join([*first, nccl, *ima]) + "\n"
    records = frame_text(text)[1:]  # the first: the paste's source line, alone
    assert [r.exceptions[-1].error_class if r.exceptions else None for r in records] == [
        "TypeError", None, "RuntimeError"]
    assert records[0].exceptions[-1].message == (
        "'>' not supported between instances of 'NoneType' and 'int'")
    assert records[1].header == nccl


def test_an_exception_line_after_another_is_a_record_of_its_own():
    """Two real exception lines back to back (sglang #6229's IndexError, #4048's TypeError):
    two failures, each with its own message; a line that only looks like the start of one
    (indented, or a warning) goes on being the message."""
    field = Path(__file__).parent / "fixtures" / "field"
    index_error = next(x for x in (field / "model-runtime" / "6229-grammar-queue-indexerror.log"
                                   ).read_text().splitlines() if x.startswith("IndexError:"))
    type_error = next(x for x in (field / "model-runtime" / "4048-max-new-tokens-none-typeerror.log"
                                  ).read_text().splitlines() if x.startswith("TypeError:"))
    first, second = frame_text(f"[2026-01-01 12:00:00 TP0] {index_error}\n{type_error}\n")
    assert (first.exceptions, second.exceptions) == (
        (ExceptionLine("IndexError", "list index out of range"),),
        (ExceptionLine("TypeError", type_error.split(": ", 1)[1]),))
    (tb,) = frame_text(f"{index_error}\n  {type_error}\nUserWarning: what follows\n")
    assert tb.exceptions[-1].message == f"list index out of range\n  {type_error}\nUserWarning: what follows"


def test_a_class_of_a_packages_errors_module_starts_a_record_whatever_its_name():
    """triton's `OutOfResources` (sglang #8513) does not end in `Error`; after another
    exception line it is a failure of its own, not that message's next line."""
    log = (Path(__file__).parent / "fixtures" / "field" / "distributed-build"
           / "8513-triton-out-of-resources-shared-memory.log").read_text()
    triton = next(x for x in log.splitlines() if x.startswith("triton.runtime.errors."))
    first, second = frame_text(f"RuntimeError: an earlier failure\n{triton}\n")
    assert first.exceptions == (ExceptionLine("RuntimeError", "an earlier failure"),)
    assert second.exceptions[0].error_class == "triton.runtime.errors.OutOfResources"
    # a dotted name outside an errors module is still text
    (only,) = frame_text("RuntimeError: an earlier failure\nsome.module.Thing: not a class\n")
    assert only.exceptions[0].message == "an earlier failure\nsome.module.Thing: not a class"
