"""Points per call chosen by measurement (explain/core/chunks.py), with a fake clock."""

import numpy as np
import pytest

from explain.core import chunks


def test_pick_takes_the_smallest_size_within_the_slack_of_the_best():
    curve = {1024: 50.0, 2048: 90.0, 4096: 97.0, 8192: 100.0, 16384: 60.0}
    assert chunks.pick(curve) == 4096  # 97 >= 0.95 * 100
    assert chunks.pick(curve, slack=0.0) == 8192
    assert chunks.pick(curve, slack=0.4) == 2048  # 16384 (60) qualifies too, but is larger
    assert chunks.pick(curve, slack=0.5) == 1024
    with pytest.raises(ValueError, match="curve is empty"):
        chunks.pick({})


class FakeEngine:
    """path_sums takes fake seconds from a cost model; the clock reads them."""

    keys, categorical, backend = ("static", "temporal"), (), "jax"
    point_shapes = {"static": (3,), "temporal": (4, 2)}
    shapes = point_shapes
    point_dtypes = {"static": np.dtype("float32"), "temporal": np.dtype("float32")}  # .as_numpy_dtype below
    raw_dtypes = {}

    def __init__(self, seconds, out_of_memory_at=None):
        self.seconds, self.out_of_memory_at, self.now, self.calls = seconds, out_of_memory_at, 0.0, []

    def clock(self):
        return self.now

    def path_sums(self, ends, alphas, weights, target, space, batch_size):
        points = len(ends.x["static"]) * len(alphas)
        assert batch_size == points and np.isclose(weights.sum(), 1.0)
        if self.out_of_memory_at is not None and points >= self.out_of_memory_at:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 123 bytes")
        self.calls.append(points)
        self.now += self.seconds(points)


FakeEngine.point_dtypes = {k: type("Dtype", (), {"as_numpy_dtype": np.float32})() for k in FakeEngine.point_dtypes}


def test_calibrate_measures_each_size_and_is_deterministic_given_the_times():
    # fixed cost 10 ms per call plus 1 us per point, and beyond 8,192 points 4 us per point
    def seconds(points):
        return 0.010 + points * (1e-6 if points <= 8192 else 4e-6)

    engine = FakeEngine(seconds)
    result = chunks.calibrate(engine, candidates=(1024, 4096, 8192, 16384), repeats=2, clock=engine.clock)
    expected = {p: p / seconds(p) for p in (1024, 4096, 8192, 16384)}
    assert result.curve == pytest.approx(expected)
    assert result.points == chunks.pick(expected) == 8192
    assert engine.calls == [p for p in (1024, 4096, 8192, 16384) for _ in range(3)]  # a compile call + 2 timed
    again = FakeEngine(seconds)
    assert chunks.calibrate(again, candidates=(1024, 4096, 8192, 16384), clock=again.clock) == result


def test_running_out_of_memory_ends_the_curve():
    engine = FakeEngine(lambda points: 0.001 + points * 1e-6, out_of_memory_at=8192)
    result = chunks.calibrate(engine, candidates=(1024, 2048, 4096, 8192, 16384), clock=engine.clock)
    assert sorted(result.curve) == [1024, 2048, 4096] and result.stopped_by_memory == 8192
    assert 16384 not in engine.calls and result.points == chunks.pick(result.curve)


def test_other_errors_are_not_taken_for_memory():
    def seconds(points):
        raise ValueError("a real bug")

    engine = FakeEngine(seconds)
    with pytest.raises(ValueError, match="a real bug"):
        chunks.calibrate(engine, candidates=(1024,), clock=engine.clock)


def test_on_a_cpu_the_table_answers():
    engine = FakeEngine(lambda p: 1.0)
    engine.backend = "tensorflow"
    assert chunks.points_per_call(engine) == chunks.CPU_TABLE["tensorflow"] == 4096
