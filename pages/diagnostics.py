"""Diagnostics (for the ML engineer): convergence, the path, what the engine detected, timings."""

import streamlit as st

from explain.analysis import diagnostics, report
from explain.plots import diagnostics as diagnostic_figures
from ui import cache, frame, show, trust

SAMPLE_NOTE = " For sample:K the path to the first sampled baseline is shown."


def diagnostics_page():
    bundle, choice = frame.page()
    cid, settings = choice.customer, choice.settings
    st.title("Diagnostics")
    attribution = cache.attributions(bundle, [cid], settings)
    st.caption(show.md(f"Customer {cid} · baseline {settings.baseline} · "
                       f"target {bundle.output_names[settings.target]} ({settings.space}) · "
                       f"{settings.path} path · now {attribution.steps[0]} steps ({settings.method}), "
                       f"{spent(attribution)}, delta {float(attribution.delta[0]):+.2e}"))

    sweep = cache.delta_sweep(bundle, cid, settings)
    gap = abs(sweep["gap"])
    left, right = st.columns(2)
    with left:
        st.subheader("Does the integral converge?")
        show.plot(diagnostic_figures.delta_by_steps(sweep["steps"], sweep["deltas"],
                                         tolerance=report.DELTA_FINE * max(gap, 0.01)), key="diag_delta")
        st.caption(show.md(f"|delta| = |f(x) - f(b) - sum of attributions| for each integration rule; "
                           f"|f(x) - f(b)| = {gap:.4g}. Below the dashed line the badge says 'fine'."))
    with right:
        st.subheader("Along the path from baseline to customer")
        profile = cache.path_profile(bundle, cid, settings)
        y_title = f"{bundle.output_names[settings.target]} ({settings.space})"
        show.plot(diagnostic_figures.path_figure(profile, y_title=y_title),
                  key="diag_path")
        st.caption("A flat prediction with tiny gradients means saturation; a jump means most of the effect "
                   "happens in a short stretch (more steps needed)."
                   + (SAMPLE_NOTE if settings.baseline.kind == "sample" else ""))

    st.subheader("Where the engine placed its integration points")
    found = cache.integration_points(bundle, cid, settings)
    show.plot(diagnostic_figures.integration_points_figure(found, y_title=y_title), key="diag_points")
    st.caption(show.md(diagnostics.points_text(found)))

    st.subheader("Inputs the engine detected")
    roles, model = diagnostics.detected_inputs(bundle.model)
    st.dataframe(roles, hide_index=True, width="stretch")
    st.dataframe(model, hide_index=True, width="stretch")
    st.subheader("Timings of the last computations")
    st.dataframe(cache.timings(), hide_index=True, width="stretch")  # full width: every column shows
    trust.faithfulness_section(bundle, settings)  # words, the metrics table, then the curves
    st.subheader("Model summary")
    show.model_summary(*cache.model_layers(bundle))
    if bundle.notes:
        st.subheader("Notes from loading the bundle")
        for note in bundle.notes:
            st.text(show.plain(note))


def spent(attribution) -> str:
    """The evaluations spent on the customer (all baselines and paths): with steps="auto" they differ per customer."""
    forward = attribution.forward_points
    return (f"{int(attribution.gradient_points[0])} gradient"
            + (f" and {int(forward[0])} forward evaluations" if forward is not None else " evaluations"))


with show.guard():
    diagnostics_page()
