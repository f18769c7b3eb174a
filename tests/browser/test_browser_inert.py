"""No page renders an image or a link that came from a bundle or a URL (issue 25), in a real browser: the
server opens a bundle whose display names, output name, label column and a customer id are markdown images,
URLs, ``www.`` names and e-mail addresses (tests/support/hostile.py ``markdown_bundle``), and a deep link
carries a phishing sentence. Each page must show those texts (so the test would see them rendered) and hold
no ``<a>`` or ``<img>`` pointing at them: Streamlit's own markdown renderer (GFM, with automatic links)
decides, not a copy of it."""

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.served import open_page, require_chromium, serve, wait_idle
from tests.support.apptest import DEMO
from tests.support.hostile import markdown_bundle

pytestmark = pytest.mark.browser
require_chromium(module=True)

# JS: links and images of the page that point at the hostile hosts (a mailto: link counts), and whether
# their names show as text. (Streamlit's own anchors of headings point at this page: not counted.)
FOUND = """() => ({
  links: [...document.querySelectorAll('a[href]')].map(a => a.href)
    .filter(h => new URL(h).hostname.includes('evil') || h.startsWith('mailto:')),
  images: [...document.querySelectorAll('img[src]')].map(i => i.src).filter(s => s.includes('evil')),
  shown: document.body.innerText.includes('evil.example'),
})"""
PHISHING = "Your session expired, sign in at https://login.evil.example/sso"


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory):
    folder = markdown_bundle(DEMO, tmp_path_factory.mktemp("markdown") / "bundle")
    with serve(tmp_path_factory.mktemp("streamlit"), "--bundle", str(folder)) as url:
        yield url


def inert(page) -> dict:
    try:  # the page may still be computing (a cohort) when its heading shows: wait for the texts, not a time
        page.wait_for_function(f"() => ({FOUND})().shown", timeout=120_000)
    except PlaywrightTimeout:
        pass
    found = page.evaluate(FOUND)
    assert found["shown"], "the hostile text is not on the page: this check would see nothing"
    assert found["links"] == [] and found["images"] == [], found
    return found


@pytest.mark.parametrize("path", [
    "/?steps=16",
    f"/?steps=16&customer={PHISHING.replace(' ', '%20')}",
    "/compare?steps=16&compare=cohort:1",
    "/cohort",
    "/drivers",
    "/diagnostics",
    "/data",
])
def test_a_page_shows_bundle_and_url_text_as_text(hostile_server, page, path):
    open_page(page, hostile_server + path, ready="[data-testid=stMain] :is(h1, h2, h3)")
    inert(page)


def test_the_what_if_inputs_and_the_cohort_baseline_label_are_text(hostile_server, page):
    open_page(page, f"{hostile_server}/whatif?steps=16&baseline=cohort:1")
    page.get_by_role("tab", name="Static values").click()
    wait_idle(page)
    assert page.get_by_text("Tenure ![pixel](https://img.evil.example/p.png)").first.is_visible()
    inert(page)
