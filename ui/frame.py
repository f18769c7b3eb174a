"""The handshake between the frame (app.py) and the pages.

app.py opens the bundle, runs the sidebar and calls :func:`publish`; each page calls
:func:`page` to get what the frame chose, so a page never reads session state itself.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager

import streamlit as st

from ui import runtime, show, speed

_KEY = "_frame"
TIMING_ENV = "EXPLAIN_TIMING"  # =1: one line per script run on stderr (bench/latency.py reads them)
PROFILE_ENV = "EXPLAIN_PROFILE"  # =DIR: a cProfile file per script run there (read with pstats)
_ANSWERED = threading.Event()  # set when a session's script run has finished: the first visitor has a page


UNKNOWN_PAGE = "There is no page {path} in this dashboard, so it opened the {page} page. The pages are: {pages}."


def unknown_page_note(pages, page) -> None:
    """Say so when the browser asked for a page path that none of ``pages`` (st.Page) has."""
    path = runtime.requested_path()
    known = {"/" + p.url_path for p in pages} | {"/"}
    if path is not None and path not in known:
        listed = ", ".join("/" + p.url_path for p in pages)
        st.warning(show.md(UNKNOWN_PAGE.format(path=path, page=page.title, pages=listed)), icon=":material/link_off:")


def publish(bundle, choice, problem: Exception | None) -> None:
    """What this run's frame found: the bundle (or None), the sidebar's choice, the bundle's problem."""
    st.session_state[_KEY] = (bundle, choice, problem)


def problem() -> Exception | None:
    """Why the startup bundle could not be opened (None if it was)."""
    return st.session_state.get(_KEY, (None, None, None))[2]


def page(required: bool = True):
    """(bundle, choice) for a page; shows the bundle's problem and stops when there is none.

    ``required=False`` (the Data & model page) returns (None, None) instead of stopping.
    """
    runtime.ensure_frame_ran()
    bundle, choice, trouble = st.session_state.get(_KEY, (None, None, None))
    if not required:
        return bundle, choice
    if bundle is not None and choice is None:
        st.stop()  # the sidebar has shown its error
    if bundle is None:
        st.title("No bundle open")
        if trouble is not None:
            show.error(trouble)
        st.info("Open the **Data & model** page to upload a bundle, or start the app with "
                "`streamlit run app.py -- --bundle DIR`.")
        st.page_link("pages/data.py", label="Data & model", icon=":material/upload_file:")
        st.stop()
    return bundle, choice


@contextmanager
def timed(what: str):
    """Time a script run; with ``EXPLAIN_TIMING=1`` print ``explain-timing run=WHAT seconds=S at=T`` on
    stderr (the server log); with ``EXPLAIN_PROFILE=DIR`` write the run's cProfile statistics to
    ``DIR/TIME-WHAT.prof`` (read them with ``pstats``)."""
    start = time.perf_counter()
    folder = os.environ.get(PROFILE_ENV)
    profile = None
    if folder:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    try:
        yield
    finally:
        if profile is not None:
            profile.disable()
            os.makedirs(folder, exist_ok=True)
            profile.dump_stats(os.path.join(folder, f"{time.time():.3f}-{what.replace('/', '_')}.prof"))
        if os.environ.get(TIMING_ENV) == "1":
            print(f"explain-timing run={what} seconds={time.perf_counter() - start:.4f} at={time.time():.3f}",
                  file=sys.stderr, flush=True)
        _ANSWERED.set()
        speed.FIRST_SHOWN.set()


def note(name: str, seconds: float) -> None:
    """With ``EXPLAIN_TIMING=1``: ``explain-timing part=NAME seconds=S at=T`` on stderr (the server log), ``T`` the
    time it ended (seconds since the epoch): the launcher's parts of a server start (``ui/launch.py``), which
    ``bench/latency.py`` lays out beside the browser's times."""
    if os.environ.get(TIMING_ENV) == "1":
        print(f"explain-timing part={name} seconds={seconds:.4f} at={time.time():.3f}", file=sys.stderr, flush=True)


@contextmanager
def part(name: str):
    """Time the block as :func:`note` ``name`` (also when it raises)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        note(name, time.perf_counter() - start)


def answered(timeout: float) -> bool:
    """Wait until a session's script run has finished in this process (the first visitor has its page), at most
    ``timeout`` seconds; whether one has."""
    return _ANSWERED.wait(timeout)


def heatmap_sent(timeout: float) -> bool:
    """Wait until a session has sent its Customer page's heatmap or a script run has finished (a first visitor on
    another page: ``ui.speed.FIRST_SHOWN``), at most ``timeout`` seconds; whether one has."""
    return speed.FIRST_SHOWN.wait(timeout)
