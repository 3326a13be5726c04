"""`scan`'s progress line: drawn on a terminal from the first second on, at most once a second,
erased before the report; never on a pipe unless asked (`--progress`)."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from matcher.progress import ERASE, Progress

REPO = Path(__file__).resolve().parents[1]
SEED_ID = "4e2cdd4d6209ebbd"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nothing_in_the_first_second_then_at_most_once_a_second_then_erased():
    out, clock = io.StringIO(), Clock()
    p = Progress(out, total_bytes=4_000_000_000, files=12, clock=clock)
    clock.now += 0.9
    p.advance(300_000_000, events=2, files=1)
    assert out.getvalue() == ""
    clock.now += 0.2  # 1.1 s in
    p.advance(100_000_000, events=3)
    assert out.getvalue() == ERASE + ("sglang-matcher: scan: 0.4 of 4.0 GB (10%), 1 of 12 files, "
                                      "5 events, about 0:09 left")
    clock.now += 0.5
    p.advance(800_000_000, files=3)
    assert out.getvalue().count(ERASE) == 1  # half a second: not drawn again
    clock.now += 0.5  # 2.1 s in, 1.2 of 4.0 GB: 4.9 s left at this rate
    p.advance(0)
    assert out.getvalue().endswith(ERASE + "sglang-matcher: scan: 1.2 of 4.0 GB (30%), "
                                           "4 of 12 files, 5 events, about 0:04 left")
    p.close()
    assert out.getvalue().endswith(ERASE) and not p.shown


def test_not_on_a_terminal_each_drawing_is_a_line_of_its_own():
    """`--progress` into a file or a CI log: no carriage returns or escapes to garble it."""
    out, clock = io.StringIO(), Clock()
    p = Progress(out, total_bytes=0, files=1, redraw=False, clock=clock)
    for _ in range(3):
        clock.now += 1.0
        p.advance(2_500_000, events=1)
    p.close()
    assert out.getvalue().splitlines() == [
        f"sglang-matcher: scan: {mb} MB read, {n} event{'s' * (n > 1)}"
        for mb, n in (("2.5", 1), ("5.0", 2), ("7.5", 3))]


def test_a_short_scan_draws_and_erases_nothing():
    out, clock = io.StringIO(), Clock()
    p = Progress(out, total_bytes=25_000, files=1, clock=clock)
    clock.now += 0.3
    p.advance(25_000, events=1, files=1)
    p.close()
    assert out.getvalue() == ""


LAUNCH_LOG = REPO / "tests" / "fixtures" / "sglang" / "launch" / "int8_mamba_radix_lru.log"


def _scan_on_a_terminal(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`scan -` with stderr on a pseudo-terminal, stdout a file, and stdin a pipe a writer fills
    slowly (a server at work, then a launch that failed: 1.5 s from the scan's first read):
    exit code, stdout, stderr."""
    feed = (
        "import sys, time\n"
        f"quiet = b''.join(x for x in open({str(QUIET_LOG)!r}, 'rb') if b'Prefill batch' in x)\n"
        "out = sys.stdout.buffer\n"
        # More than a pipe holds (64 KiB): this returns only once the scan reads, whatever
        # its start-up takes (a fresh clone compiles the catalog first), so the 1.5 s after
        # it fall inside the scan and its first second passes.
        "out.write(quiet * 600); out.flush()\n"
        "for _ in range(6):\n"
        "    out.write(quiet); out.flush(); time.sleep(0.25)\n"
        f"out.write(open({str(LAUNCH_LOG)!r}, 'rb').read())\n"
    )
    master, slave = pty.openpty()
    stdout = tmp_path / "stdout"
    try:
        writer = subprocess.Popen([sys.executable, "-c", feed], stdout=subprocess.PIPE)
        with stdout.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "matcher", "scan", *args, "-"],
                                    stdin=writer.stdout, stdout=out, stderr=slave, cwd=REPO)
        assert writer.stdout is not None
        writer.stdout.close()
        os.close(slave)
        seen = bytearray()
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        assert writer.wait() == 0
        return proc.wait(), stdout.read_text(), seen.decode(errors="replace")
    finally:
        os.close(master)


# Real `Prefill batch` lines of a server at work (a log pasted into sglang issue 14193).
QUIET_LOG = REPO / "tests" / "fixtures" / "field" / "distributed-build" / \
    "14193-watchdog-illegal-memory-access.log"


def test_on_a_terminal_progress_is_drawn_and_erased_and_on_a_pipe_it_is_not(tmp_path):
    code, out, err = _scan_on_a_terminal(tmp_path, "--format", "json")
    assert code == 1 and [json.loads(x)["pattern_id"] for x in out.splitlines()] == [SEED_ID]
    assert "sglang-matcher: scan: " in err and " kB read, " in err and "events" in err
    assert err.endswith(ERASE)  # the report (or the shell prompt) starts on a clean line
    code, _, err = _scan_on_a_terminal(tmp_path, "--no-progress", "--format", "json")
    assert code == 1 and err == ""
    piped = subprocess.run([sys.executable, "-m", "matcher", "scan", "--format", "json",
                            str(LAUNCH_LOG)], capture_output=True, text=True, cwd=REPO)
    assert piped.returncode == 1 and piped.stderr == ""


def test_every_byte_on_disk_and_every_file_is_counted_once_by_one_process_or_by_workers(
        tmp_path):
    """What the line says adds up: a plain log cut into tasks (`-j 2`, each task counted as
    the parent takes it) and a gzip one read whole count their sizes on disk, each file once,
    and the events found; with one process, the same."""
    import gzip

    from matcher import parallel
    from matcher.catalog import load_catalog
    from matcher.engine import Engine
    from matcher.scan import scan_events

    logs = sorted((REPO / "tests" / "fixtures" / "sglang").rglob("*.log"))
    plain = tmp_path / "all.log"
    plain.write_bytes(b"".join(p.read_bytes() for p in logs))
    packed = tmp_path / "launch.log.gz"
    packed.write_bytes(gzip.compress(LAUNCH_LOG.read_bytes()))
    paths = [str(packed), str(plain)]
    on_disk = packed.stat().st_size + plain.stat().st_size
    catalog = load_catalog()
    engine = Engine(catalog.records)
    for jobs in (1, 2):
        p = Progress(io.StringIO(), total_bytes=on_disk, files=2, every=0.0, clock=Clock())
        scanned = scan_events(paths, catalog, engine=engine, jobs=jobs, read_size=4096,
                              err=io.StringIO(), progress=p)
        if jobs > 1 and parallel.available():
            assert scanned.parallel.tasks > 2  # the plain log cut, the gzip one whole
        assert (p.read_bytes, p.files_done) == (on_disk, 2), f"-j {jobs}"
        assert 0 < p.events <= len(scanned.events)

