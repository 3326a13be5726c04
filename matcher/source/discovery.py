"""Which paths the configured globs match now: a walk that always ends and never guesses.

`glob.glob` was not enough for a daemon, in three ways:
- it follows symlinked directories under `**` without remembering where it has been, so a tree
  with two symlink loops is walked forever (memory grew without bound, SIGTERM was ignored);
- it swallows every listing error: with descriptors exhausted it returns nothing, and the file
  set then took every followed file for "no longer at its path" and closed it;
- it cannot be told to stop.

Here each directory is listed once per walk, by device + inode (a loop, or two symlinks to one
directory, is walked once: the files under it are the same files whichever path reaches them);
a walk lists at most `max_entries` directory entries (more: it stops, the result is marked
incomplete and the caller warns); `should_stop` is asked every few hundred entries; and a listing
that fails for any reason but "not there" (`ENOENT`, `ENOTDIR`) makes the result incomplete, with
the reason, so the caller keeps what it follows instead of dropping it.

Matching follows `glob`: `*`, `?` and `[…]` within one path component, case-sensitive; `**` as a
whole component matches zero or more directories; names starting with `.` match only a pattern
component that starts with `.` (and `**` never enters them).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

DEFAULT_MAX_ENTRIES = 200_000
STOP_CHECK_EVERY = 256
_ABSENT = (errno.ENOENT, errno.ENOTDIR)


class DiscoveryStopped(Exception):
    """`should_stop` said so: a SIGTERM arrived during the walk."""


@dataclass(slots=True)
class Discovery:
    """The paths found for one glob, and why the list may be incomplete."""

    paths: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # listing failures, each with its reason
    entries: int = 0  # directory entries looked at
    capped: bool = False  # stopped at `max_entries`
    descriptors_exhausted: bool = False  # EMFILE / ENFILE while listing

    @property
    def complete(self) -> bool:
        """Every directory the glob reaches was listed: a followed file not found is gone."""
        return not self.problems and not self.capped


def has_magic(part: str) -> bool:
    return any(c in part for c in "*?[")


def expand(pattern: str, *, max_entries: int = DEFAULT_MAX_ENTRIES,
           should_stop: Callable[[], bool] = lambda: False) -> Discovery:
    """Every existing path `pattern` matches (regular files or not: the caller decides)."""
    walk = _Walk(max_entries, should_stop)
    if not has_magic(pattern):
        try:
            os.lstat(pattern)
            walk.out.paths.append(pattern)
        except OSError as e:
            if e.errno not in _ABSENT:
                walk.fail(pattern, e)
        return walk.out
    head, parts = _split(pattern)
    try:
        walk.out.paths.extend(walk.match(head, parts))
    except _Capped:
        walk.out.capped = True
    return walk.out


class Finder:
    """The configured globs less the `exclude` patterns (fnmatch's rules, on the name and on
    the whole path), walked together; settings may change between walks (SIGHUP)."""

    def __init__(self, globs: tuple[str, ...], exclude: tuple[str, ...], *,
                 max_entries: int = DEFAULT_MAX_ENTRIES,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        self.globs = globs
        self.exclude = exclude
        self.max_entries = max_entries
        self.should_stop = should_stop
        # What the last walk found per glob: how many files each follows, and why it may be
        # incomplete (the daemon reports both; `source` metrics are labelled by the glob).
        self.discoveries: dict[str, Discovery] = {}
        self._exclude_rx: tuple[tuple[str, ...], Callable[[str], object]] | None = None

    def find(self) -> dict[str, str]:
        """Matching paths, each with the configured glob that found it (a bounded label).
        Raises `DiscoveryStopped` when `should_stop` says so mid-walk."""
        out: dict[str, str] = {}
        self.discoveries = {}
        for pattern in self.globs:
            found = expand(pattern, max_entries=self.max_entries, should_stop=self.should_stop)
            self.discoveries[pattern] = found
            excluded = self._excluded()
            for p in sorted(found.paths):
                if excluded(os.path.basename(p)) or excluded(p):
                    continue
                out.setdefault(p, pattern)
        return out

    def incomplete(self) -> set[str]:
        """Globs whose last walk vouches for nothing (a listing failed, or the cap)."""
        return {p for p, d in self.discoveries.items() if not d.complete}

    def _excluded(self) -> Callable[[str], object]:
        """One compiled regex for every exclude pattern (thousands of paths a walk)."""
        if self._exclude_rx is None or self._exclude_rx[0] != self.exclude:
            rx = re.compile("|".join(fnmatch.translate(x) for x in self.exclude) or "(?!)")
            self._exclude_rx = (self.exclude, rx.match)
        return self._exclude_rx[1]


class _Capped(Exception):
    pass


class _Walk:
    def __init__(self, max_entries: int, should_stop: Callable[[], bool]) -> None:
        self.max_entries = max_entries
        self.should_stop = should_stop
        self.out = Discovery()
        self.visited: set[tuple[int, int, int]] = set()  # directories `**` has entered

    def fail(self, path: str, e: OSError) -> None:
        if e.errno in (errno.EMFILE, errno.ENFILE):
            self.out.descriptors_exhausted = True
        self.out.problems.append(f"{path}: {e.strerror or e}")

    def count(self) -> None:
        self.out.entries += 1
        if self.out.entries % STOP_CHECK_EVERY == 0 and self.should_stop():
            raise DiscoveryStopped
        if self.out.entries > self.max_entries:
            raise _Capped

    def entries(self, directory: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(directory or ".") as it:
                out = []
                for entry in it:
                    self.count()
                    out.append(entry)
                return out
        except OSError as e:
            if e.errno not in _ABSENT:
                self.fail(directory or ".", e)
            return []

    def match(self, directory: str, parts: list[str]) -> Iterator[str]:
        part, rest = parts[0], parts[1:]
        if part == "**":
            yield from self._recursive(directory, rest)
            return
        if not has_magic(part):
            path = os.path.join(directory, part)
            if rest:
                yield from self.match(path, rest)
            else:
                try:
                    os.lstat(path)
                    yield path
                except OSError as e:
                    if e.errno not in _ABSENT:
                        self.fail(path, e)
            return
        for entry in sorted(self.entries(directory), key=lambda e: e.name):
            if not _name_matches(entry.name, part):
                continue
            path = os.path.join(directory, entry.name)
            if not rest:
                yield path
            elif _is_dir(entry):
                yield from self.match(path, rest)

    def _recursive(self, directory: str, rest: list[str]) -> Iterator[str]:
        """`**`: `rest` matched in `directory` and in every directory below it, each once."""
        try:
            st = os.stat(directory or ".")
        except OSError as e:
            if e.errno not in _ABSENT:
                self.fail(directory or ".", e)
            return
        key = (st.st_dev, st.st_ino, len(rest))  # per `**` of the pattern
        if key in self.visited:
            return  # a symlink loop, or another path to a directory already walked
        self.visited.add(key)
        if rest:
            yield from self.match(directory, rest)
        for entry in sorted(self.entries(directory), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            path = os.path.join(directory, entry.name)
            if not rest:
                yield path  # a final `**` matches everything below
            if _is_dir(entry):
                yield from self._recursive(path, rest)


def _split(pattern: str) -> tuple[str, list[str]]:
    """The static head of a pattern (no magic in it) and the components after it."""
    parts = pattern.split(os.sep)
    head: list[str] = []
    while parts and not has_magic(parts[0]) and parts[0] != "**" and len(parts) > 1:
        head.append(parts.pop(0))
    base = os.sep.join(head)
    if pattern.startswith(os.sep) and not base:
        base = os.sep
    return base, [p for p in parts if p != ""] or [""]


def _name_matches(name: str, part: str) -> bool:
    if name.startswith(".") and not part.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, part)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows a symlink: /var/log/containers-style trees
    except OSError:
        return False


def why_nothing(pattern: str) -> str:
    """What an operator should check when `pattern` matches no file: the likeliest mistake."""
    if not has_magic(pattern):
        if os.path.isdir(pattern):
            return (f"{pattern} is a directory: give the files in it, e.g. "
                    f"{os.path.join(pattern, '*.log')}")
        if os.path.lexists(pattern) and not os.path.exists(pattern):
            return f"{pattern} is a dangling symlink"
        if os.path.lexists(pattern):
            return f"{pattern} is not a regular file"
    head, _ = _split(pattern)
    probe = head or "."
    while probe and not os.path.isdir(probe):
        parent = os.path.dirname(probe.rstrip(os.sep))
        if parent == probe or not parent:
            break
        probe = parent
    if probe and os.path.isdir(probe) and os.path.normpath(probe) != os.path.normpath(head or "."):
        return (f"{head} does not exist (the nearest existing directory is {probe}); "
                "waiting for files to appear")
    if not os.access(head or ".", os.R_OK | os.X_OK) and os.path.isdir(head or "."):
        return f"{head} is not readable by this user"
    return "no file matches it now; waiting for files to appear (mistyped?)"
