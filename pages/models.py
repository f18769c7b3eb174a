"""Champion against challenger (for engineers; only with `explain serve --challenger MODEL`): does the challenger
score the customers for the same reasons as the bundle's model? Words first, then the shares, then the customers
the two models disagree on, with both models' reasons side by side."""

import streamlit as st

from explain.plots import models as plots
from ui import frame, show
from ui import models as parts


def models_page():
    bundle, choice = frame.page()
    st.title("Champion against challenger")
    words = st.container()  # the answer first, above the picker it depends on
    customers = parts.customers_ui()
    result = parts.comparison(bundle, choice.settings, customers)
    with words:
        parts.words(result)
    st.subheader("Share of each feature under each model")
    show.plot(plots.shares(result), key="models_shares")
    st.caption("A feature's share: its mean |attribution| over the sample (a history's feature summed over its "
               "periods) divided by the sum over every feature, for each model.")
    parts.disagreements_table(result)


with show.guard():
    models_page()
