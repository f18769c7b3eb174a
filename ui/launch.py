"""Start the dashboard with its startup bundle opened while Streamlit starts.

    python ui/launch.py [streamlit options] [-- --bundle DIR [--trust-code FILE] [--trust-model] [--challenger MODEL]]

``explain serve`` runs this. It is ``streamlit run app.py`` plus a background thread that, as soon
the process starts, does in this order (:data:`ORDER`):

1. what the first page needs: imports TensorFlow (at once, beside Streamlit's own start: the import is most of
   the first page's wait; ``EXPLAIN_IMPORT_EARLY=0`` imports once the server is up, as before), opens the startup
   bundle and computes every customer's score and the default view's attribution into the caches every session
   shares (``ui.cache.warm_first``): the first visitor's run finds them done, or waits for the same cache entry,
   instead of doing them again;
2. waits until a session has sent its first heatmap (``ui.frame.heatmap_sent``), then, for a model of long
   histories, compiles its one-customer calls with XLA (``ui.cache.warm_xla``: read back from TensorFlow's cache
   after ``explain check``) while the first page finishes, not beside the visitor's next clicks; then waits until
   that script run has finished (``ui.frame.answered``; each wait at most :data:`FIRST_WAIT` seconds when nobody
   comes), so that nothing else takes the two cores while the first page is made;
3. then the rest: with ``--challenger MODEL`` the challenger model (``ui.models``, by the startup bundle's loader
   and limits), and the What drives churn page's summary, or, for a small bundle without a store, that store
   computed by ``nice -n 19 python -m explain batch`` in a process of its own (``ui.cache.warm_background``,
   ``ui.stores``): the pages keep the cores, the store takes what they leave.

Nothing is computed twice. A warm-up that fails is logged and left to the first session, which reports the problem
in the page as it always does. With ``EXPLAIN_TIMING=1`` each part prints an ``explain-timing part=NAME`` line
(``bench/latency.py`` reads them). The server sends headers that deny framing by other
sites (``ui.runtime.deny_framing``), and the warm-up removes the upload folders of exited servers.
The login's settings that ``explain serve --auth oidc`` wrote (``$EXPLAIN_AUTH_DIR``) are removed when the
server exits.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
LOG = logging.getLogger("explain.app")


FIRST_WAIT = 30.0  # seconds the background work waits for the first visitor's page before it starts anyway
# the parts of the warm-up, in order (the names of their explain-timing lines)
ORDER = ("imports", "bundle-open", "scores", "first-attribution", "first-heatmap-wait", "xla", "first-answer-wait",
         "challenger", "background")


def warm_up() -> None:
    """What the first page needs, then the rest (see the module). The imports start with the process (they hold
    the interpreter while Streamlit starts: the server answers its health check later, the first page sooner)."""
    try:
        from ui import frame, runtime

        early = os.environ.get("EXPLAIN_IMPORT_EARLY", "1") == "1"
        if not early:
            runtime.wait_for_server(timeout=60.0)
        with frame.part("imports"):
            from ui import cache, startup, uploads
        if early:
            runtime.wait_for_server(timeout=60.0)
        uploads.sweep(None)  # the upload folders of servers that have exited
        # Streamlit warns once per cached call made outside a session ("missing ScriptRunContext!
        # This warning can be ignored"): here it is expected, so it is not logged
        quiet = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            _warm(frame, cache, startup)
        finally:
            quiet.setLevel(level)
    except Exception:  # noqa: BLE001 - the first session reports the bundle's problem in the page
        LOG.warning("warm-up of the startup bundle skipped", exc_info=True)


def _warm(frame, cache, startup) -> None:
    """The parts of :data:`ORDER` after the imports, each timed (``ui.frame.part``)."""
    with frame.part("bundle-open"):
        bundle = cache.open_bundle(startup.bundle_path())
    with frame.part("scores"):
        cache.predictions(bundle)
    with frame.part("first-attribution"):
        cache.warm_first(bundle)
    with frame.part("first-heatmap-wait"):
        frame.heatmap_sent(FIRST_WAIT)
    with frame.part("xla"):  # long histories: while the first page finishes (its what-if card), not beside a switch
        cache.warm_xla(bundle)
    with frame.part("first-answer-wait"):
        frame.answered(FIRST_WAIT)
    with frame.part("challenger"):
        _open_challenger()
    with frame.part("background"):
        cache.warm_background(bundle, separate=True)


def _open_challenger() -> None:
    """The challenger of ``--challenger MODEL`` into the cache every session shares (a file that cannot be opened is
    logged; the Champion vs challenger page says why)."""
    from ui import models, startup

    if startup.challenger_path() is None:
        return
    try:
        models.challenger_model()
    except Exception:  # noqa: BLE001 - the page reports the problem
        LOG.warning("the challenger model could not be opened", exc_info=True)


def streamlit_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the ``streamlit`` command's arguments, the app's own arguments) of this script's ``argv``:
    Streamlit's ``run`` options, then ``--`` and the app's arguments (``--bundle DIR``)."""
    split = argv.index("--") if "--" in argv else len(argv)
    options, app_args = argv[:split], argv[split + 1:]
    return ["run", str(APP), *options, *(["--", *app_args] if app_args else [])], app_args


def remove_at_exit(folder: str | None) -> bool:
    """Remove ``folder`` (the login settings of ``explain serve --auth oidc``) when this process exits; only a
    folder ``explain-auth-*`` of the temporary folder, never another. True if registered."""
    if not folder:
        return False
    path = Path(folder).resolve()
    if path.parent != Path(tempfile.gettempdir()).resolve() or not path.name.startswith("explain-auth-"):
        LOG.warning("not removing %s at exit: not a folder explain serve wrote", folder)
        return False
    atexit.register(shutil.rmtree, str(path), True)
    return True


def main(argv: list[str]) -> int:
    """Start the warm-up thread, then Streamlit on ``app.py`` (see :func:`streamlit_args`)."""
    remove_at_exit(os.environ.pop("EXPLAIN_AUTH_DIR", None))
    args, app_args = streamlit_args(argv)
    sys.path[0] = str(ROOT)  # this script's folder (ui/) would put its modules at the top level: `from ui import ...`
    sys.argv = [str(APP), *app_args]  # what the app reads (ui.startup), as under `streamlit run`
    from explain.core import backend

    backend.prepare_process()  # TensorFlow without its unused optional imports (2-3 s), its XLA cache on disk
    from streamlit.web import cli  # Streamlit's modules first: the warm-up's imports then share none in flight

    from ui import runtime

    threading.Thread(target=warm_up, name="explain-warm-up", daemon=True).start()
    runtime.deny_framing()  # no other site may embed the app
    return cli.main(args=args, prog_name="streamlit", standalone_mode=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
