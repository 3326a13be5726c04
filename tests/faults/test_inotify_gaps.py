"""Where inotify stops covering a followed file, a real daemon notices and says so: a watched
directory removed and recreated is watched again, and a file also named elsewhere (a hard link)
is polled, since writes through the other name are no event of its directory.

The daemon polls every 5 s and, while inotify covers every directory, walks and reads
everything only every 50 s: a line that is read within 30 s was read because of an event (or,
for the hard link, because the file is polled), not because of the sweep.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter

from watch_harness import DaemonProcess, wait_for

from matcher.testing import line_for

SLOW = ("--poll-interval", "5")


def lines(a: int, b: int) -> str:
    return "".join(f"{line_for(i)}\n" for i in range(a, b))


def arrived(d: DaemonProcess, n: int) -> bool:
    """Lines 0..n-1 were delivered within 30 s (the sweep is 50 s away)."""
    return set(d.wait_seqs(set(range(n)), 30)) >= set(range(n))


def append(path: os.PathLike[str], text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def test_a_watched_directory_removed_and_recreated_is_watched_again(tmp_path):
    """`rm -rf logs; mkdir logs`: the watch on `logs` ended with it; the new directory is
    watched again (`watch_rearmed`), and lines written into it are read at once."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text("")
    with DaemonProcess(tmp_path, [str(logs / "*.log")], *SLOW) as d:
        append(logs / "server.log", lines(0, 10))
        assert arrived(d, 10)
        shutil.rmtree(logs)
        assert wait_for(lambda: b'"watch_rearmed"' in d.err.read_bytes(), 30)
        logs.mkdir()
        (logs / "server.log").write_text(lines(10, 20))
        assert arrived(d, 20)
        assert wait_for(lambda: d.err.read_bytes().count(b'"watch_rearmed"') >= 2, 30)
        append(logs / "server.log", lines(20, 30))
        assert arrived(d, 30)
        assert d.stop() == 0
    assert d.seqs() == Counter(range(30))


def test_a_file_written_through_a_hard_link_elsewhere_is_polled(tmp_path):
    """A log also named in another directory and written there: inotify on ours never hears of
    it, so the file is read every poll (`file_polled` says why) instead of every sweep."""
    logs, elsewhere = tmp_path / "logs", tmp_path / "app"
    logs.mkdir()
    elsewhere.mkdir()
    (elsewhere / "app.log").write_text("")
    os.link(elsewhere / "app.log", logs / "server.log")
    with DaemonProcess(tmp_path, [str(logs / "*.log")], *SLOW) as d:
        assert wait_for(lambda: b'"file_polled"' in d.err.read_bytes(), 30)
        append(elsewhere / "app.log", lines(0, 10))
        assert arrived(d, 10)
        append(elsewhere / "app.log", lines(10, 20))
        assert arrived(d, 20)
        assert d.stop() == 0
    assert d.seqs() == Counter(range(20))
