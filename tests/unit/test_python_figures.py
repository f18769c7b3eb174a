"""Figures and the HTML report from Python: Attribution + bundle -> the dashboard's Plotly figures.

On a linear model IG is exactly (x - b) * w, so each figure's numbers are checked against an
attribution computed here independently of the engine. The model reads its temporal input
first, S=5, T=6, F=3 (unlike the demo).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import explain
from explain import figures
from explain.core.errors import ExplainError
from explain.core.quadrature import METHODS
from explain.core.settings import Settings
from tests.support.models import F, T, data, linear_model
from tests.support.plotly_x import drawn_x

pytest.importorskip("keras")

IDS = ["A1", "B<2>", "C3", "D4"]  # "B<2>" must reach the figures escaped
PERIODS = [f"2025-{m:02d}" for m in range(1, T + 1)]
STATIC = ["tenure", "charge", "age", "autopay", "products"]
TEMPORAL = ["usage", "calls", "late"]


@pytest.fixture(scope="module")
def setup():
    model, ws, wt = linear_model(seed=4, temporal_first=True)
    x = data(len(IDS), seed=9)
    bundle = explain.Bundle.from_objects(model, x["static"], x["temporal"], ids=IDS, periods=PERIODS,
                                         static_features=STATIC, temporal_features=TEMPORAL,
                                         display_names={"usage": "Data usage"}, units={"usage": "GB"})
    a = explain.explain_customers(bundle, IDS, Settings(baseline="zero", steps=8))
    exact = {"static": x["static"].astype(np.float64) * ws, "temporal": x["temporal"].astype(np.float64) * wt}
    return bundle, a, exact, x


def _trace(fig, kind):
    return [t for t in fig.data if t.type == kind]


def test_heatmap_is_the_customers_exact_attribution(setup):
    bundle, a, exact, x = setup
    fig = figures.heatmap(a, bundle, customer="C3")
    (heat,) = _trace(fig, "heatmap")
    np.testing.assert_allclose(np.asarray(heat.z), exact["temporal"][2].T, rtol=1e-5, atol=1e-6)  # features x periods
    assert list(heat.x) == PERIODS and list(heat.y) == ["Data usage", "calls", "late"]
    assert heat.zmid == 0 and heat.zmin == -heat.zmax == -np.abs(a.temporal[2]).max()
    per_period, per_feature = _trace(fig, "bar")
    np.testing.assert_allclose(per_period.y, exact["temporal"][2].sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(per_feature.x, exact["temporal"][2].sum(axis=0), rtol=1e-5, atol=1e-6)
    # hover: the raw value (customdata, float32) with its unit (the row's text: the units differ by row)
    assert "value: %{customdata[0]:.4g} %{text}" in heat.hovertemplate and heat.text[0][0] == "GB"
    np.testing.assert_allclose(np.asarray(heat.customdata)[:, :, 0], x["temporal"][2].T, rtol=1e-6)
    # a row number gives the same figure as the id
    assert figures.heatmap(a, bundle, customer=2).to_plotly_json() == fig.to_plotly_json()


def test_baseline_in_hover_and_history(setup):
    bundle, a, exact, x = setup
    fig = figures.heatmap(a, bundle, customer=0, baseline="mean")
    mean = x["temporal"].astype(np.float64).mean(axis=(0, 1))
    heat = _trace(fig, "heatmap")[0]
    assert "baseline: %{customdata[1]:.4g}" in heat.hovertemplate
    np.testing.assert_allclose(np.asarray(heat.customdata)[1, 0, 1], mean[1], rtol=1e-6)
    hist = figures.history(a, bundle, customer=0, baseline="mean")
    lines = _trace(hist, "scatter")
    assert len(lines) == 2 * F  # customer and baseline per feature
    np.testing.assert_allclose(lines[0].y, x["temporal"][0, :, 0], rtol=1e-6)
    np.testing.assert_allclose(lines[1].y, np.full(T, mean[0]), rtol=1e-5)


def test_static_bars_sorted_exact(setup):
    bundle, a, exact, _ = setup
    fig = figures.static(a, bundle, customer="D4")
    (bars,) = _trace(fig, "bar")
    np.testing.assert_allclose(bars.x, np.sort(exact["static"][3]), rtol=1e-5, atol=1e-6)
    order = np.argsort(exact["static"][3])
    assert [tick.split(" = ")[0] for tick in bars.y] == [STATIC[j] for j in order]


def test_compare_shares_one_scale(setup):
    bundle, a, exact, _ = setup
    figs = figures.compare(a, bundle, "A1", "B<2>")
    first, second = _trace(figs.first, "heatmap")[0], _trace(figs.second, "heatmap")[0]
    m = max(np.abs(exact["temporal"][0]).max(), np.abs(exact["temporal"][1]).max())
    assert first.zmax == second.zmax == pytest.approx(m, rel=1e-5)
    np.testing.assert_allclose(np.asarray(_trace(figs.difference, "heatmap")[0].z),
                               (exact["temporal"][0] - exact["temporal"][1]).T, rtol=1e-4, atol=1e-6)
    assert "B&lt;2&gt;" in figs.second.layout.title.text and "<2>" not in figs.second.layout.title.text
    assert [t.name for t in figs.static.data] == ["A1", "B&lt;2&gt;"]


def test_cohort_means(setup):
    bundle, a, exact, _ = setup
    figs = figures.cohort(a, bundle)
    np.testing.assert_allclose(np.asarray(_trace(figs.magnitude, "heatmap")[0].z),
                               np.abs(exact["temporal"]).mean(axis=0).T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(_trace(figs.signed, "heatmap")[0].z),
                               exact["temporal"].mean(axis=0).T, rtol=1e-5, atol=1e-6)
    size = _trace(figs.ranking, "bar")[0]
    expected = np.abs(np.concatenate([exact["static"], exact["temporal"].sum(axis=1)], axis=1)).mean(axis=0)
    np.testing.assert_allclose(size.x, np.sort(expected), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_trace(figs.risk, "histogram")[0].x, a.prediction)


def test_diagnostics_of_a_linear_model(setup):
    """Every rule is exact on a linear model: |delta| stays at rounding level for every step count."""
    bundle, _, _, _ = setup
    figs = figures.diagnostics(bundle, "C3", Settings(baseline="zero"), steps=(2, 4))
    assert [t.name for t in figs.convergence.data] == list(METHODS)
    for trace in figs.convergence.data:
        assert list(trace.x) == [2, 4] and max(trace.y) < 1e-4
    prediction = figs.path.data[0]
    assert len(prediction.x) == 33 and prediction.x[0] == 0 and prediction.x[-1] == 1
    np.testing.assert_allclose(np.diff(prediction.y, 2), 0, atol=1e-4)  # linear along a straight path


@pytest.mark.parametrize("steps", [6, "auto"])
def test_integration_points_of_a_linear_model(setup, steps):
    """f along the straight path of a linear model is the straight line f(b) + alpha (f(x) - f(b)); the
    dots are the engine's points (a fixed steps: its rule's; auto: the 16 of the first try, which adds up)."""
    bundle, _, exact, x = setup
    fig = figures.integration_points(bundle, "C3", Settings(baseline="zero", steps=steps), alphas=17)
    line, dots = fig.data
    row = IDS.index("C3")
    gap = exact["static"][row].sum() + exact["temporal"][row].sum()
    np.testing.assert_allclose(np.asarray(line.y) - line.y[0], np.asarray(line.x) * gap, rtol=1e-4, atol=1e-5)
    rule = explain.core.quadrature.alphas_and_weights("gausslegendre", 16 if steps == "auto" else steps)
    np.testing.assert_allclose(dots.x, rule[0])
    np.testing.assert_allclose(np.asarray(dots.customdata)[:, 0], rule[1])
    assert "customer C3" in fig.layout.title.text
    assert fig.layout.yaxis.title.text == f"{bundle.output_names[0]} (output)"


def test_ids_needed_for_a_subset_and_unknown_customers(setup):
    bundle, _, _, _ = setup
    some = explain.explain_customers(bundle, ["C3", "A1"], Settings(baseline="zero", steps=8))
    with pytest.raises(ExplainError, match=re.escape("pass ids=[...]")):
        figures.heatmap(some, bundle, customer=0)
    full = explain.explain_customers(bundle, IDS, Settings(baseline="zero", steps=8))
    np.testing.assert_array_equal(_trace(figures.heatmap(some, bundle, "A1", ids=["C3", "A1"]), "heatmap")[0].z,
                                  _trace(figures.heatmap(full, bundle, "A1"), "heatmap")[0].z)
    for bad in ("Z9", 5, -1):
        with pytest.raises(ExplainError, match="is not one of the attribution's 2 customer"):
            figures.static(some, bundle, bad, ids=["C3", "A1"])
    with pytest.raises(ExplainError, match="one id per row"):
        figures.static(some, bundle, 0, ids=["C3"])


def test_html_report_offline(setup, tmp_path):
    bundle, a, exact, _ = setup
    text = figures.html(a, bundle, customer="B<2>", path=tmp_path / "r.html", baseline="zero")
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == text
    assert text.count("* plotly.js v") == 1  # plotly.js inline, once
    assert not re.search(r"<script[^>]+src=[\"']https?:", text)  # nothing fetched from the network
    for heading in ("Monthly features", "Static features", "History"):
        assert f"<h2>{heading}</h2>" in text
    assert "B&lt;2&gt;" in text and "<2>" not in text
    assert "<th>baseline</th><td>zero</td>" in text
    for value in exact["static"][1]:
        assert f"{value:+.4g}" in text  # the static attributions table
    assert not list(tmp_path.glob("*.part"))


def test_history_of_a_padded_long_bundle_follows_its_heatmap(tmp_path):
    """``explain.figures.history`` on 64 weeks behind Masking: the heatmap's bins (months) and the
    customer's own monthly means of the real weeks (computed here), gaps where a month is all padding;
    ``view`` asks for every week."""
    import pandas as pd

    from explain.plots.periods import View
    from tests.support import padded

    folder = padded.write(tmp_path / "padded")
    bundle = explain.load_bundle(folder)
    cid = padded.short_customers(folder)[0]
    a = explain.explain_customers(bundle, [cid], Settings(baseline="mean", steps=8))
    heat = figures.history_heatmaps(a, bundle, 0, ids=[cid])[0][1]
    fig = figures.history(a, bundle, 0, ids=[cid])
    months = list(dict.fromkeys(w[:7] for w in padded.WEEKS))
    cells = next(t for t in heat.data if t.type == "heatmap" and t.name != "no data")
    assert drawn_x(fig.to_dict(), fig.to_dict()["data"][0]) == list(cells.x) == months  # 64 weeks: its months
    pad = a.padding["temporal"][0]
    values = np.where(pad[:, None], np.nan, bundle.inputs_for([cid])["temporal"][0].astype(np.float64))
    expected = pd.DataFrame(values).groupby([w[:7] for w in padded.WEEKS], sort=False).mean().to_numpy()
    customer = [t for t in fig.data if t.name == "customer"]
    assert len(customer) == len(padded.TEMPORAL)
    for j, line in enumerate(customer):  # three features: none folded; each chart titled by its feature
        name = fig.layout.annotations[j].text
        k = [bundle.feature_labels.get(c, c) for c in bundle.temporal_features].index(name)
        np.testing.assert_allclose(np.asarray(line.y, np.float64), expected[:, k], rtol=1e-12, equal_nan=True)
    assert np.isnan(np.asarray(customer[0].y, np.float64)[0])  # padded at the start: a gap
    weekly = figures.history(a, bundle, 0, ids=[cid], view=View("none"))
    assert drawn_x(weekly.to_dict(), weekly.to_dict()["data"][0]) == padded.WEEKS
