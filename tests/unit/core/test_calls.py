"""The call pool (``explain.core.calls.InFlight``): calls run in order and their results come back in the order
they were submitted, one at a time under the lock or ``width`` at a time in threads; a forked child makes its own
pool of threads. (The compiled cut calls that run in it: ``tests/unit/core/test_cut.py``.)"""

from __future__ import annotations

import threading
import time

from explain.core import calls
from explain.core.calls import COMPILED_IN_FLIGHT, InFlight


def test_one_at_a_time_runs_each_call_at_once_under_the_lock():
    lock = threading.RLock()
    pool = InFlight(1, lock)
    held = []

    def call(value):
        held.append(lock._is_owned())
        return value * 2

    for i in range(3):
        pool.submit(call, (i,), where=i)
        assert held[-1]  # ran at once, holding the lock
        assert list(pool.finished()) == [(i, i * 2)]  # width 1: handed back at once
    assert list(pool.finished(everything=True)) == []


def test_calls_in_threads_come_back_in_the_order_they_were_submitted():
    pool = InFlight(COMPILED_IN_FLIGHT, threading.RLock())
    got = []

    def call(i):
        time.sleep(0.02 * (5 - i))  # the first calls finish last
        return i, threading.current_thread().name

    for i in range(5):
        pool.submit(call, (i,), where=i)
        got += list(pool.finished())
    got += list(pool.finished(everything=True))
    assert [where for where, _ in got] == list(range(5))
    assert [result[0] for _, result in got] == list(range(5))
    assert all(result[1].startswith("explain-calls") for _, result in got)


def test_a_call_alone_runs_in_the_calling_thread():
    pool = InFlight(COMPILED_IN_FLIGHT, threading.RLock())
    pool.submit(lambda: threading.current_thread().name, (), where="a", alone=True)
    assert list(pool.finished(everything=True)) == [("a", threading.current_thread().name)]


def test_a_forked_process_makes_its_own_pool_of_call_threads(monkeypatch):
    """The threads of ``InFlight`` are not copied into a forked child: there a pool of the parent's would never
    run a call, so a process other than the pool's makes its own."""
    pool = InFlight.pool()
    assert InFlight.pool() is pool
    monkeypatch.setattr(calls.os, "getpid", lambda: -1)
    child = InFlight.pool()
    assert child is not pool and child.submit(lambda: 3).result(timeout=30) == 3
