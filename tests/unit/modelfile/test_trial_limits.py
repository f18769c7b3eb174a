"""The trial load is throttled (issue 25): at most TRIAL_SLOTS children at once per server, a visitor who
finds them busy waits at most ``timeout_s`` and is then told to come back, and each child has a CPU-time
limit (RLIMIT_CPU) besides its memory cap and its wall-clock timeout."""

from __future__ import annotations

import threading
import time

import pytest

from explain.core.errors import UnsafeModelError
from explain.modelfile import safe_load as sl
from explain.modelfile import trial
from explain.modelfile.limits import DEFAULT_LIMITS
from tests.support.hostile import tiny_model_file


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_file(tmp_path_factory.mktemp("trial") / "tiny.keras")


def test_at_most_two_trial_children_run_at_once(monkeypatch, tmp_path):
    running, peak, lock = [0], [0], threading.Lock()

    def child(path, shown, limits, suffix):  # stands in for the process: counts how many run together
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return b"\n" + trial.TRIAL_MARK.encode() + b'{"status": "ok", "detail": ""}\n', b"", 0

    monkeypatch.setattr(trial, "_child", child)
    outcomes = []

    def one():
        try:
            trial.run_trial(tmp_path / "m.keras", "m.keras", DEFAULT_LIMITS.but(timeout_s=30))
            outcomes.append("ok")
        except UnsafeModelError as error:
            outcomes.append(str(error))

    threads = [threading.Thread(target=one) for _ in range(6)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == ["ok"] * 6
    assert peak[0] == trial.TRIAL_SLOTS == 2
    assert time.perf_counter() - start >= 3 * 0.3 * 0.9  # six children, two at a time


def test_a_visitor_who_finds_every_slot_busy_is_told_to_come_back(monkeypatch, tmp_path):
    release = threading.Event()

    def child(path, shown, limits, suffix):
        release.wait(10)
        return b"\n" + trial.TRIAL_MARK.encode() + b'{"status": "ok", "detail": ""}\n', b"", 0

    monkeypatch.setattr(trial, "_child", child)
    busy = [threading.Thread(target=trial.run_trial, args=(tmp_path / "m.keras", "m.keras", DEFAULT_LIMITS))
            for _ in range(trial.TRIAL_SLOTS)]
    for t in busy:
        t.start()
    time.sleep(0.2)
    start = time.perf_counter()
    with pytest.raises(UnsafeModelError) as info:
        trial.run_trial(tmp_path / "m.keras", "m.keras", DEFAULT_LIMITS.but(timeout_s=0.5))
    assert 0.4 <= time.perf_counter() - start < 5
    assert str(info.value) == trial.TRIALS_BUSY.format(path="m.keras", slots=2, wait=0.5)
    release.set()
    for t in busy:
        t.join()


def test_the_child_has_a_cpu_time_limit(tiny):
    """One CPU second: importing TensorFlow alone takes several, so the child is stopped by RLIMIT_CPU."""
    start = time.perf_counter()
    with pytest.raises(UnsafeModelError) as info:
        sl.load_model_isolated(tiny, limits=DEFAULT_LIMITS.but(cpu_limit_s=1))
    assert str(info.value) == trial.ISOLATED_CPU.format(path=str(tiny), cpu=1.0)
    assert "--limit cpu_limit_s=N" in str(info.value)
    assert time.perf_counter() - start < 30


def test_a_model_within_the_limits_loads(tiny):
    model = sl.load_model_isolated(tiny, limits=DEFAULT_LIMITS.but(cpu_limit_s=60))
    assert model.name == "tiny"
