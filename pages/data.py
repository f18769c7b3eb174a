"""Data & model: the bundle in use, a preview, and uploading another one (for this session only)."""

import json

import pandas as pd
import streamlit as st

from explain.core import periods
from ui import cache, frame, input_views, show, uploads


def demo_note(bundle) -> None:
    metrics = bundle.path / "demo_metrics.json" if bundle.path else None
    if metrics is None or not metrics.is_file():
        return
    data = json.loads(metrics.read_text())
    drivers = data.get("planted_drivers", {})
    names = dict(zip(bundle.static_features + bundle.temporal_features, bundle.static_labels + bundle.temporal_labels))
    shown = {kind: ", ".join(names.get(c, c) for c in drivers.get(kind, [])) for kind in ("static", "temporal")}
    st.info(show.md(f"Demo model: held-out AUC {data.get('auc_test')} (the rule that generated "
                    f"the data reaches {data.get('auc_test_of_true_score')}); churn rate {data.get('churn_rate')}. "
                    f"Planted drivers: {shown['static']} (static); {shown['temporal']} "
                    f"({periods.words(bundle).adjective}). A good explanation should rank these first."))


def bundle_overview(bundle) -> None:
    st.subheader("Bundle in use")
    source = "this session's upload" if uploads.is_active() else "the startup bundle"
    st.markdown(f"{bundle.n_customers} customers · {bundle.n_static} static features · {bundle.n_periods} periods "
                f"× {bundle.n_temporal} {periods.words(bundle).adjective} features · outputs "
                f"{show.md(', '.join(bundle.output_names))} "
                f"· from {source}")
    # the folder name only: the full path on the server is not a visitor's business (it stays in the log)
    folder = bundle.path.name if bundle.path is not None else "(in memory)"
    st.code(f"{folder}\ncontent hash {bundle.content_hash[:16]}", language=None)
    demo_note(bundle)
    for note in bundle.notes:
        st.caption(show.md(note))
    left, right = st.columns(2)
    with left:
        st.markdown("**Static table** (first 20 customers)")
        static = pd.DataFrame(bundle.static[:20], columns=bundle.static_labels)
        static.insert(0, "id", bundle.ids[:20])
        if bundle.labels is not None:
            static[str(bundle.label_name)] = bundle.labels[:20]
        st.dataframe(static, hide_index=True)
    with right:
        st.markdown(f"**{periods.words(bundle).adjective.capitalize()} table** (customer {show.md(bundle.ids[0])})")
        st.dataframe(pd.DataFrame(bundle.temporal[0], index=bundle.periods, columns=bundle.temporal_labels))
    input_views.overview(bundle)
    st.markdown("**Model summary**")
    show.model_summary(*cache.model_layers(bundle))


def data_page():
    bundle, _ = frame.page(required=False)
    st.title("Data & model")
    if uploads.is_active():
        st.button("Back to the startup bundle", icon=":material/undo:", on_click=uploads.back_to_startup)
    st.subheader("Upload a bundle")
    st.caption("The files stay in a temporary folder of this session only and are stored under names the app "
               "chooses. Every problem found is listed; nothing is opened until all are fixed.")
    if uploads.uploader_ui():
        uploads.open_uploaded_files()
    uploads.result_ui()
    if bundle is not None:
        bundle_overview(bundle)
    else:
        st.subheader("The startup bundle could not be opened")
        if frame.problem() is not None:
            show.error(frame.problem())


with show.guard():
    data_page()
