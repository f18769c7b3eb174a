"""Customer: why one customer gets their score (the default page). The words and the figures are the same for every
kind of bundle (``explain.figures.customer_story`` / ``customer_figures``).

What one customer has and another has not (a caption, notes, a warning, the reasons, the what-if card) is drawn inside
a container that is always there, so that every chart keeps its place on the page from one customer to the next: the
browser draws a chart that has moved anew instead of updating it (on a 365-day heatmap 0.3-0.6 s more, measured in
Chromium on a 20,000-customer bundle)."""

import streamlit as st

from explain import figures
from explain.analysis import report
from explain.analysis import words as analyst_words
from explain.analysis.diagnostics import shown_baseline
from explain.core import baselines, periods, verdict
from ui import cache, frame, input_views, keep, periods_out, pickers, show, trust

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
        st.markdown(f"**The heatmap**: {said.units} run left to right, one row per {said.adjective} feature. Hover a "
                    "cell for the customer's value, the baseline's value and the attribution. The bars above sum each "
                    "period over features; the bars on the right sum each feature over periods.")
        st.markdown(f"**The badge**: {show.md(advice)} When it is not 'fine', raise the steps in the sidebar "
                    "(or choose 'auto').")


def below_heatmaps(bundle, cid, settings, story, score, target, described, advice) -> None:
    """The reasons one by one, what would keep the customer, the colour legend and the baseline in words, in one
    container that is always there (see the module)."""
    with st.container():
        _below_heatmaps(bundle, cid, settings, story, score, target, described, advice)


def _below_heatmaps(bundle, cid, settings, story, score, target, described, advice) -> None:
    if story.reasons:
        st.markdown(f"**The largest effects** (compared with {show.md(story.reference)}):\n\n"
                    + "\n".join(f"- {show.md(r)}" for r in story.reasons))
    if score >= keep.THRESHOLD and settings.space == "output":
        if story.keep is None:  # the search runs on numbers of one table and one history, padded or not
            keep.card(bundle, cid, settings, score, target)
        else:
            st.caption(f"**What would keep this customer?** {show.md(story.keep)}")
    st.markdown(LEGEND)
    st.markdown(f"**Compared with** ({show.md(settings.baseline)} baseline): {described}")
    how_to_read(settings.baseline, advice, periods.words(bundle))


def customer_page():
    bundle, choice = frame.page()
    cid, settings = choice.customer, choice.settings
    bundle, settings = periods_out.explained_period(bundle, cid, settings)  # a prediction per period: which one
    attribution = cache.attributions(bundle, [cid], settings)
    target, unit = bundle.output_names[attribution.settings.target], SPACE_UNITS[attribution.space_used]
    fx, fb, delta = (float(attribution.prediction[0]), float(attribution.baseline_prediction[0]),
                     float(attribution.delta[0]))
    status, advice = report.delta_status(delta, fx, fb, auto=settings.steps == "auto")
    described = show.md(input_views.baseline_words(bundle, settings, analyst=True))
    scores = cache.predictions(bundle, attribution.settings.target)
    shown = shown_baseline(bundle, cid, settings, attribution=attribution)  # the baseline IG used, from its result
    reference = analyst_words.references(bundle, cid, settings, shown)
    story = figures.customer_story(attribution, bundle, 0, ids=[cid], settings=settings, reference=reference,
                                   scores=scores, groups=cache.feature_groups(bundle))

    with st.container(horizontal=True, vertical_alignment="center", gap="medium"):  # one line: a laptop's screen
        st.markdown(f"#### Customer {show.md(cid)}", width="content")  # small: the sentence names them again
        if story.outcome:  # the known outcome, and whether the model missed it
            st.markdown(f":orange[**{show.md(story.outcome)}**]" if story.missed else show.md(story.outcome))
        trust.stability_line(bundle, cid, settings, target)  # sensitivity-max, computed when opened
    with st.container():  # one element whatever it holds, so that the charts keep their places (see the module)
        headline(bundle, cid, settings, attribution, story, scores, target, unit, described, delta, status, advice)
    shown = input_views.customer_figures(attribution, bundle, cid, reference, settings, after_heatmaps=lambda: (
        below_heatmaps(bundle, cid, settings, story, float(scores[bundle.index_of(cid)]), target, described,
                       advice)))
    st.subheader("Download")
    input_views.downloads(attribution, bundle, cid, settings, shown, story)


def headline(bundle, cid, settings, attribution, story, scores, target, unit, described, delta, status, advice):
    """Above the charts: the answer in words, the notes, the verdict, the badge and the three numbers."""
    fx, fb = float(attribution.prediction[0]), float(attribution.baseline_prediction[0])
    if pickers.technical_view():  # the engineers' caption, while the IG settings are open
        st.caption(show.md(f"Explaining {target}{unit} · baseline: {settings.baseline} · {attribution.steps[0]} "
                           f"steps ({settings.method}) · {settings.path} path"))
    st.markdown(show.md(story.headline))  # the answer first, in the analyst's words
    if story.history:
        st.caption(show.md(story.history))
    for note in attribution.notes:  # an input the model does not use: its attributions are exactly 0
        st.info(show.md(note), icon=":material/info:")
    score, said, change = float(scores[bundle.index_of(cid)]), story.verdict, settings.baseline.change
    v1, m1, m2, m3 = st.columns([2.2, 1, 1, 1.2])
    with v1:
        show.verdict_headline(said)
        show.quality_badge(status, advice, verdict.quality(delta, fx, fb), {
            "Gap left over (delta)": f"{delta:+.3e} (prediction - baseline prediction - sum of all attributions)",
            "Steps": f"{attribution.steps[0]} ({settings.method}, {settings.path} path)",
            "Points spent": f"{int(attribution.gradient_points[0])} gradient evaluations" + (
                "" if attribution.forward_points is None else
                f" and {int(attribution.forward_points[0])} model calls without a gradient")})
    m1.metric(f"Predicted {show.md(target)}{unit}", f"{fx:.3f}",
              help=show.md(f"Score {score:.3f}: in the band '{said.band}' ({said.range_text})."))
    m2.metric(f"Prediction {story.reference}{unit}" if change else f"Baseline prediction{unit}", f"{fb:.3f}",
              help=described + " " + show.md(
        f"Its prediction ({fb:.2f}) need not equal how often customers {target} "
        f"({analyst_words.base_rate(bundle, target, scores)}): the model scores combinations of values, and an "
        "average profile has none of the risky ones. 'A sample of customers' as the comparison has the average "
        "prediction as its prediction."))
    m3.metric("Difference explained", f"{fx - fb:+.3f}",
              help="prediction minus baseline prediction: what the attributions below share out")
    if close := report.close_baseline_note(fx, fb, change=change):
        st.warning(show.md(close), icon=":material/compare_arrows:")


with show.guard():
    customer_page()
