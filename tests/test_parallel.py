"""`scan -j N` gives what `scan -j 1` gives: the same events in the same order, the same line
count and warnings, the same exit code and text, on every real log of the repository — one by
one, all at once, concatenated (so that cuts fall inside tracebacks, multi-rank failures and
repeats), wrapped in CRI and docker lines with partials across cuts, on a generated bench log,
and at cuts hypothesis chooses. Small read sizes put many cuts into small files."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher import parallel, worker_pool
from matcher.commands.scan import cmd_scan
from matcher.release import AUTO
from matcher.report import exit_code
from matcher.scan import json_line, scan_events

REPO = Path(__file__).resolve().parents[1]
LOGS = sorted([*(REPO / "tests" / "fixtures").rglob("*.log"),
               *(REPO / "examples" / "logs").glob("*.log")])

pytestmark = pytest.mark.skipif(not parallel.available(), reason="no fork here")


def _scan(loaded, inputs, jobs, *, read_size, version=AUTO, input_format="auto", split=None,
          seen=None):
    """The events, lines and what was said; `seen` gets what the workers did (None: none)."""
    catalog, engine = loaded
    err = io.StringIO()
    scanned = scan_events([str(p) for p in inputs], catalog, engine=engine, jobs=jobs,
                          read_size=read_size, sglang_version=version, err=err,
                          input_format=input_format, split=split)
    if seen is not None:
        seen.append(scanned.parallel)
    return scanned.events, scanned.lines, err.getvalue()


def _same(loaded, inputs, *, read_size, jobs=(2, 3), seen=None, **kw):
    one = _scan(loaded, inputs, 1, read_size=read_size, **kw)
    for j in jobs:
        workers = []
        assert _scan(loaded, inputs, j, read_size=read_size, seen=workers, **kw) == one, f"-j {j}"
        assert workers[0], f"-j {j}: read by one process (too small to be worth workers)"
        if seen is not None:
            seen.extend(workers)
    return one


def test_there_are_logs():
    assert len(LOGS) > 100


def test_every_log_as_many_files(loaded):
    seen = []
    dicts, lines, _ = _same(loaded, LOGS, read_size=2048, seen=seen)
    assert len(dicts) > 100 and lines > 5_000
    assert seen[-1].batches < seen[-1].tasks  # small files went together


def test_small_files_are_handed_out_together_and_cut_ones_alone(monkeypatch):
    """Whole files of one read or less go to a worker together, up to `BATCH_READS` reads'
    worth and `BATCH_FILES` files; a task of a cut file, or of a larger file, goes alone and
    ends a batch: the order is the plan's."""
    def task(name, size, first=0, stop=None):
        return parallel.Task(name, name, first, stop, "plain", size)

    monkeypatch.setattr(parallel, "BATCH_READS", 4)
    rs = 1000
    tiny = [task(f"t{i}", 1) for i in range(parallel.BATCH_FILES + 5)]
    big = [task("big", 50 * rs, 0, 10), task("big", 40 * rs, 10, None)]
    plan = [task("a", 900), task("b", 900), *big, task("c", 1000), task("d", 1001),
            *[task(f"e{i}", 700) for i in range(7)], *tiny]
    got = parallel.batches(plan, rs)
    assert [t for b in got for t in b] == plan
    sizes = [[t.path for t in b] for b in got]
    assert sizes[:5] == [["a", "b"], ["big"], ["big"], ["c"], ["d"]]
    assert sizes[5] == [f"e{i}" for i in range(5)]  # 3,500 bytes: a sixth would pass 4,000
    # then by count: e5, e6 and the first 254 one-byte files make `BATCH_FILES`
    assert sizes[6] == ["e5", "e6", *(f"t{i}" for i in range(parallel.BATCH_FILES - 2))]
    assert sizes[7:] == [[f"t{i}" for i in range(parallel.BATCH_FILES - 2, len(tiny))]]


def test_files_past_the_ones_held_open_are_opened_by_path(loaded, monkeypatch):
    """The parent holds the first `HELD_FILES` files open for the tasks (`Task.fd`); the
    others are opened by path, and read the same."""
    monkeypatch.setattr(parallel, "HELD_FILES", 3)
    plans = []
    real = parallel._fork

    def planned(pipeline, inputs, plan, *args):
        plans.append({t.path: t.fd for ts in plan for t in ts})
        return real(pipeline, inputs, plan, *args)

    monkeypatch.setattr(parallel, "_fork", planned)
    _same(loaded, LOGS, read_size=2048, jobs=(2,))
    fds = plans[-1]
    assert len(fds) == len(LOGS) and sum(fd is not None for fd in fds.values()) == 3


def test_the_largest_logs_one_by_one_cut_small(loaded):
    for log in sorted(LOGS, key=lambda p: p.stat().st_size)[-12:]:
        _same(loaded, [log], read_size=256, jobs=(2,))


@pytest.mark.parametrize("version", [AUTO, "all"])
def test_concatenated_cut_everywhere(loaded, concatenated, version):
    seen = []
    dicts, _, _ = _same(loaded, [concatenated], read_size=1024, version=version, seen=seen)
    assert seen[-1].tasks > 8
    assert seen[-1].reads_from_workers > seen[-1].reads_again
    assert any(d.get("ranks") and len(d["ranks"]) > 1 for d in dicts)  # a multi-rank group


def test_cri_with_partials_across_cuts(loaded, concatenated, tmp_path):
    out = []
    for i, line in enumerate(concatenated.read_bytes().split(b"\n")[:-1]):
        ts = b"2026-01-01T00:00:%02d.%09dZ" % (i // 1_000_000 % 60, i % 1_000_000)
        if i % 7 == 0 and len(line) > 20:  # a partial: its pieces across reads
            out += [ts + b" stderr P " + line[:11], ts + b" stderr P " + line[11:17],
                    ts + b" stderr F " + line[17:]]
        else:
            out.append(ts + b" stdout F " + line)
    path = tmp_path / "cri.log"
    path.write_bytes(b"\n".join(out) + b"\n")
    dicts, _, _ = _same(loaded, [path], read_size=1024)
    assert dicts


def test_docker_across_cuts(loaded, concatenated, tmp_path):
    lines = concatenated.read_text(errors="replace").split("\n")[:3000]
    path = tmp_path / "docker.log"
    path.write_text("".join(json.dumps({"log": x + "\n", "stream": "stderr",
                                        "time": "2026-01-01T00:00:00Z"}) + "\n" for x in lines))
    _same(loaded, [path], read_size=2048, jobs=(2,))


def test_a_first_line_longer_than_the_peek_decides_as_the_first_read(loaded, tmp_path):
    """The plan decides a file's format from what its peek buffered (8 KiB) when that holds a
    whole line, else from its first read, as `scan -j 1` does. sglang's first line is its
    `server_args=` dump, 19 KB in a real launch log: as docker JSON, the peek holds no whole
    line, and the tasks cut past it must still be read as docker."""
    launch = REPO / "tests/fixtures/sglang/launch/scheduler_vllm_missing_api_key.log"
    lines = launch.read_text().split("\n")[:-1]
    # From sglang's first logged line on (Python's warnings printed before it are left out).
    lines = lines[next(i for i, x in enumerate(lines) if "server_args=" in x):]
    assert len(lines[0]) > 16_384
    path = tmp_path / "docker.log"
    path.write_text("".join(json.dumps({"log": x + "\n", "stream": "stderr",
                                        "time": "2026-01-01T00:00:00Z"}) + "\n"
                            for x in lines) * 200)  # 8 MB: worth workers at 64 KiB reads
    plan: list[list[parallel.Task]] = []
    held: list[io.FileIO] = []
    pipeline = type("P", (), {"input_format": "auto", "max_line_bytes": 1 << 20})
    try:
        parallel._plan(pipeline, [(str(path), str(path))], 2, 64 << 10, parallel.split_file,
                       plan, held)
    finally:
        for f in held:
            f.close()
    assert len(plan[0]) > 1 and {t.detected for t in plan[0]} == {"docker"}
    _same(loaded, [path], read_size=64 << 10, jobs=(2,))


def test_text_json_and_exit_code(loaded, concatenated, tmp_path):
    catalog, _ = loaded
    quiet = tmp_path / "quiet.log"
    quiet.write_text("[2026-01-01 12:00:00] Load weight end.\n")
    for inputs, code_expected in (([concatenated, LOGS[0]], 1), ([quiet], 0)):
        outs = {}
        for fmt in ("text", "json"):
            for j in (1, 2):
                buf = io.StringIO()
                code = cmd_scan([str(p) for p in inputs], fmt, catalog, buf, jobs=j,
                                err=io.StringIO())
                outs[fmt, j] = (code, buf.getvalue())
            assert outs[fmt, 1] == outs[fmt, 2]
            assert outs[fmt, 1][0] == code_expected


def test_json_lines_made_by_the_workers(loaded, concatenated):
    """`scan --format json` has the workers make the JSON lines and the exit code's part of
    each event (`json_line`): the same lines, in the same order, as one process makes."""
    dicts, lines, _ = _scan(loaded, [concatenated], 1, read_size=1024)
    catalog, engine = loaded
    for j in (1, 2):
        scanned = scan_events([str(concatenated)], catalog, engine=engine, jobs=j,
                              read_size=1024, err=io.StringIO(), encode=json_line)
        encoded, n = scanned.events, scanned.lines
        assert (scanned.parallel is not None) == (j > 1)
        assert n == lines
        assert [line for line, _ in encoded] == \
            [json.dumps(d, ensure_ascii=False) + "\n" for d in dicts]
        assert [failure for _, failure in encoded] == [exit_code([d]) == 1 for d in dicts]
        assert any(failure for _, failure in encoded) and not all(f for _, f in encoded)


def test_generated_bench_log(loaded, tmp_path):
    log = tmp_path / "bench.log"
    subprocess.run([sys.executable, str(REPO / "bench" / "genlog.py"), "-n", "10000", "-o",
                    str(log), "--error-every", "100"], check=True, capture_output=True)
    # 16 KiB reads: 1.5 MB is then worth workers (`parallel.worth_it`: 64 reads)
    dicts, lines, _ = _same(loaded, [log], read_size=16 * 1024, version="all")
    assert lines >= 10_000 and len(dicts) > 50


def test_stdin_and_files_and_the_same_file_twice(loaded, concatenated, monkeypatch):
    for j in (1, 2):
        data = LOGS[1].read_bytes()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        got = _scan(loaded, [concatenated, "-", concatenated], j, read_size=4096)
        if j == 1:
            want = got
    assert got == want


@pytest.fixture(scope="module")
def read_alone(loaded, concatenated):
    """`-j 1`'s scan of the concatenated logs at a read size, made once per read size: the
    answer every cutting of it must give."""
    made: dict[int, tuple] = {}

    def scan(read_size: int) -> tuple:
        if read_size not in made:
            made[read_size] = _scan(loaded, [concatenated], 1, read_size=read_size)
        return made[read_size]

    return scan


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=12))
def test_any_cuts(loaded, concatenated, read_alone, cuts):
    read_size = 1 + concatenated.stat().st_size // 400
    assert _scan(loaded, [concatenated], 2, read_size=read_size,
                 split=lambda chunks, jobs: cuts) == read_alone(read_size)


def test_states_that_meet_past_the_first_reads_meet_where_the_worker_kept_one(loaded,
                                                                              tmp_path):
    """A worker keeps its reading state at its task's first `STATES_EVERY_READ` boundaries
    and at every `STATES_STRIDE`-th after (`kept_state`). Cut inside a real traceback that
    runs on for more reads than that, the parent reads on from the true state to the first
    kept boundary past the traceback's end — and takes the worker's records from there, not
    every read of the task — with `-j 1`'s output."""
    log = tmp_path / "twice.log"  # a real launch's log, twice: the task goes on past it
    log.write_bytes(2 * (REPO / "examples" / "logs"
                         / "scheduler-crash-unknown-architecture.log").read_bytes())
    text = log.read_bytes()
    read_size = 32
    start = text.index(b"Traceback (most recent call last)")
    cut = text.index(b"  File ", start) // read_size + 1  # a read inside the traceback
    ends = text.index(b"\n[", start) // read_size  # the read holding its last line
    assert ends - cut > parallel.STATES_EVERY_READ + parallel.STATES_STRIDE
    chunks = -(-len(text) // read_size)
    # (a 32-byte first read does not tell the format: a file read as "auto" would be one task)
    one = _scan(loaded, [log], 1, read_size=read_size, input_format="plain")
    seen = []
    assert _scan(loaded, [log], 2, read_size=read_size, input_format="plain",
                 split=lambda n, jobs: [cut], seen=seen) == one
    again = seen[0].reads_again
    assert ends - cut <= again < chunks - cut, seen[0]
    assert again % parallel.STATES_STRIDE == 0
    assert seen[0].reads_from_workers == chunks - again


def test_small_inputs_are_read_by_one_process(tmp_path):
    """Workers start cold: below `MIN_PARALLEL_READS` reads in all, `-j N` (by default the
    core count) reads with one process, which is faster there."""
    from matcher.scan import READ_SIZE

    small, large = tmp_path / "small.log", tmp_path / "large.log"
    small.write_bytes(b"x\n" * 1000)
    with large.open("wb") as f:  # sparse: no disk used
        f.truncate(parallel.MIN_PARALLEL_READS * READ_SIZE)
    assert not parallel.worth_it([str(small)], READ_SIZE)
    assert parallel.worth_it([str(large)], READ_SIZE) == parallel.available()
    assert parallel.worth_it([str(small), str(large)], READ_SIZE) == parallel.available()


def test_split_file():
    assert parallel.split_file(100, 1) == [0]
    assert parallel.split_file(5, 2) == [0]
    cuts = parallel.split_file(167, 2)
    assert cuts[0] == 0 and len(cuts) == 8 and cuts == sorted(set(cuts))
    assert parallel.usable_cores() >= 1


def test_an_unreadable_input_is_the_same_error(loaded, concatenated, tmp_path):
    from matcher.scan import UnreadableInput

    said = set()
    for j in (1, 2):
        for bad in (tmp_path / "missing.log", tmp_path):
            with pytest.raises(UnreadableInput) as e:
                _scan(loaded, [concatenated, bad], j, read_size=1024)
            said.add((bad, str(e.value)))
    assert len(said) == 2


def _linenos(obj, path="", seen=None):
    """Every int under a name holding `lineno` in a reading state's object graph, by path."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (str, bytes, bytearray, int, float, type(None))):
        return {}
    seen.add(id(obj))
    found = {}
    if isinstance(obj, dict):
        items = [(f"[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple, set)):
        items = [(f"[{i}]", v) for i, v in enumerate(obj)]
    else:
        names = [*getattr(obj, "__dict__", {})]
        for klass in type(obj).__mro__:
            names += [n for n in getattr(klass, "__slots__", ()) if hasattr(obj, n)]
        items = [(f".{n}", getattr(obj, n)) for n in names]
    for name, value in items:
        if "lineno" in name and isinstance(value, int):
            found[path + name] = value
        else:
            found.update(_linenos(value, path + name, seen))
    return found


def test_a_reading_state_moves_every_line_number(loaded, tmp_path):
    """A worker counts lines from its own start; where its state meets the true one the parent
    moves its line numbers (`_renumber`). Taken on a real state that holds a partial CRI line
    and a traceback being assembled: every line number in it moves — so a field added later
    that holds one fails here until `_renumber` knows it — and `state_of` does not see the
    move."""
    from matcher.pipeline import Pipeline
    from matcher.types import Chunk

    text = (REPO / "examples" / "logs" / "scheduler-crash-unknown-architecture.log").read_bytes()
    lines = text.split(b"\n")
    at = next(i for i, x in enumerate(lines) if b"Traceback (most recent call last)" in x)
    ts = b"2026-01-01T00:00:00.000000000Z stderr "
    cri = b"".join(ts + b"F " + x + b"\n" for x in lines[:at + 3])
    cri += ts + b"P " + lines[at + 3][:10] + b"\n"  # a partial line, its rest not yet written
    catalog, engine = loaded
    pipeline = Pipeline(engine, catalog_version=catalog.version)
    pipeline.feed(Chunk(cri, "cri.log", len(cri)))
    reader = pipeline.reader("cri.log")
    before = _linenos(reader)
    assert reader[1]._partials and reader[2]._open  # both held across the cut
    assert {p.split("'")[0] for p in before} == {"[0]._lineno", "[1]._partials[", "[2]._open["}
    state = parallel.state_of(reader)
    parallel._renumber(reader, 1000)
    after = _linenos(reader)
    assert after.keys() == before.keys()
    assert {p: after[p] - before[p] for p in before} == dict.fromkeys(before, 1000)
    assert parallel.state_of(reader) == state


def test_a_reading_state_holds_a_long_line_by_its_digest(loaded):
    """A worker keeps some twenty reading states a task; through a line longer than
    `max_line_bytes` each held the MiB of it that is kept, and `scan -j 2` of a 147 MB log
    with a 100 MB line peaked at 303 MB (one process: 98 MB). The line being read is in the
    state by its digest: the state stays small, and one byte of difference still tells two
    states apart."""
    import pickle

    from matcher.pipeline import Pipeline
    from matcher.types import Chunk

    catalog, engine = loaded
    states = []
    for one in (b"x", b"y"):  # a byte half a MiB in: within what is kept
        pipeline = Pipeline(engine, catalog_version=catalog.version, input_format="plain")
        long = b"[2026-01-01 00:00:00 TP0] " + b"x" * 500_000 + one + b"x" * 2_500_000
        pipeline.feed(Chunk(long, "a.log", len(long)))
        reader = pipeline.reader("a.log")
        assert len(reader[0]._pending) > 1_000_000 - 1  # held: the line has not ended
        states.append(parallel.state_of(reader))
    assert len(pickle.dumps(states[0])) < 20_000
    assert states[0] != states[1]


def test_events_go_to_the_workers_in_batches_and_the_last_in_one_per_worker():
    """Batches of `worker_pool.DICT_BATCH` as events arrive (a task's 750 do not wait as one), and what is
    left at the end split evenly, one batch per worker, so that the workers end together."""
    class Workers:
        def __init__(self):
            self.sizes = []

        def submit(self, fn, batch):
            self.sizes.append(len(batch))
            return [f"d{e}" for e in batch]

        def result(self, future):
            return future

    pool = Workers()
    dicts = worker_pool.DictBatches(pool, 2, in_worker=len,
                                    make=lambda batch: pytest.fail("the workers are there"))
    dicts.add(list(range(300)))
    dicts.add(list(range(300, 700)))
    assert pool.sizes == [256, 256]
    assert dicts.ordered(lambda e: -e) == [f"d{e}" for e in reversed(range(700))]
    assert pool.sizes == [256, 256, 94, 94]


def test_only_a_scan_loads_the_worker_processes_module():
    """`matcher.parallel` (multiprocessing, the pool: 30 ms of a start) is imported by a scan,
    not by the command line's or the daemon's modules."""
    code = ("import sys, matcher.cli, matcher.daemon, matcher.topology; "
            "print(sorted(m for m in sys.modules "
            "if m in ('matcher.parallel', 'matcher.worker_pool', 'multiprocessing')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=REPO)
    assert done.stdout.strip() == "[]"
