"""The main loop's wake-up survives signals that arrive at any point of its sleep."""

import subprocess
import sys
import textwrap

from tests.watch_harness import REPO

# SIGALRM every millisecond while the loop sleeps in short naps: a handler that takes a lock the
# sleeping code may hold (threading.Event) deadlocks within a few hundred signals.
PROGRAM = textwrap.dedent("""
    import signal, time
    from matcher.daemon import Wakeup
    wakeup = Wakeup()
    handled = 0
    def handler(*_):
        global handled
        handled += 1
        wakeup.set()
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        wakeup.wait(0.0001)
    signal.setitimer(signal.ITIMER_REAL, 0)
    start = time.monotonic()
    wakeup.set()
    wakeup.wait(5)  # a pending wake-up returns at once
    woke = time.monotonic() - start
    start = time.monotonic()
    wakeup.wait(0.2)  # and is consumed: the next wait sleeps
    slept = time.monotonic() - start
    print(handled, woke < 1, slept >= 0.15)
""")


def test_signal_handlers_never_deadlock_the_sleep():
    run = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    handled, woke_at_once, slept = run.stdout.split()
    assert int(handled) > 500  # the signals did arrive while it slept
    assert woke_at_once == "True" and slept == "True"
