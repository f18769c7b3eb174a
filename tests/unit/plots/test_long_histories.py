"""Long histories in heatmaps (explain.plots.periods): 365 days x 24 features become readable, the
numbers drawn are the exact sums of the cells they stand for, and short histories stay as they were."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from explain.plots import figures
from explain.plots import periods as P

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
    fig = figures.temporal_panel(DAYS, FEATURES, a, values=values)
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
    assert "period: 2025-01-06 to 2025-01-12" in heat.text[0][1]  # the raw range in the hover
    week_mean = pd.DataFrame(values, columns=FEATURES).groupby(weeks.to_numpy(), sort=False).mean()
    assert f"value: {week_mean['feature 5'].iloc[1]:.4g}" in heat.text[0][1]
    axis = fig.layout["xaxis" + heat.xaxis[1:]]  # the heatmap's own axis in the panel
    assert "365 days shown as 53 weeks, each cell the sum of its days" in axis.title.text
    assert "the other 13 of 24 features summed in the last row" in axis.title.text
    assert fig.layout.height < 900  # 12 rows, not 24


def test_one_extreme_cell_does_not_set_the_colour_range(year):
    a, _ = year
    heat = _heat(figures.temporal_heatmap(DAYS, FEATURES, a))
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
    fig = figures.temporal_heatmap(DAYS, ["x", "y", "z"], a, padding=padding)
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
    first, second, diff = figures.compare_figures(DAYS, FEATURES, a, b, names=("A", "B"))
    h1, h2, hd = _heat(first), _heat(second), _heat(diff)
    assert list(h1.x) == list(h2.x) == list(hd.x) and list(h1.y) == list(h2.y) == list(hd.y)
    assert h1.zmax == h2.zmax
    np.testing.assert_allclose(np.asarray(hd.z), np.asarray(h1.z) - np.asarray(h2.z), atol=1e-12)
    changed = np.zeros((365, 24), bool)
    changed[40, 5] = True  # 2025-02-10: week 2025-W07
    original, edited, change = figures.whatif_figures(DAYS, FEATURES, a, b, changed=changed)
    marks = [t for t in edited.data if isinstance(t, go.Scatter)][0]
    assert list(marks.x) == ["2025-W07"] and list(marks.y) == ["feature 5"]
