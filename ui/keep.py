"""The Customer page's "What would keep this customer?" card: the what-if search's answer in one sentence for a
high-risk customer, with a link that opens the same edits on the What-if page."""

from __future__ import annotations

import streamlit as st

from explain.core.errors import ExplainError
from ui import cache, show
from ui import whatif as whatif_ui

THRESHOLD = 0.5  # the score to get below: the edge of "likely to churn"
TIME_LIMIT = 3.0  # seconds the search may take here (median 0.1 s on the demo; docs/performance.md)


def search(bundle, cid: str, settings):
    """The what-if search that would keep ``cid`` (cached), or None where it does not apply: the What-if page
    says which model kinds and why."""
    try:
        return cache.whatif_search(bundle, cid, settings, threshold=THRESHOLD, time_limit=TIME_LIMIT)
    except ExplainError:
        return None


def card(bundle, cid: str, settings, score: float, target: str) -> None:
    """Nothing for a customer below the threshold, or where the search does not apply (explained in log-odds)."""
    if score < THRESHOLD or settings.space != "output":
        return
    result = search(bundle, cid, settings)
    if result is None:
        return
    values = bundle.inputs_for([cid])
    values = {role: values[role][0] for role in values}
    with st.container(border=True):
        st.markdown(f"**What would keep this customer?** {show.md(sentence(result, bundle, values, target))}")
        if result.reached:
            query = {**st.query_params.to_dict(), "customer": cid, whatif_ui.PARAM: result.scenario.text()}
            st.page_link("pages/whatif.py", label="Open these edits on What-if", icon=":material/tune:",
                         query_params=query)
        st.caption("What the model does, not what the customer will do: the edits are questions to ask, not a plan.")


def sentence(result, bundle, values: dict, target: str) -> str:
    """The search's answer in words."""
    if not result.reached and "time limit" in result.stopped:
        return (f"No change of a few values that brings the {target} score below {result.threshold:g} was found "
                f"within the {TIME_LIMIT:g} s this card gives the search (the closest so far: "
                f"{result.prediction:.2f}); "
                f"the What-if page's Search can take longer.")
    if not result.reached:
        return (f"No change of a few values brings the {target} score below {result.threshold:g} "
                f"(the closest: {result.prediction:.2f}).")
    edits = [edit.describe(bundle, values) for edit in result.scenario.edits]
    listed = edits[0] if len(edits) == 1 else "; ".join(edits[:-1]) + "; and " + edits[-1]
    return (f"In the model, {listed} would bring the {target} score from {result.original_prediction:.2f} "
            f"to {below(result.prediction, result.threshold)}.")


def below(score: float, threshold: float) -> str:
    """``score`` with 2 decimals, more where 2 would show a score under ``threshold`` as not under it (0.4999, not
    0.50)."""
    for decimals in range(2, 7):
        text = f"{score:.{decimals}f}"
        if score >= threshold or float(text) < threshold:
            return text
    return f"just under {threshold:g}"
