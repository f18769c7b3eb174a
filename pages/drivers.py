"""What drives churn: every customer at once, from a batch store (words first, then the charts)."""

import streamlit as st

from explain.plots import drivers as plots
from ui import drivers as parts
from ui import frame, show, views


def drivers_page():
    bundle, choice = frame.page()
    st.title(f"What drives {show.md(bundle.output_names[choice.settings.target])}")
    found, store = parts.store_ui(bundle, choice.settings)  # the bundle's stores, listed once for this run
    if store is None:
        return
    words, controls = st.container(), st.columns(2)  # the words first, then the pickers they depend on
    with controls[0]:
        window = parts.window_ui(bundle)
    with controls[1]:
        against = parts.against_ui(found, store)
    view = parts.result(bundle, store, window, against)  # the result and its figures, kept together
    d = view.result
    with words:
        grouped = parts.group_ui(d)
        parts.words(d, grouped)
        parts.source_ui(bundle, choice.settings, found, store)  # which store, in words

    top = views.top_ui(len(d.grouped_ranking if grouped else d.ranking), "drivers_ranking")
    show.plot(parts.chart(view, "ranking", lambda d, top, grouped: plots.ranking(d, top, grouped=grouped), top,
                          grouped), key="drivers_ranking")
    parts.groups_ui(d)
    show.plot(parts.chart(view, "beeswarm", plots.beeswarm), key="drivers_beeswarm")
    st.subheader(f"Segments by what raises the {show.md(bundle.output_names[choice.settings.target])} risk")
    st.caption("Customers grouped by what raises their score (k-means on each customer's risk-raising effects; the "
               "number of segments chosen by the silhouette score), each named by its largest effects that raise it "
               "('Lower risk: ...' when none stands out).")
    parts.segment_cards(d)
    show.plot(parts.chart(view, "segments", lambda d, grouped: plots.segments(d, grouped=grouped), grouped),
              key="drivers_segments")
    st.subheader("One feature across customers")
    show.plot(parts.chart(view, "dependence", plots.dependence, parts.feature_ui(d)), key="drivers_dependence")
    st.subheader("When in the history")
    for k in range(len(d.time_profiles)):
        show.plot(parts.chart(view, "time", lambda d, k: plots.time_profile(d.time_profiles[k]), k),
                  key=f"drivers_time_{k}")
    if d.drift is not None:
        st.subheader("Drift since the earlier store")
        show.plot(parts.chart(view, "drift", lambda d: plots.drift(d.drift)), key="drivers_drift")
    parts.over_runs_ui(bundle, found, store, d, grouped)
    parts.movers_ui(bundle, found)


with show.guard():
    drivers_page()
