"""The worker processes of `scan -j N`, from the parent's side: results taken in order, with a
window of tasks handed out ahead, and events made into dicts in batches queued behind them.

What a worker runs is `matcher.parallel`'s; this module only hands it out and takes it back,
and survives a worker that dies (`Workers`): from then on the parent does the rest itself.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from matcher.types import Event

# Events per batch made into dicts by a worker (the last ones: a batch per worker).
DICT_BATCH = 256


class Workers:
    """The worker processes, and whether they are still there. One that ends abruptly — the
    kernel's OOM killer, a `kill -9`, a crash in C — breaks the executor: every task handed
    out and not done fails at once (`BrokenProcessPool`; a `multiprocessing.Pool` waits for
    its result forever, and `scan` hung without a word). From then on `submit` and `result`
    give None, the parent does the rest itself, and `lost` is told why, once."""

    def __init__(self, executor: ProcessPoolExecutor, lost: Callable[[str], None]) -> None:
        self._executor = executor
        self._lost = lost
        self.gone = False

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Future[Any] | None:
        if self.gone:
            return None
        try:
            return self._executor.submit(fn, arg)
        except BrokenProcessPool:
            self._lose()
            return None

    def result(self, future: Future[Any] | None) -> Any:
        """The future's result; None when the workers are gone. A worker's exception (a bug)
        is raised here, with the worker's traceback as its cause."""
        if future is None:
            return None
        try:
            return future.result()
        except BrokenProcessPool:
            self._lose()
            return None

    def _lose(self) -> None:
        if not self.gone:
            self.gone = True
            self._lost("a worker process ended abruptly (killed — the kernel's OOM killer says "
                       "so in `dmesg` — or crashed); this process read the rest itself: the "
                       "output is whole")

    def stop(self) -> None:
        """The workers ended now, whatever they are doing (an interrupted scan does not wait
        for their tasks): Python 3.14's `terminate_workers`, before it what it does."""
        terminate = getattr(self._executor, "terminate_workers", None)
        if terminate is not None:
            terminate()
        else:
            processes = getattr(self._executor, "_processes", None) or {}
            for process in list(processes.values()):
                if process.is_alive():
                    process.terminate()
        self._executor.shutdown(wait=True, cancel_futures=True)


class Window:
    """The tasks' results in order, with `ahead` batches of them (`batches`) handed to the
    workers at a time: the event batches `DictBatches` hands on queue between tasks, not behind all
    of them, so that the last events are all that is left to make into dicts when the last
    task is read."""

    def __init__(self, workers: Workers, batches: Sequence[list[Any]], *, ahead: int,
                 run: Callable[[Any], Any], run_batch: Callable[[list[Any]], list[Any]]) -> None:
        """`run(task)` and `run_batch(tasks)`: what a worker calls (by name) for a batch of one
        task and of several."""
        self._workers = workers
        self._run = run
        self._run_batch = run_batch
        self._batches = iter(batches)
        self._sent: collections.deque[tuple[int, Future[Any] | None]] = collections.deque()
        self._ready: collections.deque[Any] = collections.deque()
        for _ in range(ahead):
            self._send()

    def _send(self) -> None:
        batch = next(self._batches, None)
        if batch is None:
            return
        if len(batch) == 1:
            self._sent.append((1, self._workers.submit(self._run, batch[0])))
        else:
            self._sent.append((len(batch), self._workers.submit(self._run_batch, batch)))

    def next(self) -> Any:
        """The next task's result; None when the workers are gone (the parent reads it)."""
        if not self._ready:
            n, future = self._sent.popleft()
            result = self._workers.result(future)
            if n == 1:
                self._ready.append(result)
            else:
                self._ready.extend(result if result is not None else [None] * n)
            self._send()
        return self._ready.popleft()


class DictBatches:
    """Events made into dicts by the workers as the parent hands them on, in batches queued
    behind the reading tasks: a worker done with its last task turns to them while the others
    still read, instead of all of them waiting for the last event. `ordered` gives the dicts
    in the order a stable sort of the events by `order` gives, as one process emits them."""

    def __init__(self, workers: Workers, jobs: int, *,
                 in_worker: Callable[[list[Event]], list[Any]],
                 make: Callable[[list[Event]], list[Any]]) -> None:
        """`in_worker(events)`: what a worker calls (by name) to make a batch's dicts; `make`:
        the parent's own way, when the workers are gone."""
        self._workers = workers
        self._in_worker = in_worker
        self._jobs = jobs
        self._make = make
        self._events: list[Event] = []
        self._waiting: list[Event] = []
        # Each batch in `_events` order, with the future of its dicts (None: no workers left).
        self._parts: list[tuple[list[Event], Future[Any] | None]] = []

    def add(self, events: list[Event]) -> None:
        self._waiting += events
        while len(self._waiting) >= DICT_BATCH:
            self._send(DICT_BATCH)

    def _send(self, size: int) -> None:
        batch, self._waiting = self._waiting[:size], self._waiting[size:]
        self._events += batch
        self._parts.append((batch, self._workers.submit(self._in_worker, batch)))

    def ordered(self, order: Callable[[Event], Any]) -> list[Any]:
        if self._waiting:  # the last: a batch per worker, so that they end together
            size = -(-len(self._waiting) // self._jobs)
            while self._waiting:
                self._send(size)
        made: list[Any] = []
        for batch, future in self._parts:
            done = self._workers.result(future)
            made += self._make(batch) if done is None else done
        at = sorted(range(len(self._events)), key=lambda i: order(self._events[i]))
        return [made[i] for i in at]
