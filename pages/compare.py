"""Compare: two customers (or a customer and a cohort's mean) on one shared colour scale."""

import numpy as np
import streamlit as st

from explain.analysis import cohort, report
from explain.core import labels
from explain.plots import figures
from explain.plots.periods import compare_plan
from ui import cache, frame, input_views, pickers, show, views

COHORT_NOTE = ("The cohort's mean is over {n:,} of the {total:,} customers with {label} = {value}, drawn at random "
               "with a fixed seed (the same ones every time), which keeps the page fast. A padded period counts "
               "only the customers with data there.")


def second(bundle, other, settings) -> dict:
    """What the page shows of the second customer, or of the cohort's mean (no badge for a mean)."""
    if other.kind == "cohort":
        mean = cache.cohort_mean(bundle, other.argument, settings)
        total = labels.counts(bundle).get(other.argument, mean["n"])
        return {"static": mean["static"], "temporal": mean["temporal"], "values": mean["values"],
                "padding": np.isnan(mean["temporal"]).all(axis=1),  # no customer of the cohort has data there
                "name": f"cohort {bundle.label_name}={other.argument} (mean of {mean['n']:,} of {total:,})",
                "prediction": mean["prediction"], "status": None, "mean": " (mean)",
                "note": COHORT_NOTE.format(n=mean["n"], total=total, label=bundle.label_name, value=other.argument)
                if mean["n"] < total else None}
    return {**one(bundle, other.argument, settings), "name": other.argument, "mean": ""}


def one(bundle, cid, settings) -> dict:
    """One customer's history attributions, values and padding, static attributions, prediction and badge."""
    attribution = cache.attributions(bundle, [cid], settings)
    prediction = float(attribution.prediction[0])
    return {"static": attribution.static[0], "temporal": attribution.temporal[0],
            "values": bundle.inputs_for([cid])[cohort.first_history(bundle)][0],
            "padding": cohort.padding_of(attribution)[0], "prediction": prediction,
            "status": report.delta_status(float(attribution.delta[0]), prediction,
                                          float(attribution.baseline_prediction[0])),
            "target": attribution.settings.target}


def compare_page():
    bundle, choice = frame.page()
    input_views.one_history_only(bundle, "Compare")
    cid, settings = choice.customer, choice.settings
    st.title("Compare")
    other = pickers.compare_ui(bundle)
    a = one(bundle, cid, settings)
    b = second(bundle, other, settings)
    st.caption(show.md(f"Both compared with {pickers.compared_with(settings)} · one colour "
                       "scale for both heatmaps (the same shade means the same effect); the difference has its own "
                       "scale."))

    m1, m2 = st.columns(2)
    with m1:
        st.metric(f"{show.md(cid)}: predicted {show.md(bundle.output_names[a['target']])}", f"{a['prediction']:.3f}")
        show.delta_badge(*a["status"])
    with m2:
        st.metric(f"{show.md(b['name'])}: predicted {show.md(bundle.output_names[a['target']])}{b['mean']}",
                  f"{b['prediction']:.3f}")
        if b["status"] is not None:
            show.delta_badge(*b["status"])
        if b.get("note"):
            st.caption(show.md(b["note"]))

    view = views.view_ui(bundle.periods, "compare")  # a long history: its bin and zoom
    plan = compare_plan(bundle.periods, bundle.temporal_labels, a["temporal"], b["temporal"],
                        padding=(a["padding"], b["padding"]), view=view)  # one plan for the two and their difference
    fig_a, fig_b, fig_diff = figures.compare_figures(
        bundle.periods, bundle.temporal_labels, a["temporal"], b["temporal"], names=(cid, b["name"]),
        values=(a["values"], b["values"]), units=show.units(bundle, bundle.temporal_features),
        padding=(a["padding"], b["padding"]), plan=plan)
    show.pair_and_difference(fig_a, fig_b, fig_diff, keys=("compare_a", "compare_b", "compare_diff"))
    top = views.top_ui(len(bundle.static_labels), "compare_static")
    show.plot(figures.compare_static(bundle.static_labels, a["static"], b["static"], names=(cid, b["name"]), top=top),
              key="compare_static")


with show.guard():
    compare_page()
