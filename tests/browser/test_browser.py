"""The dashboard in a real browser: `streamlit run` headless + Debian's Chromium via Playwright.

Skipped only when /usr/bin/chromium is missing and CI is not set; with CI set a missing
browser fails. With EXPLAIN_SCREENSHOTS set, screenshots of every page go to tests/screenshots/<page>.png.
The fixtures (the demo's server, Chromium, a page) are in tests/browser/conftest.py, the helpers in
tests/browser/served.py.
"""

from pathlib import Path

import pytest

from tests.browser.served import (
    HEATMAP_Z,
    RENDER_TIMEOUT,
    ROOT,
    VIEWPORT,
    open_page,
    require_chromium,
    screenshot,
    serve,
    wait_idle,
)

pytestmark = pytest.mark.browser
require_chromium(module=True)


@pytest.fixture(scope="module")
def markup_server(tmp_path_factory):
    """A second server whose bundle (`-- --bundle DIR`) names two features with markup."""
    from tests.support.hostile import EVIL_HTML, EVIL_LATEX, rename_features_to_markup, small_bundle

    root = tmp_path_factory.mktemp("markup")
    bundle = small_bundle(ROOT / "bundles" / "demo", root / "bundle")
    rename_features_to_markup(bundle)
    with serve(root, "--bundle", str(bundle)) as url:
        yield url, EVIL_HTML, EVIL_LATEX


def test_deep_link_opens_the_chosen_view(markup_server, page):
    # The first request of a fresh server is a deep link to another page: it must still get the frame. The demo's
    # server is shared by the test files of a worker, so the fresh one is markup_server (first used here): the
    # demo's first 30 customers, and the same pages.
    server = markup_server[0]
    open_page(page, f"{server}/compare?customer=C00010&compare=C00020&steps=16&baseline=median")
    main = page.locator("[data-testid=stMain]")
    assert main.get_by_text("C00010").first.is_visible()
    assert "C00010" in page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").first.inner_html()
    assert page.locator(".js-plotly-plot").count() >= 4
    screenshot(page, "compare")

    open_page(page, f"{server}/?customer=C00010&steps=16&baseline=median")
    assert page.get_by_role("heading", name="Customer C00010").is_visible()
    assert page.locator("[data-testid=stSidebar] [data-testid=stSlider]").first.inner_text().strip().startswith("Steps")
    assert "16" in page.locator("[data-testid=stSidebar] [data-testid=stSlider]").first.inner_text()
    assert main.get_by_text("16 steps").first.is_visible()
    assert "customer=C00010" in page.url and "steps=16" in page.url


def switch_customer(page, customer: str) -> None:
    """Type ``customer`` into the sidebar's customer box, press Enter, wait for its heatmap."""
    before = page.evaluate(HEATMAP_Z)
    select = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").first
    select.click()
    page.keyboard.type(customer)
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => {{ const z = ({HEATMAP_Z})(); return z && z !== {before!r}; }}")
    wait_idle(page)


def test_customer_page_shows_a_heatmap_and_redraws_for_another_customer(server, page):
    open_page(page, f"{server}/")
    assert page.evaluate(HEATMAP_Z), "no heatmap trace on the customer page"
    screenshot(page, "customer")

    switch_customer(page, "C00002")
    assert page.get_by_role("heading", name="Customer C00002").is_visible()
    assert "customer=C00002" in page.url


def test_the_chart_library_loads_before_any_chart_and_only_once(server, page):
    """The page style makes the browser load Streamlit's Plotly chunk at once (ui.show.chart_library_script):
    on a page without charts it is requested all the same, and the first chart later in the same tab
    uses it instead of loading it again."""
    chunks = []
    page.on("request", lambda request: chunks.append(request.url) if "/PlotlyChart." in request.url else None)
    open_page(page, f"{server}/data", "[data-testid=stFileUploader]")
    assert not page.locator(".js-plotly-plot").count()  # the Data & model page draws no chart
    page.wait_for_function("() => performance.getEntriesByType('resource').some(e => e.name.includes('/PlotlyChart.'))")
    assert len(chunks) == 1, chunks
    page.locator("[data-testid=stSidebarNav] a").filter(has_text="Customer").first.click()
    page.wait_for_function(f"() => ({HEATMAP_Z})() !== null")
    wait_idle(page)
    assert len(chunks) == 1, f"the chart library was loaded again: {chunks}"


def test_the_customer_box_takes_typed_ids_and_parts_of_ids(server, page):
    """3,000 customers: the box lists only a few, and what is typed is resolved by the server."""
    open_page(page, f"{server}/")
    switch_customer(page, "c00005")  # any case
    assert page.get_by_role("heading", name="Customer C00005").is_visible() and "customer=C00005" in page.url
    sidebar = page.locator("[data-testid=stSidebar]")
    for typed, said in [("0017", "is part of"), ("nobody", "No customer id contains 'nobody'")]:
        box = sidebar.locator("[data-testid=stSelectbox]").first
        box.click()
        page.keyboard.type(typed)
        page.keyboard.press("Enter")
        sidebar.locator("[data-testid=stAlert]").filter(has_text=said).wait_for()
        wait_idle(page)
        assert page.get_by_role("heading", name="Customer C00005").is_visible()  # the customer stays
        assert "C00005" in box.inner_html()  # the box shows the customer again (its input's value)
    box = sidebar.locator("[data-testid=stSelectbox]").first
    box.click()
    assert page.get_by_role("option").count() <= 1 + 20 + 10  # the last customers and the matches, not 3,000
    page.keyboard.press("Escape")


def test_how_to_read_opens_on_demand_and_stays_open_for_the_next_customer(server, page):
    open_page(page, f"{server}/")
    assert not page.get_by_text("The heatmap", exact=False).count()  # lazy: nothing sent while closed
    page.get_by_text("How to read this").click()
    page.get_by_text("The heatmap", exact=False).first.wait_for()
    wait_idle(page)
    switch_customer(page, "C00007")
    assert page.get_by_role("heading", name="Customer C00007").is_visible() and "customer=C00007" in page.url
    assert page.get_by_text("The heatmap", exact=False).first.is_visible()  # still open, for the new customer


def test_downloads_arrive(server, page, tmp_path):
    open_page(page, f"{server}/?customer=C00003")
    with page.expect_download() as download:
        page.get_by_role("button", name="CSV (long format)").click()
    csv = Path(download.value.path()).read_text()
    assert download.value.suggested_filename == "ig_C00003.csv"
    assert csv.splitlines()[0] == "customer_id,input,period,feature,value,attribution"
    assert csv.count("\n") == 1 + 9 + 12 * 6

    with page.expect_download(timeout=RENDER_TIMEOUT) as download:
        page.get_by_role("button", name="HTML report (opens offline)").click()
    html = Path(download.value.path()).read_text()
    assert "C00003" in html and "plotly" in html.lower() and "<script src=\"http" not in html

    # the report opens offline: no request leaves the page and the figures draw
    report = tmp_path / "report.html"
    report.write_text(html)
    context = page.context.browser.new_context(viewport=VIEWPORT, offline=True)
    offline = context.new_page()
    offline.goto(report.as_uri())
    offline.wait_for_selector(".js-plotly-plot .heatmaplayer, .js-plotly-plot .hm", state="attached",
                              timeout=30_000)
    context.close()


@pytest.mark.parametrize("name, path, ready", [
    ("cohort", "/cohort", "text=customers explained"),
    ("diagnostics", "/diagnostics", ".js-plotly-plot"),
    ("data", "/data", "[data-testid=stFileUploader]"),
])
def test_screenshot_of_every_other_page(server, page, name, path, ready):
    open_page(page, f"{server}{path}", ready)
    assert not page.locator("[data-testid=stException]").count()
    screenshot(page, name)


def test_invalid_upload_lists_the_problems(server, page, tmp_path):
    demo = ROOT / "bundles" / "demo"
    lines = (demo / "static.csv").read_text().splitlines()
    lines[2] = lines[2].replace(lines[2].split(",")[1], "twelve", 1)  # tenure_months: not a number
    (tmp_path / "static.csv").write_text("\n".join(lines) + "\n")
    open_page(page, f"{server}/data", "[data-testid=stFileUploader]")
    page.locator("[data-testid=stFileUploader] input[type=file]").set_input_files(
        [str(demo / "model.keras"), str(demo / "temporal.csv"), str(tmp_path / "static.csv")])
    page.get_by_role("button", name="Check and open").click(timeout=RENDER_TIMEOUT)
    page.wait_for_selector("text=The upload was not opened")
    wait_idle(page)
    alerts = page.locator("[data-testid=stAlertContentError]")
    assert alerts.count() >= 2 and "tenure_months" in alerts.nth(1).inner_text()
    assert not page.locator("[data-testid=stException]").count()
    screenshot(page, "data_invalid_upload")


# ----------------------------------------------------------------------------- names that are markup

# JS: attributes anywhere in the page that would run script (an <img onerror>, a javascript: link).
SCRIPT_ATTRIBUTES = """() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]
  .filter(a => /^on/i.test(a.name) || /^\\s*javascript:/i.test(a.value))
  .map(a => e.tagName + ' ' + a.name + '=' + a.value))"""
# JS: the text of every SVG text node of the charts.
CHART_TEXT = "() => [...document.querySelectorAll('.js-plotly-plot text')].map(t => t.textContent)"


@pytest.mark.parametrize("path", ["/?customer=C00002", "/compare?customer=C00002&compare=C00003", "/data"])
def test_feature_names_that_are_markup_show_as_text_in_the_browser(markup_server, page, path):
    url, evil_html, evil_latex = markup_server
    open_page(page, f"{url}{path}", "[data-testid=stFileUploader]" if path == "/data" else ".js-plotly-plot")
    assert not page.locator("[data-testid=stException]").count()
    assert page.evaluate("() => document.querySelectorAll('img[onerror], img[src=x]').length") == 0
    assert page.evaluate(SCRIPT_ATTRIBUTES) == []
    # every link goes to a web page, this app (an absolute path, or a page of it with its query), or an e-mail
    assert page.evaluate("() => document.querySelectorAll('a[href]').length") == \
        page.evaluate("() => [...document.querySelectorAll('a[href]')].filter(a => "
                      "/^(https?:|\\/|#|mailto:|[\\w-]+(\\?|$))/.test(a.getAttribute('href'))).length")
    if path == "/data":  # the tables draw on a canvas; the page's text names the columns nowhere else
        return
    chart_text = page.evaluate(CHART_TEXT)
    assert any(evil_html in t for t in chart_text), "the HTML name is not shown as text in a chart"
    assert any(evil_latex in t for t in chart_text), "the LaTeX name is not shown as text in a chart"
    if path.startswith("/?"):
        sentence = page.get_by_text("likely to churn (").first  # the page's first line, names as text
        assert sentence.is_visible() and "<" not in sentence.inner_html().replace("<span", "").replace("</span", "")
        assert page.get_by_text(evil_html).first.is_visible() or page.get_by_text(evil_latex).first.is_visible()
        screenshot(page, "customer_markup_names")


# ----------------------------------------------------------------------------- no server paths (issue 16)

PATH_PAGES = [("/?customer=C00002", ".js-plotly-plot"), ("/compare", ".js-plotly-plot"),
              ("/cohort", "text=customers explained"), ("/diagnostics", ".js-plotly-plot"),
              ("/whatif", ".js-plotly-plot"), ("/data", "[data-testid=stFileUploader]")]


def test_no_page_shows_the_bundle_path(server, deployed_demo, page):
    url, folder = server, deployed_demo
    for path, ready in PATH_PAGES:
        open_page(page, f"{url}{path}", ready)
        text = page.evaluate("() => document.body.innerText")
        assert "alice-secret" not in text and str(folder) not in text, path
    assert "churn\ncontent hash" in text  # Data & model names the bundle by its folder only
