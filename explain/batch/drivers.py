"""``explain.drivers``: what drives the prediction across every customer of a batch store.

    d = explain.drivers(bundle)                                   # the bundle's most exact store (best_store)
    d = explain.drivers(bundle, "runs/june")                      # a given store
    d = explain.drivers(bundle, "runs/june", against="runs/may")  # and which drivers changed since May
    d.sentence, d.ranking, d.segments, d.time_profiles, d.drift

Reads the store one chunk at a time (``Store.rows``) and hands the chunks to
``explain.analysis.drivers.compute``, which keeps one row of feature summaries per customer.

The result is computed once per store: it is written next to the store, as
``<store>.drivers-<key>.npz`` (numbers and text only, read without pickle), keyed by what it depends
on (the store's manifest and finishing time, the earlier store's, the window, the seed, the
bundle's content hash and this file's version); the next call with the same key reads it (a
fraction of a second for 100,000 customers) instead of the store. A folder that cannot be
written keeps no summary (the result is computed each time); a damaged or foreign file is
recomputed and replaced; the ``KEEP_SUMMARIES`` most recently written summaries of a store are kept,
older ones removed. ``cache=False`` neither reads nor writes it.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from explain.analysis.drivers import PARTS_VERSION, SEED, Drivers, compute, from_parts, to_parts
from explain.batch.store import STORES_DIR, Store, best_store, open_store, store_dirs
from explain.core.errors import ExplainError
from explain.core.files import write_atomic
from explain.core.settings import Settings

NO_STORE = ("No finished batch store of every customer of this bundle (same model and data) is under {folder}. "
            "Compute one with `python -m explain batch --bundle {bundle} --out {folder}/NAME` (a few minutes per "
            "100,000 customers of the demo's size on a laptop), or pass the store's folder.")
NO_FOLDER = ("This bundle was not loaded from a folder, so there is no <bundle>/{stores} to look in: pass the "
             "store's folder (what `python -m explain batch` wrote).")


SUMMARY = "{name}.drivers-{key}.npz"
DESCRIPTION = "described"  # the npz entry holding the JSON description
KEEP_SUMMARIES = 8  # of one store (windows, earlier stores): the most recently written; older ones are removed


def drivers(bundle, store=None, *, against=None, window: int | None = None, settings: Settings | None = None,
            seed: int = SEED, cache: bool = True) -> Drivers:
    """What drives the prediction across the customers of a finished batch store.

    ``bundle``: a ``Bundle`` or its folder (its features, periods and labels give the store its
    meaning). ``store``: the store's folder or a ``Store``; default: the most exact finished store
    of every customer of this bundle where ``explain.batch.store.store_dirs`` says stores live
    (``<bundle>/attributions/``, ``$EXPLAIN_STORES``): adaptive steps over fixed, more steps over
    fewer, fewer customers outside the tolerance, then the newest (``best_store``), among the stores
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


def summary_path(bundle, store: Store, earlier: Store | None, window, seed: int) -> Path:
    """Where the summary of ``store`` (against ``earlier``) with these options is kept."""
    def mark(s: Store | None):
        return None if s is None else [str(Path(s.path).resolve()), s.manifest]
    key = json.dumps({"version": PARTS_VERSION, "store": mark(store), "against": mark(earlier), "window": window,
                      "seed": seed, "bundle": getattr(bundle, "content_hash", None)}, sort_keys=True, default=str)
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    folder = Path(store.path)
    return folder.parent / SUMMARY.format(name=folder.name, key=digest)


def read_summary(path: Path) -> Drivers | None:
    """The summary at ``path``, or None when there is none or it cannot be read (recomputed)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files if k != DESCRIPTION}
            described = json.loads(str(data[DESCRIPTION]))
        return from_parts(arrays, described)
    except (OSError, ValueError, KeyError, TypeError, IndexError, EOFError):
        return None


def write_summary(path: Path, d: Drivers) -> bool:
    """Write ``d`` to ``path`` (atomically: a temporary file renamed); False when the folder cannot be written."""
    arrays, described = to_parts(d)
    text = json.dumps(described, default=_plain)
    def save(temporary: Path) -> None:
        with open(temporary, "wb") as out:
            np.savez(out, **arrays, **{DESCRIPTION: np.array(text)})

    try:
        write_atomic(path, save)  # 0666 minus the umask, as any file the project writes
    except OSError:
        return False
    prune_summaries(path)
    return True


def prune_summaries(path: Path, keep: int = KEEP_SUMMARIES) -> list[Path]:
    """Remove the summaries of ``path``'s store beyond the ``keep`` most recently written (``path``
    always stays): each window and earlier store makes one (20-30 MB at 20,000 x 365 x 24), and one
    keyed by a store that was rewritten is never read again. The files removed."""
    name = path.name.split(".drivers-", 1)[0]
    found = []
    for other in path.parent.glob(SUMMARY.format(name=glob.escape(name), key="*")):
        try:
            found.append((other.stat().st_mtime_ns, other))
        except OSError:
            continue
    old = [other for _, other in sorted(found, reverse=True) if other != path][max(0, keep - 1):]
    for other in old:
        other.unlink(missing_ok=True)
    return old


def _plain(value):
    """numpy scalars as Python numbers (the description's JSON)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _open(store) -> Store:
    return (store if isinstance(store, Store) else open_store(store)).require_complete()


def _store(bundle, store, settings: Settings | None) -> Store:
    """``store`` opened, or the bundle's best finished store (``explain.batch.store.best_store``:
    the same baseline, target, space and path as ``settings``, the most exact) where
    ``store_dirs`` says stores live."""
    if store is not None:
        return _open(store)
    dirs = store_dirs(bundle)
    if not dirs:
        raise ExplainError(NO_FOLDER.format(stores=STORES_DIR))
    found = best_store(bundle, settings, dirs)
    if found is None:
        raise ExplainError(NO_STORE.format(folder=dirs[0], bundle=getattr(bundle, "path", None) or "BUNDLE"))
    return found
