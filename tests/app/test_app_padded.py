"""The dashboard on a padded bundle unlike the demo (64 weeks behind Masking(0) + an LSTM with hand-set
weights, a third of the customers padded at the start; tests/support/padded.py): the Cohort page,
computed and read from a batch store, draws every temporal feature with no NaN and ranks the planted
driver first (AppTest)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support import padded
from tests.support.apptest import app, array, charts, errors, heatmap, plain


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return padded.write(tmp_path_factory.mktemp("padded") / "bundle")


def ranking(spec) -> list[tuple[str, float]]:
    """(label, mean |attribution|) of the Feature ranking, largest first."""
    bars = spec["data"][0]
    return sorted(zip(bars["y"], array(bars["x"])), key=lambda pair: -pair[1])


def effects(spec) -> np.ndarray:
    """The attribution heatmap's z (features x periods), not the grey "no data" layer under it."""
    return array(next(t for t in spec["data"] if t["type"] == "heatmap" and t.get("name") != "no data")["z"])


def check_cohort(at):
    figs = charts(at)
    for key in ("cohort_abs", "cohort_signed"):
        z = heatmap(figs[key])["z"]
        # a history over ~60 periods is binned (issue 28): every feature, at most T columns, no NaN
        assert z.shape[0] == len(padded.TEMPORAL) and 1 <= z.shape[1] <= padded.T and np.isfinite(z).all(), key
    ranked = ranking(figs["cohort_ranking"])
    assert all(np.isfinite(value) for _, value in ranked) and len(ranked) == 5
    assert ranked[0][0] == f"{padded.PLANTED} (all periods)"
    assert dict(ranked)[f"{padded.IGNORED} (all periods)"] == 0.0
    profile = figs["cohort_periods"]["data"]
    assert all(np.isfinite(array(trace["y"])).all() for trace in profile if "y" in trace and trace["y"] is not None
               and trace.get("type") in ("scatter", "bar") and len(array(trace["y"])) == padded.T)
    return ranked


def test_cohort_page_computed_and_from_a_store_no_nan_planted_driver_first(folder, monkeypatch):
    from explain.batch.local import run_batch_job
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings

    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    at = app({"sample": "all"}, page="pages/cohort.py")
    assert not errors(at), errors(at)
    assert at.session_state["cohort_job"]["parts"] and not at.success  # computed here
    computed = check_cohort(at)

    run_batch_job(load_bundle(folder), folder / "attributions" / "nightly", Settings(), progress=False)
    del at.session_state["cohort_job"]
    at.run()
    assert not at.exception and "cohort_job" not in at.session_state
    assert any("precomputed batch store nightly" in plain(m.value) for m in at.success)
    stored = check_cohort(at)
    assert [name for name, _ in stored] == [name for name, _ in computed]
    # the batch's calls are compiled (XLA), the page's are not: equal within float rounding
    np.testing.assert_allclose([v for _, v in stored], [v for _, v in computed], rtol=1e-5)


def test_compare_two_customers_and_a_cohort_with_padded_months_grey(folder, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    short = padded.short_customers(folder)
    full = next(c for c in (f"W{k:03d}" for k in range(40)) if c not in short)
    at = app({"customer": short[0], "compare": full}, page="pages/compare.py")
    assert not errors(at), errors(at)
    assert not at.info or not any("draws one history" in i.value for i in at.info)
    figs = charts(at)
    z_a, z_b, z_d = (effects(figs[k]) for k in ("compare_a", "compare_b", "compare_diff"))
    padded_weeks = np.isnan(z_a).all(axis=0)
    assert 0 < padded_weeks.sum() < padded.T and np.isfinite(z_a[:, ~padded_weeks]).all()
    assert np.isfinite(z_b).all()  # the full history has data every week
    assert np.isnan(z_d[:, padded_weeks]).all() and np.isfinite(z_d[:, ~padded_weeks]).all()
    grey = [t for t in figs["compare_a"]["data"] if t.get("name") == "no data"]
    assert len(grey) == 1 and (array(grey[0]["z"])[:, padded_weeks] == 1).all()

    at.selectbox(key="w_compare").set_value("cohort:1").run()  # the mean of a cohort: padding is no data
    assert not at.exception and not errors(at)
    z_mean = effects(charts(at)["compare_b"])
    assert np.isfinite(z_mean).all()


def test_whatif_edits_real_weeks_of_a_padded_customer(folder, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    short = padded.short_customers(folder)[0]
    at = app({"customer": short, "whatif": f"t0@{padded.T - 4}-{padded.T - 1}=med"}, page="pages/whatif.py")
    assert not errors(at), errors(at)
    figs = charts(at)
    z_o, z_e = effects(figs["whatif_original"]), effects(figs["whatif_edited"])
    padded_weeks = np.isnan(z_o).all(axis=0)
    assert padded_weeks.any() and np.array_equal(np.isnan(z_e).all(axis=0), padded_weeks)
    before, after = (float(m.value) for m in at.metric[:2])
    assert before != after  # the edit moved the score
    at = app({"customer": short, "whatif": "t0@0-1=med"}, page="pages/whatif.py")  # its padded weeks: refused
    assert any("padding" in plain(w.value) for w in at.warning), [w.value for w in at.warning]


def test_customer_page_draws_the_history_with_gaps_at_the_padded_weeks(folder, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    short = padded.short_customers(folder)[0]
    at = app({"customer": short})
    assert not errors(at), errors(at)
    traces = charts(at)["history"]["data"]
    customer = [array(t["y"]) for t in traces if t.get("name") == "customer"]
    baseline = [array(t["y"]) for t in traces if t.get("name") == "baseline"]
    assert len(customer) == len(padded.TEMPORAL) == len(baseline)
    gap = np.isnan(customer[0])
    assert 0 < gap.sum() < padded.T and gap[0] and not gap[-1]  # padded at the start
    for line in customer + baseline:
        assert np.array_equal(np.isnan(line), gap)
    assert (baseline[0][~gap] > 0.05).all()  # the baseline's real weeks: the mean over real weeks, not 0


def test_customer_page_speaks_weeks_and_warns_when_the_baseline_scores_like_the_customer(folder, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    short = padded.short_customers(folder)[0]
    at = app({"customer": short, "baseline": f"customer:{short}"})  # the customer against itself: 0 apart
    assert not errors(at), errors(at)
    warnings = [plain(w.value) for w in at.warning]
    assert any("is within 0.02 of this customer's" in w for w in warnings), warnings
    text = " ".join(plain(m.value) for m in at.markdown) + " ".join(plain(i.value) for i in at.info)
    assert "month" not in text.lower()  # weekly data: no months, no 'monthly'
    from explain.analysis.explainer import explain_customers
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings

    shorts = padded.short_customers(folder)
    a = explain_customers(load_bundle(folder), shorts, Settings())
    apart = shorts[int(np.argmax(np.abs(a.prediction - a.baseline_prediction)))]
    assert abs(a.prediction - a.baseline_prediction).max() > 0.05
    at = app({"customer": apart, "baseline": "mean"})
    assert not any("within 0.02" in plain(w.value) for w in at.warning)
    words = next(plain(m.value) for m in at.markdown if m.value.startswith("**Compared with**"))
    assert "each weekly feature at its mean over all customers and weeks" in words
    assert "Weeks before a customer's first week are no data yet" in words and "the comparison is as short" in words
    assert not [w for w in ("mask", "offset", "padding") if w in words.lower()]  # the analyst's words
    assert "weekly history" in charts(at)["history"]["layout"]["title"]["text"]


def test_customer_page_says_the_answer_then_the_heatmap_then_how_to_read_it(folder, monkeypatch):
    """Padded bundles as plain ones (one story): the answer in words above the heatmap, the colour legend and the
    baseline in words below it, so the heatmap is on the first screen; then the static bars and the history."""
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    at = app({"customer": padded.short_customers(folder)[0]})
    order = []
    for node in at.main:
        if node.type == "markdown" and "likely to churn" in str(node.value) and "mainly because" in str(node.value):
            order.append("summary")
        elif node.type == "plotly_chart":
            order.append(node.proto.id.split("-", 2)[-1])
        elif node.type == "markdown" and str(node.value).startswith("**Compared with**"):
            order.append("compared with")
    assert order == ["summary", "temporal_heatmap_0", "compared with", "static_bars", "history"], order
