"""The journal source against real journals: systemd-journal-remote writes them from journal
export format, and the real journalctl reads them.

The entries are lines of a real sglang launch (`launch/unsupported_architecture.log`) as
`sglang.service` would have logged them, plus what the journal adds around a unit: a message
of another unit, systemd's own message about the unit (`_PID=1`, `UNIT=`) and journald's
rate-limit notice (`OBJECT_SYSTEMD_UNIT=`), which `journalctl --unit` shows with the unit.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from debian import require_tool

from matcher.source.journald import (
    HINT_GROUP,
    HINT_INSTALL,
    MESSAGE_ID_JOURNAL_DROPPED,
    JournalSource,
    JournalStatus,
    journalctl_argv,
)
from matcher.types import Line

FIXTURES = Path(__file__).parent / "fixtures"

JOURNALCTL = require_tool("journalctl", "systemd", module=True)
JOURNAL_REMOTE = require_tool(
    "systemd-journal-remote", "systemd-journal-remote", module=True,
    also=("/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote"))

BOOT_ID = "5f1a9b0e2c3d4e5f8a7b6c5d4e3f2a1b"
UNIT = "sglang.service"
SOURCE = "journal:sglang.service"

LOG = (FIXTURES / "sglang" / "launch" / "unsupported_architecture.log").read_bytes().split(b"\n")
SERVER_ARGS = LOG[11]  # `server_args={…}`: 20 KB, more than journalctl's 4096-byte JSON default
INKLING = LOG[31]
MIDASHENGLM = LOG[33]
TRACEBACK = b"\n".join(LOG[34:73])  # "Scheduler hit an exception: Traceback …" to "ValueError: …"
SIGQUIT = LOG[74]
# The inkling line as a process would write it with a broken byte: not UTF-8.
BROKEN = INKLING.replace(b"'cutlass'", b"'cut\xff\xfelass'")
BROKEN_TEXT = INKLING.decode().replace("'cutlass'", "'cut\ufffd\ufffdlass'")


def at(text: str) -> int:
    """`__REALTIME_TIMESTAMP` of an sglang timestamp (taken as UTC)."""
    moment = datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1_000_000


def sglang(message: bytes, usec: int) -> dict[str, bytes]:
    return {"_SYSTEMD_UNIT": UNIT.encode(), "_TRANSPORT": b"stdout",
            "SYSLOG_IDENTIFIER": b"python", "MESSAGE": message, "__usec": str(usec).encode()}


T0 = at("2026-12-02 14:35:37")
T1 = at("2026-12-02 14:35:46")

ENTRIES: list[dict[str, bytes]] = [
    sglang(SERVER_ARGS, T0),
    {"_SYSTEMD_UNIT": b"cron.service", "SYSLOG_IDENTIFIER": b"CRON",
     "MESSAGE": b"(root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)",
     "__usec": str(T0 + 1).encode()},
    sglang(MIDASHENGLM, T1),
    sglang(TRACEBACK, T1 + 1),
    sglang(BROKEN, T1 + 2),
    {"_UID": b"0", "_PID": b"311", "_TRANSPORT": b"driver", "SYSLOG_IDENTIFIER":
     b"systemd-journald", "_SYSTEMD_UNIT": b"systemd-journald.service",
     "MESSAGE_ID": MESSAGE_ID_JOURNAL_DROPPED.encode(), "N_DROPPED": b"7",
     "OBJECT_SYSTEMD_UNIT": UNIT.encode(), "OBJECT_PID": b"9213",
     "MESSAGE": b"Suppressed 7 messages from sglang.service", "__usec": str(T1 + 3).encode()},
    sglang(SIGQUIT, T1 + 4),
    {"_PID": b"1", "_UID": b"0", "_SYSTEMD_UNIT": b"init.scope", "SYSLOG_IDENTIFIER": b"systemd",
     "UNIT": UNIT.encode(),
     "MESSAGE": b"sglang.service: Main process exited, code=exited, status=1/FAILURE",
     "__usec": str(T1 + 5).encode()},
]


def export_format(entries: Iterable[Mapping[str, bytes]], monotonic_base: int = 0) -> bytes:
    """Journal export format: `FIELD=value` lines, or for values that are not one line of
    UTF-8 the field name, a newline, the length as 64-bit little endian and the raw bytes."""
    out = bytearray()
    for n, entry in enumerate(entries):
        fields = {"__REALTIME_TIMESTAMP": entry["__usec"],
                  "__MONOTONIC_TIMESTAMP": str(monotonic_base + 1_000_000 + n).encode(),
                  "_BOOT_ID": BOOT_ID.encode()}
        fields.update({k: v for k, v in entry.items() if k != "__usec"})
        for key, value in fields.items():
            try:
                value.decode("utf-8")
                plain = b"\n" not in value
            except UnicodeDecodeError:
                plain = False
            if plain:
                out += key.encode() + b"=" + value + b"\n"
            else:
                out += key.encode() + b"\n" + struct.pack("<Q", len(value)) + value + b"\n"
        out += b"\n"
    return bytes(out)


def write_journal(path: Path, entries: Iterable[Mapping[str, bytes]],
                  monotonic_base: int = 0) -> Path:
    """Append entries to the journal file `path` (created when missing), as journald would."""
    subprocess.run([JOURNAL_REMOTE, f"--output={path}", "-"],
                   input=export_format(entries, monotonic_base),
                   check=True, capture_output=True, timeout=60)
    return path


def read_all(source: JournalSource, timeout: float = 30.0,
             ) -> tuple[list[Line], list[JournalStatus]]:
    """Everything a finite (`follow=False`) source yields, and its statuses."""
    lines: list[Line] = []
    statuses: list[JournalStatus] = []
    deadline = time.monotonic() + timeout
    while not source.finished:
        assert time.monotonic() < deadline, "journalctl did not finish"
        source.wait(0.5)
        lines += source.read()
        statuses += source.poll()
    return lines, statuses


def read_until(source: JournalSource, count: int, timeout: float = 30.0,
               ) -> tuple[list[Line], list[JournalStatus]]:
    lines: list[Line] = []
    statuses: list[JournalStatus] = []
    deadline = time.monotonic() + timeout
    while len(lines) < count:
        assert time.monotonic() < deadline, f"got {len(lines)} of {count} lines: {statuses}"
        source.wait(0.5)
        lines += source.read()
        statuses += source.poll()
    return lines, statuses


def kinds(statuses: list[JournalStatus]) -> list[str]:
    return [s.kind for s in statuses]


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_journal(tmp_path_factory.mktemp("journal") / "system.journal", ENTRIES)


def whole(source: JournalSource) -> list[Line]:
    with source:
        lines, _ = read_all(source)
    return lines


TS0 = "2026-12-02T14:35:37.000000Z"
TS1 = "2026-12-02T14:35:46.000"
TRACEBACK_LINES = TRACEBACK.decode().split("\n")


def expected_lines() -> list[Line]:
    """The unit's entries as lines: entry n → offset n; only its last line ends at n + 1."""
    texts: list[tuple[int, str, str]] = [
        (0, SERVER_ARGS.decode(), TS0),
        (1, MIDASHENGLM.decode(), TS1 + "000Z"),
        *[(2, t, TS1 + "001Z") for t in TRACEBACK_LINES],
        (3, BROKEN_TEXT, TS1 + "002Z"),
        (4, "Suppressed 7 messages from sglang.service", TS1 + "003Z"),
        (5, SIGQUIT.decode(), TS1 + "004Z"),
        (6, "sglang.service: Main process exited, code=exited, status=1/FAILURE", TS1 + "005Z"),
    ]
    lines = []
    for i, (entry, text, ts) in enumerate(texts):
        last = i + 1 == len(texts) or texts[i + 1][0] != entry
        lines.append(Line(text=text, source=SOURCE, offset=entry,
                          end_offset=entry + 1 if last else entry, ts=ts, lineno=i + 1))
    return lines


def test_entries_of_the_unit_become_lines_in_order(journal: Path) -> None:
    """Every entry of the unit (and systemd's and journald's about it) is read as lines, in
    journal order: the multi-line traceback split, invalid UTF-8 replaced, the 20 KB line whole,
    the other unit's entry absent."""
    source = JournalSource([UNIT], files=[journal], follow=False, from_beginning=True)
    assert whole(source) == expected_lines()


def test_finite_read_reports_start_dropped_messages_and_end(journal: Path) -> None:
    """journald's rate-limit notice becomes a `dropped` status with its count; a finite read
    says where it started and that it ended."""
    with JournalSource([UNIT], files=[journal], follow=False, from_beginning=True) as source:
        _, statuses = read_all(source)
    assert kinds(statuses) == ["started", "dropped", "finished"]
    assert statuses[1].dropped == 7
    assert statuses[0].argv == (
        "journalctl", "--output=json", "--all", "--no-pager",
        "--output-fields=MESSAGE,MESSAGE_ID,N_DROPPED",
        f"--file={journal}", "--unit=sglang.service", "--no-tail")


def test_other_unit_only_its_own_entries(journal: Path) -> None:
    """Filtering is journalctl's `--unit`: the cron entry is read for cron.service, and no
    sglang line is."""
    source = JournalSource(["cron.service"], files=[journal], follow=False, from_beginning=True)
    assert [(line.text, line.source) for line in whole(source)] == [
        ("(root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)",
         "journal:cron.service")]


def test_resume_after_each_entry_yields_exactly_the_rest(journal: Path) -> None:
    """Resuming with the cursor of entry n reads entries n+1… exactly: none again, none lost."""
    source = JournalSource([UNIT], files=[journal], follow=False, from_beginning=True)
    first = whole(source)
    entries = sorted({line.offset for line in first})
    for n in entries:
        cursor = source.cursor_at(n)
        assert cursor is not None
        resumed = JournalSource([UNIT], files=[journal], follow=False, after_cursor=cursor,
                                first_offset=n + 1)
        with resumed:
            lines, statuses = read_all(resumed)
        rest = [line for line in first if line.offset > n]
        assert resumed.cursor_for_checkpoint(n + 1) == cursor  # nothing new processed yet
        assert [(x.text, x.offset, x.end_offset, x.ts) for x in lines] == [
            (x.text, x.offset, x.end_offset, x.ts) for x in rest]
        assert "gap" not in kinds(statuses)


def test_checkpoint_cursor_is_that_of_the_last_whole_entry(journal: Path) -> None:
    """After a line in the middle of the traceback the checkpoint is still the entry before
    it; after its last line, the traceback's own entry."""
    source = JournalSource([UNIT], files=[journal], follow=False, from_beginning=True)
    lines = whole(source)
    traceback = [line for line in lines if line.offset == 2]
    assert source.cursor_for_checkpoint(traceback[0].end_offset) == source.cursor_at(1)
    assert source.cursor_for_checkpoint(traceback[-1].end_offset) == source.cursor_at(2)
    assert len({source.cursor_at(n) for n in range(7)}) == 7
    assert source.cursor_at(7) is None


def test_cursor_history_is_bounded(journal: Path) -> None:
    """Only the last `cursor_history` cursors are kept: older ones are forgotten, not wrong."""
    source = JournalSource([UNIT], files=[journal], follow=False, from_beginning=True,
                           cursor_history=3)
    whole(source)
    assert [source.cursor_at(n) is not None for n in range(8)] == [
        False, False, False, False, True, True, True, False]


def test_an_entry_too_large_is_skipped_but_its_cursor_kept(journal: Path) -> None:
    """An entry over `max_entry_bytes` of JSON (here the 20 KB server_args line) is reported and
    skipped; its cursor is still known, so a checkpoint can pass it."""
    source = JournalSource([UNIT], files=[journal], follow=False, from_beginning=True,
                           max_entry_bytes=16 * 1024)
    with source:
        lines, statuses = read_all(source)
    rest = [line for line in expected_lines() if line.offset > 0]
    assert lines == [replace(line, lineno=n) for n, line in enumerate(rest, 1)]
    assert kinds(statuses) == ["started", "oversized", "dropped", "finished"]
    cursor = source.cursor_at(0)
    assert cursor is not None and cursor in statuses[1].message
    resumed = JournalSource([UNIT], files=[journal], follow=False, after_cursor=cursor,
                            first_offset=1)
    assert [line.text for line in whole(resumed)] == [line.text for line in lines]


def test_a_unit_without_entries_reads_nothing_and_is_no_error(journal: Path) -> None:
    """journalctl does not know units, only matches: a misspelled unit just reads nothing."""
    with JournalSource(["sglan.service"], files=[journal], follow=False,
                       from_beginning=True) as source:
        lines, statuses = read_all(source)
    assert (lines, kinds(statuses)) == ([], ["started", "finished"])


def test_resume_at_a_rotated_away_entry_reports_a_gap_and_loses_nothing_more(
        tmp_path: Path, journal: Path) -> None:
    """When the checkpointed entry is no longer in the journal the source says so, and reads
    on from the next entry (journalctl's own --after-cursor would skip that one too)."""
    source = JournalSource([UNIT], files=[journal], follow=False, from_beginning=True)
    whole(source)
    cursor = source.cursor_at(1)  # the midashenglm line
    assert cursor is not None
    # The same host's journal after entry 1 was vacuumed away: same boot, same clocks.
    later = write_journal(tmp_path / "system.journal", [ENTRIES[0], *ENTRIES[3:]])
    resumed = JournalSource([UNIT], files=[later], follow=False, after_cursor=cursor,
                            first_offset=2)
    with resumed:
        lines, statuses = read_all(resumed)
    assert [line.text for line in lines] == [line.text for line in expected_lines()
                                             if line.offset >= 3]
    assert kinds(statuses) == ["started", "gap", "dropped", "finished"]
    assert "may be lost" in statuses[1].message
    assert "2026-12-02T14:35:46.000002Z" in statuses[1].message


def test_follow_starts_at_the_end_and_reads_what_is_written(tmp_path: Path) -> None:
    """Following a journal directory: entries already there are not read, new ones are, in
    order, numbered from 0."""
    path = write_journal(tmp_path / "system.journal", ENTRIES[:3])
    lines: list[Line] = []
    with JournalSource([UNIT], directory=tmp_path) as source:
        assert kinds(source.poll()) == ["started"]
        # journalctl seeks to the end at some point after its start: write until it sees one.
        for i in range(40):
            write_journal(path, [sglang(SIGQUIT + f" #{i}".encode(), T1 + 10 + i)],
                          monotonic_base=100 + i)
            if source.wait(0.5) and (lines := source.read()):
                break
        write_journal(path, [sglang(SIGQUIT + b" #last", T1 + 100)], monotonic_base=200)
        rest, statuses = read_until(source, 1)
    first = int(lines[0].text.rsplit("#", 1)[1])
    assert [(line.text, line.offset, line.end_offset) for line in lines + rest] == [
        (SIGQUIT.decode() + f" #{first}", 0, 1), (SIGQUIT.decode() + " #last", 1, 2)]
    assert statuses == []


def test_killed_journalctl_is_restarted_and_resumes_after_the_last_entry(
        tmp_path: Path) -> None:
    """journalctl killed while following is reported, started again after the delay, and
    resumes after the last entry it had printed: nothing twice, nothing lost."""
    path = write_journal(tmp_path / "system.journal", ENTRIES[2:4])
    clock = [0.0]
    with JournalSource([UNIT], directory=tmp_path, from_beginning=True, restart_delay=5.0,
                       clock=lambda: clock[0]) as source:
        first, _ = read_until(source, 1 + len(TRACEBACK_LINES))
        pid = source.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        statuses: list[JournalStatus] = []
        while "exited" not in kinds(statuses):
            assert time.monotonic() < deadline
            source.wait(0.5)
            statuses += source.poll()
        assert statuses[-1].message.endswith(
            "journalctl was killed by SIGKILL; starting it again in 5 s")
        write_journal(path, [sglang(SIGQUIT, T1 + 10)], monotonic_base=100)
        assert source.poll() == [] and source.pid is None  # not before the delay
        clock[0] = 5.0
        after, statuses = read_until(source, 1)
        assert kinds(statuses) == ["started"]
        assert "--cursor=" in " ".join(statuses[0].argv)
        time.sleep(0.5)
        after += source.read()
    assert [line.text for line in first] == [MIDASHENGLM.decode(), *TRACEBACK_LINES]
    assert [(line.text, line.offset) for line in after] == [(SIGQUIT.decode(), 2)]


def test_missing_journalctl_is_reported_and_retried_never_raised() -> None:
    """No journalctl: a status that says to install systemd, no exception, another try after
    the delay, and the delay grows."""
    clock = [0.0]
    with JournalSource([UNIT], journalctl="/nonexistent/bin/journalctl", restart_delay=1.0,
                       clock=lambda: clock[0]) as source:
        assert source.read() == []
        first = source.poll()
        clock[0] = 0.5
        assert source.read() == [] and source.poll() == []
        clock[0] = 1.0
        second = source.poll()
    argv = journalctl_argv([UNIT], journalctl="/nonexistent/bin/journalctl")
    assert first == [JournalStatus(
        "unavailable",
        f"journal:sglang.service: '/nonexistent/bin/journalctl' was not found: {HINT_INSTALL}; "
        "trying again in 1 s",
        retry_in=1.0, argv=tuple(argv))]
    assert [(s.kind, s.retry_in) for s in second] == [("unavailable", 2.0)]


def test_unreadable_journal_says_to_join_the_systemd_journal_group(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """journalctl run by a user who may not read the journal exits; the status says what
    journalctl said and how to grant access."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run journalctl as an unprivileged user (setpriv)")
    setpriv = require_tool("setpriv", "util-linux")
    # Outside pytest's 0700 tmp tree: nobody can list the directory, not read the file (0640).
    directory = Path(tempfile.mkdtemp(prefix="journal-"))
    request.addfinalizer(lambda: shutil.rmtree(directory, ignore_errors=True))
    directory.chmod(0o755)
    write_journal(directory / "system.journal", ENTRIES[:1])
    as_nobody = tmp_path / "journalctl-as-nobody"
    as_nobody.write_text(f"#!/bin/sh\nexec {setpriv} --reuid=nobody --regid=nogroup --clear-groups "
                         f"{JOURNALCTL} \"$@\"\n")
    as_nobody.chmod(0o755)
    clock = [0.0]
    with JournalSource([UNIT], directory=directory, journalctl=str(as_nobody),
                       clock=lambda: clock[0]) as source:
        deadline = time.monotonic() + 10
        statuses: list[JournalStatus] = []
        while "exited" not in kinds(statuses):
            assert time.monotonic() < deadline, statuses
            source.wait(0.5)
            statuses += source.poll()
            assert source.read() == []
    # systemd 252 says "No journal files were opened due to insufficient permissions."
    last = statuses[-1]
    assert (last.kind, last.returncode, last.retry_in) == ("exited", 1, 1.0)
    assert last.message.startswith("journal:sglang.service: journalctl exited with status 1: ")
    assert last.message.endswith(f" — {HINT_GROUP}; starting it again in 1 s")
    assert "insufficient permissions" in last.message or "Permission denied" in last.message


def test_following_a_single_file_is_refused_with_what_to_give_instead(journal: Path) -> None:
    """journalctl cannot follow `--file` (it exits, or waits for ever): refused up front, and
    the message says to give the directory."""
    with pytest.raises(ValueError, match="give their directory"):
        JournalSource([UNIT], files=[journal])


def test_a_slow_reader_makes_journalctl_wait_instead_of_buffering(tmp_path: Path) -> None:
    """With a queue of 4 entries and nobody reading, journalctl blocks on its pipe; then
    every entry still arrives, in order."""
    n = 2000
    many = [sglang(f"{MIDASHENGLM.decode()} #{i}".encode(), T1 + i) for i in range(n)]
    path = write_journal(tmp_path / "system.journal", many)
    with JournalSource([UNIT], files=[path], follow=False, from_beginning=True,
                       max_queue_entries=4) as source:
        source.poll()
        deadline = time.monotonic() + 10
        while len(source._queue) < 4:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        assert len(source._queue) == 4
        assert source._run is not None and source._run.proc.poll() is None  # waiting on write
        lines, _ = read_all(source)
    assert [line.text.rsplit("#", 1)[1] for line in lines] == [str(i) for i in range(n)]


def test_close_stops_journalctl(tmp_path: Path) -> None:
    """close() ends the journalctl it started."""
    write_journal(tmp_path / "system.journal", ENTRIES[:1])
    source = JournalSource([UNIT], directory=tmp_path)
    source.poll()
    run = source._run
    assert run is not None
    source.close()
    assert run.proc.returncode is not None
    assert source.state == "closed" and source.read() == [] and source.poll() == []


def test_argv_where_each_start_begins() -> None:
    """First start at the end; a resume at the checkpointed entry itself (see the docstring);
    a restart before any entry from the first start's time; --no-tail whenever following
    from somewhere, since --follow alone shows only the last 10 entries."""
    base = ["journalctl", "--output=json", "--all", "--no-pager",
            "--output-fields=MESSAGE,MESSAGE_ID,N_DROPPED", "--follow", "--unit=sglang.service"]
    assert journalctl_argv([UNIT]) == [*base, "--lines=0"]
    assert journalctl_argv([UNIT], cursor="s=1;i=2") == [*base, "--cursor=s=1;i=2", "--no-tail"]
    assert journalctl_argv([UNIT], since=1796222146.5) == [
        *base, "--since=@1796222146.500000", "--no-tail"]
    assert journalctl_argv([UNIT], from_beginning=True) == [*base, "--no-tail"]
    assert journalctl_argv([UNIT, "sglang-router.service"], directory="/var/log/journal/x",
                           follow=False) == [
        *base[:5], "--directory=/var/log/journal/x", "--unit=sglang.service",
        "--unit=sglang-router.service", "--lines=0"]
