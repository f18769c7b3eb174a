"""The presenter's walk through a demo: ``?tour=1`` on any page starts it.

1. What drives churn across all customers (the overview);
2. the customer the model scores highest, and why, in words;
3. what would keep them: the same edits on the What-if page.

Each step is a banner at the top of the page with a link to the next one; the links carry the view's other
settings, so the presenter can change anything on the way.
"""

from __future__ import annotations

import streamlit as st

from ui import cache, keep

PARAM = "tour"
STEPS = {
    1: ("pages/drivers.py", "Step 1 of 3 · **What drives churn across all customers.** The ranking says which "
        "inputs move the model's score most, over everyone; the segments say which groups churn for which reasons."),
    2: ("pages/customer.py", "Step 2 of 3 · **The customer most likely to churn, and why.** The sentence at the top "
        "says it in words, with the customer's own values against the usual ones; the heatmap shows when."),
    3: ("pages/whatif.py", "Step 3 of 3 · **What would keep them.** The smallest change the search found that brings "
        "the score below 0.5, applied here: the left heatmap is the customer as they are, the right one with it."),
}


def step() -> int | None:
    try:
        value = int(st.query_params.get(PARAM, ""))
    except ValueError:
        return None
    return value if value in STEPS else None


def links(bundle, settings, n: int) -> dict:
    """The query parameters of step ``n``: the top-risk customer from step 2 on, and from step 3 the edits that
    would keep them (the what-if search, as the Customer page's card runs it)."""
    query = {**st.query_params.to_dict(), PARAM: str(n)}
    if n >= 2:
        query["customer"] = cache.default_customer(bundle)  # the highest score of the bundle
    if n == 3:
        result = keep.search(bundle, query["customer"], settings)
        if result is not None and result.reached:
            query["whatif"] = result.scenario.text()
    return query


def banner(bundle, settings) -> None:
    """The current step's words and the link to the next (or out of the tour)."""
    n = step()
    if n is None or bundle is None:
        return
    with st.container(border=True):
        st.markdown(STEPS[n][1])  # constant text of this module
        if n + 1 in STEPS:
            st.page_link(STEPS[n + 1][0], label="Next", icon=":material/arrow_forward:",
                         query_params=links(bundle, settings, n + 1))
        else:
            query = {k: v for k, v in st.query_params.to_dict().items() if k not in (PARAM, "whatif")}
            st.page_link("pages/customer.py", label="End the tour", icon=":material/close:", query_params=query)
