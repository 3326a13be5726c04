"""The daemon never reads what it writes — its events file, its stdout and stderr redirected to
files, its checkpoint and lock — whatever path a glob reaches them by: they are excluded by
device and inode, not by how their path is spelled. Reached through a symlinked directory
(`/var/log` → `/data/log`), the events file was read back and, with `repeat_interval` 0,
every event came back as another without end."""

from __future__ import annotations

import json

from watch_harness import DaemonProcess, wait_for


def _lines(start: int, stop: int) -> str:
    return "".join(f"[2026-01-01 12:00:00] injected failure seq={n} end\n"
                   for n in range(start, stop))


def test_own_outputs_reached_through_a_symlinked_directory_are_never_read(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    link = tmp_path / "varlog"
    link.symlink_to(tmp_path)  # every file of the test, the daemon's own among them, again
    log = data / "server.log"
    log.touch()
    events_file = data / "matcher-events.log"
    # The glob reads everything under the link: the events file (named by its real path),
    # stdout and stderr (files in tmp_path), the state dir's checkpoint and lock.
    d = DaemonProcess(tmp_path, [str(link / "**")],
                      env={"SGLANG_MATCHER_EVENTS_FILE": str(events_file),
                           "SGLANG_MATCHER_CHECKPOINT_INTERVAL": "0.1"})
    with d:
        with open(log, "a") as f:
            f.write(_lines(0, 3))
        assert set(d.wait_seqs({0, 1, 2}, 20)) == {0, 1, 2}
        assert wait_for((d.state / "checkpoints.json").exists, 10)
        # One more failure after every own file exists and holds events: by the time its
        # event is out, a walk has seen them all.
        with open(log, "a") as f:
            f.write(_lines(3, 4))
        d.wait_seqs({3}, 20)
        assert wait_for(lambda: len(events_file.read_text().splitlines()) == 4, 10)
        assert d.stop() == 0
    sources = {e["source"] for e in d.events()}
    assert sources == {str(link / "data" / "server.log")}, sources
    assert d.seqs() == dict.fromkeys(range(4), 1)
    opened = [json.loads(line)["path"] for line in d.err.read_text().splitlines()
              if '"file_opened"' in line]
    own = {"matcher-events.log", d.out.name, d.err.name, "checkpoints.json", "lock"}
    assert str(link / "data" / "server.log") in opened
    assert not [p for p in opened if p.rsplit("/", 1)[-1] in own], opened
