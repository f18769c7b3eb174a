"""The dashboard's views of a bundle's inputs, whatever their kind (plain, categorical ids into embeddings,
padded histories, several histories): the Customer page's figures (one heatmap per history, every static
feature together, the history) and downloads, the pages' notes on what they cannot show, and the Data & model
page's description of the inputs. The figures come from ``explain.figures``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from explain import figures
from explain.analysis import report
from explain.core import baselines, periods
from explain.plots import html as html_report
from ui import cache, show, speed, views

INPUTS_HELP = (
    "**Inputs of this model.** Every 2-D input is static-like, every 3-D input a history. Category ids "
    "that feed an Embedding are explained at the embedding's output and reported per original feature "
    "(the embedding's attribution summed over its dimensions); their baseline is a category, or the mean "
    "embedding, as the baseline's words say. Padded periods of a history (a Masking layer, or id 0 with "
    "mask_zero) stay padding all along the path: they get no attribution, are drawn grey (\"no data\") in "
    "every heatmap and are empty in the downloads."
)

SEVERAL_HISTORIES = ("The {page} page draws one history; this model reads {count} histories ({names}). The "
                     "Customer and Diagnostics pages show every one of them.")
CATEGORIES = ("The What-if page edits numbers (each within the range seen in the data) of one static input and one "
              "history; this model also reads {names} as categories (ids or text into an Embedding), which it "
              "cannot edit. The Customer, Compare, Cohort and Diagnostics pages explain this model.")
SEVERAL_STATIC = ("The What-if page edits one static input and one history; this model reads {count} static inputs "
                  "({names}). The Customer, Compare, Cohort and Diagnostics pages explain this model.")


def page_cannot(bundle, page: str, needs: str = "one history") -> str | None:
    """Why ``page`` cannot show this bundle's model, or None when it can. ``needs``: "one history"
    (Compare, Cohort: any inputs, padded or not, with one history) or "numbers" (What-if: one numeric
    static and one numeric history, padded or not)."""
    if bundle.plain:
        return None
    histories = bundle.layout.keys_of("temporal")
    if len(histories) > 1:
        return SEVERAL_HISTORIES.format(page=page, count=len(histories),
                                        names=", ".join(bundle.input_labels.get(k, k) for k in histories))
    categorical = [spec.key for spec in bundle.layout.specs if spec.embedding is not None or spec.kind == "categorical"]
    if needs == "numbers" and categorical:
        return CATEGORIES.format(names=", ".join(bundle.input_labels.get(k, k) for k in categorical))
    statics = bundle.layout.keys_of("static")
    if needs == "numbers" and len(statics) > 1:
        names = ", ".join(bundle.input_labels.get(k, k) for k in statics)
        return SEVERAL_STATIC.format(count=len(statics), names=names)
    return None


def one_history_only(bundle, page: str, needs: str = "one history") -> None:
    """Stop a page that cannot show this bundle's model, saying which and why (:func:`page_cannot`)."""
    why = page_cannot(bundle, page, needs)
    if why is not None:
        st.info(show.md(why), icon=":material/info:")
        st.stop()

CATEGORICAL_RULES = {"mode": "most frequent category", "mean-embedding": "mean embedding (frequency-weighted)"}


def categorical_ui(bundle) -> None:
    """The baseline rule of categorical inputs (only for a model that has some); the Customer
    page's baseline words say which one is in use."""
    if bundle.plain or not any(spec.embedding is not None for spec in bundle.layout.specs):
        return
    st.session_state.setdefault("categorical", "mode")
    st.radio("Categorical features at", list(CATEGORICAL_RULES), key="categorical",
             format_func=CATEGORICAL_RULES.get,
             help="The baseline of inputs that are category ids into an Embedding (chosen categories: "
                  "python -m explain ... --categorical category:FEATURE=VALUE).")


def histories(bundle) -> list[str]:
    """The engine keys of the bundle's histories ("temporal" for a plain bundle)."""
    return ["temporal"] if bundle.plain else list(bundle.layout.keys_of("temporal"))


def customer_figures(attribution, bundle, cid, reference: dict, settings, after_heatmaps=None
                     ) -> list[tuple[str, object]]:
    """Draw the Customer page's figures of customer ``cid`` (``explain.figures.customer_figures``, the same for
    every kind of bundle): each history's heatmap (a long one with its bin/zoom control), then ``after_heatmaps()``
    (the page's words), the static bars (a long ranking cut, with "show all") and (one history) the customer's
    history against the baseline ``reference`` ({key: values}), drawn in the heatmap's bins and rows; return
    (heading, figure) for the downloads. Built once per customer, settings and view (``ui.cache.figures``)."""
    keys = histories(bundle)
    chosen = {key: views.view_ui(bundle.input_periods.get(key, bundle.periods), f"customer_{key}") for key in keys}
    top = views.top_of(len(bundle.static_labels), "customer_static")  # its toggle is drawn above the bars

    def build(part: str):  # the heatmaps are made and sent first, the rest after the page's words
        return lambda: tuple(shown.figure for shown in figures.customer_figures(
            attribution, bundle, 0, ids=[cid], reference=reference, views=chosen, top=top, spec=True, part=part))

    page = f"customer|{sorted(chosen.items())}|{top}"
    built, shown = cache.figures(bundle, f"{page}|heatmaps", cid, settings, build("heatmaps"))
    one = attribution.temporal is not None  # one history: drawn beside the static bars
    headings = [title.split(":")[0] for title in figures.history_titles(bundle)] + ["Static features"]
    headings += ["History"] if one else []
    for i in range(len(keys)):
        show.plot(shown[i], key="temporal_heatmap" if bundle.plain else f"temporal_heatmap_{i}")
    speed.heatmap_first()
    if after_heatmaps is not None:
        after_heatmaps()
    views.top_ui(len(bundle.static_labels), "customer_static")
    rest_built, rest = cache.figures(bundle, f"{page}|rest", cid, settings, build("rest"))
    if not one:
        show.plot(rest[0], key="static_bars")
    else:
        left, right = st.columns(2)
        with left:
            show.plot(rest[0], key="static_bars")
        with right:
            show.plot(rest[1], key="history")
        history_table(bundle, cid, keys[0])
    return list(zip(headings, built + rest_built))


def downloads(attribution, bundle, cid, settings, figs, story) -> None:
    """The Customer page's downloads: CSV, JSON and the offline HTML report (with the page's words, ``story``)."""
    stem = show.file_stem(cid)
    d1, d2, d3 = st.columns(3)
    # each file is made only when its button is clicked (a customer switch makes none of them)
    d1.download_button("CSV (long format)", lambda: report.csv_bytes(attribution, bundle, [cid]), f"{stem}.csv",
                       mime="text/csv", on_click="ignore", icon=":material/table:", key="dl_csv")
    d2.download_button("JSON", lambda: report.json_bytes(attribution, bundle, [cid], settings), f"{stem}.json",
                       mime="application/json", on_click="ignore", icon=":material/data_object:", key="dl_json")
    d3.download_button(  # the HTML embeds plotly.js (a few MB)
        "HTML report (opens offline)",
        lambda: html_report.html_report(attribution, bundle, [cid], 0, settings, figs, story=story).encode("utf-8"),
        f"{stem}.html", mime="text/html", on_click="ignore", icon=":material/description:", key="dl_html")


def history_table(bundle, cid, key: str = "temporal") -> None:
    """The customer's history ``key`` as a table, every period and feature, in an expander that
    builds it only while open (a customer switch sends none of it)."""
    table = st.expander("History as a table", key="history_table", on_change="rerun")
    if table.open:
        with table:
            index = [str(p) for p in bundle.input_periods.get(key, bundle.periods)]
            columns = [bundle.feature_labels.get(c, c) for c in bundle.input_features.get(key, [])]
            values = np.asarray(bundle.inputs_for([cid])[key][0]).reshape(len(index), -1)
            st.dataframe(pd.DataFrame(values, index=index, columns=columns or bundle.temporal_labels))


def baseline_words(bundle, settings, analyst: bool = False) -> str:
    """What the baseline is, with what categorical and padded inputs are set to (``analyst``: the Customer page's
    words, padding said as "no data yet")."""
    layout = None if bundle.plain else bundle.layout
    return baselines.describe(settings.baseline, layout=layout, categorical=settings.categorical,
                              unit=periods.words(bundle).unit, analyst=analyst,
                              padding=bundle.temporal_padding)


def overview(bundle) -> None:
    """The Data & model page's table of the model's inputs (more-input bundles only)."""
    if bundle.plain:
        return
    st.markdown("**Model inputs**")
    rows = []
    for spec in bundle.layout.specs:
        rows.append({"input": spec.key, "name": bundle.input_labels.get(spec.key, spec.key), "role": spec.role,
                     "kind": spec.kind, "shape": str((None, *spec.shape)), "dtype": spec.dtype,
                     "padding": spec.padded_by or "",
                     "columns": ", ".join(bundle.input_features.get(spec.key, []))})
    st.dataframe(rows, hide_index=True)
    if any(spec.padded_by for spec in bundle.layout.specs):
        st.caption(show.md(f"Short histories are padded at the {bundle.temporal_padding} (bundle.json "
                           "'temporal_padding')."))
    st.markdown(INPUTS_HELP)
