"""Diagnostics (for the ML engineer): convergence, the path, what the engine detected, timings."""

import pandas as pd
import streamlit as st

from explain import figures, ig, report
from ui import pickers, show, state


def detected_inputs(bundle) -> tuple[pd.DataFrame, pd.DataFrame]:
    described = ig.describe_model(bundle.model)
    roles = pd.DataFrame([
        {"role": role, "input name": str(described[f"{role}_input"]["name"]),
         "shape": str(described[f"{role}_input"]["shape"]), "dtype": described[f"{role}_input"]["dtype"],
         "position": described[f"{role}_input"]["position"]} for role in ("static", "temporal")])
    model = pd.DataFrame([{"outputs (K)": described["outputs"], "logit space": described["logit_space"],
                           "compiled traces": str(described["traces"])}])
    return roles, model


def diagnostics_page():
    bundle, choice = pickers.frame()
    cid, request = choice.customer, choice.request
    st.title("Diagnostics")
    attribution = state.attributions(bundle, [cid], request)
    st.caption(show.md(f"Customer {cid} · baseline {request.baseline} · target {request.target} ({request.space}) · "
                       f"{request.path} path · now {attribution.steps[0]} steps ({request.method}), "
                       f"delta {float(attribution.delta[0]):+.2e}"))

    sweep = state.delta_sweep(bundle, cid, request)
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
        profile = state.path_profile(bundle, cid, request)
        show.plot(figures.path_figure(profile, y_title=f"{bundle.output_names[0]} ({request.space})"),
                  key="diag_path")
        note = " For sample:K the path to the first sampled baseline is shown." if request.baseline.startswith("sample") else ""
        st.caption("A flat prediction with tiny gradients means saturation; a jump means most of the effect "
                   "happens in a short stretch (more steps needed)." + note)

    left, right = st.columns(2)
    with left:
        st.subheader("Inputs the engine detected")
        roles, model = detected_inputs(bundle)
        st.dataframe(roles, hide_index=True)
        st.dataframe(model, hide_index=True)
    with right:
        st.subheader("Timings of the last computations")
        st.dataframe(pd.DataFrame(st.session_state.get("timings", [])), hide_index=True)
    st.subheader("Model summary")
    show.model_summary(*state.model_layers(bundle))
    if bundle.notes:
        st.subheader("Notes from loading the bundle")
        for note in bundle.notes:
            st.text(note)


with show.guard():
    diagnostics_page()
