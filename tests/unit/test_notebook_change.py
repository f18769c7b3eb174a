"""The notebook's "why did it change?" (issue 40): ``explain(..., baseline="previous")`` and ``explain(...,
earlier=[static, temporal])``, checked against the model's own scores on the earlier inputs built here."""

import keras
import numpy as np
import pytest

from explain import notebook


def _model():
    """A GRU over 8 periods x 2 features beside 2 static features, in the order temporal, static."""
    t_in, s_in = keras.Input((8, 2), name="months"), keras.Input((2,), name="account")
    joined = keras.layers.Concatenate()([keras.layers.GRU(3, seed=1)(t_in), s_in])
    out = keras.layers.Dense(1, activation="sigmoid", kernel_initializer=keras.initializers.GlorotUniform(2))(joined)
    return keras.Model([t_in, s_in], out)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return _model(), rng.normal(size=(6, 2)).astype("float32"), rng.normal(size=(6, 8, 2)).astype("float32")


def test_previous_adds_up_to_the_change_since_last_period(data):
    model, static, temporal = data
    found = notebook.explain(model, [temporal, static], baseline="previous", steps=128)
    then = np.concatenate([temporal[:, :1], temporal[:, :-1]], axis=1)  # built here: shifted, period 0 repeated
    expected = np.asarray(model([then, static]))[:, 0]
    a = found.attribution
    np.testing.assert_allclose(a.baseline_prediction, expected, atol=1e-6)
    np.testing.assert_allclose(a.total(), a.prediction - expected, atol=1e-4)
    np.testing.assert_allclose(a.static, 0.0, atol=1e-12)  # static features did not change


def test_earlier_inputs_explain_static_changes_too(data):
    model, static, temporal = data
    then_static = static.copy()
    then_static[:, 1] += 0.5
    then_temporal = temporal * 0.9
    found = notebook.explain(model, [temporal, static], earlier=[then_temporal, then_static], steps=128)
    a = found.attribution
    expected = np.asarray(model([then_temporal, then_static]))[:, 0]
    np.testing.assert_allclose(a.baseline_prediction, expected, atol=1e-6)
    np.testing.assert_allclose(a.total(), a.prediction - expected, atol=1e-4)
    assert np.all(a.static[:, 0] == 0.0) and np.any(np.abs(a.static[:, 1]) > 1e-4)  # only the changed column
    assert "given as arrays" in repr(found)
