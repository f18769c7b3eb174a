"""A customer's 365 days x 24 features in a real browser at 1280x720 (tests/support/year.py): the
heatmap is drawn as 53 weeks x 12 rows without cell gaps, the bin/zoom control above it changes
the bin (months) and the range (down to one day) in the browser, and the view is saved as a
screenshot (tests/screenshots/heatmap-365.png; docs/img/heatmap-365.png is a copy of it)."""

import pytest

from tests.browser.served import SHOTS, require_chromium, serve, wait_idle
from tests.support import year

pytestmark = pytest.mark.browser
require_chromium(module=True)

LAPTOP = {"width": 1280, "height": 720}
HEATMAP = """() => {
  const g = document.querySelector('[class*="st-key-plot-temporal_heatmap"] .js-plotly-plot');
  const h = g && (g._fullData || []).find(t => t.type === 'heatmap' && t.name !== 'no data');
  return h ? {x: Array.from(h.x), y: Array.from(h.y), xgap: h.xgap} : null;
}"""


@pytest.fixture(scope="module")
def long_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("year")
    bundle = year.write(root / "bundle")
    with serve(root, "--bundle", str(bundle)) as url:
        yield url


def drawn(page, count: int) -> dict:
    """The heatmap once it shows ``count`` columns."""
    page.wait_for_function(f"() => {{ const h = ({HEATMAP})(); return h && h.x.length === {count}; }}",
                           timeout=120_000)
    wait_idle(page)
    return page.evaluate(HEATMAP)


def test_a_year_of_days_is_readable_and_the_reader_changes_the_bin_and_the_range(long_server, browser):
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    try:
        page.goto(f"{long_server}/?customer=Y000")
        heat = drawn(page, 53)
        planted = {"Support calls", "Data usage (GB)", "Late payments"}  # Y000 has all three reasons
        assert set(heat["y"][:3]) == planted and heat["y"][-1] == "the other 13 features" and heat["xgap"] == 0
        control = page.locator('[class*="st-key-w_view_customer_temporal_bin"]')
        plot = page.locator('[class*="st-key-plot-temporal_heatmap"]')
        control.evaluate("e => e.scrollIntoView({block: 'start'})")  # the control at the top, the heatmap below
        page.wait_for_timeout(800)
        chart = plot.bounding_box()
        assert chart["y"] + chart["height"] <= LAPTOP["height"] + 1  # the control and the whole heatmap on one screen
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "heatmap-365.png"))

        control.get_by_text("months", exact=True).click()
        heat = drawn(page, 12)
        assert heat["x"][:2] == ["2025-01", "2025-02"]

        control.get_by_text("days", exact=True).click()
        drawn(page, 365)
        thumbs = page.locator("[data-testid=stMain]").get_by_role("slider")
        thumbs.first.focus()
        page.keyboard.press("End")  # the start of the range moves to the end: one day left
        heat = drawn(page, 1)
        assert heat["x"] == [year.DAYS[-1]]
    finally:
        context.close()
