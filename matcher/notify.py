"""systemd's readiness protocol (`sd_notify`), spoken over `$NOTIFY_SOCKET` with the stdlib.

Why not libsystemd: the protocol is one datagram of `KEY=VALUE` lines to a Unix socket, and a
binding would be a compiled dependency for ten lines of code. The socket is a path, or an
abstract-namespace name written `@name` (the leading `@` becomes a NUL byte).

What the daemon says, and when (`deploy/systemd/` runs it as `Type=notify` with `WatchdogSec=`):
- `READY=1` once the catalog is loaded and the first discovery has opened the sources;
- `WATCHDOG=1` from the main loop, at most every half of `$WATCHDOG_USEC`: a loop that hangs
  stops sending, and systemd restarts the service;
- `RELOADING=1` (with `MONOTONIC_USEC`, as `Type=notify-reload` wants) before a SIGHUP reload,
  then `READY=1` after it, whether the new catalog was taken or the old one kept;
- `STOPPING=1` when SIGTERM starts the drain.

Without `$NOTIFY_SOCKET` every call is a no-op. A send that fails (the manager went away, the
socket is full) is dropped: a notification is never worth stopping the daemon for. What can be
lost is therefore only a notification, and for the watchdog that means a restart.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping

__all__ = ["Notifier"]


class Notifier:
    """Sends sd_notify messages to one socket; a no-op when `address` is None."""

    def __init__(self, address: str | None, *, watchdog_usec: int | None = None) -> None:
        self.address = address
        # Ping at half the timeout, as sd_watchdog_enabled(3) recommends.
        self.watchdog_interval: float | None = (
            watchdog_usec / 2e6 if address and watchdog_usec and watchdog_usec > 0 else None)
        self._last_watchdog: float | None = None
        self._sock: socket.socket | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None,
                 *, pid: Callable[[], int] = os.getpid) -> Notifier:
        """`$NOTIFY_SOCKET` and `$WATCHDOG_USEC` (honoured only if `$WATCHDOG_PID` is unset or is
        this process: a child must not keep its parent alive)."""
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET") or None
        usec: int | None = None
        watchdog_pid = env.get("WATCHDOG_PID", "")
        if not watchdog_pid or watchdog_pid == str(pid()):
            try:
                usec = int(env.get("WATCHDOG_USEC", ""))
            except ValueError:
                usec = None
        return cls(address, watchdog_usec=usec)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def max_nap(self, default: float) -> float:
        """How long the main loop may sleep and still ping the watchdog in time."""
        if self.watchdog_interval is None:
            return default
        return min(default, self.watchdog_interval)

    def ready(self, status: str | None = None) -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> bool:
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def watchdog(self, now: float) -> bool:
        """`WATCHDOG=1` if half the watchdog timeout has passed since the last one (`now`:
        monotonic seconds); call it from the loop whose health it vouches for."""
        if self.watchdog_interval is None:
            return False
        if self._last_watchdog is not None and now - self._last_watchdog < self.watchdog_interval:
            return False
        self._last_watchdog = now
        return self.send("WATCHDOG=1")

    def send(self, *lines: str) -> bool:
        """One datagram of `KEY=VALUE` lines; True if it was handed to the socket."""
        if self.address is None:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto("\n".join(lines).encode(), target)
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
