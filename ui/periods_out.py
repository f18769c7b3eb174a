"""The Customer page's period choice for a model with a prediction per period: the customer's risk curve over the
periods (``explain.analysis.risk_curve``, drawn by ``explain.plots.risk_curve``) with the explained period marked,
and a slider (or a click on the curve) that explains another period; the choice lives in the URL (``output_period``).
Nothing is drawn for a model with one prediction per customer."""

from __future__ import annotations

import copy

import streamlit as st

from explain.analysis.risk_curve import risk_curve
from explain.bundle.heads import viewed
from explain.plots.risk_curve import risk_curve_figure
from ui import show, url

PICK = "output_period_pick"  # the slider's label
CHART = "risk_curve_chart"
CLICKED = "_risk_curve_clicked"  # the last click acted on


def explained_period(bundle, cid: str, settings):
    """(the bundle seen at the chosen period, the settings with ``output_period``); draws the curve and the choice.
    The bundle and ``settings`` as they are for a model with one prediction per customer."""
    asked = url.output_period(bundle)
    curve = risk_curve(bundle, cid, settings.replace(output_period=asked) if asked else settings)
    if curve is None:
        return bundle, settings
    number = _chosen(curve)
    if number != curve.explained:
        curve = risk_curve(bundle, cid, settings.replace(output_period=number))
    url.write({"output_period": str(number) if number != len(curve.periods) else None})
    st.markdown(show.md(curve.sentence))
    (st.caption if curve.causal else st.info)(show.md(curve.order))
    st.plotly_chart(risk_curve_figure(curve), key=CHART, on_select="rerun", selection_mode="points",
                    config={"displaylogo": False}, theme=None)
    st.select_slider("Period explained (or click a point of the curve)", curve.periods, key=PICK)
    view, settings = viewed(bundle, settings.replace(output_period=number))
    if view is not bundle:  # the dashboard's caches are keyed by content: this period's scores are other content
        view = copy.copy(view)
        object.__setattr__(view, "content_hash", f"{bundle.content_hash}#{settings.output}@{number}")
    return view, settings


def _chosen(curve) -> int:
    """The period number to explain: a new click on the curve, else the slider's, else the link's (or the last)."""
    ss, labels = st.session_state, curve.periods
    clicked = _clicked_period(ss.get(CHART))
    if clicked is not None and clicked != ss.get(CLICKED):
        ss[CLICKED], ss[PICK] = clicked, labels[clicked - 1]
    elif ss.get(PICK) not in labels:
        ss[PICK] = labels[curve.explained - 1]
    return labels.index(ss[PICK]) + 1


def _clicked_period(state) -> int | None:
    try:
        points = state["selection"]["points"]
        return int(points[0]["customdata"]) if points else None
    except (KeyError, TypeError, IndexError, ValueError):
        return None
