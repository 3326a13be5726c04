"""The files `Source`: every file the configured globs match, followed across rotation.

`FileSet` knows which files there are and where each was left; this class takes turns reading
them. One turn reads a bounded amount per file (so one busy file cannot starve the others),
walks the globs when due (at once after inotify saw a create, delete or rename; otherwise
every poll, or every `SWEEP_POLLS` polls when inotify covers every configured directory),
flushes a last line left without its newline long enough, and closes the idlest files when
descriptors run short. What it reads goes to the `Intake`; what happens to files (rotated,
truncated, unreadable, nothing matched) goes to `FileEvents`.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from matcher import selflog
from matcher.config import Config
from matcher.source.budget import DescriptorBudget, descriptor_budget
from matcher.source.checkpoint import CheckpointState
from matcher.source.discovery import DiscoveryStopped, why_nothing
from matcher.source.events import FileEvents
from matcher.source.files import FileSet
from matcher.source.openfile import OpenFile, SourceNotice
from matcher.types import Chunk, Intake
from matcher.utf8 import count_invalid

__all__ = ["FileSource", "descriptor_budget", "excluded", "own_identities"]

NOTHING_REPORT_INTERVAL = 300.0  # a glob that matches nothing is said again this often
SWEEP_POLLS = 10  # with inotify, the globs are walked every this many polls (and on events)
MAX_TOUCHED = 10_000  # modified paths remembered between two turns; beyond: walk instead


def excluded(config: Config) -> tuple[str, ...]:
    """The `exclude` patterns, and the daemon's own events file as it is named, by its
    absolute path and relative to here (as a relative glob finds it): put beside the logs it
    reads (`events_file = /var/log/sglang/matcher.log` under `/var/log/sglang/*.log`), it was
    read too, and every event it held came back as another, from it."""
    own = config.events_file
    if own is None:
        return config.exclude
    names = dict.fromkeys((str(own), os.path.abspath(own), os.path.relpath(own)))
    return (*config.exclude, *(glob.escape(n) for n in names))


def own_identities(config: Config, writers: Callable[[], Iterable[tuple[int, int] | None]]
                   ) -> Callable[[], tuple[set[tuple[int, int]], set[tuple[int, int]]]]:
    """What the daemon writes, by (device, inode), asked at each walk (a file may be made
    anew): the files its event writers write to now (`writers`), `events_file` as named,
    its own stdout and stderr when they are files, and the state dir (the checkpoint, its
    temporary files and the lock, all in it). A path compared as a string missed the events
    file reached through a symlinked directory (`/var/log` → `/data/log`): read back, each
    event became another without end."""
    def ids() -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
        files: set[tuple[int, int]] = {i for i in writers() if i is not None}
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                st = os.fstat(fd)
                files.add((st.st_dev, st.st_ino))
        dirs: set[tuple[int, int]] = set()
        for path, into in ((config.events_file, files), (config.state_dir, dirs)):
            if path is not None:
                with contextlib.suppress(OSError):
                    st = os.stat(path)
                    into.add((st.st_dev, st.st_ino))
        return files, dirs
    return ids


class FileSource:
    """The configured globs as one `Source`."""

    name = "files"

    def __init__(
        self,
        config: Config,
        state: CheckpointState,
        telemetry: FileEvents,
        *,
        max_open_files: int,
        clock: Callable[[], float],
        wall: Callable[[], float],
        wake: Callable[[], None],
        should_stop: Callable[[], bool],
    ) -> None:
        self.config = config
        self.telemetry = telemetry
        self.clock = clock
        self.wall = wall
        self._wake = wake
        self.files = FileSet(
            config.paths, excluded(config), state,
            from_beginning=config.from_beginning,
            fingerprint_bytes=config.fingerprint_bytes,
            rotate_wait=config.rotate_wait,
            clock=clock,
            max_walk_entries=config.max_walk_entries,
            should_stop=should_stop,
            max_open=max_open_files,
        )
        self.max_open_files = max_open_files
        for pattern in config.paths:
            # A series for every configured glob from the start, so an alert on 0 can fire
            # even when no walk ever completes.
            telemetry.files_followed(pattern, 0)
        self._discovery_said: dict[str, tuple[object, ...]] = {}
        self._nothing_said: dict[str, float] = {}
        self._structure_changed = False  # inotify saw a create/delete/rename
        self._touched: list[str] = []  # paths inotify saw modified since the last turn
        self._events_cover_all = False
        self._observer: Any = None
        # Each watched glob's directory as (device, inode) when it was watched (None: it was
        # not there): a directory removed or made anew since takes its watch with it.
        self._armed: dict[str, tuple[int, int] | None] | None = None
        self._next_discovery = 0.0
        self._next_full_read = 0.0
        self.discovered = False  # the first walk is done: files present at start are known
        self._saved_revision = -1  # CheckpointState.revision at the last checkpoint written

    # -- settings ----------------------------------------------------------------------------

    def reconfigure(self, config: Config, telemetry: FileEvents, max_open_files: int) -> None:
        """SIGHUP: new globs, exclusions and reading settings apply from the next turn; files
        already followed keep their identity and position."""
        old = self.config
        self.config, self.telemetry = config, telemetry
        self.files.configure(config.paths, excluded(config),
                             fingerprint_bytes=config.fingerprint_bytes,
                             rotate_wait=config.rotate_wait,
                             max_walk_entries=config.max_walk_entries, max_open=max_open_files)
        self.max_open_files = max_open_files
        self._structure_changed = True  # walk the (new) globs at once
        if (config.paths, config.poll_only) != (old.paths, old.poll_only):
            self.stop_watching()
            self.start_watching()

    # -- Source ------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return False  # files may always grow or appear

    @property
    def followed(self) -> int:
        return len(self.files.files)

    def read(self, now: float, intake: Intake) -> bool:
        self._check_watches()
        if now >= self._next_discovery or self._structure_changed:
            self._structure_changed = False
            self.discover(intake)
            self._next_discovery = now + self._discovery_interval()
        touched: set[str] | None = None
        if self._touched:
            batch, self._touched = self._touched, []
            touched = {os.path.abspath(p) for p in batch}
            self.files.wake(touched, now)  # closed idle files that grew
            self._log_notices()
        if self.files.undecided():
            # A file waiting to be judged (maybe a copy) that was written, or whose wait is
            # over, is judged now, and read in this turn if it is to be read: not a poll, or
            # a sweep, later.
            due = self.files.decision_due(now)
            if (due is not None and due <= 0) or (touched and any(
                    f.abspath in touched for f in self.files.files.values()
                    if f.parked is not None)):
                self.files.judge(now)
                self._log_notices()
        if now >= self._next_full_read or not self._events_cover_all:
            self._next_full_read = now + self.config.poll_interval * SWEEP_POLLS
            return self.read_round(now, intake)
        # inotify names what changed: only those, and files still being read
        return self.read_round(now, intake, touched=touched or set())

    def save(self, state: CheckpointState, intake: Intake, wall: float) -> bool:
        for f in self.files.files.values():
            if state.current(f.state.identity.key, f.state.offset, f.path):
                continue  # saved at its read position, nothing read since: nothing held either
            offset = intake.checkpoint_offset(f.source_id)
            self.files.checkpoint(f, f.state.offset if offset is None else offset, wall)
        lag: dict[str, int] = dict.fromkeys(self.config.paths, 0)
        for f in self.files.files.values():
            if f.dormant:
                continue  # it was read to its end when it was closed; growth wakes it
            lag[f.pattern] = lag.get(f.pattern, 0) + max(0, f.seen_size - f.state.offset)
        for pattern, behind in lag.items():  # one series per configured glob: the sum
            self.telemetry.read_lag(pattern, behind)
        return self.files.state.revision != self._saved_revision

    def saved(self) -> None:
        """The state `save` filled in was written: positions moved since are new changes."""
        self._saved_revision = self.files.state.revision

    def tracked_keys(self) -> set[str]:
        return {f.state.identity.key for f in self.files.files.values()}

    def close(self) -> None:
        self.stop_watching()
        self.files.close_all()

    # -- discovery ---------------------------------------------------------------------------

    def _discovery_interval(self) -> float:
        """How long until the globs are walked again. With inotify covering every configured
        directory a walk follows each structural event (create, delete, rename) at once, and
        the periodic walk is only the safety net (a lost event, a network filesystem): every
        `SWEEP_POLLS` polls. Without it, or while a new file waits to be judged a copy or not,
        every poll."""
        if self._observer is None or not self._events_cover_all or self.files.undecided():
            return self.config.poll_interval
        return self.config.poll_interval * SWEEP_POLLS

    def discover(self, intake: Intake) -> None:
        try:
            done = self.files.discover()
        except DiscoveryStopped:
            return  # SIGTERM mid-walk: the loop ends, what is open is drained
        except OSError as e:
            self.telemetry.pipeline_error("discover", e)
            return
        for f in done:
            self._end_file(f, intake)
        self._log_notices()
        self._report_discovery()
        self.discovered = True

    def due_in(self, now: float) -> float | None:
        """Seconds until a file waiting to be judged may be decided by time alone (the
        daemon's nap ends then); None when no file waits."""
        return self.files.decision_due(now)

    def matching_nothing(self) -> list[str]:
        """Configured globs that follow no file now (/readyz lists them)."""
        followed = self.files.followed()
        return [p for p in self.files.discoveries if followed.get(p, 0) == 0]

    def _report_discovery(self) -> None:
        """Say what each glob follows, and loudly when that is nothing or the walk failed."""
        now = self.clock()
        followed = self.files.followed()
        self.telemetry.files_parked(sum(1 for f in self.files.files.values()
                                        if f.parked is not None))
        for pattern, found in self.files.discoveries.items():
            self.telemetry.files_followed(pattern, followed.get(pattern, 0))
            said = (tuple(found.problems), found.capped)
            if said != self._discovery_said.get(pattern, ((), False)):
                self._discovery_said[pattern] = said
                if found.descriptors_exhausted:
                    self.telemetry.pipeline_error(
                        "discover", "OSError", path=pattern,
                        detail="too many open files while listing: " + "; ".join(found.problems),
                        hint="raise LimitNOFILE (ulimit -n) or lower max_open_files; files "
                             "already followed are kept, not taken for gone")
                elif found.problems:
                    self.telemetry.notice(selflog.LISTING_FAILED, path=pattern,
                                          detail="; ".join(found.problems[:5]),
                                          hint="files already followed are kept; retried "
                                               "every poll")
                if found.capped:
                    self.telemetry.notice(
                        selflog.DISCOVERY_CAPPED, path=pattern,
                        detail=f"stopped after {found.entries} directory entries",
                        hint="narrow the glob, or raise max_walk_entries")
            if followed.get(pattern, 0) == 0 and found.complete:
                last = self._nothing_said.get(pattern)
                if last is None or now - last >= NOTHING_REPORT_INTERVAL:
                    self._nothing_said[pattern] = now
                    self.telemetry.notice(selflog.PATH_MATCHES_NOTHING,
                                          path=pattern, detail=why_nothing(pattern))
            else:
                self._nothing_said.pop(pattern, None)

    def _end_file(self, f: OpenFile, intake: Intake) -> None:
        if not f.dormant:
            self._drain_file(f, self.clock(), intake)
        intake.end(f.source_id, self.clock())
        self.files.checkpoint(f, f.state.offset, self.wall())
        self.files.close(f)

    # -- reading -----------------------------------------------------------------------------

    def read_round(self, now: float, intake: Intake, touched: set[str] | None = None) -> bool:
        """One fair pass over the files; True if any bytes were read.

        `touched` (inotify's modified paths since the last turn) limits the pass to those
        files and to files that need turns anyway: read last turn (a backlog), waiting out a
        partial line, rotated away, or at a path inotify cannot vouch for (a symlink, whose
        target's writes are not events of its directory). None: every file (a sweep)."""
        progressed = False
        for f in list(self.files.files.values()):
            if f.dormant:
                continue
            if touched is not None and not self._needs_turn(f, touched):
                continue
            named = touched is not None and f.abspath in touched
            if self._read_file(f, now, self.config.read_chunk_bytes, intake, named):
                progressed = True
                f.busy = True
            else:
                f.busy = False
        if self.files.open_count() > self.max_open_files * 0.9 or self.files.deferred:
            self._sleep_idle_files(intake)
        return progressed

    @staticmethod
    def _needs_turn(f: OpenFile, touched: set[str]) -> bool:
        return (f.busy or f.abspath in touched or f.pending_partial_since is not None
                or f.gone_since is not None or not f.seen_at_path or f.unwatched)

    def _sleep_idle_files(self, intake: Intake) -> None:
        """Near the descriptor budget, or files waiting for one: close the files idle longest
        (read to their end, nothing of them held by the pipeline), checkpointed first, down to
        half the budget — Filebeat's `close_inactive`, forced by the count, not a timer."""
        excess = self.files.open_count() - self.max_open_files // 2
        idle = DescriptorBudget.idlest(
            (f for f in self.files.files.values()
             if not f.dormant and f.parked is None and f.seen_at_path and f.gone_since is None
             and intake.partial_line_start(f.source_id) is None
             and intake.checkpoint_offset(f.source_id) in (None, f.state.offset)), excess)
        wall = self.wall()
        for f in idle:
            self.files.sleep(f, wall)
        slept = len(idle)
        if slept:
            self.telemetry.files_slept(slept, open_files=self.files.open_count(),
                                       max_open_files=self.max_open_files)

    def _read_file(self, f: OpenFile, now: float, budget: int, intake: Intake,
                   named: bool = False) -> bool:
        """One read of `f`; `named`: inotify said it was written since the last turn."""
        if f.parked is not None:
            return False
        try:
            # Idle is one fstat: truncation is checked (size, first bytes, the bytes before our
            # offset) whenever there is something to read, before and after reading it, and
            # when the file's times moved, or inotify named it, while its size stayed at our
            # offset (truncated and rewritten to exactly the length we had read: nothing to
            # read by size alone).
            rewritten = f.look() or named
            if f.seen_size == f.state.offset:
                if rewritten and self._truncated(f, now, intake):
                    return True
                data = b""
            elif self._truncated(f, now, intake):
                return True
            else:
                data = f.read(budget)
                if data and self._truncated(f, now, intake, len(data)):
                    return True  # rewritten while we read: what we read is not this file's now
        except OSError as e:
            self.telemetry.pipeline_error("read", e, path=f.path)
            return False
        if data:
            f.last_growth = now
            f.pending_partial_since = None
            if f.state.identity.fp_len < self.config.fingerprint_bytes:
                self.files.refresh_identity(f)  # a young file: its fingerprint grows with it
            fed = intake.chunk(Chunk(data, f.source_id, f.state.offset), now)
            self.telemetry.lines(f.pattern, fed.lines, len(data))
            if fed.truncated:
                self.telemetry.lines_truncated(f.pattern, fed.truncated, path=f.path)
            bad_utf8, f.utf8_carry = count_invalid(f.utf8_carry, data)
            self.telemetry.malformed_input(f.pattern, path=f.path, invalid_utf8=bad_utf8,
                                           nul_byte=data.count(b"\0") if b"\0" in data else 0,
                                           container_format=fed.malformed)
            return True
        partial_start = intake.partial_line_start(f.source_id)
        if partial_start is not None:
            if f.pending_partial_since is None:
                f.pending_partial_since = now
            elif now - f.pending_partial_since >= self.config.partial_line_flush:
                intake.flush_partial(f.source_id, now)
                f.pending_partial_since = None
        return False

    def _truncated(self, f: OpenFile, now: float, intake: Intake, just_read: int = 0) -> bool:
        if not self.files.check_truncation(f, just_read):
            return False
        intake.end(f.source_id, now)
        self._log_notices()
        return True

    def _drain_file(self, f: OpenFile, now: float, intake: Intake) -> None:
        while self._read_file(f, now, 1 << 20, intake):
            pass

    def _log_notices(self) -> None:
        for n in self.files.take_notices():
            self._notice(n)

    def _notice(self, n: SourceNotice) -> None:
        """Each file event is logged and counted in one place: telemetry (rotations and
        truncations have counters of their own)."""
        if n.notice is selflog.FILE_ROTATED:
            self.telemetry.rotated(n.pattern, path=n.path, detail=n.detail)
        elif n.notice is selflog.FILE_TRUNCATED:
            self.telemetry.truncated(n.pattern, path=n.path, detail=n.detail)
        else:
            self.telemetry.notice(n.notice, path=n.path, detail=n.detail)

    # -- inotify -----------------------------------------------------------------------------

    def _watch_targets(self) -> dict[str, tuple[int, int] | None]:
        out: dict[str, tuple[int, int] | None] = {}
        for pattern in self.config.paths:
            directory = _static_dir(pattern)
            try:
                st = os.stat(directory)
                out[directory] = (st.st_dev, st.st_ino)
            except OSError:
                out[directory] = None
        return out

    def _check_watches(self) -> None:
        """At each turn (one stat a watched directory): a watched directory removed, made
        anew or made at last since it was watched has no watch (inotify's ended with the old
        directory, with `IN_IGNORED`; the event saying so can come before the walk it starts
        sees the directory gone), yet every file under it would wait for the sweep. Watch
        again, and walk at once: files under a directory that is not there are polled (a walk
        every poll) until it is."""
        if self._armed is None or self.config.poll_only:
            return
        now = self._watch_targets()
        if now == self._armed:
            return
        before = self._armed
        changed = sorted(d for d, ident in now.items() if ident != before.get(d))
        self.stop_watching()
        self.start_watching()
        self._structure_changed = True
        for d in changed:
            if now[d] is None:
                state = "removed: what it held is polled until it is there again"
            elif before.get(d) is None:
                state = "made: watched now"
            else:
                state = "made anew: watched again"
            self.telemetry.notice(selflog.WATCH_REARMED, directory=d,
                                  detail=f"the watched directory was {state}")

    def start_watching(self) -> None:
        """inotify (via watchdog) wakes discovery early; polling stays the ground truth."""
        if self.config.poll_only:
            self._events_cover_all = False
            return
        self._armed = self._watch_targets()
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:  # pragma: no cover
            return
        wake = self._wake
        source = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("created", "deleted", "moved"):
                    source._structure_changed = True  # a walk of the globs, at once
                elif event.event_type == "modified" and not event.is_directory:
                    touched = source._touched
                    if len(touched) < MAX_TOUCHED:
                        touched.append(event.src_path)  # list.append: atomic under the GIL
                    else:
                        source._structure_changed = True  # too many to list: walk instead
                wake()

        observer = Observer()
        watched: set[str] = set()
        covered = 0
        for pattern in self.config.paths:
            directory = _static_dir(pattern)
            if directory in watched:
                covered += 1
                continue
            if not os.path.isdir(directory):
                continue
            # Recursive when a directory part has a wildcard: a new pod's log is an event too.
            recursive = Path(pattern).parent != Path(directory)
            try:
                observer.schedule(Handler(), directory, recursive=recursive)
                watched.add(directory)
                covered += 1
            except OSError as e:
                self.telemetry.notice(selflog.WATCH_FAILED, directory=directory,
                                      detail=str(e))
        if watched:
            observer.daemon = True
            observer.start()
            self._observer = observer
        self._events_cover_all = covered == len(self.config.paths)

    def stop_watching(self) -> None:
        """Also at shutdown, before the last reads: without inotify every turn is a sweep."""
        self._events_cover_all = False
        self._armed = None
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()


def _static_dir(pattern: str) -> str:
    """The deepest directory of a glob that has no wildcard in it."""
    parts = Path(pattern).parts
    static: list[str] = []
    for part in parts[:-1]:
        if any(c in part for c in "*?["):
            break
        static.append(part)
    return str(Path(*static)) if static else "."
