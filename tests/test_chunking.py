"""However a log is cut into chunks, the same lines and the same records come out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from matcher.decode import LineSplitter
from matcher.framing import Framer
from matcher.types import Chunk, Record

PIECES = [
    "[2026-01-01 12:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 6\n",
    "[2026-01-01 12:00:01 DP0 TP1 EP1] Scheduler hit an exception: Traceback (most recent call last):\n",
    '  File "/sgl/scheduler.py", line 2981, in run_scheduler_process\n',
    "    scheduler.event_loop_normal()\n",
    "           ^^^^^^^^^^^^^^^^^^^^^^^\n",
    "ValueError: --enable-int8-mamba-checkpoint only supports the built-in mamba radix cache\n",
    "Traceback (most recent call last):\n",
    "\n",
    "During handling of the above exception, another exception occurred:\n",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total)\n",
    "Possible solutions:\n",
    "[2026-01-01 12:00:02] Received sigquit from a child process. It usually means the child failed.\n",
    "\x1b[32mINFO\x1b[0m:     127.0.0.1:40000 - \"POST /generate HTTP/1.1\" 200 OK\n",
    "ünïcödé ✓ 日本語 line\n",
    "line with CRLF\r\n",
    "NUL\x00byte\n",
]


def frame_chunks(data: bytes, cuts: list[int], max_line_bytes: int = 1 << 20) -> list[Record]:
    splitter = LineSplitter("s", max_line_bytes=max_line_bytes)
    framer = Framer()
    records: list[Record] = []
    bounds = sorted({c for c in cuts if 0 < c < len(data)}) + [len(data)]
    start = 0
    for end in bounds:
        for line in splitter.feed(Chunk(data[start:end], "s", end)):
            records += framer.feed(line)
        start = end
    for line in splitter.finish():
        records += framer.feed(line)
    return records + framer.finish()


log_text = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(log_text, st.lists(st.integers(min_value=0, max_value=4000), max_size=30),
       st.binary(max_size=8))
def test_any_chunking_gives_the_same_records(text, cuts, tail):
    """Random cut points (inside multi-byte characters too) never change the records."""
    data = text.encode() + tail  # a trailing partial line, possibly invalid UTF-8
    assert frame_chunks(data, cuts) == frame_chunks(data, [])


@settings(max_examples=200, deadline=None)
@given(log_text, st.lists(st.integers(min_value=0, max_value=4000), max_size=30))
def test_any_chunking_gives_the_same_lines_with_a_line_cap(text, cuts):
    """With a small line cap, truncation is the same whatever the chunking."""
    data = text.encode()

    def lines(points):
        s = LineSplitter("s", max_line_bytes=16)
        out, start = [], 0
        for end in sorted({c for c in points if 0 < c < len(data)}) + [len(data)]:
            out += s.feed(Chunk(data[start:end], "s", end))
            start = end
        return out + s.finish()

    assert lines(cuts) == lines([])


def test_offsets_and_line_numbers_point_at_each_line():
    data = b"first\r\nsecond\n\xff\xfeinvalid\nlast-no-newline"
    s = LineSplitter("s")
    lines = s.feed(Chunk(data[:9], "s", 9)) + s.feed(Chunk(data[9:], "s", len(data))) + s.finish()
    assert [(x.text, x.offset, x.end_offset, x.lineno) for x in lines] == [
        ("first", 0, 7, 1),
        ("second", 7, 14, 2),
        ("\ufffd\ufffdinvalid", 14, 24, 3),
        ("last-no-newline", 24, 39, 4),
    ]


def test_over_long_line_keeps_its_head_and_drops_the_rest():
    s = LineSplitter("s", max_line_bytes=10)
    data = b"x" * 25 + b"\nnext\n"
    lines = s.feed(Chunk(data[:7], "s", 7)) + s.feed(Chunk(data[7:], "s", len(data)))
    assert [(x.text, x.truncated) for x in lines] == [("x" * 10, True), ("next", False)]
    assert s.pending_bytes == 0
