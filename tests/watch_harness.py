"""A real daemon process and a real writer process, for the watch tests.

The daemon runs as `python -m matcher watch` with a small poll interval and the writer's catalog
record; its stdout (JSON events) goes to a file that `events()` reads back. Nothing here sleeps a
fixed time to decide an outcome: waits poll for a condition with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from debian import require_tool

from matcher.testing import SEQ_RECORD

REPO = Path(__file__).resolve().parents[1]


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


class DaemonProcess:
    def __init__(self, tmp: Path, globs: list[str], *extra: str, name: str = "d",
                 honour_file_modes: bool = False, env: dict[str, str] | None = None,
                 builtin: bool = False, writer_record: bool | None = None) -> None:
        self.tmp = tmp
        self.state = tmp / "state"
        self.catalog = tmp / "writer-catalog.json"
        self.catalog.write_text(json.dumps(SEQ_RECORD))
        self.out = tmp / f"{name}.events.jsonl"
        self.err = tmp / f"{name}.stderr.log"
        self.globs = globs
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.env = env or {}
        self.builtin = builtin  # also load the built-in sglang catalog
        # The writer's record as a user catalog (`--catalog`; default: only without the built-in
        # catalog, since no test on the built-in catalog uses it). A daemon on the built-in
        # catalog takes it from the cache the session compiled
        # (`conftest._full_catalog_compiled_once`), and a user record on top compiles alone.
        self.writer_record = not builtin if writer_record is None else writer_record
        # Root reads any file; without CAP_DAC_OVERRIDE it is refused like any user.
        self.prefix = [require_tool("setpriv", "util-linux"),
                       "--bounding-set=-dac_override,-dac_read_search",
                       "--inh-caps=-dac_override,-dac_read_search"] \
            if honour_file_modes and os.geteuid() == 0 else []

    def start(self) -> DaemonProcess:
        self.runs += 1
        with open(self.out, "ab") as out, open(self.err, "ab") as err:
            self.proc = subprocess.Popen(
                [*self.prefix, sys.executable, "-m", "matcher", "watch", "--state-dir", str(self.state),
                 *(["--catalog", str(self.catalog)] if self.writer_record else []),
                 *([] if self.builtin else ["--no-builtin"]),
                 "--poll-interval", "0.05",
                 *self.extra, *self.globs],
                stdout=out, stderr=err, cwd=REPO,
                # Every writer line is its own failure: nothing to collapse (a short window) and no
                # repeat to rate-limit (each must print, to be counted by the tests).
                env={**os.environ, "PYTHONUNBUFFERED": "1", "SGLANG_MATCHER_AGGREGATE_WINDOW": "0.5",
                     "SGLANG_MATCHER_REPEAT_INTERVAL": "0", **self.env},
            )
        if not wait_for(lambda: self.err.read_bytes().count(b'"event": "started"') >= self.runs,
                        60):
            self.proc.kill()  # never leave a daemon behind a failed start
            self.proc.wait()
            self.proc = None
            raise AssertionError(f"daemon did not start:\n{self.err.read_text()[-3000:]}")
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 45.0) -> int:
        """SIGTERM and wait. A daemon stopped while the full catalog still compiles (a fresh
        cache, no precompiled catalog: the first daemon of a CI run) waits up to 25 s for it."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self.proc = None
        return rc

    def kill(self) -> None:
        """SIGKILL. An event half-written at the kill was never delivered (its line is not
        checkpointed and comes again): drop it, or the next run would append to a torn line."""
        self.stop(signal.SIGKILL)
        if self.out.exists():
            text = self.out.read_bytes()
            self.out.write_bytes(text[: text.rfind(b"\n") + 1])

    def events(self) -> list[dict]:
        text = self.out.read_text()
        complete = text[: text.rfind("\n") + 1]  # the daemon may be mid-write
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def seqs(self) -> Counter[int]:
        return Counter(int(e["captures"]["seq"]) for e in self.events()
                       if e.get("pattern_id") == SEQ_RECORD["id"])

    def wait_seqs(self, expected: set[int], timeout: float = 30.0) -> Counter[int]:
        wait_for(lambda: set(self.seqs()) >= expected, timeout)
        return self.seqs()

    def __enter__(self) -> DaemonProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def writer(path: Path, lines: int, *, start: int = 0, rotate_every: int = 0,
           rotate: str = "none", interval: float = 0.0, partial_every: int = 0,
           wait: bool = True) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "matcher.testing", "write", "--path", str(path),
         "--lines", str(lines), "--start", str(start), "--rotate-every", str(rotate_every),
         "--rotate", rotate, "--interval", str(interval), "--partial-every", str(partial_every)],
        cwd=REPO,
    )
    if wait:
        assert proc.wait(120) == 0
    return proc
