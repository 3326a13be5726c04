"""Python's own modules named by `No module named 'X'`: missing not because a package is not
installed — pip cannot install them — but because of the platform Python runs on, or of how
that Python was built.

- **Unix only** (`POSIX_ONLY`): modules the standard library has on Linux and macOS and not on
  Windows (the library reference marks them "Availability: Unix"). sglang and what it imports
  run on Linux; on Windows the way is WSL2 or a container.
- **Built from a system library** (`BUILT_FROM`): C parts of the standard library that
  CPython's build compiles only when the library's headers are present (`configure` leaves
  them out silently): a Python built by pyenv or from source on a machine without them lacks
  the module until it is rebuilt.

`module 'X' has no attribute 'Y'` for a standard-library module (`sys.stdlib_module_names`) is
not a package at the wrong version either: the functions the library reference marks Linux-
or Unix-only (`LINUX_ONLY`, `UNIX_ONLY`: `os.sched_getaffinity` on macOS, `signal.SIGQUIT` on
Windows) say the platform; any other says the Python's version (an attribute added or removed
by a release: `collections.Mapping` went in 3.10) or a file of that name shadowing the module.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from matcher.catalog.answer import Answer

POSIX_ONLY = frozenset({
    "resource", "fcntl", "termios", "tty", "pty", "pwd", "grp", "posix", "syslog", "crypt",
    "spwd", "nis", "_posixsubprocess", "_posixshmem"})


# "Availability: Linux" in the library reference (not macOS, not Windows).
LINUX_ONLY = frozenset({
    ("os", "sched_getaffinity"), ("os", "sched_setaffinity"), ("os", "sched_getscheduler"),
    ("os", "sched_setscheduler"), ("os", "sched_getparam"), ("os", "sched_setparam"),
    ("os", "memfd_create"), ("os", "pidfd_open"), ("os", "eventfd"), ("os", "splice"),
    ("os", "posix_fadvise"), ("os", "getxattr"), ("os", "setxattr")})
# "Availability: Unix" (not Windows).
UNIX_ONLY = frozenset({
    *(("os", name) for name in (
        "setsid", "fork", "forkpty", "killpg", "getpgid", "setpgid", "getpgrp", "setpgrp",
        "getuid", "geteuid", "getgid", "getegid", "getppid", "nice", "wait3", "wait4", "WNOHANG",
        "sync", "mkfifo", "getloadavg", "sysconf", "uname", "O_NONBLOCK")),
    *(("signal", name) for name in (
        "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGHUP", "SIGCHLD", "SIGPIPE",
        "SIGTSTP", "SIGCONT", "SIGSTOP", "pthread_kill", "pthread_sigmask", "setitimer",
        "alarm", "SIG_BLOCK", "siginterrupt", "sigwait"))})


@dataclass(frozen=True, slots=True)
class Library:
    module: str  # the standard-library module users import (`lzma` for `_lzma`)
    debian: str  # the headers' package: Debian/Ubuntu, RHEL/Fedora, Homebrew
    redhat: str
    brew: str


BUILT_FROM: dict[str, Library] = {
    "_lzma": Library("lzma", "liblzma-dev", "xz-devel", "xz"),
    "_bz2": Library("bz2", "libbz2-dev", "bzip2-devel", "bzip2"),
    "_ctypes": Library("ctypes", "libffi-dev", "libffi-devel", "libffi"),
    "_sqlite3": Library("sqlite3", "libsqlite3-dev", "sqlite-devel", "sqlite"),
    "_ssl": Library("ssl", "libssl-dev", "openssl-devel", "openssl"),
    "_hashlib": Library("hashlib", "libssl-dev", "openssl-devel", "openssl"),
    "_tkinter": Library("tkinter", "tk-dev", "tk-devel", "tcl-tk"),
    "_curses": Library("curses", "libncurses-dev", "ncurses-devel", "ncurses"),
    "readline": Library("readline", "libreadline-dev", "readline-devel", "readline"),
    "_gdbm": Library("dbm.gnu", "libgdbm-dev", "gdbm-devel", "gdbm"),
    "_uuid": Library("uuid", "uuid-dev", "libuuid-devel", "util-linux"),
    "zlib": Library("zlib", "zlib1g-dev", "zlib-devel", "zlib"),
}


def answer(module: str) -> Answer | None:
    """What to do about `No module named '<module>'` when the module is Python's own; None
    for any other module."""
    if module in POSIX_ONLY:
        return _unix_only(module)
    library = BUILT_FROM.get(module)
    return _unbuilt(module, library) if library is not None else None


def attribute_answer(module: str, name: str) -> Answer | None:
    """What to do about `module '<module>' has no attribute '<name>'` when the module is
    Python's own; None for a package's module."""
    if module.split(".", 1)[0] not in sys.stdlib_module_names:
        return None
    what = f"`{module}.{name}`"
    if (module, name) in LINUX_ONLY or (module, name) in UNIX_ONLY:
        where = "Linux" if (module, name) in LINUX_ONLY else "Linux and macOS"
        return Answer(
            f"{what} is part of Python's standard library on {where} only (the library "
            "reference's Availability): this Python runs on another platform, and no package "
            "or Python version adds it there. sglang, and the packages whose frames the "
            "traceback shows, expect Linux.",
            (_ON_LINUX,), (), replaces=True)
    return Answer(
        f"{what} is looked up in Python's own standard library, not in a package: pip cannot "
        "change it. Either this Python's version lacks it — the attribute came with a later "
        "release or was removed by an earlier one than the code was written for "
        "(`collections.Mapping` went in 3.10, `asyncio.timeout` came in 3.11) — or a file or "
        f"folder named `{module.split('.', 1)[0]}` in the working directory or on PYTHONPATH "
        "hides the standard module.",
        (("Run the Python the sglang release requires (0.5.0rc1 and later: 3.10 or newer; "
          "0.5.22 and later: 3.11 or newer) and that the failing package supports: `python -c "
          f"\"import {module}; print(hasattr({module}, '{name}'))\"` prints True in a Python "
          "that has it"),
         (f"`python -c 'import {module}; print({module}.__file__)'` must print a file of the "
          "Python's own library (…/lib/python3.X/…): if it prints one of yours, rename it")),
        (), replaces=True)


_ON_LINUX = ("Run sglang on Linux: on Windows, under WSL2 (with NVIDIA's driver for WSL), on "
             "Windows or macOS in a Linux container or VM (the lmsysorg/sglang image with "
             "`docker run --gpus all …` on a Linux or WSL2 host with an NVIDIA GPU)")


def _unix_only(module: str) -> Answer:
    return Answer(
        f"`{module}` is a module of Python's standard library on Linux and macOS only: Python "
        "on Windows has none, and pip cannot install it (a PyPI package of that name, if any, "
        "is something else). sglang, and the packages whose frames the traceback shows, "
        "expect Linux.",
        (_ON_LINUX,
         f"Do not `pip install {module}`: no package on PyPI provides this module"),
        (), replaces=True)


def _unbuilt(module: str, library: Library) -> Answer:
    return Answer(
        f"`{module}` is the C part of Python's `{library.module}` module, which CPython's build "
        f"compiles only when the headers of its library are present: this Python (often one "
        "built by pyenv or from source) was built without them, and pip cannot add it "
        "afterwards. A package imports it at start-up (torchvision's `datasets/utils.py` "
        "imports `bz2` and `lzma`), so the import of sglang fails.",
        ((f"Install the headers and rebuild this Python: `apt-get install {library.debian}` "
         f"(Debian, Ubuntu), `dnf install {library.redhat}` (RHEL, Fedora) or `brew install "
         f"{library.brew}` (macOS), then `pyenv install --force <version>` (or configure and "
         "make it again) and recreate the virtual environment on it"),
         ("Or use a Python built with it: the distribution's python3, conda's, uv's managed "
         "Pythons (`uv venv -p 3.11`), or the lmsysorg/sglang image"),
         (f"`python -c 'import {library.module}'` must print nothing before sglang is started "
         "again")),
        (), replaces=True)
