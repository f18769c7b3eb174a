"""What drives churn: every customer at once, from a batch store (words first, then the charts)."""

import streamlit as st

from explain.plots import drivers as plots
from ui import drivers as parts
from ui import frame, show


def drivers_page():
    bundle, choice = frame.page()
    st.title(f"What drives {show.md(bundle.output_names[choice.settings.target])}")
    store = parts.store_ui(bundle, choice.settings)
    if store is None:
        return
    words, controls = st.container(), st.columns(2)  # the words first, then the pickers they depend on
    with controls[0]:
        window = parts.window_ui(bundle)
    with controls[1]:
        against = parts.against_ui(bundle, store)
    d = parts.result(bundle, store, window, against)
    with words:
        parts.words(d)

    show.plot(plots.ranking(d), key="drivers_ranking")
    show.plot(plots.beeswarm(d), key="drivers_beeswarm")
    st.subheader("Churn-reason segments")
    st.caption("Customers grouped by what raises their score (k-means on each customer's risk-raising attributions; "
               "the number of segments chosen by the silhouette score).")
    parts.segment_cards(d)
    show.plot(plots.segments(d), key="drivers_segments")
    st.subheader("One feature across customers")
    show.plot(plots.dependence(d, parts.feature_ui(d)), key="drivers_dependence")
    st.subheader("When in the history")
    for k, profile in enumerate(d.time_profiles):
        show.plot(plots.time_profile(profile), key=f"drivers_time_{k}")
    if d.drift is not None:
        st.subheader("Drift since the earlier store")
        show.plot(plots.drift(d.drift), key="drivers_drift")


with show.guard():
    drivers_page()
