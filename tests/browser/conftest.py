"""The browser tests' shared fixtures, one of each per pytest session (a worker of ``pytest -n 3 --dist loadfile``):
the demo's ``streamlit run app.py`` (``server``, on a copy of the demo: each start imports TensorFlow and computes
its first attributions again), one Chromium per test file (``browser``: Playwright's sync API keeps its event loop
running in this thread while it is open, and ``asyncio.run`` of a later test in the same worker would fail) with one
context (``browser_context``: the caches of the app's scripts), and a new tab per test with the cookies cleared
(``page``: its own Streamlit session), so no test sees another's session or login. Servers of other bundles stay in
their files."""

import shutil

import pytest

from tests.browser.served import CHROMIUM, CHROMIUM_ARGS, RENDER_TIMEOUT, ROOT, VIEWPORT, require_chromium, serve


@pytest.fixture(scope="session")
def deployed_demo(tmp_path_factory):
    """A copy of the demo bundle (without stores) under a path that names a user, as a deployment's would: no page
    may show it (test_browser.py::test_no_page_shows_the_bundle_path)."""
    folder = tmp_path_factory.mktemp("paths") / "home" / "alice-secret" / "churn"
    shutil.copytree(ROOT / "bundles" / "demo", folder, ignore=shutil.ignore_patterns("attributions", ".building-*"))
    return folder


@pytest.fixture(scope="session")
def server(tmp_path_factory, deployed_demo):
    """The URL of ``streamlit run app.py -- --bundle DIR``: the demo's copy ``deployed_demo``. (``explain serve``
    without a bundle, the demo itself, is test_login.py's server.)"""
    require_chromium()
    with serve(deployed_demo.parents[2], "--bundle", str(deployed_demo)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def browser_context(browser):
    """One browser context per test file: its pages share the HTTP and compiled-script caches, so the app's
    JavaScript is downloaded and compiled once per file, not once per test (22 % less CPU for test_browser.py and
    test_browser_inert.py, 2026-12-07)."""
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    yield context
    context.close()


@pytest.fixture
def page(browser_context):
    """A new tab with no cookies: its own Streamlit session."""
    browser_context.clear_cookies()
    page = browser_context.new_page()
    page.set_default_timeout(RENDER_TIMEOUT)
    yield page
    page.close()
