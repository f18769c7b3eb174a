"""Long histories binned and zoomed (explain.plots.periods.plan): the bins a reader may choose come
from the labels, every bin's attribution is exactly the sum of its periods (per feature, per bin,
in total: completeness survives binning), a zoom keeps exactly the periods chosen, and a long
ranking is cut to its top with the rest summed in one row."""

import numpy as np
import pandas as pd
import pytest

from explain.plots import periods as P

DAYS = [d.strftime("%Y-%m-%d") for d in pd.date_range("2025-01-01", periods=365)]
WEEKS = [d.strftime("%Y-%m-%d") for d in pd.date_range("2024-01-01", periods=104, freq="7D")]
MONTHS = [f"{y}-{m:02d}" for y in range(2016, 2026) for m in range(1, 13)]


@pytest.fixture(scope="module")
def year():
    """365 x 24 attributions that are whole multiples of 2**-10: every sum of them is exact in
    float64 whatever its order, so binned sums can be compared with ==."""
    rng = np.random.default_rng(4)
    return rng.integers(-500, 500, size=(365, 24)).astype(np.float64) / 1024


def _reference(labels, a, key):
    """Per bin sums by pandas' own calendar (independent of the code under test)."""
    dates = pd.to_datetime(pd.Series(labels))
    return pd.DataFrame(a).groupby(key(dates).to_numpy(), sort=False).sum()


@pytest.mark.parametrize("periods, expected", [
    (DAYS, ["auto", "none", "week", "month", "quarter"]),
    (WEEKS, ["auto", "none", "month", "quarter", "year"]),
    (MONTHS, ["auto", "none", "quarter", "year"]),
    ([f"t{k}" for k in range(100)], ["auto", "none"]),
])
def test_the_bins_offered_are_those_the_labels_allow(periods, expected):
    assert P.bin_choices(periods) == expected  # one year of days: no "year" (a single bin)


@pytest.mark.parametrize("unit, key", [
    ("week", lambda d: d.dt.strftime("%G-W%V")),
    ("month", lambda d: d.dt.strftime("%Y-%m")),
    ("quarter", lambda d: d.dt.year.astype(str) + "-Q" + d.dt.quarter.astype(str)),
])
def test_binned_sums_equal_the_raw_sums_exactly(year, unit, key):
    features = [f"f{j}" for j in range(24)]
    plan = P.heatmap_plan(DAYS, features, year, view=P.View(unit), top=100)  # no folding here
    shown = plan.sums(year)
    reference = _reference(DAYS, year, key)
    assert plan.labels == list(reference.index)
    assert np.array_equal(shown, reference.to_numpy())          # per feature and per bin
    assert np.array_equal(shown.sum(axis=0), year.sum(axis=0))  # every feature's total over the history
    assert shown.sum() == year.sum()                            # the customer's total (completeness)
    first = np.flatnonzero(np.asarray(key(pd.to_datetime(pd.Series(DAYS)))) == plan.labels[1])
    assert plan.ranges[1] == f"{DAYS[first[0]]} to {DAYS[first[-1]]}"  # the hover's raw period range


def test_folded_features_keep_the_total_and_the_folded_row_is_their_sum(year):
    features = [f"f{j}" for j in range(24)]
    plan = P.heatmap_plan(DAYS, features, year, view=P.View("month"))
    shown = plan.sums(year)
    assert shown.shape == (12, P.TOP_FEATURES) and plan.row_names(features)[-1] == "the other 13 features"
    assert shown.sum() == year.sum()
    by_month = _reference(DAYS, year, lambda d: d.dt.strftime("%Y-%m")).to_numpy()
    assert np.array_equal(shown[:, -1], by_month[:, plan.folded].sum(axis=1))
    kept = [j for j in plan.rows if j is not None]
    importance = np.abs(year).sum(axis=0)
    assert sorted(importance[kept]) == sorted(np.sort(importance)[-len(kept):])  # the largest are shown


def test_a_zoom_keeps_exactly_the_periods_chosen(year):
    features = [f"f{j}" for j in range(24)]
    plan = P.heatmap_plan(DAYS, features, year, view=P.View("none", 31, 58), top=100)  # February
    assert plan.labels == DAYS[31:59] and plan.labels[0] == "2025-02-01" and plan.labels[-1] == "2025-02-28"
    assert np.array_equal(plan.sums(year), year[31:59])
    assert "2025-02-01 to 2025-02-28, 28 of 365 days" in plan.note
    auto = P.heatmap_plan(DAYS, features, year, view=P.View("auto", 31, 58), top=100)
    assert auto.labels == DAYS[31:59]  # 28 periods: auto bins nothing
    weeks = P.heatmap_plan(DAYS, features, year, view=P.View("week", 100, 199), top=100)
    zoomed = _reference(DAYS[100:200], year[100:200], lambda d: d.dt.strftime("%G-W%V"))
    assert weeks.labels == list(zoomed.index) and np.array_equal(weeks.sums(year), zoomed.to_numpy())
    assert weeks.sums(year).sum() == year[100:200].sum()
    assert (weeks.which[:100] == -1).all() and (weeks.which[200:] == -1).all()


def test_padding_is_no_data_in_bins_and_means_count_real_periods_only():
    rng = np.random.default_rng(5)
    a = rng.integers(-50, 50, size=(365, 3)).astype(np.float64) / 64
    values = rng.uniform(0, 10, size=(365, 3))
    padding = np.zeros(365, bool)
    padding[:45] = True  # January and half of February: no data
    a[padding] = np.nan
    plan = P.heatmap_plan(DAYS, ["x", "y", "z"], a, padding=padding, view=P.View("month"))
    assert plan.padding.tolist() == [True] + [False] * 11
    shown = plan.sums(a)
    by_month = _reference(DAYS, np.nan_to_num(a), lambda d: d.dt.strftime("%Y-%m")).to_numpy()
    assert np.array_equal(shown[1:], by_month[1:])
    means = plan.means(values)
    assert np.isnan(means[0]).all()
    np.testing.assert_allclose(means[1], values[45:59].mean(axis=0))  # February: its 14 real days only


def test_unknown_bins_are_refused_in_words():
    with pytest.raises(ValueError, match="cannot be binned by 'week'"):
        P.bins([f"t{k}" for k in range(100)], unit="week")


def test_a_long_ranking_is_cut_to_its_top_with_the_rest_summed():
    size = np.arange(1, 41, dtype=np.float64)  # feature j weighs j + 1
    signed = np.where(np.arange(40) % 2, size, -size)
    cut = P.fold_ranking(size, size, signed, top=15)
    assert cut.rows[:14] == list(range(39, 25, -1)) and cut.rows[-1] is None
    assert cut.names([f"f{j}" for j in range(40)])[-1] == "the other 26 features"
    assert cut.columns[0][-1] == size[:26].sum() and cut.columns[1][-1] == signed[:26].sum()
    assert cut.columns[0].sum() == size.sum()  # nothing lost
    whole = P.fold_ranking(size, size, top=None)
    assert len(whole.rows) == 40 and None not in whole.rows


def test_bins_are_read_once_per_set_of_labels_and_each_caller_gets_its_own_copy():
    days = [str(d.date()) for d in pd.date_range("2024-01-01", periods=365)]
    first = P.bins(days)
    first[0][:] = 0
    first[1].append("changed")
    first[2].clear()
    choices = P.bin_choices(days)
    choices.append("changed")
    again = P.bins(list(days))  # another list of the same labels: the same answer, untouched by the caller above
    assert again[3] == "week" and len(again[1]) == 53 and again[0][-1] == 52 and len(again[2]) == 53
    assert P.bin_choices(days) == ["auto", "none", "week", "month", "quarter"]
    assert P.bins(days[:3])[1] == days[:3]  # other labels, another answer
