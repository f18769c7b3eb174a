"""explain.plots.drivers: each figure draws exactly the numbers of a finished Drivers, bounded and escaped."""

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from explain.analysis import drivers as D
from explain.batch.store import Rows
from explain.plots import drivers as plots
from explain.plots.html import drivers_report

EVIL = "<img src=x onerror=alert(1)>"
PERIODS = tuple(f"d{t:03d}" for t in range(80))
LAYOUT = D.Layout((("profile", "static", ("tenure", "evil", "c2", "c3"), ("Tenure", EVIL, "C2", "C3"), None),
                   ("days", "temporal", ("calls", "usage"), ("Calls", "Usage"), PERIODS)))


@pytest.fixture(scope="module")
def result():
    rng = np.random.default_rng(0)
    n = 5000
    sa, ha = rng.normal(size=(n, 4)), rng.normal(0, 0.05, size=(n, 80, 2))
    sa[: n // 2, 0] += 2  # two reasons
    ha[n // 2:, -5:, 0] += 1
    sv, hv = rng.normal(size=(n, 4)), rng.poisson(2.0, size=(n, 80, 2)).astype(float)
    first = Rows(np.array([f"C{i}" for i in range(n)], dtype=object), rng.uniform(size=n),
                   {"profile": sv, "days": hv}, {"profile": sa, "days": ha})
    earlier = Rows(first.ids, first.prediction, first.values,
                     {"profile": sa * np.array([1.0, 1.0, 1.0, 3.0]), "days": ha})
    return D.compute(None, first, layout=LAYOUT, against=earlier)


def test_ranking_draws_the_top_features_means():
    rows = [D.Ranked(D.Feature(f"f{j}", f"F{j}", "profile", "static"), 1.0 / (j + 1), (-1) ** j / (j + 2), 0, 9)
            for j in range(20)]
    d = type("Stub", (), {"ranking": tuple(rows)})()
    fig = plots.ranking(d, top=15)
    size, direction = fig.data[0], fig.data[1]
    # the 14 largest at the top, then the other 6 in one bar holding their sums (nothing lost)
    assert list(size.y)[::-1] == [f"F{j}" for j in range(14)] + ["the other 6 features"]
    assert np.allclose(np.asarray(size.x)[::-1], [1.0 / (j + 1) for j in range(14)]
                       + [sum(1.0 / (j + 1) for j in range(14, 20))])
    assert np.allclose(np.asarray(direction.x)[::-1], [(-1) ** j / (j + 2) for j in range(14)]
                       + [sum((-1) ** j / (j + 2) for j in range(14, 20))])
    assert "top 14 of 20 (the others together)" in fig.layout.title.text
    every = plots.ranking(d, top=None)  # "Show all 20 features"
    assert list(every.data[0].y)[::-1] == [f"F{j}" for j in range(20)] and "top" not in every.layout.title.text


def test_beeswarm_draws_a_bounded_seeded_sample_of_each_feature(result):
    fig = plots.beeswarm(result, top=4, max_points=700, seed=3)
    rows = result.sample(700, 3)
    assert np.array_equal(rows, plots_sample := result.sample(700, 3)) and len(plots_sample) == 700
    shown = result.ranking[:4]
    for position, r in enumerate(shown):
        traces = [t for t in fig.data if np.all(np.abs(np.asarray(t.y) - (3 - position)) <= plots.SWARM_HEIGHT + 1e-6)]
        x = np.concatenate([np.asarray(t.x) for t in traces])
        expected = result.attributions[rows, result.column(r.feature)]
        assert sorted(x) == pytest.approx(sorted(expected[np.isfinite(expected)]), rel=1e-6)  # sent as float32
    first = fig.data[0]
    j = result.column(shown[0].feature)
    values = result.values[rows, j]
    values, shades = values[np.isfinite(values)], np.asarray(first.marker.color)
    assert shades.dtype == np.uint8 and shades.min() == 0 and shades.max() == first.marker.cmax == plots.SHADES
    order = np.lexsort((values, shades))  # by shade (256 of them: ties), then by value
    assert np.all(np.diff(values[order]) >= 0)  # colour follows the value's rank
    assert first.marker.colorscale == go.scatter.Marker(colorscale="Viridis").colorscale
    assert "700 of 5,000" in fig.layout.title.text
    ticks = list(fig.layout.yaxis.ticktext)
    assert all("<img" not in t for t in ticks)  # escaped


def test_swarm_offsets_stack_dots_of_a_bin_apart():
    x = np.array([0.0] * 5 + [1.0])
    offsets = plots._swarm(x, bins=4)
    assert len(set(offsets[:5].round(9))) == 5 and np.abs(offsets).max() == pytest.approx(plots.SWARM_HEIGHT)
    assert offsets[5] == 0


def test_dependence_draws_values_against_attributions(result):
    fig = plots.dependence(result, "calls", max_points=500)
    rows = result.sample(500, 0)
    j = result.column("calls")
    (trace,) = fig.data
    assert np.allclose(trace.x, result.values[rows, j]) and np.allclose(trace.y, result.attributions[rows, j])
    assert np.allclose(trace.marker.color, result.prediction[rows])
    assert "mean over the whole history" in fig.layout.xaxis.title.text


def test_time_profile_marks_the_recent_periods(result):
    (profile,) = result.time_profiles
    fig = plots.time_profile(profile)
    (bars,) = fig.data
    mass = profile.mean_abs * profile.customers  # each period's total |attribution| over every customer
    assert np.allclose(bars.y, 100 * mass / mass.sum())  # the bars: each period's share (what the words count)
    dark = [c for c in bars.marker.color if c == "#54278f"]
    assert len(dark) == profile.recent_periods and list(bars.marker.color[-len(dark):]) == dark
    assert np.sum(np.asarray(bars.y)[-len(dark):]) >= 90 - 1e-9 > np.sum(np.asarray(bars.y)[-len(dark) + 1:])
    assert fig.layout.bargap == 0  # 80 periods: no gaps between bars


def test_time_profile_colours_agree_with_the_words_on_a_padded_history():
    """52 weekly periods, most customers padded before their last 12 weeks: the few customers with
    early weeks have large effects there (a tall mean per customer), but those weeks hold little of
    the history's effect. The bars show each week's share, so no light bar (outside the recent
    90 %) is taller than a dark one, and the dark bars add up to the 90 % the title says."""
    n, t = 400, 52
    rng = np.random.default_rng(1)
    a = np.full((n, t, 1), np.nan)
    a[:, -12:, 0] = rng.normal(0, 0.02, (n, 12))
    a[:5, :, 0] = rng.normal(0, 0.03, (5, t))  # 5 long histories with larger effects in every week
    values = np.where(np.isnan(a), np.nan, 1.0)
    layout = D.Layout((("weeks", "temporal", ("buys",), ("Purchases",), tuple(f"w{k:02d}" for k in range(t))),))
    (profile,) = D.compute(None, Rows(np.arange(n).astype(str).astype(object), np.full(n, 0.3), {"weeks": values},
                                        {"weeks": a}), layout=layout).time_profiles
    early = np.arange(t) < t - 12
    assert np.nanmax(profile.mean_abs[early]) > np.nanmax(profile.mean_abs[~early])  # the old bars: tallest early
    (bars,) = plots.time_profile(profile).data
    y, dark = np.asarray(bars.y), np.asarray(bars.marker.color) == "#54278f"
    assert dark.sum() == profile.recent_periods and y[~dark].max() <= y[dark].min()
    assert y[dark].sum() >= 90 and f"The last {profile.recent_periods} of 52 periods hold 90 %" in \
        plots.time_profile(profile).layout.title.text


def test_segments_heatmap_draws_each_segments_mean_attributions(result):
    fig = plots.segments(result, top=6)
    (heat,) = fig.data
    columns = [result.column(r.feature) for r in result.ranking[:6]]
    z = np.asarray(heat.z)
    assert z.shape == (6, len(result.segments))  # features down, segments across
    for k, s in enumerate(result.segments):
        assert np.allclose(z[:, k], s.mean_attributions[columns])
        assert heat.x[k].startswith(plots._wrap(s.name).split("<br>")[0])
    assert heat.zmid == 0 and heat.zmax == pytest.approx(np.abs(z).max()) and heat.zmin == -heat.zmax
    sizes = plots.segment_sizes(result)
    assert list(sizes.data[0].x)[::-1] == [s.size for s in result.segments]


def test_drift_colours_only_changes_beyond_noise(result):
    fig = plots.drift(result.drift)
    (bars,) = fig.data
    by_label = dict(zip(bars.y, bars.marker.color))
    assert by_label["C3"] == plots.BLUE  # C3 weighed three times as much before: it lost weight
    assert {c for label, c in by_label.items() if label != "C3"} == {plots.GREY}
    row = next(r for r in result.drift.rows if r.feature.name == "c3")
    k = list(bars.y).index("C3")
    assert bars.x[k] == pytest.approx(row.change)
    assert bars.error_x.array[k] == pytest.approx(row.high - row.change)


def test_the_html_report_is_escaped_and_holds_every_figure(result):
    text = drivers_report(result)
    assert EVIL not in text and "&lt;img src=x" in text
    assert text.count("class=\"plotly-graph-div\"") == 6 and text.count("plotly.js v") == 1
    json.dumps(result.to_dict())
