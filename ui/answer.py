"""The Customer page above its charts (``pages/customer.py``): the answer in words, the notes an attribution carries,
the verdict with the quality badge, and the prediction, the baseline's and their difference."""

import streamlit as st

from explain.analysis import report
from explain.analysis import words as analyst_words
from explain.core import verdict
from ui import pickers, show


def above_charts(bundle, settings, attribution, story, scores, *, score: float, target: str, unit: str,
                 described: str, status: str, advice: str) -> None:
    """The answer in words, the notes, the verdict, the badge and the three numbers of one customer
    (``attribution``: theirs; ``story``: ``explain.figures.customer_story``; ``scores``: every customer's, ``score``
    theirs)."""
    fx, fb = float(attribution.prediction[0]), float(attribution.baseline_prediction[0])
    delta = float(attribution.delta[0])
    if pickers.technical_view():  # the engineers' caption, while the IG settings are open
        st.caption(show.md(f"Explaining {target}{unit} · baseline: {settings.baseline} · {attribution.steps[0]} "
                           f"steps ({settings.method}) · {settings.path} path"))
    st.markdown(show.md(story.headline))  # the answer first, in the analyst's words
    if story.history:
        st.caption(show.md(story.history))
    for note in attribution.notes:  # an input the model does not use: its attributions are exactly 0
        st.info(show.md(note), icon=":material/info:")
    said, change = story.verdict, settings.baseline.change
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
