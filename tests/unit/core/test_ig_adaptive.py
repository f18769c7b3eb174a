"""steps="auto" on Keras models: adaptive integration per customer against independent references.

The sharp model is built here: a static gate sigmoid(200 z) that switches within ~0.003 of the
path, next to an LSTM history. Its reference attributions come from a hand-written composite
Simpson rule on 8,193 points per customer (tf.GradientTape on the model, no engine code).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import explain
from explain.core import ig
from explain.core.engine import Ends, engine_for
from tests.support.models import F, S, T, data, linear_model

STEEPNESS = 200.0


def sharp_model(seed=0):
    keras.utils.set_random_seed(seed)
    s_in, t_in = keras.Input((S,), name="account"), keras.Input((T, F), name="usage")
    score = keras.layers.Dense(1, name="score")
    gate = keras.layers.Activation("sigmoid")(keras.layers.Rescaling(STEEPNESS)(score(s_in)))
    head = keras.layers.Dense(1, activation="sigmoid", name="head")
    out = head(keras.layers.Concatenate()([gate, keras.layers.LSTM(4)(t_in)]))
    model = keras.Model([s_in, t_in], out)
    score.set_weights([np.full((S, 1), 1.0 / S), np.array([-0.5])])  # z = mean(s) - 0.5: 0 at the path's third
    kernel, bias = head.get_weights()
    kernel[0] = 3.0  # the gate moves the output by about 0.5
    head.set_weights([kernel, bias])
    return model


def sharp_data(n=4, seed=1):
    rng = np.random.default_rng(seed)
    return {"static": rng.normal(1.5, 0.2, (n, S)).astype("float32"),
            "temporal": rng.normal(size=(n, T, F)).astype("float32")}


BASELINE = {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}


def simpson_reference(model, x, b, points=8193):
    """IG of every customer by composite Simpson on ``points`` alphas: (static, temporal)."""
    alphas = np.linspace(0.0, 1.0, points)
    weights = np.ones(points)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    weights /= weights.sum()
    out = []
    for i in range(len(x["static"])):
        xs, xt = x["static"][i].astype(np.float64), x["temporal"][i].astype(np.float64)
        bs, bt = b["static"][0], b["temporal"][0]
        grad_s, grad_t = np.zeros(S), np.zeros((T, F))
        for start in range(0, points, 4096):
            a, w = alphas[start:start + 4096], weights[start:start + 4096]
            ps = tf.constant((bs + a[:, None] * (xs - bs)).astype("float32"))
            pt = tf.constant((bt + a[:, None, None] * (xt - bt)).astype("float32"))
            with tf.GradientTape() as tape:
                tape.watch([ps, pt])
                total = tf.reduce_sum(model([ps, pt]))
            gs, gt = tape.gradient(total, [ps, pt])
            grad_s += np.tensordot(w, gs.numpy().astype(np.float64), axes=1)
            grad_t += np.tensordot(w, gt.numpy().astype(np.float64), axes=1)
        out.append(((xs - bs) * grad_s, (xt - bt) * grad_t))
    return np.stack([o[0] for o in out]), np.stack([o[1] for o in out])


@pytest.fixture(scope="module")
def sharp():
    return sharp_model()


def within_tolerance(a, tolerance):
    gap = np.abs(a.prediction - a.baseline_prediction)
    return np.abs(a.delta) <= np.maximum(tolerance * gap, ig.ABSOLUTE_TOLERANCE)


def test_auto_on_a_sharp_model_matches_a_high_point_reference(sharp):
    x = sharp_data()
    a = explain.integrated_gradients(sharp, x, BASELINE, steps="auto", tolerance=0.002)
    assert np.all(within_tolerance(a, 0.002)), a.delta
    ref_s, ref_t = simpson_reference(sharp, x, BASELINE)
    np.testing.assert_allclose(ref_s.sum(1) + ref_t.sum((1, 2)), a.prediction - a.baseline_prediction, atol=2e-5)
    scale = np.abs(a.prediction - a.baseline_prediction)[:, None]
    np.testing.assert_allclose(a.static / scale, ref_s / scale, atol=5e-3)
    np.testing.assert_allclose(a.temporal / scale[:, :, None], ref_t / scale[:, :, None], atol=5e-3)
    assert np.all(a.gradient_points > ig.AUTO_START_STEPS)  # the first try was not enough
    assert np.all(a.gradient_points <= ig.AUTO_MAX_STEPS) and np.all(a.forward_points > 2)
    # the uniform rule with as many points as the most any customer used misses by far more
    most = int(a.gradient_points.max())
    uniform = explain.integrated_gradients(sharp, x, BASELINE, steps=most)
    assert np.abs(uniform.delta).max() > 10 * np.abs(a.delta).max()
    assert not np.all(within_tolerance(uniform, 0.002))


def test_auto_per_input_path_meets_the_tolerance_for_each_input(sharp):
    x = sharp_data(3, seed=5)
    a = explain.integrated_gradients(sharp, x, BASELINE, steps="auto", path="per-input", tolerance=0.002)
    for key, info in a.per_input.items():
        gap = np.abs(a.prediction - info["reference_prediction"])
        assert np.all(np.abs(info["delta"]) <= np.maximum(0.002 * gap, ig.ABSOLUTE_TOLERANCE)), key
    spent = a.per_input["static"]["gradient_points"] + a.per_input["temporal"]["gradient_points"]
    np.testing.assert_array_equal(a.gradient_points, spent)


@pytest.mark.parametrize("batch_size", [5, 64, None])
def test_auto_does_not_depend_on_batch_size_or_row_groups(sharp, batch_size, monkeypatch):
    x = sharp_data(6, seed=2)
    reference = explain.integrated_gradients(sharp, x, BASELINE, steps="auto")
    monkeypatch.setattr(ig, "ADAPTIVE_MEMORY", 1)  # one customer per group of rows
    other = explain.integrated_gradients(sharp, x, BASELINE, steps="auto", batch_size=batch_size)
    np.testing.assert_allclose(other.static, reference.static, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(other.temporal, reference.temporal, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(other.gradient_points, reference.gradient_points)
    np.testing.assert_array_equal(other.steps, reference.steps)


def test_auto_is_exact_on_a_linear_model_after_the_first_try():
    model, ws, wt = linear_model(seed=3)
    x = data(5)
    b = {"static": np.full((1, S), 0.5), "temporal": np.full((1, T, F), -0.25)}
    a = explain.integrated_gradients(model, x, b, steps="auto", tolerance=1e-6)
    np.testing.assert_allclose(a.static, (x["static"] - 0.5) * ws, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.delta, 0.0, atol=1e-5)
    np.testing.assert_array_equal(a.gradient_points, ig.AUTO_START_STEPS)
    np.testing.assert_array_equal(a.forward_points, 2)  # f(x) and f(b): no sweep needed
    two = explain.integrated_gradients(model, x, b, steps=2)  # exact weights: 2 points are exact too
    np.testing.assert_allclose(two.static, a.static, rtol=1e-5, atol=1e-6)


def test_points_spent_add_up_over_baseline_samples(sharp):
    x = sharp_data(2, seed=3)
    rng = np.random.default_rng(4)
    samples = {"static": rng.normal(0.0, 0.3, (1, 3, S)), "temporal": rng.normal(size=(1, 3, T, F))}
    eg = explain.integrated_gradients(sharp, x, samples, steps="auto")
    singles = [explain.integrated_gradients(sharp, x, {k: v[:, j] for k, v in samples.items()}, steps="auto")
               for j in range(3)]
    np.testing.assert_array_equal(eg.gradient_points, sum(s.gradient_points for s in singles))
    np.testing.assert_array_equal(eg.forward_points, sum(s.forward_points for s in singles))
    np.testing.assert_allclose(eg.static, np.mean([s.static for s in singles], axis=0), rtol=1e-5, atol=1e-8)


def test_a_fixed_rule_reports_its_points(sharp):
    a = explain.integrated_gradients(sharp, sharp_data(2), BASELINE, steps=24)
    np.testing.assert_array_equal(a.steps, 24)
    np.testing.assert_array_equal(a.gradient_points, 24)
    np.testing.assert_array_equal(a.forward_points, 2)


def test_the_budget_is_kept_and_customers_outside_the_tolerance_show_it(sharp):
    x = sharp_data(4)
    a = explain.integrated_gradients(sharp, x, BASELINE, steps="auto", tolerance=1e-6, max_points=64)
    assert np.all(a.gradient_points <= 64)
    assert not np.all(within_tolerance(a, 1e-6))  # honest: the deltas say they did not converge


def test_rows_with_their_own_alphas_in_one_call_equal_separate_calls(sharp):
    engine = engine_for(sharp)
    x = sharp_data(3)
    points = {key: v.astype(np.float32) for key, v in x.items()}
    base = {key: np.broadcast_to(BASELINE[key], points[key].shape).astype(np.float64) for key in points}
    rng = np.random.default_rng(0)
    alphas, weights = rng.uniform(size=(3, 5)), rng.uniform(size=(3, 5))
    together, ok = engine.path_sums(Ends(points, base, {}), alphas, weights, 0, "output", 4096)
    assert ok.all()
    for i in range(3):
        one = {key: v[i:i + 1] for key, v in points.items()}
        alone, _ = engine.path_sums(Ends(one, {key: v[i:i + 1] for key, v in base.items()}, {}), alphas[i],
                                    weights[i], 0, "output", 4096)
        for key in points:
            np.testing.assert_allclose(together[key][i], alone[key][0], rtol=1e-6, atol=1e-9)
    # the same rows through an index (panels of one customer), and the forward sweep at those alphas
    index = np.array([2, 0, 2])
    again, _ = engine.path_sums(Ends(points, base, {}), alphas[index], weights[index], 0, "output", 7, index=index)
    np.testing.assert_allclose(again["static"], together["static"][index], rtol=1e-6, atol=1e-9)
    swept = engine.sweep(Ends(points, base, {}), np.repeat(index, 5), alphas[index].reshape(-1), 0, "output", 4096)
    rows = np.repeat(index, 5)
    at = {key: (base[key][rows] + alphas[index].reshape(-1, *[1] * (v.ndim - 1)) * (v[rows] - base[key][rows]))
          .astype("float32") for key, v in points.items()}
    direct = sharp([at["static"], at["temporal"]]).numpy()[:, 0]
    np.testing.assert_allclose(swept, direct, rtol=1e-5, atol=1e-7)
