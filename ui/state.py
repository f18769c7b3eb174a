"""The one module that caches and holds session state for the app.

* ``st.cache_resource``: bundles (model + tables), keyed by the folder's path and a
  fingerprint of its files (name, size, mtime), shared by every session. Every model call
  holds the model's engine lock (``explain.ig.engine_for(model).lock``).
* ``st.cache_data`` (bounded ``max_entries`` and ``ttl``): attribution arrays and other
  derived arrays, keyed by the bundle's content hash and the settings; the bundle itself is
  passed as an unhashed ``_bundle`` argument.
* Session state: which bundle this session uses (the startup one or its own upload), the
  timings of the last computations, the cohort job.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import streamlit as st

from explain import bundle as bundle_io
from explain import ig
from explain.errors import ExplainError
from explain.explainer import Request, baseline_for, explain_customers
from explain.quadrature import METHODS

ROOT = Path(__file__).resolve().parent.parent
DEMO_DIR = ROOT / "bundles" / "demo"
ENV_VAR = "EXPLAIN_BUNDLE"
TTL = 3600  # seconds
SWEEP_STEPS = (4, 8, 16, 32, 64, 128, 256)
MAX_TIMINGS = 8


# ----------------------------------------------------------------------------- TF kernel cache


def keep_kernel_cache() -> None:
    """Stop Streamlit from clearing Keras/TF state after every script run.

    Streamlit's script runner calls ``keras.backend.clear_session()`` after each run (its
    ``_clean_problem_modules``), which empties TF's kernel cache: the first gradient call of
    every rerun then re-optimises the compiled IG function, 0.2-0.3 s on 2 cores, more than
    the whole computation. This app builds no model in its scripts (models live in
    ``st.cache_resource``), so the step only costs time. Everything else that function does
    (closing matplotlib figures) is kept. If Streamlit renames the function, nothing happens.
    """
    try:
        from streamlit.runtime.scriptrunner import script_runner
    except ImportError:  # pragma: no cover - another Streamlit layout
        return
    current = getattr(script_runner, "_clean_problem_modules", None)
    if current is None or getattr(current, "keeps_kernel_cache", False):
        return

    def clean_problem_modules() -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            try:
                pyplot.close("all")
            except Exception:  # noqa: BLE001 - as Streamlit does
                pass

    clean_problem_modules.keeps_kernel_cache = True
    script_runner._clean_problem_modules = clean_problem_modules


keep_kernel_cache()


# ----------------------------------------------------------------------------- bundles


def startup_path() -> Path:
    """``streamlit run app.py -- --bundle DIR``, else ``$EXPLAIN_BUNDLE``, else the demo bundle."""
    args = sys.argv[1:]
    for k, arg in enumerate(args):
        if arg == "--bundle" and k + 1 < len(args):
            return Path(args[k + 1]).expanduser()
        if arg.startswith("--bundle="):
            return Path(arg.split("=", 1)[1]).expanduser()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    return DEMO_DIR


def _fingerprint(path: Path) -> tuple:
    if not path.is_dir():
        return ()
    return tuple(sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in path.iterdir() if f.is_file()))


@st.cache_resource(max_entries=8, show_spinner="Opening the bundle (model and tables)...")
def _open_bundle(path: str, fingerprint: tuple):
    """(bundle, None) or (None, error text): a broken bundle is not re-read on every rerun."""
    try:
        return bundle_io.load_bundle(path), None
    except ExplainError as error:
        return None, str(error)


def open_bundle(path) -> "bundle_io.Bundle":
    """The bundle at ``path``, loaded once per content; ``ExplainError`` if it is invalid."""
    path = Path(path).resolve()
    bundle, error = _open_bundle(str(path), _fingerprint(path))
    if bundle is None:
        raise ExplainError(error)
    return bundle


def active_path() -> Path:
    """This session's bundle folder: its own upload if it chose one, else the startup bundle."""
    upload = st.session_state.get("upload_active")
    return Path(upload) if upload else startup_path()


def active_bundle():
    return open_bundle(active_path())


def upload_dir() -> Path:
    """A temporary folder of this session only, for its uploaded bundle."""
    if "upload_dir" not in st.session_state:
        st.session_state["upload_dir"] = tempfile.mkdtemp(prefix="explain-upload-")
    return Path(st.session_state["upload_dir"])


def use_upload(path: Path | None) -> None:
    """Make ``path`` this session's bundle (None: back to the startup bundle)."""
    st.session_state["upload_active"] = str(path) if path else None
    st.session_state.pop("cohort_job", None)


# ----------------------------------------------------------------------------- attributions


def _key(request: Request) -> tuple:
    return tuple(sorted(vars(request).items()))


@st.cache_data(max_entries=512, ttl=TTL, show_spinner=False)
def _attributions(_bundle, content_hash: str, ids: tuple, settings: tuple):
    start = time.perf_counter()
    attribution = explain_customers(_bundle, list(ids), Request(**dict(settings)))
    return attribution, time.perf_counter() - start


def attributions(bundle, ids, request: Request, *, what: str = "customer"):
    """IG of ``ids`` under ``request`` (cached by content hash and settings); records the timing."""
    start = time.perf_counter()
    attribution, seconds = _attributions(bundle, bundle.content_hash, tuple(str(i) for i in ids), _key(request))
    record_timing(what, len(ids), request, seconds, time.perf_counter() - start)
    return attribution


def record_timing(what: str, customers: int, request: Request, compute_s: float, this_run_s: float) -> None:
    timings = st.session_state.setdefault("timings", [])
    timings.insert(0, {
        "what": what, "customers": customers, "baseline": request.baseline, "steps": str(request.steps),
        "method": request.method, "computed in (s)": round(compute_s, 4),
        "this rerun (s)": round(this_run_s, 4), "from cache": this_run_s < 0.5 * compute_s,
    })
    del timings[MAX_TIMINGS:]


def target_index(bundle, target) -> int:
    if isinstance(target, str) and target in bundle.output_names:
        return bundle.output_names.index(target)
    return int(target)


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Scoring every customer...")
def _predictions(_bundle, content_hash: str) -> np.ndarray:
    with ig.engine_for(_bundle.model).lock:
        return _bundle.predict()  # (n, K) in the model's output space


def predictions(bundle, target=0) -> np.ndarray:
    """Every customer's predicted output (probability for a sigmoid/softmax model), (n,)."""
    return _predictions(bundle, bundle.content_hash)[:, target_index(bundle, target)]


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Computing the delta for each rule and step count...")
def _delta_sweep(_bundle, content_hash: str, customer: str, settings: tuple, steps: tuple) -> dict:
    request = Request(**dict(settings))
    start = time.perf_counter()
    out = {"steps": list(steps), "deltas": {}, "gap": None}
    for method in METHODS:
        deltas = []
        for n in steps:
            attribution = explain_customers(_bundle, [customer], Request(**{**dict(settings), "steps": n, "method": method}))
            deltas.append(float(attribution.delta[0]))
            out["gap"] = float(attribution.prediction[0] - attribution.baseline_prediction[0])
        out["deltas"][method] = deltas
    out["space"] = request.space
    out["seconds"] = time.perf_counter() - start
    return out


def delta_sweep(bundle, customer: str, request: Request, steps=SWEEP_STEPS) -> dict:
    """|delta| for each integration rule at each step count, for one customer."""
    start = time.perf_counter()
    out = _delta_sweep(bundle, bundle.content_hash, str(customer), _key(request), tuple(steps))
    record_timing("delta sweep (5 rules x 7 step counts)", 1, request, out["seconds"], time.perf_counter() - start)
    return out


@st.cache_data(max_entries=32, ttl=TTL, show_spinner=False)
def _path_profile(_bundle, content_hash: str, customer: str, settings: tuple, points: int) -> dict:
    request = Request(**dict(settings))
    inputs = _bundle.inputs_for([customer])
    base = baseline_for(_bundle, inputs, request.baseline, request.seed)
    return ig.path_profile(_bundle.model, inputs, base, points=points,
                           target=target_index(_bundle, request.target), space=request.space)


def path_profile(bundle, customer: str, request: Request, points: int = 33) -> dict:
    return _path_profile(bundle, bundle.content_hash, str(customer), _key(request), points)


@st.cache_data(max_entries=16, ttl=TTL, show_spinner=False)
def _model_summary(_bundle, content_hash: str) -> str:
    lines: list[str] = []
    with ig.engine_for(_bundle.model).lock:
        _bundle.model.summary(print_fn=lambda line, *args, **kwargs: lines.append(str(line)), line_length=100)
    return "\n".join(lines)


def model_summary(bundle) -> str:
    """The text of ``model.summary()``."""
    return _model_summary(bundle, bundle.content_hash)


@st.cache_data(max_entries=16, ttl=TTL, show_spinner=False)
def _baseline_arrays(_bundle, content_hash: str, customer: str, spec: str, seed: int) -> dict:
    inputs = _bundle.inputs_for([customer])
    base = baseline_for(_bundle, inputs, spec, seed)
    # a distribution of K baselines (sample:K) is shown as its mean
    static = np.asarray(base["static"], np.float64)
    temporal = np.asarray(base["temporal"], np.float64)
    if temporal.ndim == 4:
        static, temporal = static.mean(axis=1), temporal.mean(axis=1)
    return {"static": static[0], "temporal": temporal[0]}


def baseline_arrays(bundle, customer: str, request: Request) -> dict:
    """The baseline this customer is compared with: static (S,), temporal (T, F) (mean if sampled)."""
    return _baseline_arrays(bundle, bundle.content_hash, str(customer), request.baseline, request.seed)


def cohort_mean(bundle, label_value: str, request: Request, limit: int = 100) -> dict:
    """Mean attributions of up to ``limit`` customers (seeded sample) whose label is ``label_value``."""
    from explain.baselines import cohort_mask

    if bundle.labels is None:
        raise ExplainError("This bundle has no label column, so there is no cohort to compare with.")
    rows = np.flatnonzero(cohort_mask(bundle.labels, label_value))
    if rows.size == 0:
        raise ExplainError(f"No customer has the label {label_value!r}.")
    if rows.size > limit:
        rows = np.sort(np.random.default_rng(0).choice(rows, size=limit, replace=False))
    ids = [str(i) for i in bundle.ids[rows]]
    attribution = attributions(bundle, ids, request, what=f"cohort mean ({len(ids)})")
    return {"static": attribution.static.mean(axis=0), "temporal": attribution.temporal.mean(axis=0),
            "values": bundle.inputs_for(ids)["temporal"].mean(axis=0), "n": len(ids),
            "prediction": float(attribution.prediction.mean())}
