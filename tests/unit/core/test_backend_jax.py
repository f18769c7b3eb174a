"""The JAX backend's own behaviour (explain/core/backend_jax.py). Keras picks its backend when it is
imported, so these run only in a process started with KERAS_BACKEND=jax: test_backends.py starts one.
"""

import keras
import numpy as np
import pytest

import explain
from explain.core import backend_jax, engine, ig
from explain.core.errors import AttributionError
from tests.support.models import F, S, T, data, linear_model, lstm_model, zero_baseline

pytestmark = pytest.mark.skipif(keras.config.backend() != "jax", reason="runs under KERAS_BACKEND=jax only")


def test_buckets_are_powers_of_two():
    assert [backend_jax.bucket(n) for n in (0, 1, 2, 3, 4, 5, 63, 64, 65)] == [1, 1, 2, 4, 4, 8, 64, 64, 128]


def test_padding_rows_never_changes_a_row_and_compiles_once_per_bucket():
    model = lstm_model(seed=4)
    x = data(9, seed=5)
    whole = explain.integrated_gradients(model, x, zero_baseline(), steps=8)
    for n in (1, 3, 5, 9):  # buckets 1, 4, 8, 16 rows: each row as computed with all nine
        part = explain.integrated_gradients(model, {k: v[:n] for k, v in x.items()}, zero_baseline(), steps=8)
        np.testing.assert_allclose(part.static, whole.static[:n], rtol=0, atol=1e-7)
        np.testing.assert_allclose(part.temporal, whole.temporal[:n], rtol=0, atol=1e-7)
    traces = ig.engine_for(model).traces["path"]
    explain.integrated_gradients(model, {k: v[:2] for k, v in x.items()}, zero_baseline(), steps=8)
    explain.integrated_gradients(model, {k: v[:3] for k, v in x.items()}, zero_baseline(), steps=8)  # bucket 4 again
    assert ig.engine_for(model).traces["path"] == traces + 1  # only the 2-row bucket was new


def test_sums_are_float64_and_the_linear_model_is_exact():
    model, ws, wt = linear_model(seed=2)
    x = data(3)
    a = explain.integrated_gradients(model, x, zero_baseline(), steps=1, method="middle")
    assert a.static.dtype == np.float64
    np.testing.assert_allclose(a.static, x["static"] * ws, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(a.temporal, x["temporal"] * wt, rtol=1e-6, atol=1e-7)


def test_new_weights_are_used_without_recompiling():
    model, ws, _ = linear_model(seed=2)
    x = data(2)
    explain.integrated_gradients(model, x, zero_baseline(), steps=2)
    dense = next(layer for layer in model.layers if isinstance(layer, keras.layers.Dense) and layer.use_bias)
    dense.set_weights([2 * ws[:, None], np.array([0.3])])
    a = explain.integrated_gradients(model, x, zero_baseline(), steps=2)
    np.testing.assert_allclose(a.static, 2 * x["static"] * ws, rtol=1e-6, atol=1e-7)


def test_a_cut_gradient_is_found_without_none_gradients():
    s_in, t_in = keras.Input((S,), name="side"), keras.Input((T, F), name="history")
    s = keras.ops.stop_gradient(keras.layers.Dense(1)(s_in))
    model = keras.Model([s_in, t_in], keras.layers.Add()([keras.layers.Dense(1)(keras.layers.LSTM(2)(t_in)), s]))
    with pytest.raises(AttributionError, match="no gradient with respect to its static input 'side'"):
        explain.integrated_gradients(model, data(2), zero_baseline(), steps=4)
    assert ig.model_problems(model) == [engine.DISCONNECTED_INPUT.format(target="column 0", role="static",
                                                                         name="side")]


def test_a_model_without_weights_has_constant_gradients_that_are_not_cut():
    s_in, t_in = keras.Input((S,), name="side"), keras.Input((T, F), name="history")
    out = keras.layers.Add()([keras.ops.sum(s_in, axis=1, keepdims=True),
                              keras.ops.sum(t_in, axis=(1, 2), keepdims=False)[:, None]])
    model = keras.Model([s_in, t_in], out)
    x = data(2)
    a = explain.integrated_gradients(model, x, zero_baseline(), steps=2)
    np.testing.assert_allclose(a.static, x["static"], rtol=1e-6)
    np.testing.assert_allclose(a.temporal, x["temporal"], rtol=1e-6)


def test_a_text_lookup_is_refused_with_what_to_do():
    s_in, plan = keras.Input((S,), name="numbers"), keras.Input((1,), dtype="string", name="plan")
    ids = keras.layers.StringLookup(vocabulary=["a", "b"])(plan)
    t_in = keras.Input((T, F), name="history")
    h = keras.layers.Concatenate()([s_in, keras.layers.Flatten()(keras.layers.Embedding(3, 2)(ids)),
                                    keras.layers.LSTM(2)(t_in)])
    model = keras.Model([s_in, plan, t_in], keras.layers.Dense(1)(h))
    with pytest.raises(AttributionError, match="'plan' goes through a StringLookup layer .* KERAS_BACKEND=tensorflow"):
        ig.engine_for(model)
