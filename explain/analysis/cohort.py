"""Many customers at once: the Cohort page's sample, its batches, filters and aggregates, and
the mean attribution of a labelled cohort (the Compare page). No Streamlit: arrays in, arrays out.

Shapes: ``static`` is (n, S) and ``temporal`` (n, T, F) attributions of n customers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explain.core import labels
from explain.core.engine import engine_for
from explain.core.errors import ExplainError

SAMPLE_SIZES = ("200", "500", "1000", "all")
BATCH = 100  # customers per computation
SEED = 0
RISK_CUTS = (0.3, 0.6)
BANDS = {"low (< 0.3)": (0.0, 0.3), "medium (0.3 to 0.6)": (0.3, 0.6), "high (>= 0.6)": (0.6, 1.0 + 1e-9)}
PREDICT_CHUNK = 1024  # customers per model call when scoring everyone
COHORT_MEAN_LIMIT = 100  # customers averaged for a cohort's mean
NO_LABELS = "This bundle has no label column, so there is no cohort to compare with."
EMPTY_COHORT = "No customer has the label {value!r}."


def scores(bundle, should_stop=None, chunk: int = PREDICT_CHUNK) -> np.ndarray:
    """Every customer's model output (n, K) float64, ``chunk`` customers per compiled call;
    ``should_stop`` is asked before each call (see :func:`explain.core.engine.check_stop`)."""
    return engine_for(bundle.model, getattr(bundle, "roles", None) or None).outputs(  # any inputs (issue 11)
        bundle.data(), "output", chunk, should_stop)


class _Rows:
    """Some rows of a bundle, as :func:`scores` reads one (its model, roles and arrays)."""

    def __init__(self, bundle, arrays: dict) -> None:
        self.model, self.roles, self._arrays = bundle.model, getattr(bundle, "roles", None), arrays

    def data(self) -> dict:
        return self._arrays


def score_everyone(bundle, should_stop=None, block: int = PREDICT_CHUNK * 16) -> np.ndarray:
    """:func:`scores` of every customer, ``block`` customers at a time (a whole number of its model calls, so
    the same numbers): a memory-mapped history's pages read for a block are given back to the page cache before
    the next (``release_pages``), so scoring 200,000 histories of 7 GB holds one block, not the file."""
    from explain.core.baselines import release_pages

    data = bundle.data()
    if not any(isinstance(values, np.memmap) for values in data.values()):
        return scores(bundle, should_stop=should_stop)
    parts = []
    for start in range(0, bundle.n_customers, block):
        rows = {key: values[start:start + block] for key, values in data.items()}
        parts.append(scores(_Rows(bundle, rows), should_stop=should_stop))
        for key, values in data.items():
            release_pages(values, rows[key])
    return np.concatenate(parts)


def kept_scores(bundle, should_stop=None) -> tuple[np.ndarray, bool]:
    """(every customer's model output (n, K), whether it was read back): a big bundle's scores are kept beside its
    array cache (``explain.bundle.cache.write_scores``), so a later process of the same content -- the dashboard
    after ``explain check``, or its next start -- reads them instead of scoring 20,000 histories again."""
    from explain.bundle import cache as array_cache

    path, content = getattr(bundle, "path", None), getattr(bundle, "content_hash", "")
    shape = (bundle.n_customers, len(bundle.output_names))
    found = array_cache.read_scores(path, content, shape)  # None without a path, a content hash or a cache
    if found is not None:
        return found, True
    found = score_everyone(bundle, should_stop=should_stop)
    array_cache.write_scores(path, content, found)
    return found, False


def sample_ids(bundle, size: str, seed: int = SEED) -> list[str]:
    """A seeded random sample of ``size`` customers ('200', ...) in table order, or all of them ('all')."""
    if size == "all" or int(size) >= bundle.n_customers:
        return bundle.ids.tolist()
    rows = np.sort(np.random.default_rng(seed).choice(bundle.n_customers, size=int(size), replace=False))
    return [str(i) for i in bundle.ids[rows]]


def batches(ids: list, size: int = BATCH) -> list[list]:
    """``ids`` cut into consecutive batches of ``size`` (the last one shorter)."""
    return [ids[k:k + size] for k in range(0, len(ids), size)]


def gather(parts: dict, ids: list, size: int = BATCH) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """The finished batches ``parts`` ({batch index: attribution}) joined in batch order:
    (their ids, static (n, S), temporal (n, T, F), padding (n, T): True where the history is padding)."""
    order = sorted(parts)
    done = [i for k in order for i in ids[k * size:(k + 1) * size]]
    return (done, np.concatenate([parts[k].static for k in order]),
            np.concatenate([parts[k].temporal for k in order]),
            np.concatenate([padding_of(parts[k]) for k in order]))


def padding_of(attribution) -> np.ndarray:
    """(n, T) bool: where the attribution's (one) history is padding; all False when nothing can be."""
    pad = next(iter(getattr(attribution, "padding", {}).values()), None)
    return np.zeros(attribution.temporal.shape[:2], bool) if pad is None else np.asarray(pad, bool)


def in_bands(risk: np.ndarray, bands, table=None) -> np.ndarray:
    """Rows whose predicted risk lies in one of the named ``bands`` (keys of ``table``
    {name: (low, high)}, by default :data:`BANDS`; ``explain.core.verdict.ranges`` gives a bundle's)."""
    table = BANDS if table is None else table
    keep = np.zeros(len(risk), bool)
    for band in bands:
        low, high = table[band]
        keep |= (risk >= low) & (risk < high)
    return keep


def with_labels(row_labels, chosen) -> np.ndarray:
    """Rows whose label (as text, see :mod:`explain.core.labels`) is one of ``chosen``."""
    return np.isin(np.array([labels.text(v) for v in row_labels], dtype=object), list(chosen))


@dataclass(frozen=True)
class Aggregate:
    """What the Cohort page draws, from the attributions of the customers shown.

    Padded periods are no data: every mean is over the customers whose period is real. A cell
    no customer has data for is NaN (drawn as no data), never a NaN that spreads into a mean."""

    mean_abs: np.ndarray          # (T, F) mean |attribution| per cell, over customers with data there
    signed_mean: np.ndarray       # (T, F)
    feature_names: list           # S static names, then F temporal names summed over periods
    feature_abs: np.ndarray       # (S + F,) mean |attribution| per feature (a history: summed over real periods)
    feature_signed: np.ndarray    # (S + F,)
    period_abs: np.ndarray        # (T,) mean over customers with data of sum over features of |attribution|
    period_signed: np.ndarray     # (T,)
    customers_per_period: np.ndarray  # (T,) how many customers have a real period there


def no_data(temporal: np.ndarray, padding=None) -> np.ndarray:
    """``temporal`` (n, T, F) as float64 with NaN at the padded periods ``padding`` (n, T) (and
    where it is NaN already: a store's padded cells)."""
    temporal = np.array(temporal, dtype=np.float64)
    if padding is not None:
        temporal[np.asarray(padding, bool)] = np.nan
    return temporal


def _mean(values: np.ndarray, real: np.ndarray) -> np.ndarray:
    """Mean over axis 0 of ``values`` where ``real``; NaN where no row is real."""
    count = real.sum(axis=0)
    total = np.where(real, values, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def aggregate(static: np.ndarray, temporal: np.ndarray, static_names, temporal_names, padding=None) -> Aggregate:
    """Means over customers of the attributions ``static`` (n, S) and ``temporal`` (n, T, F);
    ``padding`` (n, T) True where a customer's history is padding (NaN cells count as padding too)."""
    temporal = no_data(temporal, padding)
    real = ~np.isnan(temporal)  # (n, T, F)
    real_period = real.any(axis=2)  # (n, T)
    per_feature = np.where(real, temporal, 0.0).sum(axis=1)  # (n, F): each temporal feature over its real periods
    everything = np.concatenate([np.asarray(static, np.float64), per_feature], axis=1)  # (n, S + F)
    names = [f"{name} (static)" for name in static_names] + [f"{name} (all periods)" for name in temporal_names]
    by_period = np.where(real, temporal, 0.0)
    return Aggregate(mean_abs=_mean(np.abs(temporal), real), signed_mean=_mean(temporal, real),
                     feature_names=names, feature_abs=np.abs(everything).mean(axis=0),
                     feature_signed=everything.mean(axis=0),
                     period_abs=_mean(np.abs(by_period).sum(axis=2), real_period),
                     period_signed=_mean(by_period.sum(axis=2), real_period),
                     customers_per_period=real_period.sum(axis=0))


def cohort_ids(bundle, value: str, limit: int = COHORT_MEAN_LIMIT, seed: int = SEED) -> list[str]:
    """Up to ``limit`` customers (a seeded sample, in table order) whose label is ``value``."""
    if bundle.labels is None:
        raise ExplainError(NO_LABELS)
    rows = np.flatnonzero(labels.mask(bundle.labels, value))
    if rows.size == 0:
        raise ExplainError(EMPTY_COHORT.format(value=value))
    if rows.size > limit:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size=limit, replace=False))
    return [str(i) for i in bundle.ids[rows]]


def mean_of(attribution, bundle, ids: list) -> dict:
    """The mean customer of ``ids``: static (S,) and temporal (T, F) attributions, the mean
    history ``values`` (T, F), ``n`` and the mean ``prediction``. Padded periods are no data:
    each cell is the mean over the customers with a real period there (NaN where none has)."""
    padding = padding_of(attribution)
    values = no_data(bundle.inputs_for(ids)[first_history(bundle)], padding)
    temporal = no_data(attribution.temporal, padding)
    return {"static": attribution.static.mean(axis=0), "temporal": _mean(temporal, ~np.isnan(temporal)),
            "values": _mean(values, ~np.isnan(values)), "n": len(ids),
            "prediction": float(attribution.prediction.mean())}


def first_history(bundle) -> str:
    """The engine's key of the bundle's first history ("temporal" for a plain bundle)."""
    if bundle.plain:
        return "temporal"
    return bundle.layout.keys_of("temporal")[0]
