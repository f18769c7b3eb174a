"""Figure builders: honest colour (centred, symmetric, shared), escaping, ordering."""

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from explain.plots import diagnostics as diagnostic_figures
from explain.plots import figures

PERIODS = [f"2025-{m:02d}" for m in range(1, 7)]
FEATURES = ["usage", "calls", "late"]
EVIL = "<img src=x onerror=alert(1)>"


def _heatmaps(fig):
    return [t for t in fig.data if isinstance(t, go.Heatmap)]


def _attr(seed=0, scale=1.0):
    return np.random.default_rng(seed).normal(size=(len(PERIODS), len(FEATURES))) * scale


@pytest.mark.parametrize("build", [figures.temporal_heatmap, figures.temporal_panel])
def test_heatmap_is_centred_on_zero_with_symmetric_limits(build):
    a = _attr() + 0.7  # mostly positive: an automatic range would not be centred
    fig = build(PERIODS, FEATURES, a, values=a * 10, units=["GB", "calls", ""])
    (heat,) = _heatmaps(fig)
    m = np.abs(a).max()
    assert heat.zmid == 0
    assert heat.zmin == pytest.approx(-m) and heat.zmax == pytest.approx(m)
    assert heat.colorscale == go.Heatmap(colorscale="RdBu_r").colorscale  # red = raises
    assert "raises" in heat.colorbar.title.text and "lowers" in heat.colorbar.title.text
    # periods on x, features on y, z is features x periods
    assert list(heat.x) == PERIODS and list(heat.y) == FEATURES
    assert np.asarray(heat.z).shape == (len(FEATURES), len(PERIODS))


def test_heatmap_hover_has_period_feature_value_baseline_attribution():
    a = _attr()
    fig = figures.temporal_heatmap(PERIODS, FEATURES, a, values=a * 0 + 3, baseline=a * 0 + 1,
                                   units={"usage": "GB"})
    heat = _heatmaps(fig)[0]
    template = heat.hovertemplate  # built in the browser from the cell: period, feature from the axes
    assert "period: %{x}" in template and "feature: <b>%{y}</b>" in template and "%{z:+.4g}" in template
    assert "value: %{customdata[0]:.4g}" in template and "baseline: %{customdata[1]:.4g}" in template
    custom = np.asarray(heat.customdata)  # (F, T, value and baseline)
    assert custom.shape == (3, 6, 2)
    np.testing.assert_array_equal(custom[..., 0], 3)
    np.testing.assert_array_equal(custom[..., 1], 1)
    np.testing.assert_allclose(np.asarray(heat.z), a.T)  # %{z}: the attribution of the cell
    assert list(heat.x)[1] == "2025-02" and list(heat.y)[0] == "usage"
    assert list(heat.text[0]) == ["GB"] * 6 and set(heat.text[1]) == {""}  # the rows' units, alone
    assert "%{customdata[0]:.4g} %{text}" in template
    one = _heatmaps(figures.temporal_heatmap(PERIODS, FEATURES, a, values=a, units={f: "GB" for f in FEATURES}))[0]
    assert one.text is None and "%{customdata[0]:.4g} GB" in one.hovertemplate  # one unit: said in the template


def test_all_zero_attributions_still_get_a_valid_symmetric_scale():
    (heat,) = _heatmaps(figures.temporal_heatmap(PERIODS, FEATURES, np.zeros((6, 3))))
    assert heat.zmin == -heat.zmax and heat.zmax > 0


def test_compare_figures_share_one_scale():
    a, b = _attr(1), _attr(2, scale=3.0)
    fig_a, fig_b, fig_diff = figures.compare_figures(PERIODS, FEATURES, a, b, names=("C1", "C2"))
    ha, hb, hd = _heatmaps(fig_a)[0], _heatmaps(fig_b)[0], _heatmaps(fig_diff)[0]
    m = max(np.abs(a).max(), np.abs(b).max())
    assert (ha.zmin, ha.zmax) == (hb.zmin, hb.zmax) == pytest.approx((-m, m))
    assert ha.zmid == hb.zmid == hd.zmid == 0
    np.testing.assert_allclose(np.asarray(hd.z), (a - b).T)
    assert hd.zmax == pytest.approx(np.abs(a - b).max()) and hd.zmin == -hd.zmax
    assert list(hd.x) == PERIODS  # aligned by period


def test_feature_names_are_escaped_everywhere():
    names = [EVIL, "calls", "late"]
    a = _attr()
    built = [
        figures.temporal_heatmap(PERIODS, names, a, values=a),
        figures.temporal_panel(PERIODS, names, a, values=a),
        figures.static_bars(names, [0.1, -0.2, 0.3], [1, 2, 3], units=["<b>u</b>", "", ""]),
        figures.history_figure(PERIODS, names, a),
        *figures.compare_figures(PERIODS, names, a, a, names=(EVIL, "B")),
        figures.compare_static(names, [1, 2, 3], [3, 2, 1], names=(EVIL, "B")),
        figures.feature_ranking(names, [1, 2, 3], [1, -2, 3]),
        figures.magnitude_heatmap(PERIODS, names, np.abs(a)),
    ]
    for fig in built:
        spec = fig.to_json()
        assert "<img" not in json.loads(spec).__repr__(), type(fig)
        assert "&lt;img src=x onerror=alert(1)&gt;" in json.loads(spec).__repr__()


def test_static_bars_sorted_by_signed_value():
    attr = np.array([0.3, -0.5, 0.1, 0.0, -0.05])
    names = ["a", "b", "c", "d", "e"]
    fig = figures.static_bars(names, attr, values=[1, 2, 3, 4, 5], units=["months", "", "", "", ""])
    bar = fig.data[0]
    np.testing.assert_allclose(bar.x, np.sort(attr))  # bottom to top: most negative ... most positive
    assert bar.y[-1].startswith("a = 1 months") and bar.y[0].startswith("b = 2")
    assert bar.marker.color[-1] == figures.RED and bar.marker.color[0] == figures.BLUE


def test_magnitude_heatmap_is_sequential_from_zero():
    (heat,) = _heatmaps(figures.magnitude_heatmap(PERIODS, FEATURES, np.abs(_attr())))
    assert heat.zmin == 0 and heat.zmid is None


def test_delta_by_steps_uses_log_axes():
    fig = diagnostic_figures.delta_by_steps([4, 8, 16], {"gausslegendre": [1e-2, 1e-4, 0.0], "left": [0.1, 0.05, 0.02]},
                                 tolerance=1e-3)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert len(fig.data) == 2 and min(fig.data[0].y) > 0


def test_html_report_is_standalone_and_escapes_names():
    from explain.analysis import report
    from explain.analysis.explainer import explain_customers
    from explain.bundle.load import Bundle
    from explain.core.settings import Settings
    from explain.plots import html as html_report
    from tests.support import models

    inputs = models.data(n=3)
    names = [EVIL, "s1", "s2", "s3", "s4"]
    bundle = Bundle.from_arrays(models.lstm_model(), inputs["static"], inputs["temporal"],
                                ids=["<b>C1</b>", "C2", "C3"], static_features=names,
                                temporal_features=[EVIL, "t1", "t2"])
    request = Settings(baseline="zero", steps=16)
    ids = ["<b>C1</b>"]
    attribution = explain_customers(bundle, ids, request)
    fig = figures.temporal_heatmap(bundle.periods, bundle.temporal_labels, attribution.temporal[0])
    html = html_report.html_report(attribution, bundle, ids, 0, request, [("Monthly", fig)])
    assert html.startswith("<!DOCTYPE html>")
    assert "<script src=" not in html and html.count("Plotly.newPlot") == 1  # plotly.js inline
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<b>C1</b>" not in html and "&lt;b&gt;C1&lt;/b&gt;" in html
    assert report.delta_status(float(attribution.delta[0]), float(attribution.prediction[0]),
                               float(attribution.baseline_prediction[0]))[0] in html
