"""The login in a real browser against a real OpenID Connect provider (issue 25): ``explain serve --auth oidc``
(the production command: the launcher, the shipped config, the generated secrets) in front of
tests/support/oidc_provider.py on loopback, driven in Chromium through the whole authorization-code flow
(Streamlit's st.login with Authlib, PKCE, an RS256 id_token checked against the provider's keys).

An allowed user (an address on the list, and one of an allowed @domain) logs in and sees the pages and their
name; a stranger who logs in at the same provider is refused and sees no customer data; Log out ends the
session at the provider and brings back the login screen; the first request of a visitor who has not logged
in, a deep link to a page, shows the login screen only."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.served import end, require_chromium, wait_idle
from tests.support.oidc_provider import OidcProvider
from tests.support.processes import free_port, wait_healthy

pytestmark = pytest.mark.browser
require_chromium(module=True)

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID, CLIENT_SECRET = "explain-dashboard", "test-client-secret-0123456789"
ALLOWED, DOMAIN_USER, STRANGER = "ana@example.com", "bob@team.example", "eve@evil-example.com"
DATA = re.compile(r"\bC\d{5}\b")  # the demo bundle's customer ids: C00001 ...
STARTUP_TIMEOUT = 120


@pytest.fixture(scope="module")
def login_server(tmp_path_factory):
    """(the app's URL, the provider): ``explain serve --auth oidc`` on a free port, the provider it trusts."""
    port = free_port()
    base = f"http://localhost:{port}"  # the host of the default redirect URI: the login cookies are set for it
    folder = tmp_path_factory.mktemp("login")
    with OidcProvider(CLIENT_ID, CLIENT_SECRET, [f"{base}/oauth2callback"]) as provider:
        env = {k: v for k, v in os.environ.items() if k != "EXPLAIN_BUNDLE"}
        env["EXPLAIN_OIDC_CLIENT_SECRET"] = CLIENT_SECRET  # kept off the command line
        env["PYTHONPATH"] = str(ROOT)  # this checkout's explain, started from another folder
        log = (folder / "server.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "explain", "serve", "--port", str(port), "--auth", "oidc",
             "--oidc-metadata", provider.metadata_url, "--client-id", CLIENT_ID,
             "--allow", ALLOWED, "--allow", "@team.example"],
            cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_healthy(f"http://127.0.0.1:{port}", proc, STARTUP_TIMEOUT,
                         lambda: f"explain serve did not start: {(folder / 'server.log').read_text()[-3000:]}")
            yield base, provider, folder / "server.log"
        finally:
            end(proc)  # a SIGKILL to its process group: no test here reads the shutdown


def login_screen(page) -> None:
    page.get_by_role("button", name="Log in").wait_for()
    wait_idle(page, most_ms=600)  # at most the 0.6 s it slept before
    text = page.locator("body").inner_text()
    assert "Log in to continue" in text and not DATA.search(text)
    assert page.locator(".js-plotly-plot").count() == 0 and page.locator("[data-testid=stSidebarNav]").count() == 0


def log_in(page, email: str, name: str) -> None:
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/authorize?**")  # the provider's own page
    page.fill("input[name=email]", email)
    page.fill("input[name=name]", name)
    page.get_by_role("button", name="Sign in").click()


def test_an_allowed_user_logs_in_sees_the_pages_and_logs_out(login_server, page):
    base, provider, log = login_server
    page.goto(f"{base}/compare?customer=C00010")  # a deep link before logging in: the login screen only
    login_screen(page)
    log_in(page, ALLOWED, "Ana Example")
    page.wait_for_selector(".js-plotly-plot", timeout=120_000)  # back in the app, on the Customer page
    wait_idle(page)
    sidebar = page.locator("[data-testid=stSidebar]")
    assert sidebar.get_by_text("Signed in as Ana Example").is_visible()
    assert DATA.search(page.locator("[data-testid=stMain]").inner_text())
    assert [kind for kind, who in provider.events if who == ALLOWED] == ["login", "token"]
    page.locator("[data-testid=stSidebarNav]").get_by_role("link", name="Compare").click()  # another page, same session
    page.wait_for_url("**/compare**")
    wait_idle(page)
    assert sidebar.get_by_text("Signed in as Ana Example").is_visible()

    sidebar.get_by_role("button", name="Log out").click()
    login_screen(page)  # the provider's end-session endpoint, then back to the app, logged out
    assert provider.events[-1][0] == "logout"
    cookies = {c["name"] for c in page.context.cookies()}
    assert "_streamlit_user" not in cookies
    page.goto(f"{base}/")  # the session is gone for good, not only on this page
    login_screen(page)
    assert CLIENT_SECRET not in log.read_text()  # the secret is never printed


def test_a_whole_allowed_domain_gets_in(login_server, page):
    base, _, _ = login_server
    page.goto(base)
    login_screen(page)
    log_in(page, DOMAIN_USER, "Bob Team")
    page.wait_for_selector(".js-plotly-plot", timeout=120_000)
    assert page.locator("[data-testid=stSidebar]").get_by_text("Signed in as Bob Team").is_visible()


def test_a_stranger_is_refused_and_sees_no_customer_data(login_server, page):
    base, provider, _ = login_server
    page.goto(f"{base}/cohort")
    login_screen(page)
    log_in(page, STRANGER, "Eve")  # a real login at the provider, but not on the allow-list
    page.get_by_text("not on this dashboard's list of allowed users").wait_for()
    wait_idle(page)
    text = page.locator("body").inner_text()
    assert STRANGER in text.replace("\u2060", "") and not DATA.search(text)  # (a word joiner stops autolinks)
    assert page.locator(".js-plotly-plot").count() == 0 and page.locator("[data-testid=stSidebarNav]").count() == 0
    assert ("token", STRANGER) in provider.events  # the provider did vouch for them
    for path in ("/customer?customer=C00010", "/data", "/drivers"):  # no page of the app opens for them
        page.goto(base + path)
        page.get_by_text("not on this dashboard's list of allowed users").wait_for()
        assert not DATA.search(page.locator("body").inner_text())
    page.get_by_role("button", name="Log out").click()
    login_screen(page)
