"""Sidebar pickers (``*_ui()`` functions that return widget values) and the URL sync.

Every setting lives in the URL: on a session's first run the query parameters are read into
session state (each one checked; a bad one is dropped with a warning), and every run writes
the current values back. Query parameters:

=========  ======================================================================
customer   customer id (``C00042``)
baseline   ``zero``, ``mean``, ``median``, ``customer:ID``, ``cohort:LABEL``, ``flat``,
           ``blur:WIDTH``, ``sample:K``
steps      ``8`` ... ``512`` or ``auto``
method     ``gausslegendre``, ``trapezoid``, ``left``, ``right``, ``middle``
target     output name (``churn``)
space      ``output`` or ``logit``
path       ``joint`` or ``per-input``
compare    Compare page: the second customer's id, or ``cohort:LABEL`` (a cohort's mean)
sample     Cohort page: ``200``, ``500``, ``1000`` or ``all``
=========  ======================================================================

The page itself is the URL path (``/``, ``/compare``, ``/cohort``, ``/diagnostics``, ``/data``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from explain import baselines
from explain.errors import ExplainError
from explain.explainer import Request
from explain.ig import PATHS, SPACES
from explain.quadrature import METHODS
from ui import show, state

STEP_OPTIONS = ("8", "16", "32", "64", "128", "256", "512", "auto")
DEFAULT_STEPS = "64"
SAMPLE_OPTIONS = ("200", "500", "1000", "all")
BLUR_WIDTHS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
SAMPLE_KS = (4, 8, 16, 32, 64)
TOP_RISK = 25
BASELINE_LABELS = {
    "zero": "zero (all features 0)", "mean": "mean customer", "median": "median customer",
    "customer": "another customer", "cohort": "a cohort's mean (by label)",
    "flat": "own history held flat", "blur": "own history blurred", "sample": "K random customers (expected gradients)",
}
PATH_LABELS = {"joint": "joint (both inputs move together)", "per-input": "per input (one moves, the other stays)"}
SPACE_LABELS = {"output": "output (probability)", "logit": "logit (log-odds)"}


@dataclass(frozen=True)
class Choice:
    """What the sidebar chose: the customer and the IG request."""

    customer: str
    request: Request


def label_values(bundle) -> list[str]:
    """The label values as text ('0', '1'), the non-positive one (customers who stayed) first."""
    if bundle.labels is None:
        return []
    values = sorted({baselines._label_text(v) for v in bundle.labels})
    positive = baselines._label_text(bundle.positive_label) if bundle.positive_label is not None else None
    return sorted(values, key=lambda v: (v == positive, v))


def positive_value(bundle) -> str | None:
    values = label_values(bundle)
    if not values:
        return None
    if bundle.positive_label is not None:
        return baselines._label_text(bundle.positive_label)
    return values[-1]


# ----------------------------------------------------------------------------- URL -> state


def _read_params(bundle) -> list[str]:
    """Put the URL's settings (and defaults) into session state; return the warnings."""
    params = st.query_params.to_dict()
    ss = st.session_state
    warnings = []
    ids = set(bundle.ids.tolist())
    scores = state.predictions(bundle)

    def bad(name, value, expected):
        warnings.append(f"Ignored the link's {name}={value!r}: expected {expected}.")

    customer = params.get("customer")
    if customer is not None and customer not in ids:
        bad("customer", customer, "a customer id of this bundle")
        customer = None
    ss["customer"] = customer or str(bundle.ids[int(np.argmax(scores))])

    labels = label_values(bundle)
    ss["baseline_kind"], ss["baseline_customer"] = "mean", str(bundle.ids[0])
    ss["baseline_cohort"] = labels[0] if labels else None
    ss["blur_width"], ss["sample_k"] = baselines.DEFAULT_BLUR_WIDTH, baselines.DEFAULT_SAMPLES
    spec = params.get("baseline")
    if spec is not None:
        try:
            kind, arg = baselines.parse_spec(spec)
            if kind == "customer" and arg not in ids:
                raise ExplainError("unknown customer")
            if kind == "cohort" and arg not in labels:
                raise ExplainError("unknown label")
            if kind == "blur":
                width = float(arg) if arg else baselines.DEFAULT_BLUR_WIDTH
                if width not in BLUR_WIDTHS:
                    raise ExplainError("width")
                ss["blur_width"] = width
            if kind == "sample":
                if int(arg) not in SAMPLE_KS:
                    raise ExplainError("k")
                ss["sample_k"] = int(arg)
            ss["baseline_kind"] = kind
            if kind == "customer":
                ss["baseline_customer"] = arg
            if kind == "cohort":
                ss["baseline_cohort"] = arg
        except (ExplainError, ValueError):
            bad("baseline", spec, "zero, mean, median, customer:ID, cohort:LABEL, flat, blur:WIDTH "
                f"(one of {', '.join(map(str, BLUR_WIDTHS))}) or sample:K (one of {', '.join(map(str, SAMPLE_KS))})")

    for name, options, default in (
        ("steps", STEP_OPTIONS, DEFAULT_STEPS), ("method", METHODS, METHODS[0]),
        ("target", tuple(bundle.output_names), bundle.output_names[0]),
        ("space", SPACES, SPACES[0]), ("path", PATHS, PATHS[0]), ("sample", SAMPLE_OPTIONS, SAMPLE_OPTIONS[0]),
    ):
        value = params.get(name)
        if value is not None and value not in options:
            bad(name, value, "one of " + ", ".join(options))
            value = None
        ss["_sample" if name == "sample" else name] = value or default

    compare = params.get("compare")
    if compare is not None and compare not in compare_options(bundle):
        bad("compare", compare, "a customer id or cohort:LABEL")
        compare = None
    ss["_compare"] = compare or default_compare(bundle)
    return warnings


def init_state(bundle) -> None:
    """Read the URL on the session's first run (and again when the bundle changes)."""
    if st.session_state.get("_state_for") != bundle.content_hash:
        st.session_state["param_warnings"] = _read_params(bundle)
        st.session_state["_state_for"] = bundle.content_hash


def write_params(values: dict) -> None:
    """Write ``values`` into the URL, touching only the keys that changed."""
    current = st.query_params.to_dict()
    for key, value in values.items():
        if value is None:
            if key in current:
                del st.query_params[key]
        elif current.get(key) != str(value):
            st.query_params[key] = str(value)


def current_params() -> dict:
    ss = st.session_state
    return {"customer": ss.get("customer"), "baseline": baseline_spec(), "steps": ss.get("steps"),
            "method": ss.get("method"), "target": ss.get("target"), "space": ss.get("space"),
            "path": ss.get("path"), "compare": ss.get("_compare"), "sample": ss.get("_sample")}


# ----------------------------------------------------------------------------- widgets


def _copy(source: str, target: str) -> None:
    value = st.session_state.get(source)
    if value is not None:
        st.session_state[target] = value
    st.session_state[source] = None


def _random_churner(bundle) -> None:
    rng = st.session_state.setdefault("_rng", np.random.default_rng())
    positive = positive_value(bundle)
    if positive is not None:
        rows = np.flatnonzero(baselines.cohort_mask(bundle.labels, positive))
    else:  # no labels: a customer the model scores above 0.5
        rows = np.flatnonzero(state.predictions(bundle) > 0.5)
    rows = rows if rows.size else np.arange(bundle.n_customers)
    st.session_state["customer"] = str(bundle.ids[int(rng.choice(rows))])


def customer_ui(bundle) -> str:
    """Customer: search by id, or pick one of the highest-risk customers, or a random churner."""
    scores = state.predictions(bundle)
    score_of = dict(zip(bundle.ids.tolist(), scores.tolist()))
    name = bundle.output_names[0]
    st.selectbox("Customer (type to search by id)", bundle.ids.tolist(), key="customer",
                 format_func=lambda i: f"{i}  ·  {name} {score_of.get(i, float('nan')):.2f}")
    top = [str(i) for i in bundle.ids[np.argsort(-scores, kind="stable")[:TOP_RISK]]]
    st.selectbox(f"…or one of the {TOP_RISK} highest-risk customers", top, index=None, key="_top_pick",
                 placeholder="highest scores first", format_func=lambda i: f"{i}  ·  {name} {score_of[i]:.2f}",
                 on_change=_copy, args=("_top_pick", "customer"))
    st.button("…or a random churner" if bundle.labels is not None else "…or a random high-risk customer",
              key="_random", on_click=_random_churner, args=(bundle,), width="stretch", icon=":material/casino:")
    return st.session_state["customer"]


def baseline_spec() -> str:
    ss = st.session_state
    kind = ss.get("baseline_kind", "mean")
    if kind == "customer":
        return f"customer:{ss.get('baseline_customer')}"
    if kind == "cohort":
        return f"cohort:{ss.get('baseline_cohort')}"
    if kind == "blur":
        return f"blur:{ss.get('blur_width', baselines.DEFAULT_BLUR_WIDTH):g}"
    if kind == "sample":
        return f"sample:{ss.get('sample_k', baselines.DEFAULT_SAMPLES)}"
    return kind


def baseline_ui(bundle) -> str:
    """Baseline: every kind; the customer, cohort, blur width or K when the kind needs one."""
    ss = st.session_state
    kinds = [k for k in baselines.KINDS if k != "cohort" or bundle.labels is not None]
    st.selectbox("Baseline (what the customer is compared with)", kinds, key="baseline_kind",
                 format_func=BASELINE_LABELS.get)
    kind = ss["baseline_kind"]
    if kind == "customer":
        ss.setdefault("baseline_customer", str(bundle.ids[0]))
        st.selectbox("Baseline customer", bundle.ids.tolist(), key="baseline_customer")
    elif kind == "cohort":
        values = label_values(bundle)
        counts = {v: int(baselines.cohort_mask(bundle.labels, v).sum()) for v in values}
        positive = positive_value(bundle)
        ss.setdefault("baseline_cohort", values[0])
        st.selectbox(f"Cohort: customers whose {bundle.label_name} is", values, key="baseline_cohort",
                     format_func=lambda v: f"{v} ({counts[v]} customers{', positive' if v == positive else ''})")
    elif kind == "blur":
        ss.setdefault("blur_width", baselines.DEFAULT_BLUR_WIDTH)
        st.select_slider("Blur width (periods)", BLUR_WIDTHS, key="blur_width")
    elif kind == "sample":
        ss.setdefault("sample_k", baselines.DEFAULT_SAMPLES)
        st.select_slider("K sampled customers", SAMPLE_KS, key="sample_k")
    return baseline_spec()


def steps_ui() -> str:
    st.select_slider("Steps (gradient evaluations; more = more exact)", STEP_OPTIONS, key="steps",
                     help="'auto' doubles the steps from 16 until the attributions add up (delta within 0.5%).")
    return st.session_state["steps"]


def advanced_ui(bundle) -> dict:
    """Integration rule, target and space, path."""
    with st.expander("More IG settings"):
        st.selectbox("Integration rule", METHODS, key="method")
        st.selectbox("Target (output explained)", bundle.output_names, key="target")
        st.radio("Space", SPACES, key="space", format_func=SPACE_LABELS.get, horizontal=True)
        st.radio("Path", PATHS, key="path", format_func=PATH_LABELS.get)
    ss = st.session_state
    return {"method": ss["method"], "target": ss["target"], "space": ss["space"], "path": ss["path"]}


def sidebar_ui(bundle) -> Choice:
    """All shared pickers, in the sidebar; also writes the settings into the URL."""
    init_state(bundle)
    with st.sidebar:
        for warning in st.session_state.get("param_warnings", []):
            st.warning(show.md(warning))
        customer = customer_ui(bundle)
        st.divider()
        spec = baseline_ui(bundle)
        steps = steps_ui()
        extra = advanced_ui(bundle)
    request = Request(baseline=spec, steps="auto" if steps == "auto" else int(steps), **extra)
    write_params(current_params())
    return Choice(customer=customer, request=request)


# ----------------------------------------------------------------------------- page-level pickers


def compare_options(bundle) -> list[str]:
    return [f"cohort:{v}" for v in label_values(bundle)] + bundle.ids.tolist()


def default_compare(bundle) -> str:
    values = label_values(bundle)
    return f"cohort:{values[0]}" if values else str(bundle.ids[min(1, bundle.n_customers - 1)])


def _persist(widget_key: str, key: str) -> None:
    st.session_state[key] = st.session_state[widget_key]


def compare_ui(bundle) -> str:
    """The second customer (or a cohort's mean) of the Compare page; kept across pages and in the URL."""
    ss = st.session_state
    options = compare_options(bundle)
    if ss.get("_compare") not in options:
        ss["_compare"] = default_compare(bundle)
    ss["w_compare"] = ss["_compare"]
    scores = dict(zip(bundle.ids.tolist(), state.predictions(bundle).tolist()))

    def label(option):
        if option.startswith("cohort:"):
            return f"Mean of the cohort {bundle.label_name} = {option[7:]}"
        return f"{option}  ·  {bundle.output_names[0]} {scores.get(option, float('nan')):.2f}"

    st.selectbox("Compare with (a customer, or the mean of a cohort)", options, key="w_compare",
                 format_func=label, on_change=_persist, args=("w_compare", "_compare"))
    write_params({"compare": ss["_compare"]})
    return ss["_compare"]


def sample_ui() -> str:
    """How many customers the Cohort page explains."""
    ss = st.session_state
    ss.setdefault("_sample", SAMPLE_OPTIONS[0])
    ss["w_sample"] = ss["_sample"]
    st.segmented_control("Customers to explain (a seeded random sample, or all)", SAMPLE_OPTIONS, key="w_sample",
                         on_change=_persist, args=("w_sample", "_sample"))
    if ss.get("w_sample") is None:  # a segmented control can be unselected
        ss["_sample"] = ss["_sample"] or SAMPLE_OPTIONS[0]
    write_params({"sample": ss["_sample"]})
    return ss["_sample"]


# ----------------------------------------------------------------------------- the frame


def set_frame(bundle, choice: Choice | None, problem: Exception | None) -> None:
    st.session_state["_frame"] = (bundle, choice, problem)


def _ensure_frame_ran() -> None:
    """Rerun through app.py when Streamlit ran this page without it.

    With a ``pages/`` folder next to app.py, Streamlit starts in its legacy multipage mode
    until some run calls ``st.navigation``: the first run after a server start that opens a
    deep link (``/compare?...``) -- and every AppTest run -- executes the page file alone,
    without the frame and its sidebar. Switching the flag and rerunning runs app.py, which
    routes to this same page.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def frame(required: bool = True):
    """(bundle, choice) for a page; shows the bundle's problem and stops when there is none.

    ``required=False`` (the Data & model page) returns (None, None) instead of stopping.
    """
    _ensure_frame_ran()
    bundle, choice, problem = st.session_state.get("_frame", (None, None, None))
    if not required:
        return bundle, choice
    if bundle is not None and choice is None:
        st.stop()  # the sidebar has shown its error
    if bundle is None:
        st.title("No bundle open")
        if problem is not None:
            show.error(problem)
        st.info("Open the **Data & model** page to upload a bundle, or start the app with "
                "`streamlit run app.py -- --bundle DIR`.")
        st.page_link("pages/data.py", label="Data & model", icon=":material/upload_file:")
        st.stop()
    return bundle, choice
