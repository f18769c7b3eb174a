"""Long histories and long rankings under AppTest, on a bundle of 365 days x 24 features and 20
static features (tests/support/year.py): every long heatmap (Customer, Compare, What-if, Cohort)
has the one bin/zoom control (ui/views.py); changing the bin and the range redraws the heatmaps
with the bins asked for, summing the customer's own attributions (computed here independently),
and keeps exactly the periods chosen; rankings show 15 bars until "Show all 20 features"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.support import year
from tests.support.apptest import app, array, charts, customer_heading, errors, plain
from tests.support.plotly_x import drawn_x

MONTHS = list(dict.fromkeys(d[:7] for d in year.DAYS))
WEEKS = list(dict.fromkeys(pd.to_datetime(pd.Series(year.DAYS)).dt.strftime("%G-W%V")))
MARCH = [d for d in year.DAYS if d.startswith("2025-03")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return year.write(tmp_path_factory.mktemp("year") / "bundle")


@pytest.fixture
def bundle_env(folder, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    return folder


def effects(spec) -> dict:
    """The attribution heatmap (not the grey "no data" layer) with z decoded."""
    trace = dict(next(t for t in spec["data"] if t["type"] == "heatmap" and t.get("name") != "no data"))
    trace["z"] = array(trace["z"])
    return trace


def set_view(at, key: str, bin: str | None = None, span: tuple | None = None):
    if bin is not None:
        at.segmented_control(key=f"w_view_{key}_bin").set_value(bin).run()
    if span is not None:
        at.select_slider(key=f"w_view_{key}_range").set_value(span).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not errors(at), errors(at)
    return charts(at)


def test_customer_heatmap_bins_and_zooms_with_the_customers_own_sums(bundle_env):
    from explain.analysis.explainer import explain_customers
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings

    at = app(page="pages/customer.py")
    assert not errors(at), errors(at)
    control = at.segmented_control(key="w_view_customer_temporal_bin")
    assert list(control.options) == ["auto (weeks)", "days", "weeks", "months", "quarters"]  # as shown
    heat = effects(charts(at)["temporal_heatmap"])
    assert list(heat["x"]) == WEEKS  # auto: a year of days as weeks
    cid = plain(customer_heading(at)).removeprefix("#### Customer ")
    bundle = load_bundle(bundle_env)
    a = explain_customers(bundle, [cid], Settings()).temporal[0]  # (365, 24), computed here
    order = np.argsort(-np.abs(a).sum(axis=0), kind="stable")

    heat = effects(set_view(at, "customer_temporal", bin="month")["temporal_heatmap"])
    assert list(heat["x"]) == MONTHS and heat["z"].shape == (12, 12)
    by_month = pd.DataFrame(a).groupby([d[:7] for d in year.DAYS]).sum().to_numpy()  # (12 months, 24)
    np.testing.assert_allclose(heat["z"][:11], by_month[:, order[:11]].T, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(heat["z"][11], by_month[:, order[11:]].sum(axis=1), rtol=1e-5, atol=1e-7)
    assert heat["z"].sum() == pytest.approx(a.sum(), rel=1e-5)  # completeness survives binning
    # the hover, built in the browser: the month's label from the axis, the cells' values as numbers
    assert heat["hovertemplate"].startswith("period: %{x}<br>") and list(heat["x"])[1] == "2025-02"
    assert "text" not in heat and array(heat["customdata"]).shape == (12, 12, 2)  # value and baseline

    heat = effects(set_view(at, "customer_temporal", bin="none", span=(MARCH[0], MARCH[-1]))["temporal_heatmap"])
    assert list(heat["x"]) == MARCH  # exactly the days chosen
    order = np.argsort(-np.abs(a[59:90]).sum(axis=0), kind="stable")  # rows ordered by their weight in the zoom
    np.testing.assert_allclose(heat["z"][:11], a[59:90, order[:11]].T, rtol=1e-5, atol=1e-7)


def test_customer_history_lines_follow_the_heatmaps_bins_and_rows(bundle_env):
    """The history beside the bars: the heatmap's 11 own rows (not all 24 features), each point the
    mean of its bin's days of the customer's values (computed here), the baseline binned the same,
    re-binned with the control; the table below keeps every day and feature."""
    from explain.analysis.diagnostics import shown_baseline
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings

    at = app(page="pages/customer.py")
    cid = plain(customer_heading(at)).removeprefix("#### Customer ")
    bundle = load_bundle(bundle_env)
    values = bundle.inputs_for([cid])["temporal"][0]
    base = shown_baseline(bundle, cid, Settings())["temporal"]
    for bin, keys in ((None, WEEKS), ("month", MONTHS)):
        figs = set_view(at, "customer_temporal", bin=bin) if bin else charts(at)
        rows = list(effects(figs["temporal_heatmap"])["y"])
        history = figs["history"]
        *names, span, note = history["layout"]["annotations"]  # the charts' names, the span under them, the note
        assert [n["text"] for n in names] == rows[:11] and span["text"] == "1 Jan 2025 to 31 Dec 2025"
        assert "the 11 of 24 features with the largest effects" in history["layout"]["annotations"][-1]["text"]
        by = [d[:7] for d in year.DAYS] if bin == "month" else pd.to_datetime(
            pd.Series(year.DAYS)).dt.strftime("%G-W%V").to_numpy()
        columns = [year.TEMPORAL.index(next(c for c in year.TEMPORAL if year.NAMES[c] == r)) for r in rows[:11]]
        for name, source in (("customer", values), ("baseline", base)):
            lines = [array(t["y"]) for t in history["data"] if t["name"] == name]
            expected = pd.DataFrame(source).groupby(by, sort=False).mean().to_numpy()[:, columns]
            np.testing.assert_allclose(np.array(lines).T, expected, rtol=1e-6)  # float32 on the wire
            assert all(drawn_x(history, t) == keys and "x" not in t for t in history["data"])  # periods once
    table = at.expander(key="history_table")
    assert table.label == "History as a table"


def test_a_padded_bundles_history_has_the_same_control(tmp_path, monkeypatch):
    """Bundles with more inputs (here 64 weeks behind Masking) draw their histories through
    ui/input_views.py: the same control, one per history; padded weeks stay grey "no data"."""
    from tests.support import padded

    folder = padded.write(tmp_path / "padded")
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    short = padded.short_customers(folder)[0]
    at = app({"customer": short}, page="pages/customer.py")
    assert not errors(at), errors(at)
    history = "customer_temporal"  # the control of the bundle's one history, "temporal"
    figs = charts(at)
    assert len(effects(figs["temporal_heatmap_0"])["x"]) < padded.T  # auto: 64 weeks as months
    assert drawn_x(figs["history"], figs["history"]["data"][0]) == list(effects(figs["temporal_heatmap_0"])["x"])
    figs = set_view(at, history, bin="none")
    heat = effects(figs["temporal_heatmap_0"])
    assert list(heat["x"]) == padded.WEEKS == drawn_x(figs["history"], figs["history"]["data"][0])
    assert np.isnan(heat["z"][:, 0]).all() and np.isfinite(heat["z"][:, -1]).all()  # padded at the start


def test_customer_static_ranking_shows_15_bars_until_show_all(bundle_env):
    at = app(page="pages/customer.py")
    bars = charts(at)["static_bars"]["data"][0]
    assert len(bars["y"]) == 15 and any(y.startswith("the other 6 features") for y in bars["y"])
    at.toggle(key="w_all_customer_static").set_value(True).run()
    assert not at.exception
    assert len(charts(at)["static_bars"]["data"][0]["y"]) == 20


def test_compare_and_what_if_share_one_view_for_their_three_heatmaps(bundle_env):
    at = app({"customer": "Y000", "compare": "Y001"}, page="pages/compare.py")
    assert not errors(at), errors(at)
    figs = set_view(at, "compare", bin="quarter")
    for key in ("compare_a", "compare_b", "compare_diff"):
        assert list(effects(figs[key])["x"]) == ["2025-Q1", "2025-Q2", "2025-Q3", "2025-Q4"], key
    figs = set_view(at, "compare", bin="none", span=(MARCH[0], MARCH[-1]))
    assert all(list(effects(figs[k])["x"]) == MARCH for k in ("compare_a", "compare_b", "compare_diff"))
    a, b, d = (effects(figs[k])["z"] for k in ("compare_a", "compare_b", "compare_diff"))
    np.testing.assert_allclose(d, a - b, atol=1e-6)
    static = figs["compare_static"]["data"][0]
    assert len(static["y"]) == 15

    at = app({"customer": "Y000"}, page="pages/whatif.py")
    assert not errors(at), errors(at)
    figs = set_view(at, "whatif", bin="month", span=(year.DAYS[31], year.DAYS[180]))
    assert list(effects(figs["whatif_original"])["x"]) == MONTHS[1:6]  # 2025-02-01 .. 2025-06-30
    assert list(effects(figs["whatif_edited"])["x"]) == list(effects(figs["whatif_difference"])["x"])


def test_cohort_heatmaps_bin_and_zoom_and_its_ranking_shows_all_on_demand(bundle_env):
    at = app({"sample": "all"}, page="pages/cohort.py")
    assert not errors(at), errors(at)
    figs = charts(at)
    assert list(effects(figs["cohort_abs"])["x"]) == WEEKS
    ranking = figs["cohort_ranking"]["data"][0]
    assert len(ranking["y"]) == 15 and ranking["y"][0].startswith("the other")  # drawn from the bottom
    figs = set_view(at, "cohort", bin="week", span=(year.DAYS[0], year.DAYS[59]))
    weeks = list(dict.fromkeys(pd.to_datetime(pd.Series(year.DAYS[:60])).dt.strftime("%G-W%V")))
    assert list(effects(figs["cohort_signed"])["x"]) == weeks == WEEKS[:9]  # 2025-01-01 (W01) .. 2025-03-01 (W09)
    at.toggle(key="w_all_cohort_ranking").set_value(True).run()
    assert not at.exception
    assert len(charts(at)["cohort_ranking"]["data"][0]["y"]) == 44  # 20 static + 24 histories


def test_drivers_ranking_shows_15_bars_until_show_all(bundle_env, monkeypatch, tmp_path):
    """Last in this file: it leaves a store of every customer under the bundle's attributions/."""
    import explain
    from explain.batch.local import run_batch_job
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings
    from ui import stores

    run_batch_job(load_bundle(bundle_env), bundle_env / "attributions" / "every", Settings(), progress=False)
    monkeypatch.setenv(stores.ENV, str(tmp_path / "stores"))
    at = app(page="pages/drivers.py")
    assert not errors(at), errors(at)
    d = explain.drivers(bundle_env)
    bars = charts(at)["drivers_ranking"]["data"][0]
    assert len(d.ranking) == 44 and len(bars["y"]) == 15 and bars["y"][0] == "the other 30 features"
    assert array(bars["x"])[0] == pytest.approx(sum(r.mean_abs for r in d.ranking[14:]), rel=1e-5)  # their sum
    at.toggle(key="w_all_drivers_ranking").set_value(True).run()
    assert not at.exception
    assert len(charts(at)["drivers_ranking"]["data"][0]["y"]) == 44
