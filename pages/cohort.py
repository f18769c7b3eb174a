"""Cohort: attributions over many customers, read from a matching batch store or computed in
batches (stoppable), with filters."""

import numpy as np
import streamlit as st

from explain.analysis import cohort
from explain.core import verdict
from explain.plots import figures
from explain.plots.periods import heatmap_plan
from ui import cache, frame, input_views, jobs, pickers, show, views


def cohort_page():
    bundle, choice = frame.page()
    input_views.one_history_only(bundle, "Cohort")
    settings = choice.settings
    st.title("Cohort")
    st.caption(show.md(f"Each customer compared with {pickers.compared_with(settings)}."))
    ids = cohort.sample_ids(bundle, pickers.sample_ui())
    explained = jobs.attributions_ui(bundle, ids, settings)
    if explained is None:
        return
    done_ids, static, temporal, padding = explained
    rows = np.array([bundle.index_of(i) for i in done_ids])
    risk = cache.predictions(bundle, settings.target)[rows]

    f1, f2 = st.columns([3, 2])
    bands = verdict.bands_of(bundle)
    ranges = verdict.ranges(bands)
    keep = cohort.in_bands(risk, f1.multiselect("Predicted risk band", list(ranges), default=list(ranges)), ranges)
    if bundle.labels is not None:
        keep &= cohort.with_labels(bundle.labels[rows], pickers.label_filter_ui(bundle, f2))
    n = int(keep.sum())
    st.markdown(f"**{n}** of {len(done_ids)} explained customers match the filters.")
    if n == 0:
        st.warning("No customer matches these filters.")
        return
    show.plot(figures.risk_histogram(risk[keep], verdict.cuts(bands), title="Predicted risk of the customers shown"),
              key="cohort_risk")
    agg = cohort.aggregate(static[keep], temporal[keep], bundle.static_labels, bundle.temporal_labels, padding[keep])

    view = views.view_ui(bundle.periods, "cohort")  # a long history: its bin and zoom
    left, right = st.columns(2)
    with left:
        plan = heatmap_plan(bundle.periods, bundle.temporal_labels, agg.mean_abs, view=view)
        show.plot(figures.magnitude_heatmap(bundle.periods, bundle.temporal_labels, agg.mean_abs, plan=plan,
                                            title="How much each cell matters: mean |attribution|"), key="cohort_abs")
    with right:
        plan = heatmap_plan(bundle.periods, bundle.temporal_labels, agg.signed_mean, view=view)
        show.plot(figures.temporal_heatmap(bundle.periods, bundle.temporal_labels, agg.signed_mean, plan=plan,
                                           title="Which way on average: signed mean"), key="cohort_signed")
    left, right = st.columns(2)
    with left:
        top = views.top_ui(len(agg.feature_names), "cohort_ranking")
        show.plot(figures.feature_ranking(agg.feature_names, agg.feature_abs, agg.feature_signed, top=top,
                                          title="Feature ranking"), key="cohort_ranking")
    with right:
        show.plot(figures.period_profile(bundle.periods, agg.period_abs, agg.period_signed, title="Per-period profile"),
                  key="cohort_periods")


with show.guard():
    cohort_page()
