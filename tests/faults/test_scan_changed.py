"""A log changed while `scan` reads it — logrotate on the live node a post-mortem runs on —
is read as far as it is the log it was, said on stderr as not read whole (exit 2 when nothing
else is wrong), and never crashes the scan or mixes in another file's bytes:

- truncated (`copytruncate`): `scan -j 2` raised IndexError (no event printed at all) when a
  task of its workers found the file ended before its first read;
- renamed away and made anew (`create`): `scan -j 1` holds its file open to the end, but the
  tasks of `-j N` open it by path one after another, and read the new file's bytes at the old
  one's offsets, without a word."""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path

import pytest

from matcher import parallel
from matcher.scan import scan_events

REPO = Path(__file__).resolve().parents[2]
LOGS = sorted([*(REPO / "tests" / "fixtures").rglob("*.log"),
               *(REPO / "examples" / "logs").glob("*.log")])
SAID = "truncated while read (logrotate's copytruncate?)"
REPLACED = "replaced while read (renamed away by logrotate's `create`?)"


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "server.log"
    path.write_bytes(b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in LOGS))
    return path


def _scan(loaded, path, jobs, **kw):
    catalog, engine = loaded
    err = io.StringIO()
    scanned = scan_events([str(path)], catalog, engine=engine, jobs=jobs, read_size=1024,
                          err=err, **kw)
    return scanned, err.getvalue()


@pytest.mark.skipif(not parallel.available(), reason="no fork here")
@pytest.mark.parametrize(("keep", "said"), [(0.1, True), (0.45, True), (0.8, True),
                                           (0.95, False)])
def test_scan_j2_of_a_log_truncated_once_its_tasks_are_planned(loaded, log, tmp_path, keep,
                                                               said):
    """The file is cut to a share of itself after `-j 2` planned its tasks on its old size,
    before any is read: the tasks past the cut find nothing (or less), and the output is what
    one process reads of the file as it is now, with the truncation said. The last of the
    8 tasks reads to the end, wherever it is: a cut inside it (past 7/8) is a file that ends
    sooner, as one process would see it, and nothing is said."""
    size = log.stat().st_size
    cut = int(size * keep)
    prefix = tmp_path / "prefix.log"
    prefix.write_bytes(log.read_bytes()[:cut])

    def truncate_then_split(chunks, jobs):
        os.truncate(log, cut)
        return parallel.split_file(chunks, jobs)

    alone, alone_err = _scan(loaded, prefix, 1)
    assert alone.events and not alone_err
    got, err = _scan(loaded, log, 2, split=truncate_then_split)
    assert got.parallel.tasks > 1
    named = [{**e, "source": str(prefix)} for e in got.events]
    assert (named, got.lines) == (alone.events, alone.lines)
    if said:
        assert err.count(SAID) == 1 and len(got.not_read) == 1, err
        assert "bytes when the scan began" in err
    else:
        assert not err and not got.not_read


def test_scan_j1_of_a_log_truncated_while_read(loaded, log, tmp_path):
    """One process: the file is cut to 500 bytes after its first read of 1 KiB. What was read
    is kept (that read's lines, and what the file's buffer held), the rest is gone, and
    stderr says so. (A cut beyond what was read is a shorter file: nothing to tell.)"""
    whole = log.read_bytes()
    cut = 500

    class TruncateAfterFirstRead:
        done = False

        def advance(self, read=0, *, events=0, files=0):
            if not self.done:
                os.truncate(log, cut)
                self.done = True

    got, err = _scan(loaded, log, 1, progress=TruncateAfterFirstRead())
    assert SAID in err and "500 bytes there now" in err, err
    assert err.count(SAID) == 1 and len(got.not_read) == 1
    first_read = tmp_path / "first.log"
    first_read.write_bytes(whole[:1024])
    assert _scan(loaded, first_read, 1)[0].lines <= got.lines < whole.count(b"\n")


def test_scan_command_says_a_truncated_log_was_not_read_whole(log, tmp_path, monkeypatch,
                                                              capsys):
    """The command's exit code: 2 (an input not read whole) when nothing else is wrong — on a
    real excerpt whose lines hold no failure (a decode batch retracting requests)."""
    from matcher import cli
    from matcher.commands import scan

    quiet = tmp_path / "quiet.log"
    shutil.copy(REPO / "tests" / "fixtures" / "field" / "gpu"
                / "4184-decode-oom-retract-deepseek-r1.log", quiet)
    assert cli.main(["scan", "--no-progress", str(quiet)]) == 0
    real = scan.scan_events

    def truncated_while_read(paths, *args, **kw):
        class Cut:
            def advance(self, read=0, *, events=0, files=0):
                os.truncate(quiet, 0)
        kw["progress"] = Cut()
        return real(paths, *args, **kw)

    monkeypatch.setattr(scan, "scan_events", truncated_while_read)
    code = cli.main(["scan", "--no-progress", str(quiet)])
    err = capsys.readouterr().err
    assert SAID in err
    assert code == 2


@pytest.mark.skipif(not parallel.available(), reason="no fork here")
@pytest.mark.parametrize("held", [True, False])
def test_scan_j2_of_a_log_renamed_away_and_made_anew_while_read(loaded, log, tmp_path,
                                                                monkeypatch, held):
    """Four tasks; as the third is opened (by a worker done with the first or the second),
    logrotate's `create` happens: the log is renamed to `.1` and a new one, another real log,
    takes its path.

    Held open since the plan (`HELD_FILES`), the file is read whole, as one process reads
    it, and nothing is said. Past `HELD_FILES` (0 here), the third and fourth tasks find
    another file at the path, and so does the parent where it must read part of the second
    itself (a traceback straddling its start): the output is one process's of the log up to
    the byte the message names — the first or the second half — nothing of the new file."""
    if not held:
        monkeypatch.setattr(parallel, "HELD_FILES", 0)
    whole = log.read_bytes()
    read_size = 1024
    chunks = -(-len(whole) // read_size)
    starts = [0, chunks // 4, chunks // 2, 3 * chunks // 4]
    rotated = log.with_name("server.log.1")
    newcomer = REPO / "examples" / "logs" / "int8-mamba-radix-cache.log"
    real_open = parallel._open

    def rotating_open(task, size):
        if task.first == starts[2] and not rotated.exists():
            log.rename(rotated)
            log.write_bytes(newcomer.read_bytes() * 20)
        return real_open(task, size)

    monkeypatch.setattr(parallel, "_open", rotating_open)
    got, err = _scan(loaded, log, 2, split=lambda n, jobs: starts)
    assert rotated.exists()
    if held:
        original = tmp_path / "original.log"
        original.write_bytes(whole)
        alone, _ = _scan(loaded, original, 1)
        assert [{**e, "source": str(original)} for e in got.events] == alone.events
        assert got.lines == alone.lines and not err and not got.not_read
        return
    assert err.count(REPLACED) == 1 and len(got.not_read) == 1, err
    stop = int(re.search(r"from byte ([\d,]+) on", err)[1].replace(",", ""))
    assert stop in (starts[1] * read_size, starts[2] * read_size)
    prefix = tmp_path / "prefix.log"
    prefix.write_bytes(whole[:stop])
    alone, _ = _scan(loaded, prefix, 1)
    assert [{**e, "source": str(prefix)} for e in got.events] == alone.events
    assert got.lines == alone.lines


def test_a_task_whose_path_holds_another_file_reads_none_of_it(loaded, log, tmp_path):
    """The check itself, in one process: a task cut from one file, its path then taken by
    another, gives no record and says why."""
    from matcher.pipeline import Pipeline

    catalog, engine = loaded
    st = log.stat()
    task = parallel.Task(str(log), str(log), 0, None, None, st.st_size, True,
                         (st.st_dev, st.st_ino))
    log.rename(tmp_path / "old.log")
    log.write_bytes((REPO / "examples" / "logs" / "int8-mamba-radix-cache.log").read_bytes())
    done = parallel.WorkerContext(
        engine, Pipeline(engine, catalog_version=catalog.version), 1024, {}).run(task)
    assert done.steps == [] and done.states == [] and done.short
    assert done.damaged is not None and done.damaged.startswith(REPLACED)


@pytest.mark.skipif(not parallel.available(), reason="no fork here")
@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("held", [True, False])
def test_rotated_between_the_plan_and_the_first_read(loaded, log, tmp_path, monkeypatch,
                                                     compressed, held):
    """logrotate renames the log away and makes a new one after `-j 2` planned its tasks and
    before any is read — a plain log, or a gzip one (one task, read whole by a worker). Held
    open, the file planned is the file read: one process's output of it, nothing said. Not
    held, the first task finds another file: nothing of it is read, and it is said."""
    import gzip

    if compressed:
        log = log.rename(log.with_name("server.log.2.gz"))
        log.write_bytes(gzip.compress(log.read_bytes()))
    original = tmp_path / ("original.gz" if compressed else "original.log")
    shutil.copy(log, original)
    if not held:
        monkeypatch.setattr(parallel, "HELD_FILES", 0)
    real = parallel._fork

    def rotate_then_fork(pipeline, inputs, plan, *args):
        log.rename(log.with_name(log.name + ".old"))
        log.write_bytes((REPO / "examples" / "logs" / "int8-mamba-radix-cache.log")
                        .read_bytes())
        return real(pipeline, inputs, plan, *args)

    monkeypatch.setattr(parallel, "_fork", rotate_then_fork)
    got, err = _scan(loaded, log, 2)
    assert log.with_name(log.name + ".old").exists()  # the workers read it: rotated
    if held:
        alone, _ = _scan(loaded, original, 1)
        assert [{**e, "source": str(original)} for e in got.events] == alone.events
        assert got.lines == alone.lines and not err
    else:
        assert got.events == [] and got.lines == 0
        assert err.count(REPLACED) == 1 and "from byte 0 on" in err, err


def test_a_task_whose_file_was_deleted_reads_none_of_it(loaded, log):
    """Past the files held open, a file deleted before its task opens it: no record, no
    crash, and why (the parent reads on with what came before)."""
    from matcher.pipeline import Pipeline

    catalog, engine = loaded
    st = log.stat()
    task = parallel.Task(str(log), str(log), 4, None, "plain", st.st_size, True,
                         (st.st_dev, st.st_ino))
    log.unlink()
    done = parallel.WorkerContext(
        engine, Pipeline(engine, catalog_version=catalog.version), 1024, {}).run(task)
    assert done.steps == [] and done.states == [] and done.short
    assert done.damaged == "deleted while read: from byte 4,096 on it was not read"
