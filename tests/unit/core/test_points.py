"""explain.core.points: f along the path and the points the engine integrated at, against references
computed here: the model called directly at x(alpha) = b + alpha (x - b), and IG summed by hand from
those points, their weights and tf.GradientTape gradients (no engine code), equal to
``integrated_gradients``'s attributions."""

import numpy as np
import pytest
import tensorflow as tf

from explain.core import ig, points
from explain.core.errors import AttributionError
from explain.core.quadrature import alphas_and_weights
from tests.support.models import F, S, T, linear_model, lstm_model
from tests.unit.core.test_ig_adaptive import BASELINE, sharp_data, sharp_model


@pytest.fixture(scope="module")
def sharp():
    return sharp_model()


def one(x, i=0):
    return {key: v[i:i + 1] for key, v in x.items()}


def along(x, b, alphas):
    """The path points b + alpha (x - b) of one customer, (m, ...) float32, as the model takes them."""
    out = {}
    for key in ("static", "temporal"):
        xk, bk = np.asarray(x[key][0], np.float64), np.asarray(b[key][0], np.float64)
        shape = (-1,) + (1,) * xk.ndim
        out[key] = (bk + np.asarray(alphas).reshape(shape) * (xk - bk)).astype("float32")
    return out


def model_values(model, x, b, alphas):
    p = along(x, b, alphas)
    return model([tf.constant(p["static"]), tf.constant(p["temporal"])]).numpy()[:, 0].astype(np.float64)


def hand_ig(model, x, b, alphas, weights):
    """IG from the given points and weights: (x - b) * sum_j w_j grad f(x(a_j)), by tf.GradientTape."""
    p = along(x, b, alphas)
    ps, pt = tf.constant(p["static"]), tf.constant(p["temporal"])
    with tf.GradientTape() as tape:
        tape.watch([ps, pt])
        total = tf.reduce_sum(model([ps, pt]))
    gs, gt = (g.numpy().astype(np.float64) for g in tape.gradient(total, [ps, pt]))
    w = np.asarray(weights, np.float64)
    return ((x["static"][0] - b["static"][0]) * np.tensordot(w, gs, axes=1),
            (x["temporal"][0] - b["temporal"][0]) * np.tensordot(w, gt, axes=1))


@pytest.mark.parametrize("customer", [0, 2])
def test_auto_points_are_the_engines_and_the_sweep_is_the_model(sharp, customer):
    x = one(sharp_data(n=4), customer)
    found = points.path_points(sharp, x, BASELINE, steps="auto", tolerance=1e-3)
    a = ig.integrated_gradients(sharp, x, BASELINE, steps="auto", tolerance=1e-3)
    leg = found.legs["joint"]
    assert list(found.legs) == ["joint"] and found.adaptive
    # the dense sweep and f at the points: the model itself at b + alpha (x - b)
    np.testing.assert_allclose(leg.alphas, np.linspace(0, 1, points.SWEEP_ALPHAS))
    np.testing.assert_allclose(leg.values, model_values(sharp, x, BASELINE, leg.alphas), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(leg.point_values, model_values(sharp, x, BASELINE, leg.point_alphas),
                               rtol=1e-5, atol=1e-6)
    assert leg.start == pytest.approx(a.baseline_prediction[0]) and leg.end == pytest.approx(a.prediction[0])
    # the points placed for this customer: auto went past the first try, panels where f jumps
    assert leg.panels > 1 and leg.final_points == a.steps[0] > ig.AUTO_START_STEPS
    assert np.all(np.diff(leg.point_alphas) >= 0) and leg.point_weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert leg.edges[0] == 0.0 and leg.edges[-1] == 1.0 and np.all(np.diff(leg.edges) > 0)
    width = np.diff(leg.edges)
    density = np.bincount(leg.point_panels, minlength=leg.panels) / width  # points per unit of alpha
    jump = int(np.argmax(np.abs(np.diff(leg.values))))  # the sweep's steepest step
    steep = np.searchsorted(leg.edges, leg.alphas[jump], side="right") - 1
    assert density[steep] > 2 * np.median(density)  # more points where f changes
    # IG summed by hand over those points and weights is the engine's attribution
    static, temporal = hand_ig(sharp, x, BASELINE, leg.point_alphas, leg.point_weights)
    np.testing.assert_allclose(static, a.static[0], rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(temporal, a.temporal[0], rtol=1e-4, atol=1e-7)
    assert leg.delta == pytest.approx(float(a.delta[0]), abs=1e-9)
    assert abs(leg.delta) <= leg.limit
    assert leg.gradient_points == a.gradient_points[0] and leg.forward_points == a.forward_points[0]


@pytest.mark.parametrize("method, steps", [("gausslegendre", 16), ("trapezoid", 9)])
def test_a_fixed_steps_shows_the_uniform_rule(method, steps):
    model = lstm_model(seed=4, units=4)
    rng = np.random.default_rng(0)
    x = {"static": rng.normal(size=(1, S)).astype("float32"), "temporal": rng.normal(size=(1, T, F)).astype("float32")}
    found = points.path_points(model, x, BASELINE, steps=steps, method=method, sweep=33)
    leg = found.legs["joint"]
    a, w = alphas_and_weights(method, steps)
    np.testing.assert_array_equal(leg.point_alphas, a)  # the rule's points on [0, 1], whatever the path
    np.testing.assert_array_equal(leg.point_weights, w)
    assert leg.panels == 1 and set(leg.point_panels) == {0} and np.isnan(leg.limit) and not found.adaptive
    assert found.space_used == "output" and len(leg.alphas) == 33
    assert leg.gradient_points == steps and leg.forward_points == 2
    np.testing.assert_allclose(leg.values, model_values(model, x, BASELINE, leg.alphas), rtol=1e-5, atol=1e-6)
    attribution = ig.integrated_gradients(model, x, BASELINE, steps=steps, method=method)
    static, temporal = hand_ig(model, x, BASELINE, a, w)
    np.testing.assert_allclose(static, attribution.static[0], rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(temporal, attribution.temporal[0], rtol=1e-4, atol=1e-7)
    assert leg.delta == pytest.approx(float(attribution.delta[0]), abs=1e-9)


def test_the_space_used_is_the_engines():
    model = lstm_model(seed=4, units=4)
    rng = np.random.default_rng(0)
    x = {"static": rng.normal(size=(1, S)).astype("float32"), "temporal": rng.normal(size=(1, T, F)).astype("float32")}
    output = points.path_points(model, x, BASELINE, steps=4, sweep=5).legs["joint"]
    logit = points.path_points(model, x, BASELINE, steps=4, sweep=5, space="logit")
    assert logit.space_used == ig.integrated_gradients(model, x, BASELINE, steps=4, space="logit").space_used
    np.testing.assert_allclose(1 / (1 + np.exp(-logit.legs["joint"].values)), output.values, rtol=1e-5)  # sigmoid


def test_per_input_legs_each_with_their_own_points(sharp):
    x = one(sharp_data(n=4), 1)
    found = points.path_points(sharp, x, BASELINE, steps="auto", path="per-input", tolerance=1e-3)
    a = ig.integrated_gradients(sharp, x, BASELINE, steps="auto", path="per-input", tolerance=1e-3)
    assert list(found.legs) == ["static", "temporal"]
    for key, leg in found.legs.items():
        b = {k: (BASELINE[k] if k == key else x[k]) for k in ("static", "temporal")}  # only this input moves
        np.testing.assert_allclose(leg.values, model_values(sharp, x, b, leg.alphas), rtol=1e-5, atol=1e-6)
        assert leg.start == pytest.approx(a.per_input[key]["reference_prediction"][0])
        assert leg.delta == pytest.approx(float(a.per_input[key]["delta"][0]), abs=1e-9)
        hand = dict(zip(("static", "temporal"), hand_ig(sharp, x, b, leg.point_alphas, leg.point_weights)))
        np.testing.assert_allclose(hand[key], a.inputs[key][0], rtol=1e-4, atol=1e-7)
    assert found.legs["static"].panels > 1  # the gate is on the static input's path


def test_a_linear_model_is_a_straight_line_and_exact():
    model, ws, wt = linear_model(seed=2)
    rng = np.random.default_rng(3)
    x = {"static": rng.normal(size=(1, S)).astype("float32"), "temporal": rng.normal(size=(1, T, F)).astype("float32")}
    leg = points.path_points(model, x, BASELINE, steps="auto", sweep=65).legs["joint"]
    gap = float(x["static"][0] @ ws + (x["temporal"][0] * wt).sum())
    np.testing.assert_allclose(leg.values - leg.values[0], leg.alphas * gap, rtol=1e-4, atol=1e-5)
    assert leg.final_points == ig.AUTO_START_STEPS and leg.panels == 1  # the first try adds up
    assert abs(leg.delta) < 1e-5


def test_sampled_baselines_show_the_first_and_one_customer_only(sharp):
    x = sharp_data(n=2)
    rng = np.random.default_rng(1)
    sampled = {"static": rng.normal(size=(1, 3, S)), "temporal": rng.normal(size=(1, 3, T, F))}
    found = points.path_points(sharp, one(x), sampled, steps=8, sweep=9)
    first = {key: v[:, 0] for key, v in sampled.items()}
    np.testing.assert_allclose(found.legs["joint"].values, model_values(sharp, one(x), first, np.linspace(0, 1, 9)),
                               rtol=1e-5, atol=1e-6)
    assert found.samples == 3
    with pytest.raises(AttributionError, match="one customer at a time; the inputs hold 2"):
        points.path_points(sharp, x, BASELINE)


def test_a_padded_history_stays_padded_along_the_path():
    """Masking(0) + LSTM, a customer with 2 real months of 8: f along the path is the same layers on the
    real months alone (no padding) at b + alpha (x - b), and the points are the engine's."""
    from tests.unit.core.test_inputs import masked_model as build
    from tests.unit.core.test_inputs import padded_data

    model, real_only = build()
    data = padded_data()
    x = one(data, 2)  # LENGTHS[2] = 2 real months, padded at the start
    b = {"static": np.full((1, 2), 0.5), "temporal": np.full((1, 8, x["temporal"].shape[2]), 0.5)}
    found = points.path_points(model, x, b, steps="auto", sweep=17).legs["joint"]
    a = ig.integrated_gradients(model, x, b, steps="auto")
    path = along(x, b, found.alphas)
    expected = real_only([tf.constant(path["static"]), tf.constant(path["temporal"][:, -2:])]).numpy()[:, 0]
    np.testing.assert_allclose(found.values, expected, rtol=1e-5, atol=1e-6)
    assert found.delta == pytest.approx(float(a.delta[0]), abs=1e-9) and found.final_points == a.steps[0]


def test_an_embedding_input_moves_along_its_vectors():
    """Category ids into an Embedding: the path runs between the embedding vectors (layer IG); f along it
    is the twin model on b_e + alpha (x_e - b_e), and the hand-summed IG of the vectors is the engine's."""
    from tests.unit.core.test_inputs import categorical_data, embedding_model

    model, twin, embed = embedding_model()
    x = one(categorical_data(n=3), 1)
    b = {"plan": np.array([[0]], "int32"), "num": np.zeros((1, 2)), "hist": np.zeros((1, *x["hist"].shape[1:]))}
    found = points.path_points(model, x, b, steps="auto", sweep=9, tolerance=1e-3)
    leg = found.legs["joint"]
    a = ig.integrated_gradients(model, x, b, steps="auto", tolerance=1e-3)
    ex, eb = embed(x["plan"]).astype(np.float64), embed(b["plan"]).astype(np.float64)

    def twin_path(alphas):
        alphas = np.asarray(alphas)
        return [tf.constant((eb + alphas[:, None, None] * (ex - eb)).astype("float32")),
                tf.constant((alphas[:, None] * x["num"]).astype("float32")),
                tf.constant((alphas[:, None, None] * x["hist"]).astype("float32"))]

    np.testing.assert_allclose(leg.values, twin(twin_path(leg.alphas)).numpy()[:, 0], rtol=1e-5, atol=1e-6)
    inputs = twin_path(leg.point_alphas)
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        total = tf.reduce_sum(twin(inputs))
    grads = [g.numpy().astype(np.float64) for g in tape.gradient(total, inputs)]
    w = leg.point_weights
    np.testing.assert_allclose(((ex - eb)[0] * np.tensordot(w, grads[0], axes=1)).sum(axis=-1), a.inputs["plan"][0],
                               rtol=1e-4, atol=1e-7)  # layer IG, summed over the embedding dimension
    np.testing.assert_allclose(x["num"][0] * np.tensordot(w, grads[1], axes=1), a.inputs["num"][0],
                               rtol=1e-4, atol=1e-7)
    assert leg.delta == pytest.approx(float(a.delta[0]), abs=1e-9)
