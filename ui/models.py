"""The Champion against challenger page's parts (``pages/models.py``): the challenger model of
``explain serve --challenger MODEL``, the comparison kept for every session, and the words and table drawn from it.

The challenger is read from the app's own arguments as the startup bundle is (``streamlit run app.py -- --bundle DIR
--challenger MODEL``; ``ui/launch.py`` passes them through) and opened by the startup bundle's rules: its loader
(``--trust-code``) and limits (``--limit``), safe mode (``explain.analysis.models.open_challenger``). A file that
cannot be opened, or that does not take the bundle's inputs, is a message on the page. The computation is in
``explain.analysis.models``; this module only caches and shows it. TensorFlow is imported on first use only: the
frame asks ``ui.startup.challenger_path`` before it imports the engine.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import streamlit as st

from explain.core.errors import ExplainError
from ui import show, startup

LOG = logging.getLogger("explain.app")
TTL = 3600  # seconds
CUSTOMERS = (50, 100, 200, 500)  # the sample sizes offered
DEFAULT_CUSTOMERS = 200


def _fingerprint(path: Path) -> tuple:
    try:
        info = path.stat()
    except OSError:
        return ()
    return info.st_size, info.st_mtime_ns


@st.cache_resource(max_entries=2, show_spinner="Opening the challenger model...")
def _open(path: str, fingerprint: tuple):
    """(model, None) or (None, error text): a broken file is not read again on every rerun."""
    from explain.analysis.models import open_challenger

    try:
        return open_challenger(path, loader=startup.model_loader(), limits=startup.limits()), None
    except ExplainError as error:
        LOG.error("the challenger %s could not be opened: %s", path, error)
        return None, str(error)


def challenger_model():
    """The challenger of ``--challenger``, opened once per file content; ``ExplainError`` when it cannot be."""
    path = startup.challenger_path()
    if path is None:
        raise ExplainError("No challenger: start the dashboard with `explain serve --challenger MODEL`.")
    model, error = _open(str(path.resolve()), _fingerprint(path))
    if model is None:
        raise ExplainError(error)
    return model


@st.cache_resource(max_entries=8, ttl=TTL, show_spinner="Explaining the sample with both models...")
def _comparison(_bundle, content_hash: str, _challenger, challenger: tuple, customers: int, key: tuple):
    from explain.analysis.models import compare_models
    from explain.core.settings import Settings
    from ui import cache, runtime

    with cache.WORK.computing(f"champion against challenger ({customers} customers)"):
        return compare_models(_bundle, _challenger, customers=customers, settings=Settings.from_key(key),
                              should_stop=runtime.should_stop, name=challenger[0])


def comparison(bundle, settings, customers: int):
    """``explain.analysis.models.compare_models`` of the bundle's model and the challenger on ``customers``
    customers under ``settings`` (the sidebar's), kept per bundle content, challenger file and settings."""
    model, path = challenger_model(), startup.challenger_path()
    return _comparison(bundle, bundle.content_hash, model, (path.name, str(path.resolve()), _fingerprint(path)),
                       customers, settings.key())


def customers_ui() -> int:
    """The sample size (the same seeded sample for both models)."""
    return st.segmented_control("Customers sampled", CUSTOMERS, default=DEFAULT_CUSTOMERS, key="models_customers",
                                help="A seeded random sample of the bundle's customers, explained with both models "
                                     "under the sidebar's settings.") or DEFAULT_CUSTOMERS


def words(result) -> None:
    """The answer first: agreement of the rankings, what changed, and where the scores disagree."""
    tau = result.kendall_tau
    st.info(show.md(result.agreement[:1].upper() + result.agreement[1:] + "."), icon=":material/balance:")
    changes = result.change_words
    st.markdown("**What changed most**: " + (show.md("; ".join(changes)) if changes else
                                             "no feature's share changed by 1 percentage point or more") + ".")
    overlap = result.top3_overlap
    n = len(result.customers)
    cols = st.columns(3)
    cols[0].metric("Kendall's tau of the rankings", f"{tau.value:.2f}", help=(
        f"Between the two models' mean |attribution| per feature; {tau.low:.2f} to {tau.high:.2f} over "
        f"bootstrap resamples of the customers (95 %). 1: the same order; 0: unrelated."))
    cols[1].metric("Top-3 reasons overlap", f"{overlap.at_least_two:.0%}",
                   help="Customers with at least 2 of their 3 largest effects in common under both models.")
    cols[2].metric("Customers flagged by one model only", f"{len(result.disagreements)} of {n}",
                   help=f"Score of at least {result.threshold:g} ({result.space}) under one model, not the other.")
    st.caption(show.md(f"Compared against the bundle's model (the champion): {result.challenger_name} is the "
                       f"challenger. {n:,} customers sampled, both explained with the sidebar's settings and the "
                       "same baseline."))


def _reasons(reasons) -> str:
    return "; ".join(f"{r.label} {r.attribution:+.3f}" for r in reasons) or "no effect"


def disagreements_table(result) -> None:
    """The customers one model flags and the other does not, both models' top reasons side by side."""
    st.subheader(f"Customers the models disagree on ({len(result.disagreements)})")
    if not result.disagreements:
        st.success(f"None: at the threshold {result.threshold:g} both models flag the same customers.")
        return
    rows = pd.DataFrame([{"customer": d.customer, "flagged by": f"{d.flagged_by} only",
                          "champion score": d.champion_score, "challenger score": d.challenger_score,
                          "champion's top reasons": _reasons(d.champion_reasons),
                          "challenger's top reasons": _reasons(d.challenger_reasons)} for d in result.disagreements])
    st.dataframe(rows, hide_index=True, width="stretch", key="models_disagreements",
                 column_config={"champion score": st.column_config.NumberColumn(format="%.3f"),
                                "challenger score": st.column_config.NumberColumn(format="%.3f")})
    st.caption("Reasons: each model's three largest effects on the customer's score (a history's feature summed "
               "over its periods), relative to the baseline; + raises the score, - lowers it.")
