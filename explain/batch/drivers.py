"""``explain.drivers``: what drives the prediction across every customer of a batch store.

    d = explain.drivers(bundle)                                   # the bundle's most exact store (stores_of().best)
    d = explain.drivers(bundle, "runs/june")                      # a given store
    d = explain.drivers(bundle, "runs/june", against="runs/may")  # and which drivers changed since May
    d.sentence, d.ranking, d.segments, d.time_profiles, d.drift
    s = explain.batch.drivers.over_runs(bundle, ["runs/may", "runs/june", "runs/july"])  # drivers over runs
    m = explain.batch.drivers.movers(bundle)      # the biggest movers, from the store of the previous baseline

Reads the store one chunk at a time (``Store.rows``) and hands the chunks to
``explain.analysis.drivers.compute``, which keeps one row of feature summaries per customer.

The result is computed once per store: it is written next to the store (``explain.batch.summary``:
``<store>.drivers-<key>.npz``, keyed by what it depends on), and the next call with the same key reads it
(a fraction of a second for 100,000 customers) instead of the store. ``cache=False`` neither reads nor
writes it. ``drivers_of``: the same summary of attributions held in memory, without a store.

``over_runs``: each run's shares (``explain.analysis.over_runs``), each store read once a chunk at a time into its
bootstrap groups, kept next to it (``<store>.shares-<key>.npz``). ``movers``: the customers whose risk rose most,
from a store whose baseline is the customers at an earlier time (``previous``; ``explain.analysis.movers``), read a
chunk at a time and kept next to it (``<store>.movers-<key>.json``).
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Sequence

from explain.analysis.drivers import BOOTSTRAP_GROUPS, SEED, Drivers, Layout, compute, define_groups
from explain.analysis.movers import RISE, TOP, Movers
from explain.analysis.movers import movers as find_movers
from explain.analysis.over_runs import RunSums, Series, run_sums, series
from explain.batch.format import StoreError, chunk_paths
from explain.batch.store import Store, _read_table, open_store, rows_of
from explain.batch.stores import STORES_DIR, in_run_order, is_change, stores_of
from explain.batch.summary import (
    read_json,
    read_summary,
    read_sums,
    side_path,
    summary_path,
    write_json_beside,
    write_summary,
    write_sums,
)
from explain.core.errors import ExplainError
from explain.core.settings import Baseline, Settings

NO_STORE = ("No finished batch store of every customer of this bundle (same model and data) is under {folder}. "
            "Compute one with `python -m explain batch --bundle {bundle} --out {folder}/NAME` (a few minutes per "
            "100,000 customers of the demo's size on a laptop), or pass the store's folder.")
NO_CHANGE_STORE = ("No finished store of every customer of this bundle was computed with the baseline previous (each "
                   "customer one period earlier), so there is no change to list movers from. Compute one with "
                   "`python -m explain batch --bundle {bundle} --baseline previous --out {folder}/previous`.")
NOT_CHANGE = ("The store {store} was computed with the baseline {baseline}, not with the customers at an earlier time: "
              "its scores do not say how a customer's risk changed. Pass a store computed with --baseline previous "
              "(`python -m explain batch --bundle DIR --baseline previous --out DIR/attributions/previous`).")
OLD_STORE = ("The store {store} is of format {version} (the long format), which holds no model input's cells as "
             "arrays: recompute it with `python -m explain batch` into a new --out folder.")
NO_FOLDER = ("This bundle was not loaded from a folder, so there is no <bundle>/{stores} to look in: pass the "
             "store's folder (what `python -m explain batch` wrote).")


def _loaded(bundle):
    if isinstance(bundle, (str, os.PathLike)):
        from explain.bundle.load import load_bundle

        return load_bundle(bundle)
    return bundle


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
    bundle = _loaded(bundle)
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


# ----------------------------------------------------------------------------- drivers over runs


def over_runs(bundle, stores=None, *, window: int | None = None, groups=None, seed: int = SEED,
              cache: bool = True) -> Series:
    """Drivers over runs (``explain.analysis.over_runs.series``) of ``stores`` (folders or ``Store``s, 2 or more
    finished stores of this bundle's layout: one per run; default: the bundle's most exact store of the default
    settings and every other finished store of its settings and layout in the bundle's store folders,
    ``BundleStores.runs``), in run order (``explain.batch.stores.in_run_order``: by the period each store's data
    runs to, else by when it was finished). ``groups``: ((name, (column, ...)),
    ...) (a ``Drivers``' groups: ``[(g.name, g.columns) for g in d.groups]``); default: those declared in
    bundle.json. Each store is read once, a chunk at a time, into its bootstrap groups (kept next to it unless
    ``cache=False``)."""
    bundle = _loaded(bundle)
    layout = Layout.of(bundle)
    if stores is None:
        found = stores_of(bundle)
        stores = [s for _, s in found.runs(_store(bundle, None, None))]
    runs = [RunSums(label, str(s.path), s.completed, s.n_customers, _run_sums(bundle, s, layout, window, seed, cache))
            for label, s in in_run_order([_open(s) for s in stores])]
    if groups is None:
        groups = define_groups(layout.features, layout.groups)[0]
    return series(layout.features, runs, groups, seed=seed)


def _run_sums(bundle, store: Store, layout: Layout, window, seed: int, cache: bool):
    path = side_path(store, "shares", {"window": window, "seed": seed, "groups": BOOTSTRAP_GROUPS,
                                       "features": [f.name for f in layout.features]}, "npz")
    found = read_sums(path) if cache else None
    if found is not None and found.sums.shape[1] == len(layout.features):
        return found
    sums = run_sums(store.rows(bundle, same_periods=False), layout, customers=store.n_customers, window=window,
                    seed=seed, store=str(store.path))
    if cache:
        write_sums(path, sums)
    return sums


# ----------------------------------------------------------------------------- the biggest movers


def movers(bundle, store=None, *, n: int = TOP, threshold: float = RISE, cache: bool = True) -> Movers:
    """The ``n`` customers whose risk rose most since an earlier period, with their first reasons
    (``explain.analysis.movers``), from ``store`` (a store computed with the baseline ``previous``,
    ``previous:K`` or ``bundle:DIR``; default: the bundle's, one period back first:
    ``BundleStores.changes``). Read a chunk at a time; kept next to the store unless ``cache=False``."""
    bundle = _loaded(bundle)
    chosen = _change_store(bundle, store)
    baseline = str(chosen.settings.get("baseline"))
    layout = _store_layout(chosen, bundle)
    path = side_path(chosen, "movers", {"n": n, "threshold": threshold, "labels": layout.inputs}, "json")
    found = read_json(path) if cache else None
    if found is not None:
        try:
            return Movers.from_dict(found)
        except (KeyError, TypeError, ValueError):
            pass
    quantity = "score (log-odds)" if chosen.settings.get("space") == "logit" else "risk"
    result = find_movers(_mover_chunks(chosen), layout, n=n, threshold=threshold, since=_since(baseline, layout),
                         store=str(chosen.path), baseline=baseline, quantity=quantity)
    if cache:
        write_json_beside(path, result.to_dict(), "movers")
    return result


def _change_store(bundle, store) -> Store:
    """``store`` opened and checked to hold a change (its baseline the customers at an earlier time), or the
    bundle's first such store (``ExplainError`` with the command that computes one when there is none)."""
    if store is None:
        found = stores_of(bundle)
        changes = found.changes()
        if not changes:
            folder = found.dirs[0] if found.dirs else "DIR/attributions"
            raise ExplainError(NO_CHANGE_STORE.format(bundle=getattr(bundle, "path", None) or "BUNDLE", folder=folder))
        return changes[0]
    chosen = _open(store)
    if not is_change(chosen.settings.get("baseline")):
        raise ExplainError(NOT_CHANGE.format(store=chosen.path, baseline=chosen.settings.get("baseline")))
    if not chosen.compact:
        raise ExplainError(OLD_STORE.format(store=chosen.path, version=chosen.manifest.get("format_version")))
    return chosen


def _store_layout(store: Store, bundle) -> Layout:
    """The store's inputs (its manifest's: columns and periods as the store holds them) named by ``bundle``'s
    display names."""
    names = {f.name: f.label for f in Layout.of(bundle).features}
    return Layout(tuple((spec["key"], spec["role"], tuple(spec["features"]),
                         tuple(names.get(c, c) for c in spec["features"]),
                         None if spec["periods"] is None else tuple(spec["periods"])) for spec in store.inputs))


def _since(baseline: str, layout: Layout) -> str:
    """The earlier time in words: the period K back from the store's last period ("2025-11"), "K periods
    earlier" when the history is shorter, "the earlier snapshot" for bundle:DIR."""
    spec = Baseline.parse(baseline)
    if spec.kind != "previous":
        return "the earlier snapshot"
    k = spec.periods_back
    periods = next((p for _, role, _, _, p in layout.inputs if role == "temporal"), None) or ()
    return str(periods[-1 - k]) if k < len(periods) else f"{k} period(s) earlier"


def _mover_chunks(store: Store):
    """The store's chunks as the movers read them: ids, prediction, baseline_prediction, attributions by input."""
    for chunk in store.done_chunks():
        ids, arrays = store.chunk_arrays(chunk)
        summary = _read_table(chunk_paths(store.path, chunk)[1], ["customer_id", "prediction", "baseline_prediction"])
        if summary["customer_id"].to_pylist() != ids.tolist():
            raise StoreError(f"The batch output {store.path}: chunk {chunk}'s summary file lists other customers than "
                             "its part file. Rerun the `python -m explain batch` command that made it.")
        yield SimpleNamespace(ids=ids, prediction=summary["prediction"].to_numpy(),
                              baseline_prediction=summary["baseline_prediction"].to_numpy(), attributions=arrays)


# ----------------------------------------------------------------------------- what the drivers command adds


def extras(bundle, d: Drivers, *, over: Sequence | None = None, over_all: bool = False,
           movers_store=None) -> tuple[Series | None, Movers | None]:
    """(drivers over runs, the biggest movers) that ``python -m explain drivers`` adds to ``d`` (the store's
    drivers): over the stores ``over`` (2 or more), or with ``over_all`` over ``d``'s store and every other
    finished store of its settings and layout in the bundle's store folders (``BundleStores.runs``), with
    ``d``'s window and groups; the movers of ``movers_store``, or of ``d``'s store itself when it was computed
    with a baseline of the customers at an earlier time (``previous``). None where not asked for."""
    series_ = None
    if over_all or over:
        stores = [s for _, s in stores_of(bundle).runs(d.source["store"])] if over_all else list(over)
        series_ = over_runs(bundle, stores, window=d.window, groups=[(g.name, g.columns) for g in d.groups])
    if movers_store is None and is_change((d.source.get("settings") or {}).get("baseline")):
        movers_store = d.source["store"]
    return series_, None if movers_store is None else movers(bundle, movers_store)
