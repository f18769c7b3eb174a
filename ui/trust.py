"""Can the attributions be trusted? The Diagnostics page's faithfulness report (words, the table of trust
metrics, then the curves) and the Customer page's stability line (sensitivity-max, computed when opened)."""

import numpy as np
import pandas as pd
import streamlit as st

from explain.analysis import faithfulness
from explain.analysis import trust_metrics as tm
from explain.core.settings import Settings
from explain.plots import diagnostics as diagnostic_figures
from ui import cache, show

STABILITY_RADIUS = 0.01
STABILITY_SAMPLES = 16


def faithfulness_section(bundle, settings) -> None:
    """The checks, run when asked: the verdict in words, the metrics table, then the curves and checks."""
    st.subheader("Can the attributions be trusted? Faithfulness checks")
    n = faithfulness.DEFAULT_CUSTOMERS
    st.button(f"Run faithfulness checks ({n} customers)", on_click=cache.ask_for_faithfulness)  # survives a rerun
    result = cache.faithfulness_checks(bundle, settings, n)
    if result is None:
        st.caption("Trust metrics (CPD, CPP, comprehensiveness, sufficiency, infidelity, sensitivity-max) against "
                   "random orders and gradient x input, deletion and insertion curves, the model randomisation "
                   "check and occlusion, for a seeded sample with the sidebar's settings (about 11 s for the demo on "
                   "2 cores).")
        return
    if result.metrics is not None:
        metrics_table(result)
    curves_and_checks(result)
    lines = faithfulness.summary_lines(result)[0 if result.metrics is None else 1:]  # the verdict is above
    for line in lines[:5]:  # the counts, AOPC, randomisation, occlusion (the metrics are in the table)
        st.caption(show.md(line))


def metrics_table(result) -> None:
    """The verdict first, then one row per metric: IG, random order, gradient x input, which is better."""
    metrics = result.metrics
    st.markdown(f"**{show.md(tm.verdict(metrics, result.randomisation.falls))}**")
    rows = pd.DataFrame(tm.table(metrics))
    st.dataframe(rows, hide_index=True, width="stretch", key="faith_metrics",
                 column_config={c: st.column_config.NumberColumn(format="%.4g")
                                for c in ("IG", "random order", "gradient x input")})
    definitions = tm.definitions(metrics.options)
    st.caption(show.md(" · ".join(f"**{tm.NAMES[m]}**: {definitions[m]}" for m in tm.METRICS)
                       + f". {len(result.ids)} customers; random order: IG's values in {metrics.options.random_orders} "
                       "seeded random orders (a reordering is exactly as stable as IG, so sensitivity-max does not "
                       "compare them)."))
    if metrics.planted is not None:
        st.caption(show.md("Planted drivers (" + str(result.planted_source) + f", {result.planted_cells} cells): "
                           "area under precision / recall as the threshold on |attribution| sweeps: " + ", ".join(
                               f"{m.replace('_', ' ')} {pr['aup']:.3f} / {pr['aur']:.3f}"
                               for m, pr in metrics.planted.items())))


def curves_and_checks(result) -> None:
    """Deletion and insertion curves, the randomisation check and occlusion per period (as before)."""
    curves, rnd, occ = result.curves, result.randomisation, result.occlusion
    for column, kind in zip(st.columns(2), faithfulness.KINDS):
        with column:
            shares = {r: curves.share(kind, r) for r in faithfulness.RANKINGS}
            aopc = {r: float(np.mean(curves.aopc(kind, r))) for r in faithfulness.RANKINGS}
            show.plot(diagnostic_figures.perturbation_curves_figure(curves.fractions, shares, kind=kind, aopc=aopc,
                                                                    title=f"{kind.capitalize()} curves"),
                      key=f"faith_{kind}")
    left, right = st.columns(2)
    with left:
        show.plot(diagnostic_figures.randomisation_figure(rnd.layers, rnd.spearman, rnd.spearman_abs,
                                                          input_only=rnd.input_only_abs,
                                                          title="Model randomisation (cascading)"), key="faith_random")
    with right:
        show.plot(diagnostic_figures.occlusion_scatter(occ.ig_total["period"], occ.change["period"],
                                                       occ.groups["period"], spearman=occ.spearman("period"),
                                                       title="Occlusion per period against IG"),
                  key="faith_occlusion")


@st.cache_data(max_entries=64, ttl=cache.TTL, show_spinner="Measuring how stable this customer's effects are...")
def _stability(_bundle, content_hash: str, customer: str, key: tuple) -> dict:
    return faithfulness.customer_stability(_bundle, customer, Settings.from_key(key), radius=STABILITY_RADIUS,
                                           samples=STABILITY_SAMPLES)


def stability_line(bundle, customer, settings, what: str) -> None:
    """'Would a 1 % change in this customer's inputs change the story?': a popover in the customer's heading line (no
    line of its own: the heatmap stays on a laptop's first screen), computed only while it is open."""
    box = st.popover("Stability", icon=":material/balance:", type="tertiary", key="stability", on_change="rerun",
                     help=f"would a {100 * STABILITY_RADIUS:g} % change in this customer's inputs move the effects? "
                          "(computed when opened)")
    if not box.open:
        return
    with box:
        stability = _stability(bundle, bundle.content_hash, str(customer), settings.key())
        in_space = what if settings.space == "output" else f"{what} (log-odds)"
        st.markdown(show.md(tm.stability_words(stability, in_space)))
