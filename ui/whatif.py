"""Widgets of the What-if page (``*_ui()`` helpers) and the scenario's session state and URL.

The scenario is kept in session state as its URL form (``explain.analysis.whatif``'s compact text),
for one customer: choosing another customer starts an empty one. The ``whatif`` query
parameter is read on the session's first run (a bad one is dropped with a warning naming it)
and written back after every change. Every widget key carries a version number that changes
with the scenario, so that the inputs always show the scenario's values.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explain.analysis import report, whatif
from explain.analysis.whatif import Edit, Scenario, ScenarioError
from explain.core import labels, periods
from explain.plots import html as html_report
from ui import cache, show, url

PARAM = "whatif"
THRESHOLDS = tuple(round(0.05 * k, 2) for k in range(1, 20))
TIME_LIMITS = (2, 5, 10, 20, 30)


def _store(bundle, cid: str, text: str) -> None:
    ss = st.session_state
    previous = ss.get("_whatif") or {}
    ss["_whatif"] = {"for": (bundle.content_hash, cid), "text": text, "version": previous.get("version", 0) + 1}


def try_scenario(bundle, cid: str, settings, scenario: Scenario | str, source: str = "edit") -> bool:
    """Make ``scenario`` the current one if it can be applied to ``cid``; else warn (naming it)."""
    text = scenario if isinstance(scenario, str) else scenario.text()
    try:
        ctx = cache.whatif_context(bundle, cid, settings)
        whatif.apply(ctx, whatif.parse_scenario(text, bundle, ctx.observed))
    except ScenarioError as error:
        prefix = f"Ignored the link's {PARAM}={text!r}. " if source == "link" else ""
        st.session_state.setdefault("_whatif_warnings", []).append(prefix + str(error))
        return False
    _store(bundle, cid, text)
    return True


def scenario_state(bundle, cid: str, settings) -> tuple[Scenario, int]:
    """The current scenario of ``cid`` and its version; reads the URL on the session's first run."""
    ss = st.session_state
    if not ss.get("_whatif_url_read"):
        ss["_whatif_url_read"] = True
        text = st.query_params.get(PARAM)
        if text and not try_scenario(bundle, cid, settings, text, source="link"):
            del st.query_params[PARAM]
    current = ss.get("_whatif")
    if current is None or current["for"] != (bundle.content_hash, cid):
        _store(bundle, cid, "")
        current = ss["_whatif"]
    for warning in ss.pop("_whatif_warnings", []):
        st.warning(show.md(warning), icon=":material/warning:")
    url.write({PARAM: current["text"] or None})
    return whatif.parse_scenario(current["text"], bundle, cache.observed(bundle)), current["version"]


def _static_changed(bundle, cid, settings, scenario, j: int, key: str) -> None:
    original = float(bundle.inputs_for([cid])["static"][0, j])
    try_scenario(bundle, cid, settings, scenario.with_value("static", j, float(st.session_state[key]),
                                                            original=original))


def static_ui(bundle, cid, settings, scenario, values, version: int) -> None:
    """One input per static feature: categories from the observed set, numbers within the observed range."""
    observed = cache.observed(bundle)
    columns = st.columns(3)
    for j, label in enumerate(bundle.static_labels):
        key = f"wi_s{j}_{version}"
        args = (bundle, cid, settings, scenario, j, key)
        with columns[j % 3]:
            categories = observed.static_categories[j]
            if categories is not None:
                st.selectbox(show.md(label), categories, index=categories.index(float(values[j])), key=key,
                             format_func=whatif._number, on_change=_static_changed, args=args)
            else:
                low, high = observed.limits("static", j)
                integer = bool(observed.static_integer[j])
                cast = int if integer else float
                st.number_input(show.md(label), min_value=cast(low), max_value=cast(high), value=cast(values[j]),
                                step=1 if integer else None, format=None if integer else "%.2f", key=key,
                                on_change=_static_changed, args=args,
                                help=f"observed in the data: {low:g} to {high:g}")


def _table_changed(bundle, cid, settings, scenario, key: str) -> None:
    for row, cells in st.session_state[key].get("edited_rows", {}).items():
        for column, value in cells.items():
            if value is not None:  # a cleared cell keeps its value
                scenario = scenario.with_value("temporal", bundle.temporal_features.index(column), float(value),
                                               period=int(row))
    try_scenario(bundle, cid, settings, scenario)


def table_ui(bundle, cid, settings, scenario, values, version: int) -> None:
    """The monthly values as an editable period x feature table (each column within its observed range)."""
    observed = cache.observed(bundle)
    config = {}
    for f, (column, label) in enumerate(zip(bundle.temporal_features, bundle.temporal_labels)):
        low, high = observed.limits("temporal", f)
        integer = bool(observed.temporal_integer[f])
        config[column] = st.column_config.NumberColumn(label, min_value=low, max_value=high,
                                                       step=1 if integer else 0.01, format="%d" if integer else "%.2f")
    key = f"wi_table_{version}"
    st.data_editor(pd.DataFrame(values, index=bundle.periods, columns=bundle.temporal_features), key=key,
                   column_config=config, on_change=_table_changed, args=(bundle, cid, settings, scenario, key),
                   width="stretch")


def _quick_edit(bundle, cid, settings, scenario) -> None:
    ss = st.session_state
    first, last = ss["wi_q_months"]
    periods = (bundle.periods.index(first), bundle.periods.index(last))
    kind, _, cohort = ss["wi_q_action"].partition(":")
    value = float(ss.get("wi_q_k", 0.5)) if kind == "scale" else None
    try_scenario(bundle, cid, settings, scenario.plus(Edit("temporal", ss["wi_q_feature"], kind, value, periods,
                                                        cohort or None)))


def quick_ui(bundle, cid, settings, scenario) -> None:
    """One-click edits: months A..B of a monthly feature to the baseline, a median, or scaled by k."""
    cohorts = labels.values(bundle)
    actions = {"baseline": "the baseline", "median": "the median of all customers",
               **{f"median:{v}": f"the median of the customers with {bundle.label_name} = {v}" for v in cohorts},
               "scale": "its own values multiplied by k"}
    # "Set to" outside the form: choosing it redraws the form, which asks for k only when k is used
    st.selectbox("Set to", list(actions), format_func=actions.get, key="wi_q_action")
    scaling = st.session_state.get("wi_q_action") == "scale"
    with st.form("wi_quick", border=False):  # callbacks, not return values: they survive the frame's rerun
        c1, c2, c4 = st.columns([2, 3, 1]) if scaling else (*st.columns([2, 3]), None)
        said = periods.words(bundle)
        recent = bundle.periods[-min(said.recent, bundle.n_periods)]  # the recent window: 30 days, 4 weeks, 3 months
        c1.selectbox(f"{said.adjective.capitalize()} feature", range(bundle.n_temporal),
                     format_func=bundle.temporal_labels.__getitem__, key="wi_q_feature")
        c2.select_slider(said.units.capitalize(), bundle.periods, value=(recent, bundle.periods[-1]), key="wi_q_months")
        if scaling:
            c4.number_input("k", min_value=0.0, max_value=whatif.MAX_SCALE, value=0.5, step=0.1, key="wi_q_k")
        st.form_submit_button("Apply this edit", icon=":material/edit:", on_click=_quick_edit,
                              args=(bundle, cid, settings, scenario))


def edits_ui(bundle, cid, settings, scenario: Scenario) -> None:
    """The scenario's edits in words, and a button that undoes the last one."""
    if not scenario:
        st.caption("No edits yet: both sides show the customer as they are.")
        return
    st.markdown("**Your edits**: " + "; ".join(show.md(e.describe(bundle)) for e in scenario.edits))
    st.button("Undo the last edit", key="wi_undo", icon=":material/undo:", on_click=try_scenario,
              args=(bundle, cid, settings, Scenario(scenario.edits[:-1])))


def _search_settings(bundle, cid) -> None:
    ss = st.session_state
    ss["_whatif_search"] = ((bundle.content_hash, cid), {
        "threshold": float(ss["wi_f_threshold"]), "locked": tuple(ss["wi_f_locked"]),
        "max_edits": int(ss["wi_f_edits"]), "time_limit": float(ss["wi_f_limit"])})


def search_ui(bundle, cid) -> dict | None:
    """The search's settings (threshold, locked features, limits): those of the last Search for ``cid``."""
    names = {**dict(zip(bundle.static_features, bundle.static_labels)),
             **dict(zip(bundle.temporal_features, bundle.temporal_labels))}
    with st.form("wi_search", border=False):
        c1, c2, c3, c4 = st.columns([2, 4, 2, 2])
        c1.select_slider("Bring the prediction below", THRESHOLDS, value=0.5, key="wi_f_threshold")
        c2.multiselect("Locked features (never changed)", list(names), format_func=names.get, key="wi_f_locked",
                       help="for example what the customer cannot change: age, region")
        c3.slider("At most this many edits", 1, 5, 3, key="wi_f_edits")
        c4.select_slider("Time limit (s)", TIME_LIMITS, value=10, key="wi_f_limit")
        st.form_submit_button("Search", icon=":material/search:", type="primary", on_click=_search_settings,
                              args=(bundle, cid))
    stored = st.session_state.get("_whatif_search")
    return stored[1] if stored and stored[0] == (bundle.content_hash, cid) else None


def search_result_ui(bundle, cid, settings, result) -> None:
    """What the search found (:class:`explain.analysis.counterfactual.SearchResult`): its edits in words, its
    caution, how it went, and a button that shows its edits on the page."""
    if result.reached:
        st.success(show.md(f"{len(result.scenario.edits)} edit(s) bring the prediction from "
                           f"{result.original_prediction:.3f} to {result.prediction:.3f}:"), icon=":material/check:")
    else:
        st.error(show.md(f"Not found: {result.stopped}. Best reached: {result.prediction:.3f} "
                         f"(from {result.original_prediction:.3f}). Unlock features or allow more edits."))
    values = bundle.inputs_for([cid])
    for edit in result.scenario.edits:
        st.markdown("- " + show.md(edit.describe(bundle, {role: values[role][0] for role in values})))
    st.warning(show.md(result.caution), icon=":material/psychology_alt:")
    st.caption(show.md(f"{result.rounds} round(s), {result.evaluated} candidate inputs scored, "
                       f"{result.seconds:.2f} s; stopped because {result.stopped}."))
    if result.scenario:
        st.button("Show these edits above", icon=":material/arrow_upward:", key="wi_use",
                  on_click=try_scenario, args=(bundle, cid, settings, result.scenario))


def downloads_ui(bundle, cid, settings, outcome, figs) -> None:
    """CSV, JSON (with the scenario) and the offline HTML report of both rows, like a customer's."""
    ids, rb = whatif.scenario_ids(cid), whatif.report_bundle(bundle, cid, outcome)
    stem = show.file_stem(cid) + "_whatif"
    d1, d2, d3 = st.columns(3)
    d1.download_button("CSV (long format, both rows)", report.csv_bytes(outcome.attribution, rb, ids), f"{stem}.csv",
                       mime="text/csv", on_click="ignore", icon=":material/table:", key="wi_csv")
    d2.download_button("JSON (with the scenario)", whatif.report_json(bundle, cid, outcome, settings),
                       f"{stem}.json", mime="application/json", on_click="ignore", icon=":material/data_object:",
                       key="wi_json")
    d3.download_button("HTML report (opens offline)", lambda: html_report.html_report(
        outcome.attribution, rb, ids, 1, settings, figs, title=f"What-if for customer {cid}").encode("utf-8"),
        f"{stem}.html", mime="text/html", on_click="ignore", icon=":material/description:", key="wi_html")
