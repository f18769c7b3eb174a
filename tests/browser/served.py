"""What the browser tests share (the fixtures are in tests/browser/conftest.py): ``streamlit run app.py`` on a
free loopback port (:func:`serve`), Debian's Chromium and its options, and the waits and screenshots of a page.

A screenshot is written only when ``EXPLAIN_SCREENSHOTS`` is set (``EXPLAIN_SCREENSHOTS=1 pytest tests/browser``):
no test reads one, and each cost a relayout of every figure at two sizes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.processes import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
# Debian's chromium-headless-shell where it is installed (scripts/test.sh installs it): the same Blink as Debian's
# chromium without the desktop browser around it, about a third less CPU for the browser tests (2026-12-07: 27-30 s
# against 39-43 s for test_browser_inert.py and test_browser_layout.py); else Debian's chromium
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
CHROMIUM = HEADLESS_SHELL if os.path.exists(HEADLESS_SHELL) else "/usr/bin/chromium"
SHOTS = ROOT / "tests" / "screenshots"
SHOTS_ENV = "EXPLAIN_SCREENSHOTS"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1400, "height": 1000}
STARTUP_TIMEOUT = 90  # seconds until /_stcore/health answers ok
RENDER_TIMEOUT = 90_000  # ms for a page to show its figures

# JS: the z values of the first heatmap trace on the page (not the grey "no data" layer of a padded history, the same
# for two customers with the same padding), as JSON (null while none is drawn).
HEATMAP_Z = """() => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const trace = (gd._fullData || []).find(t => t.type === 'heatmap' && t.name !== 'no data');
    if (trace && trace.z) return JSON.stringify(Array.from(trace.z, row => Array.from(row)));
  }
  return null;
}"""


def require_chromium(module: bool = False) -> None:
    """Skip (fail with CI set) when Debian's Chromium is missing; ``module``: the whole test file, at its import."""
    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing and CI is set: install Debian's chromium-headless-shell (or chromium) "
                    "package.", pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium-headless-shell or chromium package)",
                allow_module_level=module)


@contextmanager
def serve(log_dir: Path, *args: str, stores: Path | None = None):
    """``streamlit run app.py [-- args]`` on a free loopback port; yields its URL once healthy. ``stores``: the
    folder of the stores it computes (``EXPLAIN_STORES``; default the session's, tests/conftest.py)."""
    port = free_port()
    log = (Path(log_dir) / "server.log").open("w")
    env = {k: v for k, v in os.environ.items() if k != "EXPLAIN_BUNDLE"}
    if stores is not None:
        env["EXPLAIN_STORES"] = str(stores)
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
               "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(command + (["--", *args] if args else []),
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, STARTUP_TIMEOUT,
                     lambda: f"streamlit did not start (exit code {proc.poll()}); see {log.name}")
        yield url
    finally:
        end(proc)
        log.close()


def end(proc: subprocess.Popen) -> None:
    """SIGKILL to the server's process group (``start_new_session``): no test reads how a server shuts down, and a
    SIGTERM waited for the sessions' work still running (a store being computed): seconds at every teardown."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# JS: a promise that resolves once the app has stopped running (no status widget: Streamlit shows it from the moment
# a rerun is requested) and the page has not changed for ``quiet`` ms (no node, attribute or text of the document
# changed: the last deltas are drawn, the figures laid out), or after ``most`` ms of a page that keeps changing.
SETTLED = """([quiet, most]) => new Promise(resolve => {
  const start = performance.now();
  let last = start;
  const seen = new MutationObserver(() => { last = performance.now(); });
  seen.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  const check = () => {
    const now = performance.now();
    if (document.querySelector('[data-testid=stStatusWidget]')) last = now;
    if (now - last >= quiet || now - start >= most) { seen.disconnect(); resolve(now - last >= quiet); }
    else setTimeout(check, 50);
  };
  check();
})"""


def wait_idle(page, quiet_ms: int = 500, most_ms: int = 1200) -> None:
    """Until the app has stopped running (no status widget) and the page has stayed the same for ``quiet_ms``
    (the figures are drawn), or ``most_ms`` have passed (a page that keeps changing: a progress shown while a store
    is computed): at most the fixed sleep of 1.2 s that stood here, and the end of a page's changes when sooner."""
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')")
    page.evaluate(SETTLED, [quiet_ms, most_ms])
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')")


def open_page(page, url: str, ready: str = ".js-plotly-plot") -> None:
    page.goto(url)
    page.wait_for_selector(ready)
    wait_idle(page)


def screenshot(page, name: str) -> Path | None:
    """A full-page PNG of the page when ``EXPLAIN_SCREENSHOTS`` is set (else None): Streamlit scrolls inside
    its own container, so grow the viewport to fit it."""
    if not os.environ.get(SHOTS_ENV):
        return None
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = page.evaluate("Math.max(...[...document.querySelectorAll("
                           "'[data-testid=stMain], [data-testid=stAppViewContainer], section')]"
                           ".map(e => e.scrollHeight), 0)")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], int(height))})
    page.wait_for_timeout(1500)  # plotly resizes
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(VIEWPORT)
    return path
