"""The descriptor limit: raise what the process may open, and say how many files it may keep.

Why: systemd starts every service with a soft RLIMIT_NOFILE of 1024 (the hard limit is 524288
since systemd 240); a container runtime often gives the same soft limit. 1024 is for programs
that still use select(2), which cannot watch a descriptor numbered 1024 or above; this daemon
uses poll(2) and selectors (socketserver picks poll), so it may raise its soft limit to the
hard one, which needs no privilege — the path systemd.exec(5) recommends to such programs. The
units in deploy/systemd set LimitNOFILE= besides, so the limit does not depend on this call.

Even a raised limit is finite, and a daemon that follows files must choose which to keep open.
Filebeat's answer is the peer design: `harvester_limit` caps open harvesters and
`close_inactive` closes files that have not changed for a while, reopening them when they grow.
`fd_budget` gives the number such a cap should be: the soft limit less a reserve for the
daemon's own descriptors (stdio, inotify, pipes, journalctl, the webhook, checkpoint writes —
say 64) and the HTTP server's connection cap (`matcher.http.MAX_CONNECTIONS`), so that opening
one more log file can never take the descriptor that accept() or a checkpoint write needs.
"""

from __future__ import annotations

import resource

# Linux will not set a soft limit above fs.nr_open (1,048,576 unless raised), and a hard limit
# of "unlimited" cannot be the soft one: the soft limit is raised at most this far.
CEILING = 1 << 20


def raise_nofile_limit(ceiling: int = CEILING) -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (at most `ceiling`); (old soft, new soft).

    Never fails the start: if the limit cannot be read or set (a seccomp filter that forbids
    setrlimit, an odd platform) it is left as it was and both numbers are the old soft limit
    (-1 if even that is unknown). The hard limit is never touched, and a soft limit already at
    or above the target (or unlimited) is not lowered.
    """
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return -1, -1
    target = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return soft, soft
    return soft, target


def fd_budget(reserve: int) -> int:
    """How many log files the daemon may keep open at once: the soft RLIMIT_NOFILE as it is now
    (call `raise_nofile_limit` first) less `reserve` descriptors kept for everything else.

    0 when the limit does not even cover the reserve: the caller should say so, since following
    a file would then take a descriptor that accept() or a checkpoint write needs. An unlimited
    soft limit counts as `CEILING`; an unreadable one as 1024, the usual default. What a cap on
    open files costs is latency, not lines, provided idle files are closed and reopened when
    they grow (read from where they were left).
    """
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = 1024
    if soft == resource.RLIM_INFINITY or soft > CEILING:
        soft = CEILING
    return max(0, soft - reserve)
