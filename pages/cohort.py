"""Cohort: attributions over many customers, read from a matching batch store or computed in
batches (stoppable), with filters."""

import time

import numpy as np
import streamlit as st

from explain import baselines, figures
from explain.errors import ExplainError
from ui import pickers, show, state

BATCH = 100  # customers per call
BANDS = {"low (< 0.3)": (0.0, 0.3), "medium (0.3 to 0.6)": (0.3, 0.6), "high (>= 0.6)": (0.6, 1.0 + 1e-9)}


def sample_ids(bundle, size: str) -> list[str]:
    if size == "all" or int(size) >= bundle.n_customers:
        return bundle.ids.tolist()
    rows = np.sort(np.random.default_rng(0).choice(bundle.n_customers, size=int(size), replace=False))
    return [str(i) for i in bundle.ids[rows]]


def _set_stopped(value: bool) -> None:
    if "cohort_job" in st.session_state:
        st.session_state["cohort_job"]["stopped"] = value


def run_job(bundle, ids, request) -> dict:
    """Explain ``ids`` in batches; each rerun stops the loop, partial results stay in session state."""
    key = (bundle.content_hash, tuple(ids), tuple(sorted(vars(request).items())))
    job = st.session_state.get("cohort_job")
    if job is None or job["key"] != key:
        job = st.session_state["cohort_job"] = {"key": key, "parts": {}, "stopped": False, "seconds": 0.0}
    c1, c2, c3 = st.columns([1, 1, 4], vertical_alignment="center")
    # callbacks: they run before the script, so a click while the loop runs stops it at once
    c1.button("Stop", icon=":material/stop:", disabled=len(job["parts"]) * BATCH >= len(ids),
              on_click=_set_stopped, args=(True,))
    c2.button("Continue" if job["parts"] else "Compute", icon=":material/play_arrow:",
              on_click=_set_stopped, args=(False,))
    batches = [ids[k:k + BATCH] for k in range(0, len(ids), BATCH)]
    todo = [k for k in range(len(batches)) if k not in job["parts"]]
    if todo and not job["stopped"]:
        bar = c3.progress(len(job["parts"]) / len(batches), text="Computing attributions...")
        for k in todo:
            start = time.perf_counter()
            job["parts"][k] = state.attributions(bundle, batches[k], request,
                                                 what=f"cohort batch {k + 1}/{len(batches)}")
            job["seconds"] += time.perf_counter() - start
            done = len(job["parts"])
            bar.progress(done / len(batches), text=f"{done * BATCH if done < len(batches) else len(ids)} of "
                                                   f"{len(ids)} customers explained")
    elif todo:
        c3.warning(f"Stopped after {len(job['parts']) * BATCH} of {len(ids)} customers; the results below use "
                   "those. Press Continue to finish.")
    else:
        c3.caption(f"{len(ids)} customers explained in {job['seconds']:.1f} s, {BATCH} per batch.")
    return job


def from_store(bundle, ids, request):
    """The precomputed attributions of ``ids`` if a finished batch store matches, else None."""
    try:
        stored = state.stored_attributions(bundle, ids, request)
    except ExplainError as error:
        st.warning(show.md(f"A precomputed batch store matches these settings but cannot be used, so the "
                           f"attributions are computed here instead. {error}"), icon=":material/warning:")
        return None
    if stored is None:
        st.caption(show.md("No precomputed batch store matches this bundle and these settings, so the page "
                           "computes them; changing a setting or pressing Stop interrupts that, finished batches "
                           "are kept. To precompute: python -m explain batch --bundle BUNDLE --out "
                           "BUNDLE/attributions/NAME with the same settings; this page then reads them."))
        return None
    finished = stored.completed.replace("T", " ")[:16]
    st.success(show.md(f"Read from the precomputed batch store {stored.path.name} (finished {finished} UTC, same "
                       f"bundle content and settings): {len(ids)} customers, nothing recomputed."),
               icon=":material/database:")
    return stored


def cohort_page():
    bundle, choice = pickers.frame()
    request = choice.request
    st.title("Cohort")
    st.caption(show.md(f"Baseline {request.baseline} · {request.steps} steps · {request.method}."))
    size = pickers.sample_ui()
    ids = sample_ids(bundle, size)
    stored = from_store(bundle, ids, request)
    if stored is not None:
        done_ids, static, temporal = ids, stored.static, stored.temporal
    else:
        job = run_job(bundle, ids, request)
        if not job["parts"]:
            st.info("Press Compute to explain these customers.")
            return
        order = sorted(job["parts"])
        done_ids = [i for k in order for i in ids[k * BATCH:(k + 1) * BATCH]]
        static = np.concatenate([job["parts"][k].static for k in order])
        temporal = np.concatenate([job["parts"][k].temporal for k in order])
    rows = np.array([bundle.index_of(i) for i in done_ids])
    risk = state.predictions(bundle, request.target)[rows]

    f1, f2 = st.columns(2)
    bands = f1.multiselect("Predicted risk band", list(BANDS), default=list(BANDS))
    keep = np.zeros(len(rows), bool)
    for band in bands:
        low, high = BANDS[band]
        keep |= (risk >= low) & (risk < high)
    if bundle.labels is not None:
        values = pickers.label_values(bundle)
        chosen = f2.multiselect("True outcome (label)", values, default=values,
                                format_func=lambda v: f"{bundle.label_name} = {v}")
        keep &= np.isin(np.array([baselines._label_text(v) for v in bundle.labels[rows]]), chosen)
    n = int(keep.sum())
    st.markdown(f"**{n}** of {len(done_ids)} explained customers match the filters.")
    if n == 0:
        st.warning("No customer matches these filters.")
        return
    static, temporal = static[keep], temporal[keep]
    show.plot(figures.risk_histogram(risk[keep], [0.3, 0.6], title="Predicted risk of the customers shown"),
              key="cohort_risk")

    left, right = st.columns(2)
    with left:
        show.plot(figures.magnitude_heatmap(bundle.periods, bundle.temporal_labels, np.abs(temporal).mean(axis=0),
                                            title="How much each cell matters: mean |attribution|"), key="cohort_abs")
    with right:
        show.plot(figures.temporal_heatmap(bundle.periods, bundle.temporal_labels, temporal.mean(axis=0),
                                           title="Which way on average: signed mean"), key="cohort_signed")
    per_feature = temporal.sum(axis=1)  # (n, F): each temporal feature summed over periods
    labels = [f"{name} (static)" for name in bundle.static_labels] + \
             [f"{name} (all periods)" for name in bundle.temporal_labels]
    everything = np.concatenate([static, per_feature], axis=1)
    left, right = st.columns(2)
    with left:
        show.plot(figures.feature_ranking(labels, np.abs(everything).mean(axis=0), everything.mean(axis=0),
                                          title="Feature ranking"), key="cohort_ranking")
    with right:
        show.plot(figures.period_profile(bundle.periods, np.abs(temporal).sum(axis=2).mean(axis=0),
                                         temporal.sum(axis=2).mean(axis=0), title="Per-period profile"),
                  key="cohort_periods")


with show.guard():
    cohort_page()
