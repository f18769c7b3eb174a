"""The dashboard on a laptop and a phone, and the browser's Back button (issue 17), in a real
browser: the fixtures of tests/browser/conftest.py (``streamlit run`` + Debian's Chromium)."""

import pytest

from tests.browser.served import HEATMAP_Z, RENDER_TIMEOUT, open_page, require_chromium, wait_idle

pytestmark = pytest.mark.browser
require_chromium(module=True)

LAPTOP = {"width": 1280, "height": 720}
PHONE = {"width": 400, "height": 800}

# JS: the viewport rectangle of the heatmap's cells (the plot area of the first heatmap trace).
HEATMAP_BOX = """() => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    if (!(gd._fullData || []).some(t => t.type === 'heatmap')) continue;
    const cells = gd.querySelector('.heatmaplayer');
    const r = (cells || gd).getBoundingClientRect();
    return {left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height};
  }
  return null;
}"""
# JS: the text boxes of the first heatmap figure (tick labels, titles, colour bar, subplot titles).
HEATMAP_TEXTS = """() => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    if (!(gd._fullData || []).some(t => t.type === 'heatmap')) continue;
    // ticks of every subplot axis (xtick, x2tick, ...), axis titles (g-xtitle, ...), the figure
    // title, subplot titles (annotations) and the colour bar's title and ticks
    const selector = 'g[class$="tick"] text, g[class^="g-"][class$="title"] text, .gtitle, .annotation-text, '
                   + '.cbtitle text, .cbaxis text';
    return [...new Set(gd.querySelectorAll(selector))].filter(t => t.textContent.trim()).map(t => {
      const r = t.getBoundingClientRect();
      return {text: t.textContent, left: r.left, top: r.top, right: r.right, bottom: r.bottom};
    }).filter(b => b.right > b.left && b.bottom > b.top);
  }
  return null;
}"""


def overlaps(boxes, slack: float = 0.5) -> list:
    """Pairs of boxes whose rectangles intersect by more than ``slack`` pixels each way."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if (min(a["right"], b["right"]) - max(a["left"], b["left"]) > slack
                    and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > slack):
                found.append((a["text"], b["text"]))
    return found


@pytest.fixture
def sized_page(browser):
    contexts = []

    def make(viewport):
        context = browser.new_context(viewport=viewport)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(RENDER_TIMEOUT)
        return page

    yield make
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def first_screen(server, browser):
    """The Customer page's default view (``/``) at a viewport, opened once per viewport for this file's tests that
    only read it (a box, a text): ``first_screen(LAPTOP)``. The page stays as opened: none of them clicks, types,
    scrolls or resizes."""
    contexts, pages = [], {}

    def get(viewport):
        key = (viewport["width"], viewport["height"])
        if key not in pages:
            context = browser.new_context(viewport=viewport)
            contexts.append(context)
            pages[key] = page = context.new_page()
            page.set_default_timeout(RENDER_TIMEOUT)
            open_page(page, f"{server}/")
        return pages[key]

    yield get
    for context in contexts:
        context.close()


def test_laptop_sees_the_verdict_and_the_whole_heatmap_on_the_first_screen(first_screen):
    page = first_screen(LAPTOP)
    box = page.evaluate(HEATMAP_BOX)
    assert box and box["width"] > 300, box
    assert 0 <= box["top"] and box["bottom"] <= LAPTOP["height"], (f"the heatmap's cells are at {box} "
                                                                    "(viewport 720 high)")
    verdict = page.locator("[data-testid=stMain] h3").first
    assert verdict.inner_text().split(":")[0] in ("High risk", "Medium risk", "Low risk")
    assert verdict.bounding_box()["y"] < box["top"]  # the verdict in words comes first


WHY_SENTENCE = "likely to churn ("
JARGON = ("gausslegendre", "joint path", "per-input", "logit", "delta")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_answer_in_words_comes_first_without_jargon(first_screen, viewport):
    """Issue 29: on the first screen, above the first chart, one sentence names a driver with the customer's value
    against the usual one; with the IG settings closed the main area says none of the engineers' words."""
    page = first_screen(viewport)  # as opened: before test_phone_heatmap_... scrolls the phone's page
    sentence = page.get_by_text(WHY_SENTENCE).first
    sentence.wait_for()
    box = sentence.bounding_box()
    assert box["y"] + box["height"] <= viewport["height"], box  # inside the first screen
    first_chart = page.locator(".js-plotly-plot").first.bounding_box()
    assert box["y"] < first_chart["y"]
    text = sentence.inner_text()
    assert "mainly because" in text and "(the average customer: " in text and "% of customers churn" in text
    main = page.locator("[data-testid=stMain]").inner_text().lower()
    assert not [word for word in JARGON if word in main]


def test_phone_heatmap_is_readable_and_no_text_overlaps(first_screen):
    page = first_screen(PHONE)  # the last of this file's tests to read the phone's page: it scrolls
    page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
    wait_idle(page)
    box = page.evaluate(HEATMAP_BOX)
    assert box["width"] >= 300, f"the heatmap's cells are squeezed to {box['width']:.0f} px"
    texts = page.evaluate(HEATMAP_TEXTS)
    assert len(texts) >= 12 + 6, texts  # period and feature ticks at least
    assert overlaps(texts) == [], [(a, b) for a, b in overlaps(texts)]
    assert page.get_by_text("turn the phone or use a wider screen").is_visible()


def test_laptop_shows_no_phone_note(first_screen):
    page = first_screen(LAPTOP)
    assert not page.get_by_text("turn the phone or use a wider screen").is_visible()


def test_back_after_a_customer_switch_shows_the_previous_customer(server, sized_page):
    page = sized_page({"width": 1400, "height": 1000})
    open_page(page, f"{server}/?customer=C00005&steps=16")
    assert page.get_by_role("heading", name="Customer C00005").is_visible()
    for cid in ("C00002", "C00003"):
        before = page.evaluate(HEATMAP_Z)
        select = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").first
        select.click()
        page.keyboard.type(cid)
        page.keyboard.press("Enter")
        page.wait_for_function(f"() => {{ const z = ({HEATMAP_Z})(); return z && z !== {before!r}; }}")
        wait_idle(page)
        assert page.get_by_role("heading", name=f"Customer {cid}").is_visible() and f"customer={cid}" in page.url
    for cid in ("C00002", "C00005"):  # Back, Back: the customers in reverse order
        page.go_back()
        page.get_by_role("heading", name=f"Customer {cid}").wait_for()
        wait_idle(page)
        assert f"customer={cid}" in page.url and "steps=16" in page.url
        assert cid in page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").first.inner_html()
    page.go_forward()
    page.get_by_role("heading", name="Customer C00002").wait_for()


def test_an_unknown_page_path_says_so(server, sized_page):
    page = sized_page({"width": 1400, "height": 1000})
    open_page(page, f"{server}/nosuchpage?customer=C00004")
    warning = page.locator("[data-testid=stAlertContentWarning]").filter(has_text="There is no page /nosuchpage")
    assert warning.first.is_visible()
    assert "/compare" in warning.first.inner_text()  # it lists the pages there are
    assert page.get_by_role("heading", name="Customer C00004").is_visible()


def test_a_link_with_engineers_settings_opens_them(server, sized_page):
    page = sized_page(LAPTOP)
    open_page(page, f"{server}/?customer=C00010&steps=16&method=trapezoid")
    assert page.get_by_text("16 steps (trapezoid)").first.is_visible()
    assert page.locator("[data-testid=stSidebar]").get_by_text("Integration rule").first.is_visible()
