"""A small, real OpenID Connect provider on loopback, for the login tests (tests/browser/test_login.py).

Standard library HTTP server plus joserfc (Authlib's JOSE library, installed with it) for the RS256
id_tokens. It does what a provider does in the authorization-code flow that Streamlit's ``st.login``
(Authlib) runs, and checks what a provider checks:

* ``/.well-known/openid-configuration``: the discovery document (issuer, endpoints, S256 PKCE);
* ``GET /authorize``: a sign-in form (the test types the e-mail address and name of the user it plays),
  after checking ``client_id``, ``redirect_uri`` (registered), ``response_type=code``, ``scope`` with ``openid``;
  ``POST /authorize``: a one-time code, then a redirect to ``redirect_uri`` with the code and the ``state``;
* ``POST /token``: the client's id and secret (HTTP Basic or the form), the code (once, for the same
  client and redirect URI, within 60 s), the PKCE verifier; answers an id_token signed RS256 with
  ``iss``, ``aud``, ``sub``, ``nonce``, ``iat``, ``exp``, ``email``, ``email_verified``, ``name``, and an
  access token;
* ``/jwks``: the public key; ``/userinfo``: the claims of an access token;
* ``/logout`` (``end_session_endpoint``): back to ``post_logout_redirect_uri``.

Every request is recorded in ``events`` (("authorize" | "login" | "token" | "logout", detail)), so a test
can tell that the browser really went through the provider.

    with OidcProvider(client_id="explain", client_secret="s3cret", redirect_uris=[...]) as provider:
        provider.metadata_url   # http://127.0.0.1:PORT/.well-known/openid-configuration
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

from joserfc import jwt
from joserfc.jwk import RSAKey

CODE_LIFETIME_S = 60
FORM = """<!doctype html><html><head><title>Test identity provider</title></head><body>
<h1>Test identity provider</h1>
<form method="post" action="/authorize">
{hidden}
<label>E-mail <input name="email" type="email" required></label>
<label>Name <input name="name"></label>
<button type="submit">Sign in</button>
</form></body></html>"""


class OidcProvider:
    """The provider (see the module text); a context manager that serves on 127.0.0.1 in a thread."""

    def __init__(self, client_id: str, client_secret: str, redirect_uris: list[str], email_verified: bool = True):
        self.client_id, self.client_secret = client_id, client_secret
        self.redirect_uris = set(redirect_uris)
        self.email_verified = email_verified
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig", "alg": "RS256"})
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.events: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.issuer = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.metadata_url = self.issuer + "/.well-known/openid-configuration"

    def __enter__(self) -> "OidcProvider":
        threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def record(self, kind: str, detail: str = "") -> None:
        with self._lock:
            self.events.append((kind, detail))

    def metadata(self) -> dict:
        return {"issuer": self.issuer, "authorization_endpoint": self.issuer + "/authorize",
                "token_endpoint": self.issuer + "/token", "jwks_uri": self.issuer + "/jwks",
                "userinfo_endpoint": self.issuer + "/userinfo", "end_session_endpoint": self.issuer + "/logout",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"], "scopes_supported": ["openid", "email", "profile"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "code_challenge_methods_supported": ["S256"], "grant_types_supported": ["authorization_code"],
                "claims_supported": ["sub", "email", "email_verified", "name"]}

    # ---- the endpoints' logic: (status, headers, body) -------------------------------------------------

    def authorize_form(self, query: dict) -> tuple[int, dict, bytes]:
        problem = self._authorize_problem(query)
        if problem:
            return 400, {"Content-Type": "text/plain"}, problem.encode()
        self.record("authorize", query.get("redirect_uri", ""))
        hidden = "\n".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                           for k, v in query.items())
        return 200, {"Content-Type": "text/html; charset=utf-8"}, FORM.format(hidden=hidden).encode()

    def _authorize_problem(self, query: dict) -> str | None:
        if query.get("client_id") != self.client_id:
            return "unknown client_id"
        if query.get("redirect_uri") not in self.redirect_uris:
            return f"redirect_uri {query.get('redirect_uri')!r} is not registered"
        if query.get("response_type") != "code" or "openid" not in query.get("scope", "").split():
            return "expected response_type=code and scope openid"
        return None

    def sign_in(self, form: dict) -> tuple[int, dict, bytes]:
        problem = self._authorize_problem(form)
        if problem or not form.get("email"):
            return 400, {"Content-Type": "text/plain"}, (problem or "no e-mail address").encode()
        code = secrets.token_urlsafe(24)
        with self._lock:
            self.codes[code] = {"client_id": form["client_id"], "redirect_uri": form["redirect_uri"],
                                "nonce": form.get("nonce"), "email": form["email"],
                                "name": form.get("name") or form["email"], "issued": time.time(),
                                "challenge": form.get("code_challenge"),
                                "method": form.get("code_challenge_method", "plain")}
        self.record("login", form["email"])
        query = {"code": code, **({"state": form["state"]} if form.get("state") else {})}
        return 302, {"Location": f"{form['redirect_uri']}?{urlencode(query)}"}, b""

    def token(self, form: dict, authorization: str | None) -> tuple[int, dict, bytes]:
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        if authorization and authorization.lower().startswith("basic "):
            client_id, _, client_secret = base64.b64decode(authorization[6:]).decode().partition(":")
            client_id, client_secret = _unquote(client_id), _unquote(client_secret)
        if client_id != self.client_id or not secrets.compare_digest(str(client_secret), self.client_secret):
            return _error(401, "invalid_client")
        with self._lock:
            grant = self.codes.pop(form.get("code", ""), None)  # a code works once
        if (form.get("grant_type") != "authorization_code" or grant is None or grant["client_id"] != client_id
                or grant["redirect_uri"] != form.get("redirect_uri")
                or time.time() - grant["issued"] > CODE_LIFETIME_S):
            return _error(400, "invalid_grant")
        if grant["challenge"] and not _pkce_ok(grant["challenge"], grant["method"], form.get("code_verifier")):
            return _error(400, "invalid_grant")
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": client_id, "sub": "user-" + hashlib.sha256(grant["email"].encode())
                  .hexdigest()[:16], "iat": now, "exp": now + 300, "email": grant["email"],
                  "email_verified": self.email_verified, "name": grant["name"]}
        if grant["nonce"]:
            claims["nonce"] = grant["nonce"]
        id_token = jwt.encode({"alg": "RS256", "kid": "test-key"}, claims, self.key)
        access = secrets.token_urlsafe(24)
        with self._lock:
            self.tokens[access] = {k: claims[k] for k in ("sub", "email", "email_verified", "name")}
        self.record("token", grant["email"])
        body = {"access_token": access, "token_type": "Bearer", "expires_in": 300, "id_token": id_token,
                "scope": "openid email profile"}
        return 200, {"Content-Type": "application/json", "Cache-Control": "no-store"}, json.dumps(body).encode()

    def userinfo(self, authorization: str | None) -> tuple[int, dict, bytes]:
        token = (authorization or "")[7:] if (authorization or "").lower().startswith("bearer ") else ""
        with self._lock:
            claims = self.tokens.get(token)
        if claims is None:
            return _error(401, "invalid_token")
        return 200, {"Content-Type": "application/json"}, json.dumps(claims).encode()

    def logout(self, query: dict) -> tuple[int, dict, bytes]:
        self.record("logout", query.get("client_id", ""))
        target = query.get("post_logout_redirect_uri")
        if target not in self.redirect_uris:
            return 200, {"Content-Type": "text/plain"}, b"signed out"
        return 302, {"Location": target}, b""


def _unquote(text: str) -> str:
    from urllib.parse import unquote_plus

    return unquote_plus(text)


def _pkce_ok(challenge: str, method: str, verifier: str | None) -> bool:
    if not verifier:
        return False
    if method == "S256":
        digest = hashlib.sha256(verifier.encode()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == challenge
    return verifier == challenge


def _error(status: int, code: str) -> tuple[int, dict, bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps({"error": code}).encode()


def _handler(provider: OidcProvider):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, answer: tuple[int, dict, bytes]) -> None:
            status, headers, body = answer
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _query(self) -> dict:
            return {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}

        def _form(self) -> dict:
            length = min(int(self.headers.get("Content-Length") or 0), 64 * 1024)
            return {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = urlparse(self.path).path
            auth = self.headers.get("Authorization")
            routes = {"/.well-known/openid-configuration": lambda: (200, {"Content-Type": "application/json"},
                                                                    json.dumps(provider.metadata()).encode()),
                      "/jwks": lambda: (200, {"Content-Type": "application/json"},
                                        json.dumps({"keys": [provider.key.as_dict(private=False)]}).encode()),
                      "/authorize": lambda: provider.authorize_form(self._query()),
                      "/userinfo": lambda: provider.userinfo(auth),
                      "/logout": lambda: provider.logout(self._query())}
            self._send(routes[path]() if path in routes else (404, {}, b"not found"))

        def do_POST(self) -> None:  # noqa: N802
            path = urlparse(self.path).path
            if path == "/authorize":
                self._send(provider.sign_in(self._form()))
            elif path == "/token":
                self._send(provider.token(self._form(), self.headers.get("Authorization")))
            elif path == "/userinfo":
                self._send(provider.userinfo(self.headers.get("Authorization")))
            else:
                self._send((404, {}, b"not found"))

    return Handler
