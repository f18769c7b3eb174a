"""The login: every page behind the owner's OpenID Connect provider (``st.login``) and an allow-list.

Configured in ``.streamlit/secrets.toml`` (or the private one ``explain serve --auth oidc`` writes)::

    [auth]                      # Streamlit's st.login
    redirect_uri = "http://localhost:8501/oauth2callback"
    cookie_secret = "a long random text"
    client_id = "..."
    client_secret = "..."
    server_metadata_url = "https://login.example.com/.well-known/openid-configuration"

    [access]                    # who may see the dashboard (explain.access)
    allow = ["ana@example.com", "@example.com"]

Without an ``[auth]`` section there is no login (local use). With one, app.py calls :func:`gate`
before its navigation: a visitor who has not signed in gets the login screen, one whose e-mail
address is not on the allow-list (or whose provider did not verify it) a short refusal and a Log out
button, and neither reaches a page or the bundle. An allowed user sees their name and a Log out
button in the sidebar. The gate runs its screens through ``st.navigation`` (one hidden page), so no
page file of ``pages/`` runs for a visitor who is not let in.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import streamlit as st

from explain import access
from explain.core.errors import ExplainError
from ui import show

LOG = logging.getLogger("explain.app")
OPEN, SIGN_IN, REFUSED, ALLOWED = "open", "sign-in", "refused", "allowed"
APP_TITLE = "Churn explainer"
SIGN_IN_TEXT = "This dashboard shows customer data to the people its owner allowed. Log in to continue."
REFUSED_TEXT = ("You are signed in as **{who}**, who is not on this dashboard's list of allowed users. Ask its owner "
                "to add your address, or log out and sign in with another account.")
UNVERIFIED_TEXT = ("You are signed in as **{who}**, but your identity provider has not verified this e-mail address, "
                   "so the dashboard cannot tell who you are. Verify the address at your provider, then log in again.")
NO_ALLOW_LIST = ("The owner has configured a login but no list of allowed users ([access] allow in "
                 ".streamlit/secrets.toml), so nobody is let in.")
PROVIDER_DOWN = ("The login provider cannot be reached, so nobody can log in now: {url} {why}. The dashboard's owner "
                 "can check `server_metadata_url` in .streamlit/secrets.toml (`explain serve --oidc-metadata`) and "
                 "that this server reaches that address; then try again.")
PROVIDER_TIMEOUT_S = 3.0  # the discovery document's answer, name lookup included
SECRETS_UNREADABLE = ("The login's settings (.streamlit/secrets.toml) cannot be read, so the dashboard shows nothing. "
                      "The owner can fix the file and restart the server.")


def settings():
    """(``[auth]`` is configured, the allow-list or the reason it is unusable): (False, ()) without a login."""
    secrets = st.secrets  # read at call time: AppTest replaces it
    try:
        if not secrets.load_if_toml_exists():  # no file, or one Streamlit could not parse: closed, not open
            files = st.get_option("secrets.files") or []
            return (True, SECRETS_UNREADABLE) if any(Path(f).is_file() for f in files) else (False, ())
        auth, allow = secrets.get("auth"), (secrets.get("access") or {}).get("allow")
    except Exception:  # noqa: BLE001 - a broken secrets file: closed, not open
        LOG.warning("the secrets file cannot be read", exc_info=True)
        return True, SECRETS_UNREADABLE
    if not auth:
        return False, ()
    try:
        return True, access.parse_allow(list(allow) if isinstance(allow, (list, tuple)) else allow)
    except (ExplainError, TypeError) as error:
        LOG.error("the login's allow-list is unusable: %s", error)
        return True, NO_ALLOW_LIST


def visitor() -> tuple[str, str]:
    """(OPEN | SIGN_IN | REFUSED | ALLOWED, the words to show): what the gate does with this session."""
    configured, allow = settings()
    if not configured:
        return OPEN, ""
    if isinstance(allow, str):
        return REFUSED, allow
    user = st.user
    if not user.get("is_logged_in"):
        return SIGN_IN, SIGN_IN_TEXT
    email, verified = user.get("email"), user.get("email_verified")
    who = show.md(str(email or user.get("name") or "an account without an e-mail address"))
    if verified is False or verified == "false":
        return REFUSED, UNVERIFIED_TEXT.format(who=who)
    if not access.allowed(email, allow, verified if isinstance(verified, bool) else None):
        return REFUSED, REFUSED_TEXT.format(who=who)
    return ALLOWED, show.md(str(user.get("name") or email))


def _metadata_urls(auth) -> list[str]:
    """Every ``server_metadata_url`` of the ``[auth]`` section: its own, and each named provider's ([auth.NAME])."""
    urls = [auth.get("server_metadata_url")] + [v.get("server_metadata_url") for v in auth.values()
                                                 if hasattr(v, "get")]
    return [str(u) for u in urls if u]


def _fetch_problem(url: str) -> str | None:
    """Why the discovery document at ``url`` cannot be read (a short clause), or None when it can."""
    try:
        with urllib.request.urlopen(url, timeout=PROVIDER_TIMEOUT_S) as answer:  # noqa: S310 - the owner's URL
            document = json.loads(answer.read(1_000_000))
        if not isinstance(document, dict) or "authorization_endpoint" not in document:
            return "answers, but not with an OpenID Connect discovery document (no authorization_endpoint)"
        return None
    except Exception as error:  # noqa: BLE001 - any failure is the same answer to the visitor
        reason = getattr(error, "reason", None) or error
        return f"does not answer ({str(reason)[:120]})"


def _code(url: str) -> str:
    return "`" + url.replace("`", "") + "`"  # an address as code: Markdown does not touch it


def provider_problem(auth) -> str | None:
    """The words for a login provider that cannot be reached (its discovery document, within
    ``PROVIDER_TIMEOUT_S`` seconds, a slow name lookup included), or None when every provider answers.
    Streamlit's own "Log in" would otherwise end on a bare "Authentication error" page."""
    for url in _metadata_urls(auth):
        if urlparse(url).scheme not in ("http", "https"):
            return PROVIDER_DOWN.format(url=_code(url), why="is not an http(s) address")
        found = ["does not answer within %g s" % PROVIDER_TIMEOUT_S]
        worker = threading.Thread(target=lambda u=url: found.__setitem__(0, _fetch_problem(u)), daemon=True)
        worker.start()
        worker.join(PROVIDER_TIMEOUT_S + 0.5)
        if found[0]:
            LOG.warning("the login provider %s %s", url, found[0])
            return PROVIDER_DOWN.format(url=_code(url), why=show.md(found[0]))
    return None


def _sign_in_screen() -> None:
    st.title(APP_TITLE)
    problem = provider_problem(st.secrets.get("auth") or {})
    if problem:
        st.error(problem, icon=":material/cloud_off:")
        st.button("Try again", type="primary", icon=":material/refresh:", key="auth_retry")
        return
    st.write(SIGN_IN_TEXT)
    st.button("Log in", type="primary", icon=":material/login:", on_click=st.login, key="auth_login")


def _refused_screen() -> None:
    st.title(APP_TITLE)
    st.error(visitor()[1], icon=":material/block:")
    st.button("Log out", icon=":material/logout:", on_click=st.logout, key="auth_logout")


def gate(pages=()) -> None:
    """Return when this visitor may see the pages (no login configured, or an allowed user, whose name and a
    Log out button go to the sidebar); otherwise show the login screen or the refusal and stop the run.
    ``pages``: the app's ``st.Page`` objects, whose addresses then show that screen too (a deep link opens
    the login, not Streamlit's "page not found")."""
    kind, words = visitor()
    if kind == OPEN:
        return
    if kind == ALLOWED:
        st.sidebar.caption(f"Signed in as {words}")
        st.sidebar.button("Log out", icon=":material/logout:", on_click=st.logout, key="auth_logout")
        return
    screen = _sign_in_screen if kind == SIGN_IN else _refused_screen
    addresses = dict.fromkeys(p.url_path for p in pages if p.url_path) or {"login": None}
    screens = [st.Page(screen, title="Log in", url_path="login-screen", default=True)]
    screens += [st.Page(screen, title="Log in", url_path=path) for path in addresses]
    st.navigation(screens, position="hidden").run()
    st.stop()
