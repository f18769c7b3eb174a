"""The one module that touches Streamlit's private API (tested with Streamlit 1.67.0).

Six things the public API cannot do, each with a fallback when Streamlit moves them:

* :func:`keep_kernel_cache`: Streamlit's script runner calls ``keras.backend.clear_session()``
  after each run (its ``_clean_problem_modules``), which empties TF's kernel cache: the first
  gradient call of every rerun then re-optimises the compiled IG function, 0.2-0.3 s on 2
  cores, more than the whole computation. This app builds no model in its scripts (models
  live in ``st.cache_resource``), so the step only costs time; the patch keeps everything
  else that function does (closing matplotlib figures).
* :func:`ensure_frame_ran`: with a ``pages/`` folder next to app.py, Streamlit starts in its
  legacy multipage mode until some run calls ``st.navigation``, so the first run after a
  server start that opens a deep link (``/compare?...``) -- and every AppTest run -- executes
  the page file alone, without the frame and its sidebar. Switching the flag and rerunning
  runs app.py, which routes to this same page.
* :func:`wait_for_server`: until Streamlit's server in this process answers (the launcher's
  warm-up, ``ui/launch.py``, waits for it before taking the interpreter).
* :func:`should_stop`: Streamlit checks for a new rerun only when the script writes an
  element. A computation that writes nothing gets this as its ``should_stop`` callback and
  calls it between chunks: it raises Streamlit's own rerun/stop exception when this session
  asked for one (the run then ends, the lock of the model is released on the way out), and
  returns False otherwise. Outside a script run it returns False.

* :func:`deny_framing` (called by the launcher, ``ui/launch.py``): every HTTP response gets
  ``X-Frame-Options: SAMEORIGIN`` and ``Content-Security-Policy: frame-ancestors 'self'``, so that no
  other site embeds the app (Streamlit has no option for response headers); a middleware put first
  in the list Streamlit builds for its Starlette app.
* :func:`session_id` and :func:`known_sessions`: this run's session, and every session the server
  still holds (connected, or disconnected but kept for a reconnection): ``ui.uploads`` removes the
  upload folders of the others.

:func:`check_version` (called on import) logs a warning when the installed Streamlit is not
the tested one, naming what to recheck.
"""

from __future__ import annotations

import logging
import sys
import time

import streamlit as st

TESTED_VERSION = "1.67.0"
LOG = logging.getLogger("explain.app")
VERSION_WARNING = ("Streamlit {found} is installed; this app's workarounds in ui/runtime.py were tested with "
                   "{tested}. Recheck them (tests/app/test_app.py: the kernel-cache patch, deep links to a page, "
                   "a rerun that stops a computation) or install streamlit=={tested}.")
MISSING_WARNING = "Streamlit {found}: {what} is not where ui/runtime.py expects it; {effect}."

try:  # the stop/rerun check of the current script run
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_run_yield_check
except ImportError:  # pragma: no cover - another Streamlit layout: computations finish, reruns wait
    get_run_yield_check = None


def check_version() -> bool:
    """True if the installed Streamlit is the tested one; else logs a warning and returns False."""
    if st.__version__ == TESTED_VERSION:
        return True
    LOG.warning(VERSION_WARNING.format(found=st.__version__, tested=TESTED_VERSION))
    return False


def _missing(what: str, effect: str) -> None:
    LOG.warning(MISSING_WARNING.format(found=st.__version__, what=what, effect=effect))


def keep_kernel_cache() -> None:
    """Stop Streamlit from clearing Keras/TF state after every script run (see the module text)."""
    try:
        from streamlit.runtime.scriptrunner import script_runner
    except ImportError:  # pragma: no cover - another Streamlit layout
        script_runner = None
    current = getattr(script_runner, "_clean_problem_modules", None)
    if current is None:  # pragma: no cover - another Streamlit layout
        _missing("script_runner._clean_problem_modules", "every rerun's first gradient call may be slow")
        return
    if getattr(current, "keeps_kernel_cache", False):
        return

    def clean_problem_modules() -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            try:
                pyplot.close("all")
            except Exception:  # noqa: BLE001 - as Streamlit does
                pass

    clean_problem_modules.keeps_kernel_cache = True
    script_runner._clean_problem_modules = clean_problem_modules


def ensure_frame_ran() -> None:
    """Rerun through app.py when Streamlit ran this page file without it (see the module text)."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # pragma: no cover - another Streamlit layout
        return
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def requested_path() -> str | None:
    """The path of the browser's URL this run was asked for (``/nosuchpage``), without the
    server's base path; None when the browser did not say. (Streamlit opens its default page
    for an unknown path; this lets the frame say so.)"""
    try:
        from streamlit.runtime.context import _context_info_field
    except ImportError:  # pragma: no cover - another Streamlit layout
        return None
    url = _context_info_field("url")
    if not url:
        return None
    from urllib.parse import urlparse

    path = urlparse(url).path
    base = "/" + str(st.get_option("server.baseUrlPath") or "").strip("/")
    if base != "/" and path.startswith(base):
        path = path[len(base):]
    return "/" + path.strip("/")


def wait_for_server(timeout: float) -> bool:
    """Block until Streamlit's server in this process answers its health check (it is listening
    and has started), at most ``timeout`` seconds; True if it does. (``ui/launch.py``'s warm-up
    waits for it: started earlier, its imports would hold the interpreter while Streamlit starts.)"""
    import urllib.request

    try:
        from streamlit.runtime import Runtime
    except ImportError:  # pragma: no cover - another Streamlit layout: do not wait
        return False
    deadline = time.monotonic() + timeout
    while not Runtime.exists():  # the config is read once the runtime exists
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    address = st.get_option("server.address") or "127.0.0.1"
    host = "127.0.0.1" if address in ("0.0.0.0", "::") or address.startswith("unix://") else address
    base = str(st.get_option("server.baseUrlPath") or "").strip("/")
    url = f"http://{host}:{st.get_option('server.port')}/{base + '/' if base else ''}_stcore/health"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


FRAME_HEADERS = ((b"x-frame-options", b"SAMEORIGIN"), (b"content-security-policy", b"frame-ancestors 'self'"))


class DenyFraming:
    """ASGI middleware: FRAME_HEADERS on every HTTP response (the app's own frames, same origin, still work)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        names = {name for name, _ in FRAME_HEADERS}

        async def send_with_headers(message):
            if message.get("type") == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": kept + list(FRAME_HEADERS)}
            await send(message)

        return await self.app(scope, receive, send_with_headers)


def deny_framing() -> bool:
    """Make the server of this process send FRAME_HEADERS (before it starts); False if Streamlit moved."""
    try:
        from starlette.middleware import Middleware
        from streamlit.web.server.starlette import starlette_app
    except ImportError:  # pragma: no cover - another Streamlit layout
        _missing("streamlit.web.server.starlette.starlette_app", "set X-Frame-Options at your proxy")
        return False
    original = getattr(starlette_app, "create_streamlit_middleware", None)
    if original is None:  # pragma: no cover - another Streamlit layout
        _missing("starlette_app.create_streamlit_middleware", "set X-Frame-Options at your proxy")
        return False
    if getattr(original, "denies_framing", False):
        return True

    def create_streamlit_middleware():
        return [Middleware(DenyFraming), *original()]

    create_streamlit_middleware.denies_framing = True
    starlette_app.create_streamlit_middleware = create_streamlit_middleware
    return True


def session_id() -> str | None:
    """The id of the session this script run belongs to (None outside a run)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # pragma: no cover - another Streamlit layout
        return None
    ctx = get_script_run_ctx(suppress_warning=True)
    return getattr(ctx, "session_id", None)


def known_sessions() -> set[str] | None:
    """The ids of every session this server holds, connected or kept for a reconnection (Streamlit keeps a
    disconnected one about 2 minutes); None when there is no server in this process (AppTest, a script)."""
    try:
        from streamlit.runtime import Runtime
    except ImportError:  # pragma: no cover - another Streamlit layout
        return None
    if not Runtime.exists():
        return None
    manager = getattr(Runtime.instance(), "_session_mgr", None)
    if manager is None:  # AppTest's stand-in runtime holds no sessions
        return None
    if not hasattr(manager, "list_sessions"):  # pragma: no cover - another layout
        _missing("Runtime._session_mgr.list_sessions", "upload folders stay until the server exits")
        return None
    return {info.session.id for info in manager.list_sessions()}


def should_stop() -> bool:
    """Between two chunks of a computation: end the script run if a rerun or stop is pending.

    Raises Streamlit's rerun/stop exception in that case (a ``BaseException``, so nothing in
    the library catches it); False otherwise, and always False outside a script run.
    """
    check = get_run_yield_check() if get_run_yield_check is not None else None
    if check is not None:
        check()
    return False


if get_run_yield_check is None:  # pragma: no cover - another Streamlit layout
    _missing("get_run_yield_check", "a changed setting waits for the running computation to finish")
check_version()
keep_kernel_cache()
