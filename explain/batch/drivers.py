"""``explain.drivers``: what drives the prediction across every customer of a batch store.

    d = explain.drivers(bundle)                                   # the store found under <bundle>/attributions/
    d = explain.drivers(bundle, "runs/june")                      # a given store
    d = explain.drivers(bundle, "runs/june", against="runs/may")  # and which drivers changed since May
    d.sentence, d.ranking, d.segments, d.time_profiles, d.drift

Reads the store one chunk at a time (``Store.rows``) and hands the chunks to
``explain.analysis.drivers.compute``, which keeps one row of feature summaries per customer.
"""

from __future__ import annotations

import os
from pathlib import Path

from explain.analysis.drivers import SEED, Drivers, compute
from explain.batch.store import STORES_DIR, Store, find_store, open_store
from explain.core.errors import ExplainError
from explain.core.settings import Settings

NO_STORE = ("No finished batch store of every customer of this bundle (same model and data) is under {folder}. "
            "Compute one with `python -m explain batch --bundle {bundle} --out {folder}/NAME` (a few minutes per "
            "100,000 customers of the demo's size on a laptop), or pass the store's folder.")
NO_FOLDER = ("This bundle was not loaded from a folder, so there is no <bundle>/{stores} to look in: pass the "
             "store's folder (what `python -m explain batch` wrote).")


def drivers(bundle, store=None, *, against=None, window: int | None = None, settings: Settings | None = None,
            seed: int = SEED) -> Drivers:
    """What drives the prediction across the customers of a finished batch store.

    ``bundle``: a ``Bundle`` or its folder (its features, periods and labels give the store its
    meaning). ``store``: the store's folder or a ``Store``; default: the most recently finished
    store of every customer of this bundle under ``<bundle>/attributions/`` (made with
    ``settings`` when given, else with any). ``against``: an earlier store of the same layout
    (periods compared by position, so last month's store works): adds ``drift``. ``window``:
    temporal features summarised over their last ``window`` periods (default: the whole history).
    Raises ``ExplainError`` saying which command computes a store when there is none.
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
    return compute(bundle, current.rows(bundle), window=window, seed=seed, source=source,
                   against=None if earlier is None else earlier.rows(bundle, same_periods=False),
                   labels=source["same_bundle"])


def _open(store) -> Store:
    return (store if isinstance(store, Store) else open_store(store)).require_complete()


def _store(bundle, store, settings: Settings | None) -> Store:
    if store is not None:
        return _open(store)
    if getattr(bundle, "path", None) is None:
        raise ExplainError(NO_FOLDER.format(stores=STORES_DIR))
    folder = Path(bundle.path) / STORES_DIR
    found = find_store(bundle, settings, [folder]) if folder.is_dir() else None
    if found is None:
        raise ExplainError(NO_STORE.format(folder=folder, bundle=bundle.path))
    return open_store(found)

