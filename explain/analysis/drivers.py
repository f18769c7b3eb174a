"""What drives the model's output across every customer: the global ranking, the values and
attributions behind a beeswarm and a dependence plot, the time profile, churn-reason segments
and drift between two stores. Arrays in, one frozen :class:`Drivers` out; no files here
(``explain.batch.drivers`` reads a store chunk by chunk, in the stores' row type, and calls :func:`compute`).

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
(direction), both relative to the baseline of the store (:func:`reference_words`: "the average
customer" for the mean baseline), and how a feature's value goes with its attribution (Spearman's
rho over a seeded sample: "more than the average customer raises it").

Feature groups: declared in ``bundle.json`` (``"groups"``), or else found from the data: features
whose customer-level values (static value; a history's mean over its real periods) correlate with
|Spearman| >= ``GROUP_RHO`` on a seeded sample of ``GROUP_SAMPLE`` customers, clustered by
complete linkage on 1 - |rho| cut at 1 - ``GROUP_RHO`` (as SHAP's partition masker clusters
features; complete linkage: every pair of a group correlates that much). A group's attribution is
the sum of its members' (exact: IG is additive); its share is the sum of its members' shares.

Churn-reason segments: k-means on every customer's reasons, the positive part of its attribution
vector (what raises its prediction; with groups, the groups' summed attributions) scaled to unit
length (the mix of reasons, not their size; customers whom nothing pushes up share the zero vector
and their own segment), k chosen by the silhouette score within 2-8, fitted on a seeded sample of
at most ``FIT_SAMPLE`` customers and applied to all. A segment is named by the features with the
largest mean effects in it that raise its risk (those whose |mean attribution| is at least ``NAME_SHARE`` of
the segment's largest and ``NEGLIGIBLE`` of the top feature's mean |attribution|: a small raising effect never
names a segment whose main effects lower its risk; such a segment is "Lower risk: ..." after them), in
words that compare the segment's mean value with everyone's mean (like with like). Drift: the
change of each feature's mean |attribution| between two stores, with a bootstrap interval
(``RESAMPLES`` resamples of the customers of each store, in random groups; normal interval from
the bootstrap standard error, Bonferroni-corrected over the features so that the family of intervals holds
at ``DRIFT_LEVEL``): a change is reported only when its interval excludes zero.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Iterable, NamedTuple, Protocol, Sequence

import numpy as np
import pandas as pd

from explain.analysis.report import input_views
from explain.core import labels as label_text
from explain.core.errors import ExplainError
from explain.core.text import unit_after

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
NAME_SHARE = 0.25       # a feature named has a |mean attribution| of at least this share of the largest
NEGLIGIBLE = 0.1        # a segment's effect under this share of the top feature's mean |attribution| names nothing
TOP_DRIVERS = 3         # drivers listed per segment
SENTENCE_TOP = 3        # drivers named in the ranking sentence
RELATION_SAMPLE = 20_000  # customers the value-attribution relation (Spearman) is measured on
RELATION_RHO = 0.3      # |rho| from which "more than ... raises it" is said
GROUP_SAMPLE = 5_000    # customers the feature groups are found on
GROUP_RHO = 0.7         # |Spearman| of the customer-level values from which features form a group
GROUP_NAMED = 3         # members named in a found group's name (more: "<first> and related")
GROUP_NAME_LENGTH = 40  # characters of a found group's name listing its members (longer: "<first> and related")

EMPTY = "There is nothing to summarise: {what} holds no customer."
BAD_WINDOW = "window must be a whole number of periods from 1 to {t} (or None for the whole history); got {value!r}."
OTHER_LAYOUT = ("The two stores do not hold the same features, so their drivers cannot be compared: {why}. "
                "Compare stores of bundles with the same static and temporal columns.")


# ----------------------------------------------------------------------------- the input


class Chunk(Protocol):
    """What :func:`compute` reads: k customers as a store chunk holds them (``explain.batch.store.Rows``, the
    stores' row type, or any object with these fields): for every model input (by the engine's key), the
    values and the attributions in the input's shape, (k, S) or (k, T, F), float64, NaN where there is no
    data (padding, or a text value)."""

    ids: np.ndarray              # (k,) str
    prediction: np.ndarray       # (k,)
    values: dict                 # key -> (k, S) or (k, T, F)
    attributions: dict           # key -> same shapes


@dataclass(frozen=True)
class Feature:
    """One column of one model input."""

    name: str    # the table column
    label: str   # its display name
    input: str   # the input's key ("static", "temporal", or the model's input name); "group" for a group
    role: str    # "static" | "temporal" | "group"
    unit: str = ""  # bundle.json "units" ("" when none)


@dataclass(frozen=True)
class Layout:
    """The inputs a store holds, in model order: (key, role, columns, labels, periods or None)."""

    inputs: tuple
    units: tuple = ()    # ((column, unit), ...) from bundle.json "units"
    groups: tuple = ()   # ((name, (column, ...)), ...) declared in bundle.json "groups"

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
        units = tuple((str(c), str(u)) for c, u in (getattr(bundle, "units", None) or {}).items())
        groups = tuple((str(name), tuple(str(c) for c in members))
                       for name, members in (getattr(bundle, "groups", None) or {}).items())
        return cls(tuple(out), units, groups)

    @property
    def features(self) -> tuple[Feature, ...]:
        units = dict(self.units)
        return tuple(Feature(c, lab, key, role, units.get(c, "")) for key, role, columns, names, _ in self.inputs
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
    value_effect: float = 0.0  # Spearman's rho of value and attribution (> 0: higher values raise the prediction)
    binary: bool = False       # a 0/1 feature ("having it raises it")

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

    @property
    def before_last(self) -> np.ndarray:
        """(T,) periods before the last: T-1, ..., 1, 0."""
        return np.arange(len(self.periods) - 1, -1, -1)

    @property
    def mass(self) -> np.ndarray:
        """(T,) the total |attribution| of each period over every customer (what the shares count)."""
        return np.nan_to_num(self.mean_abs) * self.customers

    @property
    def shares(self) -> np.ndarray:
        """(T,) each period's share of the history's total |attribution| over every customer: the
        quantity ``recent_periods`` and ``last_share`` count (the time profile's bars)."""
        mass = self.mass
        total = float(mass.sum())
        return mass / total if total > 0 else np.zeros_like(mass)

    @property
    def last_share(self) -> float:
        """The last period's share of the history's total |attribution| (the last bar of :attr:`shares`)."""
        return float(self.shares[-1]) if len(self.periods) else 0.0

    @property
    def peak(self) -> int:
        """The period holding the largest share (the tallest bar)."""
        return int(np.argmax(self.shares)) if len(self.periods) else 0

    @property
    def recent(self) -> np.ndarray:
        """(T,) bool: the period is one of the last ``recent_periods``."""
        t = len(self.periods)
        return np.arange(t) >= t - self.recent_periods


@dataclass(frozen=True)
class Driver:
    """One of a segment's drivers."""

    feature: Feature
    mean_attribution: float   # mean over the segment (> 0: raises its prediction)
    words: str                # "rising support calls", "low tenure (months)", "month-to-month contract"
    segment_value: float = float("nan")   # the segment's mean of ``measure``
    everyone_value: float = float("nan")  # every customer's mean of ``measure``
    measure: str = "mean"     # "mean" (value; a history's mean over the window), "share" (a 0/1 feature's
                              # share of 1), "change" (a history's recent change: last quarter minus before)

    @property
    def raises(self) -> bool:
        return self.mean_attribution > 0


@dataclass(frozen=True)
class Segment:
    """Customers with a similar profile of reasons (attribution vector)."""

    name: str
    size: int
    share: float                   # of every customer
    mean_prediction: float
    churn_rate: float | None       # share with the positive label (None without labels)
    drivers: tuple                 # (Driver, ...) its main effects: largest |mean attribution| first, at
                                   # most TOP_DRIVERS, each at least NAME_SHARE of the largest
    mean_attributions: np.ndarray = field(repr=False)  # (p,) mean attribution of every feature (no data: 0)
    rows: np.ndarray = field(repr=False)   # rows of Drivers.customers, highest prediction first
    customers: tuple = field(repr=False)   # their ids, in the same order

    @property
    def highest_risk(self) -> str:
        return self.customers[0]


@dataclass(frozen=True)
class Group:
    """Features that carry one signal: declared in ``bundle.json`` ("groups"), or found from the
    data (their customer-level values move together). Its numbers add up its members' (IG is
    additive: the group's attribution of a customer is the sum of its members')."""

    name: str
    columns: tuple           # (int, ...) columns of Drivers.features, largest mean |attribution| first
    members: tuple           # (Feature, ...) the same, as features
    found: bool              # True: found from the data; False: declared in bundle.json
    mean_abs: float          # sum of the members' mean |attribution|
    mean_signed: float       # sum of the members' mean attribution (= the mean of the summed attribution)
    share: float             # sum of the members' shares
    together: float          # mean over customers of |the members' summed attribution| (less where they cancel)
    customers: int           # customers with data for any member
    value_effect: float      # the first (largest) member's Spearman's rho of value and attribution
    binary: bool = False     # the first member is a 0/1 feature

    @property
    def feature(self) -> Feature:
        """The group as one row of a ranking or a heatmap."""
        return Feature(self.name, self.name, "group", "group")

    @property
    def ranked(self) -> Ranked:
        return Ranked(self.feature, self.mean_abs, self.mean_signed, self.share, self.customers, self.value_effect,
                      self.binary)

    @property
    def how(self) -> str:
        return FOUND_WORDS if self.found else DECLARED_WORDS


FOUND_WORDS = "found from the data: these move together"
DECLARED_WORDS = "declared in bundle.json"


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
    groups: tuple = ()                 # (Group, ...) largest share first; () when no feature has a partner
    baseline: str | None = None        # the store's baseline spec ("mean", "cohort:0", ...): what effects are against

    @property
    def reference(self) -> str:
        """What every effect is measured against, in words ("the average customer")."""
        return reference_words(self.baseline)

    @property
    def grouped_ranking(self) -> tuple:
        """The ranking with each group as one row (its members' sums) in place of its members."""
        return group_ranking(self.ranking, self.groups)

    @property
    def group_sentence(self) -> str | None:
        """The ranking sentence at group level (None without groups)."""
        if not self.groups:
            return None
        return ranking_sentence(self.grouped_ranking, self.n_customers, self.window_text, self.baseline,
                                groups=self.groups)

    def words(self, grouped: bool = False) -> str:
        """The ranking in words, at group level when ``grouped`` and there are groups."""
        return (self.group_sentence if grouped else None) or self.sentence

    def group_of(self, feature) -> Group | None:
        """The group that ``feature`` (a Feature or its column name) belongs to, or None."""
        for g in self.groups:
            if any(feature in (f, f.name) for f in g.members):
                return g
        return None

    def segment_effects(self, grouped: bool = False, top: int | None = None) -> tuple[tuple, np.ndarray]:
        """(rows: Feature per row, z: (segments, rows) mean attribution) of the segments over the
        ranking's rows (the top ``top``); with ``grouped``, a group's row is the sum of its
        members' means (exact: a mean is additive)."""
        rows = (self.grouped_ranking if grouped else self.ranking)[:top]
        by_name = {g.name: g for g in self.groups}
        columns = [by_name[r.feature.name].columns if r.feature.role == "group" else (self.column(r.feature),)
                   for r in rows]
        z = np.array([[float(np.sum(s.mean_attributions[list(c)])) for c in columns] for s in self.segments])
        return tuple(r.feature for r in rows), z.reshape(len(self.segments), len(rows))

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
            "reference": self.reference,
            "ranking": [{"rank": k + 1, "feature": r.feature.name, "label": r.feature.label, "input": r.feature.input,
                         "role": r.feature.role, "mean_abs": r.mean_abs, "mean_signed": r.mean_signed,
                         "share": r.share, "direction": r.direction,
                         "direction_words": direction_words(r, self.baseline), "value_effect": r.value_effect,
                         "customers_with_data": r.customers, **({"unit": r.feature.unit} if r.feature.unit else {}),
                         **({"group": g.name} if (g := self.group_of(r.feature)) is not None else {})}
                        for k, r in enumerate(self.ranking)],
            "groups": [{"name": g.name, "features": [f.name for f in g.members], "labels": [f.label for f in g.members],
                        "found": g.found, "how": g.how, "share": g.share, "mean_abs": g.mean_abs,
                        "mean_signed": g.mean_signed, "mean_abs_together": g.together,
                        "direction_words": direction_words(g.ranked, self.baseline)} for g in self.groups],
            "group_sentence": self.group_sentence,
            "time_profile": [{"input": p.input, "periods": list(p.periods),
                              "periods_before_last": p.before_last.tolist(), "mean_abs": _floats(p.mean_abs),
                              "mean_signed": _floats(p.mean_signed), "customers": p.customers.tolist(),
                              "shares": _floats(p.shares), "recent_periods_90": p.recent_periods,
                              "last_period_share": p.last_share}
                             for p in self.time_profiles],
            "segments": [{"name": s.name, "size": s.size, "share": s.share, "mean_prediction": s.mean_prediction,
                          "churn_rate": s.churn_rate, "highest_risk": s.highest_risk,
                          "top_drivers": [{"feature": d.feature.name, "label": d.feature.label,
                                           "input": d.feature.input, "mean_attribution": d.mean_attribution,
                                           "effect": "raises" if d.raises else "lowers", "words": d.words,
                                           "measure": d.measure, "segment_value": _float(d.segment_value),
                                           "everyone_value": _float(d.everyone_value),
                                           "reason": reason_text(d)} for d in s.drivers],
                          **({"customers": list(s.customers)} if customers else {})}
                         for s in self.segments],
            "segmentation": {"k": len(self.segments), "silhouette": {str(k): v for k, v in self.silhouette.items()},
                             "seed": SEED, "method": "k-means on the unit-length positive parts of the attribution "
                                                       "vectors (the reasons that raise the prediction)"
                                                       + ("; each group's members summed" if self.groups else ""),
                             "named_by": f"the largest mean effects that raise the risk, each at least "
                                         f"{NAME_SHARE:.0%} of the segment's largest and {NEGLIGIBLE:.0%} of the top "
                                         "feature's mean "
                                         "|attribution| ('Lower risk: ...' after lowering ones when none raises); "
                                         "words compare the segment's mean with everyone's mean"},
            "drift": None if self.drift is None else {
                "sentence": self.drift.sentence, "level": self.drift.level, "resamples": self.drift.resamples,
                "customers_before": self.drift.customers_before, "customers_after": self.drift.customers_after,
                "features": [{"feature": r.feature.name, "label": r.feature.label, "input": r.feature.input,
                              "before": r.before, "after": r.after, "change": r.change, "low": r.low, "high": r.high,
                              "changed": r.changed} for r in self.drift.rows]},
        }


def _floats(values) -> list:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(values, np.float64)]


def _float(value) -> float | None:
    return float(value) if np.isfinite(value) else None


# ----------------------------------------------------------------------------- one pass over the rows


@dataclass
class _Pass:
    """What one pass over the rows keeps: per-customer summaries and the time profile's sums."""

    ids: list = field(default_factory=list)
    prediction: list = field(default_factory=list)
    values: list = field(default_factory=list)
    attributions: list = field(default_factory=list)
    trend: list = field(default_factory=list)
    whole: list = field(default_factory=list)        # with a window: the values over the whole history (float32)
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


def _read(rows_iter: Iterable[Chunk], layout: Layout, window, recent: int | None) -> _Pass:
    acc = _Pass()
    for rows in rows_iter:
        k = len(rows.ids)
        if k == 0:
            continue
        values, attrs, trends, whole = [], [], [], []
        for key, role, columns, _, periods in layout.inputs:
            v = np.asarray(rows.values[key], np.float64).reshape(k, *(() if role == "static" else (len(periods),)),
                                                                 len(columns))
            a = np.asarray(rows.attributions[key], np.float64).reshape(v.shape)
            if role == "static":
                values.append(v)
                attrs.append(a)
                trends.append(np.full(v.shape, np.nan))
                whole.append(v)
                continue
            t = v.shape[1]
            w = _window_of(window, t)
            values.append(_nanmean(v[:, t - w:], 1))          # (k, F)
            whole.append(values[-1] if w == t else _nanmean(v, 1))
            attrs.append(window_sum(a, w))                    # (k, F)
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
        if window is not None:
            acc.whole.append(np.concatenate(whole, axis=1).astype(np.float32))
    return acc


def window_sum(a: np.ndarray, w: int) -> np.ndarray:
    """(k, F) a history's attributions (k, T, F) summed over its last ``w`` periods (NaN: no data in any)."""
    return _nansum(a[:, a.shape[1] - w:], 1)


def effects(rows: Chunk, layout: Layout, window: int | None = None) -> np.ndarray:
    """(k, p) each customer's attribution per feature of ``layout`` (a static one as it is, a temporal one summed
    over the window: :func:`window_sum`), NaN where there is no data: the numbers the ranking and drift average."""
    k, out = len(rows.ids), []
    for key, role, columns, _, periods in layout.inputs:
        shape = (k, len(columns)) if role == "static" else (k, len(periods), len(columns))
        a = np.asarray(rows.attributions[key], np.float64).reshape(shape)
        out.append(a if role == "static" else window_sum(a, _window_of(window, shape[1])))
    return np.concatenate(out, axis=1) if out else np.zeros((k, 0))


def _stack(parts, width: int) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, width))


# ----------------------------------------------------------------------------- ranking and words


def rank(features, attributions: np.ndarray, values: np.ndarray | None = None, seed: int = SEED) -> tuple:
    """(Ranked, ...) by mean |attribution| over the customers with data (largest first); with
    ``values``, each with its value-attribution relation (:func:`relation`)."""
    effect = np.zeros(attributions.shape[1]) if values is None else relation(values, attributions, seed)
    mean_abs = _nanmean(np.abs(attributions), 0)
    mean_signed = _nanmean(attributions, 0)
    counts = (~np.isnan(attributions)).sum(axis=0)
    mean_abs, mean_signed = np.nan_to_num(mean_abs), np.nan_to_num(mean_signed)
    total = float(mean_abs.sum())
    order = np.argsort(-mean_abs, kind="stable")
    binary = [values is not None and f.role == "static" and _binary(values[:, j]) for j, f in enumerate(features)]
    return tuple(Ranked(features[j], float(mean_abs[j]), float(mean_signed[j]),
                        float(mean_abs[j] / total) if total > 0 else 0.0, int(counts[j]), float(effect[j]),
                        bool(binary[j])) for j in order)


def _sample_rows(n: int, size: int, seed: int) -> np.ndarray:
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


def spearman(x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """Spearman's rho, the one way this module measures it: Pearson's r of the ranks (pandas; ties: average
    ranks; NaN: no data). Without ``y``: (p, p) between the columns of ``x`` (n, p), each pair over the rows
    where both have data, NaN under 10 such rows or for a constant column. With ``y`` (n, p): (p,) between each
    column of ``x`` and the same column of ``y``, ranked over the rows where both have data (NaN: no variation)."""
    frame = pd.DataFrame(np.asarray(x, np.float64))
    if y is None:
        return frame.rank().corr(method="pearson", min_periods=10).to_numpy(np.float64)
    other = pd.DataFrame(np.asarray(y, np.float64))
    both = frame.notna() & other.notna()
    return frame.where(both).rank().corrwith(other.where(both).rank()).to_numpy(np.float64)


def relation(values: np.ndarray, attributions: np.ndarray, seed: int = SEED, size: int = RELATION_SAMPLE) -> np.ndarray:
    """(p,) Spearman's rho (:func:`spearman`) between each feature's value and its attribution over a seeded
    sample of at most ``size`` customers with data (0 where it cannot be measured, or with fewer than 10 such
    customers): > 0, a higher value goes with a higher prediction."""
    rows = _sample_rows(values.shape[0], size, seed)
    v, a = np.asarray(values[rows], np.float64), np.asarray(attributions[rows], np.float64)  # (m, p)
    both = np.isfinite(v) & np.isfinite(a)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", category=RuntimeWarning)  # a constant column: NaN, said as 0
        rho = spearman(np.where(both, v, np.nan), np.where(both, a, np.nan))
    return np.where((both.sum(axis=0) >= 10) & np.isfinite(rho), rho, 0.0)


# ----------------------------------------------------------------------------- what effects are against


def reference_words(baseline) -> str:
    """The baseline of a store in words: what every attribution is measured against."""
    kind, _, argument = str(baseline or "").partition(":")
    words = {"mean": "the average customer", "median": "the typical (median) customer",
             "zero": "a customer with every feature at 0",
             "customer": f"customer {argument}", "cohort": f"the average customer whose outcome is {argument}",
             "sample": f"{argument or 'several'} customers drawn at random (their average effect)",
             "flat": "each customer's own history held flat at its average",
             "blur": "each customer's own history smoothed over time",
             "previous": f"each customer {argument or 1} period(s) earlier"}
    return words.get(kind, "the baseline")


def _compared_with(baseline) -> str | None:
    """What "higher than ..." compares a value with, or None where a level comparison means nothing."""
    kind, _, argument = str(baseline or "").partition(":")
    return {"mean": "the average customer", "median": "the typical customer", "customer": f"customer {argument}",
            "cohort": "that average customer", "sample": "the sampled customers"}.get(kind)


def direction_words(r: Ranked, baseline=None, member: str | None = None) -> str:
    """How a ranked feature (or group) moves the prediction, relative to the baseline: "mostly
    raising it; lower than the average customer raises it". ``member``: for a group, the member
    whose values the comparison speaks of."""
    text = _DIRECTION_WORDS[r.direction]
    if abs(r.value_effect) >= RELATION_RHO and r.binary:
        return text + f"; {'having' if r.value_effect > 0 else 'not having'} {_lower(member) if member else 'it'} " \
                      f"raises it"
    if abs(r.value_effect) >= RELATION_RHO:
        way = "higher" if r.value_effect > 0 else "lower"
        what = f"{way} {_lower(member)}" if member else way
        than = _compared_with(baseline)
        text += f"; {what} than {than} raises it" if than else f"; {'a ' if not member else ''}{what} " \
                                                              f"{'value ' if not member else ''}raises it"
    return text


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %"


def ranking_sentence(ranking, n_customers: int, window_text: str, baseline=None, top: int = SENTENCE_TOP,
                     groups: Sequence[Group] = ()) -> str:
    """The ranking in words: the top drivers, their shares and directions relative to the baseline
    (:func:`direction_words`), and the rest; with ``groups`` (a grouped ranking), the groups' members."""
    named = [r for r in ranking[:top] if r.mean_abs > 0]
    reference = reference_words(baseline)
    if not named:
        return f"Across {n_customers:,} customers, no feature moves the prediction (every attribution is zero)."
    by_name = {g.name: g for g in groups}
    parts = []
    for r in named:
        group = by_name.get(r.feature.name) if r.feature.role == "group" else None
        member = group.members[0].label if group is not None else None
        kind = "" if group is None else f"group of {len(group.members)}, "
        parts.append(f"{r.feature.label} ({kind}{_percent(r.share)}, {direction_words(r, baseline, member)})")
    text = (f"Across {n_customers:,} customers, relative to {reference} (the baseline), the prediction is driven "
            f"most by {_and(parts)}.")
    rest = len(ranking) - len(named)
    if rest > 0:
        what = "rows" if groups else "features"
        text += f" The other {rest} {what} carry {_percent(sum(r.share for r in ranking[len(named):]))}."
    if groups:
        text += " Groups of related features: " + "; ".join(
            (f"{g.name} ({g.how})" if g.name == _and([g.members[0].label] + [_lower(f.label) for f in g.members[1:]])
             else f"{g.name} ({_and([f.label for f in g.members])}; {g.how})") for g in groups) + "."
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
    """How far the segment's mean lies from every customer's mean (like with like: a mean against a
    mean, so that "high" always means above everyone's mean, even on a skewed feature), in units of
    ``base``'s spread (the interquartile range, or the standard deviation when that is 0)."""
    finite = base[np.isfinite(base)]
    if finite.size == 0 or not np.isfinite(segment).any():
        return 0.0
    low, high = np.percentile(finite, (25, 75))
    spread = (high - low) or float(np.std(finite))
    return 0.0 if spread == 0 else (float(np.nanmean(segment)) - float(np.mean(finite))) / spread


def driver_words(feature: Feature, members: np.ndarray, values: np.ndarray, trend: np.ndarray, j: int) -> str:
    """How the segment ``members`` (bool (n,)) stands on feature ``j``, in words, against every
    customer (:func:`_z`: the segment's mean against everyone's mean):

    * a 0/1 static feature: "month-to-month contract" or "no month-to-month contract" (most
      members have it, or not; "more often ..." / "less often ..." when the majority says
      otherwise than the comparison with everyone's share);
    * a temporal feature whose recent change sets the segment apart more than its level:
      "rising support calls" / "falling data usage" when the members' own history moves that
      way, "no rise in ..." / "no fall in ..." when they only move less than the others;
    * else "high ..." / "low ...".
    """
    label = _lower(feature.label)
    column = values[:, j]
    if feature.role == "static" and _binary(column):
        share = np.nanmean(column[members]) if np.isfinite(column[members]).any() else 0.0
        everyone = np.nanmean(column) if np.isfinite(column).any() else 0.0
        if share >= everyone:
            return label if share >= 0.5 else f"more often {label}"
        return f"no {label}" if share < 0.5 else f"less often {label}"
    level = _z(column[members], column)
    change = _z(trend[members, j], trend[:, j]) if feature.role == "temporal" else 0.0
    if abs(change) > abs(level):
        own = float(_nanmean(trend[members, j], 0))
        if change > 0:
            return f"rising {label}" if own > 0 else f"no fall in {label}"
        return f"falling {label}" if own < 0 else f"no rise in {label}"
    return f"{'high' if level >= 0 else 'low'} {label}"


def _measure(feature: Feature, words: str, members: np.ndarray, values: np.ndarray, trend: np.ndarray,
             j: int) -> tuple[str, float, float]:
    """(measure, the segment's mean, everyone's mean) behind ``words`` (see :class:`Driver`)."""
    column = values[:, j]
    if feature.role == "static" and _binary(column):
        measure = "share"
    elif feature.role == "temporal" and words.split(" ", 1)[0] in ("rising", "falling", "no"):
        measure, column = "change", trend[:, j]
    else:
        measure = "mean"
    return measure, float(_nanmean(column[members], 0)), float(_nanmean(column, 0))


def _number(value: float, unit: str = "", measure: str = "mean") -> str:
    if not np.isfinite(value):
        return "no data"
    if measure == "share":
        return f"{100 * value:.0f} %"
    text = f"{value:+.3g}" if measure == "change" else f"{value:.3g}"
    return f"{text} {unit}" if unit and unit != "share" else text


def reason_text(driver: Driver) -> str:
    """One of a segment's effects in the user's units: its value against everyone's, and the effect.
    "Tenure (months): 4.1 months on average here against 12.3 for everyone; lowers the risk by 0.083"."""
    f, m = driver.feature, driver.measure
    unit = unit_after(f.label, f.unit) or ""  # "Tenure (months): 9.75 on average", not "9.75 months"
    here = _number(driver.segment_value, unit, m)
    everyone = _number(driver.everyone_value, unit, m)
    if m == "share":
        value = f"{here} of this segment have it against {everyone} of everyone"
    elif m == "change":
        value = f"recent change {here} on average here against {everyone} for everyone"
    else:
        value = f"{here} on average here against {everyone} for everyone"
    way = "raises" if driver.raises else "lowers"
    return f"{driver.words[:1].upper() + driver.words[1:]} ({value}): {way} the risk by " \
           f"{abs(driver.mean_attribution):.3g} on average"


# ----------------------------------------------------------------------------- feature groups


def find_groups(values: np.ndarray, seed: int = SEED, *, size: int = GROUP_SAMPLE, rho: float = GROUP_RHO) -> list:
    """Columns of ``values`` (n, p: customer-level values, NaN: no data) that move together:
    [[column, ...], ...] of 2+ columns, each group's every pair with |Spearman's rho| >= ``rho``
    on a seeded sample of at most ``size`` customers (complete linkage on 1 - |rho|, cut at
    1 - ``rho``, as SHAP's partition masker clusters features)."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    p = values.shape[1]
    if p < 2 or values.shape[0] < 10:
        return []
    rows = _sample_rows(values.shape[0], size, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # a constant column: NaN, no partner
        r = spearman(values[rows])
    distance = 1.0 - np.abs(np.nan_to_num(r, nan=0.0))
    distance = np.clip((distance + distance.T) / 2, 0.0, 1.0)
    np.fill_diagonal(distance, 0.0)
    tree = linkage(squareform(distance, checks=False), method="complete")
    cluster_of = fcluster(tree, t=1.0 - rho + 1e-9, criterion="distance")
    groups = [np.flatnonzero(cluster_of == c).tolist() for c in np.unique(cluster_of)]
    return sorted((g for g in groups if len(g) >= 2), key=lambda g: g[0])


def _group_name(members: Sequence[Feature]) -> str:
    """A found group's name: its members' display names ("Orders, items and spend"), or the first
    one's and "and related" past ``GROUP_NAMED`` members or ``GROUP_NAME_LENGTH`` characters."""
    labels = [members[0].label] + [_lower(f.label) for f in members[1:]]
    joined = _and(labels)
    return joined if len(labels) <= GROUP_NAMED and len(joined) <= GROUP_NAME_LENGTH else f"{labels[0]} and related"


def define_groups(features, declared: Sequence = (), values=None, seed: int = SEED, *, size: int = GROUP_SAMPLE,
                  order=None) -> tuple[list, bool]:
    """The feature groups, by the one rule of the summary and of a bundle without a store
    (``explain.analysis.groups``): ([(name, [column, ...]), ...], found). The ``declared`` groups ((name,
    (column name, ...)), ...) that hold 2+ of ``features``; or, when none are declared, those found in the
    customer-level ``values`` ((n, p), or a function giving them, called only then) by :func:`find_groups` on
    at most ``size`` customers, named after their members (:func:`_group_name`). A group's columns are in the
    order of the key ``order`` (default: model order); a name is never another feature's or group's."""
    if declared:
        by_name = {}
        for j, f in enumerate(features):
            by_name.setdefault(f.name, []).append(j)
        wanted = [(str(name), [j for c in columns for j in by_name.get(str(c), [])]) for name, columns in declared]
    elif values is not None:
        wanted = [(None, g) for g in find_groups(values() if callable(values) else values, seed, size=size)]
    else:
        return [], False
    out, used = [], set()
    for name, columns in wanted:
        columns = sorted(dict.fromkeys(columns), key=order)
        if len(columns) < 2:
            continue
        name = name or _group_name([features[j] for j in columns])
        while name in used or name in {f.label for j, f in enumerate(features) if j not in columns}:
            name += " (group)"
        used.add(name)
        out.append((name, columns))
    return out, not declared


def make_groups(features, ranking, attributions: np.ndarray, declared: Sequence = (), values: np.ndarray | None = None,
                seed: int = SEED) -> tuple:
    """(Group, ...) largest share first: the groups of :func:`define_groups` (``declared``, or found in the
    customer-level ``values``), each with its members' numbers, its members largest mean |attribution| first."""
    stats = {r.feature: r for r in ranking}
    wanted, found = define_groups(features, declared, values, seed,
                                  order=lambda j: (-stats[features[j]].mean_abs, j))
    out = []
    for name, columns in wanted:
        members = tuple(features[j] for j in columns)
        summed = _nansum(attributions[:, columns], 1)          # (n,) the group's attribution per customer
        ranked = [stats[f] for f in members]
        out.append(Group(name, tuple(columns), members, found, float(sum(r.mean_abs for r in ranked)),
                         float(sum(r.mean_signed for r in ranked)), float(sum(r.share for r in ranked)),
                         float(np.nan_to_num(_nanmean(np.abs(summed), 0))), int(np.isfinite(summed).sum()),
                         ranked[0].value_effect, ranked[0].binary))
    return tuple(sorted(out, key=lambda g: -g.share))


def group_ranking(ranking, groups: Sequence[Group]) -> tuple:
    """(Ranked, ...) with each group in place of its members (:attr:`Group.ranked`), largest first."""
    grouped = {f for g in groups for f in g.members}
    rows = [g.ranked for g in groups] + [r for r in ranking if r.feature not in grouped]
    return tuple(sorted(rows, key=lambda r: -r.mean_abs))


def grouped_attributions(attributions: np.ndarray, groups: Sequence[Group]) -> np.ndarray:
    """(n, p') the attributions with each group's members summed into one column (the members'
    columns dropped): what the segments are found on."""
    if not groups:
        return attributions
    grouped = {j for g in groups for j in g.columns}
    alone = [j for j in range(attributions.shape[1]) if j not in grouped]
    return np.concatenate([attributions[:, alone]] + [_nansum(attributions[:, list(g.columns)], 1)[:, None]
                                                      for g in groups], axis=1)


# ----------------------------------------------------------------------------- time profile


def _profile(key: str, periods, abs_sum, signed_sum, count, share: float = RECENT_SHARE) -> TimeProfile:
    """The time profile of one history. Periods at the end with no effect at all on any customer are left out: a
    store explained at period p of a causal model with a prediction per period (``--output-period``) has exactly 0
    after p, and "the last period" is then p, not the history's last."""
    abs_sum, signed_sum = np.asarray(abs_sum, np.float64), np.asarray(signed_sum, np.float64)
    count = np.asarray(count, np.int64)
    some = np.flatnonzero(abs_sum > 0)
    if some.size and some[-1] < len(abs_sum) - 1:
        end = int(some[-1]) + 1
        periods, abs_sum, signed_sum, count = list(periods)[:end], abs_sum[:end], signed_sum[:end], count[:end]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_abs = np.where(count > 0, abs_sum / np.maximum(count, 1), np.nan)
        mean_signed = np.where(count > 0, signed_sum / np.maximum(count, 1), np.nan)
    total = float(abs_sum.sum())
    if total > 0:
        from_last = np.cumsum(abs_sum[::-1]) / total  # share held by the last 1, 2, ... periods
        recent = int(np.searchsorted(from_last, share - 1e-12) + 1)
    else:
        recent = len(abs_sum)
    return TimeProfile(key, tuple(periods), mean_abs, mean_signed, count, min(recent, len(abs_sum)))


def profile_sentence(profile: TimeProfile, share: float = RECENT_SHARE) -> str:
    """The time profile in words."""
    t = len(profile.periods)
    text = (f"The last {profile.recent_periods} of {t} periods hold {_percent(share)} of the history's effect "
            f"(|attribution| over every customer); the last period alone ({profile.periods[-1]}) holds "
            f"{_percent(profile.last_share)}.")
    return text + (" " + peak_words(profile) if not profile.recent[profile.peak] else "")


def peak_words(profile: TimeProfile) -> str:
    """Where the largest share lies when it is before the recent periods (a light bar that is the tallest)."""
    k = profile.peak
    return (f"The largest single share, {100 * profile.shares[k]:.1f} %, is earlier: {profile.periods[k]} "
            f"({profile.before_last[k]} periods before the last), where {profile.customers[k]:,} customers have data.")


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


class Customers(NamedTuple):
    """Every customer of a summary, one row each: what its segments are described from."""

    ids: np.ndarray                # (n,)
    prediction: np.ndarray         # (n,)
    outcome: np.ndarray | None     # (n,) 1.0 positive label, 0.0 other, NaN unknown; None without labels
    values: np.ndarray             # (n, p) static value / temporal mean over the window (NaN: no data)
    attributions: np.ndarray       # (n, p)
    trend: np.ndarray              # (n, p) a history's recent change (NaN: static)


def describe_segments(assigned: np.ndarray, features, customers: Customers) -> tuple[tuple, np.ndarray]:
    """(Segment, ...) highest mean prediction first, and the segment of each customer (``assigned``)
    renumbered in that order."""
    prediction, outcome, values, attributions, trend = customers[1:]
    n = len(customers.ids)
    found = [g for g in np.unique(assigned)]
    order = sorted(found, key=lambda g: -float(np.mean(prediction[assigned == g])))
    renumber = {g: i for i, g in enumerate(order)}
    segments, used = [], set()
    floor = NEGLIGIBLE * float(np.nanmax(np.nanmean(np.abs(attributions), 0), initial=0.0))
    for g in order:
        members = assigned == g
        mean = np.nan_to_num(_nanmean(attributions[members], 0))
        drivers = [_driver(features[j], float(mean[j]), members, values, trend, j) for j in main_effects(mean)]
        name = _name(segment_namers(drivers, floor), NAME_DRIVERS, used)
        rows = np.flatnonzero(members)
        rows = rows[np.argsort(-prediction[rows], kind="stable")]
        known = outcome[rows][np.isfinite(outcome[rows])] if outcome is not None else np.zeros(0)
        segments.append(Segment(
            name=name, size=int(rows.size), share=float(rows.size / n), mean_prediction=float(prediction[rows].mean()),
            churn_rate=float(known.mean()) if known.size else None, drivers=tuple(drivers),
            mean_attributions=mean, rows=rows,
            customers=tuple(str(customers.ids[i]) for i in rows)))
    return tuple(segments), np.array([renumber[g] for g in assigned], np.int64)


def main_effects(mean: np.ndarray, top: int = TOP_DRIVERS, share: float = NAME_SHARE) -> list:
    """The columns of a segment's main effects: largest |mean attribution| first, either way, at most
    ``top``, each at least ``share`` of the largest |mean| (smaller effects never name a segment:
    a segment whose effects lower its risk is not named after a small raising one)."""
    size = np.abs(np.nan_to_num(mean))
    if size.size == 0 or size.max() <= 0:
        return []
    order = np.argsort(-size, kind="stable")
    return [int(j) for j in order[:top] if size[j] >= share * size.max()]


def segment_namers(drivers, floor: float) -> tuple[str, list]:
    """What names a segment: its main effects (``drivers``, largest first) that raise the risk and are not
    negligible (at least ``floor``), these being churn-reason segments; a segment without any is named
    "Lower risk: ..." after its main lowering effects, or, when every effect is negligible, as having no strong
    reason. Returns (prefix, drivers to name it by)."""
    strong = [d for d in drivers if abs(d.mean_attribution) >= floor and abs(d.mean_attribution) > 0]
    raising = [d for d in strong if d.raises]
    if raising:
        return "", raising
    if strong:
        return "Lower risk: ", strong
    return NO_STRONG_REASON, []


NO_STRONG_REASON = "No strong reason either way"


def _driver(feature: Feature, mean: float, members, values, trend, j: int) -> Driver:
    words = driver_words(feature, members, values, trend, j)
    measure, here, everyone = _measure(feature, words, members, values, trend, j)
    return Driver(feature, mean, words, here, everyone, measure)


def _name(namers: tuple[str, list], count: int, used: set) -> str:
    """The prefix and the first ``count`` drivers' words (:func:`segment_namers`), more of them when another
    segment has that name already, else a number."""
    prefix, drivers = namers
    if not drivers:
        name = prefix or "No effect (every attribution is zero)"
    else:
        name = None
        count = min(count, len(drivers))
        for count in range(max(1, count), len(drivers) + 1):
            words = ", ".join(d.words for d in drivers[:count])
            candidate = prefix + (words if prefix else words[:1].upper() + words[1:])
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
    z = family_z(level, p)  # Bonferroni over the p features
    se = np.hypot(errors[0], errors[1])
    change = means[0] - means[1]
    rows = sorted((DriftRow(features[j], float(means[1][j]), float(means[0][j]), float(change[j] - z * se[j]),
                            float(change[j] + z * se[j])) for j in range(p)), key=lambda r: -abs(r.change))
    return Drift(tuple(rows), int(before.shape[0]), int(after.shape[0]), level, resamples,
                 drift_sentence(rows, int(before.shape[0]), int(after.shape[0]), level))


def _bootstrap_mean_abs(data: np.ndarray, resamples: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(mean |attribution| per feature (p,), its bootstrap standard error (p,)) over the rows of
    ``data`` (n, p), NaN: no data (:class:`Sums`, :func:`resample_means`)."""
    n, p = data.shape
    sums = Sums.empty(min(n, BOOTSTRAP_GROUPS), p)
    sums.add(data, group_of(n, rng))
    boot = resample_means(sums, resamples, rng)
    return np.nan_to_num(_nanmean(np.abs(data), 0)), boot.std(axis=0, ddof=1)


class Sums(NamedTuple):
    """Customers' |attribution| summed into random groups of (almost) equal size: what the drift bootstrap
    resamples (a random-block bootstrap: the same standard error for a mean, at a cost independent of the
    customers; filled a chunk at a time, so a store of any size is held as (groups, p) numbers)."""

    sums: np.ndarray     # (G, p) sum of |attribution| over the group's customers with data
    counts: np.ndarray   # (G, p) customers with data

    @classmethod
    def empty(cls, groups: int, p: int) -> "Sums":
        return cls(np.zeros((groups, p)), np.zeros((groups, p)))

    def add(self, data: np.ndarray, group: np.ndarray) -> None:
        """Add the rows of ``data`` (k, p) attributions (NaN: no data), row i to group ``group[i]``."""
        a = np.abs(data)
        has = ~np.isnan(a)
        np.add.at(self.sums, group, np.where(has, a, 0.0))
        np.add.at(self.counts, group, has.astype(np.float64))

    @property
    def mean_abs(self) -> np.ndarray:
        """(p,) mean |attribution| over the customers with data (0 where none has data)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nan_to_num(self.sums.sum(axis=0) / self.counts.sum(axis=0))


def group_of(n: int, rng) -> np.ndarray:
    """(n,) each customer's random group among min(n, ``BOOTSTRAP_GROUPS``), of (almost) equal size."""
    return rng.permutation(n) % min(n, BOOTSTRAP_GROUPS)


def resample_means(sums: Sums, resamples: int, rng) -> np.ndarray:
    """(R, p) mean |attribution| of ``resamples`` bootstrap resamples: the groups drawn with replacement."""
    groups = sums.sums.shape[0]
    picks = rng.integers(groups, size=(resamples, groups))  # (R, G) groups drawn with replacement
    weights = np.stack([np.bincount(row, minlength=groups) for row in picks]).astype(np.float64)  # (R, G)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num((weights @ sums.sums) / (weights @ sums.counts))  # (R, p)


def family_z(level: float, count: int) -> float:
    """The normal quantile of a two-sided interval that holds at ``level`` for ``count`` intervals together
    (Bonferroni): what every drift interval is ``z`` standard errors wide by."""
    return NormalDist().inv_cdf(1 - (1 - level) / (2 * max(count, 1)))


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


def compute(bundle, rows: Iterable[Chunk] | Chunk, *, window: int | None = None,
            against: Iterable[Chunk] | Chunk | None = None, seed: int = SEED, source: dict | None = None,
            layout: Layout | None = None, labels: bool = True, baseline: str | None = None) -> Drivers:
    """:class:`Drivers` of the customers in ``rows`` (chunks of a store, or one chunk: see :class:`Chunk`);
    ``against``: the rows of an earlier store of the same layout (drift). ``labels``: take each
    customer's outcome from ``bundle`` (False when the rows come from another bundle's data).
    ``baseline``: the attributions' baseline spec (default: ``source["settings"]["baseline"]``),
    what the words compare with."""
    layout = layout or Layout.of(bundle)
    features, p = layout.features, len(layout.features)
    acc = _read(_chunks(rows), layout, window, window)
    if not acc.ids:
        raise ExplainError(EMPTY.format(what=(source or {}).get("store", "the store")))
    ids = np.concatenate(acc.ids)
    everyone = Customers(ids, np.concatenate(acc.prediction), outcomes(bundle, ids) if labels else None,
                         _stack(acc.values, p), _stack(acc.attributions, p), _stack(acc.trend, p))
    if baseline is None and isinstance((source or {}).get("settings"), dict):
        baseline = source["settings"].get("baseline")
    ranking = rank(features, everyone.attributions, everyone.values, seed)
    window_text = "the whole history" if window is None else f"the last {window} period(s)"
    groups = make_groups(features, ranking, everyone.attributions, layout.groups,
                         everyone.values if window is None else _stack(acc.whole, p), seed)
    profiles = tuple(_profile(key, periods, acc.abs_sum[key], acc.signed_sum[key], acc.count[key])
                     for key, role, _, _, periods in layout.inputs if role == "temporal")
    assigned, scores = cluster(grouped_attributions(everyone.attributions, groups), seed)
    segments, segment_of = describe_segments(assigned, features, everyone)
    change = None
    if against is not None:
        earlier = _read(_chunks(against), layout, window, window)
        if not earlier.ids:
            raise ExplainError(EMPTY.format(what="the earlier store"))
        change = drift(features, everyone.attributions, _stack(earlier.attributions, p), seed=seed)
    return Drivers(features=features, customers=ids, prediction=everyone.prediction, outcome=everyone.outcome,
                   values=everyone.values, attributions=everyone.attributions, window=window, ranking=ranking,
                   sentence=ranking_sentence(ranking, len(ids), window_text, baseline), time_profiles=profiles,
                   segments=segments, segment_of=segment_of, silhouette=scores, drift=change,
                   source=dict(source or {}), groups=groups, baseline=None if baseline is None else str(baseline))


def _chunks(rows) -> Iterable:
    """``rows`` as chunks: one chunk (an object with ``ids``: :class:`Chunk`) as a list of it."""
    return [rows] if hasattr(rows, "ids") else rows
