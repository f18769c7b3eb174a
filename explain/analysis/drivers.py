"""What drives the model's output across every customer: the global ranking, the values and
attributions behind a beeswarm and a dependence plot, the time profile, churn-reason segments
and drift between two stores. Arrays in, one frozen :class:`Drivers` out; no files here
(``explain.batch.drivers`` reads a store chunk by chunk into :class:`Rows` and calls :func:`compute`).

Per customer and feature (``p`` features: every static column, then every temporal column of
each history):

* a static feature's attribution and value as they are;
* a temporal feature summarised over a window (the whole history, or its last N periods): the
  attributions summed over the window's periods (sums keep completeness: the customer's
  feature totals still add up to f(x) - f(b)), the values averaged over them.

Padding is "no data" everywhere: a padded cell is NaN in the store and counts in no mean, no
sum and no customer count (a customer whose window is all padding has no value for that
feature, and is left out of that feature's means).

Ranking: mean |attribution| over customers (size, either direction) and mean attribution
(direction). Churn-reason segments: k-means on every customer's reasons, the positive part of
its attribution vector (what raises its prediction) scaled to unit length (the mix of reasons,
not their size; customers whom nothing pushes up share the zero vector and their own segment),
k chosen by the silhouette score within 2-8, fitted on a seeded sample of at most
``FIT_SAMPLE`` customers and applied to all. A segment is named by its main reasons (the
features whose mean attribution in it is positive and at least ``NAME_SHARE`` of the largest),
or, when nothing raises its prediction, by what lowers it most. Drift: the
change of each feature's mean |attribution| between two stores, with a bootstrap interval
(``RESAMPLES`` resamples of the customers of each store, in random groups; normal interval from
the bootstrap standard error, Bonferroni-corrected over the features so that the family of intervals holds
at ``DRIFT_LEVEL``): a change is reported only when its interval excludes zero.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from explain.analysis.report import input_views
from explain.core import labels as label_text
from explain.core.errors import ExplainError

RECENT_SHARE = 0.9      # the time profile's "recent periods holding 90 % of the attribution"
K_RANGE = (2, 8)        # segment counts tried
SEED = 0
FIT_SAMPLE = 10_000     # customers k-means is fitted on (every customer is then assigned)
SILHOUETTE_SAMPLE = 2_500  # customers the silhouette score of each k is measured on
N_INIT = 4              # k-means restarts per k
RESAMPLES = 200         # bootstrap resamples of the drift intervals
BOOTSTRAP_GROUPS = 2_000  # random groups of customers the bootstrap resamples
DRIFT_LEVEL = 0.95      # family-wise level of the drift intervals (all features together)
NAME_DRIVERS = 2        # reasons in a segment's name, at most
NAME_SHARE = 0.25       # a reason named has a mean attribution of at least this share of the largest
TOP_DRIVERS = 3         # drivers listed per segment
SENTENCE_TOP = 3        # drivers named in the ranking sentence

EMPTY = "There is nothing to summarise: {what} holds no customer."
BAD_WINDOW = "window must be a whole number of periods from 1 to {t} (or None for the whole history); got {value!r}."
OTHER_LAYOUT = ("The two stores do not hold the same features, so their drivers cannot be compared: {why}. "
                "Compare stores of bundles with the same static and temporal columns.")


# ----------------------------------------------------------------------------- the input


@dataclass(frozen=True)
class Rows:
    """k customers as a store chunk holds them: for every model input (by the engine's key), the
    values and the attributions in the input's shape, (k, S) or (k, T, F), float64, NaN where
    there is no data (padding, or a text value)."""

    ids: np.ndarray              # (k,) str
    prediction: np.ndarray       # (k,)
    values: dict                 # key -> (k, S) or (k, T, F)
    attributions: dict           # key -> same shapes


@dataclass(frozen=True)
class Feature:
    """One column of one model input."""

    name: str    # the table column
    label: str   # its display name
    input: str   # the input's key ("static", "temporal", or the model's input name)
    role: str    # "static" | "temporal"


@dataclass(frozen=True)
class Layout:
    """The inputs a store holds, in model order: (key, role, columns, labels, periods or None)."""

    inputs: tuple

    @classmethod
    def of(cls, bundle) -> "Layout":
        names = getattr(bundle, "feature_labels", None) or {}
        if getattr(bundle, "plain", True):
            names = {**dict(zip(bundle.static_features, bundle.static_labels)),
                     **dict(zip(bundle.temporal_features, bundle.temporal_labels)), **names}
        out = []
        for view in input_views(bundle):
            columns = tuple(str(c) for c in view.features)
            out.append((view.key, view.role, columns, tuple(str(names.get(c, c)) for c in columns),
                        None if view.periods is None else tuple(str(p) for p in view.periods)))
        return cls(tuple(out))

    @property
    def features(self) -> tuple[Feature, ...]:
        return tuple(Feature(c, lab, key, role) for key, role, columns, names, _ in self.inputs
                     for c, lab in zip(columns, names))


# ----------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class Ranked:
    """One feature of the global ranking."""

    feature: Feature
    mean_abs: float      # mean over customers of |attribution| (size of effect, either way)
    mean_signed: float   # mean attribution (direction: > 0 raises the prediction)
    share: float         # mean_abs / sum of every feature's mean_abs
    customers: int       # customers with data for it

    @property
    def direction(self) -> str:
        """"raises", "lowers" or "either way" (the mean is under a fifth of the mean size)."""
        if abs(self.mean_signed) < 0.2 * self.mean_abs or self.mean_abs == 0:
            return "either way"
        return "raises" if self.mean_signed > 0 else "lowers"


@dataclass(frozen=True)
class TimeProfile:
    """One history's attribution by period, over the whole base (padding: no data)."""

    input: str
    periods: tuple           # (T,) labels, oldest first
    mean_abs: np.ndarray     # (T,) mean over customers with data of sum over features of |attribution|
    mean_signed: np.ndarray  # (T,) the same, signed
    customers: np.ndarray    # (T,) customers with data in that period
    recent_periods: int      # the fewest last periods holding RECENT_SHARE of the total |attribution|
    last_share: float        # share of the total |attribution| in the last period alone

    @property
    def before_last(self) -> np.ndarray:
        """(T,) periods before the last: T-1, ..., 1, 0."""
        return np.arange(len(self.periods) - 1, -1, -1)

    @property
    def mass(self) -> np.ndarray:
        """(T,) the total |attribution| of each period over every customer (what the shares count)."""
        return np.nan_to_num(self.mean_abs) * self.customers


@dataclass(frozen=True)
class Driver:
    """One of a segment's drivers."""

    feature: Feature
    mean_attribution: float   # mean over the segment
    words: str                # "rising support calls", "short tenure (months)", "month-to-month contract"


@dataclass(frozen=True)
class Segment:
    """Customers with a similar profile of reasons (attribution vector)."""

    name: str
    size: int
    share: float                   # of every customer
    mean_prediction: float
    churn_rate: float | None       # share with the positive label (None without labels)
    drivers: tuple                 # (Driver, ...) largest |mean attribution| first
    mean_attributions: np.ndarray = field(repr=False)  # (p,) mean attribution of every feature (no data: 0)
    rows: np.ndarray = field(repr=False)   # rows of Drivers.customers, highest prediction first
    customers: tuple = field(repr=False)   # their ids, in the same order

    @property
    def highest_risk(self) -> str:
        return self.customers[0]


@dataclass(frozen=True)
class DriftRow:
    """One feature's change of mean |attribution| from the earlier store to this one."""

    feature: Feature
    before: float
    after: float
    low: float     # the interval of after - before
    high: float

    @property
    def change(self) -> float:
        return self.after - self.before

    @property
    def changed(self) -> bool:
        """True when the interval excludes zero."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Drift:
    """Which drivers gained or lost weight between two stores."""

    rows: tuple            # (DriftRow, ...) largest |change| first
    customers_before: int
    customers_after: int
    level: float
    resamples: int
    sentence: str

    @property
    def changed(self) -> tuple:
        return tuple(r for r in self.rows if r.changed)


@dataclass(frozen=True)
class Drivers:
    """What drives the prediction across the customers of a store (see the module docstring)."""

    features: tuple                    # (p,) Feature, in model order
    customers: np.ndarray              # (n,) ids
    prediction: np.ndarray             # (n,)
    outcome: np.ndarray | None         # (n,) 1.0 positive label, 0.0 other, NaN unknown; None without labels
    values: np.ndarray                 # (n, p) static value / temporal mean over the window (NaN: no data)
    attributions: np.ndarray           # (n, p) static attribution / temporal sum over the window
    window: int | None                 # last N periods; None: the whole history
    ranking: tuple                     # (Ranked, ...) largest mean |attribution| first
    sentence: str
    time_profiles: tuple               # (TimeProfile, ...) one per history
    segments: tuple                    # (Segment, ...) highest mean prediction first
    segment_of: np.ndarray             # (n,) index into segments
    silhouette: dict                   # {k: silhouette score} of the k tried
    drift: Drift | None = None
    source: dict = field(default_factory=dict)   # where it came from (store path, settings, finished)

    @property
    def n_customers(self) -> int:
        return int(self.customers.shape[0])

    @property
    def window_text(self) -> str:
        return "the whole history" if self.window is None else f"the last {self.window} period(s)"

    def column(self, feature) -> int:
        """The column of ``feature`` (a Feature, its column name or its display name)."""
        for j, f in enumerate(self.features):
            if feature in (f, f.name, f.label):
                return j
        raise ExplainError(f"{feature!r} is not one of the features: "
                           f"{', '.join(repr(f.name) for f in self.features[:8])}.")

    def sample(self, size: int, seed: int = SEED) -> np.ndarray:
        """A seeded random sample of at most ``size`` rows, in row order (what a scatter plot draws)."""
        n = self.n_customers
        if n <= size:
            return np.arange(n)
        return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))

    def to_dict(self, customers: bool = True) -> dict:
        """The JSON document of ``python -m explain drivers`` (``customers``: list each segment's ids)."""
        return {
            "customers": self.n_customers,
            "window": self.window_text,
            "sentence": self.sentence,
            "source": self.source,
            "ranking": [{"rank": k + 1, "feature": r.feature.name, "label": r.feature.label, "input": r.feature.input,
                         "role": r.feature.role, "mean_abs": r.mean_abs, "mean_signed": r.mean_signed,
                         "share": r.share, "direction": r.direction, "customers_with_data": r.customers}
                        for k, r in enumerate(self.ranking)],
            "time_profile": [{"input": p.input, "periods": list(p.periods),
                              "periods_before_last": p.before_last.tolist(), "mean_abs": _floats(p.mean_abs),
                              "mean_signed": _floats(p.mean_signed), "customers": p.customers.tolist(),
                              "recent_periods_90": p.recent_periods, "last_period_share": p.last_share}
                             for p in self.time_profiles],
            "segments": [{"name": s.name, "size": s.size, "share": s.share, "mean_prediction": s.mean_prediction,
                          "churn_rate": s.churn_rate, "highest_risk": s.highest_risk,
                          "top_drivers": [{"feature": d.feature.name, "label": d.feature.label,
                                           "input": d.feature.input, "mean_attribution": d.mean_attribution,
                                           "words": d.words} for d in s.drivers],
                          **({"customers": list(s.customers)} if customers else {})}
                         for s in self.segments],
            "segmentation": {"k": len(self.segments), "silhouette": {str(k): v for k, v in self.silhouette.items()},
                             "seed": SEED, "method": "k-means on the unit-length positive parts of the attribution "
                                                       "vectors (the reasons that raise the prediction)"},
            "drift": None if self.drift is None else {
                "sentence": self.drift.sentence, "level": self.drift.level, "resamples": self.drift.resamples,
                "customers_before": self.drift.customers_before, "customers_after": self.drift.customers_after,
                "features": [{"feature": r.feature.name, "label": r.feature.label, "input": r.feature.input,
                              "before": r.before, "after": r.after, "change": r.change, "low": r.low, "high": r.high,
                              "changed": r.changed} for r in self.drift.rows]},
        }


def _floats(values) -> list:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(values, np.float64)]


# ----------------------------------------------------------------------------- one pass over the rows


@dataclass
class _Pass:
    """What one pass over the rows keeps: per-customer summaries and the time profile's sums."""

    ids: list = field(default_factory=list)
    prediction: list = field(default_factory=list)
    values: list = field(default_factory=list)
    attributions: list = field(default_factory=list)
    trend: list = field(default_factory=list)
    abs_sum: dict = field(default_factory=dict)      # key -> (T,)
    signed_sum: dict = field(default_factory=dict)
    count: dict = field(default_factory=dict)


def _window_of(window, t: int) -> int:
    if window is None:
        return t
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or not 1 <= window <= t:
        raise ExplainError(BAD_WINDOW.format(t=t, value=window))
    return int(window)


def _nanmean(values, axis):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # an all-padding slice: NaN, as meant
        return np.nanmean(values, axis=axis)


def _nansum(values, axis):
    """Sum ignoring NaN; NaN where every value is NaN (no data, not zero)."""
    total = np.nansum(values, axis=axis)
    return np.where(np.isnan(values).all(axis=axis), np.nan, total)


def _read(rows_iter: Iterable[Rows], layout: Layout, window, recent: int | None) -> _Pass:
    acc = _Pass()
    for rows in rows_iter:
        k = len(rows.ids)
        if k == 0:
            continue
        values, attrs, trends = [], [], []
        for key, role, columns, _, periods in layout.inputs:
            v = np.asarray(rows.values[key], np.float64).reshape(k, *(() if role == "static" else (len(periods),)),
                                                                 len(columns))
            a = np.asarray(rows.attributions[key], np.float64).reshape(v.shape)
            if role == "static":
                values.append(v)
                attrs.append(a)
                trends.append(np.full(v.shape, np.nan))
                continue
            t = v.shape[1]
            w = _window_of(window, t)
            values.append(_nanmean(v[:, t - w:], 1))          # (k, F)
            attrs.append(_nansum(a[:, t - w:], 1))            # (k, F)
            r = min(recent or max(1, t // 4), t - 1) if t > 1 else 0
            trends.append(_nanmean(v[:, t - r:], 1) - _nanmean(v[:, :t - r], 1) if r else np.full((k, v.shape[2]),
                                                                                                  np.nan))
            has = ~np.isnan(a).all(axis=2)                    # (k, T): the customer has data in the period
            acc.abs_sum[key] = acc.abs_sum.get(key, 0.0) + np.nansum(np.abs(a), axis=(0, 2))
            acc.signed_sum[key] = acc.signed_sum.get(key, 0.0) + np.nansum(a, axis=(0, 2))
            acc.count[key] = acc.count.get(key, 0) + has.sum(axis=0)
        acc.ids.append(np.asarray(rows.ids, dtype=object))
        acc.prediction.append(np.asarray(rows.prediction, np.float64).reshape(k))
        acc.values.append(np.concatenate(values, axis=1))
        acc.attributions.append(np.concatenate(attrs, axis=1))
        acc.trend.append(np.concatenate(trends, axis=1))
    return acc


def _stack(parts, width: int) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, width))


# ----------------------------------------------------------------------------- ranking and words


def rank(features, attributions: np.ndarray) -> tuple:
    """(Ranked, ...) by mean |attribution| over the customers with data (largest first)."""
    mean_abs = _nanmean(np.abs(attributions), 0)
    mean_signed = _nanmean(attributions, 0)
    counts = (~np.isnan(attributions)).sum(axis=0)
    mean_abs, mean_signed = np.nan_to_num(mean_abs), np.nan_to_num(mean_signed)
    total = float(mean_abs.sum())
    order = np.argsort(-mean_abs, kind="stable")
    return tuple(Ranked(features[j], float(mean_abs[j]), float(mean_signed[j]),
                        float(mean_abs[j] / total) if total > 0 else 0.0, int(counts[j])) for j in order)


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %"


def ranking_sentence(ranking, n_customers: int, window_text: str, top: int = SENTENCE_TOP) -> str:
    """The ranking in words: the top drivers, their shares and directions, and the rest."""
    named = [r for r in ranking[:top] if r.mean_abs > 0]
    if not named:
        return f"Across {n_customers:,} customers, no feature moves the prediction (every attribution is zero)."
    parts = [f"{r.feature.label} ({_percent(r.share)}, {_DIRECTION_WORDS[r.direction]})" for r in named]
    text = f"Across {n_customers:,} customers, the prediction is driven most by {_and(parts)}."
    rest = len(ranking) - len(named)
    if rest > 0:
        text += f" The other {rest} features carry {_percent(sum(r.share for r in ranking[len(named):]))}."
    return text + (f" Shares of all attribution (mean |attribution| per customer); temporal features summed over "
                   f"{window_text}.")


_DIRECTION_WORDS = {"raises": "mostly raising it", "lowers": "mostly lowering it", "either way": "either way"}


def _and(parts: Sequence[str]) -> str:
    parts = list(parts)
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _lower(label: str) -> str:
    """A display name inside a sentence: first letter lower-cased unless it starts an acronym."""
    if len(label) > 1 and label[0].isupper() and not label[1].isupper():
        return label[0].lower() + label[1:]
    return label


def _binary(values: np.ndarray) -> bool:
    finite = values[np.isfinite(values)]
    return finite.size > 0 and bool(np.isin(finite, (0.0, 1.0)).all())


def _z(segment: np.ndarray, base: np.ndarray) -> float:
    """How far the segment's mean lies from the typical customer (the median of ``base``), in
    units of ``base``'s spread (robust to a small extreme group: the interquartile range, or the
    standard deviation when that is 0)."""
    finite = base[np.isfinite(base)]
    if finite.size == 0 or not np.isfinite(segment).any():
        return 0.0
    low, middle, high = np.percentile(finite, (25, 50, 75))
    spread = (high - low) or float(np.std(finite))
    return 0.0 if spread == 0 else (float(np.nanmean(segment)) - middle) / spread


def driver_words(feature: Feature, members: np.ndarray, values: np.ndarray, trend: np.ndarray, j: int) -> str:
    """How the segment ``members`` (bool (n,)) stands on feature ``j``, in words, against the typical
    customer (:func:`_z`):

    * a 0/1 static feature: "month-to-month contract" or "no month-to-month contract" (most
      members have it, or not);
    * a temporal feature whose recent change sets the segment apart more than its level:
      "rising support calls" / "falling data usage" when the members' own history moves that
      way, "no rise in ..." / "no fall in ..." when they only move less than the others;
    * else "high ..." / "low ...".
    """
    label = _lower(feature.label)
    column = values[:, j]
    if feature.role == "static" and _binary(column):
        share = np.nanmean(column[members]) if np.isfinite(column[members]).any() else 0.0
        return label if share >= 0.5 else f"no {label}"
    level = _z(column[members], column)
    change = _z(trend[members, j], trend[:, j]) if feature.role == "temporal" else 0.0
    if abs(change) > abs(level):
        own = float(np.nanmean(trend[members, j]))
        if change > 0:
            return f"rising {label}" if own > 0 else f"no fall in {label}"
        return f"falling {label}" if own < 0 else f"no rise in {label}"
    return f"{'high' if level >= 0 else 'low'} {label}"


# ----------------------------------------------------------------------------- time profile


def _profile(key: str, periods, abs_sum, signed_sum, count, share: float = RECENT_SHARE) -> TimeProfile:
    abs_sum, signed_sum = np.asarray(abs_sum, np.float64), np.asarray(signed_sum, np.float64)
    count = np.asarray(count, np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_abs = np.where(count > 0, abs_sum / np.maximum(count, 1), np.nan)
        mean_signed = np.where(count > 0, signed_sum / np.maximum(count, 1), np.nan)
    total = float(abs_sum.sum())
    if total > 0:
        from_last = np.cumsum(abs_sum[::-1]) / total  # share held by the last 1, 2, ... periods
        recent = int(np.searchsorted(from_last, share - 1e-12) + 1)
        last = float(abs_sum[-1] / total)
    else:
        recent, last = len(abs_sum), 0.0
    return TimeProfile(key, tuple(periods), mean_abs, mean_signed, count, min(recent, len(abs_sum)), last)


def profile_sentence(profile: TimeProfile, share: float = RECENT_SHARE) -> str:
    """The time profile in words."""
    t = len(profile.periods)
    return (f"The last {profile.recent_periods} of {t} periods hold {_percent(share)} of the history's "
            f"|attribution| over every customer; the last period alone ({profile.periods[-1]}) holds "
            f"{_percent(profile.last_share)}.")


# ----------------------------------------------------------------------------- segments


def reason_vectors(attributions: np.ndarray) -> np.ndarray:
    """Each customer's reasons: the positive part of its attribution vector (no data: 0) scaled to
    length 1 (a customer whom nothing pushes up stays the zero vector)."""
    x = np.clip(np.nan_to_num(attributions), 0.0, None)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def cluster(attributions: np.ndarray, seed: int = SEED, k_range=K_RANGE) -> tuple[np.ndarray, dict]:
    """(segment per customer (n,) int, {k: silhouette}) of k-means on :func:`reason_vectors`, the k
    of the best silhouette within ``k_range``; one segment when the profiles do not separate."""
    import sklearn.cluster  # noqa: F401 - loaded first: the limit applies to the thread pools loaded so far
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1):  # small arrays: one thread is faster, and never stalls on a busy machine
        return _cluster(attributions, seed, k_range)


def _cluster(attributions: np.ndarray, seed: int, k_range) -> tuple[np.ndarray, dict]:
    from sklearn.cluster import KMeans
    from sklearn.metrics import pairwise_distances, silhouette_score

    x = reason_vectors(attributions)
    n = x.shape[0]
    rng = np.random.default_rng(seed)
    fit_rows = np.sort(rng.choice(n, size=FIT_SAMPLE, replace=False)) if n > FIT_SAMPLE else np.arange(n)
    fit = x[fit_rows]
    distinct = np.unique(fit.round(9), axis=0).shape[0]
    scored_rows = (np.sort(rng.choice(fit.shape[0], size=SILHOUETTE_SAMPLE, replace=False))
                   if fit.shape[0] > SILHOUETTE_SAMPLE else np.arange(fit.shape[0]))
    distances = pairwise_distances(fit[scored_rows])  # once for every k: (m, m)
    scores, models = {}, {}
    for k in range(k_range[0], min(k_range[1], distinct - 1) + 1):
        model = KMeans(n_clusters=k, n_init=N_INIT, random_state=seed).fit(fit)
        assigned = model.labels_[scored_rows]
        if len(np.unique(assigned)) < 2:
            continue
        scores[k] = float(silhouette_score(distances, assigned, metric="precomputed"))
        models[k] = model
    if not scores:
        return np.zeros(n, np.int64), scores
    best = max(scores, key=lambda k: (scores[k], -k))
    model = models[best]
    labels = model.labels_ if fit.shape[0] == n else np.concatenate(
        [model.predict(x[i:i + 65536]) for i in range(0, n, 65536)])
    return np.asarray(labels, np.int64), scores


def describe_segments(assigned: np.ndarray, features, customers, prediction, outcome, values, attributions,
                      trend) -> tuple[tuple, np.ndarray]:
    """(Segment, ...) highest mean prediction first, and the segment of each customer renumbered
    in that order."""
    n = len(customers)
    found = [g for g in np.unique(assigned)]
    order = sorted(found, key=lambda g: -float(np.mean(prediction[assigned == g])))
    renumber = {g: i for i, g in enumerate(order)}
    segments, used = [], set()
    for g in order:
        members = assigned == g
        mean = np.nan_to_num(_nanmean(attributions[members], 0))
        reasons = [j for j in np.argsort(-mean, kind="stable") if mean[j] > 0 and mean[j] >= NAME_SHARE * mean.max()]
        others = [j for j in np.argsort(-np.abs(mean), kind="stable") if j not in reasons and mean[j] != 0]
        drivers = [Driver(features[j], float(mean[j]), driver_words(features[j], members, values, trend, j))
                   for j in reasons + others]
        name = _name(drivers, max(1, min(NAME_DRIVERS, len(reasons))), used)
        rows = np.flatnonzero(members)
        rows = rows[np.argsort(-prediction[rows], kind="stable")]
        known = outcome[rows][np.isfinite(outcome[rows])] if outcome is not None else np.zeros(0)
        segments.append(Segment(
            name=name, size=int(rows.size), share=float(rows.size / n), mean_prediction=float(prediction[rows].mean()),
            churn_rate=float(known.mean()) if known.size else None, drivers=tuple(drivers[:TOP_DRIVERS]),
            mean_attributions=mean, rows=rows,
            customers=tuple(str(customers[i]) for i in rows)))
    return tuple(segments), np.array([renumber[g] for g in assigned], np.int64)


def _name(drivers, count: int, used: set) -> str:
    """The first ``count`` drivers' words, more when another segment has that name already."""
    if not drivers:
        name = "No effect (every attribution is zero)"
    else:
        name = None
        for count in range(count, len(drivers) + 1):
            words = ", ".join(d.words for d in drivers[:count])
            candidate = words[:1].upper() + words[1:]
            if candidate not in used:
                name = candidate
                break
        if name is None:
            name = candidate
    base, k = name, 2
    while name in used:
        name, k = f"{base} ({k})", k + 1
    used.add(name)
    return name


# ----------------------------------------------------------------------------- drift


def drift(features, after: np.ndarray, before: np.ndarray, *, resamples: int = RESAMPLES, level: float = DRIFT_LEVEL,
          seed: int = SEED) -> Drift:
    """The change of each feature's mean |attribution| from ``before`` (m, p) to ``after`` (n, p),
    with bootstrap intervals (see the module docstring)."""
    if after.shape[1] != before.shape[1]:
        raise ExplainError(OTHER_LAYOUT.format(why=f"{after.shape[1]} features against {before.shape[1]}"))
    rng = np.random.default_rng(seed)
    means, errors = zip(*(_bootstrap_mean_abs(data, resamples, rng) for data in (after, before)))
    p = after.shape[1]
    z = NormalDist().inv_cdf(1 - (1 - level) / (2 * max(p, 1)))  # Bonferroni over the p features
    se = np.hypot(errors[0], errors[1])
    change = means[0] - means[1]
    rows = sorted((DriftRow(features[j], float(means[1][j]), float(means[0][j]), float(change[j] - z * se[j]),
                            float(change[j] + z * se[j])) for j in range(p)), key=lambda r: -abs(r.change))
    return Drift(tuple(rows), int(before.shape[0]), int(after.shape[0]), level, resamples,
                 drift_sentence(rows, int(before.shape[0]), int(after.shape[0]), level))


def _bootstrap_mean_abs(data: np.ndarray, resamples: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(mean |attribution| per feature (p,), its bootstrap standard error (p,)) over the rows of
    ``data`` (n, p), NaN: no data. The customers are shuffled into ``BOOTSTRAP_GROUPS`` groups and
    the groups resampled (a random-block bootstrap: the same standard error for a mean, at a cost
    independent of n)."""
    a = np.abs(data)
    has = ~np.isnan(a)
    n = a.shape[0]
    groups = min(n, BOOTSTRAP_GROUPS)
    group = rng.permutation(n) % groups                  # (n,) a random group of (almost) equal size
    sums = np.zeros((groups, a.shape[1]))
    counts = np.zeros((groups, a.shape[1]))
    np.add.at(sums, group, np.where(has, a, 0.0))
    np.add.at(counts, group, has.astype(np.float64))
    picks = rng.integers(groups, size=(resamples, groups))  # (R, G) groups drawn with replacement
    weights = np.stack([np.bincount(row, minlength=groups) for row in picks]).astype(np.float64)  # (R, G)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = np.nan_to_num((weights @ sums) / (weights @ counts))  # (R, p)
    return np.nan_to_num(_nanmean(a, 0)), boot.std(axis=0, ddof=1)


def drift_sentence(rows: Sequence[DriftRow], customers_before: int, customers_after: int, level: float) -> str:
    """Which drivers gained or lost weight, in words."""
    changed = [r for r in rows if r.changed]
    level = _percent(level)
    if not changed:
        return (f"No driver's weight changed beyond noise between the two stores ({customers_before:,} and "
                f"{customers_after:,} customers; {level} bootstrap intervals over all features).")
    parts = [f"{r.feature.label} {'gained' if r.change > 0 else 'lost'} weight (mean |attribution| "
             f"{r.before:.3g} to {r.after:.3g}, interval of the change {r.low:+.3g} to {r.high:+.3g})"
             for r in changed[:4]]
    more = f"; {len(changed) - 4} more changed" if len(changed) > 4 else ""
    return (f"Since the earlier store: {'; '.join(parts)}{more}. The other {len(rows) - len(changed)} "
            f"feature(s) stayed within noise ({level} bootstrap intervals over all features).")


# ----------------------------------------------------------------------------- the whole


def outcomes(bundle, ids) -> np.ndarray | None:
    """(n,) 1.0 where the customer's label is the bundle's positive label, 0.0 where it is
    another, NaN where the customer is not in the bundle; None when the bundle has no labels."""
    if getattr(bundle, "labels", None) is None:
        return None
    positive = label_text.positive(bundle)
    known = pd.Series([float(label_text.text(v) == positive) for v in bundle.labels],
                      index=[str(i) for i in bundle.ids])
    return pd.Series(np.asarray(ids, dtype=object).astype(str)).map(known).to_numpy(np.float64)


def compute(bundle, rows: Iterable[Rows], *, window: int | None = None, against: Iterable[Rows] | None = None,
            seed: int = SEED, source: dict | None = None, layout: Layout | None = None,
            labels: bool = True) -> Drivers:
    """:class:`Drivers` of the customers in ``rows`` (chunks of a store, or one :class:`Rows`);
    ``against``: the rows of an earlier store of the same layout (drift). ``labels``: take each
    customer's outcome from ``bundle`` (False when the rows come from another bundle's data)."""
    layout = layout or Layout.of(bundle)
    features = layout.features
    if isinstance(rows, Rows):
        rows = [rows]
    acc = _read(rows, layout, window, window)
    p = len(features)
    if not acc.ids:
        raise ExplainError(EMPTY.format(what=(source or {}).get("store", "the store")))
    customers = np.concatenate(acc.ids)
    prediction = np.concatenate(acc.prediction)
    values, attributions, trend = _stack(acc.values, p), _stack(acc.attributions, p), _stack(acc.trend, p)
    outcome = outcomes(bundle, customers) if labels else None
    window_text = "the whole history" if window is None else f"the last {window} period(s)"
    ranking = rank(features, attributions)
    sentence = ranking_sentence(ranking, len(customers), window_text)
    profiles = tuple(_profile(key, periods, acc.abs_sum[key], acc.signed_sum[key], acc.count[key])
                     for key, role, _, _, periods in layout.inputs if role == "temporal")
    assigned, scores = cluster(attributions, seed)
    segments, segment_of = describe_segments(assigned, features, customers, prediction, outcome, values,
                                             attributions, trend)
    change = None
    if against is not None:
        if isinstance(against, Rows):
            against = [against]
        earlier = _read(against, layout, window, window)
        if not earlier.ids:
            raise ExplainError(EMPTY.format(what="the earlier store"))
        change = drift(features, attributions, _stack(earlier.attributions, p), seed=seed)
    return Drivers(features=features, customers=customers, prediction=prediction, outcome=outcome, values=values,
                   attributions=attributions, window=window, ranking=ranking, sentence=sentence,
                   time_profiles=profiles, segments=segments, segment_of=segment_of, silhouette=scores,
                   drift=change, source=dict(source or {}))


def rows_of(attribution, bundle, ids: Sequence[str] | None = None) -> Rows:
    """An ``Attribution`` of ``ids`` (default: every customer of ``bundle``) as :class:`Rows`
    (padded cells NaN), for :func:`compute` without a store."""
    ids = [str(i) for i in (bundle.ids if ids is None else ids)]
    inputs = bundle.inputs_for(ids)
    values, attrs = {}, {}
    for key, array in attribution.inputs.items():
        a = np.asarray(array, np.float64).copy()
        raw = np.asarray(inputs[key])
        v = raw.astype(np.float64) if raw.dtype.kind in "fiub" else np.full(raw.shape, np.nan)
        v = v.reshape(a.shape) if v.size == a.size else np.full(a.shape, np.nan)
        pad = attribution.padding.get(key)
        if pad is not None and np.any(pad):
            cells = np.asarray(pad, bool).reshape(pad.shape + (1,) * (a.ndim - 2))
            a = np.where(cells, np.nan, a)
            v = np.where(cells, np.nan, v)
        values[key], attrs[key] = v, a
    return Rows(np.asarray(ids, dtype=object), np.asarray(attribution.prediction, np.float64), values, attrs)


def drivers_of(attribution, bundle, ids: Sequence[str] | None = None, **options) -> Drivers:
    """:func:`compute` on attributions held in memory (``explain_customers``' result) instead of a store."""
    return compute(bundle, rows_of(attribution, bundle, ids), **options)


# ----------------------------------------------------------------------------- as arrays and JSON (a summary file)

PARTS_VERSION = 1


def to_parts(d: Drivers) -> tuple[dict, dict]:
    """(numbers: {name: array} of numbers and text only, description: a JSON-able dict) that
    :func:`from_parts` turns back into an equal :class:`Drivers` (what ``explain.batch.drivers``
    writes next to a store so that its summary is computed once)."""
    index = {f: j for j, f in enumerate(d.features)}
    arrays = {"customers": np.asarray(d.customers).astype(str), "prediction": d.prediction, "values": d.values,
              "attributions": d.attributions, "segment_of": d.segment_of}
    if d.outcome is not None:
        arrays["outcome"] = d.outcome
    for k, p in enumerate(d.time_profiles):
        arrays.update({f"profile{k}_mean_abs": p.mean_abs, f"profile{k}_mean_signed": p.mean_signed,
                       f"profile{k}_customers": p.customers})
    for k, s in enumerate(d.segments):
        arrays[f"segment{k}_mean"] = s.mean_attributions
    described = {
        "version": PARTS_VERSION, "features": [[f.name, f.label, f.input, f.role] for f in d.features],
        "window": d.window, "sentence": d.sentence, "source": d.source,
        "silhouette": [[k, v] for k, v in d.silhouette.items()],
        "ranking": [[index[r.feature], r.mean_abs, r.mean_signed, r.share, r.customers] for r in d.ranking],
        "profiles": [[p.input, list(p.periods), p.recent_periods, p.last_share] for p in d.time_profiles],
        "segments": [[s.name, s.size, s.share, s.mean_prediction, s.churn_rate,
                      [[index[v.feature], v.mean_attribution, v.words] for v in s.drivers]] for s in d.segments],
        "drift": None if d.drift is None else {
            "rows": [[index[r.feature], r.before, r.after, r.low, r.high] for r in d.drift.rows],
            "customers": [d.drift.customers_before, d.drift.customers_after], "level": d.drift.level,
            "resamples": d.drift.resamples, "sentence": d.drift.sentence}}
    return arrays, described


def from_parts(arrays: dict, described: dict) -> Drivers:
    """The :class:`Drivers` that :func:`to_parts` gave these parts of."""
    if described.get("version") != PARTS_VERSION:
        raise ValueError(f"a drivers summary of version {described.get('version')!r}, not {PARTS_VERSION}")
    features = tuple(Feature(*f) for f in described["features"])
    customers = np.asarray(arrays["customers"]).astype(object)
    prediction, segment_of = np.asarray(arrays["prediction"]), np.asarray(arrays["segment_of"], np.int64)
    outcome = arrays.get("outcome")
    segments = []
    for k, (name, size, share, mean_prediction, churn, drivers) in enumerate(described["segments"]):
        rows = np.flatnonzero(segment_of == k)
        rows = rows[np.argsort(-prediction[rows], kind="stable")]
        segments.append(Segment(name, size, share, mean_prediction, churn,
                                tuple(Driver(features[j], m, w) for j, m, w in drivers),
                                np.asarray(arrays[f"segment{k}_mean"]), rows, tuple(str(customers[i]) for i in rows)))
    profiles = tuple(TimeProfile(key, tuple(periods), np.asarray(arrays[f"profile{k}_mean_abs"]),
                                 np.asarray(arrays[f"profile{k}_mean_signed"]),
                                 np.asarray(arrays[f"profile{k}_customers"]), recent, last)
                     for k, (key, periods, recent, last) in enumerate(described["profiles"]))
    change = described["drift"]
    if change is not None:
        change = Drift(tuple(DriftRow(features[j], *numbers) for j, *numbers in change["rows"]), *change["customers"],
                       change["level"], change["resamples"], change["sentence"])
    return Drivers(features=features, customers=customers, prediction=prediction,
                   outcome=None if outcome is None else np.asarray(outcome), values=np.asarray(arrays["values"]),
                   attributions=np.asarray(arrays["attributions"]), window=described["window"],
                   ranking=tuple(Ranked(features[j], *numbers) for j, *numbers in described["ranking"]),
                   sentence=described["sentence"], time_profiles=profiles, segments=tuple(segments),
                   segment_of=segment_of, silhouette={int(k): v for k, v in described["silhouette"]}, drift=change,
                   source=dict(described["source"]))
