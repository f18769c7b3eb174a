"""``explain.drivers``: what drives the prediction across every customer of a batch store.

    d = explain.drivers(bundle)                                   # the bundle's most exact store (stores_of().best)
    d = explain.drivers(bundle, "runs/june")                      # a given store
    d = explain.drivers(bundle, "runs/june", against="runs/may")  # and which drivers changed since May
    d.sentence, d.ranking, d.segments, d.time_profiles, d.drift

Reads the store one chunk at a time (``Store.rows``) and hands the chunks to
``explain.analysis.drivers.compute``, which keeps one row of feature summaries per customer.

The result is computed once per store: it is written next to the store (``explain.batch.summary``:
``<store>.drivers-<key>.npz``, keyed by what it depends on), and the next call with the same key reads it
(a fraction of a second for 100,000 customers) instead of the store. ``cache=False`` neither reads nor
writes it. ``drivers_of``: the same summary of attributions held in memory, without a store.
"""

from __future__ import annotations

import os
from typing import Sequence

from explain.analysis.drivers import SEED, Drivers, compute
from explain.batch.store import Store, open_store, rows_of
from explain.batch.stores import STORES_DIR, stores_of
from explain.batch.summary import read_summary, summary_path, write_summary
from explain.core.errors import ExplainError
from explain.core.settings import Settings

NO_STORE = ("No finished batch store of every customer of this bundle (same model and data) is under {folder}. "
            "Compute one with `python -m explain batch --bundle {bundle} --out {folder}/NAME` (a few minutes per "
            "100,000 customers of the demo's size on a laptop), or pass the store's folder.")
NO_FOLDER = ("This bundle was not loaded from a folder, so there is no <bundle>/{stores} to look in: pass the "
             "store's folder (what `python -m explain batch` wrote).")


def drivers(bundle, store=None, *, against=None, window: int | None = None, settings: Settings | None = None,
            seed: int = SEED, cache: bool = True) -> Drivers:
    """What drives the prediction across the customers of a finished batch store.

    ``bundle``: a ``Bundle`` or its folder (its features, periods and labels give the store its
    meaning). ``store``: the store's folder or a ``Store``; default: the most exact finished store
    of every customer of this bundle where ``explain.batch.stores.store_dirs`` says stores live
    (``<bundle>/attributions/``, ``$EXPLAIN_STORES``): adaptive steps over fixed, more steps over
    fewer, fewer customers outside the tolerance, then the newest (``stores_of(bundle).best``), among the stores
    of ``settings``' baseline, target, space and path (default: the default settings').
    ``against``: an earlier store of the same layout (periods compared by position, so last month's
    store works): adds ``drift``. ``window``: temporal features summarised over their last
    ``window`` periods (default: the whole history).
    Raises ``ExplainError`` saying which command computes a store when there is none. ``cache``:
    read and write the summary file next to the store (see the module text).
    """
    if isinstance(bundle, (str, os.PathLike)):
        from explain.bundle.load import load_bundle

        bundle = load_bundle(bundle)
    current = _store(bundle, store, settings)
    earlier = None if against is None else _open(against)
    source = {"store": str(current.path), "settings": current.settings,
              "completed": str(current.manifest.get("completed", "")),
              "same_bundle": current.bundle_hash == getattr(bundle, "content_hash", None)}
    if earlier is not None:
        source["against"] = str(earlier.path)
        source["against_completed"] = str(earlier.manifest.get("completed", ""))
    path = summary_path(bundle, current, earlier, window, seed) if cache else None
    found = None if path is None else read_summary(path)
    if found is not None:
        return found
    result = compute(bundle, current.rows(bundle), window=window, seed=seed, source=source,
                     against=None if earlier is None else earlier.rows(bundle, same_periods=False),
                     labels=source["same_bundle"])
    if path is not None:
        write_summary(path, result)
    return result


def _open(store) -> Store:
    return (store if isinstance(store, Store) else open_store(store)).require_complete()


def _store(bundle, store, settings: Settings | None) -> Store:
    """``store`` opened, or the bundle's best finished store (``BundleStores.best``: the same baseline,
    target, space and path as ``settings``, the most exact) where ``explain.batch.stores.store_dirs``
    says stores live."""
    if store is not None:
        return _open(store)
    found = stores_of(bundle)
    if not found.dirs:
        raise ExplainError(NO_FOLDER.format(stores=STORES_DIR))
    best = found.best(settings)
    if best is None:
        raise ExplainError(NO_STORE.format(folder=found.dirs[0], bundle=getattr(bundle, "path", None) or "BUNDLE"))
    return best


def drivers_of(attribution, bundle, ids: Sequence[str] | None = None, **options) -> Drivers:
    """:func:`compute` on attributions held in memory (``explain_customers``' result) instead of a store."""
    settings = getattr(attribution, "settings", None)
    if settings is not None and getattr(settings, "baseline", None) is not None:
        options.setdefault("baseline", str(settings.baseline))
    return compute(bundle, rows_of(attribution, bundle, ids), **options)
