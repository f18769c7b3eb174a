"""Compare: two customers (or a customer and a cohort's mean) on one shared colour scale."""

import streamlit as st

from explain import figures, report
from ui import pickers, show, state


def compare_page():
    bundle, choice = pickers.frame()
    cid, request = choice.customer, choice.request
    st.title("Compare")
    other = pickers.compare_ui(bundle)
    first = state.attributions(bundle, [cid], request)
    values = [bundle.inputs_for([cid])["temporal"][0]]
    if other.startswith("cohort:"):
        mean = state.cohort_mean(bundle, other[len("cohort:"):], request)
        second_static, second_temporal = mean["static"], mean["temporal"]
        name_b = f"cohort {bundle.label_name}={other[7:]} (mean of {mean['n']})"
        values.append(mean["values"])
        pred_b = mean["prediction"]
        status_b = None
    else:
        second = state.attributions(bundle, [other], request)
        second_static, second_temporal = second.static[0], second.temporal[0]
        name_b = other
        values.append(bundle.inputs_for([other])["temporal"][0])
        pred_b = float(second.prediction[0])
        status_b = report.delta_status(float(second.delta[0]), pred_b, float(second.baseline_prediction[0]))
    st.caption(show.md(f"Baseline {request.baseline} for both · {request.steps} steps · one colour scale for "
                       "both heatmaps (the same shade means the same effect); the difference has its own scale."))

    m1, m2 = st.columns(2)
    with m1:
        st.metric(f"{show.md(cid)}: predicted {show.md(bundle.output_names[first.settings.target])}",
                  f"{float(first.prediction[0]):.3f}")
        show.delta_badge(*report.delta_status(float(first.delta[0]), float(first.prediction[0]),
                                              float(first.baseline_prediction[0])))
    with m2:
        st.metric(f"{show.md(name_b)}: predicted" + (" (mean)" if other.startswith("cohort:") else ""), f"{pred_b:.3f}")
        if status_b is not None:
            show.delta_badge(*status_b)

    units = [bundle.units.get(c) for c in bundle.temporal_features]
    fig_a, fig_b, fig_diff = figures.compare_figures(bundle.periods, bundle.temporal_labels, first.temporal[0],
                                                     second_temporal, names=(cid, name_b), values=values, units=units)
    left, right = st.columns(2)
    with left:
        show.plot(fig_a, key="compare_a")
    with right:
        show.plot(fig_b, key="compare_b")
    show.plot(fig_diff, key="compare_diff")
    show.plot(figures.compare_static(bundle.static_labels, first.static[0], second_static, names=(cid, name_b)),
              key="compare_static")


with show.guard():
    compare_page()
