"""Per-period outputs and several heads, explained through one output view (explain.core.outputs).

References are computed here, independently: the model's own outputs at the period, a single-head model built
with the same weights, and the sum of the attributions against f(x) - f(b)."""

import functools

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from explain.core import outputs  # noqa: E402
from explain.core.errors import AttributionError  # noqa: E402
from explain.core.ig import integrated_gradients  # noqa: E402

T, F, S = 8, 3, 4


def _data(n=3, seed=0):
    rng = np.random.default_rng(seed)
    return {"static": rng.normal(size=(n, S)).astype("float32"),
            "temporal": rng.normal(size=(n, T, F)).astype("float32")}


def _zero():
    return {"static": np.zeros((1, S), "float32"), "temporal": np.zeros((1, T, F), "float32")}


def per_period_model(kind="lstm", k=1, seed=1):
    """A per-period churn model: the static input repeated over the periods, a causal sequence layer, a sigmoid
    (or softmax) per period: output (None, T, K). Built once per module for each (kind, k, seed) (the same seed
    gives the same weights; no test changes them): the tests share the model and its views' compiled functions."""
    return _per_period_model(kind, k, seed)


@functools.cache
def _per_period_model(kind, k, seed):
    keras.utils.set_random_seed(seed)
    s = keras.Input((S,), name="static")
    x = keras.Input((T, F), name="temporal")
    if kind == "lstm":
        h = keras.layers.LSTM(5, return_sequences=True)(x)
    elif kind == "gru":
        h = keras.layers.GRU(5, return_sequences=True)(x)
    elif kind == "conv":
        h = keras.layers.Conv1D(5, 3, padding="causal", activation="tanh")(x)
        h = keras.layers.Conv1D(5, 2, padding="causal", dilation_rate=2, activation="tanh")(h)
    elif kind == "bidirectional":
        h = keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True))(x)
    r = keras.layers.RepeatVector(T)(keras.layers.Dense(3, activation="tanh")(s))
    both = keras.layers.Concatenate()([h, r])
    act = "sigmoid" if k == 1 else "softmax"
    out = keras.layers.TimeDistributed(keras.layers.Dense(k, activation=act), name="risk")(both)
    return keras.Model([s, x], out)


def _model_at(model, inputs, p):
    """The model's own output at period p (1-based), (n, K)."""
    return np.asarray(model([inputs["static"], inputs["temporal"]]), np.float64)[:, p - 1, :]


@pytest.mark.parametrize("kind", ["lstm", "gru", "conv"])
def test_causal_per_period_models_explain_each_period_exactly(kind):
    model = per_period_model(kind)
    assert outputs.causal(model) is True
    x = _data()
    for p in (1, 3, 5, T):
        view = outputs.output_view(model, period=p)
        assert view is outputs.output_view(model, period=p)  # kept: the engine's compiled functions reused
        a = integrated_gradients(view, x, _zero(), steps=64)
        np.testing.assert_allclose(a.prediction, _model_at(model, x, p)[:, 0], rtol=1e-5, atol=1e-6)
        zero_out = _model_at(model, {"static": np.zeros((3, S), "float32"),
                                     "temporal": np.zeros((3, T, F), "float32")}, p)[:, 0]
        np.testing.assert_allclose(a.baseline_prediction, zero_out, rtol=1e-5, atol=1e-6)
        total = a.static.sum(axis=1) + a.temporal.sum(axis=(1, 2))
        np.testing.assert_allclose(total, a.prediction - a.baseline_prediction, atol=2e-4)
        later = a.temporal[:, p:, :]
        assert later.size == 0 or np.all(later == 0.0), f"period {p}: later periods {np.abs(later).max()}"
        assert np.any(a.temporal[:, :p, :] != 0.0)


def test_a_per_period_model_given_directly_is_explained_at_the_period_asked():
    """integrated_gradients on the model itself (no view made by the caller): the last period by default, the
    period of output_period= (a keyword or the settings) otherwise; later periods exactly 0."""
    model = per_period_model("gru")
    x = _data()
    last = integrated_gradients(model, x, _zero(), steps=32)
    np.testing.assert_allclose(last.prediction, _model_at(model, x, T)[:, 0], rtol=1e-5, atol=1e-6)
    third = integrated_gradients(model, x, _zero(), steps=32, output_period=3)
    np.testing.assert_allclose(third.prediction, _model_at(model, x, 3)[:, 0], rtol=1e-5, atol=1e-6)
    assert np.all(third.temporal[:, 3:, :] == 0.0) and third.settings.output_period == 3


def test_default_period_is_the_last():
    model = per_period_model("lstm")
    assert outputs.output_view(model) is outputs.output_view(model, period=T)


def test_bidirectional_model_is_not_causal_and_later_periods_matter():
    model = per_period_model("bidirectional")
    assert outputs.causal(model) is False
    x = _data()
    a = integrated_gradients(outputs.output_view(model, period=3), x, _zero(), steps=64)
    np.testing.assert_allclose(a.prediction, _model_at(model, x, 3)[:, 0], rtol=1e-5, atol=1e-6)
    assert np.any(a.temporal[:, 3:, :] != 0.0)
    total = a.static.sum(axis=1) + a.temporal.sum(axis=(1, 2))
    np.testing.assert_allclose(total, a.prediction - a.baseline_prediction, atol=2e-4)


def test_logit_space_of_a_period_is_the_pre_activation():
    model = per_period_model("gru", k=1)
    x = _data()
    a = integrated_gradients(outputs.output_view(model, period=4), x, _zero(), steps=64, space="logit")
    assert a.space_used == "logit"
    p = _model_at(model, x, 4)[:, 0]
    np.testing.assert_allclose(a.prediction, np.log(p / (1 - p)), rtol=1e-4, atol=1e-4)
    total = a.static.sum(axis=1) + a.temporal.sum(axis=(1, 2))
    np.testing.assert_allclose(total, a.prediction - a.baseline_prediction, atol=2e-4)
    assert np.all(a.temporal[:, 4:, :] == 0.0)


def test_softmax_per_period_logits_and_unknown_end_falls_back_to_log_odds():
    model = per_period_model("lstm", k=3)
    x = _data()
    a = integrated_gradients(outputs.output_view(model, period=2), x, _zero(), steps=32, space="logit", target=2)
    assert a.space_used == "logit"
    hidden = keras.Model(model.inputs, model.get_layer("risk").input)
    dense = model.get_layer("risk").layer
    h = np.asarray(hidden([x["static"], x["temporal"]]), np.float64)[:, 1, :]
    logits = h @ np.asarray(dense.kernel, np.float64) + np.asarray(dense.bias, np.float64)
    np.testing.assert_allclose(a.prediction, logits[:, 2], rtol=1e-4, atol=1e-4)
    # an output that does not end in a Dense or Activation: log-odds of the period's output
    s, t = model.inputs
    squeezed = keras.Model([s, t], keras.layers.Lambda(lambda v: v * 1.0)(model.outputs[0]))
    b = integrated_gradients(outputs.output_view(squeezed, period=2), x, _zero(), steps=32, space="logit")
    assert b.space_used == "log-odds"
    q = _model_at(model, x, 2)[:, 0]
    np.testing.assert_allclose(b.prediction, np.log(q / (1 - q)), rtol=1e-4, atol=1e-4)
    assert outputs.causal(squeezed) is None  # a Lambda: not known


def two_head_model(seed=3):
    """Two heads (churn, spend) on one LSTM: built once per module (shared, read only)."""
    return _two_head_model(seed)


@functools.cache
def _two_head_model(seed):
    keras.utils.set_random_seed(seed)
    s = keras.Input((S,), name="static")
    x = keras.Input((T, F), name="temporal")
    h = keras.layers.Concatenate()([keras.layers.LSTM(4)(x), keras.layers.Dense(3, activation="relu")(s)])
    churn = keras.layers.Dense(1, activation="sigmoid", name="churn")(h)
    spend = keras.layers.Dense(1, name="spend")(h)
    return keras.Model([s, x], [churn, spend])


def _single_head(model, name, activation):
    """An independent single-head model with the same weights: the layers copied by hand."""
    s = keras.Input((S,), name="static")
    x = keras.Input((T, F), name="temporal")
    lstm = keras.layers.LSTM(4)
    dense = keras.layers.Dense(3, activation="relu")
    head = keras.layers.Dense(1, activation=activation)
    out = head(keras.layers.Concatenate()([lstm(x), dense(s)]))
    single = keras.Model([s, x], out)
    originals = [layer for layer in model.layers if layer.weights]
    by_type = {type(layer).__name__: layer for layer in originals if layer.name not in ("churn", "spend")}
    lstm.set_weights(by_type["LSTM"].get_weights())
    dense.set_weights(by_type["Dense"].get_weights())
    head.set_weights(model.get_layer(name).get_weights())
    return single


@pytest.mark.parametrize("name,activation,space", [("churn", "sigmoid", "logit"), ("spend", None, "output"),
                                                   ("spend", None, "logit")])
def test_each_head_by_name_equals_a_single_head_model(name, activation, space):
    model = two_head_model()
    assert [h.name for h in outputs.heads(model)] == ["churn", "spend"]
    x = _data()
    got = integrated_gradients(outputs.output_view(model, name), x, _zero(), steps=32, space=space)
    want = integrated_gradients(_single_head(model, name, activation), x, _zero(), steps=32, space=space)
    assert got.space_used == want.space_used == ("output" if space == "output" else "logit")
    np.testing.assert_allclose(got.prediction, want.prediction, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.static, want.static, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got.temporal, want.temporal, rtol=1e-4, atol=1e-6)


def test_bad_head_and_period_say_what_is_valid():
    model = two_head_model()
    with pytest.raises(AttributionError, match="'churn', 'spend'"):
        outputs.head_of(model, "value")
    per = per_period_model("lstm")
    head = outputs.head_of(per)
    labels = [f"2025-{m:02d}" for m in range(1, T + 1)]
    assert outputs.period_number(head, None, labels) == T
    assert outputs.period_number(head, "5", labels) == 5
    assert outputs.period_number(head, "2025-03", labels) == 3
    with pytest.raises(AttributionError, match="from 1 to 8"):
        outputs.period_number(head, "9", labels)
    with pytest.raises(AttributionError, match="'2025-01'"):
        outputs.period_number(head, "March", labels)
    with pytest.raises(AttributionError, match="not one per period"):
        outputs.period_number(outputs.head_of(model, "churn"), 3, labels)


def test_a_single_output_model_is_its_own_view():
    model = two_head_model()
    single = keras.Model(model.inputs, model.outputs[0])
    assert outputs.output_view(single) is single and not outputs.needs_view(single)
    assert outputs.needs_view(model) and outputs.needs_view(per_period_model("gru"))


def test_settings_tell_heads_and_periods_apart_and_leave_other_models_alone():
    from explain.core.settings import Settings

    assert "output_period" not in Settings().identity() and "output" not in Settings().identity()
    five = Settings.from_strings({"output_period": "5", "output": "churn"})
    assert five.output_period == 5 and five.output == "churn"
    assert Settings.from_strings(five.to_strings()) == five
    assert Settings(output_period="2025-05").output_period == "2025-05"  # a label, resolved against the bundle
    assert five.key() != five.replace(output_period=6).key() != five.replace(output="spend").key()
    with pytest.raises(AttributionError, match="period number"):
        Settings(output_period=0)


def test_padded_histories_are_cut_and_the_period_is_still_the_one_asked():
    """Masking + per-period LSTM: the engine's padding cut drops leading periods; the view picks its period from
    the end, so the cut calls explain the same period (outputs equal the model's; zeros after it)."""
    from explain.core.engine import cut_notes

    keras.utils.set_random_seed(4)
    long_t = 24
    s = keras.Input((S,), name="static")
    t = keras.Input((long_t, F), name="temporal")
    h = keras.layers.LSTM(4, return_sequences=True)(keras.layers.Masking(0.0)(t))
    z = keras.layers.Dense(1)(h) + keras.ops.expand_dims(keras.layers.Dense(1)(s), 1)  # any number of periods
    model = keras.Model([s, t], keras.layers.Activation("sigmoid")(z))
    rng = np.random.default_rng(3)
    x = {"static": rng.normal(size=(6, S)).astype("float32"),
         "temporal": rng.normal(size=(6, long_t, F)).astype("float32")}
    x["temporal"][:, :12] = 0.0  # twelve periods of padding at the start
    base = {"static": np.zeros((1, S), "float32"),
            "temporal": np.concatenate([np.zeros((1, 12, F)), np.full((1, long_t - 12, F), 0.5)], 1).astype("float32")}
    p = 18
    view = outputs.output_view(model, period=p)
    a = integrated_gradients(view, x, base, steps=32)
    full = np.asarray(model([x["static"], x["temporal"]]), np.float64)[:, p - 1, 0]
    np.testing.assert_allclose(a.prediction, full, rtol=1e-5, atol=1e-6)
    assert np.all(a.temporal[:, p:] == 0.0) and np.all(a.temporal[:, :12] == 0.0)
    total = a.static.sum(axis=1) + a.temporal.sum(axis=(1, 2))
    np.testing.assert_allclose(total, a.prediction - a.baseline_prediction, atol=2e-4)
    assert "calls cut" in cut_notes(view)
    logit = integrated_gradients(view, x, base, steps=32, space="logit")  # an Activation at the end: its input
    assert logit.space_used == "logit"
    np.testing.assert_allclose(logit.prediction, np.log(full / (1 - full)), rtol=1e-4, atol=1e-4)


def test_a_two_dimensional_per_period_output_is_read_per_period_when_a_period_is_asked():
    model = per_period_model("lstm")
    flat = keras.Model(model.inputs, keras.layers.Reshape((T,))(model.outputs[0]))  # (None, T)
    assert not outputs.needs_view(flat)
    x = _data()
    full = np.asarray(model([x["static"], x["temporal"]]), np.float64)[:, :, 0]
    for p in (1, 4, T):  # the last too: a slice from the end up to the end
        a = integrated_gradients(outputs.output_view(flat, period=p), x, _zero(), steps=32)
        np.testing.assert_allclose(a.prediction, full[:, p - 1], rtol=1e-5, atol=1e-6)
        assert np.all(a.temporal[:, p:] == 0.0)
