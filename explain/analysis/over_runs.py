"""Drivers over many runs: each monthly store's share of every feature's (and group's) mean |attribution|, on
one time axis, with intervals; and which shares moved from the first run to the last, in words.

One run is one finished store of the same settings and layout (``explain.batch.drivers.over_runs`` reads them a
chunk at a time and orders them: ``explain.batch.stores.in_run_order``). A run is held as :class:`Sums`: its
customers' |attribution| per feature (a temporal feature summed over the window, as the ranking sums it)
added into random groups, the numbers the two-store drift bootstraps (``explain.analysis.drivers.drift``:
the same groups, the same resampling, the same Bonferroni-corrected normal intervals at ``DRIFT_LEVEL``).

A feature's share in a run is its mean |attribution| over the sum of every feature's (the ranking's ``share``);
a group's is the sum of its members' shares. Its interval: the share +- z bootstrap standard errors of the
share (each resample's shares), z for the family of every feature and group of one run (clipped to 0-100 %).
A move is the last run's share minus the first's; its interval is z standard errors of that difference (the
two runs' errors added in quadrature, as drift adds them); a move is claimed only when that interval excludes
zero, and the words say when the largest move is within the intervals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from explain.analysis.drivers import (
    BOOTSTRAP_GROUPS,
    DRIFT_LEVEL,
    EMPTY,
    RESAMPLES,
    SEED,
    Chunk,
    Feature,
    Layout,
    Sums,
    effects,
    family_z,
    group_of,
    resample_means,
)
from explain.core.errors import ExplainError

SHOWN_MOVES = 3  # moves named in the sentence, at most

TOO_FEW = ("Drivers over runs need at least two stores of the same settings and layout; got {count}. Compute one "
           "store per run (`python -m explain batch --bundle DIR --out DIR/attributions/NAME` each month) and pass "
           "them with --over, or --over-all for every finished store of the bundle's settings.")
OTHER_FEATURES = ("The store {store} does not hold the same features as the first run ({got} against {expected}): "
                  "drivers over runs compare stores of bundles with the same static and temporal columns.")
COUNT_CHANGED = ("The store {store} yielded {got:,} customers, its manifest says {expected:,}: it changed while it "
                 "was read. Read it again once the batch run that writes it has finished.")


class RunSums(NamedTuple):
    """One run as the bootstrap reads it: where it came from and its :class:`Sums`."""

    label: str       # the run's name on the time axis ("2025-11": explain.batch.stores.run_label)
    store: str       # the store's folder
    completed: str   # when the store was finished (UTC, ISO 8601)
    customers: int
    sums: Sums


def run_sums(chunks: Iterable[Chunk], layout: Layout, *, customers: int, window: int | None = None,
             seed: int = SEED, store: str = "the store") -> Sums:
    """A store's :class:`Sums`, read a chunk at a time (``chunks``: its ``customers`` customers, in
    the store's order): memory is (groups, features), whatever the store's size. Each customer's random group is
    drawn with ``seed`` (``explain.analysis.drivers.group_of``)."""
    if customers < 1:
        raise ExplainError(EMPTY.format(what=store))
    group = group_of(customers, np.random.default_rng(seed))
    sums, at = Sums.empty(min(customers, BOOTSTRAP_GROUPS), len(layout.features)), 0
    for rows in chunks:
        k = len(rows.ids)
        if at + k > customers:
            raise ExplainError(COUNT_CHANGED.format(store=store, got=at + k, expected=customers))
        sums.add(effects(rows, layout, window), group[at:at + k])
        at += k
    if at != customers:
        raise ExplainError(COUNT_CHANGED.format(store=store, got=at, expected=customers))
    return sums


@dataclass(frozen=True)
class Run:
    """One run's shares: every row of :attr:`Series.rows` (features, then groups) with its interval."""

    label: str
    store: str
    completed: str
    customers: int
    share: np.ndarray   # (q,) of the total mean |attribution|
    low: np.ndarray     # (q,) its interval
    high: np.ndarray
    error: np.ndarray   # (q,) the bootstrap standard error of the share


@dataclass(frozen=True)
class Move:
    """A row's share in the last run against the first."""

    feature: Feature
    first: float
    last: float
    low: float           # the interval of last - first
    high: float
    monotone: bool       # the share moved one way at every run (never back)

    @property
    def change(self) -> float:
        return self.last - self.first

    @property
    def changed(self) -> bool:
        """True when the interval of the move excludes zero (a move is claimed)."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Series:
    """Drivers over runs: each run's shares, the moves from the first run to the last, and the words."""

    rows: tuple          # (Feature, ...) every feature in model order, then every group (role "group")
    runs: tuple          # (Run, ...) oldest first
    moves: tuple         # (Move, ...) every row, largest |move| first
    level: float
    resamples: int
    sentence: str
    members: tuple = ()  # ((column, ...), ...) of each group, in the order of the group rows

    def top(self, count: int, grouped: bool = False) -> list[int]:
        """The rows of the ``count`` features with the largest share in any run, largest first: the lines a chart
        draws; with ``grouped``, each group in place of its members (the grouped ranking's rows)."""
        inside = {j for columns in self.members for j in columns} if grouped else set()
        wanted = [j for j, f in enumerate(self.rows)
                  if (f.role == "group" and grouped) or (f.role != "group" and j not in inside)]
        peak = np.max([r.share for r in self.runs], axis=0)
        return sorted(wanted, key=lambda j: -peak[j])[:count]

    def to_dict(self) -> dict:
        """``drivers.json``'s ``drift_over_runs``: runs [{store, label, shares: {feature: {share, low, high}},
        group_shares}], moves, sentence."""
        def shares(run: Run, groups: bool) -> dict:
            return {f.name: {"share": float(run.share[j]), "low": float(run.low[j]), "high": float(run.high[j])}
                    for j, f in enumerate(self.rows) if (f.role == "group") == groups}
        return {
            "sentence": self.sentence, "level": self.level, "resamples": self.resamples,
            "method": "share of the total mean |attribution| per run; normal intervals from a bootstrap over "
                      "customers (random groups), Bonferroni over every feature and group of a run",
            "labels": {f.name: f.label for f in self.rows},
            "runs": [{"store": r.store, "label": r.label, "completed": r.completed, "customers": r.customers,
                      "shares": shares(r, False), "group_shares": shares(r, True)} for r in self.runs],
            "moves": [{"feature": m.feature.name, "label": m.feature.label, "role": m.feature.role,
                       "first": m.first, "last": m.last, "change": m.change, "low": m.low, "high": m.high,
                       "changed": m.changed, "monotone": m.monotone} for m in self.moves],
        }


def series(features: Sequence[Feature], runs: Sequence[RunSums], groups: Sequence = (), *,
           resamples: int = RESAMPLES, level: float = DRIFT_LEVEL, seed: int = SEED) -> Series:
    """The shares of ``features`` (and of ``groups``: ((name, (column, ...)), ...)) in each run of ``runs``
    (oldest first), with their intervals and the moves from the first run to the last (the module text)."""
    if len(runs) < 2:
        raise ExplainError(TOO_FEW.format(count=len(runs)))
    p = len(features)
    for run in runs:
        if run.sums.sums.shape[1] != p:
            raise ExplainError(OTHER_FEATURES.format(store=run.store, got=run.sums.sums.shape[1], expected=p))
    groups = [(str(name), list(columns)) for name, columns in groups]
    rows = tuple(features) + tuple(Feature(name, name, "group", "group") for name, _ in groups)
    z = family_z(level, len(rows))
    out = [_run(run, groups, z, resamples, seed) for run in runs]
    moves = sorted((_move(rows[j], out, j, z) for j in range(len(rows))), key=lambda m: -abs(m.change))
    return Series(rows, tuple(out), tuple(moves), level, resamples, series_sentence(moves, out, level),
                  tuple(tuple(columns) for _, columns in groups))


def _with_groups(shares: np.ndarray, groups: list) -> np.ndarray:
    """(..., p + g) the shares (..., p) followed by each group's (the sum of its members')."""
    summed = [shares[..., columns].sum(axis=-1, keepdims=True) for _, columns in groups]
    return np.concatenate([shares, *summed], axis=-1)


def _shares(mean_abs: np.ndarray) -> np.ndarray:
    """(..., p) each feature's share of the total over the last axis (0 where the total is 0)."""
    total = mean_abs.sum(axis=-1, keepdims=True)
    return np.divide(mean_abs, total, out=np.zeros_like(mean_abs), where=total > 0)


def _run(run: RunSums, groups: list, z: float, resamples: int, seed: int) -> Run:
    share = _with_groups(_shares(run.sums.mean_abs), groups)                       # (q,)
    boot = _with_groups(_shares(resample_means(run.sums, resamples, np.random.default_rng(seed))), groups)  # (R, q)
    error = boot.std(axis=0, ddof=1) if resamples > 1 else np.zeros_like(share)
    return Run(run.label, run.store, run.completed, run.customers, share, np.clip(share - z * error, 0.0, 1.0),
               np.clip(share + z * error, 0.0, 1.0), error)


def _move(feature: Feature, runs: list, j: int, z: float) -> Move:
    first, last = runs[0], runs[-1]
    change = float(last.share[j] - first.share[j])
    spread = z * float(np.hypot(first.error[j], last.error[j]))
    steps = np.diff([r.share[j] for r in runs])
    monotone = bool(len(runs) > 2 and (np.all(steps > 0) or np.all(steps < 0)))
    return Move(feature, float(first.share[j]), float(last.share[j]), change - spread, change + spread, monotone)


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %" if share >= 0.095 or share == 0 else f"{100 * share:.1f} %"


def series_sentence(moves: Sequence[Move], runs: Sequence[Run], level: float) -> str:
    """The moves in words: the features whose share moved most beyond the intervals ("Support calls rose from
    12 % to 31 % of the effect over 5 runs (2025-07 to 2025-11)"), or that none did (no claim)."""
    span = f"over {len(runs)} runs ({runs[0].label} to {runs[-1].label})"
    features = [m for m in moves if m.feature.role != "group"]
    changed = [m for m in features if m.changed]
    how = (f"{100 * level:.0f} % bootstrap intervals over every feature and group; shares of the total mean "
           f"|attribution|, each run against its own baseline")
    if not features:
        return f"No feature to compare {span}."
    if not changed:
        m = features[0]
        return (f"No feature's share of the effect moved beyond its interval {span}: the largest move, "
                f"{m.feature.label} from {_percent(m.first)} to {_percent(m.last)}, is within the intervals, so no "
                f"change is claimed ({how}).")
    parts = [f"{m.feature.label} {'rose' if m.change > 0 else 'fell'} from {_percent(m.first)} to "
             f"{_percent(m.last)}" + (f" of the effect {span}" if k == 0 else "")
             + (", at every run" if m.monotone else "") for k, m in enumerate(changed[:SHOWN_MOVES])]
    text = "; ".join(parts) + "."
    more = len(changed) - len(parts)
    if more:
        text += f" {more} more feature(s) moved beyond their intervals."
    rest = len(features) - len(changed)
    return text + (f" The other {rest} feature(s) stayed within their intervals" if rest else "") + f" ({how})."
