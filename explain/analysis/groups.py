"""A bundle's feature groups without a store: the features that carry one signal, for the words about one customer.

Declared in ``bundle.json`` (``"groups"``: name -> columns; a group needs two of the bundle's features), or else
found from the bundle's own arrays by the rule of the "What drives churn" summary (``explain.analysis.drivers``):
each customer's customer-level values (a static value as it is; a history feature's mean over the customer's
periods with data, padding left out; a text value is no data) on the same seeded sample of at most
``GROUP_SAMPLE`` customers: the summary's one rule, :func:`explain.analysis.drivers.define_groups` (a found group
named as the summary names it, after its members' display names), the members in model order.

The sample is read ``READ_ROWS`` customers at a time (a memory-mapped history's pages given back after each
block), so a bundle of 20,000 customers x 365 days x 24 features is never read whole. :func:`of` keeps its answer
per bundle content (``content_hash``): the notebook and the command line ask once per customer; a big bundle's
groups are also kept beside its array cache (``explain.bundle.cache.write_kept``, with the sample's seed and size
and :data:`RULE`), so a later process -- the dashboard after ``explain check`` -- reads them (finding them on
20,000 x 365 x 24 is about a second of the first page).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explain.analysis.drivers import GROUP_SAMPLE, SEED, Layout, _sample_rows, define_groups
from explain.core.kept import Kept

READ_ROWS = 500  # customers read from the arrays at a time
KEPT = 8  # bundles whose groups :func:`of` keeps
RULE = 1  # bump when define_groups finds other groups from the same values: groups kept on disk are found again


@dataclass(frozen=True)
class FeatureGroup:
    """Features of a bundle that carry one signal (their effects on a customer add up: IG is additive)."""

    name: str  # the declared name, or the members' display names ("Orders, items and spend")
    features: tuple  # (column, ...) in model order
    found: bool  # True: found from the data; False: declared in bundle.json


def customer_values(bundle, rows: np.ndarray) -> np.ndarray:
    """(k, p) float64 customer-level values of bundle rows ``rows`` (sorted), one column per feature of
    ``Layout.of(bundle)`` in its order: a static value; a history feature's mean over the periods with data (NaN
    when none); NaN for a text value."""
    parts = []
    for key, role, columns, _, periods in Layout.of(bundle).inputs:
        raw = np.asarray(bundle.arrays[key][rows])
        shape = (len(rows), len(columns)) if role == "static" else (len(rows), len(periods), len(columns))
        if raw.dtype.kind not in "fiub" or raw.size != int(np.prod(shape)):
            parts.append(np.full((len(rows), len(columns)), np.nan))
            continue
        values = raw.astype(np.float64).reshape(shape)  # (k, S) or (k, T, F)
        if role == "static":
            parts.append(values)
            continue
        pad = bundle.padding(key, rows)  # (k, T) True where there is no data, or None
        real = np.ones(shape[:2], bool) if pad is None else ~np.asarray(pad, bool).reshape(shape[:2])
        held = real.sum(axis=1)[:, None]  # (k, 1) periods with data
        total = np.where(real[:, :, None], values, 0.0).sum(axis=1)  # (k, F)
        with np.errstate(invalid="ignore", divide="ignore"):
            parts.append(np.where(held > 0, total / np.maximum(held, 1), np.nan))
    return np.concatenate(parts, axis=1) if parts else np.zeros((len(rows), 0))


def find(bundle, seed: int = SEED, size: int = GROUP_SAMPLE) -> tuple[FeatureGroup, ...]:
    """The bundle's groups by the summary's rule (:func:`explain.analysis.drivers.define_groups`): the declared
    ones (two or more of its features each), else those found from its data (see the module docstring), the
    members in model order; () when there are none."""
    features = Layout.of(bundle).features
    declared = tuple((getattr(bundle, "groups", None) or {}).items())
    wanted, found = define_groups(features, declared, lambda: _sample_values(bundle, seed, size), seed, size=size)
    return tuple(FeatureGroup(name, tuple(features[j].name for j in columns), found) for name, columns in wanted)


def _sample_values(bundle, seed: int, size: int) -> np.ndarray:
    """(k, p) :func:`customer_values` of the summary's seeded sample (that of a store holding every customer), read
    ``READ_ROWS`` customers at a time, each block's pages of a memory-mapped array given back once read."""
    sample = _sample_rows(len(bundle.ids), size, seed)
    blocks = []
    for at in range(0, len(sample), READ_ROWS):
        rows = sample[at:at + READ_ROWS]
        blocks.append(customer_values(bundle, rows))
        _release(bundle, rows)
    return np.concatenate(blocks) if blocks else np.zeros((0, len(Layout.of(bundle).features)))


def _release(bundle, rows: np.ndarray) -> None:
    release = getattr(bundle, "release", None)
    if release is not None and len(rows):
        release([str(bundle.ids[rows[0]]), str(bundle.ids[rows[-1]])])


_KEPT = Kept(KEPT)  # content hash -> find(bundle)


def of(bundle) -> tuple[FeatureGroup, ...]:
    """:func:`find`, kept per bundle content (``content_hash``; a bundle without one is read each time) and, for a
    big bundle, on disk beside its array cache (see the module)."""
    key = getattr(bundle, "content_hash", "") or None
    return _KEPT.get(key, lambda: _kept_on_disk(bundle))


def _kept_on_disk(bundle) -> tuple[FeatureGroup, ...]:
    from explain.bundle import cache as array_cache

    folder, content = getattr(bundle, "path", None), getattr(bundle, "content_hash", "")
    made_with = {"seed": SEED, "size": GROUP_SAMPLE, "rule": RULE}
    kept = array_cache.read_kept(folder, content, "groups", made_with)
    if isinstance(kept, list):
        try:
            return tuple(FeatureGroup(str(name), tuple(str(f) for f in features), bool(found))
                         for name, features, found in kept)
        except (TypeError, ValueError):  # not what write_kept wrote: found again
            pass
    groups = find(bundle)
    array_cache.write_kept(folder, content, "groups", made_with,
                           [[g.name, list(g.features), g.found] for g in groups])
    return groups
