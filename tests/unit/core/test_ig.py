"""Properties of the engine that would catch a wrong answer, not shapes."""

import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

import explain
from explain.core import engine, ig
from explain.core.errors import AttributionError
from explain.core.quadrature import METHODS, alphas_and_weights
from tests.support.models import F, S, T, data, linear_model, lstm_model, zero_baseline


@pytest.fixture(scope="module")
def linear():
    return linear_model()


@pytest.fixture(scope="module")
def lstm():
    return lstm_model()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("batch_size", [1, 7, None])
def test_exact_on_linear_model(linear, method, batch_size):
    model, ws, wt = linear
    x = data(4)
    b = {"static": np.full((1, S), 0.5), "temporal": np.full((1, T, F), -0.25)}
    a = explain.integrated_gradients(model, x, b, steps=5, method=method, batch_size=batch_size)
    np.testing.assert_allclose(a.static, (x["static"] - 0.5) * ws, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.temporal, (x["temporal"] + 0.25) * wt, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.delta, 0.0, atol=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_completeness_shrinks_with_steps(lstm, method):
    x = data(6)
    deltas = [np.abs(explain.integrated_gradients(lstm, x, zero_baseline(), steps=s, method=method).delta).max()
              for s in (4, 256)]
    assert deltas[1] < 2e-3
    assert deltas[1] < deltas[0] or deltas[0] < 1e-4
    a = explain.integrated_gradients(lstm, x, zero_baseline(), steps=256, method=method)
    np.testing.assert_allclose(a.total(), a.prediction - a.baseline_prediction, atol=2e-3)


def test_delta_is_reported_exactly(lstm):
    a = explain.integrated_gradients(lstm, data(3), zero_baseline(), steps=8)
    np.testing.assert_allclose(a.delta, a.prediction - a.baseline_prediction - a.total(), atol=1e-12)
    np.testing.assert_allclose(a.prediction, lstm.predict([data(3)["static"], data(3)["temporal"]], verbose=0)[:, 0],
                               rtol=1e-5)


@pytest.mark.parametrize("role, j", [("static", 2), ("temporal", 1)])
def test_ignored_feature_gets_exactly_zero(role, j):
    model = lstm_model(ignore=(role, j))
    a = explain.integrated_gradients(model, data(4), zero_baseline(), steps=16)
    values = a.static[:, j] if role == "static" else a.temporal[:, :, j]
    assert np.all(values == 0.0)
    assert np.abs(a.static).sum() > 0 and np.abs(a.temporal).sum() > 0


@pytest.mark.parametrize("temporal_first", [False, True])
def test_input_the_model_does_not_use_gets_exact_zeros_and_a_note(temporal_first):
    # The static input is an input of the model, connected to nothing: IG's dummy axiom says its
    # attributions are exactly 0; the history's alone add up to f(x) - f(b).
    keras.utils.set_random_seed(3)
    s_in, t_in = keras.Input((S,), name="side"), keras.Input((T, F), name="history")
    lstm, head = keras.layers.LSTM(4), keras.layers.Dense(1, activation="sigmoid")
    out = head(lstm(t_in))
    model = keras.Model([t_in, s_in] if temporal_first else [s_in, t_in], out)
    x = data(4)
    b = {"static": np.full((1, S), 0.7), "temporal": np.full((1, T, F), -0.3)}
    a = explain.integrated_gradients(model, x, b, steps=64)
    assert a.ignored_inputs == ("static",)
    assert np.all(a.static == 0.0) and not np.signbit(a.static).any()  # exact zeros, not -0.0
    assert a.notes == (engine.IGNORED_INPUT.format(role="static", name="side"),)
    assert "does not use its static input 'side'" in a.notes[0]
    np.testing.assert_allclose(a.temporal.sum(axis=(1, 2)), a.prediction - a.baseline_prediction, atol=1e-4)
    # the history's attributions against a hand-written IG of the history-only model
    alphas, weights = alphas_and_weights("gausslegendre", 64)
    xt = tf.constant(x["temporal"])
    bt = tf.constant(np.broadcast_to(b["temporal"], xt.shape), tf.float32)
    # every (node, customer) point as a row of one tape: no row sees another, so each row's gradient is its own
    points = tf.reshape(bt[None] + tf.constant(alphas, tf.float32)[:, None, None, None] * (xt - bt)[None], (-1, T, F))
    with tf.GradientTape() as tape:
        tape.watch(points)
        total = tf.reduce_sum(head(lstm(points)))
    per_node = tape.gradient(total, points).numpy().astype(np.float64).reshape(len(alphas), *xt.shape)
    grads = np.einsum("k,k...->...", weights, per_node)
    np.testing.assert_allclose(a.temporal, (xt.numpy() - bt.numpy()) * grads, rtol=1e-4, atol=1e-7)
    assert ig.model_notes(model) == list(a.notes) and ig.model_problems(model) == []


def test_batch_size_does_not_change_results(lstm):
    x = data(5)
    results = [explain.integrated_gradients(lstm, x, zero_baseline(), steps=16, batch_size=bs)
               for bs in (1, 7, 64, None)]
    for other in results[1:]:
        np.testing.assert_allclose(other.static, results[0].static, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(other.temporal, results[0].temporal, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(other.delta, results[0].delta, atol=1e-6)


def test_auto_meets_tolerance_for_every_customer(lstm):
    x = data(8)
    b = {"static": np.full((1, S), 2.0), "temporal": np.full((1, T, F), -2.0)}
    for method in ("gausslegendre", "left"):
        a = explain.integrated_gradients(lstm, x, b, steps="auto", method=method, tolerance=0.002)
        limit = np.maximum(0.002 * np.abs(a.prediction - a.baseline_prediction), ig.ABSOLUTE_TOLERANCE)
        assert np.all(np.abs(a.delta) <= limit), (method, a.delta, a.steps)
        assert np.all(a.steps >= ig.AUTO_START_STEPS)
    assert a.steps.max() > ig.AUTO_START_STEPS  # the left rule needed refinement somewhere


def _reference(model, x, b, steps, method, moving):
    """Hand-written IG for one customer: a Python loop of single gradients, as the seed question did."""
    alphas, weights = alphas_and_weights(method, steps)
    xs, xt = (tf.constant(x["static"][:1]), tf.constant(x["temporal"][:1]))
    bs, bt = (tf.constant(b["static"][:1], tf.float32), tf.constant(b["temporal"][:1], tf.float32))
    grad_s = np.zeros((1, S))
    grad_t = np.zeros((1, T, F))
    for alpha, w in zip(alphas, weights):
        ps = bs + alpha * (xs - bs) if moving in ("joint", "static") else xs
        pt = bt + alpha * (xt - bt) if moving in ("joint", "temporal") else xt
        with tf.GradientTape() as tape:
            tape.watch([ps, pt])
            out = model([ps, pt])[0, 0]
        gs, gt = tape.gradient(out, [ps, pt])
        grad_s += w * gs.numpy()
        grad_t += w * gt.numpy()
    attr_s = (xs.numpy() - bs.numpy()) * grad_s if moving in ("joint", "static") else np.zeros((1, S))
    attr_t = (xt.numpy() - bt.numpy()) * grad_t if moving in ("joint", "temporal") else np.zeros((1, T, F))
    return attr_s[0], attr_t[0]


@pytest.mark.parametrize("method", ["gausslegendre", "trapezoid"])
def test_joint_and_per_input_match_reference(lstm, method):
    x = data(1, seed=3)
    b = {"static": np.full((1, S), 0.3), "temporal": np.full((1, T, F), -0.1)}
    joint = explain.integrated_gradients(lstm, x, b, steps=12, method=method)
    ref_s, ref_t = _reference(lstm, x, b, 12, method, "joint")
    np.testing.assert_allclose(joint.static[0], ref_s, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(joint.temporal[0], ref_t, rtol=1e-4, atol=1e-7)

    per = explain.integrated_gradients(lstm, x, b, steps=12, method=method, path="per-input")
    ref_s, _ = _reference(lstm, x, b, 12, method, "static")
    _, ref_t = _reference(lstm, x, b, 12, method, "temporal")
    np.testing.assert_allclose(per.static[0], ref_s, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(per.temporal[0], ref_t, rtol=1e-4, atol=1e-7)
    # per-input completeness: each input against the model with only that input at its baseline
    for role, attr in (("static", per.static.sum(1)), ("temporal", per.temporal.sum((1, 2)))):
        info = per.per_input[role]
        np.testing.assert_allclose(info["delta"], per.prediction - info["reference_prediction"] - attr, atol=1e-12)
        assert abs(info["delta"][0]) < 5e-3


def test_input_order_and_names_do_not_matter():
    x = data(3)
    a = explain.integrated_gradients(lstm_model(seed=4), x, zero_baseline(), steps=16)
    b = explain.integrated_gradients(lstm_model(seed=4, temporal_first=True), x, zero_baseline(), steps=16)
    np.testing.assert_allclose(a.static, b.static, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(a.temporal, b.temporal, rtol=1e-5, atol=1e-7)


def test_no_retracing_across_steps_customers_and_batch_sizes():
    model = lstm_model(seed=5)
    for n, steps, bs in [(1, 16, None), (7, 64, None), (30, 256, None), (3, 5, 7), (2, 300, 64)]:
        explain.integrated_gradients(model, data(n), zero_baseline(), steps=steps, batch_size=bs)
    assert ig.engine_for(model).traces["path"] == 1
    assert ig.engine_for(model).traces["forward"] <= 1
    explain.integrated_gradients(model, data(2), zero_baseline(), steps=8, space="logit")
    assert ig.engine_for(model).traces["path"] == 2  # one per output space


def test_logit_space_uses_pre_activation(lstm):
    x = data(4)
    a = explain.integrated_gradients(lstm, x, zero_baseline(), steps=64, space="logit")
    p = lstm.predict([x["static"], x["temporal"]], verbose=0)[:, 0]
    assert a.space_used == "logit"
    np.testing.assert_allclose(a.prediction, np.log(p / (1 - p)), rtol=1e-4, atol=1e-5)
    assert np.abs(a.delta).max() < 1e-3


def test_expected_gradients_average_over_samples(lstm):
    x = data(3)
    rng = np.random.default_rng(9)
    samples = {"static": rng.normal(size=(1, 4, S)), "temporal": rng.normal(size=(1, 4, T, F))}
    eg = explain.integrated_gradients(lstm, x, samples, steps=32)
    singles = [explain.integrated_gradients(
        lstm, x, {"static": samples["static"][:, j], "temporal": samples["temporal"][:, j]}, steps=32)
        for j in range(4)]
    np.testing.assert_allclose(eg.static, np.mean([s.static for s in singles], axis=0), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(eg.baseline_prediction, np.mean([s.baseline_prediction for s in singles], axis=0))
    assert np.abs(eg.delta).max() < 1e-3


def test_thread_safe_concurrent_calls_equal_serial(lstm):
    inputs = [data(3, seed=s) for s in range(6)]
    serial = [explain.integrated_gradients(lstm, x, zero_baseline(), steps=16).static for x in inputs]
    results = [None] * len(inputs)

    def work(i):
        results[i] = explain.integrated_gradients(lstm, inputs[i], zero_baseline(), steps=16).static

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, serial):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_target_by_name_and_multiclass():
    keras.utils.set_random_seed(2)
    s_in, t_in = keras.Input((S,)), keras.Input((T, F))
    h = keras.layers.Concatenate()([s_in, keras.layers.LSTM(4)(t_in)])
    model = keras.Model([s_in, t_in], keras.layers.Dense(3, activation="softmax")(h))
    x = data(2)
    a = explain.integrated_gradients(model, x, zero_baseline(), steps=32, target="stay",
                                     output_names=["churn", "stay", "downgrade"])
    p = model.predict([x["static"], x["temporal"]], verbose=0)
    np.testing.assert_allclose(a.prediction, p[:, 1], rtol=1e-5)
    assert a.settings.target == 1
    logit = explain.integrated_gradients(model, x, zero_baseline(), steps=32, target=2, space="logit")
    assert logit.space_used == "logit" and np.abs(logit.delta).max() < 1e-3


# -------------------------------------------------------------------- errors, as a table


def _int_input_model():
    s_in = keras.Input((S,), dtype="int32")
    t_in = keras.Input((T, F))
    h = keras.layers.Concatenate()([keras.layers.Flatten()(keras.layers.Embedding(10, 2)(s_in)),
                                    keras.layers.LSTM(2)(t_in)])
    return keras.Model([s_in, t_in], keras.layers.Dense(1)(h))


def _stop_gradient_model():
    s_in, t_in = keras.Input((S,), name="side"), keras.Input((T, F), name="history")
    s = keras.ops.stop_gradient(keras.layers.Dense(1)(s_in))
    return keras.Model([s_in, t_in], keras.layers.Add()([keras.layers.Dense(1)(keras.layers.LSTM(2)(t_in)), s]))


def _same_rank_model():
    a, b = keras.Input((S,)), keras.Input((S,))
    return keras.Model([a, b], keras.layers.Dense(1)(keras.layers.Add()([a, b])))


def _nan(arr, where):
    arr = arr.copy()
    arr[where] = np.nan
    return arr


ERROR_CASES = [
    ("int input", _int_input_model, {}, "static input .* has dtype int32; Integrated Gradients needs a float"),
    ("stop_gradient", _stop_gradient_model, {}, "no gradient with respect to its static input 'side'"),
    ("same ranks", _same_rank_model, {}, "Cannot tell the model's static input from its temporal one"),
    ("baseline shape", None, {"baselines": {"static": np.zeros((1, S + 1)), "temporal": np.zeros((1, T, F))}},
     r"baselines static has shape \(1, 6\); expected \(1 or n, 5\)"),
    ("baseline count", None, {"baselines": {"static": np.zeros((2, S)), "temporal": np.zeros((1, T, F))}},
     "with n = 3 customers"),
    ("input shape", None, {"inputs": {"static": np.zeros((3, S)), "temporal": np.zeros((3, T + 1, F))}},
     r"inputs temporal has shape \(3, 7, 3\); expected \(n, 6, 3\)"),
    ("text input", None, {"inputs": {"static": np.full((3, S), "x"), "temporal": np.zeros((3, T, F))}},
     "inputs static is not numeric"),
    ("missing input", None, {"inputs": {"static": np.zeros((3, S))}}, "inputs has no 'temporal' array"),
    ("nan input", None, {"inputs": {"static": _nan(data(3)["static"], (1, 2)), "temporal": data(3)["temporal"]},
                         "ids": ["A", "B", "C"]},
     "Inputs contain NaN or infinite values for customer 'B' \\(static input"),
    ("inf baseline", None, {"baselines": {"static": np.zeros((1, S)), "temporal": np.full((1, T, F), np.inf)}},
     "Baselines contain NaN or infinite values for customer at row 0 \\(temporal input"),
    ("steps zero", None, {"steps": 0},
     "steps=0 is out of range for method 'gausslegendre': expected an integer from 1 to 4096"),
    ("steps huge", None, {"steps": 100000}, "out of range"),
    ("steps text", None, {"steps": "many"}, "out of range"),
    ("target high", None, {"target": 3},
     "target=3 is out of range: the model has 1 output column\\(s\\), so the target must be an integer from 0 to 0"),
    ("target negative", None, {"target": -1}, "out of range"),
    ("target name", None, {"target": "stay"}, "target='stay' is not an output name"),
    ("method", None, {"method": "simpson"}, "method='simpson' is not valid"),
    ("space", None, {"space": "prob"}, "space='prob' is not valid"),
    ("path", None, {"path": "both"}, "path='both' is not valid"),
    ("batch size", None, {"batch_size": 0}, "batch_size=0 must be a positive integer"),
    ("tolerance", None, {"tolerance": -1.0}, "tolerance=-1.0 must be a positive number"),
]


@pytest.mark.parametrize("name, build, overrides, message", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors(lstm, name, build, overrides, message):
    model = build() if build else lstm
    kwargs = dict(overrides)
    x = kwargs.pop("inputs", data(3))
    b = kwargs.pop("baselines", zero_baseline())
    with pytest.raises(AttributionError, match=message):
        explain.integrated_gradients(model, x, b, **kwargs)
    assert issubclass(AttributionError, ValueError)


def test_nan_output_names_customer():
    s_in, t_in = keras.Input((S,)), keras.Input((T, F))
    # log of a negative number -> NaN for customers whose first static feature is negative
    h = keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])
    out = keras.layers.Activation(keras.ops.log)(keras.layers.Dense(1, kernel_initializer="ones")(h))
    model = keras.Model([s_in, t_in], out)
    x = {"static": np.ones((2, S), "float32"), "temporal": np.ones((2, T, F), "float32")}
    x["static"][1] = -100.0
    with pytest.raises(AttributionError, match="returned NaN or infinite outputs for customer 'Y'"):
        explain.integrated_gradients(model, x, zero_baseline(), steps=4, ids=["X", "Y"])
