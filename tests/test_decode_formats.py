"""Container log formats: a log wrapped by Kubernetes (CRI) or docker gives the plain events."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher.catalog import load_catalog
from matcher.decode import LineDecoder, LineSplitter
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.redact import Redactor
from matcher.sinks.events import event_dict
from matcher.types import Chunk, Line

SGLANG = Path(__file__).parent / "fixtures" / "sglang"
REAL_LOGS = sorted((SGLANG / "launch").glob("*.log")) + [
    SGLANG / "constructed" / "tp8_scheduler_crash.log"]
POSITION_FIELDS = ("offset", "line", "source")


# -- converters: what the container runtimes write for a plain log ------------------------------

def _ts(rng: random.Random, i: int) -> str:
    return f"2026-12-02T14:{i // 3600 % 60:02d}:{i // 60 % 60:02d}.{rng.randrange(10**9):09d}Z"


def to_cri(text: str, seed: int = 0, split_over: int = 40) -> bytes:
    """Plain text → CRI lines; lines longer than `split_over` are cut at random into `P` pieces."""
    rng = random.Random(seed)
    out = []
    for i, line in enumerate(text.splitlines()):
        stream = rng.choice(("stdout", "stderr"))
        pieces = []
        while len(line) > split_over:
            cut = rng.randrange(1, len(line))
            pieces.append(line[:cut])
            line = line[cut:]
        for piece in pieces:
            out.append(f"{_ts(rng, i)} {stream} P {piece}")
        out.append(f"{_ts(rng, i)} {stream} F {line}")
    return "".join(x + "\n" for x in out).encode()


def to_docker(text: str, seed: int = 0, split_over: int = 16 * 1024) -> bytes:
    """Plain text → docker json-file; lines over `split_over` become partials, as docker does."""
    rng = random.Random(seed)
    out = []
    for i, line in enumerate(text.splitlines()):
        stream = rng.choice(("stdout", "stderr"))
        pieces = [line[k:k + split_over] for k in range(0, len(line), split_over)] or [""]
        pieces[-1] += "\n"
        for piece in pieces:
            # Go's encoder escapes <, > and & too.
            obj = json.dumps({"log": piece, "stream": stream, "time": _ts(rng, i)})
            out.append(obj.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    return "".join(x + "\n" for x in out).encode()


# -- the pipeline as scan uses it ---------------------------------------------------------------

@pytest.fixture(scope="module")
def engine():
    catalog = load_catalog()
    return Engine(catalog.records)


def pipeline_events(engine, data: bytes, input_format: str, chunk: int = 4096) -> list[dict]:
    """Events of one log through `Pipeline`, read in chunks, without where they were in the file."""
    pipeline = Pipeline(engine, input_format=input_format)
    events = []
    for end in range(chunk, len(data) + chunk, chunk):
        piece = data[end - chunk:end]
        events += pipeline.feed(Chunk(piece, "log", min(end, len(data)))).events
    events += pipeline.end_of_source("log") + pipeline.finish()
    redactor = Redactor()
    dicts = [event_dict(e, redactor) for e in sorted(events, key=lambda e: e.offset)]
    return [{k: v for k, v in d.items() if k not in POSITION_FIELDS} for d in dicts]


@pytest.mark.parametrize("log", REAL_LOGS, ids=[p.stem for p in REAL_LOGS])
def test_cri_and_docker_wrapped_real_logs_give_the_plain_logs_events(engine, log):
    """Every real sglang log, wrapped as CRI (random `P` splits) or docker (16 KiB and 100-byte
    partials), read as auto or as its format, gives exactly the events of the plain log."""
    text = log.read_text()
    plain = pipeline_events(engine, log.read_bytes(), "plain")
    assert plain, "every real log has at least its root cause"
    assert pipeline_events(engine, log.read_bytes(), "auto") == plain
    # Each wrapping read once, as auto or as its format in turn (the splits differ by seed).
    assert pipeline_events(engine, to_cri(text, seed=1), "auto", chunk=1001) == plain
    assert pipeline_events(engine, to_cri(text, seed=2), "cri") == plain
    assert pipeline_events(engine, to_docker(text, split_over=16 * 1024), "auto",
                           chunk=777) == plain
    assert pipeline_events(engine, to_docker(text, split_over=100), "docker") == plain


def _cli_events(*args: str) -> list[dict]:
    run = subprocess.run([sys.executable, "-m", "matcher", "scan", "--format", "json", *args],
                         capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert run.stderr == ""
    return [{k: v for k, v in json.loads(x).items() if k not in POSITION_FIELDS}
            for x in run.stdout.splitlines()]


@pytest.mark.parametrize("name", ["tp8_scheduler_crash", "unsupported_architecture"])
def test_scan_cli_reads_cri_and_docker_files_as_auto(tmp_path, name):
    """The real command, `--input-format auto` (the default), on CRI and docker files: the plain
    log's events."""
    log = next(p for p in REAL_LOGS if p.stem == name)
    cri, docker = tmp_path / "0.log", tmp_path / "container-json.log"
    cri.write_bytes(to_cri(log.read_text(), seed=7))
    docker.write_bytes(to_docker(log.read_text()))
    plain = _cli_events(str(log))
    assert _cli_events(str(cri)) == plain
    assert _cli_events("--input-format", "auto", str(docker)) == plain
    assert _cli_events("--input-format", "docker", str(docker)) == plain


def test_scan_cli_says_how_many_lines_were_not_in_the_format_given(tmp_path):
    """A plain log scanned as `--input-format cri`: every line read as text, so the error is still
    found, and stderr says how many lines were not CRI."""
    log = SGLANG / "launch" / "int8_mamba_radix_lru.log"
    run = subprocess.run([sys.executable, "-m", "matcher", "scan", "--input-format", "cri",
                          "--format", "json", str(log)], capture_output=True, text=True)
    n = len(log.read_text().splitlines())
    assert (run.returncode, run.stderr) == (
        1, f"sglang-matcher: {log}: {n} lines not in the cri format, read as plain text\n")
    assert json.loads(run.stdout)["pattern_id"] == "4e2cdd4d6209ebbd"
    bad = subprocess.run([sys.executable, "-m", "matcher", "scan", "--input-format", "xml",
                          str(log)], capture_output=True, text=True)
    assert bad.returncode == 2 and "--input-format" in bad.stderr


# -- decoding, line by line ---------------------------------------------------------------------

def decode(data: bytes, fmt: str, cuts: list[int] = (), max_line_bytes: int = 1 << 20):
    """Split and decode `data` read in the pieces `cuts` gives; the lines and the decoder."""
    decoder = LineDecoder(fmt, max_line_bytes=max_line_bytes)
    splitter = LineSplitter("s", max_line_bytes=decoder.raw_max_line_bytes)
    out: list[Line] = []
    start = 0
    for end in sorted({c for c in cuts if 0 < c < len(data)}) + [len(data)]:
        for line in splitter.feed(Chunk(data[start:end], "s", end)):
            out += decoder.decode(line)
        start = end
    for line in splitter.finish():
        out += decoder.decode(line)
    return out + decoder.finish(), decoder


def test_cri_partials_join_per_stream_and_keep_where_they_came_from():
    """`P` pieces join up to their stream's `F`; the other stream's line passes in between."""
    data = (b"2026-12-02T14:35:46.000000001Z stderr P Scheduler hit \n"
            b"2026-12-02T14:35:46.5+01:00 stdout F INFO: between\n"
            b"2026-12-02T14:35:47Z stderr P an exception: \n"
            b"2026-12-02T14:35:48.1Z stderr F Traceback (most recent call last):\n"
            b"2026-12-02T14:35:49Z stdout F\n")
    lines, decoder = decode(data, "cri")
    ends = [i + 1 for i, b in enumerate(data) if b == 10]
    assert [(x.text, x.stream, x.ts, x.offset, x.end_offset, x.lineno, x.truncated)
            for x in lines] == [
        ("INFO: between", "stdout", "2026-12-02T14:35:46.5+01:00", ends[0], ends[1], 2, False),
        ("Scheduler hit an exception: Traceback (most recent call last):", "stderr",
         "2026-12-02T14:35:46.000000001Z", 0, ends[3], 1, False),
        ("", "stdout", "2026-12-02T14:35:49Z", ends[3], ends[4], 5, False),
    ]
    assert (decoder.detected, decoder.malformed) == ("cri", 0)


def test_docker_partials_join_and_newline_and_carriage_return_are_dropped():
    data = (b'{"log":"ValueError: ","stream":"stderr","time":"2026-12-02T14:35:46.1Z"}\n'
            b'{"log":"\\u003cbad\\u003e \\ud83d\\ude00\\r\\n","stream":"stderr","time":"t2"}\n'
            b'{"log":"lone \\udc80 surrogate\\n","stream":"stdout","time":"t3"}\n')
    lines, decoder = decode(data, "auto")
    assert [(x.text, x.stream, x.ts, x.offset, x.lineno) for x in lines] == [
        ("ValueError: <bad> \U0001F600", "stderr", "2026-12-02T14:35:46.1Z", 0, 1),
        ("lone \ufffd surrogate", "stdout", "t3", data.index(b'{"log":"lone'), 3),
    ]
    assert (decoder.detected, decoder.malformed) == ("docker", 0)


def test_auto_is_decided_by_the_first_non_empty_line_and_then_fixed():
    """A plain log whose later line looks like CRI stays plain; blank lines do not decide."""
    cri_line = b"2026-12-02T14:35:46Z stdout F x"
    lines, decoder = decode(b"\n  \n[2026-12-02 14:35:45] start\n" + cri_line + b"\n", "auto")
    assert [x.text for x in lines] == ["", "  ", "[2026-12-02 14:35:45] start", cri_line.decode()]
    assert (decoder.detected, decoder.malformed) == ("plain", 0)
    lines, decoder = decode(b"\n" + cri_line + b"\nnot cri\n", "auto")
    assert [x.text for x in lines] == ["", "x", "not cri"]
    assert (decoder.detected, decoder.malformed) == ("cri", 1)


def test_malformed_cri_lines_pass_through_as_text_and_are_counted():
    """Bad timestamps, streams, tags; lines of another writer: kept as text, counted, no error."""
    bad = [
        "2026-13-02T14:35:46Z stdout F month 13",
        "2026-12-02T25:35:46Z stdout F hour 25",
        "2026-12-02 14:35:46Z stdout F space instead of T",
        "2026-12-02T14:35:46 stdout F no zone",
        "2026-12-02T14:35:46Z stdin F stdin",
        "2026-12-02T14:35:46Z stdout X bad tag",
        "Traceback (most recent call last):",
    ]
    good = b"2026-12-02T14:35:46Z stdout F good\n"
    data = good + "".join(b + "\n" for b in bad).encode() + b"\x00\xff\n" + good
    lines, decoder = decode(data, "cri")
    assert [x.text for x in lines] == ["good", *bad, "\x00\ufffd", "good"]
    assert (decoder.detected, decoder.malformed) == ("cri", len(bad) + 1)


def test_lines_that_are_not_docker_json_pass_through_as_text_and_are_counted():
    good = '{"log":"ok\\n","stream":"stdout","time":"t"}'
    bad = ['{"log": "unterminated', '{"stream":"stdout"}', '{"log": 5}', '["log"]',
           '{"log":' + "[" * 100000 + "]" * 100000 + "}",
           "plain text line", ""]
    data = ("\n".join([good, *bad, good]) + "\n").encode()
    lines, decoder = decode(data, "auto")
    assert [x.text for x in lines] == ["ok", *bad, "ok"]
    assert (decoder.detected, decoder.malformed) == ("docker", len(bad))


def test_joined_content_is_capped_and_nothing_more_is_buffered():
    """A line over the cap in 4 pieces keeps its first `max_line_bytes` bytes, marked truncated."""
    pieces = ["aaaaaaaaaa", "bbbbbbbbb", "ccccé", "ddd"]
    data = "".join(f"2026-12-02T14:35:46Z stdout {'P' if i < 3 else 'F'} {p}\n"
                   for i, p in enumerate(pieces)).encode()
    decoder = LineDecoder("cri", max_line_bytes=24)
    splitter = LineSplitter("s", max_line_bytes=decoder.raw_max_line_bytes)
    raw = splitter.feed(Chunk(data, "s", len(data)))
    assert decoder.decode(raw[0]) == decoder.decode(raw[1]) == []
    assert "".join(decoder._partials["stdout"].parts) == "aaaaaaaaaabbbbbbbbb"
    assert decoder.decode(raw[2]) == []
    # é is cut in half by the cap: dropped; the `ddd` piece is then not kept at all.
    assert "".join(decoder._partials["stdout"].parts) == "aaaaaaaaaabbbbbbbbbcccc"
    (line,) = decoder.decode(raw[3])
    assert (line.text, line.truncated, line.offset, line.end_offset) == (
        "aaaaaaaaaabbbbbbbbbcccc", True, 0, len(data))
    (single,) = decode(b'{"log":"' + b"x" * 30 + b'\\n"}\n', "docker", max_line_bytes=24)[0]
    assert (single.text, single.truncated) == ("x" * 24, True)
    (plain,) = decode(b"y" * 30 + b"\n", "auto", max_line_bytes=24)[0]
    assert (plain.text, plain.truncated) == ("y" * 24, True)


def test_an_unfinished_partial_is_handed_on_by_finish():
    data = b"2026-12-02T14:35:46Z stderr P RuntimeError: cut \n"
    decoder = LineDecoder("cri")
    (raw,) = LineSplitter("s").feed(Chunk(data, "s", len(data)))
    assert decoder.decode(raw) == [] and decoder.pending_offset == 0
    assert [x.text for x in decoder.finish()] == ["RuntimeError: cut "]
    assert (decoder.pending_offset, decoder.finish()) == (None, [])


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="journald"):
        LineDecoder("journald")
    with pytest.raises(ValueError):
        Pipeline(Engine([]), input_format="json")


# -- however the file is read, the same lines ---------------------------------------------------

CONTENT = st.sampled_from([
    "[2026-01-01 12:00:01 TP1] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/scheduler.py", line 2981, in run_scheduler_process',
    "ValueError: --enable-int8-mamba-checkpoint only supports the built-in mamba radix cache",
    "ünïcödé ✓ 日本語", "", "tab\there", 'quote " and \\ backslash', "<html> & co",
])
CRI_LINE = st.one_of(
    st.tuples(st.sampled_from(["stdout", "stderr"]), st.sampled_from(["P", "F"]), CONTENT).map(
        lambda t: f"2026-12-02T14:35:46.123456789Z {t[0]} {t[1]} {t[2]}"),
    st.sampled_from(["2026-12-02T14:35:46Z stdout Q bad tag", "not a cri line", ""]),
)
DOCKER_LINE = st.one_of(
    st.tuples(st.sampled_from(["stdout", "stderr"]), CONTENT, st.booleans()).map(
        lambda t: json.dumps({"log": t[1] + ("\n" if t[2] else ""), "stream": t[0],
                              "time": "2026-12-02T14:35:46.1Z"}, ensure_ascii=bool(len(t[1]) % 2))),
    st.sampled_from(['{"log": broken', "plain", ""]),
)
CUTS = st.lists(st.integers(min_value=0, max_value=6000), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["cri", "docker"]), st.data(), CUTS, st.sampled_from([1 << 20, 40]),
       st.binary(max_size=6))
def test_any_chunking_of_a_container_log_gives_the_same_lines(fmt, data, cuts, cap, tail):
    """Random cut points (inside characters and JSON escapes too), with and without a small line
    cap, never change the decoded lines, their offsets or the malformed count."""
    lines = data.draw(st.lists(CRI_LINE if fmt == "cri" else DOCKER_LINE, max_size=30))
    raw = "\n".join(lines).encode() + (b"\n" if lines else b"") + tail
    for reading in ("auto", fmt):
        whole, d1 = decode(raw, reading, max_line_bytes=cap)
        cut, d2 = decode(raw, reading, cuts, max_line_bytes=cap)
        assert cut == whole
        assert d1.malformed == d2.malformed


@settings(max_examples=200, deadline=None)
@given(st.lists(CONTENT, max_size=25), st.integers(min_value=0, max_value=10**6), CUTS)
def test_a_wrapped_log_decodes_to_the_plain_logs_lines(contents, seed, cuts):
    """CRI with random `P` splits and docker with small partials give the plain lines' text."""
    text = "".join(c + "\n" for c in contents)
    plain = [x.text for x in decode(text.encode(), "plain")[0]]
    for wrapped in (to_cri(text, seed=seed, split_over=8), to_docker(text, split_over=7)):
        lines, decoder = decode(wrapped, "auto", cuts)
        assert ([x.text for x in lines], decoder.malformed) == (plain, 0)
