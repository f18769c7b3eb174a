"""The Diagnostics page's numbers (explain/analysis/diagnostics.py), on models unlike the demo."""

import dataclasses

import numpy as np
import pytest

from explain.analysis import diagnostics
from explain.bundle.load import Bundle
from explain.core import baselines
from explain.core.errors import Stopped
from explain.core.quadrature import METHODS
from explain.core.settings import Settings
from tests.support import models as M


def bundle_of(model, n=12, seed=5):
    data = M.data(n=n, seed=seed)
    bundle = Bundle.from_arrays(model, data["static"], data["temporal"], ids=[f"D{i:02d}" for i in range(n)])
    return dataclasses.replace(bundle, labels=np.array([0, 1] * (n // 2)), label_name="y", positive_label=1)


@pytest.fixture(scope="module")
def linear():
    model, ws, wt = M.linear_model(seed=2, temporal_first=True)
    return bundle_of(model), ws, wt


@pytest.fixture(scope="module")
def lstm():
    return bundle_of(M.lstm_model(seed=3, units=4))


def test_sweep_on_a_linear_model_is_exact_for_every_rule_and_step_count(linear):
    bundle, ws, wt = linear
    base = baselines.mean(bundle.data())
    x = bundle.inputs_for(["D03"])
    gap = float((x["static"][0] - base["static"][0]) @ ws + ((x["temporal"][0] - base["temporal"][0]) * wt).sum())
    sweep = diagnostics.delta_sweep(bundle, "D03", Settings(baseline="mean"), steps=(4, 8, 16))
    assert sweep["steps"] == [4, 8, 16] and set(sweep["deltas"]) == set(METHODS)
    assert sweep["gap"] == pytest.approx(gap, rel=1e-4)
    for method, deltas in sweep["deltas"].items():
        assert len(deltas) == 3
        assert max(abs(d) for d in deltas) < 1e-4 * abs(gap), method  # constant gradient: every rule is exact


def test_sweep_deltas_are_those_of_each_rule_at_each_step_count(lstm):
    from explain.analysis.explainer import explain_customers

    request = Settings(baseline="zero", space="logit")
    sweep = diagnostics.delta_sweep(lstm, "D01", request, steps=(4, 64))
    for method in METHODS:
        for n, delta in zip((4, 64), sweep["deltas"][method]):
            alone = explain_customers(lstm, ["D01"], dataclasses.replace(request, steps=n, method=method))
            assert delta == pytest.approx(float(alone.delta[0]), abs=1e-9)
    assert len({round(d[0], 12) for d in sweep["deltas"].values()}) > 1  # the rules differ at 4 steps
    assert sweep["space"] == "logit"


def test_sweep_stops_between_computations_when_should_stop_says_so(linear):
    bundle, *_ = linear
    calls = []
    diagnostics.delta_sweep(bundle, "D00", Settings(), steps=(4, 8), should_stop=lambda: calls.append(1) or False)
    assert len(calls) >= 2 * len(METHODS)  # before each computation, and between its chunks
    asked = len(calls)
    for limit in (1, asked // 2, asked):
        calls.clear()
        with pytest.raises(Stopped):
            diagnostics.delta_sweep(bundle, "D00", Settings(), steps=(4, 8),
                                    should_stop=lambda: calls.append(1) or len(calls) >= limit)
        assert len(calls) == limit  # nothing more was computed after it said stop


def test_path_profile_runs_from_the_baselines_prediction_to_the_customers(lstm):
    profile = diagnostics.path_profile(lstm, "D02", Settings(baseline="median"), points=9)
    x = lstm.inputs_for(["D02"])
    base = baselines.median(lstm.data())
    f = lambda inputs: float(lstm.predict(inputs)[0, 0])  # noqa: E731
    np.testing.assert_allclose(profile["alphas"], np.linspace(0, 1, 9))
    assert profile["prediction"][0] == pytest.approx(f(base), abs=1e-5)
    assert profile["prediction"][-1] == pytest.approx(f(x), abs=1e-5)


def test_path_profile_of_a_linear_model_has_constant_gradients(linear):
    bundle, ws, wt = linear
    profile = diagnostics.path_profile(bundle, "D04", Settings(baseline="zero"), points=5)
    np.testing.assert_allclose(profile["grad_norm_static"], np.linalg.norm(ws), rtol=1e-5)
    np.testing.assert_allclose(profile["grad_norm_temporal"], np.linalg.norm(wt), rtol=1e-5)


def test_the_shown_baseline_of_sample_k_is_the_mean_of_the_k_sampled_customers(lstm):
    shown = diagnostics.shown_baseline(lstm, "D00", Settings(baseline="sample:4", seed=7))
    drawn = baselines.sample(lstm.data(), 4, seed=7)
    np.testing.assert_allclose(shown["static"], drawn["static"][0].mean(axis=0))
    np.testing.assert_allclose(shown["temporal"], drawn["temporal"][0].mean(axis=0))
    flat = diagnostics.shown_baseline(lstm, "D05", Settings(baseline="flat"))
    history = lstm.inputs_for(["D05"])["temporal"][0].astype(np.float64)
    np.testing.assert_allclose(flat["temporal"], np.broadcast_to(history.mean(axis=0), history.shape), rtol=1e-6)
    assert shown["static"].shape == (M.S,) and flat["temporal"].shape == (M.T, M.F)


def test_model_layers_count_every_parameter(lstm):
    table, totals = diagnostics.model_layers(lstm.model)
    assert list(table.columns) == diagnostics.LAYER_COLUMNS
    assert list(table["layer"]) == [layer.name for layer in lstm.model.layers]
    assert table["params"].sum() == totals["total"] == lstm.model.count_params()
    dense = table[table["type"] == "Dense"]
    assert sorted(dense["params"]) == sorted([M.S * 8 + 8, (8 + 4) * 1 + 1])  # Dense(8) on S inputs; the head
    assert totals["trainable"] + totals["non-trainable"] == totals["total"]
    assert "batch" in table[table["type"] == "LSTM"]["output shape"].iloc[0]


def test_detected_inputs_follow_the_models_input_order(linear, lstm):
    roles, summary = diagnostics.detected_inputs(linear[0].model)  # temporal input first
    assert dict(zip(roles["role"], roles["position"])) == {"static": 1, "temporal": 0}
    assert dict(zip(roles["role"], roles["input name"])) == {"static": "features", "temporal": "history"}
    roles, summary = diagnostics.detected_inputs(lstm.model)
    assert dict(zip(roles["role"], roles["position"])) == {"static": 0, "temporal": 1}
    assert summary["outputs (K)"].iloc[0] == 1


@pytest.mark.parametrize("steps", [16, "auto"])
def test_integration_points_are_those_of_the_customers_attribution(lstm, steps):
    """The analysis call resolves the bundle's customer, baseline and settings as explain_customers does:
    the same f(x), f(b), delta and points spent; the words say what the chart shows."""
    from explain.analysis.explainer import explain_customers

    request = Settings(baseline="mean", steps=steps, tolerance=1e-3)
    found = diagnostics.integration_points(lstm, "D05", request, alphas=9)
    a = explain_customers(lstm, ["D05"], request)
    leg = found.legs["joint"]
    assert (leg.start, leg.end) == (pytest.approx(a.baseline_prediction[0]), pytest.approx(a.prediction[0]))
    assert leg.delta == pytest.approx(float(a.delta[0]), abs=1e-9)
    assert (leg.final_points, leg.gradient_points, leg.forward_points) == (
        a.steps[0], a.gradient_points[0], a.forward_points[0])
    assert leg.values[0] == pytest.approx(leg.start, abs=1e-6) and leg.values[-1] == pytest.approx(leg.end, abs=1e-6)
    text = diagnostics.points_text(found)
    assert f"{leg.final_points} points in {leg.panels} panel" in text and f"{leg.gradient_points} gradient" in text
    if steps == "auto":
        assert "where the prediction changes along the path, the engine placed more points" in text
    else:
        assert "the same 16 points of the gausslegendre rule for every customer" in text


@pytest.mark.parametrize("spec", ["mean", "sample:4", "flat", "customer:D03", "zero"])
def test_the_shown_baseline_read_from_a_result_is_the_one_computed(lstm, spec):
    """The Customer page reads the baseline from the attribution (``Attribution.baselines``: the arrays IG
    integrated from) instead of computing it a second time: the same numbers, for a shared and a per-customer
    baseline and a distribution of K."""
    from explain.analysis.explainer import explain_customers

    settings = Settings(baseline=spec, seed=7, steps=8)
    result = explain_customers(lstm, ["D01", "D05", "D07"], settings)
    for row, cid in enumerate(["D01", "D05", "D07"]):
        computed = diagnostics.shown_baseline(lstm, cid, settings)
        read = diagnostics.shown_baseline(lstm, cid, settings, attribution=result, row=row)
        assert read.keys() == computed.keys() == {"static", "temporal"}
        for key in read:
            np.testing.assert_array_equal(read[key], computed[key])
