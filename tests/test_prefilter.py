"""The chunk prefilter skips lines only where reading them would have changed nothing.

The pipeline with the prefilter and the same pipeline reading every line are fed the same real
sglang logs — alone, and spliced at random places into a stream of ordinary traffic — in chunks
of many sizes, and must give the same events, line counts, line numbers and checkpoints. The
covers themselves are checked record by record: every example line of the curated catalog and
the message of every generated record make the prefilter point at their line.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import random
import re
from pathlib import Path

import pytest

from matcher.catalog import load_catalog
from matcher.catalog.patterns import literal_cover
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.prefilter import ChunkPrefilter
from matcher.types import Chunk

REPO = Path(__file__).resolve().parents[1]
REAL_LOGS = sorted(
    [*REPO.glob("examples/logs/*.log"), *REPO.glob("tests/fixtures/sglang/*/*.log")]
)
TRAFFIC = [
    ("[2026-01-01 12:00:{s:02d} TP{r}] Decode batch. #running-req: {n}, #token: 5120, "
    "token usage: 0.04, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0, "),
    ("[2026-01-01 12:00:{s:02d} TP{r}] Prefill batch. #new-seq: 1, #new-token: {n}, "
    "#cached-token: 0, token usage: 0.01, #running-req: 3, #queue-req: 0, "),
    '[2026-01-01 12:00:{s:02d}] INFO:     127.0.0.1:{n} - "POST /generate HTTP/1.1" 200 OK',
    ("[2026-01-01 12:00:{s:02d}] Receive: obj=GenerateReqInput(text='Hi {n} — こんにちは', "
    "rid='{n:x}')"),
    "",
]


@pytest.fixture(scope="module")
def engines() -> tuple[Engine, Engine]:
    catalog = load_catalog()
    sparse = Engine(catalog.records)
    assert sparse.chunk_prefilter is not None
    dense = copy.copy(sparse)
    dense.chunk_prefilter = None
    return sparse, dense


def run(engine: Engine, data: bytes, chunk: int, fmt: str = "plain"
        ) -> tuple[list, int, int | None, int, int, int]:
    """(events, lines, checkpoint, line number reached, malformed lines, lines skipped)."""
    pipeline = Pipeline(engine, input_format=fmt)
    events = []
    for start in range(0, len(data), chunk):
        piece = data[start:start + chunk]
        events += pipeline.feed(Chunk(piece, "s", start + len(piece))).events
    checkpoint = pipeline.checkpoint_offset("s")
    splitter = pipeline._splitters["s"]
    events += pipeline.finish()
    return (events, pipeline.stats.lines, checkpoint, splitter._lineno,
            pipeline.stats.lines_malformed, splitter.skipped)


def traffic(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(TRAFFIC).format(s=i % 60, r=rng.randrange(8), n=rng.randrange(1 << 16))
            for i in range(n)]


def spliced(seed: int) -> bytes:
    """Ordinary traffic with every real log dropped in whole at a random place."""
    rng = random.Random(seed)
    lines = traffic(rng, 3000)
    for log in REAL_LOGS:
        at = rng.randrange(len(lines) + 1)
        lines[at:at] = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("log", REAL_LOGS, ids=lambda p: p.name)
def test_each_real_log_gives_the_same_events_with_and_without_skipping(engines, log):
    sparse, dense = engines
    data = log.read_bytes()
    expected = run(dense, data, 1 << 20)
    assert expected[0], "every real log here holds at least one event"
    for chunk in (1 << 20, 4096, 211):
        got = run(sparse, data, chunk)
        assert got[:4] == expected[:4], (log.name, chunk)


@pytest.mark.parametrize("seed", [1, 2])
def test_real_logs_amid_traffic_give_the_same_events_and_most_lines_are_skipped(engines, seed):
    sparse, dense = engines
    data = spliced(seed)
    events, lines, checkpoint, lineno, _, skipped = run(dense, data, 1 << 20)
    assert skipped == 0
    for chunk in (1 << 20, 65536, 1999):
        got = run(sparse, data, chunk)
        assert got[:4] == (events, lines, checkpoint, lineno), chunk
        if chunk == 1 << 20:
            assert got[5] > 3000 * 0.9, "traffic lines are passed over, not framed"


def test_an_unprefixed_traceback_at_a_chunk_start_keeps_the_rank_of_the_line_before(engines):
    """`logger.exception`: the rank is on the line before the traceback, in the chunk before."""
    sparse, dense = engines
    head = "\n".join(traffic(random.Random(3), 500)) + "\n"
    message = "[2026-01-01 12:01:00 TP3] Scheduler hit an exception:\n"
    tb = ('Traceback (most recent call last):\n  File "/x.py", line 1, in f\n'
          "ValueError: Cannot find model module. 'X' is not a registered model in the "
          "Transformers library (only relevant if the model is meant to be in Transformers) "
          "and 'AutoModel' is not present in the model config's 'auto_map' (relevant if the "
          "model is custom).\n")
    data = (head + message + tb).encode()
    cut = len((head + message).encode())
    for engine in (sparse, dense):
        pipeline = Pipeline(engine, input_format="plain")
        events = pipeline.feed(Chunk(data[:cut], "s", cut)).events
        events += pipeline.feed(Chunk(data[cut:], "s", len(data))).events
        events += pipeline.finish()
        assert [e.ranks for e in events if e.error_class == "ValueError"] == [("TP3",)], \
            engine is sparse


def interleave(pieces: list[str], seed: int) -> bytes:
    """Each piece after a few traffic lines, a minute apart so no two share a window."""
    rng = random.Random(seed)
    out: list[str] = []
    for i, piece in enumerate(pieces):
        out += traffic(rng, rng.randrange(3))
        stamp = f"2026-01-{1 + i // 1440 % 28:02d} {i // 60 % 24:02d}:{i % 60:02d}:00"
        out.append(piece.replace("{ts}", stamp))
    return ("\n".join(out) + "\n").encode()


def test_every_curated_example_is_found_the_same_with_skipping(engines):
    sparse, dense = engines
    examples = [ex for r in load_catalog().records for ex in r.examples_match]
    assert len(examples) > 150
    data = interleave(examples, 4)
    expected = run(dense, data, 1 << 20)
    assert len(expected[0]) > 120
    assert run(sparse, data, 1 << 20)[:4] == expected[:4]


_MESSAGE_STAMP = re.compile(rb"\[2026-01-\d\d \d\d:\d\d:00 TP0\] ")


def test_every_generated_message_is_found_the_same_with_skipping(engines):
    """A generated record's template with its holes filled, logged on a prefixed line: the
    prefilter points at every such line a record matches. Reading all of them both ways took
    two minutes (each line is a real match, tried against the many records sharing its
    words), so the skipping side is the prefilter's own scan: the lines it passes over are read
    without skipping, alone, and must give no event."""
    import regex

    sparse, dense = engines
    assert sparse.chunk_prefilter is not None
    hole = regex.compile(r"\{[^{}]*\}|%[sdr]")
    messages = [
        "[{ts} TP0] " + hole.sub("x", r.error_message)
        for r in load_catalog().records
        if r.layer == "generated" and r.error_message and "\n" not in r.error_message
    ]
    assert len(messages) > 20_000
    data = interleave(messages, 5)
    lines = data.split(b"\n")[:-1]
    starts = list(itertools.accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
    pointed = {bisect.bisect_right(starts, end - 1) - 1
               for end in sparse.chunk_prefilter.hits(data)}
    # the messages' lines: interleave stamps them a minute apart, traffic is in second 0–59
    passed_over = [line for i, line in enumerate(lines)
                   if i not in pointed and _MESSAGE_STAMP.match(line)]
    assert len(passed_over) < len(messages) // 10, "most filled templates are matched"
    events = run(dense, b"\n".join(passed_over) + b"\n", 1 << 20)[0]
    assert [e for e in events if e.pattern_id] == [], "a line passed over gives an event"


def test_a_catalog_with_a_pattern_no_literal_covers_gets_no_prefilter():
    assert literal_cover(r"ab|cd") is None
    assert literal_cover(r"(?:Missing port|Empty host in)") == ("Missing port", "Empty host in")
    assert ChunkPrefilter.build([None], ()) is None
    assert ChunkPrefilter.build([(("Missing port",), False)], ()) is not None


def test_auto_format_decides_plain_from_the_first_chunk_and_reads_it_sparsely(engines):
    """A scan of a small log is one chunk: undecided until its first line, it must not fall
    back to framing every line. A CRI first chunk is decoded, never skipped over."""
    sparse, dense = engines
    data = spliced(1)
    expected = run(dense, data, len(data))
    auto = Pipeline(sparse)  # input_format "auto"
    events = auto.feed(Chunk(data, "s", len(data))).events
    skipped = auto._splitters["s"].skipped
    assert events + auto.finish() == expected[0]
    assert skipped > 3000 * 0.9
    cri = b"".join(b"2026-01-01T12:00:00.000000000Z stderr F " + line + b"\n"
                   for line in data.splitlines())
    auto = Pipeline(sparse)
    events = auto.feed(Chunk(cri, "c", len(cri))).events
    assert auto.detected_format("c") == "cri" and auto._splitters["c"].skipped > 3000 * 0.9
    assert [e.pattern_id for e in events + auto.finish()] == [e.pattern_id for e in expected[0]]


# -- CRI (/var/log/pods): the same, through the decoder ----------------------------------------

def to_cri(data: bytes, seed: int) -> bytes:
    """Each line as a kubelet would write it: a stream each, some cut into `P` pieces (at any
    byte, so inside a literal or a UTF-8 character too, and now and then with the other
    stream's line in between), and a few lines that are not CRI at all."""
    rng = random.Random(seed)
    out: list[bytes] = []
    for i, line in enumerate(data.split(b"\n")[:-1]):
        ts = b"2026-01-01T12:%02d:%02d.%09dZ" % (i // 60 % 60, i % 60, i)
        stream = rng.choice([b"stdout", b"stderr"])
        roll = rng.random()
        if roll < 0.01:
            out.append(b"garbage that is not a CRI line " + line[:20])
        if roll < 0.06 and len(line) > 2:
            cut = rng.randrange(1, len(line))
            out.append(ts + b" " + stream + b" P " + line[:cut])
            if rng.random() < 0.3:
                other = b"stdout" if stream == b"stderr" else b"stderr"
                out.append(ts + b" " + other + b" F interleaved traffic line")
            out.append(ts + b" " + stream + b" F " + line[cut:])
        else:
            out.append(ts + b" " + stream + b" F " + line)
    return b"\n".join(out) + b"\n"


# -- docker json-file: literals only where JSON cannot have escaped them -------------------------

def to_docker(data: bytes, seed: int) -> bytes:
    """Each line as docker's json-file driver writes it (compact, `<>&` escaped as Go does, or
    everything non-ASCII escaped too), some cut into partials (no `\\n` at the end of `log`), a
    few lines that do not parse."""
    rng = random.Random(seed)
    out: list[str] = []

    def entry(log: str, stream: str) -> str:
        text = json.dumps({"log": log, "stream": stream, "time": "2026-01-01T12:00:00.1234Z"},
                          separators=(",", ":"), ensure_ascii=rng.random() < 0.2)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")

    for line in data.decode("utf-8", "replace").split("\n")[:-1]:
        stream = rng.choice(["stdout", "stderr"])
        roll = rng.random()
        if roll < 0.01:
            out.append('{"log":"not closed')
        if roll < 0.06 and len(line) > 2:
            cut = rng.randrange(1, len(line))
            out.append(entry(line[:cut], stream))
            out.append(entry(line[cut:] + "\n", stream))
        else:
            out.append(entry(line + "\n", stream))
    return ("\n".join(out) + "\n").encode()


WRAP = {"cri": to_cri, "docker": to_docker}


# Each real log alone, wrapped, gives the plain log's events with skipping:
# tests/test_decode_formats.py (and the plain log's, without: the first test here).
@pytest.mark.parametrize("fmt,seed", [("cri", 1), ("cri", 2), ("docker", 1), ("docker", 2)])
def test_container_logs_give_the_same_events_counts_and_positions_with_skipping(engines, fmt, seed):
    """Real logs amid traffic, as CRI or docker json-file with partials, interleaved streams and
    malformed lines: events, line and malformed counts, line numbers and checkpoints as when
    every line is decoded; and most traffic lines are passed over."""
    sparse, dense = engines
    data = WRAP[fmt](spliced(seed), seed)
    expected = run(dense, data, 1 << 20, fmt)
    assert expected[5] == 0 and expected[4] > 0 and len(expected[0]) > 10
    for chunk in (1 << 20, 65536, 1999):
        got = run(sparse, data, chunk, fmt)
        assert got[:5] == expected[:5], chunk
        if chunk == 1 << 20:
            assert got[5] > 3000 * 0.5, "traffic lines are passed over, not decoded"


def test_a_short_required_run_gives_way_to_an_alternation_of_longer_literals():
    """uvicorn's access line of an error status (patterns/sglang/curated/http.json): ` HTTP/` is
    in every access line, each reason phrase only in the lines the record is about."""
    from matcher.catalog.patterns import literal_cover

    pattern = (r"\"(?P<method>[A-Z]+) (?P<path>/\S*) HTTP/[\d.]+\" (?P<http_status>403|503) "
               r"(?P<reason>Forbidden|Service Unavailable)\b")
    assert literal_cover(pattern) == ("Forbidden", "Service Unavailable")
    # a required run long enough is kept, and an alternation no longer than it is not taken
    assert literal_cover(r"Scheduler hit an exception: (?:a|b)") == ("Scheduler hit an exception: ",)
    assert literal_cover(r" HTTP/[\d.]+ (?:abc|de)") == (" HTTP/",)


def test_a_record_bound_to_its_class_is_covered_by_the_class_and_matched_only_in_it():
    """Triton's CompilationError record (patterns/sglang/curated/compile.json, errorType
    `exception`; its example from kijai/ComfyUI-HunyuanVideoWrapper#116): the message's only
    literal, `at `, is in a few percent of all traffic lines; bound to its class, the record is
    covered by the class's name, and searched only in an exception that names a class."""
    from matcher.engine import Target, searched_in

    rec = next(r for r in load_catalog().records if r.slug == "triton-kernel-compilation-error")
    assert rec.bound_class == "CompilationError" and literal_cover(rec.message_pattern) == ("at ",)
    engine = Engine([rec])
    assert engine.chunk_prefilter is not None
    traffic_line = b"[2026-01-01 12:00:00] Load weight end. elapsed=3.2 s, at 8:11: done\n"
    assert engine.chunk_prefilter.hits(traffic_line) == []
    example = rec.examples_match[0]
    exception_line = next(line for line in example.splitlines() if "CompilationError: at" in line)
    assert engine.chunk_prefilter.hits(exception_line.encode() + b"\n")
    docker = json.dumps({"log": exception_line + "\n", "stream": "stderr"}).encode() + b"\n"
    assert engine.docker_prefilter is not None and engine.docker_prefilter.hits(docker)
    message = example.split("CompilationError: ", 1)[1]
    assert searched_in(rec, Target("triton.compiler.errors.CompilationError", message, False))
    assert not searched_in(rec, Target("", message, False))
    assert not searched_in(rec, Target("", message, False, in_body=True))
