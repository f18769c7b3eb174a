"""The Cohort page's attributions: read from a matching batch store, or computed here in
batches that Stop, Continue and any changed setting interrupt, keeping the finished ones.

Session state ``cohort_job``: {"key", "parts" ({batch index: attribution}), "stopped", "seconds"}.
"""

from __future__ import annotations

import time

import streamlit as st

from explain.analysis import cohort
from explain.core.errors import ExplainError
from ui import cache, show

NO_STORE = ("No precomputed batch store matches this bundle and these settings, so the page computes them; "
            "changing a setting or pressing Stop interrupts that, finished batches are kept. To precompute: "
            "python -m explain batch --bundle BUNDLE --out BUNDLE/attributions/NAME with the same settings (or a "
            "folder under $EXPLAIN_STORES); this page then reads them.")
STORE_UNUSABLE = ("A precomputed batch store matches these settings but cannot be used, so the attributions are "
                  "computed here instead. {error}")
FROM_STORE = ("Read from the precomputed batch store {name} (finished {finished} UTC, same bundle content and "
              "settings): {n} customers, nothing recomputed.")


def _set_stopped(value: bool) -> None:
    if "cohort_job" in st.session_state:
        st.session_state["cohort_job"]["stopped"] = value


def _job(bundle, ids, request) -> dict:
    key = (bundle.content_hash, tuple(ids), request.key())
    job = st.session_state.get("cohort_job")
    if job is None or job["key"] != key:
        job = st.session_state["cohort_job"] = {"key": key, "parts": {}, "stopped": False, "seconds": 0.0}
    return job


def button_states(job, n_batches: int) -> dict:
    """What the Stop and Compute/Continue buttons show for ``job``: {"stop": enabled, "play":
    None (not shown, all done) or (label, enabled), "running": bool}. A running job can be
    stopped; a stopped one continued (or computed, when nothing is done yet); a finished one neither."""
    done = len(job["parts"])
    if done >= n_batches:
        return {"stop": False, "play": None, "running": False}
    running = not job["stopped"]
    label = "Continue" if done else "Compute"
    return {"stop": running, "play": (label, not running), "running": running}


def run_ui(bundle, ids, request) -> dict:
    """Explain ``ids`` in batches with a progress bar, Stop and Continue; returns the job.

    The buttons are drawn before the batches run, so a run that finishes reruns the page once
    to draw them as they now are (no Stop, no Continue)."""
    job = _job(bundle, ids, request)
    batches = cohort.batches(ids)
    buttons = button_states(job, len(batches))
    c1, c2, c3 = st.columns([1, 1, 4], vertical_alignment="center")
    # callbacks: they run before the script, so a click while the loop runs stops it at once
    c1.button("Stop", icon=":material/stop:", disabled=not buttons["stop"], on_click=_set_stopped, args=(True,))
    if buttons["play"] is not None:
        label, enabled = buttons["play"]
        c2.button(label, icon=":material/play_arrow:", disabled=not enabled, on_click=_set_stopped, args=(False,))
    todo = [k for k in range(len(batches)) if k not in job["parts"]]
    if buttons["running"]:
        bar = c3.progress(len(job["parts"]) / len(batches), text="Computing attributions...")
        for k in todo:
            start = time.perf_counter()
            job["parts"][k] = cache.attributions(bundle, batches[k], request,
                                                 what=f"cohort batch {k + 1}/{len(batches)}")
            job["seconds"] += time.perf_counter() - start
            done = len(job["parts"])
            bar.progress(done / len(batches), text=f"{done * cohort.BATCH if done < len(batches) else len(ids)} of "
                                                   f"{len(ids)} customers explained")
        st.rerun()  # finished: draw the buttons as they now are
    elif todo:
        c3.warning(f"Stopped after {len(job['parts']) * cohort.BATCH} of {len(ids)} customers; the results below "
                   f"use those. Press {buttons['play'][0]} to finish.")
    else:
        c3.progress(1.0, text=f"{len(ids)} of {len(ids)} customers explained in {job['seconds']:.1f} s, "
                              f"{cohort.BATCH} per batch.")
    return job


def from_store_ui(bundle, ids, request):
    """The precomputed attributions of ``ids`` if a finished batch store matches (said in a note), else None."""
    try:
        stored = cache.stored_attributions(bundle, ids, request)
    except ExplainError as error:
        st.warning(show.md(STORE_UNUSABLE.format(error=error)), icon=":material/warning:")
        return None
    if stored is None:
        st.caption(show.md(NO_STORE))
        return None
    st.success(show.md(FROM_STORE.format(name=stored.path.name, finished=stored.completed.replace("T", " ")[:16],
                                         n=len(ids))), icon=":material/database:")
    return stored


def attributions_ui(bundle, ids, request):
    """(ids explained, static (n, S), temporal (n, T, F), padding (n, T)) from a store or this
    page's job; None while nothing is computed yet (the page says to press Compute)."""
    stored = from_store_ui(bundle, ids, request)
    if stored is not None:
        return ids, stored.static, stored.temporal, cohort.padding_of(stored)
    job = run_ui(bundle, ids, request)
    if not job["parts"]:
        st.info("Press Compute to explain these customers.")
        return None
    return cohort.gather(job["parts"], ids)
