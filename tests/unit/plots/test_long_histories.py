"""Long histories in heatmaps (explain.plots.periods): 365 days x 24 features become readable, the
numbers drawn are the exact sums of the cells they stand for, and short histories stay as they were."""

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from explain.plots import figures
from explain.plots import periods as P
from tests.support.plotly_x import drawn_x

DAYS = [d.strftime("%Y-%m-%d") for d in pd.date_range("2025-01-01", periods=365)]
FEATURES = [f"feature {j}" for j in range(24)]


def _heat(fig):
    return [t for t in fig.data if isinstance(t, go.Heatmap) and t.name != "no data"][0]


@pytest.fixture(scope="module")
def year():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 0.01, size=(365, 24))
    a[:, 5] *= 30  # feature 5 weighs most, then 17
    a[:, 17] *= 10
    a[200, 3] = 5.0  # one extreme cell
    values = rng.uniform(0, 10, size=(365, 24))
    return a, values


def test_a_year_of_days_is_shown_as_weeks_with_exact_sums(year):
    a, values = year
    fig = figures.temporal_panel(DAYS, FEATURES, a, values=values, plan=P.heatmap_plan(DAYS, FEATURES, a))
    heat = _heat(fig)
    weeks = pd.to_datetime(pd.Series(DAYS)).dt.strftime("%G-W%V")
    labels = list(dict.fromkeys(weeks))
    assert list(heat.x) == labels and len(labels) == 53
    rows = list(heat.y)
    assert rows[:2] == ["feature 5", "feature 17"] and rows[-1] == "the other 13 features" and len(rows) == 12
    z = np.asarray(heat.z)  # (rows, weeks)
    reference = pd.DataFrame(a, columns=FEATURES).groupby(weeks.to_numpy(), sort=False).sum()
    for r, name in enumerate(rows[:-1]):
        np.testing.assert_allclose(z[r], reference[name].to_numpy(), atol=1e-12)
    shown = [n for n in rows[:-1]]
    folded = [f for f in FEATURES if f not in shown]
    np.testing.assert_allclose(z[-1], reference[folded].sum(axis=1).to_numpy(), atol=1e-12)
    assert z.sum() == pytest.approx(a.sum())  # nothing lost
    assert heat.xgap == 0  # no white gaps between narrow cells
    # the hover is built in the browser: the value of each cell from customdata (float32: the mean of the bin's
    # days, computed here), the attribution from z, no text per cell
    assert heat.text is None and "feature: <b>%{y}</b>" in heat.hovertemplate
    assert "value: %{customdata[0]:.4g}" in heat.hovertemplate and "%{z:+.4g}" in heat.hovertemplate
    week_mean = pd.DataFrame(values, columns=FEATURES).groupby(weeks.to_numpy(), sort=False).mean()
    custom = np.asarray(heat.customdata)  # (rows, weeks, value)
    assert custom.shape == (12, 53, 1) and custom.dtype == np.float32
    for r, name in enumerate(rows[:-1]):
        np.testing.assert_allclose(custom[r, :, 0], week_mean[name].to_numpy(), rtol=1e-6)
    assert np.isnan(custom[-1, :, 0]).all()  # the folded row: values of different features do not add up
    # the period in the hover: the bin's label, from the axis (the axis title says the bins are weeks)
    assert heat.hovertemplate.startswith("period: %{x}<br>") and list(heat.x)[1] == "2025-W02"
    axis = fig.layout["xaxis" + heat.xaxis[1:]]  # the heatmap's own axis in the panel
    assert "365 days shown as 53 weeks, each cell the sum of its days" in axis.title.text
    assert "the other 13 of 24 features summed in the last row" in axis.title.text
    assert fig.layout.height < 900  # 12 rows, not 24


def test_one_extreme_cell_does_not_set_the_colour_range(year):
    a, _ = year
    heat = _heat(figures.temporal_heatmap(DAYS, FEATURES, a, plan=P.heatmap_plan(DAYS, FEATURES, a)))
    cells = np.abs(np.asarray(heat.z))
    assert heat.zmax < cells.max() / 3 and heat.zmin == -heat.zmax
    assert heat.zmax == pytest.approx(np.percentile(cells[cells > 0], 99))
    assert "99 % of<br>the cells are<br>within" in heat.colorbar.title.text


def test_padding_stays_no_data_in_the_bins():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(365, 3))
    padding = np.zeros(365, bool)
    padding[:100] = True  # the first 100 days are padding
    a[padding] = 0.0
    plan = P.heatmap_plan(DAYS, ["x", "y", "z"], a, padding=padding)
    fig = figures.temporal_heatmap(DAYS, ["x", "y", "z"], a, plan=plan)
    heat = _heat(fig)
    grey = next(t for t in fig.data if t.name == "no data")
    weeks = pd.to_datetime(pd.Series(DAYS)).dt.strftime("%G-W%V").to_numpy()
    empty = [w for w in dict.fromkeys(weeks) if padding[weeks == w].all()]
    z = np.asarray(heat.z)
    assert np.isnan(z[:, :len(empty)]).all() and not np.isnan(z[:, len(empty):]).any()
    assert np.isfinite(np.asarray(grey.z, float)[:, :len(empty)]).all()


@pytest.mark.parametrize("periods, expected", [
    ([f"{y}-{m:02d}" for y in range(2015, 2025) for m in range(1, 13)], ["2015-Q1", "2015-Q2"]),
    ([f"t{k}" for k in range(100)], ["t0 to t1", "t2 to t3"]),
    ([d.strftime("%Y-%m-%d") for d in pd.date_range("2020-01-01", periods=700)], ["2020-01", "2020-02"]),
])
def test_the_bin_comes_from_the_labels(periods, expected):
    which, labels, ranges, _ = P.bins(periods)
    assert labels[:2] == expected and len(labels) <= P.MAX_PERIODS
    assert which.tolist() == sorted(which.tolist())


def test_short_histories_are_drawn_as_before():
    periods = [f"2025-{m:02d}" for m in range(1, 13)]
    a = np.random.default_rng(2).normal(size=(12, 6))
    heat = _heat(figures.temporal_heatmap(periods, list("abcdef"), a))
    assert list(heat.x) == periods and list(heat.y) == list("abcdef")
    assert heat.zmax == pytest.approx(np.abs(a).max()) and heat.xgap == 1
    np.testing.assert_array_equal(np.asarray(heat.z), a.T)


def test_compared_heatmaps_share_bins_rows_and_scale_and_what_if_marks_the_bin(year):
    a, _ = year
    b = a[::-1].copy()
    first, second, diff = figures.compare_figures(DAYS, FEATURES, a, b, names=("A", "B"),
                                                  plan=P.compare_plan(DAYS, FEATURES, a, b))
    h1, h2, hd = _heat(first), _heat(second), _heat(diff)
    assert list(h1.x) == list(h2.x) == list(hd.x) and list(h1.y) == list(h2.y) == list(hd.y)
    assert h1.zmax == h2.zmax
    np.testing.assert_allclose(np.asarray(hd.z), np.asarray(h1.z) - np.asarray(h2.z), atol=1e-12)
    changed = np.zeros((365, 24), bool)
    changed[40, 5] = True  # 2025-02-10: week 2025-W07
    original, edited, change = figures.whatif_figures(DAYS, FEATURES, a, b, changed=changed,
                                                      plan=P.compare_plan(DAYS, FEATURES, b, a))
    marks = [t for t in edited.data if isinstance(t, go.Scatter)][0]
    assert list(marks.x) == ["2025-W07"] and list(marks.y) == ["feature 5"]


def test_the_figures_draw_the_plan_they_are_given(year):
    """A figure draws its caller's plan (here by month, zoomed to the first half-year) and makes none of its own:
    the heatmap, the panel and the compared heatmaps show that plan's bins and rows."""
    a, _ = year
    plan = P.heatmap_plan(DAYS, FEATURES, a, view=P.View("month", 0, 180))
    months = [f"2025-{m:02d}" for m in range(1, 7)]
    assert plan.labels == months
    drawn = (figures.temporal_heatmap(DAYS, FEATURES, a, plan=plan),
             figures.temporal_panel(DAYS, FEATURES, a, plan=plan),
             *figures.compare_figures(DAYS, FEATURES, a, a[::-1], plan=plan))
    for fig in drawn:
        heat = _heat(fig)
        assert list(heat.x) == months and list(heat.y) == plan.row_names(FEATURES)


# ----------------------------------------------------------------------------- the history's lines follow the heatmap


def _lines(spec, name="customer"):
    return [np.asarray(t["y"], np.float64) for t in spec["data"] if t["name"] == name]


def test_a_long_history_is_drawn_in_the_heatmaps_bins_and_rows_as_means(year):
    """The history's lines: the features of the heatmap's own rows (the folded ones not drawn), in
    its order, each point the mean of its week's days with data (computed here with pandas, padded
    days left out; a week of padding is a gap), the baseline the same; the title says so."""
    a, values = year
    pad = np.arange(365) < 40  # padded at the start: 5 weeks and 5 days
    base = values[::-1].copy()
    plan = P.heatmap_plan(DAYS, FEATURES, a, padding=pad)
    spec = figures.history_spec(DAYS, FEATURES, np.where(pad[:, None], np.nan, values),
                                baseline=np.where(pad[:, None], np.nan, base), plan=plan, title="History", columns=2)
    kept = [j for j in plan.rows if j is not None]
    assert len(kept) == 11 and kept[:2] == [5, 17]  # the heatmap's rows, largest first
    *titles, span, note = spec["layout"]["annotations"]  # a chart's title per feature, the span, the note
    assert [n["text"] for n in titles] == [FEATURES[j] for j in kept]
    assert span["text"] == "1 Jan 2025 to 31 Dec 2025"  # the days binned, not the bins' ISO weeks
    weeks = pd.to_datetime(pd.Series(DAYS)).dt.strftime("%G-W%V").to_numpy()
    for drawn, source in ((_lines(spec), values), (_lines(spec, "baseline"), base)):
        expected = pd.DataFrame(np.where(pad[:, None], np.nan, source)).groupby(weeks, sort=False).mean()
        assert len(drawn) == 11
        for line, j in zip(drawn, kept):
            np.testing.assert_allclose(line, expected[j].to_numpy(), rtol=1e-12, equal_nan=True)
        assert np.isnan(drawn[0][:6]).all() and not np.isnan(drawn[0][6:]).any()  # 6 weeks of padding: gaps
    assert all(drawn_x(spec, t) == list(dict.fromkeys(weeks)) for t in spec["data"])
    assert all("x" not in t for t in spec["data"])  # the periods sent once, not per line
    title = note["text"]
    assert spec["layout"]["title"]["text"] == "History"
    assert "365 days shown as 53 weeks, each point the mean of its days" in title
    assert "the 11 of 24 features with the largest effects" in title


def test_the_history_follows_the_zoom_and_the_bin_asked_for(year):
    a, values = year
    plan = P.heatmap_plan(DAYS, FEATURES, a, view=P.View("none", 59, 89))  # March, day by day
    spec = figures.history_spec(DAYS, FEATURES, values, plan=plan)
    kept = [j for j in plan.rows if j is not None]
    assert drawn_x(spec, spec["data"][0]) == DAYS[59:90]
    np.testing.assert_array_equal(_lines(spec)[0], values[59:90, kept[0]])
    assert "2025-03-01 to 2025-03-31, 31 of 365 days" in spec["layout"]["annotations"][-1]["text"]


def test_a_short_history_draws_every_period_and_feature_as_before():
    rng = np.random.default_rng(1)
    periods, features = [f"2025-{m:02d}" for m in range(1, 13)], ["a", "b <i>", "c"]
    values = rng.uniform(size=(12, 3))
    plan = P.heatmap_plan(periods, features, rng.normal(size=(12, 3)))
    assert json.dumps(figures.history_spec(periods, features, values, plan=plan, title="t"), default=list) == \
        json.dumps(figures.history_spec(periods, features, values, title="t"), default=list)


@pytest.mark.parametrize("titles", [("a", "b<i>", "", "d"), ("x", "y", "z", "w"), ("", "", "only", "")])
def test_a_subplot_grid_made_once_carries_each_figures_own_titles(titles):
    """The grid is cached by the titles' places: each set of texts gives make_subplots' own layout."""
    from plotly.subplots import make_subplots

    expected = make_subplots(rows=2, cols=2, subplot_titles=titles, vertical_spacing=0.1).to_dict()["layout"]
    expected.pop("template")
    assert figures.subplots_layout(rows=2, cols=2, subplot_titles=list(titles), vertical_spacing=0.1) == expected
