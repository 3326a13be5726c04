"""`sglang-matcher watch`: the daemon. Its flags are the settings that declare one
(`matcher.config.Config`), plus `--config` and `--check`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from matcher.commands.parser import EXIT_OK, EXIT_USAGE, Subcommands, exit_codes
from matcher.config import CHECK_FLAG, CONFIG_FILE_FLAG, SETTINGS, Config

if TYPE_CHECKING:
    from matcher.daemon import Daemon
    from matcher.topology import Topology


def register(sub: Subcommands) -> None:
    watch = sub.add_parser(
        "watch", help="the daemon: tail logs, emit events as they happen",
        description="The daemon: follow sglang's log files (globs, rotations included), stdin "
                    "or a systemd unit's journal, and write one event per known failure on "
                    "stdout as it is written, with its remediation (JSON, or for a person on a "
                    "terminal: --format). Read positions are kept "
                    "in the state directory, so a restart goes on where it stopped. Settings "
                    "come from flags, SGLANG_MATCHER_* variables and --config "
                    "(docs/configuration.md); SIGHUP reloads config and catalog.",
        epilog=exit_codes(
            "0 after SIGTERM or SIGINT",
            "1 when the reader of its events went away (stdout a broken pipe: restart it, it "
            "goes on from its last checkpoint)",
            "3 when an output stayed blocked past stop_timeout after the signal (the last "
            "checkpoint kept)",
            "2 on a bad config or catalog. With --check: 0 valid, 2 problems"))
    for spec in SETTINGS:
        if spec.flag is not None and not spec.flag.options:
            spec.flag.add_to(watch, spec.name)  # the positional PATHs
    CONFIG_FILE_FLAG.add_to(watch, "config")
    for spec in SETTINGS:
        if spec.flag is not None and spec.flag.options:
            spec.flag.add_to(watch, spec.name, spec.choices)
    CHECK_FLAG.add_to(watch, "check")
    watch.set_defaults(func=cmd_watch)


def watch_flags(args: argparse.Namespace) -> dict[str, Any]:
    """`watch`'s flags as `Config` settings (None: not given, the environment or the file
    decides)."""
    return {spec.name: spec.flag.value(getattr(args, spec.name))
            for spec in SETTINGS if spec.flag is not None}


def cmd_watch(args: argparse.Namespace) -> int:
    """Build the topology the config describes (`--check`: and stop there), then run it.

    A bad setting, flag or environment value, a port that cannot be bound, an events file that
    cannot be opened: one line naming it and what to do, exit 2, before anything is read."""
    closed = _closed_std_streams()  # first: before anything opens a descriptor
    from matcher.config import ConfigError, load_config
    from matcher.daemon import Daemon, Wakeup, stderr_logger
    from matcher.source.checkpoint import StateDirError
    from matcher.topology import Hooks, build

    read_stdin = "-" in args.paths
    flags = watch_flags(args)
    log = stderr_logger(sys.stderr)
    if "stdout" in closed and not args.check:
        log.warning("stdout_closed", detail="started with stdout closed: events are not "
                    "printed, only sent to the other outputs (events_file, /events, the "
                    "webhook, OTLP) and counted")
    wakeup = Wakeup()
    daemon: Daemon | None = None
    hooks = Hooks(wake=wakeup.set, should_stop=lambda: daemon is not None and daemon.stopping,
                  compile_later=not args.check)
    try:
        config = load_config(file=args.config, flags=flags)
        topology = build(config, log=log, hooks=hooks,
                         stdin=sys.stdin.buffer if read_stdin else None)
        # After the build (a bad setting is said first, and makes no state dir), before
        # anything is read.
        try:
            state_lock = _claim_state(config, check=args.check)
        except BaseException:
            topology.close()
            raise
    except StateDirError as e:  # in use, or not writable: one line, exit 2
        print(f"sglang-matcher: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as e:
        from matcher.redact import Redactor  # a value echoed back may be a credential
        print(f"sglang-matcher: invalid configuration: {Redactor().text(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        return _report_check(topology, config)
    daemon = Daemon(topology, log=log, wakeup=wakeup, config_file=args.config, flags=flags)
    return _run(daemon, state_lock)


def _report_check(topology: Topology, config: Config) -> int:
    """`--check`: the topology was built (port bound, files opened) and is released with
    nothing read; a path following nothing yet is warned of, and the config said ok."""
    topology.close()
    _warn_unmatched(config.paths, config.exclude)
    catalog = topology.catalog
    print(f"configuration ok: {len(config.paths)} path patterns, state in {config.state_dir}, "
          f"catalog {catalog.version} with {len(catalog.records)} records")
    return EXIT_OK


def _run(daemon: Daemon, state_lock: Any) -> int:
    """Run the daemon until it stops, then release the state dir; its exit code."""
    from matcher.daemon import EXIT_STOP_DEADLINE

    daemon.install_signal_handlers()
    try:
        code = daemon.run()
    finally:
        if state_lock is not None:
            state_lock.close()
    if code == EXIT_STOP_DEADLINE:
        # An output is blocked: the interpreter's exit would flush stdout and stderr and wait
        # on them again. Nothing is left to save (`Daemon._stopped_at_deadline`).
        os._exit(code)
    return code


def _closed_std_streams() -> list[str]:
    """`watch` started with stdout or stderr closed (`>&-`, a supervisor that gives none):
    each is pointed at /dev/null, so that no file the daemon opens takes descriptor 1 or 2
    (a log opened as descriptor 1 would be taken for its own stdout), and the daemon runs
    without it. The names of those closed."""
    closed = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            if getattr(sys, name) is not None:
                continue
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))  # noqa: SIM115
        closed.append(name)
    return closed


def _claim_state(config: Config, *, check: bool) -> Any:
    """The state dir's lock (None with `--check`, which only sees that it is writable, or
    without checkpoints); `StateDirError` when another daemon holds it or it is not writable:
    a daemon that cannot keep its positions loses the lines written while it is stopped."""
    from matcher.source.checkpoint import StateLock, probe_writable

    if not config.checkpoints:
        return None
    lock = None if check else StateLock(config.state_dir)
    try:
        probe_writable(config.state_dir, keep=not check)
    except BaseException:
        if lock is not None:
            lock.close()
        raise
    return lock


def _warn_unmatched(paths: Sequence[str], exclude: Sequence[str]) -> None:
    """`--check`: a path that follows nothing now is a warning, not an error (the log may not
    exist before sglang starts), said with the likeliest reason."""
    from matcher.source.checkpoint import CheckpointState
    from matcher.source.discovery import why_nothing
    from matcher.source.files import FileSet

    files = FileSet(tuple(paths), tuple(exclude), CheckpointState(), from_beginning=False,
                    fingerprint_bytes=1, rotate_wait=0, clock=lambda: 0.0)
    found = files.paths()
    for pattern, walk in files.discoveries.items():
        if not any(p_ == pattern and os.path.isfile(path) for path, p_ in found.items()):
            print(f"sglang-matcher: warning: {pattern} matches no file now: "
                  f"{why_nothing(pattern)}", file=sys.stderr)
        for problem in walk.problems[:5]:
            print(f"sglang-matcher: warning: {pattern}: cannot list {problem}", file=sys.stderr)
