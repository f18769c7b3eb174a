"""A bundle's batch stores: where they live and which one a page or a command reads.

Where a bundle's stores live is decided here alone, by :func:`store_dirs` (``<bundle>/attributions/``, then
``$EXPLAIN_STORES/<content hash>/``). Every page and command asks :func:`stores_of` (the one function), which lists
the stores found there once (:class:`BundleStores`: each manifest opened once, on first use) and answers from that
listing:

* ``finished(ids=..., request=...)``: the finished stores computed from this bundle, newest first;
* ``exact(request, ids=...)``: exactly these settings, the newest (the Cohort page; :func:`find_store`);
* ``best(request)``: the same baseline, target, space and path, the most exact (``explain.drivers`` and the What
  drives churn page; :func:`best_store`);
* ``others(request, chosen)`` and ``earlier(current)``: what the What drives churn page says about the rest;
* ``runs(current)``: ``current`` and its earlier runs in run order (drivers over runs: :func:`in_run_order`);
* ``changes()``: the stores whose baseline is the customers at an earlier time (``previous``: the biggest movers);
* ``mark()``: what changes when a store under these folders is finished, repaired or removed (a dashboard
  cache's key), read without opening a store.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from explain.batch.format import MANIFEST, SUMMARY_DIR, customers_hash, store_settings
from explain.batch.store import Store, open_store, settings_words
from explain.core.errors import ExplainError
from explain.core.periods import DATE_RE, MONTH_RE, QUARTER_RE, WEEK_RE, YEAR_RE
from explain.core.settings import AUTO, DEFAULT_TOLERANCE, Baseline, Settings
from explain.core.text import examples

STORES_DIR = "attributions"  # <bundle>/attributions/<name>/ : the first folder of store_dirs
STORES_ENV = "EXPLAIN_STORES"  # a folder: $EXPLAIN_STORES/<content hash[:16]>/ is the second (store_dirs)
PRECISION = ("steps", "method", "tolerance", "max_points")  # settings that make a store more or less exact

SEVERAL_MEANINGS = ("{count} finished stores of this bundle were made with different baselines, targets or paths, "
                    "none with the default settings: {stores}. Pass the store's folder (--store) or its settings.")


def store_dirs(bundle) -> list[Path]:
    """Where this bundle's stores live, in the order they are searched (the one place that decides it):

    1. ``<bundle>/STORES_DIR`` (``<bundle>/attributions/``), where ``python -m explain batch --out
       BUNDLE/attributions/NAME`` writes, for a bundle opened from a folder;
    2. ``$EXPLAIN_STORES/<first 16 characters of the content hash>/`` when the environment variable
       ``EXPLAIN_STORES`` names a folder (stores of a read-only bundle folder; the dashboard writes its
       own stores there first).

    Each folder may be a store itself or hold store folders. Folders that do not exist are listed too
    (a writer may make them)."""
    dirs = []
    if getattr(bundle, "path", None) is not None:
        dirs.append(Path(bundle.path) / STORES_DIR)
    root, content = os.environ.get(STORES_ENV), getattr(bundle, "content_hash", None)
    if root and content:
        dirs.append(Path(root).expanduser() / content[:16])
    return dirs


def stores_in(search_dirs: Iterable) -> Iterator[Store]:
    """Every store (finished or not, of any bundle) in ``search_dirs``: each folder a store itself or
    a folder of store folders (one level); a folder found twice (a link) once, unreadable ones skipped."""
    seen = set()
    for base in search_dirs:
        base = Path(base)
        if not base.is_dir():
            continue
        try:
            folders = [base] if (base / MANIFEST).is_file() else [
                d for d in sorted(base.iterdir()) if d.is_dir() and (d / MANIFEST).is_file()]
        except OSError:
            continue
        for folder in folders:
            real = folder.resolve()
            if real in seen:
                continue
            seen.add(real)
            try:
                yield open_store(folder)
            except (ExplainError, OSError):
                continue


def meaning(settings: dict) -> dict:
    """What a store's attributions answer (its manifest's settings without those that only make the
    numbers more or less exact: ``PRECISION``): the baseline, target, space, path, categorical rule,
    and the seed of a sampled baseline. Stores of one meaning differ only in exactness."""
    out = {k: v for k, v in settings.items() if k not in PRECISION}
    if not str(out.get("baseline", "")).startswith("sample"):
        out.pop("seed", None)  # only a sampled baseline reads it
    return out


def exactness(store: Store) -> tuple:
    """A store's rank among stores of one meaning (larger: better): adaptive steps ("auto") over a
    fixed number; then, adaptive, the smaller tolerance and the larger budget of points, fixed, more
    steps; then fewer customers outside the tolerance (a store that does not record it after those
    that do); then the newest."""
    settings = store.settings
    auto = settings.get("steps") == AUTO
    outside = store.outside_tolerance
    if auto:
        fineness = (-float(settings.get("tolerance", DEFAULT_TOLERANCE)), int(settings.get("max_points") or 0))
    else:
        fineness = (int(settings.get("steps") or 0), 0)
    return (auto, *fineness, outside is not None, -(outside or 0), store.completed)


def _same(a: Store, b) -> bool:
    return Path(a.path).resolve() == Path(b.path if isinstance(b, Store) else b).resolve()


class BundleStores:
    """The stores under a bundle's store folders (:func:`store_dirs`, or the folders given), listed once:
    every question a page or a command asks about them is answered from the one listing."""

    def __init__(self, bundle, dirs: Sequence[Path], every: Sequence[Store] | None = None):
        self.bundle = bundle
        self.dirs = tuple(Path(d) for d in dirs)
        if every is not None:  # the stores of an earlier listing of the same folders, unchanged since
            self.__dict__["every"] = tuple(every)

    def __repr__(self) -> str:
        return f"BundleStores({[str(d) for d in self.dirs]!r})"

    @cached_property
    def every(self) -> tuple[Store, ...]:
        """Every store in the folders (finished or not, of any bundle), each opened once."""
        return tuple(stores_in(self.dirs))

    def finished(self, *, ids: Sequence[str] | None = None, request: Settings | None = None) -> list[Store]:
        """The finished stores computed from this bundle (same content hash), newest first. With ``ids=None``
        a store must hold every customer of the bundle; otherwise at least ``ids``. ``request``: only stores
        made with exactly these settings (None: any settings)."""
        content = getattr(self.bundle, "content_hash", None)
        if not content:
            return []
        settings = None if request is None else store_settings(request, self.bundle)
        every, found = None, []
        for store in self.every:
            if store.bundle_hash != content or (settings is not None and store.settings != settings):
                continue
            if not store.complete:
                continue
            if ids is None:
                if every is None:
                    every = [str(i) for i in self.bundle.ids]
                    every = (len(every), customers_hash(every))
                customers = store.manifest["customers"]
                if (customers.get("count"), customers.get("sha256")) != every:
                    continue
            elif not store.holds(ids):
                continue
            found.append(store)
        return sorted(found, key=lambda s: (s.completed, str(s.path)), reverse=True)

    def exact(self, request: Settings | None, *, ids: Sequence[str] | None = None) -> Store | None:
        """The newest finished store of this bundle made with exactly these settings (None: any settings),
        holding every customer (``ids=None``) or at least ``ids``; None if there is none: what the Cohort page reads."""
        found = self.finished(ids=ids, request=request)
        return found[0] if found else None

    def best(self, request: Settings | None = None) -> Store | None:
        """The most exact finished store of every customer of this bundle (:func:`exactness`) among those
        of the same meaning as ``request`` (baseline, target, space, path: :func:`meaning`; its steps,
        method and tolerance are not required), or None: what ``explain.drivers`` and the What drives
        churn page read.

        ``request=None``: the stores of the default settings' meaning (``Settings()`` for this bundle)
        when there are any, else those of the only meaning found; stores of several other meanings
        raise ``ExplainError`` naming them (no store of another meaning is chosen silently)."""
        found = self.finished()
        if request is not None:
            wanted = meaning(store_settings(request, self.bundle))
            same = [s for s in found if meaning(s.settings) == wanted]
        else:
            default = meaning(store_settings(Settings(), self.bundle))
            same = [s for s in found if meaning(s.settings) == default]
            kinds = {json.dumps(meaning(s.settings), sort_keys=True, default=str) for s in found}
            if not same and len(kinds) > 1:
                raise ExplainError(SEVERAL_MEANINGS.format(count=len(found), stores=examples(
                    [f"{s.path} ({settings_words(s.settings)})" for s in found], quote=False)))
            same = same or found
        return max(same, key=exactness) if same else None

    def others(self, request: Settings, chosen) -> tuple[list[Store], list[Store]]:
        """The bundle's other finished stores of every customer besides ``chosen`` (a ``Store`` or its folder):
        (the less exact ones of the same baseline, target, space and path as ``request``, those of other such
        settings)."""
        wanted = meaning(store_settings(request, self.bundle))
        rest = [s for s in self.finished() if not _same(s, chosen)]
        return [s for s in rest if meaning(s.settings) == wanted], [s for s in rest if meaning(s.settings) != wanted]

    def earlier(self, current) -> list[Store]:
        """The other finished stores in the folders made with the same settings and layout as ``current``
        (a ``Store`` or its folder; an earlier month's run of the same kind, of any bundle content), newest first."""
        this = current if isinstance(current, Store) else open_store(current)
        found = [s for s in self.every if not _same(s, this) and s.complete and s.settings == this.settings
                 and s.manifest.get("rows_per_customer") == this.manifest.get("rows_per_customer")]
        return sorted(found, key=lambda s: (s.completed, s.path.name, str(s.path)), reverse=True)

    def runs(self, current) -> list[tuple[str, Store]]:
        """``current`` and :meth:`earlier` (the other finished stores of its settings and layout: one per run), as
        (label, store) in run order, oldest first (:func:`in_run_order`): what drivers over runs read."""
        this = current if isinstance(current, Store) else open_store(current)
        return in_run_order([this, *self.earlier(this)])

    def changes(self) -> list[Store]:
        """The finished stores of every customer of this bundle whose baseline is the same customers at an earlier
        time (``previous``, ``previous:K``, ``bundle:DIR``: each attribution explains the change of a score since
        then), one period back first, then the most exact (:func:`exactness`): what the biggest movers read."""
        found = [s for s in self.finished() if is_change(s.settings.get("baseline"))]
        return sorted(found, key=lambda s: (str(s.settings.get("baseline")) in ("previous", "previous:1"),
                                            exactness(s)), reverse=True)

    def mark(self) -> tuple:
        """What changes when a store is finished, repaired or removed in the folders: (folder, ((file, size,
        mtime), ...)) of each, one stat per file of each store and of its summaries (temporary files left
        out); read without opening a store. No store folder at all: every folder's marks are ()."""
        return tuple((str(folder), _folder_marks(folder)) for folder in self.dirs)


def _folder_marks(folder: Path) -> tuple:
    if not folder.is_dir():
        return ()
    marks = []
    for store in sorted(d for d in folder.iterdir() if d.is_dir()):
        for sub in (store, store / SUMMARY_DIR):  # one stat per file: a chunk repaired or damaged counts
            try:
                marks.extend((str(f), s.st_size, s.st_mtime_ns) for f in sorted(sub.iterdir())
                             if f.is_file() and not f.name.endswith(".part") for s in [f.stat()])
            except OSError:  # not a folder, or a file renamed while a batch run writes
                continue
    return tuple(marks)


def is_change(baseline) -> bool:
    """True when the baseline spec is the same customers at an earlier time (``previous``, ``bundle:DIR``)."""
    try:
        return Baseline.parse(str(baseline)).change
    except ExplainError:
        return False


CALENDAR = (MONTH_RE, QUARTER_RE, WEEK_RE, YEAR_RE, DATE_RE)  # labels of one of these forms sort as text


def last_period(store: Store) -> str | None:
    """The last period of the store's first history (its manifest's inputs), or None (a store of format 1 or 2,
    or one without a history): the month, week or day the store's data runs to."""
    for spec in store.inputs:
        if spec.get("periods"):
            return str(spec["periods"][-1])
    return None


def in_run_order(stores: Sequence[Store]) -> list[tuple[str, Store]]:
    """(label, store) of ``stores``, oldest run first. A run is named and ordered by the period its data runs to
    (the last period of its history: "2025-11") when every store has one, they differ and they are calendar labels
    of one form (2025-11, 2025-Q3, 2025-W07, 2025, 2025-11-30: these sort as text), so a month recomputed later
    keeps its place; otherwise by when each store was finished (its manifest's ``completed``, "2025-11-30 14:02",
    UTC), the order the runs were made in."""
    periods = [last_period(s) for s in stores]
    forms = {next((k for k, form in enumerate(CALENDAR) if form.match(p)), None) if p else None for p in periods}
    if len(set(periods)) == len(stores) and len(forms) == 1 and None not in forms:
        return sorted(zip(periods, stores), key=lambda pair: pair[0])
    ordered = sorted(stores, key=lambda s: (s.completed, str(s.path)))
    labels = [s.completed.replace("T", " ")[:16] for s in ordered]
    if len(set(labels)) < len(labels) or not all(labels):  # finished within one minute: the folders' names
        labels = [s.path.name if len({t.path.name for t in ordered}) == len(ordered) else str(s.path) for s in ordered]
    return list(zip(labels, ordered))


def stores_of(bundle, search_dirs: Iterable | None = None) -> BundleStores:
    """This bundle's stores: those under :func:`store_dirs` (or ``search_dirs``; a single folder may be
    given as a path), listed once. The one function every page and command asks where stores are."""
    if search_dirs is None:
        search_dirs = store_dirs(bundle)
    elif isinstance(search_dirs, (str, os.PathLike)):
        search_dirs = [search_dirs]
    return BundleStores(bundle, list(search_dirs))


def find_store(bundle, request: Settings | None, search_dirs: Iterable | None = None, *,
               ids: Sequence[str] | None = None) -> Path | None:
    """The folder of ``stores_of(bundle, search_dirs).exact(request, ids=ids)``, or None."""
    found = stores_of(bundle, search_dirs).exact(request, ids=ids)
    return None if found is None else found.path


def best_store(bundle, request: Settings | None = None, search_dirs: Iterable | None = None) -> Store | None:
    """``stores_of(bundle, search_dirs).best(request)``."""
    return stores_of(bundle, search_dirs).best(request)
