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
from explain.core import baselines, periods
from ui import answer, cache, frame, input_views, keep, periods_out, show, trust

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
    score = float(scores[bundle.index_of(cid)])
    with st.container():  # one element whatever it holds, so that the charts keep their places (see the module)
        answer.above_charts(bundle, settings, attribution, story, scores, score=score, target=target, unit=unit,
                            described=described, status=status, advice=advice)
    shown = input_views.customer_figures(attribution, bundle, cid, reference, settings, after_heatmaps=lambda: (
        below_heatmaps(bundle, cid, settings, story, score, target, described, advice)))
    st.subheader("Download")
    input_views.downloads(attribution, bundle, cid, settings, shown, story)


with show.guard():
    customer_page()
