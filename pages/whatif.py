"""What-if: edit one customer's inputs; see the prediction and its explanation change."""

import streamlit as st

from explain.analysis import cohort, report
from explain.core import baselines, periods
from explain.plots import figures
from explain.plots.periods import compare_plan
from ui import cache, frame, input_views, show, views
from ui import whatif as ui

INTRO = ("Change this customer's values and see what the model would say. Left: the customer as they are; "
         "right: with your edits. Both heatmaps use **one colour scale** (the same shade is the same effect: "
         ":red[red raises] the score, :blue[blue lowers] it); the third shows how each effect changed. "
         "Outlined squares are the cells you edited.")


def results(bundle, cid, settings, outcome) -> list:
    before, after = outcome.predictions
    name = show.md(bundle.output_names[outcome.attribution.settings.target])
    name += "" if outcome.attribution.space_used == "output" else " (log-odds)"
    with st.container():  # the notes come and go with the edits: the charts below keep their places (customer.py)
        m1, m2, m3 = st.columns(3)
        m1.metric(f"Original: predicted {name}", f"{before:.3f}")
        m2.metric(f"What-if: predicted {name}", f"{after:.3f}", f"{after - before:+.3f}" if outcome.scenario else None,
                  delta_color="inverse")
        m3.metric("Edits", len(outcome.scenario.edits), help="each one-click edit or changed cell counts once")
        for i, column in enumerate((m1, m2)):
            with column:
                fx, fb = outcome.attribution.prediction[i], outcome.attribution.baseline_prediction[i]
                show.delta_badge(*report.delta_status(float(outcome.attribution.delta[i]), float(fx), float(fb)))
        for note in outcome.notes:
            st.info(show.md(note), icon=":material/info:")
        said = periods.words(bundle)
        st.caption(show.md(f"Each cell: how much that {said.unit}'s value moves the score away from the baseline's "
                           f"({settings.baseline}: {baselines.describe(settings.baseline, unit=said.unit)})"))
    values = (bundle.inputs_for([cid])["temporal"][0], outcome.inputs["temporal"][0])
    units = show.units(bundle, bundle.temporal_features)
    a = outcome.attribution
    view, pad = views.view_ui(bundle.periods, "whatif"), cohort.padding_of(a)[0]  # a long history: its bin and zoom
    plan = compare_plan(bundle.periods, bundle.temporal_labels, a.temporal[1], a.temporal[0], padding=(pad, pad),
                        view=view)  # the edited and the original customer drawn in the same bins and rows
    fig_o, fig_e, fig_d = figures.whatif_figures(bundle.periods, bundle.temporal_labels, a.temporal[0], a.temporal[1],
                                                 changed=outcome.edited["temporal"], values=values, units=units,
                                                 padding=pad, plan=plan)
    show.pair_and_difference(fig_o, fig_e, fig_d, keys=("whatif_original", "whatif_edited", "whatif_difference"))
    top = views.top_ui(len(bundle.static_labels), "whatif_static")
    fig_s = figures.compare_static(bundle.static_labels, outcome.attribution.static[0],
                                   outcome.attribution.static[1], names=("Original", "What-if"), top=top)
    show.plot(fig_s, key="whatif_static")
    kind = f"{said.adjective.capitalize()} features"
    return [(f"{kind}: original", fig_o), (f"{kind}: what-if", fig_e),
            ("Change", fig_d), ("Static features", fig_s)]


def search_section(bundle, cid, settings) -> None:
    st.subheader("What would change the outcome?")
    st.caption("A search for a small edit that brings the prediction below a threshold: it tries the features "
               f"and {periods.words(bundle).unit} windows with the largest effects first, within the values seen in "
               "the data.")
    search = ui.search_ui(bundle, cid)
    if search is None:
        return
    ui.search_result_ui(bundle, cid, settings, cache.whatif_search(bundle, cid, settings, **search))


def whatif_page():
    bundle, choice = frame.page()
    input_views.one_history_only(bundle, "What-if", needs="numbers")
    cid, settings = choice.customer, choice.settings
    st.title(f"What if… customer {show.md(cid)}")
    st.markdown(INTRO)
    scenario, version = ui.scenario_state(bundle, cid, settings)
    outcome = cache.whatif_outcome(bundle, cid, settings, scenario.text())
    kind = periods.words(bundle).adjective.capitalize()
    quick, table, static = st.tabs([f"{kind} values in one click", f"{kind} values cell by cell", "Static values"])
    with quick:
        ui.quick_ui(bundle, cid, settings, scenario)
    with table:
        st.caption("Double-click a cell to change it; each column accepts the range seen in the data.")
        ui.table_ui(bundle, cid, settings, scenario, outcome.inputs["temporal"][0], version)
    with static:
        ui.static_ui(bundle, cid, settings, scenario, outcome.inputs["static"][0], version)
    ui.edits_ui(bundle, cid, settings, scenario)
    figs = results(bundle, cid, settings, outcome)
    search_section(bundle, cid, settings)
    st.subheader("Download")
    ui.downloads_ui(bundle, cid, settings, outcome, figs)


with show.guard():
    whatif_page()
