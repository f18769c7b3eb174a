"""should_stop: asked before every model call, stops between two chunks, holds nothing afterwards."""

from __future__ import annotations

import threading

import keras
import numpy as np
import pytest

from explain.bundle.load import Bundle
from explain.core import engine as engine_module
from explain.core import ig
from explain.core.errors import ExplainError, Stopped

S, T, F = 3, 4, 2


@pytest.fixture(scope="module")
def model():
    # temporal input first, dict inputs: unlike the demo
    t_in, s_in = keras.Input((T, F), name="history"), keras.Input((S,), name="row")
    h = keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dense(4, activation="tanh")(h))
    return keras.Model({"history": t_in, "row": s_in}, out)


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    return {"static": rng.normal(size=(n, S)).astype("float32"),
            "temporal": rng.normal(size=(n, T, F)).astype("float32")}


def _counter(stop_after=None):
    calls = []

    def should_stop():
        calls.append(1)
        return stop_after is not None and len(calls) > stop_after

    return should_stop, calls


def test_asked_once_per_gradient_call_and_no_result_change(model):
    x, b = _data(10), {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}
    plain = ig.integrated_gradients(model, x, b, steps=8)
    should_stop, calls = _counter()
    # 16 points per call at 8 steps: 2 customers per call, 5 gradient calls; and before each of the two forward
    # calls that give f(x) and f(b) (10 customers: one call each)
    watched = ig.integrated_gradients(model, x, b, steps=8, batch_size=16, should_stop=should_stop)
    assert len(calls) == 5 + 2
    np.testing.assert_allclose(watched.static, plain.static, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(watched.temporal, plain.temporal, rtol=1e-6, atol=1e-9)


def test_stops_between_chunks_and_releases_the_lock(model):
    x, b = _data(10), {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}
    should_stop, calls = _counter(stop_after=2)
    with pytest.raises(Stopped):
        ig.integrated_gradients(model, x, b, steps=8, batch_size=16, should_stop=should_stop)
    assert len(calls) == 3  # two chunks ran, the third was not started
    assert not issubclass(Stopped, ExplainError)  # not the user's fault: the CLI does not report it as bad input
    lock = engine_module.engine_for(model).lock
    grabbed = []
    thread = threading.Thread(target=lambda: grabbed.append(lock.acquire(timeout=5)) or lock.release())
    thread.start()
    thread.join()
    assert grabbed == [True]  # another thread can use the model right away


def test_an_exception_of_its_own_propagates(model):
    class Rerun(Exception):
        pass

    def should_stop():
        raise Rerun()

    with pytest.raises(Rerun):
        ig.path_profile(model, _data(1), _data(1, seed=1), should_stop=should_stop)


def test_predict_is_asked_per_batch(model):
    data = _data(7)
    bundle = Bundle.from_arrays(model, data["static"], data["temporal"])
    should_stop, calls = _counter()
    out = bundle.predict(batch_size=3, should_stop=should_stop)
    assert len(calls) == 3 and out.shape == (7, 1)
    expected = model.predict({"row": data["static"], "history": data["temporal"]}, verbose=0)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    with pytest.raises(Stopped):
        bundle.predict(batch_size=3, should_stop=_counter(stop_after=1)[0])
