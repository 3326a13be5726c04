"""Properties over any input (hypothesis): no exception escapes, chunking changes nothing, and
a planted secret never reaches an output.

The same targets are fuzzed by coverage with `python fuzz/run.py --seconds N` (atheris).
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matcher.catalog import load_catalog
from matcher.catalog.load import load_paths
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.redact import Redactor
from matcher.sinks.events import EventWriter, event_dict
from matcher.source.checkpoint import CheckpointStore
from matcher.types import Chunk

ENGINE = Engine(load_catalog(builtin=True, generated=False).records)
# CI: 150 examples each; SGLANG_MATCHER_FUZZ_EXAMPLES=5000 for a longer hunt.
SETTINGS = settings(max_examples=int(os.environ.get("SGLANG_MATCHER_FUZZ_EXAMPLES", "150")),
                    deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

# Bytes that look like logs often enough to reach the framer's and decoders' deep paths.
FRAGMENTS = [
    b"Traceback (most recent call last):\n", b'  File "/x.py", line 3, in f\n', b"    f()\n",
    b"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
    b"\nThe above exception was the direct cause of the following exception:\n\n",
    b"[2026-01-01 00:00:00 TP3] ", b"[2026-01-01 00:00:00 DP1 TP0 EP2] ", b"ERROR ", b"WARNING ",
    b"2026-01-01T00:00:00.000000000Z stdout F ", b"2026-01-01T00:00:00.1Z stderr P ",
    b'{"log":"x\\n","stream":"stdout","time":"2026-01-01T00:00:00Z"}\n', b'{"log":',
    b"\x1b[31m", b"\x1b[0m", b"\x00", b"\xff\xfe", b"\xc3", b"\r", b"\n", b"  ", b"    ^^^^\n",
    b"ValueError: --enable-int8-mamba-checkpoint only supports the built-in mamba radix cache\n",
    b"Received sigquit from a child process. It usually means the child failed.\n",
    b"  + Exception Group Traceback (most recent call last):\n", b"  | ValueError: x\n",
    # CRI lines, one with a literal cut between two pieces, so that no piece holds it whole
    b"2026-01-01T00:00:00Z stdout P Traceback (\n",
    b"2026-01-01T00:00:00Z stdout F most recent call last):\n",
    b"2026-01-01T00:00:00Z stderr F [2026-01-01 00:00:00 TP5] x\n",
    b'2026-01-01T00:00:00Z stdout F   File "/x.py", line 3, in f\n',
    b"2026-01-01T00:00:00Z stdout F RuntimeError: CUDA out of memory. Tried to allocate 2 GiB\n",
    # the same as docker json-file lines (the first a partial: no \n at the end of its log)
    b'{"log":"Traceback (","stream":"stdout","time":"2026-01-01T00:00:00Z"}\n',
    b'{"log":"most recent call last):\\n","stream":"stdout","time":"2026-01-01T00:00:00Z"}\n',
    b'{"log":"[2026-01-01 00:00:00 TP5] x\\n","stream":"stderr","time":"2026-01-01T00:00:00Z"}\n',
    b'{"log":"  File \\"/x.py\\", line 3, in f\\n","stream":"stdout","time":"2026-01-01T00:00:00Z"}\n',
    (b'{"log":"RuntimeError: CUDA out of memory. Tried to allocate 2 GiB\\n","stream":"stdout",'
    b'"time":"2026-01-01T00:00:00Z"}\n'),
]
log_bytes = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=40)),
                     max_size=60).map(b"".join)


def _events(data: bytes, cuts: list[int], fmt: str) -> list[tuple]:
    p = Pipeline(ENGINE, input_format=fmt, max_line_bytes=256, window=0.0)
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    out = []
    for a, b in itertools.pairwise(bounds):
        out += p.feed(Chunk(data[a:b], "s", b), 1.0).events
    out += p.drain(100.0)
    # Compared as a sorted list: the order of events follows when each record was seen to end,
    # which a cut can move (an open traceback ends after a line record that started later).
    return sorted((e.event, e.pattern_id, e.message, tuple(sorted(e.captures.items())), e.offset,
                   e.traceback) for e in out)


DENSE = copy.copy(ENGINE)
DENSE.chunk_prefilter = None  # the same engine, every line read


def _pipeline_run(engine: Engine, data: bytes, cuts: list[int], fmt: str) -> tuple:
    p = Pipeline(engine, input_format=fmt, max_line_bytes=256, window=0.0)
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    events = []
    for a, b in itertools.pairwise(bounds):
        events += p.feed(Chunk(data[a:b], "s", b), 1.0).events
    checkpoint = p.checkpoint_offset("s")
    events += p.drain(100.0)
    return events, p.stats.lines, p.stats.lines_malformed, p.stats.lines_truncated, checkpoint


@SETTINGS
@given(log_bytes, st.lists(st.integers(min_value=0), max_size=12),
       st.sampled_from(["plain", "cri", "docker"]))
# A first version left the line before a `P` piece unread: the traceback lost TP5's rank.
@example(b"".join(FRAGMENTS[i] for i in (-9, -8, -10, -9, -7, -6)), [], "cri")
@example(b"".join(FRAGMENTS[i] for i in (-4, -3, -5, -4, -2, -1)), [], "docker")
def test_skipping_lines_changes_nothing_on_any_bytes(data, cuts, fmt):
    """Plain text, CRI and docker json-file are read sparsely (only lines the prefilter points at, and what a
    partial or malformed container line needs): events, counts and checkpoint are those of
    reading every line, however the bytes are cut."""
    assert ENGINE.chunk_prefilter is not None
    assert _pipeline_run(ENGINE, data, cuts, fmt) == _pipeline_run(DENSE, data, cuts, fmt)


@SETTINGS
@given(log_bytes, st.lists(st.integers(min_value=0), max_size=12),
       st.sampled_from(["auto", "plain", "cri", "docker"]))
# Found by this property: a group header then a frame without its `|` bar crashed the framer.
@example(b'  + Exception Group Traceback (most recent call last):\n  File "/x.py", line 3, in f\n',
         [], "auto")
def test_any_bytes_any_chunking_same_events_no_exception(data, cuts, fmt):
    """Decoders, framer, engine and aggregator on any bytes: nothing raises, and how the bytes
    were cut into reads does not change a single event."""
    assert _events(data, cuts, fmt) == _events(data, [], fmt)


catalog_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "messagePattern", "errorMessage", "errorClass", "severity",
                         "examples", "match", "noMatch", "record", "solutions", "tags",
                         "sglangVersions", "role", "x"]) | st.text(max_size=8),
        inner, max_size=6),
    max_leaves=20)


@SETTINGS
@given(st.one_of(catalog_value.map(lambda v: json.dumps(v).encode()), st.binary(max_size=200)),
       st.sampled_from(["json", "jsonl", "yaml"]))
def test_catalog_loader_never_raises(tmp_path, content, ext):
    """Any file content, any shape: records or issues naming the file, never an exception."""
    f = tmp_path / f"c.{ext}"
    f.write_bytes(content)
    result = load_paths([f], "user")
    assert all(str(f) in issue.file for issue in result.issues)


checkpoint_doc = st.fixed_dictionaries({
    "version": st.sampled_from([1, 1, 2, "1", None]),
    "files": st.lists(st.dictionaries(
        st.sampled_from(["dev", "ino", "fp_len", "fp_hash", "offset", "path", "updated",
                         "tail_hash"]),
        st.one_of(st.integers(), st.floats(), st.text(max_size=5), st.none(),
                  st.lists(st.integers(), max_size=2))), max_size=3),
    "journal": st.one_of(st.dictionaries(st.text(max_size=5), st.text(max_size=5)), st.integers()),
})


@SETTINGS
@given(st.one_of(checkpoint_doc.map(lambda d: json.dumps(d).encode()), st.binary(max_size=100)))
def test_checkpoint_file_never_crashes_the_start(tmp_path, content):
    """Whatever is in checkpoints.json: a state, or a problem and the file moved aside."""
    state_dir = tmp_path / "state"
    state_dir.mkdir(exist_ok=True)
    for old in state_dir.iterdir():
        old.unlink()
    (state_dir / "checkpoints.json").write_bytes(content)
    _state, problem = CheckpointStore(state_dir).load()
    assert (problem is None) == (state_dir / "checkpoints.json").exists()


TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.",
                min_size=20, max_size=40).map(lambda s: "Zq9" + s)
PASSWORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789!$%^*()_+-=;,.~",
                   min_size=12, max_size=30).map(lambda s: "Pw7" + s)
PLANTS = [
    ("server_args={{'model_path': '/m', 'api_key': '{s}', 'port': 30000}}", TOKEN),
    ("ServerArgs(model_path='/m', api_key='{s}', hf_token='{s}')", TOKEN),
    ("launched with --api-key {s} --port 30000", TOKEN),
    ("request headers {{'Authorization': 'Bearer {s}'}}", TOKEN),
    ("Authorization: Bearer {s}", TOKEN),
    ("downloading with token hf_{s}", TOKEN.map(lambda s: s.replace("-", "").replace("_", "")
                                                .replace(".", "") + "x" * 20)),
    ("OPENAI_API_KEY=sk-{s}", TOKEN),
    ("cannot connect to redis://app:{s}@10.0.0.5:6379", PASSWORD),
]


@st.composite
def planted(draw):
    template, secret_strategy = draw(st.sampled_from(PLANTS))
    secret = draw(secret_strategy)
    return template.format(s=secret), secret.removeprefix("hf_")


@SETTINGS
@given(planted(), st.sampled_from(["message", "frame", "line"]), st.sampled_from(["json", "console"]))
def test_a_planted_secret_reaches_no_output(text, where, fmt):
    """A secret in an exception's message, in a traceback frame, or in an error log line: the
    event is still reported, and the secret is in none of the emitted text."""
    text, secret = text
    if where == "message":
        log = f"Traceback (most recent call last):\n  File \"/x.py\", line 1, in f\n" \
              f"RuntimeError: {text}\n"
    elif where == "frame":
        log = f"Traceback (most recent call last):\n  File \"/x.py\", line 1, in f\n    {text}\n" \
              f"RuntimeError: failed to start\n"
    else:
        log = f"[2026-01-01 00:00:00 TP0] ERROR {text}\nValueError: bad {text}\n"
    p = Pipeline(ENGINE, window=0.0)
    events = p.feed(Chunk(log.encode(), "s", 0), 1.0).events + p.drain(100.0)
    assert events
    out = io.StringIO()
    EventWriter(out, Redactor(), fmt).write([event_dict(e, Redactor()) for e in events])
    assert secret not in out.getvalue()
