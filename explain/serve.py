"""``explain serve``: start the Streamlit dashboard, from an installed package or a checkout.

Where the dashboard is: a wheel carries a copy of the repository's ``app.py``, ``pages/``,
``ui/``, ``.streamlit/config.toml`` and demo bundle in ``explain/_dashboard/`` (setup.py's
build step); a source checkout (or an editable install) runs the repository's own files.
Streamlit puts the script's folder first on ``sys.path``, so ``from ui import ...`` in
``app.py`` finds the ``ui`` next to it; nothing named ``ui`` is installed at the top level.

Streamlit reads ``.streamlit/config.toml`` from the current directory only, so the shipped
config is passed as command-line options (``--server.headless=true`` ...): the app's
settings (no tracebacks in the browser, upload limit, no file watcher, no other site allowed to
drive it from a frame) hold wherever the command is started.

Who may open it: ``serve`` listens on a loopback address unless a login is configured (``--auth oidc``:
Streamlit's ``st.login`` against the owner's OpenID Connect provider, with an allow-list; or a
``.streamlit/secrets.toml`` with ``[auth]`` and ``[access] allow``) or ``behind_auth_proxy`` says a proxy
that signs users in stands in front (then it prints what it trusts). ``--auth oidc`` writes its settings
into a private temporary ``secrets.toml`` (``write_secrets``; never printed), which the launcher removes
when the server exits. The launcher adds headers that deny framing by other sites (``ui.runtime.deny_framing``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from explain.access import parse_allow
from explain.core.errors import ExplainError
from explain.modelfile.limits import OWNER_LIMITS, UPLOAD_LIMITS, Limits, limit_arguments

PACKAGED = Path(__file__).resolve().parent / "_dashboard"   # inside an installed wheel
CHECKOUT = Path(__file__).resolve().parent.parent           # the repository, when run from source
DEFAULT_PORT = 8501
DEFAULT_ADDRESS = "127.0.0.1"

NO_DASHBOARD = ("The dashboard's files were not found: expected {packaged}/app.py (an installed wheel) or "
                "{checkout}/app.py (a source checkout). Reinstall the package with `pip install .` from the "
                "repository (a wheel built by `python -m build` carries the dashboard).")
NO_STREAMLIT = ("`explain serve` needs Streamlit, which is not installed. Install the dashboard extra: "
                "pip install 'explain[dashboard]' (or pip install -r requirements.txt in the repository).")
CANNOT_START = ("cannot start the dashboard: {program} could not be run ({reason}). Check that this Python exists "
                "and that this user may run it (its folder's permissions), or start the dashboard from the checkout "
                "with `streamlit run app.py`.")
NOT_A_BUNDLE = ("--bundle {path} is not a folder. A bundle is a folder holding model.keras, a static and a "
                "temporal table (see `explain check --bundle DIR`).")
NOT_A_MODEL = ("--challenger {path} is not a file. Give the challenger's model file (.keras, or a legacy .h5) "
               "taking the same inputs as the bundle's model; it is opened by the same rules (--limit, safe mode, "
               "--trust-code).")
BAD_PORT = "--port {port} must be a TCP port number from 1 to 65535."
NO_ORIGIN = "none"  # the value of an empty list option on the command line (client.allowedOrigins = [])
OPEN_ADDRESS = ("--address {address} would let anyone who can reach this machine open the dashboard, its bundle and "
                "its uploads, and no login is configured. Either (1) configure the dashboard's login: --auth oidc "
                "--oidc-metadata URL --client-id ID --client-secret SECRET --allow EMAIL_OR_@DOMAIN (or [auth] and "
                "[access] allow in .streamlit/secrets.toml), or (2) put it behind a reverse proxy that signs users "
                "in (OAuth2 Proxy, your identity provider's gateway) and start it with --behind-auth-proxy. Or keep "
                "the default --address 127.0.0.1 and reach it through an SSH tunnel.")
PROXY_TRUST = ("explain: --behind-auth-proxy: listening on {address}:{port} without a login of its own. Trusted: "
               "every request that reaches this port comes through your proxy, which has signed the user in. Make "
               "sure nothing else can reach the port (a firewall, or listen on the proxy's private network only), and "
               "that the proxy keeps the headers this server sends against framing by other sites (X-Frame-Options: "
               "SAMEORIGIN, Content-Security-Policy: frame-ancestors 'self').")


SECRET_ENV = "EXPLAIN_OIDC_CLIENT_SECRET"  # the client secret, kept off the command line (``ps`` shows arguments)
AUTH_DIR_ENV = "EXPLAIN_AUTH_DIR"  # the launcher removes this folder (the generated secrets) when the server exits
AUTH_PREFIX = "explain-auth-"
CALLBACK = "/oauth2callback"  # the path Streamlit's login answers on (st.login's redirect_uri)
AUTH_MISSING = ("--auth oidc needs {missing}. For example: explain serve --auth oidc --oidc-metadata "
                "https://login.example.com/.well-known/openid-configuration --client-id ID --client-secret SECRET "
                "(or ${env}) --allow @example.com")
AUTH_ONLY = "{option} works with --auth oidc only (the settings of the dashboard's login)."
BAD_URL = ("--{option} {value!r} must be an absolute http(s) URL{more}. To fix: copy it from your identity "
           "provider's settings.")
REDIRECT_NEEDED = ("--address {address} with --auth oidc needs --redirect-uri https://HOST{callback}: the address "
                   "your users open, followed by {callback}, registered at your identity provider as a redirect URI "
                   "(the default http://localhost:{port}{callback} reaches only this machine).")
BAD_TEXT = "--{option} must be one line of printable text (it is written into the login's settings)."
LOGIN_NOTE = ("explain: login: OpenID Connect through {metadata} (client {client}); {count} allow-list entr{ies}; "
              "redirect URI {redirect}")


@dataclass(frozen=True)
class Oidc:
    """The settings of the dashboard's login (``--auth oidc``): the provider's discovery document
    (``.well-known/openid-configuration``), this app's client id and secret at the provider, the allow-list
    (``explain.access``) and the redirect URI registered there (None: ``http://localhost:PORT/oauth2callback``)."""

    metadata_url: str
    client_id: str
    client_secret: str
    allow: tuple[str, ...]
    redirect_uri: str | None = None

    def __repr__(self) -> str:  # never the secret, not even in a traceback
        return f"Oidc(metadata_url={self.metadata_url!r}, client_id={self.client_id!r}, allow={self.allow!r})"


def _url(option: str, value: str, path_end: str | None = None) -> str:
    parsed = urlparse(str(value))
    if parsed.scheme not in ("http", "https") or not parsed.netloc or (path_end and not parsed.path.endswith(path_end)):
        raise ExplainError(BAD_URL.format(option=option, value=str(value)[:200],
                                          more=f" ending in {path_end}" if path_end else ""))
    return _text(option, value)


def _text(option: str, value: str) -> str:
    if not value or not str(value).isprintable():
        raise ExplainError(BAD_TEXT.format(option=option))
    return str(value)


def oidc_settings(metadata_url: str | None, client_id: str | None, client_secret: str | None, allow,
                  redirect_uri: str | None = None, environ=None) -> Oidc:
    """The :class:`Oidc` of ``--auth oidc``'s options, each checked; the client secret from ``client_secret`` or
    else ``$EXPLAIN_OIDC_CLIENT_SECRET``. ``ExplainError`` naming what is missing or wrong."""
    environ = os.environ if environ is None else environ
    client_secret = client_secret or environ.get(SECRET_ENV)
    missing = [name for name, value in (("--oidc-metadata URL", metadata_url), ("--client-id ID", client_id),
                                        ("--client-secret SECRET", client_secret), ("--allow EMAIL_OR_@DOMAIN", allow))
               if not value]
    if missing:
        raise ExplainError(AUTH_MISSING.format(missing=", ".join(missing), env=SECRET_ENV))
    return Oidc(_url("oidc-metadata", metadata_url), _text("client-id", client_id),
                _text("client-secret", client_secret), parse_allow(allow),
                None if redirect_uri is None else _url("redirect-uri", redirect_uri, CALLBACK))


def _toml(value) -> str:
    """A TOML value: a basic string (JSON's escapes are TOML's) or a list of them."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def secrets_text(oidc: Oidc, port: int, cookie_secret: str) -> str:
    """The ``secrets.toml`` of ``oidc``: Streamlit's ``[auth]`` (st.login) and the dashboard's ``[access]``."""
    auth = {"redirect_uri": oidc.redirect_uri or f"http://localhost:{port}{CALLBACK}", "cookie_secret": cookie_secret,
            "client_id": oidc.client_id, "client_secret": oidc.client_secret, "server_metadata_url": oidc.metadata_url}
    lines = ["# written by explain serve --auth oidc; removed when the server exits", "[auth]"]
    lines += [f"{key} = {_toml(value)}" for key, value in auth.items()]
    lines += ["", "[access]", f"allow = {_toml(oidc.allow)}", ""]
    return "\n".join(lines)


OWNER_FILE = "server.pid"  # in an explain-auth-* folder: the server that removes it at exit


def write_secrets(oidc: Oidc, port: int) -> Path:
    """``secrets.toml`` for ``oidc`` (with a new random cookie secret) in a new private folder
    (``explain-auth-*/.streamlit/``, owner only), with this process's id (the server's: it execs
    Streamlit) beside it; its path. Folders of servers that were killed first are swept
    (:func:`sweep_auth_folders`)."""
    sweep_auth_folders()
    top = Path(tempfile.mkdtemp(prefix=AUTH_PREFIX))
    (top / OWNER_FILE).write_text(str(os.getpid()), encoding="ascii")
    folder = top / ".streamlit"
    folder.mkdir(mode=0o700)
    path = folder / "secrets.toml"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(secrets_text(oidc, port, secrets.token_urlsafe(32)))
    return path


def sweep_auth_folders(parent: Path | None = None) -> list[Path]:
    """Remove the ``explain-auth-*`` folders (generated login secrets) that a server killed with
    SIGKILL could not remove at exit: in the temporary folder (or ``parent``), real folders of this
    user whose server (:data:`OWNER_FILE`) is no longer running; a folder without that file (written
    before it existed) once it is a day old. Never another user's, a link, or a running server's. The
    folders removed."""
    import shutil
    import stat
    import time

    removed = []
    for path in Path(parent or tempfile.gettempdir()).glob(AUTH_PREFIX + "*"):
        try:
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            try:
                pid = int((path / OWNER_FILE).read_text(encoding="ascii").strip())
            except FileNotFoundError:
                pid = None
            if pid is not None and pid != os.getpid() and _running(pid):
                continue
            if pid is None and time.time() - info.st_mtime < 86400:
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (PermissionError): running
        return True
    return True


def secrets_login(paths=None) -> bool:
    """Whether a ``secrets.toml`` where Streamlit looks for one (``~/.streamlit/``, then ``./.streamlit/``)
    configures the login: an ``[auth]`` section (redirect_uri, cookie_secret, client_id, client_secret,
    server_metadata_url) and a valid ``[access] allow`` list."""
    paths = paths or [Path.home() / ".streamlit" / "secrets.toml", Path.cwd() / ".streamlit" / "secrets.toml"]
    merged: dict = {}
    for path in paths:
        try:
            merged.update(tomllib.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
    auth = merged.get("auth")
    keys = ("redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url")
    if not isinstance(auth, dict) or not all(auth.get(key) for key in keys):
        return False
    try:
        parse_allow((merged.get("access") or {}).get("allow"))
    except (ExplainError, AttributeError, TypeError):
        return False
    return True


def is_loopback(address: str) -> bool:
    """True for an address only this machine reaches: 127.0.0.0/8, ::1, localhost, a Unix socket."""
    import ipaddress

    if address in ("localhost", "") or address.startswith("unix://"):
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:  # a host name: whatever it resolves to, it is not known to be private
        return False


def check_address(address: str, behind_auth_proxy: bool, login: bool = False) -> str | None:
    """``ExplainError`` (OPEN_ADDRESS) for a non-loopback ``address`` without a ``login`` (OIDC configured) nor
    ``behind_auth_proxy``; with the proxy, the words saying what the server then trusts (PROXY_TRUST's text is
    printed by :func:`serve`), else None."""
    if is_loopback(address) or (login and not behind_auth_proxy):
        return None
    if not behind_auth_proxy:
        raise ExplainError(OPEN_ADDRESS.format(address=address))
    return PROXY_TRUST


def dashboard_dir() -> Path:
    """The folder holding the dashboard's ``app.py``, ``pages/`` and ``ui/``."""
    for root in (PACKAGED, CHECKOUT):
        if (root / "app.py").is_file() and (root / "ui").is_dir() and (root / "pages").is_dir():
            return root
    raise ExplainError(NO_DASHBOARD.format(packaged=PACKAGED, checkout=CHECKOUT))


def config_flags(root: Path) -> list[str]:
    """``root/.streamlit/config.toml`` as Streamlit options: ``[server] headless = true`` ->
    ``--server.headless=true``."""
    path = root / ".streamlit" / "config.toml"
    if not path.is_file():
        return []
    flags = []
    for section, options in tomllib.loads(path.read_text(encoding="utf-8")).items():
        for key, value in options.items():
            if isinstance(value, list):  # one flag per item; a flag cannot say "empty": an origin matching nothing
                flags += [f"--{section}.{key}={item}" for item in value] or [f"--{section}.{key}={NO_ORIGIN}"]
                continue
            text = str(value).lower() if isinstance(value, bool) else str(value)
            flags.append(f"--{section}.{key}={text}")
    return flags


def command(bundle: str | os.PathLike | None = None, *, port: int = DEFAULT_PORT,
            address: str = DEFAULT_ADDRESS, trust_code: str | os.PathLike | None = None,
            limits: Limits = OWNER_LIMITS, upload_limits: Limits = UPLOAD_LIMITS,
            secrets_file: str | os.PathLike | None = None, challenger: str | os.PathLike | None = None,
            trust_model: bool = False) -> list[str]:
    """The command line that serves ``bundle`` (default: the app's own default): ``ui/launch.py``,
    which is ``streamlit run app.py`` with the startup bundle opened while Streamlit starts;
    ``trust_code``: the owner's custom layers for that bundle (``--trust-code``, ``explain.modelfile.trust``);
    ``trust_model``: that bundle's TensorFlow SavedModel may be opened (``--trust-model``; never an upload's);
    ``limits``: the size limits of the startup bundle's files (``--limit``, over OWNER_LIMITS); ``upload_limits``:
    those of the visitors' uploads (``--upload-limit``, over UPLOAD_LIMITS); ``secrets_file``: the login's
    settings (:func:`write_secrets`), read by Streamlit instead of ``.streamlit/secrets.toml``; ``challenger``: a
    challenger model file (``--challenger``: the engineers' Champion against challenger page, ``pages/models.py``),
    opened by the app with the startup bundle's loader and limits."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ExplainError(BAD_PORT.format(port=port))
    root = dashboard_dir()
    argv = [sys.executable, str(root / "ui" / "launch.py"), *config_flags(root),
            f"--server.port={port}", f"--server.address={address}"]
    if secrets_file is not None:
        argv.append(f"--secrets.files={secrets_file}")
    extra = []
    if bundle is not None:
        path = Path(bundle).expanduser().resolve()
        if not path.is_dir():
            raise ExplainError(NOT_A_BUNDLE.format(path=bundle))
        extra += ["--bundle", str(path)]
    if trust_code is not None:
        from explain.modelfile.trust import TRUST_NOT_FOUND, TrustError

        code = Path(trust_code).expanduser().resolve()
        if not code.is_file():
            raise TrustError(TRUST_NOT_FOUND.format(path=trust_code))
        extra += ["--trust-code", str(code)]
    if trust_model:
        extra.append("--trust-model")
    if challenger is not None:
        model = Path(challenger).expanduser().resolve()
        if not model.is_file():
            raise ExplainError(NOT_A_MODEL.format(path=challenger))
        extra += ["--challenger", str(model)]
    extra += limit_arguments(limits, OWNER_LIMITS, "--limit")
    extra += limit_arguments(upload_limits, UPLOAD_LIMITS, "--upload-limit")
    if extra:
        argv += ["--", *extra]
    return argv


def serve(bundle: str | os.PathLike | None = None, *, port: int = DEFAULT_PORT,
          address: str = DEFAULT_ADDRESS, trust_code: str | os.PathLike | None = None,
          limits: Limits = OWNER_LIMITS, behind_auth_proxy: bool = False, auth: Oidc | None = None,
          upload_limits: Limits = UPLOAD_LIMITS, challenger: str | os.PathLike | None = None,
          trust_model: bool = False) -> int:
    """Run the dashboard until it is stopped; on POSIX the process becomes Streamlit's. A non-loopback
    ``address`` needs a login (``auth``, or one in ``.streamlit/secrets.toml``) or ``behind_auth_proxy``
    (:func:`check_address`)."""
    if auth is not None and not is_loopback(address) and auth.redirect_uri is None:
        raise ExplainError(REDIRECT_NEEDED.format(address=address, port=port, callback=CALLBACK))
    trust = check_address(address, behind_auth_proxy, login=auth is not None or secrets_login())
    if importlib.util.find_spec("streamlit") is None:
        raise ExplainError(NO_STREAMLIT)
    served = {"port": port, "address": address, "trust_code": trust_code, "limits": limits,
              "upload_limits": upload_limits, "challenger": challenger, "trust_model": trust_model}
    argv = command(bundle, **served)  # every check before a file is written
    if auth is not None:
        secrets_file = write_secrets(auth, port)
        os.environ[AUTH_DIR_ENV] = str(secrets_file.parent.parent)
        argv = command(bundle, **served, secrets_file=secrets_file)
        print(LOGIN_NOTE.format(metadata=auth.metadata_url, client=auth.client_id, count=len(auth.allow),
                                ies="y" if len(auth.allow) == 1 else "ies",
                                redirect=auth.redirect_uri or f"http://localhost:{port}{CALLBACK}"),
              file=sys.stderr, flush=True)
    if trust:
        print(trust.format(address=address, port=port), file=sys.stderr, flush=True)
    print(f"explain: serving {'the demo bundle' if bundle is None else bundle} at http://{address}:{port}",
          file=sys.stderr, flush=True)
    try:
        if os.name == "posix":
            os.execv(argv[0], argv)  # signals (Ctrl-C, kill) reach Streamlit itself
        return subprocess.call(argv)
    except OSError as error:  # PermissionError, a missing interpreter: one line, not a traceback
        raise ExplainError(CANNOT_START.format(program=argv[0], reason=error.strerror or error)) from None
