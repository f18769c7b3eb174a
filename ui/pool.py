"""One bounded, fair pool in front of the sessions' model computations (issue 42: a team on one server).

Every session of the server runs its script in its own thread; without this, eight visitors switching
customer at once start eight computations that share the model's lock (``explain.core.engine``, taken
per call, in no order) and the two cores: a visitor whose computation is long (a cohort batch, 16
baselines x 256 steps) takes the lock again and again while the others wait behind it.

:data:`POOL` lets ``width`` computations run at once (``EXPLAIN_MODEL_SLOTS``, default 2; another value than
a whole number >= 1 is logged and 2 used) and hands the slots out first come, first served (a ticket queue),
so a session's next request waits behind those already waiting. A waiting request asks
``ui.runtime.should_stop`` between two polls: when its visitor switched again, Streamlit's rerun exception
ends the wait and the stale request leaves the queue without calling the model. A thread that already holds
a slot (a computation inside another) is not queued again.
Results are shared between sessions by ``st.cache_data`` (one process-wide cache whose per-key lock makes
two sessions asking for the same customer at once compute it once): the pool only orders the misses.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from contextlib import contextmanager

from ui import runtime

POLL_S = 0.05  # how often a waiting request looks for its visitor's rerun
SLOTS_ENV = "EXPLAIN_MODEL_SLOTS"
DEFAULT_SLOTS = 2
BAD_SLOTS = ("{env}={value!r} is not a whole number of at least 1 (how many model computations may run at once); "
             "using {default}.")
LOG = logging.getLogger("explain.app")


def slots_from_env() -> int:
    """``EXPLAIN_MODEL_SLOTS``, else :data:`DEFAULT_SLOTS` (the machines this dashboard is measured on have 2 cores)."""
    value = os.environ.get(SLOTS_ENV, str(DEFAULT_SLOTS))
    try:
        width = int(value)
    except ValueError:
        width = 0
    if width < 1:
        LOG.error(BAD_SLOTS.format(env=SLOTS_ENV, value=value, default=DEFAULT_SLOTS))
        return DEFAULT_SLOTS
    return width


class FairPool:
    """``width`` slots handed out in the order they were asked for.

    ``running``: slots held now; ``waiting``: requests in the queue; ``served``/``dropped``: requests that got
    a slot / left the queue without one (their visitor moved on) since creation; ``peak_waiting``: the longest
    queue seen."""

    def __init__(self, width: int):
        self.width = max(1, int(width))
        self._lock = threading.Condition()
        self._queue: deque = deque()
        self._held = threading.local()
        self.running = self.served = self.dropped = self.peak_waiting = 0

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def _first_in_line(self, ticket) -> bool:
        return self._queue[0] is ticket and self.running < self.width

    @contextmanager
    def slot(self, should_stop=runtime.should_stop):
        """Hold a slot for the block; waits in line, calling ``should_stop`` every :data:`POLL_S` (an exception it
        raises, Streamlit's rerun, takes the request out of the line)."""
        if getattr(self._held, "depth", 0):  # nested in this thread's own computation
            self._held.depth += 1
            try:
                yield
            finally:
                self._held.depth -= 1
            return
        ticket = object()
        with self._lock:
            self._queue.append(ticket)
            self.peak_waiting = max(self.peak_waiting, len(self._queue))
        try:
            self._wait(ticket, should_stop)
        except BaseException:
            with self._lock:
                self._queue.remove(ticket)
                self.dropped += 1
                self._lock.notify_all()
            raise
        self._held.depth = 1
        try:
            yield
        finally:
            self._held.depth = 0
            with self._lock:
                self.running -= 1
                self._lock.notify_all()

    def _wait(self, ticket, should_stop) -> None:
        while True:
            with self._lock:
                if self._first_in_line(ticket) or self._lock.wait_for(lambda: self._first_in_line(ticket), POLL_S):
                    self._queue.popleft()
                    self.running += 1
                    self.served += 1
                    self._lock.notify_all()  # the next in line may fit too
                    return
            if should_stop is not None:
                should_stop()

    def reset_counts(self) -> None:
        with self._lock:
            self.served = self.dropped = 0
            self.peak_waiting = len(self._queue)


POOL = FairPool(slots_from_env())
