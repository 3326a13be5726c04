"""What `scan -j N` is given besides the regular files it cuts: a named pipe, a pipe such as
`<(kubectl logs …)`, and more files than its descriptor limit lets it hold open. Each is read
whole, with `-j 1`'s output. (Before: a named pipe hung the scan for good, and `ulimit -n 64`
with 300 files failed the whole scan with "Too many open files".)"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from matcher import parallel
from matcher.scan import scan_events

REPO = Path(__file__).resolve().parents[2]
LOGS = sorted([*(REPO / "tests" / "fixtures").rglob("*.log"),
               *(REPO / "examples" / "logs").glob("*.log")])

pytestmark = pytest.mark.skipif(not parallel.available(), reason="no fork here")


def _scan(loaded, paths, jobs, seen=None):
    catalog, engine = loaded
    err = io.StringIO()

    def hung(*_):
        pytest.fail(f"scan -j {jobs} still waits after 60 s")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        scanned = scan_events([str(p) for p in paths], catalog, engine=engine, jobs=jobs,
                              read_size=1024, err=err)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    if seen is not None:
        seen.append(scanned.parallel)
    return scanned.events, scanned.lines, err.getvalue()


def test_a_named_pipe_among_files_is_read_once_by_the_parent(loaded, concatenated, tmp_path):
    """A FIFO fed by a real writer process (`cat`), beside a file that is cut into tasks.
    Opening a FIFO waits for its writer, and closing it early kills the writer (SIGPIPE):
    checked and planned before, it was opened twice, and the second open waited forever."""
    fifo = tmp_path / "kubectl-logs.fifo"
    os.mkfifo(fifo)
    piece = tmp_path / "piece.log"
    piece.write_bytes(concatenated.read_bytes()[:400_000])
    results = []
    for jobs in (1, 2):
        writer = subprocess.Popen(["sh", "-c", f"cat '{piece}' > '{fifo}'"])
        try:
            seen = []
            results.append(_scan(loaded, [fifo, concatenated], jobs, seen))
        finally:
            writer.kill()
            writer.wait()
        if jobs == 2:
            assert seen[0].tasks > 1  # the file was cut: workers read it
    one, two = results
    assert one[0] and one[1] > concatenated.read_bytes().count(b"\n")
    assert two == one


def test_a_pipe_loses_no_byte_to_the_check_of_whether_workers_pay(loaded, concatenated):
    """`scan <(kubectl logs pod) big.log` hands the scan `/dev/fd/N`, a pipe: opening that path
    again is another reader of the same pipe, so a peek at its head (as a regular file's is
    peeked at, for gzip's magic) would take bytes from the scan. The pipe starts with a
    failure whose first bytes decide what it is."""
    first = next(p for p in LOGS if p.read_bytes().startswith(b"Traceback (most recent"))
    content = first.read_bytes()
    results = []
    for jobs in (1, 2):
        r, w = os.pipe()
        feeder = threading.Thread(target=lambda w=w: (os.write(w, content), os.close(w)))
        feeder.start()
        try:
            results.append(_scan(loaded, [f"/dev/fd/{r}", concatenated], jobs))
        finally:
            feeder.join()
            os.close(r)
    one, two = results
    assert one[0] and two[0]
    assert [(d["pattern_id"], d["line"]) for d in two[0]] \
        == [(d["pattern_id"], d["line"]) for d in one[0]]
    assert two == one


CHILD = """
import json, resource, sys
from matcher.catalog import load_catalog
from matcher.scan import scan_events
paths = sys.argv[1:]
catalog = load_catalog()
out = {}
for jobs in (1, 2):
    scanned = scan_events(paths, catalog, jobs=jobs, read_size=1024)
    workers = scanned.parallel
    out[jobs] = [scanned.events, scanned.lines, workers and {"tasks": workers.tasks}]
out["nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)
print(json.dumps(out))
"""


def test_more_files_than_the_descriptor_limit_lets_it_hold(concatenated, tmp_path):
    """300 files under `ulimit -n 64` (soft and hard: nothing to raise to): the plan holds
    what the limit leaves room for, and opens the rest by path, as `-j 1` does."""
    data = concatenated.read_bytes()
    paths = []
    for i in range(300):
        path = tmp_path / f"rank{i}.log"
        path.write_bytes(data[i * 5_000: i * 5_000 + 20_000])
        paths.append(str(path))
    child = subprocess.run(["prlimit", "--nofile=64:64", sys.executable, "-c", CHILD, *paths],
                           capture_output=True, text=True, timeout=300, cwd=REPO)
    assert child.returncode == 0, child.stderr
    out = json.loads(child.stdout)
    assert out["nofile"] == [64, 64]
    assert out["2"][2]["tasks"] >= 300  # read by workers
    assert out["1"][0] and out["2"][:2] == out["1"][:2]


def test_the_files_held_fit_the_descriptor_limit():
    """`_holdable` keeps what is open now and `OWN_DESCRIPTORS` free, and raises the soft limit
    to the hard one first (here in a child under 100:100, and under 100:4096)."""
    code = ("import json, os\nfrom matcher import parallel\n"
            "print(json.dumps([parallel._holdable(2), len(os.listdir('/proc/self/fd'))]))")
    low = subprocess.run(["prlimit", "--nofile=100:100", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=60, check=True, cwd=REPO)
    held, open_now = json.loads(low.stdout)
    assert held == 100 - parallel.OWN_DESCRIPTORS - 4 - open_now > 0
    raised = subprocess.run(["prlimit", "--nofile=100:4096", sys.executable, "-c", code],
                            capture_output=True, text=True, timeout=60, check=True, cwd=REPO)
    held, open_now = json.loads(raised.stdout)
    assert held == 4096 - parallel.OWN_DESCRIPTORS - 4 - open_now < parallel.HELD_FILES
