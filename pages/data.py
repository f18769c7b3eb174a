"""Data & model: the bundle in use, a preview, and uploading another one (for this session only)."""

import json

import pandas as pd
import streamlit as st

from ui import pickers, show, state


def _request_upload() -> None:
    st.session_state["_upload_requested"] = True


def upload_ui() -> bool:
    """The uploader and its button; True once after the button was pressed.

    The button's callback sets a flag rather than the button returning True: the flag
    survives a rerun that starts before the page body runs (see ``pickers._ensure_frame_ran``).
    """
    files = st.file_uploader("Bundle files: model.keras, static and temporal tables (.csv or .parquet), "
                             "optional bundle.json", accept_multiple_files=True,
                             type=["keras", "csv", "parquet", "pq", "json"], key="upload_files")
    st.button("Check and open", type="primary", disabled=not files, icon=":material/fact_check:",
              on_click=_request_upload)
    return bool(st.session_state.pop("_upload_requested", False)) and bool(files)


def open_upload() -> None:
    """Check the files (size, names, model in a separate process, tables) and switch to them if valid."""
    files = {f.name: f.getvalue() for f in st.session_state.get("upload_files") or []}
    try:
        with st.spinner("Checking the files and opening the model in a separate process..."):
            bundle = state.open_upload(files)
    except Exception as exc:  # shown as a list of problems; the bundle in use does not change
        st.session_state["upload_result"] = ("error", exc)
    else:
        st.session_state["upload_result"] = ("ok", f"Opened the uploaded bundle: {bundle.n_customers} customers, "
                                                   f"{bundle.n_static} static features, {bundle.n_periods} periods x "
                                                   f"{bundle.n_temporal} monthly features.")
    st.rerun()  # the sidebar and every page now use the new bundle


def back_to_startup() -> None:
    state.use_upload(None)
    st.session_state.pop("upload_result", None)


def show_upload_result() -> None:
    kind, payload = st.session_state.get("upload_result", (None, None))
    if kind == "error":
        st.subheader("The upload was not opened")
        show.error(payload)
        st.caption("Fix the files and upload them again; the bundle in use has not changed.")
    elif kind == "ok":
        st.success(show.md(payload))


def bundle_overview(bundle) -> None:
    st.subheader("Bundle in use")
    source = "this session's upload" if st.session_state.get("upload_active") else "the startup bundle"
    st.markdown(f"{bundle.n_customers} customers · {bundle.n_static} static features · {bundle.n_periods} periods "
                f"× {bundle.n_temporal} monthly features · outputs {show.md(', '.join(bundle.output_names))} "
                f"· from {source}")
    st.code(f"{bundle.path}\ncontent hash {bundle.content_hash[:16]}", language=None)
    metrics = bundle.path / "demo_metrics.json" if bundle.path else None
    if metrics is not None and metrics.is_file():
        data = json.loads(metrics.read_text())
        drivers = data.get("planted_drivers", {})
        st.info(show.md(f"Demo model: held-out AUC {data.get('auc_test')} (the rule that generated "
                        f"the data reaches {data.get('auc_test_of_true_score')}); churn rate {data.get('churn_rate')}. Planted drivers: "
                        f"{', '.join(drivers.get('static', []))} (static); {', '.join(drivers.get('temporal', []))} "
                        "(monthly). A good explanation should rank these first."))
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
        st.markdown(f"**Monthly table** (customer {show.md(bundle.ids[0])})")
        st.dataframe(pd.DataFrame(bundle.temporal[0], index=bundle.periods, columns=bundle.temporal_labels))
    st.markdown("**Model summary**")
    show.model_summary(*state.model_layers(bundle))


def data_page():
    bundle, _ = pickers.frame(required=False)
    st.title("Data & model")
    if st.session_state.get("upload_active"):
        st.button("Back to the startup bundle", icon=":material/undo:", on_click=back_to_startup)
    st.subheader("Upload a bundle")
    st.caption("The files stay in a temporary folder of this session only and are stored under names the app "
               "chooses. Every problem found is listed; nothing is opened until all are fixed.")
    if upload_ui():
        open_upload()
    show_upload_result()
    if bundle is not None:
        bundle_overview(bundle)
    else:
        _, _, problem = st.session_state.get("_frame", (None, None, None))
        st.subheader("The startup bundle could not be opened")
        if problem is not None:
            show.error(problem)


with show.guard():
    data_page()
