"""The dashboard's views of a bundle with more inputs (categorical ids into embeddings, padded
histories, several histories): one heatmap per history, every static feature together, and the
Data & model page's description of the inputs. The figures come from ``explain.figures``."""

from __future__ import annotations

import streamlit as st

from explain import figures
from explain.core import baselines
from ui import show

INPUTS_HELP = (
    "**Inputs of this model.** Every 2-D input is static-like, every 3-D input a history. Category ids "
    "that feed an Embedding are explained at the embedding's output and reported per original feature "
    "(the embedding's attribution summed over its dimensions); their baseline is a category, or the mean "
    "embedding, as the baseline's words say. Padded months of a history (a Masking layer, or id 0 with "
    "mask_zero) stay padding all along the path: they get no attribution, are drawn grey (\"no data\") in "
    "every heatmap and are empty in the downloads."
)

ONE_HISTORY_ONLY = (
    "The {page} page works on models with {needs}. This bundle's model has more inputs ({inputs}): "
    "use the Customer{others} page{s}."
)
NEEDS = {"plain": "one numeric static and one numeric monthly input", "one history": "one history (one 3-D input)"}


def one_history_only(bundle, page: str, needs: str = "plain") -> None:
    """Stop a page that needs a plain two-input bundle (or one history), saying so."""
    histories = 0 if bundle.plain else len(bundle.layout.keys_of("temporal"))
    if bundle.plain or (needs == "one history" and histories == 1):
        return
    others = ", Cohort and Diagnostics" if histories == 1 else " and Diagnostics"
    st.info(show.md(ONE_HISTORY_ONLY.format(page=page, needs=NEEDS[needs], inputs=", ".join(bundle.layout.engine_keys),
                                            others=others, s="s")), icon=":material/info:")
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


def customer_figures(attribution, bundle, cid) -> list[tuple[str, object]]:
    """Draw each history's heatmap and the static bars of customer ``cid``; return them for the downloads."""
    shown = []
    for i, (title, fig) in enumerate(figures.history_heatmaps(attribution, bundle, 0, ids=[cid])):
        show.plot(fig, key=f"temporal_heatmap_{i}")
        shown.append((title.split(":")[0], fig))
    fig_static = figures.static_all(attribution, bundle, 0, ids=[cid])
    show.plot(fig_static, key="static_bars")
    return shown + [("Static features", fig_static)]


def baseline_words(bundle, settings) -> str:
    """What the baseline is, with what categorical and padded inputs are set to."""
    layout = None if bundle.plain else bundle.layout
    return baselines.describe(settings.baseline, layout=layout, categorical=settings.categorical)


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
