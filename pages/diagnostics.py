"""Diagnostics (for the ML engineer): convergence, the path, what the engine detected, timings."""

import numpy as np
import streamlit as st

from explain.analysis import diagnostics, faithfulness, report
from explain.plots import diagnostics as diagnostic_figures
from ui import cache, frame, show

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
    faithfulness_section(bundle, settings)
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


def faithfulness_section(bundle, settings):
    st.subheader("Can the attributions be trusted? Faithfulness checks")
    n = faithfulness.DEFAULT_CUSTOMERS
    st.button(f"Run faithfulness checks ({n} customers)", on_click=cache.ask_for_faithfulness)  # survives a rerun
    result = cache.faithfulness_checks(bundle, settings, n)
    if result is None:
        st.caption("Deletion and insertion curves against random orders, the model randomisation check and occlusion, "
                   "for a seeded sample with the sidebar's settings (about 15 s on 2 cores).")
        return
    curves, rnd, occ = result.curves, result.randomisation, result.occlusion
    columns = st.columns(2)
    for column, kind in zip(columns, faithfulness.KINDS):
        with column:
            shares = {r: curves.share(kind, r) for r in faithfulness.RANKINGS}
            aopc = {r: float(np.mean(curves.aopc(kind, r))) for r in faithfulness.RANKINGS}
            show.plot(diagnostic_figures.perturbation_curves_figure(curves.fractions, shares, kind=kind, aopc=aopc,
                                                         title=f"{kind.capitalize()} curves"), key=f"faith_{kind}")
    left, right = st.columns(2)
    with left:
        show.plot(diagnostic_figures.randomisation_figure(rnd.layers, rnd.spearman, rnd.spearman_abs,
                                               input_only=rnd.input_only_abs,
                                               title="Model randomisation (cascading)"), key="faith_random")
    with right:
        show.plot(diagnostic_figures.occlusion_scatter(occ.ig_total["period"], occ.change["period"],
                                            occ.groups["period"],
                                            spearman=occ.spearman("period"), title="Occlusion per period against IG"),
                  key="faith_occlusion")
    for line in faithfulness.summary_lines(result):
        st.caption(show.md(line))


with show.guard():
    diagnostics_page()
