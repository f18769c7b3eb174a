"""The frame: page config, the router over pages/, and the shared pickers in the sidebar.

    streamlit run app.py                      # the demo bundle (bundles/demo)
    streamlit run app.py -- --bundle DIR      # another bundle folder
    EXPLAIN_BUNDLE=DIR streamlit run app.py   # the same, by environment variable
    streamlit run app.py -- --bundle DIR --trust-code layers.py   # your own custom layers (never for uploads)
"""

import streamlit as st

from ui import auth, frame, show, startup

startup.before_tensorflow()  # `streamlit run app.py`: TensorFlow without its unused imports, its XLA cache kept

st.set_page_config(page_title="Churn explainer · Integrated Gradients", page_icon=":material/insights:",
                   layout="wide")

# Two audiences: analysts and stakeholders first, the engineers' pages in a section of their own
PAGES = {
    "Explain": [
        st.Page("pages/drivers.py", title="What drives churn", icon=":material/insights:", url_path="drivers"),
        st.Page("pages/customer.py", title="Customer", icon=":material/person:", default=True),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
        st.Page("pages/whatif.py", title="What-if", icon=":material/tune:", url_path="whatif"),
        st.Page("pages/cohort.py", title="Cohort", icon=":material/groups:"),
    ],
    "For engineers": [
        st.Page("pages/diagnostics.py", title="Diagnostics", icon=":material/troubleshoot:"),
        st.Page("pages/data.py", title="Data & model", icon=":material/upload_file:"),
    ],
}
if startup.challenger_path() is not None:  # explain serve --challenger MODEL: the engineers' comparison of two models
    PAGES["For engineers"].append(st.Page("pages/models.py", title="Champion vs challenger",
                                          icon=":material/difference:", url_path="models"))
auth.gate([p for section in PAGES.values() for p in section])  # a login configured: only an allowed user passes
page = st.navigation(PAGES)
show.page_style()  # first, before TensorFlow is imported: it also starts the browser loading the chart library
frame.unknown_page_note([p for section in PAGES.values() for p in section], page)

# TensorFlow and the model: the first run after a server start waits here for the import (seconds), while
# the browser, which already has the page style, loads and compiles Plotly (see show.CHART_LIBRARY)
from ui import cache, pickers, tour  # noqa: E402

with frame.timed(page.url_path or "customer"):
    bundle, choice, problem = None, None, None
    try:
        bundle = cache.active_bundle()
    except Exception as exc:  # a broken bundle: the pages say so; the Data & model page still works
        problem = exc
    if bundle is not None:
        with show.guard():
            choice = pickers.sidebar_ui(bundle)
    frame.publish(bundle, choice, problem)
    if bundle is not None and tour.step() is None:
        st.sidebar.page_link("pages/drivers.py", label="Present: a guided demo in 3 steps", icon=":material/slideshow:",
                             query_params={tour.PARAM: "1"})
    if badge := startup.trusted_badge():
        st.sidebar.badge(badge, icon=":material/warning:", color="orange")

    with show.guard():
        tour.banner(bundle, choice.settings if choice is not None else None)  # ?tour=1: the presenter's walk
        page.run()
