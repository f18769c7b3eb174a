"""The change of a customer's score since an earlier period (issue 40): the ``previous:K`` baseline and
``explain.core.change.integrated_change`` on models unlike the demo.

1. The shifted baseline is built here with a plain loop over customers and periods (period t of the earlier
   history holds period t - K; the first K hold period 0, or the padding a model reads) and compared with
   ``baselines.previous`` and ``from_spec("previous:K")`` for a plain two-input model, Masking histories padded
   at the start (mask 0 and -1), a categorical ``mask_zero`` history, and a model of two histories and a static
   input taken in an odd order under odd names, in float32 and float64.
2. The change is exact: the attributions add up to f(now) - f(then), f(then) is the model's own score (called
   here) on the shifted inputs built here, and the attributions per cell equal an independent reference: a
   midpoint Riemann sum of 2,000 points with ``tf.GradientTape`` along the straight path (for a GRU without
   padding), and, for a Masking model whose customers have periods that arrived since then, the arrival
   f(b') - f(b) computed here (b': the arrived periods at the mask value + 1e-6) spread evenly over the
   arrived cells plus the Riemann IG from b' to the customer. Periods that are padding now get exactly 0.
3. The error paths: previous:0, previous:x, and the per-input path with arrived periods.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from explain.core import baselines
from explain.core.change import PER_INPUT_CHANGE, integrated_change
from explain.core.errors import AttributionError
from explain.core.inputs import input_layout
from explain.core.settings import BAD_PREVIOUS, MAX_PREVIOUS, Baseline, Settings

RIEMANN_POINTS = 2000


# ------------------------------------------------------------------------------------------- built here


def shifted(values, k: int, pad=None) -> np.ndarray:
    """The history ``k`` periods earlier, customer by customer and period by period: period t holds period
    t - k; the first k periods hold ``pad`` (the padding the model reads), or period 0 when ``pad`` is None."""
    values = np.asarray(values)
    out = np.zeros_like(values)
    n, periods = values.shape[:2]
    for i in range(n):
        for t in range(periods):
            if t - k >= 0:
                out[i, t] = values[i, t - k]
            elif pad is None:
                out[i, t] = values[i, 0]
            else:
                out[i, t] = pad
    return out


def call(model, order, arrays) -> np.ndarray:
    """The model's own first output on ``arrays`` (a dict by key), fed as a list in ``order``."""
    return np.asarray(model([arrays[key] for key in order], training=False))[:, 0].astype(np.float64)


def riemann_ig(model, order, x: dict, b: dict, points: int = RIEMANN_POINTS) -> dict:
    """Integrated Gradients along the straight path b -> x: a midpoint Riemann sum of ``points`` gradients
    taken with ``tf.GradientTape``, one customer at a time; {key: (n, ...) float64}."""
    alphas = (np.arange(points) + 0.5) / points
    n = len(x[order[0]])
    out = {key: np.zeros(np.shape(x[key]), np.float64) for key in order}
    for i in range(n):
        diffs = [np.asarray(x[key][i], np.float64) - np.asarray(b[key][i], np.float64) for key in order]
        path = [tf.constant((np.asarray(b[key][i], np.float64)[None]
                             + alphas.reshape(-1, *[1] * diff.ndim) * diff[None]).astype("float32"))
                for key, diff in zip(order, diffs)]
        with tf.GradientTape() as tape:
            tape.watch(path)
            y = model(path, training=False)[:, 0]
        for key, diff, grad in zip(order, diffs, tape.gradient(y, path)):
            out[key][i] = grad.numpy().astype(np.float64).mean(axis=0) * diff
    return out


def total(a) -> np.ndarray:
    return sum(v.reshape(v.shape[0], -1).sum(axis=1) for v in a.inputs.values())


def assert_exact_change(a, expected_then, now=None):
    """The attributions add up to f(now) - f(then) within 0.1 % of the change, f(then) is ``expected_then``
    (the model's own score on the shifted inputs, computed in the test) and ``delta`` is what is left."""
    change = a.prediction - a.baseline_prediction
    np.testing.assert_allclose(a.baseline_prediction, expected_then, atol=2e-6)
    if now is not None:
        np.testing.assert_allclose(a.prediction, now, atol=2e-6)
    assert (np.abs(change) > 1e-3).all(), change  # a change worth explaining
    np.testing.assert_allclose(total(a), change, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(change - total(a), a.delta, atol=1e-9)


# ------------------------------------------------------------------------------------------- models


def plain_model(recurrent=keras.layers.LSTM, seed=0, temporal_first=False, periods=5, features=2):
    """A static (None, 3) and a history (None, periods, features) read by ``recurrent``, sigmoid head."""
    keras.utils.set_random_seed(seed)
    s_in = keras.Input((3,), name="account")
    t_in = keras.Input((periods, features), name="months")
    h = keras.layers.Concatenate()([keras.layers.Dense(4, activation="tanh")(s_in), recurrent(6)(t_in)])
    out = keras.layers.Dense(1, activation="sigmoid")(h)
    return keras.Model([t_in, s_in] if temporal_first else [s_in, t_in], out)


def masking_model(mask=0.0, periods=8, seed=1):
    """A static (None, 2) and a history (None, periods, 3) behind Masking(mask) + LSTM, sigmoid head."""
    keras.utils.set_random_seed(seed)
    s_in = keras.Input((2,), name="account")
    t_in = keras.Input((periods, 3), name="weeks")
    lstm = keras.layers.LSTM(6)
    h = keras.layers.Concatenate()([keras.layers.Dense(3, activation="tanh")(s_in),
                                    lstm(keras.layers.Masking(mask)(t_in))])
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(h))
    random_bias(lstm, seed)
    return model


def random_bias(layer, seed):
    """Biases drawn at random: with Keras' zero biases a period just off the mask (1e-6) leaves a zero state
    at zero, and the arrival of a period would not move the score at all."""
    kernel, recurrent, bias = layer.get_weights()
    layer.set_weights([kernel, recurrent, np.random.default_rng(seed).normal(0, 0.8, size=bias.shape)])


def masked_history(n, periods, padded: dict, mask=0.0, seed=2, features=3) -> np.ndarray:
    """Values in [0.2, 2] (never the mask), customer i's first ``padded[i]`` periods at the mask value."""
    rng = np.random.default_rng(seed)
    history = rng.uniform(0.2, 2.0, size=(n, periods, features))
    for i, count in padded.items():
        history[i, :count] = mask
    return history


def embedding_model(periods=6, seed=3):
    """plan (None, 1) int ids -> Embedding; numbers (None, 2); events (None, periods) int ids ->
    Embedding(mask_zero=True) -> LSTM (id 0 is padding); sigmoid head."""
    keras.utils.set_random_seed(seed)
    plan = keras.Input((1,), name="plan", dtype="int32")
    numbers = keras.Input((2,), name="numbers")
    events = keras.Input((periods,), name="events", dtype="int32")
    plans, event_vectors, lstm = keras.layers.Embedding(4, 2), keras.layers.Embedding(9, 3, mask_zero=True), \
        keras.layers.LSTM(5)
    parts = [keras.layers.Flatten()(plans(plan)), keras.layers.Dense(2)(numbers), lstm(event_vectors(events))]
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Concatenate()(parts))
    model = keras.Model([plan, numbers, events], out)
    rng = np.random.default_rng(seed)
    for layer in (plans, event_vectors):  # vectors far apart (Keras draws them within 0.05): ids that matter
        layer.set_weights([rng.normal(0, 1.0, size=layer.get_weights()[0].shape)])
    random_bias(lstm, seed)
    return model


SEVERAL = ("zz_Quarterly_9", "m0nthly__usage", "a_Profile")  # model order: the histories first, odd names


def several_model(seed=4):
    """zz_Quarterly_9 (None, 4, 3) behind Masking(0) + GRU, m0nthly__usage (None, 6, 1) + GRU (no padding),
    a_Profile (None, 2) static; in that order (temporal first)."""
    keras.utils.set_random_seed(seed)
    quarterly = keras.Input((4, 3), name=SEVERAL[0])
    monthly = keras.Input((6, 1), name=SEVERAL[1])
    profile = keras.Input((2,), name=SEVERAL[2])
    gru = keras.layers.GRU(4)
    h = keras.layers.Concatenate()([gru(keras.layers.Masking(0.0)(quarterly)),
                                    keras.layers.GRU(3)(monthly), keras.layers.Dense(3, activation="tanh")(profile)])
    model = keras.Model([quarterly, monthly, profile], keras.layers.Dense(1, activation="sigmoid")(h))
    random_bias(gru, seed)
    return model


def several_inputs(dtype, n=3, seed=5):
    rng = np.random.default_rng(seed)
    quarterly = rng.uniform(0.2, 2.0, size=(n, 4, 3))
    quarterly[1, :2] = 0.0  # customer 1 has two quarters of data
    return {SEVERAL[0]: quarterly.astype(dtype), SEVERAL[1]: rng.normal(size=(n, 6, 1)).astype(dtype),
            SEVERAL[2]: rng.normal(size=(n, 2)).astype(dtype)}


# ------------------------------------------------------------------------------------------- 1. the baseline


def assert_same(built, expected, dtype=None):
    assert set(built) == set(expected)
    for key in expected:
        assert built[key].shape == expected[key].shape, key
        if dtype is not None:
            assert built[key].dtype == dtype, (key, built[key].dtype)
        np.testing.assert_array_equal(built[key], expected[key], err_msg=key)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 5, 9])  # 5 and 9 >= T: every period is the first
def test_a_plain_history_shifted_k_periods_later_repeats_its_first_period(k, dtype):
    rng = np.random.default_rng(0)
    inputs = {"static": rng.normal(size=(4, 3)).astype(dtype), "temporal": rng.normal(size=(4, 5, 2)).astype(dtype)}
    kept = {key: value.copy() for key, value in inputs.items()}
    expected = {"static": inputs["static"], "temporal": shifted(inputs["temporal"], k)}
    if k >= 5:
        np.testing.assert_array_equal(expected["temporal"], np.repeat(inputs["temporal"][:, :1], 5, axis=1))
    spec = "previous" if k == 1 else f"previous:{k}"
    layout = input_layout(plain_model(temporal_first=True))
    for built in (baselines.previous(inputs, k), baselines.from_spec(spec, inputs, inputs),
                  baselines.previous(inputs, k, layout), baselines.from_spec(spec, inputs, inputs, layout=layout)):
        assert_same(built, expected, dtype)
        assert not np.shares_memory(built["static"], inputs["static"])  # a copy: the caller's arrays stay theirs
    assert_same(inputs, kept)  # nothing given was changed


@pytest.mark.parametrize("mask", [0.0, -1.0])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_a_masked_history_becomes_k_periods_shorter_its_padding_shifted_with_it(k, mask):
    model = masking_model(mask)
    history = masked_history(3, 8, {1: 2, 2: 6}, mask)  # customer 0 full, 1 with 2 padded periods, 2 with 6
    inputs = {"static": np.random.default_rng(1).normal(size=(3, 2)), "temporal": history}
    expected = {"static": inputs["static"], "temporal": shifted(history, k, pad=mask)}
    built = baselines.from_spec(f"previous:{k}", inputs, inputs, layout=input_layout(model))
    assert_same(built, expected, np.float64)
    padded_then = (built["temporal"] == mask).all(axis=2)
    assert padded_then.sum(axis=1).tolist() == [min(8, k + p) for p in (0, 2, 6)]  # k periods shorter, as it was
    assert padded_then[:, :k].all()  # the first k: padding, not the first period repeated


@pytest.mark.parametrize("k", [1, 2])
def test_a_categorical_history_read_with_mask_zero_gets_the_padding_id(k):
    model = embedding_model()
    events = np.array([[3, 1, 4, 1, 5, 8], [0, 0, 0, 2, 7, 2], [6, 6, 6, 6, 6, 6]], np.int64)
    inputs = {"plan": np.array([[0], [3], [1]]), "numbers": np.random.default_rng(2).normal(size=(3, 2)),
              "events": events}
    expected = {"plan": inputs["plan"], "numbers": inputs["numbers"], "events": shifted(events, k, pad=0)}
    built = baselines.from_spec(f"previous:{k}", inputs, inputs, layout=input_layout(model))
    assert_same(built, expected)
    assert built["events"].dtype == events.dtype
    assert (built["events"][:, :k] == 0).all() and (built["events"][1, :3 + k] == 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 6])
def test_several_histories_each_shifted_by_its_own_rule_static_unchanged(k, dtype):
    model = several_model()
    inputs = several_inputs(dtype)
    expected = {SEVERAL[0]: shifted(inputs[SEVERAL[0]], k, pad=0.0),  # Masking(0): padding
                SEVERAL[1]: shifted(inputs[SEVERAL[1]], k),  # no padding read: the first month repeated
                SEVERAL[2]: inputs[SEVERAL[2]]}
    layout = input_layout(model)
    assert layout.engine_keys == SEVERAL  # keyed by the model's own odd names, in its order
    for built in (baselines.previous(inputs, k, layout), baselines.from_spec(f"previous:{k}", inputs, inputs,
                                                                              layout=layout)):
        assert_same(built, expected, dtype)


# ------------------------------------------------------------------------------------------- 2. the change


def test_a_gru_change_without_arrivals_equals_a_riemann_reference_cell_by_cell():
    model = plain_model(keras.layers.GRU, seed=7, periods=6, features=2)
    rng = np.random.default_rng(7)
    x = {"static": rng.normal(size=(3, 3)), "temporal": rng.normal(0, 1.5, size=(3, 6, 2))}
    then = {"static": x["static"], "temporal": shifted(x["temporal"], 1)}
    assert_same(baselines.previous(x, 1), then)
    a = integrated_change(model, x, then, Settings(baseline="previous", steps=128), ids=["g0", "g1", "g2"])
    assert a.arrival is None  # nothing arrived: plain Integrated Gradients
    assert_exact_change(a, call(model, ["static", "temporal"], then), call(model, ["static", "temporal"], x))
    reference = riemann_ig(model, ["static", "temporal"], x, then)
    scale = max(np.abs(a.inputs[key]).max() for key in a.inputs)
    for key in ("static", "temporal"):
        np.testing.assert_allclose(a.inputs[key], reference[key], atol=1e-3 * scale, err_msg=key)
    assert (a.inputs["static"] == 0).all()  # static unchanged: exactly nothing to it


@pytest.fixture(scope="module")
def masked_change():
    """A Masking(0) LSTM over 40 weeks; customers with 0, 30, 5 and 39 padded weeks; previous:2."""
    model = masking_model(0.0, periods=40, seed=8)
    padded = {0: 0, 1: 30, 2: 5, 3: 39}
    x = {"static": np.random.default_rng(8).normal(size=(4, 2)),
         "temporal": masked_history(4, 40, padded, 0.0, seed=9)}
    then = baselines.previous(x, 2, input_layout(model))
    a = integrated_change(model, x, then, Settings(baseline="previous:2", steps=128), ids=["w0", "w1", "w2", "w3"])
    return model, x, padded, a


def test_a_masked_change_adds_up_and_its_baseline_is_the_model_on_the_shorter_history(masked_change):
    model, x, padded, a = masked_change
    then = {"static": x["static"], "temporal": shifted(x["temporal"], 2, pad=0.0)}
    assert_exact_change(a, call(model, ["static", "temporal"], then), call(model, ["static", "temporal"], x))
    for key, value in then.items():  # the baseline reported is the earlier customer as given, not b'
        np.testing.assert_array_equal(a.baselines[key], value)
    now_padded = np.arange(40)[None, :] < np.array([padded[i] for i in range(4)])[:, None]
    np.testing.assert_array_equal(a.padding["temporal"], now_padded)
    assert (a.temporal[now_padded] == 0).all()  # padding now: exactly nothing
    assert any("arrival" in note for note in a.notes)


def test_arrived_weeks_hold_the_arrival_spread_evenly_plus_a_riemann_ig_from_the_mask_edge(masked_change):
    model, x, padded, a = masked_change
    b = {"static": x["static"], "temporal": shifted(x["temporal"], 2, pad=0.0)}
    arrived = (b["temporal"] == 0).all(axis=2) & ~(x["temporal"] == 0).all(axis=2)  # (n, T)
    # weeks that were not there two weeks ago: the first two real weeks (or the only one, customer 3)
    assert arrived.sum(axis=1).tolist() == [2, 2, 2, 1]
    for i, p in padded.items():
        assert arrived[i, p:p + 2].all()
    edge = {"static": b["static"], "temporal": np.where(arrived[..., None], 1e-6, b["temporal"])}
    order = ["static", "temporal"]
    arrival = call(model, order, edge) - call(model, order, b)
    np.testing.assert_allclose(a.arrival, arrival, atol=2e-6)
    assert (np.abs(arrival[[1, 3]]) > 1e-3).all()  # it matters where few weeks follow (forgotten over 38)
    reference = riemann_ig(model, order, x, edge)
    cells = arrived.sum(axis=1) * x["temporal"].shape[2]
    expected = reference["temporal"] + arrived[..., None] * (arrival / cells)[:, None, None]
    scale = np.abs(a.temporal).max()
    np.testing.assert_allclose(a.temporal, expected, atol=1e-3 * scale)
    np.testing.assert_allclose(a.static, reference["static"], atol=1e-3 * scale)
    in_arrived = (a.temporal * arrived[..., None]).sum(axis=(1, 2))
    np.testing.assert_allclose(in_arrived - (reference["temporal"] * arrived[..., None]).sum(axis=(1, 2)), arrival,
                               atol=1e-3 * scale)


def test_a_categorical_change_spreads_the_arrival_over_the_arrived_ids_and_adds_up():
    model = embedding_model(periods=6, seed=3)
    events = np.array([[3, 1, 4, 1, 5, 8], [0, 0, 0, 2, 7, 2], [0, 0, 0, 0, 0, 6]], np.int64)
    x = {"plan": np.array([[0], [3], [1]]), "numbers": np.random.default_rng(3).normal(size=(3, 2)), "events": events}
    order = ["plan", "numbers", "events"]
    b = {"plan": x["plan"], "numbers": x["numbers"], "events": shifted(events, 1, pad=0)}
    then = baselines.from_spec("previous", x, x, layout=input_layout(model))
    a = integrated_change(model, x, then, Settings(baseline="previous", steps="auto", tolerance=1e-3))
    assert_exact_change(a, call(model, order, b), call(model, order, x))
    arrived = (b["events"] == 0) & (events != 0)
    assert arrived.sum(axis=1).tolist() == [1, 1, 1]
    edge = dict(b, events=np.where(arrived, events, b["events"]))  # the arrived periods hold the customer's ids
    arrival = call(model, order, edge) - call(model, order, b)
    np.testing.assert_allclose(a.arrival, arrival, atol=2e-6)
    # an arrived id is the same in b' and now: the path gives it nothing, the arrival is all of it
    np.testing.assert_allclose((a.inputs["events"] * arrived).sum(axis=1), arrival, atol=2e-6)
    assert (a.inputs["events"][events == 0] == 0).all()  # padding now: exactly nothing
    assert (a.inputs["plan"] == 0).all() and (a.inputs["numbers"] == 0).all()  # static unchanged


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_several_histories_change_adds_up_with_the_arrival_in_the_padded_one(dtype):
    model = several_model()
    x = several_inputs(dtype)
    then = baselines.from_spec("previous", x, x, layout=input_layout(model))
    b = {SEVERAL[0]: shifted(x[SEVERAL[0]], 1, pad=0.0), SEVERAL[1]: shifted(x[SEVERAL[1]], 1),
         SEVERAL[2]: x[SEVERAL[2]]}
    a = integrated_change(model, x, then, Settings(baseline="previous", steps="auto", tolerance=1e-3),
                          ids=["q0", "q1", "q2"])
    assert_exact_change(a, call(model, SEVERAL, b), call(model, SEVERAL, x))
    arrived = (b[SEVERAL[0]] == 0).all(axis=2) & ~(x[SEVERAL[0]] == 0).all(axis=2)
    assert arrived.sum(axis=1).tolist() == [1, 1, 1]
    edge = dict(b)
    edge[SEVERAL[0]] = np.where(arrived[..., None], 1e-6, b[SEVERAL[0]])
    arrival = call(model, SEVERAL, edge) - call(model, SEVERAL, b)
    np.testing.assert_allclose(a.arrival, arrival, atol=2e-6)
    reference = riemann_ig(model, SEVERAL, x, edge)
    reference[SEVERAL[0]] = reference[SEVERAL[0]] + arrived[..., None] * (arrival / 3)[:, None, None]
    scale = max(np.abs(value).max() for value in a.inputs.values())
    for key in SEVERAL:
        np.testing.assert_allclose(a.inputs[key], reference[key], atol=1e-3 * scale, err_msg=key)
    assert (a.inputs[SEVERAL[0]][1, :2] == 0).all()  # padding now (customer 1's first two quarters)
    assert (a.inputs[SEVERAL[2]] == 0).all()  # the static input did not change


# ------------------------------------------------------------------------------------------- 3. refused


@pytest.mark.parametrize("text, k", [("previous:0", 0), ("previous:x", "x"), ("previous:-2", -2),
                                     (f"previous:{MAX_PREVIOUS + 1}", MAX_PREVIOUS + 1)])
def test_a_bad_number_of_periods_back_is_named(text, k):
    message = BAD_PREVIOUS.format(high=MAX_PREVIOUS, k=k)
    with pytest.raises(AttributionError) as caught:
        Baseline.parse(text)
    assert str(caught.value) == message
    with pytest.raises(AttributionError) as caught:
        Settings(baseline=text)
    assert str(caught.value) == message


@pytest.mark.parametrize("k", [0, -1, True, 1.5])
def test_the_builder_refuses_a_bad_k_with_the_same_words(k):
    inputs = {"static": np.zeros((1, 3)), "temporal": np.ones((1, 5, 2))}
    with pytest.raises(AttributionError) as caught:
        baselines.previous(inputs, k)
    assert str(caught.value) == BAD_PREVIOUS.format(high=MAX_PREVIOUS, k=k)


def test_previous_parses_to_one_period_back_and_k_periods_back():
    assert Baseline.parse("previous").periods_back == 1 and str(Baseline.parse("previous:1")) == "previous"
    assert Baseline.parse("previous:3").periods_back == 3 and str(Baseline.parse("previous:3")) == "previous:3"
    assert Baseline.parse("previous:3").change and not Baseline.parse("previous").data_wide


def test_the_per_input_path_is_refused_when_periods_arrived():
    model = masking_model(0.0, periods=8)
    x = {"static": np.ones((2, 2)), "temporal": masked_history(2, 8, {1: 3})}
    then = baselines.previous(x, 1, input_layout(model))
    with pytest.raises(AttributionError) as caught:
        integrated_change(model, x, then, Settings(baseline="previous", steps=16, path="per-input"))
    assert str(caught.value) == PER_INPUT_CHANGE
    # without arrived periods the per-input path is ordinary IG from the earlier customer
    plain = plain_model()
    y = {"static": np.ones((2, 3)), "temporal": np.random.default_rng(0).normal(size=(2, 5, 2))}
    a = integrated_change(plain, y, baselines.previous(y, 1), Settings(baseline="previous", steps=16, path="per-input"))
    assert a.per_input is not None and a.arrival is None


# ------------------------------------------------------------------------------------------- 4. found wanting


def test_periods_that_left_since_then_still_give_the_earlier_score():
    """An earlier snapshot (bundle:DIR) can hold data in periods that are padding now: a customer with no new
    data whose oldest week has left the window (its weeks right-aligned: then weeks 3-7, now 4-7). The change
    is still f(now) - f(then), f(then) the model's score on the earlier customer as given."""
    model = masking_model(0.0, periods=8)
    then = {"static": np.ones((2, 2)), "temporal": masked_history(2, 8, {0: 3, 1: 1}, seed=5)}
    now = {"static": then["static"], "temporal": then["temporal"].copy()}
    now["temporal"][0, 3] = 0.0  # customer 0: its oldest week left, nothing new came
    now["temporal"][1] = masked_history(1, 8, {0: 0}, seed=6)[0]  # customer 1: new data, nothing left
    now["temporal"][1, :1] = 0.0
    a = integrated_change(model, now, then, Settings(baseline="bundle:earlier", steps=64), ids=["left", "stayed"])
    order = ["static", "temporal"]
    np.testing.assert_allclose(a.baseline_prediction, call(model, order, then), atol=2e-6)
    np.testing.assert_allclose(total(a), call(model, order, now) - call(model, order, then), rtol=1e-3, atol=1e-6)


def test_inputs_in_the_models_order_as_integrated_gradients_takes_them():
    """``integrated_change`` takes "the same arguments as integrated_gradients": lists in the model's input order
    too, also when periods arrived."""
    model = masking_model(0.0, periods=8)
    x = {"static": np.ones((2, 2)), "temporal": masked_history(2, 8, {1: 3})}
    then = baselines.previous(x, 1, input_layout(model))
    settings = Settings(baseline="previous", steps=32)
    by_key = integrated_change(model, x, then, settings)
    listed = integrated_change(model, [x["static"], x["temporal"]], [then["static"], then["temporal"]], settings)
    np.testing.assert_array_equal(listed.temporal, by_key.temporal)
    np.testing.assert_array_equal(listed.baseline_prediction, by_key.baseline_prediction)
