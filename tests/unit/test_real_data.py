"""The tool on real data (``tests/support/real_data.py``): carData's Rossi, 432 men with 7 static
features and up to 52 weeks of employment, each history ending at an arrest (padded at the end),
behind a Masking(-1) + LSTM model trained once per session. What is checked against the package's
own table, not against the tool: the padding, the model's skill, completeness, zero effect of
padded weeks, and ``batch --steps auto`` + ``drivers`` through the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import explain
from explain.batch.store import open_store
from explain.cli import main
from explain.core.settings import Settings, completeness_limit
from tests.support import real_data

PADDED_AT_THE_END = 110  # arrested before week 52: 114 arrested, 4 of them in week 52


@pytest.fixture(scope="module")
def rossi(tmp_path_factory):
    folder = real_data.rossi(tmp_path_factory)
    return folder, explain.load_bundle(folder)


@pytest.fixture(scope="module")
def table():
    """The package's table, read here apart from the bundle: what every test compares with."""
    frame = real_data.rossi_table()
    frame["id"] = [f"R{int(k):03d}" for k in frame["rownames"]]
    return frame.set_index("id")


def sample_ids(table, n=20):
    """``n`` men: half arrested early (padded histories), half followed for the whole year."""
    short = table.index[table["week"] < 52]
    full = table.index[table["week"] == 52]
    return list(short[:: max(1, len(short) // (n // 2))][: n // 2]) + list(full[:: len(full) // (n // 2)][: n // 2])


def test_the_package_ships_rossi_as_described(table):
    assert table.shape[0] == 432
    assert int(table["arrest"].sum()) == 114
    assert int((table["week"] < 52).sum()) == PADDED_AT_THE_END


def test_the_bundle_passes_check_and_pads_the_weeks_after_an_arrest(rossi, table, capsys):
    folder, bundle = rossi
    assert main(["check", "--bundle", str(folder)]) == 0
    said = capsys.readouterr().out
    assert "is valid: 432 customers, 7 static features, 52 periods x 2 temporal features" in said
    assert f"{PADDED_AT_THE_END} customer(s) have fewer than 52 periods" in said and "padded at the end" in said
    assert bundle.periods[0] == "1970-01-05" and bundle.periods[-1] == "1970-12-28"
    ids = sample_ids(table)
    history = bundle.inputs_for(ids)["temporal"]  # (20, 52, 2) as the model reads it
    for k, cid in enumerate(ids):
        weeks = int(table.loc[cid, "week"])
        employed = (table.loc[cid, [f"emp{w}" for w in range(1, weeks + 1)]] == "yes").to_numpy(float)
        np.testing.assert_array_equal(history[k, :weeks, 0], employed)
        np.testing.assert_allclose(history[k, :weeks, 1], np.cumsum(employed) / np.arange(1, weeks + 1), atol=1e-6)
        assert (history[k, weeks:] == real_data.MASK).all(), cid  # the weeks after the arrest: padding
    static = bundle.inputs_for(ids)["static"]
    np.testing.assert_array_equal(static[:, real_data.STATIC.index("prio")], table.loc[ids, "prio"].to_numpy(float))
    np.testing.assert_array_equal(static[:, real_data.STATIC.index("fin")], (table.loc[ids, "fin"] == "yes") * 1.0)


def test_the_model_learned_something(rossi, table):
    """AUC on the data well above chance (a sanity check of the training: 0.96 measured, mostly from
    the history's length, which tells the arrest; see tests/support/real_data.py)."""
    from sklearn.metrics import roc_auc_score

    _, bundle = rossi
    ids = list(table.index)
    inputs = bundle.inputs_for(ids)
    scores = np.asarray(bundle.model([inputs["static"], inputs["temporal"]]))[:, 0]
    assert roc_auc_score(table.loc[ids, "arrest"].to_numpy(), scores) > 0.6


def test_each_customer_adds_up_and_padded_weeks_get_exactly_nothing(rossi, table):
    _, bundle = rossi
    ids = sample_ids(table)
    a = explain.explain_customers(bundle, ids, Settings(steps="auto"))
    explained = a.static.sum(axis=1) + a.temporal.sum(axis=(1, 2))
    gap = a.prediction - a.baseline_prediction
    np.testing.assert_allclose(a.delta, gap - explained, atol=1e-6)  # the delta is what is left, computed here
    assert (np.abs(gap - explained) <= completeness_limit(a.prediction, a.baseline_prediction)).all()
    assert (np.abs(gap) > 0.01).sum() >= 15  # not 20 customers at their baseline's score
    inputs = bundle.inputs_for(ids)
    np.testing.assert_allclose(a.prediction, np.asarray(bundle.model([inputs["static"], inputs["temporal"]]))[:, 0],
                               atol=1e-5)
    weeks = table.loc[ids, "week"].to_numpy()
    after = np.arange(52)[None, :] >= weeks[:, None]  # (20, 52): the weeks after each arrest
    assert after.sum() > 0
    np.testing.assert_array_equal(a.padding["temporal"], after)
    assert (a.temporal[after] == 0.0).all()
    assert (np.abs(a.temporal[~after]).sum(axis=1) > 0).mean() > 0.9  # real weeks do carry effects


def test_batch_auto_steps_and_drivers_on_the_real_bundle(rossi, table, tmp_path, capsys):
    folder, bundle = rossi
    store, out = tmp_path / "store", tmp_path / "drivers.json"
    assert main(["batch", "--bundle", str(folder), "--out", str(store), "--steps", "auto"]) == 0
    assert main(["drivers", "--bundle", str(folder), "--store", str(store), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "0 of 432 customers outside the tolerance" in said
    opened = open_store(store)
    ids = opened.customer_ids()
    stored, summary = opened.arrays(bundle, ids), opened.summary(ids)
    limit = completeness_limit(summary["prediction"], summary["baseline_prediction"])
    assert (np.abs(summary["delta"]) <= limit).all()
    weeks = table.loc[ids, "week"].to_numpy()
    np.testing.assert_array_equal(stored.padding["temporal"], np.arange(52)[None, :] >= weeks[:, None])

    doc = json.loads(out.read_text())
    assert doc["customers"] == 432 and doc["source"]["settings"]["steps"] == "auto"
    ranking = {r["feature"]: r for r in doc["ranking"]}
    assert set(ranking) == set(real_data.STATIC) | set(real_data.TEMPORAL)
    # each feature's mean |effect| per customer (a history's feature summed over its real weeks), from the store
    expected = dict(zip(real_data.STATIC, np.abs(stored.static).mean(axis=0)))
    expected.update(zip(real_data.TEMPORAL, np.abs(np.nansum(stored.temporal, axis=1)).mean(axis=0)))
    for feature, mean_abs in expected.items():
        assert ranking[feature]["mean_abs"] == pytest.approx(mean_abs, rel=1e-6), feature
    assert [r["feature"] for r in doc["ranking"]] == sorted(expected, key=lambda f: -expected[f])
    assert ranking["prio"]["label"] == "Prior convictions"  # display names from bundle.json
    assert sum(s["size"] for s in doc["segments"]) == 432
