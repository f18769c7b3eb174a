"""The What drives churn page in a real browser (Chromium: tests/browser/conftest.py) on a server of its own whose
stores folder is empty (the session's demo server may hold the store already: the presenter's walk of
test_browser_whatif.py opens this page): the demo has no store, so the page computes it in the background,
shows its progress, draws every chart when it is stored (the beeswarm as SVG dots, one per customer sent, in
Chromium without a GPU), and a segment's link opens its customer."""

import re

import pytest

from explain.plots import drivers as plots
from tests.browser.served import require_chromium, screenshot, serve, wait_idle

pytestmark = pytest.mark.browser
require_chromium(module=True)

# the beeswarm's traces as plotly.js drew them: (type, points sent, SVG dots drawn)
SWARM = """() => { const gd = document.querySelector('.st-key-plot-drivers_beeswarm .js-plotly-plot');
  const drawn = Array.from(gd.querySelectorAll('g.scatterlayer > g.trace'))
    .map(g => g.querySelectorAll('path.point').length);
  return gd._fullData.map((t, k) => [t.type, t._length, drawn[k]]) }"""
DRAWN = """() => Array.from(document.querySelectorAll('[class*="st-key-plot-drivers_"] .js-plotly-plot'))
  .filter(g => (g._fullData || []).length).length"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, deployed_demo):
    """``streamlit run app.py -- --bundle`` the demo's copy, its stores in a new empty folder."""
    root = tmp_path_factory.mktemp("drivers")
    with serve(root, "--bundle", str(deployed_demo), stores=root / "stores") as url:
        yield url


def test_drivers_page_computes_the_store_draws_it_and_opens_a_segments_customer(server, page):
    page.goto(f"{server}/drivers")
    page.get_by_role("heading", name="What drives churn").wait_for()
    page.wait_for_function(f"() => ({DRAWN})() >= 5", timeout=300_000)  # the progress reran the page itself
    wait_idle(page)
    main = page.locator("[data-testid=stMain]")
    assert main.get_by_text(re.compile(r"^Across 3,000 customers, relative to the average customer \(the baseline\), "
                                       r"the prediction is driven most by")).is_visible()
    nav = page.locator("[data-testid=stSidebarNav] a").first.inner_text()
    assert "What drives churn" in nav  # first in the navigation
    screenshot(page, "drivers")
    swarm = page.evaluate(SWARM)
    assert swarm and all(kind == "scatter" and sent == drawn > 0 for kind, sent, drawn in swarm), swarm
    assert sum(sent for _, sent, _ in swarm) <= plots.TOP_FEATURES * plots.SWARM_POINTS
    link = main.get_by_role("link", name=re.compile(r"Highest risk: C\d+")).first
    customer = re.search(r"C\d+", link.inner_text()).group()
    link.click()
    page.get_by_role("heading", name=f"Customer {customer}").wait_for(timeout=120_000)
    wait_idle(page)
    assert f"customer={customer}" in page.url and "baseline=mean" in page.url
