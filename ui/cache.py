"""The dashboard's one caching module: every ``st.cache_data`` and ``st.cache_resource`` of the app, and the
bundle a session uses. The computations are in ``explain/``; this module only caches and times them.

* ``st.cache_resource``: bundles (model + tables), keyed by the folder's path and a fingerprint of its files
  (name, size, mtime), shared by every session. Every model call holds the model's engine lock
  (``explain.core.ig.engine_for(model).lock``). A bundle opened here warms its model's XLA path with
  ``EXPLAIN_XLA=1`` (``explain.core.engine.warm_up_xla``); a model of long histories gets it after the first page
  (``warm_background``, ``explain.core.engine.xla_wanted``).
* ``st.cache_data`` (bounded ``max_entries`` and ``ttl``): attribution arrays and other derived arrays, keyed
  by the bundle's content hash and the settings; the bundle itself is passed as an unhashed ``_bundle``
  argument (``explainer``, ``diagnostics``, ``cohort``, ``whatif``, ``faithfulness``).
* Attributions read from a finished batch store (``explain.batch.stores.stores_of``: where a bundle's stores
  live), keyed by the same and the stores' marks (``BundleStores.mark``), so a store that appears or changes
  is seen at the next rerun.
* The What drives churn page's result, once in memory (:class:`DriversView`: ``explain.drivers``' result and
  the figures drawn from it, one entry per store, window and earlier store; the summary file next to the store
  is the other copy, ``explain.batch.summary``).
* Figures: a page's figures per (bundle content, page, customer, ``Settings.key()``) and the customer box's
  ranking per (bundle content, output), kept ready to send (``ui.speed``: compact figure dicts).
* Session state: ``timings`` (the last computations, for the Diagnostics page).

A computation ends at its next chunk when the user changes a setting (``ui.runtime.should_stop``). ``WORK``
counts the computations in progress (process-wide) for tests and diagnostics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from explain.analysis import cohort, counterfactual, diagnostics, faithfulness, whatif
from explain.analysis.explainer import explain_customers
from explain.analysis.groups import of as feature_groups_of
from explain.batch import drivers as batch_drivers
from explain.batch.store import Store
from explain.batch.stores import BundleStores, stores_of
from explain.bundle import load as bundle_io
from explain.core import xla
from explain.core.engine import warm_up_xla, xla_wanted
from explain.core.errors import ExplainError
from explain.core.settings import Settings, resolve_target
from explain.modelfile.savedmodel import FOLDER as SAVEDMODEL_DIR
from ui import pool, runtime, speed, startup, stored, stores, uploads

LOG = logging.getLogger("explain.app")

TTL = 3600  # seconds
MAX_TIMINGS = 8


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


def _fingerprint(path: Path) -> tuple:
    """The bundle folder's files (and its SavedModel's, under savedmodel/) by name, size and time: a new entry of
    the cache below when one changes."""
    if not path.is_dir():
        return ()
    files = [f for f in path.iterdir() if f.is_file()]
    if (path / SAVEDMODEL_DIR).is_dir():
        files += [f for f in (path / SAVEDMODEL_DIR).rglob("*") if f.is_file()]
    return tuple(sorted((str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns) for f in files))


# No ttl: this holds the startup bundle (one folder; a new entry only when its files change),
# shared by every session; expiring it would only reload the same model. Uploads are not
# cached here: each session holds its own (ui.uploads.UploadSpace).
@st.cache_resource(max_entries=4, show_spinner="Opening the bundle (model and tables)...")
def _open_bundle(path: str, fingerprint: tuple):
    """(bundle, None) or (None, error text): a broken bundle is not re-read on every rerun."""
    try:
        bundle = bundle_io.load_bundle(path, loader=startup.model_loader(),  # --trust-code: here only
                                       limits=startup.limits())
    except ExplainError as error:
        # the full paths stay here, in the server log; the page shows them relative (ui.show.plain)
        LOG.error("the bundle %s could not be opened: %s", path, error)
        return None, str(error)
    if xla.chosen():  # EXPLAIN_XLA=1, the owner's choice: small requests compiled from the start, of any length
        warm_up_xla(bundle.model)
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
    uploaded = uploads.current_bundle()
    return uploaded if uploaded is not None else open_bundle(startup.bundle_path())


# ----------------------------------------------------------------------------- attributions


# One process-wide cache: every session reads what any session computed, and its per-key lock makes two
# sessions asking for the same customer at once compute it once (the second waits, then reads it). A miss
# waits for a slot of the one fair pool of model computations (ui.pool: first come, first served; a
# visitor who switched again leaves the line without a model call).
@st.cache_data(max_entries=512, ttl=TTL, show_spinner=False)
def _attributions(_bundle, content_hash: str, ids: tuple, key: tuple):
    with pool.POOL.slot(), WORK.computing(f"attributions of {len(ids)} customer(s), {dict(key).get('steps')} steps"):
        start = time.perf_counter()
        attribution = explain_customers(_bundle, list(ids), Settings.from_key(key), should_stop=runtime.should_stop)
        return attribution, time.perf_counter() - start


@st.cache_data(max_entries=512, ttl=TTL, show_spinner=False)
def _one_stored(_bundle, content_hash: str, cid: str, key: tuple, marks: tuple, _found: BundleStores):
    settings = Settings.from_key(key)
    store = _found.exact(settings, ids=[cid])
    if store is None:
        return None
    try:
        return stored.attribution(_bundle, cid, settings, store)
    except ExplainError as error:  # a damaged store: the page computes instead (the Cohort page says so)
        LOG.warning("the batch store %s could not be read for %s: %s", store.path, cid, error)
        return None


def one_stored(bundle, cid: str, settings: Settings):
    """``cid``'s attribution under ``settings`` read from a finished batch store of this bundle made with exactly
    these settings (``ui.stored``: no model call), or None (no such store, or one a store cannot answer)."""
    listed = _listed(bundle) if stored.servable(bundle, settings) else None
    if listed is None:
        return None
    found, marks = listed
    return _one_stored(bundle, bundle.content_hash, str(cid), settings.key(), marks, found)


def _listed(bundle) -> tuple[BundleStores, tuple] | None:
    """(the bundle's stores, the marks of their folders), the stores those of the listing kept for these marks; None
    for a bundle without a content hash or with no store files at all."""
    if not bundle.content_hash:
        return None
    found = stores_of(bundle)
    marks = found.mark()
    if not any(files for _, files in marks):
        return None
    return BundleStores(bundle, found.dirs, _kept_stores(found.dirs, marks)), marks


# a resource: the stores keep their summaries once read (which chunk holds a customer), so that a switch to another
# customer of a store of 1,000,000 reads one chunk, not every summary file; listed again when a file changes. The
# stores only: a session's bundle is not kept after the session ends
@st.cache_resource(max_entries=4, ttl=TTL, show_spinner=False)
def _kept_stores(dirs: tuple, marks: tuple) -> tuple:
    return BundleStores(None, list(dirs)).every


def attributions(bundle, ids, settings: Settings, *, what: str | None = "customer"):
    """IG of ``ids`` under ``settings`` (cached by content hash and settings); records the timing as ``what`` (None:
    not recorded, a page's own result read again). One customer is read from a finished batch store of exactly these
    settings when there is one (:func:`one_stored`)."""
    start = time.perf_counter()
    ids = tuple(str(i) for i in ids)
    found = one_stored(bundle, ids[0], settings) if len(ids) == 1 else None
    if found is not None:
        seconds = time.perf_counter() - start
        if what is not None:
            record_timing(f"{what} (read from a batch store)", 1, settings, seconds, seconds)
        return found
    attribution, seconds = _attributions(bundle, bundle.content_hash, ids, settings.key())
    if what is not None:
        record_timing(what, len(ids), settings, seconds, time.perf_counter() - start)
    return attribution


def default_customer(bundle) -> str:
    """The customer a session opens without a link: the highest score (first output)."""
    return str(bundle.ids[int(np.argmax(predictions(bundle)))])


def warm_up(bundle) -> None:
    """Outside any session: :func:`warm_first`, then :func:`warm_background` (``ui/launch.py`` calls the two
    apart, the second once the first visitor's page has answered)."""
    warm_first(bundle)
    warm_background(bundle)


def warm_first(bundle) -> None:
    """What the first visitor's page needs (``ui/launch.py``, while the browser loads): every customer's score and
    the default view's attribution (:func:`default_customer`, default settings) into the caches the sessions share;
    this also traces the model's forward and gradient functions. A model with a prediction per period: its page
    explains the period the visitor chooses (``ui.periods_out``), so its first visitor computes it."""
    from explain.bundle.heads import viewed

    customer = default_customer(bundle)
    settings = Settings().for_bundle(bundle)
    if viewed(bundle, settings)[0] is bundle and one_stored(bundle, customer, settings) is None:
        _attributions(bundle, bundle.content_hash, (customer,), settings.key())  # what the page computes (no store)


def warm_xla(bundle) -> None:
    """A model of long histories (``explain.core.engine.xla_wanted``): its one-customer calls compiled with XLA, here
    (read back from TensorFlow's cache after ``explain check``; a compiled bucket is not compiled again)."""
    if xla_wanted(bundle.model):
        warm_up_xla(bundle.model, background=False)


def warm_background(bundle, *, separate: bool = False) -> None:
    """The What drives churn page's summary of the bundle's most exact store of every customer (the default
    baseline, any steps) into its cache, or, for a small bundle without one, that store started in the background
    with adaptive steps (``ui.stores.start``; ``separate``: as a process of its own at the lowest priority); then the
    data's ranges and medians the what-if card reads (``whatif.bundle_medians``)."""
    warm_xla(bundle)  # done already where the launcher did it after the first heatmap: nothing again
    settings = Settings().for_bundle(bundle)
    found = stores_of(bundle)
    store = found.best(settings)  # the page's store: the most exact of the default baseline's
    if store is None:
        stores.start(bundle, stores.background(settings), separate=separate)  # adaptive steps, as the page would
    else:
        drivers(bundle, store, None, stores.default_against(found, store))
    # what the Customer page's what-if card of a high-risk customer reads first: the data's ranges and the bundle's
    # medians (20,000 x 365 x 24: about 5 s, then shared by every session)
    try:
        whatif.bundle_medians(bundle, observed(bundle))
    except Exception:  # noqa: BLE001 - ahead of time only: the card reports its own problem when it is shown
        LOG.warning("the what-if card's ranges and medians were not computed ahead", exc_info=True)


@st.cache_data(max_entries=64, ttl=TTL, show_spinner="Reading precomputed attributions...")
def _stored(_bundle, content_hash: str, ids: tuple, key: tuple, marks: tuple, _found: BundleStores):
    store = _found.exact(Settings.from_key(key), ids=list(ids))  # the stores the marks are of
    return None if store is None else store.arrays(_bundle, list(ids))


def stored_attributions(bundle, ids, settings: Settings):
    """The attributions of ``ids`` from the newest finished batch store of this bundle (same content hash)
    made with exactly these settings (``stores_of(bundle).exact``); None if there is none. ``ExplainError``
    if a matching store cannot be read. Per rerun only the store folders' files are looked at (their marks)."""
    listed = _listed(bundle)
    if listed is None:
        return None
    found, marks = listed
    return _stored(bundle, bundle.content_hash, tuple(str(i) for i in ids), settings.key(), marks, found)


class DriversView:
    """``explain.drivers``' result of one store (window, earlier store) and the figures drawn from it, kept
    together: one entry of the cache, shared as it is by every session (nothing changes the result)."""

    def __init__(self, result):
        self.result = result
        self._figures: dict = {}

    def figure(self, name: str, build, *args):
        """``build(result, *args)`` (``explain.plots.drivers``) as a compact figure dict ready to send
        (``ui.speed``), made once per ``name`` and ``args``."""
        key = (name, args)
        found = self._figures.get(key)
        if found is None:
            found = self._figures[key] = speed.Spec(speed.spec(build(self.result, *args)))
        return found


# a resource, not data: the result (tens of MB for 100,000 customers) is shared as it is, never copied
# or pickled on a rerun
@st.cache_resource(max_entries=8, ttl=TTL, show_spinner="Summarising every customer of the store...")
def _drivers(_bundle, content_hash: str, store: str, window, against: str | None, marks: tuple, _stores: tuple):
    with WORK.computing("drivers across customers"):
        return DriversView(batch_drivers.drivers(_bundle, _stores[0], against=_stores[1], window=window))


def drivers(bundle, store: Store, window: int | None = None, against: Store | None = None) -> DriversView:
    """``explain.drivers`` of a finished store (and an earlier one) with its figures, cached by the stores'
    paths and finishing times."""
    marks = tuple(s.completed for s in (store, against) if s is not None)
    return _drivers(bundle, bundle.content_hash, str(store.path), window,
                    None if against is None else str(against.path), marks, (store, against))


def record_timing(what: str, customers: int, settings: Settings, compute_s: float, this_run_s: float) -> None:
    timings = st.session_state.setdefault("timings", [])
    timings.insert(0, {
        "what": what, "customers": customers, "baseline": str(settings.baseline), "steps": str(settings.steps),
        "method": settings.method, "computed in (s)": round(compute_s, 4),
        "this rerun (s)": round(this_run_s, 4), "from cache": this_run_s < 0.5 * compute_s,
    })
    del timings[MAX_TIMINGS:]


def timings() -> pd.DataFrame:
    """This session's last computations (newest first) as a table."""
    return pd.DataFrame(st.session_state.get("timings", []))


def cohort_mean(bundle, label_value: str, settings: Settings) -> dict:
    """Mean attributions of up to ``cohort.COHORT_MEAN_LIMIT`` customers whose label is ``label_value``."""
    ids = cohort.cohort_ids(bundle, label_value)
    return cohort.mean_of(attributions(bundle, ids, settings, what=f"cohort mean ({len(ids)})"), bundle, ids)


# ----------------------------------------------------------------------------- other derived arrays


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Scoring every customer...")
def _predictions(_bundle, content_hash: str) -> np.ndarray:
    # a big bundle's scores are kept beside its array cache: a later server start reads them (issue 26), and
    # `explain check` keeps them too
    with WORK.computing("predictions"):
        return cohort.kept_scores(_bundle, should_stop=runtime.should_stop)[0]  # (n, K)


def predictions(bundle, target=None) -> np.ndarray:
    """Every customer's predicted output (probability for a sigmoid/softmax model), (n,)."""
    return _predictions(bundle, bundle.content_hash)[:, resolve_target(target, len(bundle.output_names),
                                                                       bundle.output_names, bundle.target)]


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Computing the delta for each rule and step count...")
def _delta_sweep(_bundle, content_hash: str, customer: str, key: tuple, steps: tuple) -> dict:
    with WORK.computing("delta sweep"):  # 35 computations: a new setting stops the sweep between two of them
        return diagnostics.delta_sweep(_bundle, customer, Settings.from_key(key), steps,
                                       should_stop=runtime.should_stop)


def delta_sweep(bundle, customer: str, settings: Settings, steps=diagnostics.SWEEP_STEPS) -> dict:
    """delta for each integration rule at each step count, for one customer."""
    start = time.perf_counter()
    out = _delta_sweep(bundle, bundle.content_hash, str(customer), settings.key(), tuple(steps))
    record_timing("delta sweep (5 rules x 7 step counts)", 1, settings, out["seconds"], time.perf_counter() - start)
    return out


@st.cache_data(max_entries=32, ttl=TTL, show_spinner=False)
def _path_profile(_bundle, content_hash: str, customer: str, key: tuple, points: int) -> dict:
    with WORK.computing("path profile"):
        return diagnostics.path_profile(_bundle, customer, Settings.from_key(key), points)


def path_profile(bundle, customer: str, settings: Settings, points: int = diagnostics.PATH_POINTS) -> dict:
    return _path_profile(bundle, bundle.content_hash, str(customer), settings.key(), points)


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Sweeping the prediction along the path...")
def _integration_points(_bundle, content_hash: str, customer: str, key: tuple, alphas: int):
    with WORK.computing("integration points"):
        start = time.perf_counter()
        found = diagnostics.integration_points(_bundle, customer, Settings.from_key(key), alphas,
                                               should_stop=runtime.should_stop)
        return found, time.perf_counter() - start


def integration_points(bundle, customer: str, settings: Settings, alphas: int = diagnostics.SWEEP_ALPHAS):
    """f along the path to ``customer`` and the points the engine integrates at (cached); records the timing."""
    start = time.perf_counter()
    found, seconds = _integration_points(bundle, bundle.content_hash, str(customer), settings.key(), int(alphas))
    record_timing(f"integration points ({alphas} forward alphas)", 1, settings, seconds, time.perf_counter() - start)
    return found


@st.cache_data(max_entries=16, ttl=TTL, show_spinner=False)
def _model_layers(_bundle, content_hash: str) -> tuple[pd.DataFrame, dict]:
    return diagnostics.model_layers(_bundle.model)


def model_layers(bundle) -> tuple[pd.DataFrame, dict]:
    """The model summary as a table (layer, type, output shape, params) and the totals."""
    return _model_layers(bundle, bundle.content_hash)


def feature_groups(bundle) -> tuple:
    """The bundle's feature groups (declared, else found from a seeded sample of its data), once per bundle content
    (``explain.analysis.groups.of`` keeps them): what the Customer page's words say as one reason."""
    return feature_groups_of(bundle)


# ----------------------------------------------------------------------------- what-if


# a resource, not data: read only, shared as it is by every session (a copy per call lost what it keeps: the bundle's
# medians, 2-3 s on 20,000 x 365 x 24)
@st.cache_resource(max_entries=16, ttl=TTL, show_spinner=False)
def _observed(_bundle, content_hash: str):
    return whatif.Observed.of(_bundle)


def observed(bundle) -> "whatif.Observed":
    """The ranges and category sets observed in the bundle's data (what a what-if edit may use)."""
    return _observed(bundle, bundle.content_hash)


def whatif_context(bundle, customer: str, settings: Settings) -> "whatif.Context":
    """What the edits of ``customer`` refer to (the baseline is the one the Customer page shows)."""
    return whatif.context(bundle, customer, settings, observed=observed(bundle),
                          baseline=diagnostics.shown_baseline(bundle, customer, settings))


@st.cache_data(max_entries=64, ttl=TTL, show_spinner="Explaining the original and the edited customer...")
def _whatif_outcome(_bundle, content_hash: str, customer: str, key: tuple, text: str):
    with WORK.computing("what-if"):
        ctx = whatif_context(_bundle, customer, Settings.from_key(key))
        return whatif.evaluate(ctx, whatif.parse_scenario(text, _bundle, ctx.observed), should_stop=runtime.should_stop)


def whatif_outcome(bundle, customer: str, settings: Settings, text: str) -> "whatif.Outcome":
    """The original and the edited customer explained together (cached by the scenario's URL form)."""
    return _whatif_outcome(bundle, bundle.content_hash, str(customer), settings.key(), text)


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Searching for a small edit that changes the outcome...")
def _whatif_search(_bundle, content_hash: str, customer: str, key: tuple, threshold: float, locked: tuple,
                   max_edits: int, time_limit: float):
    with WORK.computing("what-if search"):
        settings = Settings.from_key(key)
        ctx = whatif_context(_bundle, customer, settings)
        change = settings.baseline is not None and settings.baseline.change
        first = None if change else attributions(_bundle, [customer], settings, what=None)  # the page's, cached
        return counterfactual.search(ctx, threshold=threshold, locked=locked, max_edits=max_edits,
                                     time_limit=time_limit, should_stop=runtime.should_stop, first=first)


def whatif_search(bundle, customer: str, settings: Settings, *, threshold: float, locked=(), max_edits: int = 3,
                  time_limit: float = 10.0) -> "counterfactual.SearchResult":
    """The counterfactual search for ``customer`` (cached by its settings)."""
    return _whatif_search(bundle, bundle.content_hash, str(customer), settings.key(), float(threshold),
                          tuple(sorted(locked)), int(max_edits), float(time_limit))


# ----------------------------------------------------------------------------- faithfulness checks


@st.cache_data(max_entries=8, ttl=TTL, show_spinner="Running the faithfulness checks...")
def _faithfulness(_bundle, content_hash: str, key: tuple, customers: int):
    with WORK.computing(f"faithfulness checks of {customers} customers"):
        return faithfulness.run(_bundle, Settings.from_key(key), customers=customers, should_stop=runtime.should_stop)


def ask_for_faithfulness() -> None:
    """The button's callback: run the checks at the next run of the page (a flag in session state,
    so that a rerun of the frame before the page does not lose the click)."""
    st.session_state["faithfulness_asked"] = True


def faithfulness_checks(bundle, settings: Settings, customers: int):
    """The faithfulness checks of ``customers`` sampled customers under ``settings``, or None.

    Computed only once asked for (:func:`ask_for_faithfulness`) for these settings; then read
    from the cache on this session's reruns until a setting changes.
    """
    key = (bundle.content_hash, settings.key(), customers)
    if st.session_state.pop("faithfulness_asked", False):
        st.session_state["faithfulness_for"] = key
    if st.session_state.get("faithfulness_for") != key:
        return None
    start = time.perf_counter()
    result = _faithfulness(bundle, bundle.content_hash, settings.key(), customers)
    record_timing("faithfulness checks", customers, settings, result.seconds["total"], time.perf_counter() - start)
    return result


# ----------------------------------------------------------------------------- figures


# 512: the Customer page keeps two entries a customer (its heatmaps, then the rest), each about half of what one was
@st.cache_resource(max_entries=512, ttl=TTL, show_spinner=False)
def _figures(content_hash: str, page: str, customer: str, key: tuple, _build):
    built = tuple(_build())
    return built, tuple(speed.Spec(speed.spec(f)) for f in built)


def figures(bundle, page: str, customer: str, settings, build) -> tuple[tuple, tuple]:
    """(figures, what to plot) of ``page`` for ``customer`` under ``settings``: ``build()`` returns
    the figures, ``go.Figure`` or figure dicts (``explain.plots.figures.*_spec``); it runs once per
    (bundle content, page, customer, settings) while cached. Plot the second tuple's items with
    ``ui.show.plot``; the first are what ``build()`` returned (downloads: ``html.html_report``
    takes figures and dicts alike). With the speed off both are ``go.Figure`` (dicts made into
    figures: what Plotly makes, as before)."""
    if not speed.enabled():
        built = tuple(go.Figure(f) if isinstance(f, dict) else f for f in build())
        return built, built
    return _figures(bundle.content_hash, page, str(customer), settings.key(), build)


@st.cache_resource(max_entries=16, ttl=TTL, show_spinner=False)
def _ranking(content_hash: str, output: str, top_n: int, _ids, _scores):
    ids = [str(i) for i in _ids.tolist()]
    scores = np.asarray(_scores, np.float64)
    label = {i: f"{i}  ·  {output} {s:.2f}" for i, s in zip(ids, scores.tolist())}
    top = [ids[k] for k in np.argsort(-scores, kind="stable")[:top_n]]
    return ids, top, label


def ranking(bundle, scores, top_n: int, target=None) -> tuple[list, list, dict]:
    """(every id, the ``top_n`` highest scores' ids, {id: "ID · churn 0.42"}) of ``bundle``, from
    the ``scores`` of its output ``target`` (None: the bundle's target); built once per bundle
    content and target."""
    output = bundle.output_names[resolve_target(target, len(bundle.output_names), bundle.output_names, bundle.target)]
    return _ranking(bundle.content_hash, output, int(top_n), bundle.ids, scores)
