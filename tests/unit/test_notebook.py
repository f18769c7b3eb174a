"""Three lines in a notebook (explain.notebook): exactly what the README shows, on models unlike the demo, against
IG computed by hand."""

from __future__ import annotations

import keras
import numpy as np
import pandas as pd
import pytest

import explain
from explain.core.errors import ExplainError
from explain.notebook import BASELINE_ARRAYS, NOT_TWO_INPUTS

N, S, T, F = 6, 3, 5, 2


def linear(order="temporal first"):
    """sigmoid-free linear model: out = s @ w_s + sum(t * w_t): its IG against any baseline is (x - b) * w."""
    s_in, t_in = keras.Input((S,), name="account"), keras.Input((T, F), name="history")
    flat = keras.layers.Flatten()(t_in)
    both = keras.layers.Concatenate()([s_in, flat])
    out = keras.layers.Dense(1, use_bias=True, name="lin")(both)
    inputs = [t_in, s_in] if order == "temporal first" else [s_in, t_in]
    model = keras.Model(inputs, out)
    rng = np.random.default_rng(1)
    w = rng.normal(size=(S + T * F, 1)).astype("float32")
    model.get_layer("lin").set_weights([w, np.array([0.3], "float32")])
    return model, w[:S, 0].astype(np.float64), w[S:, 0].reshape(T, F).astype(np.float64)


def data():
    rng = np.random.default_rng(2)
    return rng.normal(size=(N, S)).astype("float32"), rng.normal(size=(N, T, F)).astype("float32")


def test_three_lines_draw_a_heatmap_with_the_names_given_and_a_long_frame():
    model, w_s, w_t = linear()
    static, temporal = data()
    a = explain.explain(model, [temporal, static], temporal_features=["calls", "usage"],
                        periods=[f"2025-0{m}" for m in range(1, 6)])
    fig = a.heatmap(0)
    heat = next(t for t in fig.data if t.type == "heatmap")
    assert list(heat.y) == ["calls", "usage"] or list(heat.x) == ["calls", "usage"]
    assert "2025-01" in [str(v) for v in (list(heat.x) + list(heat.y))]
    frame = a.to_frame()
    assert list(frame.columns) == ["customer_id", "input", "period", "feature", "value", "attribution"]
    assert len(frame) == N * (S + T * F)
    # exact IG of a linear model against the mean baseline: (x - mean) * w
    mean_s, mean_t = static.astype(np.float64).mean(0), temporal.astype(np.float64).reshape(-1, F).mean(0)
    np.testing.assert_allclose(a.static, (static - mean_s) * w_s, atol=1e-5)
    np.testing.assert_allclose(a.temporal, (temporal - mean_t) * w_t, atol=1e-5)
    rows = frame[(frame.customer_id == a.ids[1]) & (frame.input == "temporal")]
    np.testing.assert_allclose(rows.attribution.to_numpy(), a.temporal[1].reshape(-1), atol=1e-12)
    assert a.bars(1).data and "Explanation(6 customer(s)" in repr(a) and "<table" in a._repr_html_()


def test_a_dataframe_names_the_static_features_and_a_dict_takes_any_order():
    model, w_s, _ = linear(order="static first")
    static, temporal = data()
    frame = pd.DataFrame(static, columns=["tenure", "plan_price", "age"], index=[f"K{i}" for i in range(N)])
    a = explain.explain(model, {"history": temporal, "account": frame}, baseline="zero")
    assert a.static_features == ["tenure", "plan_price", "age"] and a.ids[0] == "K0"
    np.testing.assert_allclose(a.static, static * w_s, atol=1e-5)
    assert np.all(np.abs(a.delta) < 1e-4)


def test_baseline_arrays_one_customer_and_a_background_sample():
    model, w_s, w_t = linear()
    static, temporal = data()
    b_s, b_t = np.full(S, 0.5), np.full((T, F), -0.25)
    one = explain.explain(model, [temporal, static], baseline=[b_s, b_t])
    np.testing.assert_allclose(one.static, (static - b_s) * w_s, atol=1e-5)
    np.testing.assert_allclose(one.temporal, (temporal - b_t) * w_t, atol=1e-5)
    # expected gradients over K baselines of a linear model: (x - mean of the sample) * w
    k_s, k_t = static[:3].astype(np.float64), temporal[:3].astype(np.float64)
    sample = explain.explain(model, [temporal, static], baseline={"static": k_s, "temporal": k_t})
    np.testing.assert_allclose(sample.static, (static - k_s.mean(0)) * w_s, atol=1e-5)
    np.testing.assert_allclose(sample.temporal, (temporal - k_t.mean(0)) * w_t, atol=1e-5)


@pytest.mark.parametrize("inputs, baseline, message", [
    ("not inputs", "mean", NOT_TWO_INPUTS.split("{")[0]),
    ("three", "mean", "3 input(s) of rank(s) [2, 3, 3]"),
    ("ok", 7, BASELINE_ARRAYS.split("{")[0]),
    ("ok", [np.zeros(S)], BASELINE_ARRAYS.split("{")[0]),
])
def test_clear_errors(inputs, baseline, message):
    model, _, _ = linear()
    static, temporal = data()
    given = {"not inputs": "static.csv", "three": [static, temporal, temporal], "ok": [temporal, static]}[inputs]
    with pytest.raises(ExplainError, match=None) as info:
        explain.explain(model, given, baseline=baseline)
    assert message in str(info.value)


def test_explain_customers_takes_one_id_as_text():
    model, _, _ = linear()
    static, temporal = data()
    bundle = explain.Bundle.from_objects(model, static, temporal, ids=[f"K{i:04d}" for i in range(N)])
    a = explain.explain_customers(bundle, "K0003", explain.Settings(steps=8))
    assert a.n_customers == 1
