"""Diagnostics (for the ML engineer): convergence, the path, what the engine detected, timings."""

import streamlit as st

from explain import diagnostics, figures, report
from ui import frame, show, state

SAMPLE_NOTE = " For sample:K the path to the first sampled baseline is shown."


def diagnostics_page():
    bundle, choice = frame.page()
    cid, settings = choice.customer, choice.settings
    st.title("Diagnostics")
    attribution = state.attributions(bundle, [cid], settings)
    st.caption(show.md(f"Customer {cid} · baseline {settings.baseline} · target {bundle.output_names[settings.target]} ({settings.space}) · "
                       f"{settings.path} path · now {attribution.steps[0]} steps ({settings.method}), "
                       f"delta {float(attribution.delta[0]):+.2e}"))

    sweep = state.delta_sweep(bundle, cid, settings)
    gap = abs(sweep["gap"])
    left, right = st.columns(2)
    with left:
        st.subheader("Does the integral converge?")
        show.plot(figures.delta_by_steps(sweep["steps"], sweep["deltas"],
                                         tolerance=report.DELTA_FINE * max(gap, 0.01)), key="diag_delta")
        st.caption(show.md(f"|delta| = |f(x) - f(b) - sum of attributions| for each integration rule; "
                           f"|f(x) - f(b)| = {gap:.4g}. Below the dashed line the badge says 'fine'."))
    with right:
        st.subheader("Along the path from baseline to customer")
        profile = state.path_profile(bundle, cid, settings)
        show.plot(figures.path_figure(profile, y_title=f"{bundle.output_names[0]} ({settings.space})"),
                  key="diag_path")
        st.caption("A flat prediction with tiny gradients means saturation; a jump means most of the effect "
                   "happens in a short stretch (more steps needed)."
                   + (SAMPLE_NOTE if settings.baseline.kind == "sample" else ""))

    left, right = st.columns(2)
    with left:
        st.subheader("Inputs the engine detected")
        roles, model = diagnostics.detected_inputs(bundle.model)
        st.dataframe(roles, hide_index=True)
        st.dataframe(model, hide_index=True)
    with right:
        st.subheader("Timings of the last computations")
        st.dataframe(state.timings(), hide_index=True)
    st.subheader("Model summary")
    show.model_summary(*state.model_layers(bundle))
    if bundle.notes:
        st.subheader("Notes from loading the bundle")
        for note in bundle.notes:
            st.text(note)


with show.guard():
    diagnostics_page()
