"""The one module that caches and holds session state for the app.

* ``st.cache_resource``: bundles (model + tables), keyed by the folder's path and a
  fingerprint of its files (name, size, mtime), shared by every session. Every model call
  holds the model's engine lock (``explain.ig.engine_for(model).lock``).
* ``st.cache_data`` (bounded ``max_entries`` and ``ttl``): attribution arrays and other
  derived arrays, keyed by the bundle's content hash and the settings; the bundle itself is
  passed as an unhashed ``_bundle`` argument.
* ``st.cache_data`` also holds attributions read from a finished batch store
  (``<bundle>/attributions/*/``, see ``explain.batch``), keyed by the same and a fingerprint
  of that folder, so a store that appears or changes is seen at the next rerun.
* Session state: which bundle this session uses (the startup one or its own upload, held in
  an :class:`UploadSpace` with its private temporary folder), the timings of the last
  computations, the cohort job.

Model calls and reruns: every model call holds the engine's lock, and that lock is wrapped
(:func:`interruptible`) so that acquiring it first checks whether this session asked for a
rerun or a stop. A computation therefore ends at its next chunk when the user changes a
setting, and no computation runs outside the session's own script thread. ``WORK`` counts
the computations in progress (process-wide) for tests and diagnostics.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections import OrderedDict, deque
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

try:  # the stop/rerun check of the current script run (Streamlit 1.67)
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_run_yield_check
except ImportError:  # pragma: no cover - another Streamlit layout: computations finish, reruns wait
    def get_run_yield_check():
        return None

from explain import batch
from explain import bundle as bundle_io
from explain import ig
from explain.errors import AttributionError, BundleError, ExplainError
from explain.explainer import Request, baseline_for, explain_customers
from explain.quadrature import METHODS

ROOT = Path(__file__).resolve().parent.parent
DEMO_DIR = ROOT / "bundles" / "demo"
ENV_VAR = "EXPLAIN_BUNDLE"
TTL = 3600  # seconds
SWEEP_STEPS = (4, 8, 16, 32, 64, 128, 256)
MAX_TIMINGS = 8
PREDICT_CHUNK = 1024  # customers per model call when scoring everyone
UPLOAD_PREFIX = "explain-upload-"
UPLOAD_TOO_LARGE = ("{name} is {size:,} bytes, over this app's limit of {limit:,} bytes ({limit_mb} MB) per "
                    "uploaded file. Nothing was opened. To fix: upload a smaller file (for example Parquet "
                    "instead of CSV, or fewer customers), or start the app with a larger "
                    "--server.maxUploadSize if you trust its users.")
TRIAL_CACHE_SIZE = 64  # model files (sha256) whose isolated trial load already succeeded


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


# ----------------------------------------------------------------------------- reruns and model calls


def checkpoint() -> None:
    """Raise Streamlit's rerun/stop exception if this session has asked for one.

    Streamlit checks for a new rerun only when the script writes an element; a computation
    that writes nothing calls this between its chunks. Outside a script run it does nothing.
    """
    check = get_run_yield_check()
    if check is not None:
        check()


class _InterruptibleLock:
    """A model's engine lock that checks for a pending rerun before every acquisition."""

    def __init__(self, lock):
        self._lock = lock

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        checkpoint()  # raises before the lock is taken: nothing to release
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def interruptible(model) -> None:
    """Wrap the engine lock of ``model`` (each model call takes it, chunk by chunk)."""
    try:
        engine = ig.engine_for(model)
    except AttributionError:  # a model the engine cannot explain: the pages say so
        return
    lock = getattr(engine, "lock", None)
    if lock is not None and not isinstance(lock, _InterruptibleLock):
        engine.lock = _InterruptibleLock(lock)


class Work:
    """Computations in progress in this process (cached functions that call the model).

    ``now``: running; ``peak``: most at once; ``started``/``finished``/``interrupted`` (by a
    rerun, a stop or an error): counts since :meth:`reset`; ``recent``: the last (what,
    "finished" or "interrupted") pairs.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self.now = self.peak = self.started = self.finished = self.interrupted = 0
        self.recent: deque = deque(maxlen=32)

    @contextmanager
    def computing(self, what: str):
        with self._lock:
            self.now += 1
            self.started += 1
            self.peak = max(self.peak, self.now)
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._lock:
                self.now -= 1
                self.finished += ok
                self.interrupted += not ok
                self.recent.append((what, "finished" if ok else "interrupted"))

    def reset(self) -> None:
        with self._lock:
            self.peak = self.now
            self.started = self.finished = self.interrupted = 0
            self.recent.clear()


WORK = Work()


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


# No ttl: this holds the startup bundle (one folder; a new entry only when its files change),
# shared by every session; expiring it would only reload the same model. Uploads are not
# cached here: each session holds its own (UploadSpace).
@st.cache_resource(max_entries=4, show_spinner="Opening the bundle (model and tables)...")
def _open_bundle(path: str, fingerprint: tuple):
    """(bundle, None) or (None, error text): a broken bundle is not re-read on every rerun."""
    try:
        bundle = bundle_io.load_bundle(path)
    except ExplainError as error:
        return None, str(error)
    interruptible(bundle.model)
    return bundle, None


def open_bundle(path) -> "bundle_io.Bundle":
    """The bundle at ``path``, loaded once per content; ``ExplainError`` if it is invalid."""
    path = Path(path).resolve()
    bundle, error = _open_bundle(str(path), _fingerprint(path))
    if bundle is None:
        raise ExplainError(error)
    return bundle


def active_bundle():
    """This session's bundle: its own upload if it opened one, else the startup bundle."""
    space = st.session_state.get("_upload")
    if space is not None and space.bundle is not None:
        return space.bundle
    return open_bundle(startup_path())


# ----------------------------------------------------------------------------- uploads


class UploadSpace:
    """One upload of one session: a private temporary folder and the bundle opened from it.

    The folder (``explain-upload-*`` under the system temp dir) holds the files under the
    names the app chooses (model.keras, static.csv, ...). It is removed by :meth:`close`
    (a new upload replaces this one, or the user goes back to the startup bundle), and
    otherwise when this object is garbage collected -- the session ended and Streamlit
    dropped its session state -- or when the server exits (``weakref.finalize``).
    """

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix=UPLOAD_PREFIX))
        self.bundle = None
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.folder), True)

    def close(self) -> None:
        self.bundle = None
        self._finalizer()  # removes the folder once; later calls do nothing

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive


def upload_limit_bytes() -> int:
    """The per-file upload limit: the server's ``server.maxUploadSize`` (MB)."""
    return int(st.get_option("server.maxUploadSize")) * 1024 * 1024


def check_upload_sizes(files: dict, limit: int) -> None:
    """``BundleError`` naming every file over ``limit`` bytes (before anything is written).

    The server refuses such files already; this check also holds when files reach the page
    another way (AppTest, a proxy that allows larger bodies, a changed config).
    """
    problems = [UPLOAD_TOO_LARGE.format(name=name, size=len(data), limit=limit, limit_mb=limit // 1024**2)
                for name, data in files.items() if len(data) > limit]
    if problems:
        raise BundleError("\n".join(problems), problems)


_TRIAL_PASSED: "OrderedDict[str, None]" = OrderedDict()
_TRIAL_LOCK = threading.Lock()


def load_upload_model(path: Path, display_name: str):
    """Open an uploaded model: static checks, a trial load in a memory-capped child process,
    then the load here (``safe_load.load_model_isolated``).

    A file whose trial load already succeeded (same bytes: the user fixed a table and uploads
    the same model again) skips the child process; the static checks still run.
    """
    from explain import safe_load

    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    with _TRIAL_LOCK:
        known = digest in _TRIAL_PASSED
    if known:
        return safe_load.load_model(path, display_name=display_name)
    model = safe_load.load_model_isolated(path, display_name=display_name)
    with _TRIAL_LOCK:
        _TRIAL_PASSED[digest] = None
        while len(_TRIAL_PASSED) > TRIAL_CACHE_SIZE:
            _TRIAL_PASSED.popitem(last=False)
    return model


def open_upload(files: dict) -> "bundle_io.Bundle":
    """Check and open uploaded files as this session's bundle; ``ExplainError`` if invalid.

    On success the new bundle replaces this session's previous upload (whose folder is
    removed); on failure nothing changes and the new folder is removed at once.
    """
    check_upload_sizes(files, upload_limit_bytes())
    model_name = next((str(n) for n in files if str(n).lower().endswith(".keras")), bundle_io.MODEL_FILE)
    space = UploadSpace()
    try:
        bundle = bundle_io.load_bundle_from_uploads(
            files, space.folder, loader=partial(load_upload_model, display_name=Path(model_name).name))
        interruptible(bundle.model)
    except BaseException:
        space.close()
        raise
    space.bundle = bundle
    use_upload(space)
    return bundle


def use_upload(space: UploadSpace | None) -> None:
    """Make ``space`` this session's bundle (None: back to the startup bundle); the previous
    upload's folder is removed."""
    previous = st.session_state.get("_upload")
    if previous is not None and previous is not space:
        previous.close()
    st.session_state["_upload"] = space
    st.session_state["upload_active"] = str(space.folder) if space is not None else None
    st.session_state.pop("cohort_job", None)


# ----------------------------------------------------------------------------- attributions


def _key(request: Request) -> tuple:
    return tuple(sorted(vars(request).items()))


@st.cache_data(max_entries=512, ttl=TTL, show_spinner=False)
def _attributions(_bundle, content_hash: str, ids: tuple, settings: tuple):
    with WORK.computing(f"attributions of {len(ids)} customer(s), {dict(settings).get('steps')} steps"):
        start = time.perf_counter()
        attribution = explain_customers(_bundle, list(ids), Request(**dict(settings)))
        return attribution, time.perf_counter() - start


def attributions(bundle, ids, request: Request, *, what: str = "customer"):
    """IG of ``ids`` under ``request`` (cached by content hash and settings); records the timing."""
    start = time.perf_counter()
    attribution, seconds = _attributions(bundle, bundle.content_hash, tuple(str(i) for i in ids), _key(request))
    record_timing(what, len(ids), request, seconds, time.perf_counter() - start)
    return attribution


def _stores_fingerprint(folder: Path) -> tuple:
    """What changes when a batch run finishes, is repaired or is removed under ``folder``."""
    if not folder.is_dir():
        return ()
    marks = []
    for store in sorted(d for d in folder.iterdir() if d.is_dir()):
        for sub in (store, store / batch.SUMMARY_DIR):  # one stat per file: a chunk repaired or damaged counts
            try:
                marks.extend((str(f), s.st_size, s.st_mtime_ns) for f in sorted(sub.iterdir())
                             if f.is_file() and not f.name.endswith(".part") for s in [f.stat()])
            except OSError:  # not a folder, or a file renamed while a batch run writes
                continue
    return tuple(marks)


@st.cache_data(max_entries=64, ttl=TTL, show_spinner="Reading precomputed attributions...")
def _stored(_bundle, content_hash: str, ids: tuple, settings: tuple, fingerprint: tuple):
    path = batch.find_store(_bundle, Request(**dict(settings)), ids=list(ids))
    return None if path is None else batch.open_store(path).arrays(_bundle, list(ids))


def stored_attributions(bundle, ids, request: Request):
    """The attributions of ``ids`` from a finished batch store of this bundle (same content
    hash) made with these settings, under ``<bundle>/attributions/``; None if there is none.
    ``ExplainError`` if a matching store cannot be read."""
    if not bundle.content_hash or bundle.path is None:
        return None
    folder = Path(bundle.path) / batch.STORES_DIR
    fingerprint = _stores_fingerprint(folder)
    if not fingerprint:
        return None
    return _stored(bundle, bundle.content_hash, tuple(str(i) for i in ids), _key(request), fingerprint)


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
    with WORK.computing("predictions"):
        parts = []
        for start in range(0, _bundle.n_customers, PREDICT_CHUNK):
            rows = slice(start, start + PREDICT_CHUNK)
            with ig.engine_for(_bundle.model).lock:  # a rerun can stop this between chunks
                parts.append(_bundle.predict({"static": _bundle.static[rows], "temporal": _bundle.temporal[rows]}))
        return np.concatenate(parts) if parts else np.zeros((0, len(_bundle.output_names)))  # (n, K)


def predictions(bundle, target=0) -> np.ndarray:
    """Every customer's predicted output (probability for a sigmoid/softmax model), (n,)."""
    return _predictions(bundle, bundle.content_hash)[:, target_index(bundle, target)]


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Computing the delta for each rule and step count...")
def _delta_sweep(_bundle, content_hash: str, customer: str, settings: tuple, steps: tuple) -> dict:
    request = Request(**dict(settings))
    start = time.perf_counter()
    out = {"steps": list(steps), "deltas": {}, "gap": None}
    with WORK.computing("delta sweep"):
        for method in METHODS:
            deltas = []
            for n in steps:
                checkpoint()  # 35 computations: a new setting stops the sweep between two of them
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
    with WORK.computing("path profile"):
        return ig.path_profile(_bundle.model, inputs, base, points=points,
                               target=target_index(_bundle, request.target), space=request.space)


def path_profile(bundle, customer: str, request: Request, points: int = 33) -> dict:
    return _path_profile(bundle, bundle.content_hash, str(customer), _key(request), points)


def _shape_text(layer) -> str:
    try:
        output = layer.output
    except Exception:  # a layer used at several places has no single output
        return "(several)"
    shapes = [tuple(t.shape) for t in output] if isinstance(output, (list, tuple)) else [tuple(output.shape)]
    return ", ".join(str(s).replace("None", "batch") for s in shapes)


@st.cache_data(max_entries=16, ttl=TTL, show_spinner=False)
def _model_layers(_bundle, content_hash: str) -> tuple[pd.DataFrame, dict]:
    model = _bundle.model
    rows = []
    for layer in model.layers:
        try:
            params = int(layer.count_params())
        except Exception:  # not built
            params = 0
        rows.append({"layer": str(layer.name), "type": type(layer).__name__, "output shape": _shape_text(layer),
                     "params": params})
    trainable = int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))
    total = int(sum(int(np.prod(w.shape)) for w in model.weights))
    return pd.DataFrame(rows, columns=["layer", "type", "output shape", "params"]), {
        "name": str(model.name), "total": total, "trainable": trainable, "non-trainable": total - trainable}


def model_layers(bundle) -> tuple[pd.DataFrame, dict]:
    """The model summary as a table (layer, type, output shape, params) and the totals."""
    return _model_layers(bundle, bundle.content_hash)


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
