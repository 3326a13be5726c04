"""Files that move, vanish and multiply under a real daemon: every line once, memory bounded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from faultkit import figure, peak_rss_mib
from watch_harness import DaemonProcess, wait_for

WRITERS = Path(__file__).with_name("writers.py")


def run_writer(*args: str) -> str:
    out = subprocess.run([sys.executable, str(WRITERS), *args], check=True, capture_output=True,
                         text=True, timeout=600)
    return out.stdout


def lost_and_doubled(seqs: Counter[int], expected: set[int]) -> tuple[int, int]:
    return len(expected - set(seqs)), sum(c - 1 for c in seqs.values())


def test_rotation_storm_loses_nothing(tmp_path, scale):
    """A file renamed away every 10 ms while lines are written (every 5th an error): with the
    rotated names in the glob, every error line is delivered exactly once."""
    log = tmp_path / "server.log"
    log.touch()
    n = scale.storm_lines
    with DaemonProcess(tmp_path, [str(tmp_path / "server.log*")],
                       env={"SGLANG_MATCHER_ROTATE_WAIT": "1"}) as d:
        rotations = int(run_writer("storm", "--path", str(log), "--lines", str(n),
                                   "--every-ms", "10", "--error-every", "5"))
        expected = set(range(0, n, 5))
        d.wait_seqs(expected, timeout=300)
        rss = peak_rss_mib(d.proc.pid)
        assert d.stop() == 0
    lost, doubled = lost_and_doubled(d.seqs(), expected)
    figure(f"rotation storm: {n} lines, {rotations} rotations (every 10 ms), "
           f"{len(expected)} errors: lost {lost}, duplicated {doubled}, peak RSS {rss:.0f} MiB")
    assert rotations >= 50
    assert (lost, doubled) == (0, 0)


def test_a_hundred_files_rotating_at_once(tmp_path, scale):
    """100 logs written round-robin and all renamed away at the same moment, repeatedly."""
    logs = tmp_path / "logs"
    logs.mkdir()
    rounds = 200 if scale.full else 60
    with DaemonProcess(tmp_path, [str(logs / "*.log*")],
                       env={"SGLANG_MATCHER_ROTATE_WAIT": "1"}) as d:
        run_writer("many", "--path", str(logs), "--files", "100", "--lines", str(rounds),
                   "--rotate-every", "20")
        expected = set(range(100 * rounds))
        d.wait_seqs(expected, timeout=300)
        rss = peak_rss_mib(d.proc.pid)
        open_fds = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
        assert d.stop() == 0
    lost, doubled = lost_and_doubled(d.seqs(), expected)
    figure(f"100 files rotated at once ×{rounds // 20}: {len(expected)} lines: lost {lost}, "
           f"duplicated {doubled}, peak RSS {rss:.0f} MiB, fds at the end {open_fds}")
    assert (lost, doubled) == (0, 0)
    assert len(list(logs.iterdir())) == 100 * (rounds // 20 + 1)


def test_file_deleted_while_open_is_read_to_its_end_then_released(tmp_path):
    """The writer keeps writing to a file someone deleted (Filebeat #2395): we read those lines
    too, then close it after `rotate_wait` of silence, so the disk space is freed."""
    log = tmp_path / "server.log"
    with DaemonProcess(tmp_path, [str(log)], env={"SGLANG_MATCHER_ROTATE_WAIT": "1"}) as d:
        with open(log, "a") as f:
            f.write("".join(f"{_line(i)}\n" for i in range(100)))
            f.flush()
            d.wait_seqs(set(range(100)))
            os.unlink(log)
            f.write("".join(f"{_line(i)}\n" for i in range(100, 200)))
            f.flush()
            d.wait_seqs(set(range(200)))
        fd_dir = f"/proc/{d.proc.pid}/fd"

        def held() -> list[str]:
            return [t for t in (os.readlink(os.path.join(fd_dir, x)) for x in os.listdir(fd_dir))
                    if t.startswith(str(log))]

        assert held()  # still open right after the last line: late lines would be read
        assert wait_for(lambda: not held(), 15)
        assert d.stop() == 0
    assert d.seqs() == Counter(range(200))


def test_directory_removed_and_recreated(tmp_path):
    """`rm -rf logs; mkdir logs` under the glob: the old file's lines and the new file's, once."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text("")
    with DaemonProcess(tmp_path, [str(logs / "*.log")]) as d:
        (logs / "server.log").write_text("".join(f"{_line(i)}\n" for i in range(50)))
        d.wait_seqs(set(range(50)))
        shutil.rmtree(logs)
        wait_for(lambda: b'"file_closed"' in d.err.read_bytes() or b"rotated" in d.err.read_bytes(), 10)
        logs.mkdir()
        (logs / "server.log").write_text("".join(f"{_line(i)}\n" for i in range(50, 120)))
        d.wait_seqs(set(range(120)))
        assert d.stop() == 0
    assert d.seqs() == Counter(range(120))


def test_writer_killed_mid_line(tmp_path):
    """A writer SIGKILLed after half a line: the complete lines are delivered once; the half line
    is flushed as it is after `partial_line_flush` of silence and not again after a restart."""
    log = tmp_path / "server.log"
    log.touch()
    script = ("import os,sys,time\n"
              "from matcher.testing import line_for\n"
              "f=os.open(sys.argv[1],os.O_WRONLY|os.O_APPEND)\n"
              "os.write(f,''.join(line_for(i)+'\\n' for i in range(300)).encode())\n"
              "os.write(f,line_for(300).encode())\n"  # the whole text, no newline
              "print('ready',flush=True)\ntime.sleep(60)\n")
    with DaemonProcess(tmp_path, [str(log)], env={"SGLANG_MATCHER_PARTIAL_LINE_FLUSH": "0.5"}) as d:
        w = subprocess.Popen([sys.executable, "-c", script, str(log)], stdout=subprocess.PIPE,
                             cwd=Path(__file__).resolve().parents[2])
        assert w.stdout is not None and w.stdout.readline() == b"ready\n"
        w.send_signal(signal.SIGKILL)
        w.wait()
        d.wait_seqs(set(range(301)))
        assert d.stop() == 0
        d.start()
        with open(log, "a") as f:
            f.write("\n" + _line(301) + "\n")
        d.wait_seqs(set(range(302)))
        assert d.stop() == 0
    assert d.seqs() == Counter(range(302))


def test_permission_denied_then_granted(tmp_path):
    """A log the daemon may not read: reported, retried; once readable it is read from its
    start (it was never read), every line once."""
    log = tmp_path / "server.log"
    log.write_text("")
    log.chmod(0)
    with DaemonProcess(tmp_path, [str(log)], honour_file_modes=True) as d:
        assert wait_for(lambda: b'"file_unreadable"' in d.err.read_bytes(), 10)
        with open(log, "a") as f:
            f.write("".join(f"{_line(i)}\n" for i in range(100)))
        time.sleep(0.3)  # several polls refused; nothing can be read meanwhile
        assert d.seqs() == Counter()
        log.chmod(0o644)
        d.wait_seqs(set(range(100)))
        with open(log, "a") as f:
            f.write("".join(f"{_line(i)}\n" for i in range(100, 150)))
        d.wait_seqs(set(range(150)))
        assert d.stop() == 0
    assert d.seqs() == Counter(range(150))
    assert b'"file_recovered"' in d.err.read_bytes()


def _line(i: int) -> str:
    from matcher.testing import line_for

    return line_for(i)
