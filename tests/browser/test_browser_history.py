"""The customer's history charts at 52 and 365 periods drawn by Chromium (issue 38): at the narrowest
width planned for (360 px: half of a 1280 px page's main column) and at full width, no two tick
labels of a chart overlap, each one lies inside the figure, and the title and the charts' names stay
inside it. Measured on Plotly's own SVG (the boxes of its text elements), not on the figure dict."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import plotly.io as pio
import pytest

from explain.plots import figures
from explain.plots.periods import heatmap_plan
from tests.browser.served import require_chromium

pytestmark = pytest.mark.browser
require_chromium(module=True)

WEEKS = [(date(1970, 1, 5) + timedelta(weeks=k)).isoformat() for k in range(52)]
DAYS = [(date(2025, 1, 1) + timedelta(days=k)).isoformat() for k in range(365)]
NAMES = ["Employed", "Share of weeks employed so far", "Support calls", "Data usage"]
TITLE = "The customer's weekly history (dashed: the baseline; gaps: no data)"
BOXES = """() => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.right, r.top, r.bottom]; };
  const ticks = {};
  document.querySelectorAll('g.xaxislayer-above text').forEach(t => {  // g.xtick, g.x2tick, ...: one per axis
    const axis = t.parentNode.getAttribute('class');
    (ticks[axis] = ticks[axis] || []).push({text: t.textContent, box: box(t)});
  });
  return {ticks, title: box(document.querySelector('.gtitle')),
          names: Array.from(document.querySelectorAll('.annotation-text')).map(box),
          figure: box(document.querySelector('.main-svg'))};
}"""


def drawn(browser, fig, width):
    fig.update_layout(width=width)
    page = browser.new_page(viewport={"width": width + 40, "height": 900})
    try:
        page.set_content(pio.to_html(fig, include_plotlyjs=True, full_html=True))
        page.wait_for_function("document.querySelectorAll('g.xaxislayer-above text').length > 0", timeout=20_000)
        return page.evaluate(BOXES)
    finally:
        page.close()


def figure(periods, f, plan=False):
    rng = np.random.default_rng(0)
    values = rng.uniform(0, 1, (len(periods), f))
    values[40:] = np.nan  # a history that stops (padded at the end)
    made = heatmap_plan(periods, NAMES[:f], rng.normal(size=(len(periods), f))) if plan else None
    return figures.history_figure(periods, NAMES[:f], values, baseline=np.full_like(values, 0.5), title=TITLE,
                                  columns=2, plan=made)


@pytest.mark.parametrize("width", [360, 1280])
@pytest.mark.parametrize("case", ["52 weeks", "365 days", "365 days binned"])
def test_history_ticks_title_and_names_fit(browser, case, width):
    periods, f, plan = {"52 weeks": (WEEKS, 2, False), "365 days": (DAYS, 4, False),
                        "365 days binned": (DAYS, 4, True)}[case]
    seen = drawn(browser, figure(periods, f, plan), width)
    left, right = seen["figure"][0], seen["figure"][1]
    assert len(seen["ticks"]) == 2  # the last chart of each of the two columns carries the labels
    for axis, ticks in seen["ticks"].items():
        assert 2 <= len(ticks) <= 6, (axis, [t["text"] for t in ticks])
        boxes = sorted(t["box"] for t in ticks)
        for a, b in zip(boxes, boxes[1:]):
            assert a[1] + 2 <= b[0], (case, width, axis, [t["text"] for t in ticks])  # no overlap, 2 px apart
        assert boxes[0][0] >= left - 1 and boxes[-1][1] <= right + 1
    assert left - 1 <= seen["title"][0] and seen["title"][1] <= right + 1, seen["title"]
    for name in seen["names"]:
        assert left - 1 <= name[0] and name[1] <= right + 1, name
