"""The notebook and the command line apply the same padding rules to the same data (issue 38, item 8).

A Masking(0) + LSTM model with customers whose histories are padded at the start: ``explain.explain`` (an in-memory
bundle from ``Bundle.from_objects``) must give the same zero and mean baselines, baseline predictions and attributions
as ``python -m explain attribute`` on the folder ``save_bundle`` writes from the same arrays. Before the fix the
notebook's bundle had no input layout: its zero baseline sat on the mask value (refused by the engine) and its mean
counted the padded zeros as real periods.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import explain
from explain import cli
from explain.analysis.explainer import baseline_for
from explain.bundle.load import Bundle, load_bundle
from explain.core.baselines import MASK_OFFSET

keras = pytest.importorskip("keras")

N, S, T, F = 8, 3, 6, 2
SHORT = {0: 2, 3: 4, 5: 1}  # customer row -> real periods (the last ones); the rest are padding at the start
IDS = [f"P{k}" for k in range(N)]
PERIODS = [f"2024-{m:02d}" for m in range(1, T + 1)]


def masked_model():
    keras.utils.set_random_seed(5)
    s_in, t_in = keras.Input((S,), name="account"), keras.Input((T, F), name="history")
    h = keras.layers.LSTM(4)(keras.layers.Masking(0.0)(t_in))
    both = keras.layers.Concatenate()([keras.layers.Dense(3, activation="tanh")(s_in), h])
    return keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(both))


def padded_data():
    rng = np.random.default_rng(11)
    static = rng.normal(size=(N, S)).astype("float32")
    temporal = rng.uniform(0.2, 3.0, size=(N, T, F)).astype("float32")
    for row, real in SHORT.items():
        temporal[row, :T - real] = 0.0
    return static, temporal


def expected_mean(temporal):
    """Each temporal feature's mean over the real periods only, computed here from the arrays."""
    real = ~np.all(temporal == 0.0, axis=-1)
    return temporal.astype(np.float64)[real].mean(axis=0)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    model = masked_model()
    static, temporal = padded_data()
    folder = tmp_path_factory.mktemp("padded") / "bundle"
    explain.save_bundle(folder, model, static, temporal, ids=IDS, periods=PERIODS)
    return model, static, temporal, folder


def cli_attributions(folder, baseline, out):
    argv = ["attribute", "--bundle", str(folder), "--baseline", baseline, "--steps", "32", "--out", str(out)]
    for cid in IDS:
        argv += ["--customer", cid]
    assert cli.main(argv) == 0
    return json.loads(out.read_text())["customers"]


def as_numbers(values):
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=np.float64)


@pytest.mark.parametrize("baseline", ["zero", "mean"])
def test_notebook_equals_the_command_line_on_a_masking_model(both, tmp_path, baseline):
    model, static, temporal, folder = both
    a = explain.explain(model, [static, temporal], baseline=baseline, ids=IDS, periods=PERIODS, steps=32)
    assert a.bundle.layout is not None and a.bundle.layout.spec("temporal").mask_value == 0.0
    assert not a.bundle.plain and a.bundle.temporal_padding == "start"

    # the baselines themselves: the notebook's in-memory bundle against the folder the CLI opens
    loaded = load_bundle(folder)
    nb = baseline_for(a.bundle, a.bundle.inputs_for(IDS), baseline)
    fs = baseline_for(loaded, loaded.inputs_for(IDS), baseline)
    np.testing.assert_allclose(np.asarray(nb["static"], np.float64), np.asarray(fs["static"], np.float64), atol=1e-6)
    np.testing.assert_allclose(np.asarray(nb["temporal"], np.float64), np.asarray(fs["temporal"], np.float64),
                               atol=1e-6)
    if baseline == "zero":  # moved off the mask value, as docs/method.md says, not refused
        np.testing.assert_allclose(nb["temporal"], MASK_OFFSET, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(nb["static"], 0.0)
    else:  # padded zeros left out of the mean (counted in, the mean would be far lower)
        np.testing.assert_allclose(nb["temporal"][0, 0], expected_mean(temporal), atol=1e-6)
        assert np.all(np.abs(nb["temporal"][0, 0] - temporal.astype(np.float64).reshape(-1, F).mean(0)) > 0.05)

    customers = cli_attributions(folder, baseline, tmp_path / f"{baseline}.json")
    assert [c["id"] for c in customers] == a.ids
    for row, c in enumerate(customers):
        assert abs(c["prediction"] - a.prediction[row]) < 1e-6
        assert abs(c["baseline_prediction"] - a.baseline_prediction[row]) < 1e-6
        np.testing.assert_allclose(c["static"]["values"], a.static[row], atol=1e-6)
        cli_temporal = as_numbers(c["temporal"]["values"])
        padded = np.all(temporal[row] == 0.0, axis=-1)
        real = ~np.isnan(cli_temporal)
        np.testing.assert_allclose(cli_temporal[real], a.temporal[row][real], atol=1e-6)
        np.testing.assert_array_equal(a.temporal[row][padded], 0.0)  # padding gets no attribution
        assert padded.sum() == (T - SHORT[row] if row in SHORT else 0)
    assert np.all(np.abs(a.delta) < 0.02 * np.abs(a.prediction - a.baseline_prediction) + 1e-4)


def test_from_arrays_reads_the_padding_as_well(both):
    model, static, temporal, _ = both
    bundle = Bundle.from_arrays(model, static, temporal, ids=IDS)
    assert bundle.layout.spec("temporal").padded_by == "Masking(0)"
    assert bundle.periods == [f"t{i + 1}" for i in range(T)] and bundle.input_periods["temporal"] == bundle.periods
    zero = baseline_for(bundle, bundle.inputs_for(IDS[:2]), "zero")
    np.testing.assert_allclose(zero["temporal"], MASK_OFFSET, atol=1e-12)
    np.testing.assert_array_equal(bundle.padding("temporal")[0], [True] * (T - 2) + [False] * 2)


def test_a_model_without_padding_stays_plain():
    s_in, t_in = keras.Input((S,)), keras.Input((T, F))
    out = keras.layers.Dense(1)(keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)]))
    static, temporal = padded_data()
    bundle = Bundle.from_objects(keras.Model([s_in, t_in], out), static, temporal,
                                 display_names={"static_0": "Tenure"})
    assert bundle.plain and bundle.engine_layout is None and bundle.input_arrays == {}
    assert bundle.feature_labels["static_0"] == "Tenure" and bundle.input_features["temporal"] == ["temporal_0",
                                                                                                   "temporal_1"]
    mean = baseline_for(bundle, bundle.inputs_for(["0"]), "mean")  # every period counts: no padding to leave out
    np.testing.assert_allclose(mean["temporal"][0, 0], temporal.astype(np.float64).reshape(-1, F).mean(0), atol=1e-6)


def test_the_notebooks_figures_and_table_show_padding_as_no_data(both):
    model, static, temporal, _ = both
    a = explain.explain(model, [static, temporal], baseline="zero", ids=IDS, periods=PERIODS, steps=16)
    frame = a.to_frame()
    rows = frame[(frame.customer_id == "P0") & (frame.input == "temporal")]
    padded = rows.period.isin(PERIODS[:T - SHORT[0]])
    assert rows[padded].value.isna().all() and rows[padded].attribution.isna().all()  # as the CLI's long format
    np.testing.assert_allclose(rows[~padded].value.to_numpy(), temporal[0, T - SHORT[0]:].reshape(-1), atol=1e-6)
    names = [trace.name for trace in a.heatmap(0).data if trace.type == "heatmap"]
    assert "no data" in names


def test_histories_padded_at_the_end_are_said_so_by_the_notebook_and_the_saved_folder(tmp_path):
    model = masked_model()
    static, temporal = padded_data()
    temporal = temporal[:, ::-1].copy()  # the same short histories, padded after their last period
    notebook = explain.Bundle.from_objects(model, static, temporal, ids=IDS, periods=PERIODS)
    folder = explain.save_bundle(tmp_path / "end", model, static, temporal, ids=IDS, periods=PERIODS)
    assert json.loads((folder / "bundle.json").read_text())["temporal_padding"] == "end"
    assert notebook.temporal_padding == load_bundle(folder).temporal_padding == "end"
    start = explain.save_bundle(tmp_path / "start", model, *padded_data(), ids=IDS, periods=PERIODS)
    assert "temporal_padding" not in json.loads((start / "bundle.json").read_text())  # the default, unsaid
