"""The login gate in app.py (ui/auth.py) with Streamlit's AppTest: with an [auth] section in the secrets, a
visitor who has not logged in, or whose address is not on the [access] allow-list, gets a screen without a
page, a sidebar picker or a customer id; an allowed user gets the app and their name with a Log out button.
Without [auth] the app opens as it always did. (The real login flow, with a provider: tests/browser/test_login.py.)"""

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.apptest import APP
from tests.support.oidc_provider import OidcProvider
from ui import auth

SECRETS = {"auth": {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "c" * 32,
                    "client_id": "dashboard", "client_secret": "s",
                    "server_metadata_url": "https://login.example.com/.well-known/openid-configuration"},
           "access": {"allow": ["ana@example.com", "@team.example"]}}
CUSTOMER_ID = re.compile(r"\bC\d{5}\b")


def run(user: dict | None, secrets: dict | None = SECRETS, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    if secrets is not None:
        at.secrets.update(secrets)
    if user is not None:
        at.user = user
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown(at) -> str:
    parts = [e.value for kind in ("title", "markdown", "error", "caption", "header", "subheader", "warning", "info")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def kept_out(at) -> None:
    assert not at.sidebar.selectbox and not CUSTOMER_ID.search(shown(at)) and not at.get("plotly_chart")
    assert "Log out" not in [b.label for b in at.sidebar.button]


def with_metadata(url: str) -> dict:
    return {**SECRETS, "auth": {**SECRETS["auth"], "server_metadata_url": url}}


def test_a_visitor_who_has_not_logged_in_gets_the_login_screen_only():
    with OidcProvider("dashboard", "s", [SECRETS["auth"]["redirect_uri"]]) as provider:
        at = run({"is_logged_in": False}, with_metadata(provider.metadata_url))
    assert [b.label for b in at.button] == ["Log in"] and auth.SIGN_IN_TEXT in shown(at)
    kept_out(at)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


class NotOidc(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        body = json.dumps({"hello": "a web server, not a login provider"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_provider_that_cannot_be_reached_is_said_before_log_in_with_a_way_to_try_again():
    url = f"http://127.0.0.1:{closed_port()}/.well-known/openid-configuration"
    at = run({"is_logged_in": False}, with_metadata(url))
    assert [b.label for b in at.button] == ["Try again"]  # no "Log in" that ends on "Authentication error"
    error = at.error[0].value
    assert "login provider cannot be reached" in error and url in error and "server_metadata_url" in error
    kept_out(at)
    at.button(key="auth_retry").click().run()  # still down: the same words, nothing lost
    assert [b.label for b in at.button] == ["Try again"] and not at.exception


def test_a_metadata_address_that_is_not_a_provider_is_said():
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotOidc)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        at = run({"is_logged_in": False}, with_metadata(f"http://127.0.0.1:{server.server_address[1]}/x"))
    finally:
        server.shutdown()
        server.server_close()
    assert "not with an OpenID Connect discovery document" in at.error[0].value
    assert [b.label for b in at.button] == ["Try again"]


@pytest.mark.parametrize("user", [
    {"is_logged_in": True, "email": "eve@evil-example.com", "name": "Eve"},
    {"is_logged_in": True, "email": "eve@team.example.evil.com", "name": "Eve"},
    {"is_logged_in": True, "email": "ana@example.com", "email_verified": False, "name": "Not Ana"},
    {"is_logged_in": True, "name": "No address"},
])
def test_a_stranger_who_logged_in_is_refused_with_a_log_out_button(user):
    at = run(user)
    assert [b.label for b in at.button] == ["Log out"] and at.error
    assert "not on this dashboard's list" in at.error[0].value or "not verified" in at.error[0].value
    kept_out(at)


def test_an_allowed_user_gets_the_app_with_their_name_and_log_out():
    at = run({"is_logged_in": True, "email": "Carol@TEAM.example", "email_verified": True, "name": "Carol"})
    assert "Signed in as Carol" in [c.value for c in at.sidebar.caption]
    assert "Log out" in [b.label for b in at.sidebar.button]
    assert at.sidebar.selectbox(key="customer") and CUSTOMER_ID.search(shown(at))  # the Customer page


def test_a_login_without_an_allow_list_lets_nobody_in():
    at = run({"is_logged_in": True, "email": "ana@example.com"}, {"auth": SECRETS["auth"]})
    assert at.error and at.error[0].value == auth.NO_ALLOW_LIST
    kept_out(at)


def test_without_a_login_configured_the_app_opens_as_before():
    at = run(None, None)
    assert at.sidebar.selectbox(key="customer") and not [b for b in at.button if b.label in ("Log in", "Log out")]


def test_a_secrets_file_that_cannot_be_read_keeps_everyone_out(tmp_path, monkeypatch):
    import streamlit as st
    from streamlit.runtime.secrets import Secrets

    broken = tmp_path / "secrets.toml"
    broken.write_text('[auth]\nredirect_uri = "http://localhost:8501/oauth2callback\n')  # an unclosed string
    monkeypatch.setattr(st, "secrets", Secrets())
    monkeypatch.setattr(st, "get_option", lambda name: [str(broken)] if name == "secrets.files" else None)
    from streamlit import config

    previous = config.get_option("secrets.files")
    config.set_option("secrets.files", [str(broken)])
    try:
        assert auth.settings() == (True, auth.SECRETS_UNREADABLE)
        assert auth.visitor() == (auth.REFUSED, auth.SECRETS_UNREADABLE)
        broken.unlink()  # no file at all: no login, the local use of before
        assert auth.settings() == (False, ())
    finally:
        config.set_option("secrets.files", previous)
