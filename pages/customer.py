"""Customer: why one customer gets their score (the default page)."""

import numpy as np
import streamlit as st

from explain.analysis import report
from explain.analysis import words as analyst_words
from explain.core import baselines, labels, periods, verdict
from explain.plots import figures
from explain.plots import html as html_report
from ui import frame, keep, pickers, show, speed, state, views
from ui import inputs as more_inputs

SPACE_UNITS = {"output": "", "logit": " (log-odds)", "log-odds": " (log-odds)"}
LEGEND = ("Each bar and cell is a share of the difference between this customer's score and the "
          "baseline's score: :red[**red raises**] the score, :blue[**blue lowers**] it, white means no effect. "
          "All shares add up to the difference; the badge says how closely.")


def how_to_read(baseline, advice: str, said) -> None:
    # lazy: the text is made and sent only while the expander is open (a customer switch sends none of it)
    box = st.expander("How to read this", icon=":material/help:", key="how_to_read", on_change="rerun")
    if not box.open:
        return
    with box:
        st.markdown(show.md(report.HOW_TO_READ))
        st.markdown(f"**The baseline here** ({show.md(baseline)}): "
                    f"{show.md(baselines.describe(baseline, unit=said.unit))}")
        st.markdown(f"**The heatmap**: {said.units} run left to right, one row per {said.adjective} feature. "
                    "Hover a cell for "
                    "the customer's value, the baseline's value and the attribution. The bars above sum each "
                    "period over features; the bars on the right sum each feature over periods.")
        st.markdown(f"**The badge**: {show.md(advice)} When it is not 'fine', raise the steps in the sidebar "
                    "(or choose 'auto').")


def base_rate(bundle, target: str) -> str:
    """What is usual, in words: the share of customers with the positive label, else the average score."""
    positive = labels.positive(bundle)
    if positive is not None:
        share = float(np.mean(labels.mask(bundle.labels, positive)))
        return f"{share:.0%} of customers {target}".replace("%", " %")
    return f"the average customer scores {float(np.mean(state.predictions(bundle))):.0%}".replace("%", " %")


def baseline_vs_rate(bundle, target: str, fb: float) -> str:
    """Why the baseline's prediction is not the churn rate (both are true)."""
    return (f"Its prediction ({fb:.2f}) need not equal how often customers {target} ({base_rate(bundle, target)}): "
            "the model scores combinations of values, and an average profile has none of the risky ones. "
            "'A sample of customers' as the comparison has the average prediction as its prediction.")


def why(bundle, cid, attribution, inputs, base, target) -> None:
    """The answer first, in the analyst's words: the score, what is usual, the main reasons with the values."""
    if attribution.space_used != "output" or attribution.temporal is None:
        return
    values = {"static": inputs["static"][0], "temporal": inputs["temporal"][0]}
    found = analyst_words.drivers_of(attribution, bundle, 0, values, base)
    st.markdown(show.md(analyst_words.why_sentence(
        cid, float(attribution.prediction[0]), target, found, base_rate=base_rate(bundle, target))))


def words(bundle, settings, described, advice) -> None:
    """The colour legend, the baseline in words and how to read it (below the heatmap)."""
    st.markdown(LEGEND)
    st.markdown(f"**Compared with** ({show.md(settings.baseline)} baseline): {described}")
    how_to_read(settings.baseline, advice, periods.words(bundle))


def downloads(attribution, bundle, cid, settings, figs) -> None:
    stem = show.file_stem(cid)
    d1, d2, d3 = st.columns(3)
    # each file is made only when its button is clicked (a customer switch makes none of them)
    d1.download_button("CSV (long format)", lambda: report.csv_bytes(attribution, bundle, [cid]), f"{stem}.csv",
                       mime="text/csv", on_click="ignore", icon=":material/table:", key="dl_csv")
    d2.download_button("JSON", lambda: report.json_bytes(attribution, bundle, [cid], settings), f"{stem}.json",
                       mime="application/json", on_click="ignore", icon=":material/data_object:", key="dl_json")
    d3.download_button(  # the HTML embeds plotly.js (a few MB)
        "HTML report (opens offline)",
        lambda: html_report.html_report(attribution, bundle, [cid], 0, settings, figs).encode("utf-8"),
        f"{stem}.html", mime="text/html", on_click="ignore", icon=":material/description:", key="dl_html")


def points_spent(attribution) -> str:
    """The evaluations spent on the customer: with steps="auto" they differ per customer."""
    forward = attribution.forward_points
    return (f"{int(attribution.gradient_points[0])} gradient evaluations"
            + (f" and {int(forward[0])} model calls without a gradient" if forward is not None else ""))


def customer_page():
    bundle, choice = frame.page()
    cid, settings = choice.customer, choice.settings
    attribution = state.attributions(bundle, [cid], settings)
    inputs = bundle.inputs_for([cid])
    target, unit = bundle.output_names[attribution.settings.target], SPACE_UNITS[attribution.space_used]
    fx, fb, delta = (float(attribution.prediction[0]), float(attribution.baseline_prediction[0]),
                     float(attribution.delta[0]))
    status, advice = report.delta_status(delta, fx, fb, auto=settings.steps == "auto")
    described = show.md(more_inputs.baseline_words(bundle, settings))

    st.markdown(f"#### Customer {show.md(cid)}")  # small: the sentence below names the customer again
    if pickers.technical_view():  # the engineers' caption, while the IG settings are open
        st.caption(show.md(f"Explaining {target}{unit} · baseline: {settings.baseline} · {attribution.steps[0]} "
                           f"steps ({settings.method}) · {settings.path} path"))
    base = state.baseline_arrays(bundle, cid, settings) if bundle.plain else None
    if bundle.plain:  # the answer first (bundles with more inputs: the summary below their heatmaps)
        why(bundle, cid, attribution, inputs, base, target)
    for note in attribution.notes:  # an input the model does not use: its attributions are exactly 0
        st.info(show.md(note), icon=":material/info:")
    score = float(state.predictions(bundle, attribution.settings.target)[bundle.index_of(cid)])
    said = verdict.verdict(score, verdict.bands_of(bundle), target)
    v1, m1, m2, m3 = st.columns([2.2, 1, 1, 1.2])
    with v1:
        show.verdict_headline(said)
        show.quality_badge(status, advice, verdict.quality(delta, fx, fb), {
            "Gap left over (delta)": f"{delta:+.3e} (prediction - baseline prediction - sum of all attributions)",
            "Steps": f"{attribution.steps[0]} ({settings.method}, {settings.path} path)",
            "Points spent": points_spent(attribution)})
    m1.metric(f"Predicted {show.md(target)}{unit}", f"{fx:.3f}",
              help=show.md(f"Score {score:.3f}: in the band '{said.band}' ({said.range_text})."))
    m2.metric(f"Baseline prediction{unit}", f"{fb:.3f}",
              help=described + " " + show.md(baseline_vs_rate(bundle, target, fb)))
    m3.metric("Difference explained", f"{fx - fb:+.3f}",
              help="prediction minus baseline prediction: what the attributions below share out")
    if close := report.close_baseline_note(fx, fb):
        st.warning(show.md(close), icon=":material/compare_arrows:")
    if not bundle.plain:  # categorical, padded or several histories: one heatmap per history
        # the answer in words first, then the heatmaps, then how to read them (as on the plain path below)
        st.info(show.md(report.summary_text(attribution, bundle, 0)), icon=":material/summarize:")
        base = state.baseline_arrays(bundle, cid, settings)
        shown = more_inputs.customer_figures(attribution, bundle, cid, base, settings,
                                             after_heatmaps=lambda: words(bundle, settings, described, advice))
        st.subheader("Download")
        return downloads(attribution, bundle, cid, settings, shown)

    said = periods.words(bundle)
    units_s, units_t = show.units(bundle, bundle.static_features), show.units(bundle, bundle.temporal_features)
    view = views.view_ui(bundle.periods, "customer_temporal")  # a long history: its bin and zoom
    top = views.top_of(bundle.n_static, "customer_static")  # its toggle is drawn above the bars
    page = "customer" if view is None and top is None else f"customer|{view}|{top}"

    def build():  # one plan (bins, zoom, rows) for the heatmap and the history beside it
        plan = periods.heatmap_plan(bundle.periods, bundle.temporal_labels, attribution.temporal[0], view=view)
        return (figures.temporal_panel_spec(
                    bundle.periods, bundle.temporal_labels, attribution.temporal[0], values=inputs["temporal"][0],
                    baseline=base["temporal"], units=units_t, plan=plan,
                    title=f"{said.adjective.capitalize()} features: effect of each feature in each period"),
                figures.static_bars_spec(bundle.static_labels, attribution.static[0], inputs["static"][0],
                                         units=units_s, baseline=base["static"], top=top,
                                         title="Static features (label: the customer's value)"),
                figures.history_spec(bundle.periods, bundle.temporal_labels, inputs["temporal"][0],
                                     baseline=base["temporal"], units=units_t, columns=2, plan=plan,
                                     title=f"The customer's {said.adjective} history (dashed: the baseline)"))

    (fig_panel, fig_static, fig_history), shown = speed.figures(bundle, page, cid, settings, build)
    show.plot(shown[0], key="temporal_heatmap")
    speed.heatmap_first()
    keep.card(bundle, cid, settings, score, target)
    words(bundle, settings, described, advice)
    left, right = st.columns(2)
    with left:
        views.top_ui(bundle.n_static, "customer_static")
        show.plot(shown[1], key="static_bars")
    with right:
        show.plot(shown[2], key="history")
    more_inputs.history_table(bundle, cid)

    st.subheader("Download")
    downloads(attribution, bundle, cid, settings,
              [(f"{said.adjective.capitalize()} features", fig_panel), ("Static features", fig_static),
               ("History", fig_history)])


with show.guard():
    customer_page()
