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

The dashboard has no login of its own: ``serve`` listens on a loopback address unless
``behind_auth_proxy`` says a proxy that signs users in stands in front (then it prints what it
trusts). The launcher adds headers that deny framing by other sites (``ui.runtime.deny_framing``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from explain.core.errors import ExplainError
from explain.modelfile.limits import DEFAULT_LIMITS, Limits, limit_arguments

PACKAGED = Path(__file__).resolve().parent / "_dashboard"   # inside an installed wheel
CHECKOUT = Path(__file__).resolve().parent.parent           # the repository, when run from source
DEFAULT_PORT = 8501
DEFAULT_ADDRESS = "127.0.0.1"

NO_DASHBOARD = ("The dashboard's files were not found: expected {packaged}/app.py (an installed wheel) or "
                "{checkout}/app.py (a source checkout). Reinstall the package with `pip install .` from the "
                "repository (a wheel built by `python -m build` carries the dashboard).")
NO_STREAMLIT = ("`explain serve` needs Streamlit, which is not installed. Install the dashboard extra: "
                "pip install 'explain[dashboard]' (or pip install -r requirements.txt in the repository).")
NOT_A_BUNDLE = ("--bundle {path} is not a folder. A bundle is a folder holding model.keras, a static and a "
                "temporal table (see `explain check --bundle DIR`).")
BAD_PORT = "--port {port} must be a TCP port number from 1 to 65535."
NO_ORIGIN = "none"  # the value of an empty list option on the command line (client.allowedOrigins = [])
OPEN_ADDRESS = ("--address {address} would let anyone who can reach this machine open the dashboard, its bundle and "
                "its uploads: the dashboard has no login of its own. Either keep the default --address 127.0.0.1 "
                "and reach it through an SSH tunnel, or put it behind a reverse proxy that signs users in (OAuth2 "
                "Proxy, your identity provider's gateway) and start it with --behind-auth-proxy.")
PROXY_TRUST = ("explain: --behind-auth-proxy: listening on {address}:{port} without a login of its own. Trusted: "
               "every request that reaches this port comes through your proxy, which has signed the user in. Make "
               "sure nothing else can reach the port (a firewall, or listen on the proxy's private network only), and "
               "that the proxy keeps the headers this server sends against framing by other sites (X-Frame-Options: "
               "SAMEORIGIN, Content-Security-Policy: frame-ancestors 'self').")


def is_loopback(address: str) -> bool:
    """True for an address only this machine reaches: 127.0.0.0/8, ::1, localhost, a Unix socket."""
    import ipaddress

    if address in ("localhost", "") or address.startswith("unix://"):
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:  # a host name: whatever it resolves to, it is not known to be private
        return False


def check_address(address: str, behind_auth_proxy: bool) -> str | None:
    """``ExplainError`` (OPEN_ADDRESS) for a non-loopback ``address`` without ``behind_auth_proxy``; with it,
    the words saying what the server then trusts (PROXY_TRUST's text is printed by :func:`serve`), else None."""
    if is_loopback(address):
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


def command(bundle: str | os.PathLike | None = None, port: int = DEFAULT_PORT,
            address: str = DEFAULT_ADDRESS, trust_code: str | os.PathLike | None = None,
            limits: Limits = DEFAULT_LIMITS) -> list[str]:
    """The command line that serves ``bundle`` (default: the app's own default): ``ui/launch.py``,
    which is ``streamlit run app.py`` with the startup bundle opened while Streamlit starts;
    ``trust_code``: the owner's custom layers for that bundle (``--trust-code``, ``explain.modelfile.trust``);
    ``limits``: the size limits of the startup bundle's and the uploads' files (``--limit``)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ExplainError(BAD_PORT.format(port=port))
    root = dashboard_dir()
    argv = [sys.executable, str(root / "ui" / "launch.py"), *config_flags(root),
            f"--server.port={port}", f"--server.address={address}"]
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
    extra += limit_arguments(limits)
    if extra:
        argv += ["--", *extra]
    return argv


def serve(bundle: str | os.PathLike | None = None, port: int = DEFAULT_PORT,
          address: str = DEFAULT_ADDRESS, trust_code: str | os.PathLike | None = None,
          limits: Limits = DEFAULT_LIMITS, behind_auth_proxy: bool = False) -> int:
    """Run the dashboard until it is stopped; on POSIX the process becomes Streamlit's. A non-loopback
    ``address`` needs ``behind_auth_proxy`` (:func:`check_address`)."""
    trust = check_address(address, behind_auth_proxy)
    if importlib.util.find_spec("streamlit") is None:
        raise ExplainError(NO_STREAMLIT)
    argv = command(bundle, port, address, trust_code, limits)
    if trust:
        print(trust.format(address=address, port=port), file=sys.stderr, flush=True)
    print(f"explain: serving {'the demo bundle' if bundle is None else bundle} at http://{address}:{port}",
          file=sys.stderr, flush=True)
    if os.name == "posix":
        os.execv(argv[0], argv)  # signals (Ctrl-C, kill) reach Streamlit itself
    return subprocess.call(argv)
