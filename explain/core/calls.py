"""The call pool: a chunk's gradient calls run in order, one at a time under the model's lock, or a batch job's
compiled calls ``COMPILED_IN_FLIGHT`` at a time in threads, their results handed back in the order they were made
(the totals add up as one by one: the same numbers)."""

from __future__ import annotations

import collections
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

COMPILED_IN_FLIGHT = 2  # compiled calls run at once, each of 1/2 the rows: 2 cores, 17 rows one by one 1.12 us per
# point and period, 9 rows two at a time 0.89 (one call's loop of small matrix products keeps 2 cores half busy)


class InFlight:
    """Runs a chunk's calls in order, ``width`` at a time, and hands their results back in the order they were
    submitted (the totals add up as one by one: the same numbers). ``width`` 1, or a call ``alone``: at once,
    holding the engine's lock. Else in ``width`` threads, without the lock: compiled calls that passed their check
    (``explain.core.cut.Checked``; each shape traced once under the lock by ``explain.core.xla.Fixed``)."""

    _POOL: "tuple[int, ThreadPoolExecutor] | None" = None  # (the process it was made in, the pool)
    _POOL_LOCK = threading.Lock()

    def __init__(self, width: int, lock):
        self.width, self.lock = max(1, int(width)), lock
        self.pending: collections.deque = collections.deque()

    @classmethod
    def pool(cls):
        with cls._POOL_LOCK:  # shared by every engine; a forked child (its threads not copied) makes its own
            if cls._POOL is None or cls._POOL[0] != os.getpid():
                cls._POOL = (os.getpid(), ThreadPoolExecutor(COMPILED_IN_FLIGHT, thread_name_prefix="explain-calls"))
            return cls._POOL[1]

    def submit(self, call, args: tuple, where, alone: bool = False) -> None:
        if self.width == 1 or alone:
            done = Future()
            with self.lock:
                done.set_result(call(*args))
            self.pending.append((where, done))
        else:
            self.pending.append((where, self.pool().submit(call, *args)))

    def finished(self, everything: bool = False):
        """(where, result) of the oldest calls: all of them, or while ``width`` or more are pending."""
        while self.pending and (everything or len(self.pending) >= self.width):
            where, future = self.pending.popleft()
            yield where, future.result()
