"""Files that look like a copytruncate copy and are not, and truncations only the bytes tell.

Driven step by step on a real `FileSet` over real files (`test_copytruncate_race.Reader`), so
each case is exact: a poll is a poll, and the clock is advanced by hand.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from test_copytruncate_race import Reader, append, exactly, lines

from matcher import selflog

LAUNCH_ERROR = Path(__file__).resolve().parents[1] / "fixtures/sglang/launch/argparse_invalid_int.log"


def test_a_crash_loop_recreating_the_same_log_is_read_every_time(tmp_path):
    """A service that dies at launch and is restarted writes the same bytes (argparse errors
    carry no timestamp) into a new `server.log` each time: each new file is read in full — it
    replaced the old one at its path, so it is no copytruncate copy of it."""
    log = tmp_path / "server.log"
    data = LAUNCH_ERROR.read_bytes()
    r = Reader(tmp_path)
    for _crash in range(4):
        if log.exists():
            log.unlink()
        log.write_bytes(data)
        r.poll()
        r.poll()
    assert [f for f in r.fs.files.values() if f.parked is not None] == []
    assert sum(buf.count(b"invalid int value: 'two'") for buf in r.got.values()) == 4


def test_a_lookalike_that_its_original_never_follows_by_shrinking_is_read_as_new(tmp_path):
    """Two replicas that print the same banner (or a log copied in for a post-mortem): same
    first bytes, same bytes before our offset — a candidate copy. The original never shrinks,
    so after `rotate_wait` the lookalike is read from its start, and the release is said."""
    log = tmp_path / "server.log"
    append(log, lines(0, 100))
    r = Reader(tmp_path)
    r.poll()
    shutil.copyfile(log, tmp_path / "server.log.replica")
    r.poll()
    parked = [f for f in r.fs.files.values() if f.parked is not None]
    assert len(parked) == 1  # a candidate, for now
    r.now += 5.0  # rotate_wait without the original shrinking
    r.poll()
    r.poll()
    assert [f for f in r.fs.files.values() if f.parked is not None] == []
    replica = next(bytes(b) for sid, b in r.got.items() if "replica" in sid)
    assert replica == lines(0, 100)
    released = [n for n in r.fs.take_notices() if n.notice is selflog.FILE_RELEASED]
    assert len(released) == 1 and "did not shrink within 5 s" in released[0].detail


def test_a_real_copytruncate_is_still_recognized_when_its_original_shrinks(tmp_path):
    """The proof a candidate waits for: its original truncated — then read from where the
    original was left, once."""
    log = tmp_path / "server.log"
    append(log, lines(0, 100))
    r = Reader(tmp_path)
    r.poll()
    append(log, lines(100, 120))
    shutil.copyfile(log, tmp_path / "server.log.1")
    r.poll()
    r.now += 2.0  # logrotate's truncate comes within rotate_wait
    os.truncate(log, 0)
    append(log, lines(120, 150))
    r.poll()
    r.poll()
    exactly(r.lines(), 0, 150)


def test_truncated_and_rewritten_within_one_poll_with_the_same_first_bytes(tmp_path):
    """sglang restarted with `>` redirection: the file is truncated and rewritten past our
    offset before the next poll, starting with the same first KiB (the same launch banner).
    Size and first bytes say nothing; the bytes before our offset do."""
    banner = b"".join(b"[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp=%d)\n"
                      % i for i in range(40))  # > 1 KiB of identical start-up lines
    log = tmp_path / "server.log"
    log.write_bytes(banner + lines(0, 50))
    r = Reader(tmp_path)
    r.poll()
    with open(log, "wb") as f:  # truncate, then the second run writes more than the first
        f.write(banner + lines(1000, 1100))
    r.poll()
    r.poll()
    got = r.lines()
    assert all(got[line] == 1 for line in lines(1000, 1100).splitlines())
    assert any(n.notice is selflog.FILE_TRUNCATED for n in r.fs.take_notices())
