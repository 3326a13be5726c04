"""Something other than a checkpoint at `checkpoints.json`: a FIFO, a symlink to /dev/zero, a
directory, a file over the size cap. Before issue 12 the first hung the start forever, the
second filled memory (4 GB in 12 s), the third was never moved aside (every later checkpoint
failed), the fourth was read whole. Now each is moved aside like a corrupt file, reported as
`checkpoint_unreadable`, and the daemon starts and delivers what is written after it started."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from faultkit import figure, peak_rss_mib, stderr_events
from watch_harness import DaemonProcess

from matcher.source.checkpoint import FILE_NAME, MAX_BYTES, CheckpointState, CheckpointStore
from matcher.testing import line_for

# A daemon that misbehaves on one of these must fail the test, not take the machine with it: its
# address space is capped (an idle daemon maps ~350 MB), so an unbounded read dies of MemoryError.
ADDRESS_SPACE_CAP = ["prlimit", f"--as={2 << 30}", "--"]


def _lines(a: int, b: int) -> str:
    return "".join(line_for(i) + "\n" for i in range(a, b))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _symlink_to_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("x")


def _oversized(path: Path) -> None:
    """A valid checkpoint, padded past the cap: a plain read accepts it, whole."""
    with open(path, "wb") as f:
        f.write(b'{"version": 1, "files": [], "journal": {}')
        f.write(b" " * (MAX_BYTES + (1 << 20)))
        f.write(b"}")


SPECIAL: dict[str, Callable[[Path], None]] = {
    "a FIFO": _fifo, "a symlink to /dev/zero": _symlink_to_dev_zero, "a directory": _directory,
    "a valid checkpoint over the cap": _oversized,
}


def _checkpoint_offset(state: Path, log: Path) -> int:
    doc = json.loads((state / FILE_NAME).read_text())
    return max((e["offset"] for e in doc["files"] if e["path"] == str(log)), default=0)


@pytest.mark.parametrize("what", SPECIAL,
                         ids=["fifo", "symlink-to-dev-zero", "directory", "oversized"])
def test_a_special_checkpoint_file_is_moved_aside_and_the_daemon_starts(tmp_path, what):
    """The daemon starts (within the harness's 60 s), says `checkpoint_unreadable` and why,
    moves the thing aside (a symlink itself, its target untouched), starts files at their end
    as on a corrupt checkpoint, delivers lines written after the start, and its next checkpoint
    is a regular file holding the current position."""
    log = tmp_path / "server.log"
    log.write_text(_lines(0, 50))
    d = DaemonProcess(tmp_path, [str(log)])
    d.prefix = ADDRESS_SPACE_CAP
    d.state.mkdir()
    SPECIAL[what](d.state / FILE_NAME)
    with d:
        with open(log, "a") as f:
            f.write(_lines(50, 80))
        d.wait_seqs(set(range(50, 80)))
        peak = peak_rss_mib(d.proc.pid)
        assert d.stop() == 0
    (report,) = stderr_events(d, "checkpoint_unreadable")
    assert "moved to" in report["detail"], report
    [aside] = d.state.glob(f"{FILE_NAME}.corrupt-*")
    assert aside.is_symlink() == ("symlink" in what)
    assert (d.state / FILE_NAME).is_file() and not (d.state / FILE_NAME).is_symlink()
    assert d.seqs() == Counter(range(50, 80))
    assert _checkpoint_offset(d.state, log) == log.stat().st_size
    figure(f"checkpoints.json is {what}: started, reported "
           f"({report['detail'].split('(')[1].split(')')[0]}), moved aside, peak RSS "
           f"{peak:.0f} MiB")


@pytest.mark.parametrize("make", [_fifo, _symlink_to_dev_zero, _directory],
                         ids=["fifo", "symlink-to-dev-zero", "directory"])
def test_load_moves_aside_without_reading_and_save_then_writes_a_regular_file(tmp_path, make):
    """In process: load() reports and renames the thing; save() afterwards writes a regular
    file that loads back."""
    store = CheckpointStore(tmp_path)
    make(store.path)
    state, problem = store.load()
    assert problem is not None and "moved to" in problem
    assert not os.path.lexists(store.path)
    state.journal["journal:x"] = "cursor"
    store.save(state)
    loaded, problem = CheckpointStore(tmp_path).load()
    assert (problem, loaded.journal) == (None, {"journal:x": "cursor"})


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_save_replaces_a_fifo_or_symlink_put_in_its_place_never_writing_through_it(tmp_path,
                                                                                   kind):
    """A FIFO or symlink appearing at the name while the daemon runs: the next save renames a
    regular file over the name (the link itself: its target is not written), without blocking."""
    store = CheckpointStore(tmp_path / "state")
    store.save(CheckpointState(journal={"journal:x": "1"}))
    os.unlink(store.path)
    target = tmp_path / "someone-elses"
    target.write_text("not ours")
    if kind == "fifo":
        os.mkfifo(store.path)
    else:
        store.path.symlink_to(target)
    store.save(CheckpointState(journal={"journal:x": "2"}))
    assert store.path.is_file() and not store.path.is_symlink()
    assert target.read_text() == "not ours"
    assert CheckpointStore(tmp_path / "state").load()[0].journal == {"journal:x": "2"}


def test_a_file_at_the_cap_is_read_and_one_byte_over_is_not(tmp_path):
    """The cap is exact: MAX_BYTES of valid checkpoint loads; MAX_BYTES + 1 is moved aside."""
    store = CheckpointStore(tmp_path)
    head = b'{"version": 1, "files": [], "journal": {"j": "c"}'
    store.path.write_bytes(head + b" " * (MAX_BYTES - len(head) - 1) + b"}")
    state, problem = store.load()
    assert (problem, state.journal) == (None, {"j": "c"})
    store.path.write_bytes(head + b" " * (MAX_BYTES - len(head)) + b"}")
    state, problem = store.load()
    assert problem is not None and f"over the {MAX_BYTES}-byte limit" in problem


def test_each_bad_start_keeps_its_own_evidence(tmp_path):
    """Two bad files moved aside within one second do not overwrite each other."""
    store = CheckpointStore(tmp_path)
    for content in (b"\0", b"{"):
        store.path.write_bytes(content)
        assert store.load()[1] is not None
    assert sorted(p.read_bytes() for p in tmp_path.glob(f"{FILE_NAME}.corrupt-*")) == [b"\0", b"{"]
