"""Faithfulness checks: exact curves and occlusion on linear models, a randomisation whose answer is
known, the demo's figures against random orders, and the command line's JSON."""

import json
from pathlib import Path

import keras
import numpy as np
import pandas as pd
import pytest

import explain
from explain.analysis import faithfulness as fa
from explain.bundle.load import load_bundle
from explain.cli import main
from tests.support.models import F, S, T, data, linear_model, lstm_model

DEMO = Path(__file__).resolve().parents[3] / "bundles" / "demo"
CELLS = S + T * F


def linear_attribution(x, b, ws, wt):
    """The exact IG of the linear model, flattened: (x - b) * w."""
    return fa.flatten((x["static"] - b["static"]) * ws, (x["temporal"] - b["temporal"]) * wt)


@pytest.fixture(scope="module")
def linear():
    return linear_model(seed=3)


# ----------------------------------------------------------------------------- helpers


def test_rank_correlation_matches_pandas_spearman():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 30))
    b = a + rng.normal(scale=1.0, size=a.shape)
    a[2, :10] = a[2, 0]  # ties
    b[3] = np.round(b[3])  # more ties
    got = fa.rank_correlation(a, b)
    for i in range(6):
        expected = pd.DataFrame({"a": a[i], "b": b[i]}).corr(method="spearman").loc["a", "b"]
        assert got[i] == pytest.approx(expected, abs=1e-12)
    assert fa.rank_correlation(np.arange(5.0), -np.arange(5.0)**3)[0] == pytest.approx(-1.0)
    assert np.isnan(fa.rank_correlation(np.ones(5), np.arange(5.0))[0])  # constant row: undefined


@pytest.mark.parametrize("cells, points", [(0, 1), (23, 24), (100, 101), (1010, 101), (5000, 101)])
def test_k_grid_spans_zero_to_every_cell(cells, points):
    k = fa.k_grid(cells)
    assert k.size == points and k[0] == 0 and k[-1] == cells
    assert np.all(np.diff(k) > 0)


# ----------------------------------------------------------------------------- curves (linear model)


def test_deletion_and_insertion_are_exact_and_optimal_on_a_linear_model(linear):
    model, ws, wt = linear
    rng = np.random.default_rng(5)
    b = {"static": rng.normal(size=(1, S)), "temporal": rng.normal(size=(1, T, F))}
    # every cell moves the prediction up: x - b has the sign of w, so IG's |attribution| order
    # is the order of the largest contributions, and no other order can do better
    x = {"static": (b["static"] + np.sign(ws) * rng.uniform(0.1, 2.0, size=(8, S))).astype("float32"),
         "temporal": (b["temporal"] + np.sign(wt) * rng.uniform(0.1, 2.0, size=(8, T, F))).astype("float32")}
    a = explain.integrated_gradients(model, x, b, steps=4)
    exact = linear_attribution(x, b, ws, wt)
    np.testing.assert_allclose(fa.flatten(a.static, a.temporal), exact, rtol=1e-5, atol=1e-6)
    random = np.stack([rng.permuted(np.tile(np.arange(CELLS, dtype=float), (8, 1)), axis=1) for _ in range(4)])
    curves = fa.perturbation_curves(model, x, b, {"ig": np.abs(fa.flatten(a.static, a.temporal)), "random": random})

    fx = model.predict([x["static"], x["temporal"]], verbose=0)[:, 0]
    top = -np.sort(-exact, axis=1)  # contributions, largest first
    removed = np.concatenate([np.zeros((8, 1)), np.cumsum(top, axis=1)], axis=1)  # (n, D + 1)
    deletion, insertion = curves.predictions["deletion"]["ig"], curves.predictions["insertion"]["ig"]
    np.testing.assert_allclose(deletion, fx[:, None] - removed, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(insertion, fx[:, None] - removed[:, -1:] + removed, rtol=1e-4, atol=1e-4)
    assert np.all(np.diff(deletion, axis=1) <= 1e-5) and np.all(np.diff(insertion, axis=1) >= -1e-5)
    # optimal: no random order's curve is ever below (deletion) or above (insertion) IG's
    assert np.all(curves.predictions["deletion"]["random"] >= deletion[None] - 1e-4)
    assert np.all(curves.predictions["insertion"]["random"] <= insertion[None] + 1e-4)
    assert curves.aopc("deletion", "ig") > curves.aopc("deletion", "random").max()
    assert curves.aopc("insertion", "ig") > curves.aopc("insertion", "random").max()
    # the share of the gap runs from 1 to 0 (deletion) and 0 to 1 (insertion)
    assert curves.share("deletion", "ig")[[0, -1]] == pytest.approx([1.0, 0.0], abs=1e-5)
    assert curves.share("insertion", "ig")[[0, -1]] == pytest.approx([0.0, 1.0], abs=1e-5)
    # AOPC of the deletion curve = the mean over customers of the area, weighed by their gap
    share = 1.0 - (deletion - deletion[:, -1:]) / (deletion[:, :1] - deletion[:, -1:])
    weights = np.abs(deletion[:, 0] - deletion[:, -1])
    area = np.trapezoid(share, np.arange(CELLS + 1) / CELLS, axis=1)
    assert curves.aopc("deletion", "ig") == pytest.approx(np.average(area, weights=weights), rel=1e-6)


def test_curves_do_not_depend_on_the_chunk_size_or_direction_of_each_customer(monkeypatch):
    model, ws, wt = linear_model(seed=3, temporal_first=True)  # inputs in the other order
    x = data(7, seed=4)  # mixed signs: some customers above the baseline, some below
    b = {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}
    scores = {"ig": np.abs(linear_attribution(x, b, ws, wt))}
    k = [0, 1, 5, 11, CELLS]
    whole = fa.perturbation_curves(model, x, b, scores, k=k)
    monkeypatch.setattr(fa, "ROWS_PER_CALL", 11)  # two customers per forward call, and row chunks of 11
    chunked = fa.perturbation_curves(model, x, b, scores, k=k)
    for kind in fa.KINDS:
        np.testing.assert_allclose(chunked.predictions[kind]["ig"], whole.predictions[kind]["ig"], rtol=1e-6)
    exact = linear_attribution(x, b, ws, wt)
    order = np.argsort(-np.abs(exact), axis=1, kind="stable")
    fx = model.predict([x["temporal"], x["static"]], verbose=0)[:, 0]
    for j, kk in enumerate(k):
        gone = np.take_along_axis(exact, order[:, :kk], axis=1).sum(axis=1)
        np.testing.assert_allclose(whole.predictions["deletion"]["ig"][:, j], fx - gone, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(whole.gap, exact.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_a_distribution_baseline_is_replaced_by_its_mean(linear):
    model, ws, wt = linear
    x = data(3)
    rng = np.random.default_rng(2)
    b = {"static": rng.normal(size=(1, 4, S)), "temporal": rng.normal(size=(1, 4, T, F))}  # sample:K, K = 4
    curves = fa.perturbation_curves(model, x, b, {"ig": np.ones((3, CELLS))}, k=[0, CELLS])
    mean = {"static": b["static"].mean(axis=1), "temporal": b["temporal"].mean(axis=1)}
    expected = model.predict([np.repeat(mean["static"], 3, 0), np.repeat(mean["temporal"], 3, 0)], verbose=0)[:, 0]
    np.testing.assert_allclose(curves.predictions["deletion"]["ig"][:, -1], expected, rtol=1e-5)


# ----------------------------------------------------------------------------- occlusion


def test_occlusion_equals_ig_on_a_linear_model(linear, monkeypatch):
    model, ws, wt = linear
    x = data(5, seed=9)
    b = {"static": np.full((1, S), 0.3), "temporal": np.full((1, T, F), -0.2)}
    a = explain.integrated_gradients(model, x, b, steps=4)
    occ = fa.occlusion(model, x, b, a)
    per_period = ((x["temporal"] - b["temporal"]) * wt).sum(axis=2)  # (n, T), independent of IG
    per_feature = np.concatenate([(x["static"] - b["static"]) * ws, ((x["temporal"] - b["temporal"]) * wt).sum(1)], 1)
    np.testing.assert_allclose(occ.change["period"], per_period, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(occ.change["feature"], per_feature, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(occ.ig_total["period"], per_period, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(occ.ig_total["feature"], per_feature, rtol=1e-4, atol=1e-5)
    assert occ.spearman("period") == pytest.approx(1.0) and occ.spearman("feature") == pytest.approx(1.0)
    assert len(occ.groups["period"]) == T and len(occ.groups["feature"]) == S + F
    monkeypatch.setattr(fa, "VALUES_PER_CHUNK", 1)  # one customer per forward call
    chunked = fa.occlusion(model, x, b, a)
    for by in ("period", "feature"):
        np.testing.assert_allclose(chunked.change[by], occ.change[by], rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------- randomisation


def scaled_linear_model():
    """f = 2 z + 0.5 with z linear in the inputs; the top layer's own initializers give f = z."""
    s_in, t_in = keras.Input((S,)), keras.Input((T, F))
    z = keras.layers.Add()([keras.layers.Dense(1, name="static_part")(s_in),
                            keras.layers.Dense(1, use_bias=False, name="temporal_part")(keras.layers.Flatten()(t_in))])
    scale = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros", name="scale")
    model = keras.Model([s_in, t_in], scale(z))
    scale.set_weights([np.array([[2.0]]), np.array([0.5])])
    return model


def test_randomisation_of_a_rescaling_top_layer_does_not_fall_and_says_so():
    model = scaled_linear_model()
    before = [w.copy() for w in model.get_weights()]
    x = data(6, seed=2)
    b = {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}
    fx = model.predict([x["static"], x["temporal"]], verbose=0)[:, 0]

    def attribute(m):
        return explain.integrated_gradients(m, x, b, steps=4)

    result = fa.model_randomisation(model, x, b, attribute, seed=1, repeats=2)
    assert result.layers[0] == "scale" and set(result.layers[1:]) == {"static_part", "temporal_part"}
    # the top layer re-initialised by its own initializers (ones, zeros): f' = z = (f - 0.5) / 2,
    # attributions halved, so every ranking is unchanged
    assert result.prediction_change[0] == pytest.approx(np.abs((fx - 0.5) / 2 - fx).mean(), rel=1e-5)
    np.testing.assert_allclose(result.spearman_runs[:, 0], 1.0)
    np.testing.assert_allclose(result.spearman_abs_runs[:, 0], 1.0)
    assert not result.falls and not result.falls_abs and "does NOT fall below 0.5" in result.verdict()
    # the model itself is never changed
    for old, new in zip(before, model.get_weights()):
        np.testing.assert_array_equal(old, new)
    np.testing.assert_array_equal(model.predict([x["static"], x["temporal"]], verbose=0)[:, 0], fx)


def test_randomisation_is_seeded_and_falls_for_a_trained_lstm():
    model = lstm_model(seed=4, temporal_first=True)
    x = data(12, seed=3)
    b = {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}

    def attribute(m):
        return explain.integrated_gradients(m, x, b, steps=16)

    before = model.get_weights()
    first = fa.model_randomisation(model, x, b, attribute, seed=7, repeats=2)
    for old, new in zip(before, model.get_weights()):  # the model is left as it was (on JAX too: its re-run)
        np.testing.assert_array_equal(old, new)
    again = fa.model_randomisation(model, x, b, attribute, seed=7, repeats=2)
    np.testing.assert_allclose(first.spearman_runs, again.spearman_runs)
    assert first.layers == [layer.name for layer in reversed(model.layers) if layer.trainable_weights]
    # different seeds draw different weights
    assert not np.allclose(first.spearman_runs[0], first.spearman_runs[1])
    # with every layer re-initialised the signed attributions no longer follow the original ones
    assert abs(first.spearman[-1]) < 0.5


# ----------------------------------------------------------------------------- the demo


@pytest.fixture(scope="module")
def demo():
    return load_bundle(DEMO)


@pytest.fixture(scope="module")
def demo_report(demo):
    before = [w.copy() for w in demo.model.get_weights()]
    result = fa.run(demo, customers=200, seed=0)
    return result, before


def test_demo_ig_deletion_falls_faster_than_random_orders(demo_report):
    result, _ = demo_report
    curves = result.curves
    assert len(result.ids) == 200 and curves.cells == 9 + 12 * 6
    for kind in fa.KINDS:
        ig_area, random = curves.aopc(kind, "ig"), curves.aopc(kind, "random")
        assert random.size == fa.DEFAULT_RANDOM_ORDERS
        assert ig_area > random.max() + 0.2, (kind, ig_area, random)
        assert curves.aopc(kind, "gradient_x_input") > random.max() + 0.2
    # the IG deletion curve is below every random order's over the first half of the cells
    # (near the end every curve is within noise of 0)
    first_half = (curves.fractions > 0) & (curves.fractions <= 0.5)
    ig_share, random_share = curves.share("deletion", "ig"), curves.share("deletion", "random")
    assert np.all(ig_share[first_half] < random_share[:, first_half].min(axis=0))


def test_demo_randomisation_falls_at_the_first_layer_and_leaves_the_model_alone(demo, demo_report):
    result, before = demo_report
    rnd = result.randomisation
    assert rnd.layers[0] == "churn"  # the output layer first
    assert rnd.spearman[0] < fa.FALLS_BELOW and rnd.falls
    assert "below 0.5" in rnd.verdict()
    for old, new in zip(before, demo.model.get_weights()):
        np.testing.assert_array_equal(old, new)


def test_demo_occlusion_agrees_with_ig(demo_report):
    occ = demo_report[0].occlusion
    assert occ.spearman("period") > 0.8 and occ.spearman("feature") > 0.8


# ----------------------------------------------------------------------------- command line


def test_cli_writes_every_key(demo, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(["faithfulness", "--bundle", str(DEMO), "--customers", "12", "--random-orders", "2", "--repeats", "1",
                 "--steps", "16", "--seed", "3", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert set(doc) == {"settings", "customers", "aopc", "curves", "mean_abs_gap", "randomisation", "occlusion",
                        "metrics", "random_runs", "metric_settings", "planted", "verdict", "seconds"}
    assert doc["settings"] == {**doc["settings"], "steps": 16, "customers": 12, "seed": 3, "random_orders": 2,
                               "cells": 81, "curve_points": 82}
    assert len(doc["customers"]) == 12
    for kind in ("deletion", "insertion"):
        aopc = doc["aopc"][kind]
        assert set(aopc) == {"ig", "ig_output", "gradient_x_input", "gradient_x_input_output", "random",
                             "random_output", "random_runs", "random_std"}
        assert aopc["random"] == pytest.approx(np.mean(aopc["random_runs"]), abs=1e-5)
        assert aopc["ig_output"] == pytest.approx(aopc["ig"] * doc["mean_abs_gap"], rel=1e-3)
        assert len(doc["curves"][kind]["ig"]) == 82
    assert doc["curves"]["deletion"]["ig"][0] == pytest.approx(1.0) and doc["curves"]["insertion"]["ig"][0] == 0
    layers = doc["randomisation"]["layers"]
    assert [layer["layer"] for layer in layers] == ["churn", "joint_dense", "temporal_lstm", "static_dense"]
    assert layers[-1]["reinitialised"] == ["churn", "joint_dense", "temporal_lstm", "static_dense"]
    assert set(layers[0]) == {"reinitialised", "layer", "spearman", "spearman_abs", "spearman_runs",
                              "spearman_abs_runs", "prediction_change"}
    assert {"repeats", "input_only_abs", "falls_below", "falls", "falls_abs", "verdict"} <= set(doc["randomisation"])
    assert doc["randomisation"]["falls"] == (layers[0]["spearman"] < 0.5)
    for by in ("period", "feature"):
        assert set(doc["occlusion"][by]) == {"spearman", "pooled_spearman", "groups"}
    assert doc["occlusion"]["period"]["groups"] == list(demo.periods)
    assert doc["occlusion"]["feature"]["groups"] == [*demo.static_labels, *demo.temporal_labels]
    assert {"attributions", "curves", "metrics", "occlusion", "randomisation", "total"} == set(doc["seconds"])
    assert "AOPC deletion" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--out", "report.txt"], fa.NOT_JSON.split("{")[0]),
    (["--customers", "0", "--out", "r.json"], fa.BAD_COUNT.format(name="customers", value=0, what="x").split("(")[0]),
    (["--random-orders", "0", "--out", "r.json"], "random_orders=0 must be a positive integer"),
])
def test_cli_bad_settings_exit_2_with_a_message(tmp_path, capsys, args, message):
    args = [a if not a.endswith((".txt", ".json")) else str(tmp_path / a) for a in args]
    assert main(["faithfulness", "--bundle", str(DEMO), "--steps", "8", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written


# ----------------------------------------------------------------------------- figures


def test_figures_carry_the_numbers_and_escape_names():
    from explain.plots import diagnostics as diagnostic_figures

    fractions = np.linspace(0, 1, 6)
    random = np.random.default_rng(0).uniform(size=(3, 6))
    fig = diagnostic_figures.perturbation_curves_figure(fractions, {"ig": np.linspace(1, 0, 6), "random": random},
                                             aopc={"ig": 0.8123, "random": 0.5})
    lines = [trace for trace in fig.data if trace.mode == "lines"]
    np.testing.assert_allclose(lines[0].y, np.linspace(1, 0, 6))
    np.testing.assert_allclose(lines[1].y, random.mean(axis=0))
    band = next(trace for trace in fig.data if trace.fill == "toself")
    np.testing.assert_allclose(band.y, np.concatenate([random.max(axis=0), random.min(axis=0)[::-1]]))
    assert "0.812" in lines[0].name and list(lines[0].x) == pytest.approx(list(fractions * 100))

    fig = diagnostic_figures.randomisation_figure(["churn", "<b>dense</b>"], [-0.4, 0.1], [0.7, 0.5], input_only=0.45)
    signed = fig.data[0]
    assert list(signed.y) == [1.0, -0.4, 0.1] and signed.x[2] == "+ &lt;b&gt;dense&lt;/b&gt;"

    totals, changes = np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3)
    fig = diagnostic_figures.occlusion_scatter(totals, changes, ["m1", "m2", "<i>m3</i>"], spearman=-1.0)
    points = fig.data[0]
    np.testing.assert_array_equal(points.x, totals.ravel())
    np.testing.assert_array_equal(points.y, changes.ravel())
    assert list(points.text) == ["m1", "m2", "&lt;i&gt;m3&lt;/i&gt;"] * 2


def test_should_stop_ends_the_checks_between_model_calls(linear):
    from explain.core.errors import Stopped

    model, ws, wt = linear
    x = data(4)
    b = {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}
    calls = []

    def stop_at_the_second_call():
        calls.append(1)
        return len(calls) >= 2

    with pytest.raises(Stopped):
        fa.perturbation_curves(model, x, b, {"ig": np.ones((4, CELLS)), "other": np.ones((4, CELLS))},
                               should_stop=stop_at_the_second_call)
    assert len(calls) == 2  # asked before each forward call; the first went through
    with pytest.raises(Stopped):
        fa.occlusion(model, x, b, explain.integrated_gradients(model, x, b, steps=2), should_stop=lambda: True)


# ----------------------------------------------------------------------------- the Diagnostics page


def test_diagnostics_page_runs_the_checks_only_when_asked():
    from tests.support.apptest import app, charts

    at = app({"customer": "C00003", "steps": "16"}, page="pages/diagnostics.py")
    assert not any(key.startswith("faith_") for key in charts(at))  # not on page load
    button = next(b for b in at.button if b.label.startswith("Run faithfulness checks"))
    button.click().run(timeout=600)
    assert not at.exception, [e.value for e in at.exception]
    figs = charts(at)
    assert {"faith_deletion", "faith_insertion", "faith_random", "faith_occlusion"} <= set(figs)
    assert len(figs["faith_random"]["data"][0]["y"]) == 5  # trained + 4 layers re-initialised
    assert any("AOPC deletion" in c.value for c in at.caption)
