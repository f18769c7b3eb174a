"""The What-if page in a real browser (the server and Chromium fixtures of tests/browser/conftest.py)."""

import json
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.served import open_page, require_chromium, screenshot, wait_idle

pytestmark = pytest.mark.browser
require_chromium(module=True)

# JS: {title: z} of every heatmap on the page, by the figure's title.
HEATMAPS = """() => {
  const out = {};
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const trace = (gd._fullData || []).find(t => t.type === 'heatmap' && t.name !== 'no data');
    const title = ((gd.layout || {}).title || {}).text || '';
    if (trace && trace.z) out[title] = Array.from(trace.z, row => Array.from(row));
  }
  return JSON.stringify(out);
}"""


def metric(page, label: str) -> str:
    box = page.locator("[data-testid=stMetric]").filter(has_text=label).first
    return box.locator("[data-testid=stMetricValue]").inner_text().strip()


def test_an_edit_shows_both_predictions_and_the_difference_heatmap(server, page):
    open_page(page, f"{server}/whatif?customer=C00002&steps=16")
    assert page.get_by_role("heading", name="What if… customer C00002").is_visible()
    before = metric(page, "Original: predicted")
    assert metric(page, "What-if: predicted") == before  # no edit yet
    screenshot(page, "whatif_start")

    # one click: the last three months of the first monthly feature (data usage) to the baseline
    page.get_by_role("button", name="Apply this edit").click()
    page.wait_for_function("() => location.search.includes('whatif=')")
    wait_idle(page)
    after = metric(page, "What-if: predicted")
    assert metric(page, "Original: predicted") == before and after != before
    assert parse_qs(urlparse(page.url).query)["whatif"] == ["t0@9-11=b"]
    maps = json.loads(page.evaluate(HEATMAPS))
    change = next(z for title, z in maps.items() if title.startswith("Change"))
    assert len(maps) == 3 and any(abs(v) > 0 for row in change for v in row)
    assert page.get_by_text("Data usage (GB), 2025-10 to 2025-12: set to the baseline").first.is_visible()
    screenshot(page, "whatif")

    # the link reopens the same scenario
    open_page(page, page.url)
    assert metric(page, "What-if: predicted") == after

    # the search: a small edit below 0.5, with its caution in words
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector("text=not what the customer will do")
    wait_idle(page)
    assert page.get_by_text("bring the prediction from").first.is_visible()
    screenshot(page, "whatif_search")


def test_a_cell_typed_into_the_table_becomes_an_edit(server, page):
    open_page(page, f"{server}/whatif?customer=C00002&steps=16")
    before = metric(page, "What-if: predicted")
    page.get_by_role("tab", name="Monthly values cell by cell").click()
    grid = page.locator("[data-testid=stDataFrame]").first
    grid.wait_for()
    grid.scroll_into_view_if_needed()  # a click on a canvas below the fold would land nowhere
    wait_idle(page)
    box = grid.bounding_box()
    # The grid is drawn on a canvas whose column widths depend on the fonts, so a click at a fixed x can land
    # in another column. Glide's hidden accessibility table names the selected cell (glide-cell-COL-ROW):
    # click any cell of the first row, then walk with the arrow keys to Support calls, 2025-02.
    column = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stDataFrame] th')]
        .find(th => th.textContent === 'Support calls').getAttribute('aria-colindex') - 1""")
    assert page.evaluate(f"() => document.getElementById('glide-cell-{column}-1').textContent") == "3"
    selected = "() => (document.querySelector('[data-testid=stDataFrame] td[aria-selected=true]') || {}).id || ''"
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + 35 + 17)
    page.wait_for_function(f"({selected})() !== ''")
    page.wait_for_function("() => document.querySelector('[data-testid=stDataFrame]').contains(document.activeElement)")
    for _ in range(12):
        at = [int(v) for v in page.evaluate(selected).split("-")[2:]]
        if at == [column, 1]:
            break
        page.keyboard.press("ArrowDown" if at[1] < 1 else "ArrowLeft" if at[0] > column else "ArrowRight")
        page.wait_for_function(f"({selected})() !== 'glide-cell-{at[0]}-{at[1]}'")  # the grid has moved on
    assert at == [column, 1]
    page.keyboard.press("Enter")  # opens the cell's editor
    editor = page.locator("input.gdg-input")
    page.wait_for_function("() => document.activeElement && document.activeElement.matches('input.gdg-input')")
    assert editor.input_value() == "3"
    editor.fill("1")
    page.wait_for_function("() => document.activeElement.value === '1'")
    page.keyboard.press("Enter")  # commits the edit
    page.wait_for_function("() => location.search.includes('whatif=')")
    wait_idle(page)
    assert parse_qs(urlparse(page.url).query)["whatif"] == ["t1@1=1"]
    assert metric(page, "What-if: predicted") != before
    assert page.get_by_text("Support calls, 2025-02: set to 1").first.is_visible()


def test_the_customer_page_card_opens_what_would_keep_the_customer_on_what_if(server, page):
    """Issue 29: a high-risk customer's page says in one sentence what would keep them; its link opens the same
    edits on What-if, where the model's score with them is below 0.5."""
    open_page(page, f"{server}/?customer=C00877")
    card = page.get_by_text("What would keep this customer?").first
    card.wait_for()
    said = page.locator("[data-testid=stMain]").get_by_text("would bring the churn score from").first.inner_text()
    after = float(said.rsplit(" to ", 1)[1].rstrip(".").strip())
    assert after < 0.5, said
    page.get_by_text("Open these edits on What-if").click()
    page.wait_for_url("**/whatif?**", timeout=60_000)
    assert "whatif=" in page.url and "customer=C00877" in page.url
    page.locator("[data-testid=stMetric]").filter(has_text="What-if: predicted").first.wait_for()
    wait_idle(page)
    assert abs(float(metric(page, "What-if: predicted")) - after) < 0.01  # the same edits, the same score


def test_a_low_risk_customer_gets_no_card(server, page):
    open_page(page, f"{server}/?customer=C00001")  # the demo model scores C00001 at 0.025
    text = page.locator("[data-testid=stMain]").inner_text()
    assert "Low risk" in text and "What would keep this customer?" not in text


def test_the_presenter_link_walks_overview_top_customer_and_what_keeps_them(server, page):
    open_page(page, f"{server}/")
    page.get_by_text("Present: a guided demo").click()
    page.get_by_text("Step 1 of 3").wait_for()
    assert "/drivers" in page.url
    page.get_by_text("Next").click()
    page.get_by_text("Step 2 of 3").wait_for()
    assert "customer=C00877" in page.url  # the demo's highest score
    page.get_by_text("likely to churn (").first.wait_for()
    page.get_by_text("Next").click()
    page.get_by_text("Step 3 of 3").wait_for()
    assert "/whatif" in page.url and "whatif=" in page.url
    page.locator("[data-testid=stMetric]").filter(has_text="What-if: predicted").first.wait_for()
    wait_idle(page)
    assert float(metric(page, "What-if: predicted")) < 0.5
    page.get_by_text("End the tour").click()
    page.wait_for_url(lambda url: "tour=" not in url)
