"""The customer's history charts at 52 and 365 periods (issue 38): few short x ticks that stand side by
side in a narrow chart, at calendar places, written once under each column; the title and the charts'
names in lines that fit; the history's first and last period said once under the charts.
(tests/browser/test_browser_history.py measures the same figures drawn by Chromium.)"""

from __future__ import annotations

import re
from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest

from explain.plots import figures
from explain.plots.periods import TICKS_AT_MOST, heatmap_plan, history_span, history_ticks
from tests.support.plotly_x import drawn_x

TITLE = "The customer's weekly history (dashed: the baseline; gaps: no data)"
WEEKS_1970 = [(date(1970, 1, 5) + timedelta(weeks=k)).isoformat() for k in range(52)]
DAYS_2025 = [(date(2025, 1, 1) + timedelta(days=k)).isoformat() for k in range(365)]
WEEKS_7_YEARS = [(date(2018, 1, 1) + timedelta(weeks=k)).isoformat() for k in range(365)]
FEATURES = ["Employed", "Share of weeks employed so far", "Orders", "Spend"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
LONGEST_TICK = 8   # characters: "Jan 2025" at most
OLD_TICK_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")


def spec_of(periods, f=2, columns=2, title=TITLE, plan=None):
    rng = np.random.default_rng(len(periods))
    values = rng.uniform(0, 5, (len(periods), len(FEATURES)))[:, :f]
    return figures.history_spec(periods, FEATURES[:f], values, baseline=values[::-1], title=title,
                                units=["0/1", "share", None, "USD"][:f], columns=columns, plan=plan)


def x_axes(spec) -> dict:
    keys = [k for k in spec["layout"] if re.fullmatch(r"xaxis\d*", k)]
    return {k: spec["layout"][k] for k in sorted(keys, key=lambda k: int(k[5:] or 1))}


CASES = {
    "52 weeks, 2 charts in 2 columns": (WEEKS_1970, 2, 2, None),
    "52 weeks, 4 charts in 3 columns": (WEEKS_1970, 4, 3, None),
    "365 days, every day": (DAYS_2025, 3, 2, None),
    "365 days, binned as the page bins them": (DAYS_2025, 4, 2, "plan"),
    "365 weeks (7 years)": (WEEKS_7_YEARS, 2, 2, None),
    "365 periods t1 to t365": ([f"t{k}" for k in range(1, 366)], 2, 2, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_few_short_ticks_once_under_each_column(case):
    periods, f, columns, plan = CASES[case]
    if plan:
        plan = heatmap_plan(periods, FEATURES[:f], np.ones((len(periods), f)))
    spec = spec_of(periods, f=f, columns=columns, plan=plan)
    axes = x_axes(spec)
    cols = min(columns, f)
    shown = []
    for j, (key, axis) in enumerate(axes.items()):
        if j >= f:
            assert axis["visible"] is False  # an empty cell of the grid: no axis drawn
            continue
        x = drawn_x(spec, spec["data"][2 * j])  # the periods, once on the first chart's axis
        assert 2 <= len(axis["tickvals"]) <= TICKS_AT_MOST, (key, axis["ticktext"])
        assert set(axis["tickvals"]) <= set(x) and axis["tickangle"] == 0
        assert all(len(text) <= LONGEST_TICK and not OLD_TICK_TEXT.search(text) for text in axis["ticktext"])
        positions = [x.index(v) for v in axis["tickvals"]]
        assert positions == sorted(positions) and positions[-1] - positions[0] >= len(x) / 2  # spread over the span
        if axis["showticklabels"]:
            shown.append(j)
    assert shown == [j for j in range(f) if j + cols >= f]  # the last chart of each column, once


def test_52_weeks_are_ticked_at_the_quarters():
    """Each tick is the first week of its month, and the text is that month (read here with pandas)."""
    axis = x_axes(spec_of(WEEKS_1970))["xaxis"]
    dates = pd.to_datetime(pd.Series(WEEKS_1970))
    for value, text in zip(axis["tickvals"], axis["ticktext"]):
        k = WEEKS_1970.index(value)
        assert text == MONTHS[dates[k].month - 1]
        assert k == 0 or dates[k - 1].month != dates[k].month
    assert axis["ticktext"] == ["Jan", "Apr", "Jul", "Oct"]


def test_ticks_name_the_year_where_they_cross_one():
    months = [f"{2024 + k // 12}-{k % 12 + 1:02d}" for k in range(24)]
    wide = history_ticks(months, 400)  # room for every 6 months with the year where it changes
    assert wide.texts == ["Jan 2024", "Jul", "Jan 2025", "Jul"] and wide.indices == [0, 6, 12, 18]
    assert history_ticks(months, 165).texts == ["2024", "2025"]  # a narrow chart: the years alone
    assert history_ticks(WEEKS_7_YEARS, 165).texts == ["2018", "2020", "2022", "2024"]


def test_ticks_of_a_short_span_and_of_labels_that_are_not_dates():
    days = [(date(2025, 3, 1) + timedelta(days=k)).isoformat() for k in range(20)]
    assert history_ticks(days, 165).texts == ["Mar 1", "Mar 8", "Mar 15"]
    long = [f"customer month number {k}" for k in range(30)]
    ticks = history_ticks(long, 165)
    assert all(len(t) <= 10 for t in ticks.texts) and ticks.texts[0] == "\u2026number 0"
    assert history_ticks(["2025-Q1", "2025-Q2", "2025-Q3", "2025-Q4", "2026-Q1", "2026-Q2"], 165).texts == \
        ["Q1 2025", "Q3", "Q1 2026"]


def test_labels_never_run_into_each_other():
    """At ``chart_px`` wide, each label (6 px a character, read by the browser test) ends 10 px before the
    next one starts, and the last one ends within the chart or the gap after it."""
    for periods in (WEEKS_1970, DAYS_2025, WEEKS_7_YEARS):
        for chart_px in (110, 165, 300, 600):
            ticks = history_ticks(periods, chart_px)
            px = chart_px / len(periods)
            starts = [i * px for i in ticks.indices]
            ends = [s + 6 * len(t) for s, t in zip(starts, ticks.texts)]
            assert all(end + 10 <= start for end, start in zip(ends, starts[1:])), (chart_px, ticks)
            assert len(ticks.indices) == 1 or ends[-1] <= chart_px + 12


def test_the_title_and_the_names_fit_and_lose_nothing():
    spec = spec_of(WEEKS_1970)
    title = spec["layout"]["title"]["text"]
    lines = title.split("<br>")
    assert lines == ["The customer&#x27;s weekly history", "(dashed: the baseline; gaps: no data)"]
    assert all(len(line) <= figures.TITLE_CHARS for line in lines)
    names = [note["text"] for note in spec["layout"]["annotations"][:2]]
    assert names[0] == "Employed (0/1)"
    assert names[1].split("<br>") == ["Share of weeks employed", "so far (share)"]
    assert spec["layout"]["margin"]["t"] >= 8 + 2 * figures.LINE_PX + 15 + 20  # room for both lines and the names
    short = spec_of(WEEKS_1970, title="History")
    assert short["layout"]["title"]["text"] == "History"


def test_the_span_is_said_once_under_the_charts():
    spec = spec_of(WEEKS_1970)
    spans = [n for n in spec["layout"]["annotations"] if n["text"] == "5 Jan 1970 to 28 Dec 1970"]
    assert len(spans) == 1 and spans[0]["y"] == 0 and spans[0]["yanchor"] == "top"
    assert history_span(DAYS_2025) == "1 Jan 2025 to 31 Dec 2025"
    assert history_span([f"2025-{m:02d}" for m in range(1, 13)]) == "Jan 2025 to Dec 2025"
    assert history_span(["t1 to t7", "t8 to t14"]) == "t1 to t14"


def test_long_histories_draw_lines_without_a_dot_per_period():
    assert {t["mode"] for t in spec_of(DAYS_2025)["data"] if t["name"] == "customer"} == {"lines"}
    assert {t["mode"] for t in spec_of(WEEKS_1970)["data"] if t["name"] == "customer"} == {"lines+markers"}
