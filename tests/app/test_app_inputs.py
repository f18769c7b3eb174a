"""The dashboard on a bundle with three inputs (a static input and two histories, one of them
padded behind a Masking layer): one heatmap per history, padded months grey ("no data"),
static features together, the Data & model page's table of inputs (AppTest)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.support.apptest import app, array, charts, errors, plain

keras = pytest.importorskip("keras")

MONTHS = [f"2025-{m:02d}" for m in range(1, 7)]
QUARTERS = ["q1", "q2", "q3"]
SHORT = {"K1": 2, "K4": 4}  # customers with fewer months: padded at the start


@pytest.fixture(scope="module")
def three_bundle(tmp_path_factory):
    keras.utils.set_random_seed(6)
    s_in = keras.Input((2,), name="profile")
    m_in = keras.Input((6, 2), name="monthly")
    q_in = keras.Input((3, 1), name="quarterly")
    h = keras.layers.Concatenate()([keras.layers.Dense(3, activation="tanh")(s_in),
                                    keras.layers.LSTM(3)(keras.layers.Masking(0.0)(m_in)), keras.layers.GRU(2)(q_in)])
    model = keras.Model([s_in, m_in, q_in], keras.layers.Dense(1, activation="sigmoid")(h))
    folder = tmp_path_factory.mktemp("three") / "bundle"
    folder.mkdir()
    model.save(folder / "model.keras")
    rng = np.random.default_rng(0)
    ids = [f"K{i}" for i in range(8)]
    pd.DataFrame({"customer_id": ids, "age": rng.normal(size=8), "tenure": rng.normal(size=8),
                  "churned": [i % 2 for i in range(8)]}).to_csv(folder / "static.csv", index=False)
    monthly = [{"customer_id": cid, "period": p, "calls": rng.uniform(1, 2), "usage": rng.uniform(1, 2)}
               for cid in ids for t, p in enumerate(MONTHS) if t >= 6 - SHORT.get(cid, 6)]
    pd.DataFrame(monthly).to_csv(folder / "temporal_monthly.csv", index=False)
    quarterly = [{"customer_id": cid, "period": p, "spend": rng.normal()} for cid in ids for p in QUARTERS]
    pd.DataFrame(quarterly).to_csv(folder / "temporal_quarterly.csv", index=False)
    (folder / "bundle.json").write_text(json.dumps({
        "label_column": "churned", "temporal_padding": "start",
        "display_names": {"calls": "Support calls", "spend": "Spend"},
        "inputs": {"profile": {"features": ["age", "tenure"], "display_name": "Profile"},
                   "monthly": {"features": ["calls", "usage"], "display_name": "Monthly usage"},
                   "quarterly": {"features": ["spend"], "display_name": "Quarterly spend"}}}))
    return folder


@pytest.fixture
def bundle_env(three_bundle, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(three_bundle))
    return three_bundle


def test_one_heatmap_per_history_and_grey_padded_months(bundle_env):
    at = app({"customer": "K1", "baseline": "mean"})
    assert not errors(at), errors(at)
    specs = charts(at)
    assert {"temporal_heatmap_0", "temporal_heatmap_1", "static_bars"} <= set(specs), sorted(specs)
    assert "temporal_heatmap_2" not in specs  # two histories, two heatmaps
    monthly, quarterly = specs["temporal_heatmap_0"], specs["temporal_heatmap_1"]
    assert ("Monthly usage" in monthly["layout"]["title"]["text"]
            and "Quarterly spend" in quarterly["layout"]["title"]["text"])
    heatmaps = [t for t in monthly["data"] if t["type"] == "heatmap"]
    grey, cells = heatmaps[0], heatmaps[1]
    assert grey["name"] == "no data" and grey["showscale"] is False
    assert {c for _, c in grey["colorscale"]} == {"#d4d4d4"}  # one grey
    z_grey, z = array(grey["z"]), array(cells["z"])
    padded = np.arange(6) < 4  # K1 has its last 2 months only
    assert z_grey.shape == (2, 6) and np.all(z_grey[:, padded] == 1) and np.all(np.isnan(z_grey[:, ~padded]))
    assert np.all(np.isnan(z[:, padded])) and np.all(np.isfinite(z[:, ~padded]))  # padded: no attribution drawn
    assert list(cells["x"]) == MONTHS and list(cells["y"]) == ["Support calls", "usage"]
    q_heatmaps = [t for t in quarterly["data"] if t["type"] == "heatmap"]
    assert len(q_heatmaps) == 1 and list(q_heatmaps[0]["x"]) == QUARTERS  # nothing padded: no grey layer
    static = next(t for t in specs["static_bars"]["data"] if t["type"] == "bar")
    assert len(static["y"]) == 2  # every static feature together


def test_a_full_history_has_no_grey_cells_and_the_data_page_lists_the_inputs(bundle_env):
    at = app({"customer": "K0"})
    assert not errors(at)
    monthly = charts(at)["temporal_heatmap_0"]
    assert [t.get("name") for t in monthly["data"] if t["type"] == "heatmap"] != ["no data"]
    assert all(t.get("name") != "no data" for t in monthly["data"])
    at = app(page="pages/data.py")
    assert not errors(at)
    table = at.dataframe[2].value if len(at.dataframe) > 2 else None
    text = " ".join(m.value for m in at.markdown)
    assert "Inputs of this model" in text and "drawn grey" in text
    assert table is not None and list(table["input"]) == ["profile", "monthly", "quarterly"]
    assert list(table["padding"]) == ["", "Masking(0)", ""]


@pytest.mark.parametrize("page", ["pages/cohort.py", "pages/compare.py", "pages/whatif.py", "pages/diagnostics.py"])
def test_the_other_pages_work_or_say_what_they_need(bundle_env, page):
    at = app(page=page)
    assert not errors(at), errors(at)
    infos = " ".join(plain(i.value) for i in at.info)
    if page in ("pages/cohort.py", "pages/compare.py", "pages/whatif.py"):  # one history only: said, with the names
        assert not charts(at) and f"{page[6:-3].capitalize().replace('Whatif', 'What-if')} page" in infos
        assert "reads 2 histories (Monthly usage, Quarterly spend)" in infos
    else:
        assert charts(at)


def test_the_embedding_demo_compares_and_says_why_what_if_cannot_edit_it(monkeypatch):
    from tests.support.apptest import ROOT

    folder = ROOT / "bundles" / "demo-embedding"
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    tenure = pd.read_csv(folder / "static.csv", dtype={"customer_id": str}).set_index("customer_id")["tenure_months"]
    short, full = tenure.index[tenure < 12][0], tenure.index[tenure >= 12][0]
    at = app({"customer": short, "compare": full}, page="pages/compare.py")
    assert not errors(at) and not at.info, (errors(at), [i.value for i in at.info])
    figs = charts(at)
    z = array(next(t for t in figs["compare_a"]["data"] if t.get("name") != "no data")["z"])
    assert z.shape == (3, 12) and np.isnan(z[:, :12 - int(tenure[short])]).all()  # padded months: no data
    assert np.isfinite(z[:, 12 - int(tenure[short]):]).all()
    static = figs["compare_static"]["data"][0]
    assert {"Contract", "Plan", "Tenure (months)"} <= set(static["y"])

    at = app({"customer": short}, page="pages/whatif.py")
    infos = " ".join(plain(i.value) for i in at.info)
    assert not charts(at) and "reads Contract, Plan as categories" in infos


def test_the_categorical_baseline_rule_is_picked_in_the_sidebar_and_said(monkeypatch):
    from tests.support.apptest import ROOT

    monkeypatch.setenv("EXPLAIN_BUNDLE", str(ROOT / "bundles" / "demo-embedding"))
    at = app()
    assert not errors(at), errors(at)

    def words(at):
        return " ".join(m.value for m in at.markdown if m.value.startswith("**Compared with**"))

    assert "most frequent category" in words(at)
    radio = next(r for r in at.sidebar.radio if r.label == "Categorical features at")
    radio.set_value("mean-embedding").run()
    assert not errors(at)
    assert "mean embedding of their categories" in words(at) and "most frequent category" not in words(at)
    assert "Months before a customer's first month are no data yet" in words(at)  # padding, in the analyst's words
    assert "mask" not in words(at).lower()
    assert {"temporal_heatmap_0", "static_bars"} <= set(charts(at))
