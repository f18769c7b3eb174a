"""Compare: two customers (or a customer and a cohort's mean) on one shared colour scale."""

import streamlit as st

from explain.analysis import report
from explain.core import labels
from explain.plots import figures
from ui import frame, options, pickers, show, state
from ui import inputs as more_inputs

COHORT_NOTE = ("The cohort's mean is over {n:,} of the {total:,} customers with {label} = {value}, drawn at random "
               "with a fixed seed (the same ones every time), which keeps the page fast.")


def second(bundle, other, settings) -> dict:
    """What the page shows of the second customer, or of the cohort's mean (no badge for a mean)."""
    if other.kind == "cohort":
        mean = state.cohort_mean(bundle, other.argument, settings)
        total = labels.counts(bundle).get(other.argument, mean["n"])
        return {"static": mean["static"], "temporal": mean["temporal"], "values": mean["values"],
                "name": f"cohort {bundle.label_name}={other.argument} (mean of {mean['n']:,} of {total:,})",
                "prediction": mean["prediction"], "status": None, "mean": " (mean)",
                "note": COHORT_NOTE.format(n=mean["n"], total=total, label=bundle.label_name, value=other.argument)
                if mean["n"] < total else None}
    attribution = state.attributions(bundle, [other.argument], settings)
    prediction = float(attribution.prediction[0])
    return {"static": attribution.static[0], "temporal": attribution.temporal[0], "name": other.argument,
            "values": bundle.inputs_for([other.argument])["temporal"][0], "prediction": prediction,
            "status": report.delta_status(float(attribution.delta[0]), prediction,
                                          float(attribution.baseline_prediction[0])), "mean": ""}


def compare_page():
    bundle, choice = frame.page()
    more_inputs.one_history_only(bundle, "Compare")
    cid, settings = choice.customer, choice.settings
    st.title("Compare")
    other = pickers.compare_ui(bundle)
    first = state.attributions(bundle, [cid], settings)
    b = second(bundle, other, settings)
    technical = f" · {settings.steps} steps ({settings.method})" if pickers.technical_view() else ""
    compared = options.BASELINE_LABELS.get(settings.baseline.kind, str(settings.baseline))
    st.caption(show.md(f"Both compared with {compared}{technical} · one colour "
                       "scale for both heatmaps (the same shade means the same effect); the difference has its own "
                       "scale."))

    m1, m2 = st.columns(2)
    with m1:
        st.metric(f"{show.md(cid)}: predicted {show.md(bundle.output_names[first.settings.target])}",
                  f"{float(first.prediction[0]):.3f}")
        show.delta_badge(*report.delta_status(float(first.delta[0]), float(first.prediction[0]),
                                              float(first.baseline_prediction[0])))
    with m2:
        st.metric(f"{show.md(b['name'])}: predicted{b['mean']}", f"{b['prediction']:.3f}")
        if b["status"] is not None:
            show.delta_badge(*b["status"])
        if b.get("note"):
            st.caption(show.md(b["note"]))

    values = [bundle.inputs_for([cid])["temporal"][0], b["values"]]
    fig_a, fig_b, fig_diff = figures.compare_figures(bundle.periods, bundle.temporal_labels, first.temporal[0],
                                                     b["temporal"], names=(cid, b["name"]), values=values,
                                                     units=show.units(bundle, bundle.temporal_features))
    show.pair_and_difference(fig_a, fig_b, fig_diff, keys=("compare_a", "compare_b", "compare_diff"))
    show.plot(figures.compare_static(bundle.static_labels, first.static[0], b["static"], names=(cid, b["name"])),
              key="compare_static")


with show.guard():
    compare_page()
