"""Adaptive integration along each row's path: gradient points placed where the prediction changes.

IG integrates the gradient along x(a) = b + a (x - b). Its completeness gap (the delta) is
the quadrature error of one scalar integrand, h(a) = grad f(x(a)) . (x - b) = d f(x(a)) / da,
whose exact integral over any panel [lo, hi] is f(x(hi)) - f(x(lo)). Model calls alone
(forward evaluations, about a third of a gradient's cost) thus give the exact integral of
every panel, and each panel's error is known once its gradients are in. Per row (one
customer and one baseline), :func:`integrate`:

1. tries the rule with ``START_POINTS`` points on [0, 1], as a fixed ``steps`` would; rows
   whose |delta| <= their limit stop there (a smooth path costs what it cost before);
2. sweeps f on a uniform grid of ``SWEEP_INTERVALS`` intervals, then bisects (forward only)
   every grid interval over which f changes by more than ``LOCATE_SHARE`` of its total
   variation and ``LOCATE_DENSITY`` times faster than on average, down to ``MIN_WIDTH``: a
   jump of f is located for a few forward calls, a steady slope is left alone;
3. places ``FIRST_PANELS`` panels whose edges are grid points, equidistributing a monitor that
   mixes f's variation with the path length (``MONITOR_MIX``), ``FIRST_POINTS`` points of
   the rule in each (weights scaled to the panel: they sum to exactly its width);
4. splits, round after round, the panels that hold the largest share of the remaining gap
   (``SPLIT_SHARE``; at the grid point that halves the panel's monitor, else at its middle;
   each half gets ``PANEL_POINTS`` points)
   until |delta| <= the row's limit or its budget of ``max_points`` gradient evaluations is
   spent. Panels whose own error is below ``limit / (2 * max panels)`` are settled: never
   split, their gradient sums added up and freed.

Numpy only. The model is reached through two callables, each taking many rows in one call
(each row its own alphas), which the batching layer (``explain.core.ig``) provides::

    forward(rows (m,), alphas (m,)) -> f(x(alpha)) (m,)           one point each
    gradients(rows (m,), alphas (m, k), weights (m, k)) -> (sums (m, D), q (m,))

where ``sums`` are the weighted gradient sums of each (row, panel), flattened over the moving
inputs, and ``q`` = sums . (x - b) of that row: the panel's estimate of f's change.
RiemannOpt (Swain & Singhi 2024) also places points by an error bound, once per model; here
they are placed per row, from that row's own path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from explain.core.quadrature import alphas_and_weights

START_POINTS = 16  # the first try: the rule with 16 points on [0, 1]
PANEL_POINTS = 4  # points of the rule in each panel made by a split
FIRST_PANELS = 4  # panels placed after the sweep
FIRST_POINTS = 8  # points of the rule in each of them
SWEEP_INTERVALS = 16  # the sweep's uniform grid
LOCATE_SHARE = 1 / 16  # grid intervals holding more of f's total variation are bisected (forward only),
LOCATE_DENSITY = 4.0  # if f changes there this many times faster than on average (a jump, not a slope)
MONITOR_MIX = 0.5  # the monitor: (1 - mix) * |df| / variation + mix * da
SPLIT_SHARE = 0.5  # each round splits the panels holding this share of the remaining error
MIN_WIDTH = 2.0 ** -16  # the narrowest panel (the model sees float32 alphas)
DEFAULT_MAX_POINTS = 2048  # gradient evaluations per row at most (the doubling auto before it spent up to 2,032)


@dataclass
class PathIntegral:
    """What :func:`integrate` found for each row: the final rule's weighted gradient sums and
    what was spent."""

    sums: np.ndarray  # (rows, D) float64: the final rule's weighted gradient sums
    estimate: np.ndarray  # (rows,) the final rule's integral of h: f(1) - f(0) - delta
    gradient_points: np.ndarray  # (rows,) int: every gradient evaluation spent (tries and split panels too)
    forward_points: np.ndarray  # (rows,) int: every model evaluation without a gradient, f(0) and f(1) too
    final_points: np.ndarray  # (rows,) int: the points of the final rule
    edges: list  # per row: the final panels' edges (alphas), [0, 1] for the first try
    rules: list | None = None  # per row, when asked (keep_rule): the final rule's (alphas, weights), by alpha


def panel_rule(method: str, lo: np.ndarray, hi: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """(alphas, weights), each (panels, points): the rule ``method`` with ``points`` points
    mapped onto each panel [lo, hi]; each panel's weights sum to its width."""
    a, w = alphas_and_weights(method, points)
    lo, width = np.asarray(lo, np.float64)[:, None], (np.asarray(hi, np.float64) - np.asarray(lo, np.float64))[:, None]
    return lo + width * a[None], width * w[None]


def monitor(grid_a: np.ndarray, grid_f: np.ndarray, mix: float = MONITOR_MIX) -> np.ndarray:
    """The cumulative monitor at each grid point, from 0 to 1: (1 - mix) * f's variation up to
    there / its total, + mix * alpha (the path length alone when f does not change)."""
    da, df = np.diff(grid_a), np.abs(np.diff(grid_f))
    variation = df.sum()
    m = mix * da + (1.0 - mix) * (df / variation if variation > 0 else da)
    cumulative = np.concatenate([[0.0], np.cumsum(m)])
    return cumulative / cumulative[-1]


def place_panels(grid_a: np.ndarray, grid_f: np.ndarray, count: int, mix: float = MONITOR_MIX) -> np.ndarray:
    """Indices into the grid of the edges of at most ``count`` panels that equidistribute the
    monitor (each edge the grid point nearest its level); first 0, last the grid's end."""
    cumulative = monitor(grid_a, grid_f, mix)
    levels = np.arange(1, count) / count
    right = np.clip(np.searchsorted(cumulative, levels), 1, len(grid_a) - 1)
    nearest = np.where(levels - cumulative[right - 1] < cumulative[right] - levels, right - 1, right)
    return np.unique(np.concatenate([[0], nearest, [len(grid_a) - 1]]))


def split_point(grid_a: np.ndarray, cumulative: np.ndarray, lo: float, hi: float) -> float:
    """Where to split the panel [lo, hi]: the grid point inside it (at least MIN_WIDTH from
    either edge) nearest the middle of its monitor, else its middle (not on the grid yet)."""
    i, j = np.searchsorted(grid_a, lo), np.searchsorted(grid_a, hi)
    inside = np.arange(i + 1, j)
    inside = inside[(grid_a[inside] - lo >= MIN_WIDTH) & (hi - grid_a[inside] >= MIN_WIDTH)]
    if inside.size == 0:
        return 0.5 * (lo + hi)
    middle = 0.5 * (cumulative[i] + cumulative[j])
    return float(grid_a[inside[np.argmin(np.abs(cumulative[inside] - middle))]])


class _Row:
    """One row's grid of forward values and its panels (live ones with their gradient sums)."""

    def __init__(self, f0: float, f1: float, width: int):
        self.grid_a = np.array([0.0, 1.0])
        self.grid_f = np.array([f0, f1])
        self.lo = np.zeros(0)
        self.hi = np.zeros(0)
        self.q = np.zeros(0)
        self.err = np.zeros(0)  # q - (f(hi) - f(lo)): the panel's share of the delta, with the sign flipped
        self.sums = np.zeros((0, width))
        self.points = np.zeros(0, np.int64)  # each live panel's points
        self.settled_points = 0
        self.settled_sums = np.zeros(width)
        self.settled_q = 0.0
        self.settled_err = 0.0
        self.settled_edges: list[tuple[float, float]] = []
        self.settled_counts: list[int] = []  # each settled panel's points

    def add_grid(self, alphas, values) -> None:
        a = np.concatenate([self.grid_a, alphas])
        f = np.concatenate([self.grid_f, values])
        order = np.argsort(a, kind="stable")
        a, f = a[order], f[order]
        keep = np.concatenate([[True], np.diff(a) > 0])
        self.grid_a, self.grid_f = a[keep], f[keep]

    def f_at(self, alphas) -> np.ndarray:
        return self.grid_f[np.searchsorted(self.grid_a, alphas)]

    def gap(self) -> float:
        """The remaining delta with the sign flipped: sum of every panel's error."""
        return self.settled_err + float(self.err.sum())

    def final_points(self) -> int:
        return self.settled_points + int(self.points.sum())

    def rule(self, method: str) -> tuple[np.ndarray, np.ndarray]:
        """The final rule's (alphas, weights), ordered by alpha: every panel's points (a point on
        the edge of two panels, as the trapezoid rule puts it, is there once for each)."""
        lo = np.concatenate([[e[0] for e in self.settled_edges], self.lo])
        hi = np.concatenate([[e[1] for e in self.settled_edges], self.hi])
        counts = np.concatenate([np.asarray(self.settled_counts, np.int64), self.points])
        alphas, weights = [np.zeros(0)], [np.zeros(0)]
        for count in np.unique(counts):
            a, w = panel_rule(method, lo[counts == count], hi[counts == count], int(count))
            alphas.append(a.reshape(-1))
            weights.append(w.reshape(-1))
        alphas, weights = np.concatenate(alphas), np.concatenate(weights)
        order = np.argsort(alphas, kind="stable")
        return alphas[order], weights[order]


def integrate(forward, gradients, f0, f1, limit, *, method: str = "gausslegendre",
              max_points: int = DEFAULT_MAX_POINTS, start_points: int = START_POINTS,
              panel_points: int = PANEL_POINTS, first_panels: int = FIRST_PANELS,
              first_points: int = FIRST_POINTS, keep_rule: bool = False) -> PathIntegral:
    """Integrate h along every row's path until |delta| <= ``limit`` (per row) or the row's
    budget of ``max_points`` gradient evaluations is spent (see the module's text).

    ``forward`` and ``gradients``: the callables of the module's text. ``f0``, ``f1`` (rows,):
    f at the baseline and at the customer (already computed: counted as 2 forward points).
    The final rule of a row is the one with the smaller |delta| of the first try and the
    panels. A row's result never depends on the other rows. ``keep_rule``: also return each
    row's final rule (``PathIntegral.rules``: the points and weights its attributions sum over);
    the numbers are the same either way.
    """
    f0, f1 = np.asarray(f0, np.float64), np.asarray(f1, np.float64)
    limit = np.broadcast_to(np.asarray(limit, np.float64), f0.shape)
    n = len(f0)
    a, w = alphas_and_weights(method, start_points)
    sums, q = gradients(np.arange(n), np.tile(a, (n, 1)), np.tile(w, (n, 1)))
    sums, q = np.array(sums, np.float64), np.array(q, np.float64)
    result = PathIntegral(sums=sums, estimate=q, gradient_points=np.full(n, start_points, np.int64),
                          forward_points=np.full(n, 2, np.int64), final_points=np.full(n, start_points, np.int64),
                          edges=[np.array([0.0, 1.0]) for _ in range(n)],
                          rules=[(a.copy(), w.copy()) for _ in range(n)] if keep_rule else None)
    first_cost = first_panels * first_points
    hard = np.flatnonzero((np.abs(f1 - f0 - q) > limit) & (start_points + first_cost <= max_points))
    if hard.size == 0:
        return result
    rows = {int(r): _Row(f0[r], f1[r], sums.shape[1]) for r in hard}
    _sweep(forward, rows, result, max_points)
    job = _Job(forward, gradients, rows, result, method, limit, max_points)
    _first_panels(job, first_points, first_panels)
    _refine(job, panel_points)
    for r, row in rows.items():  # the better of the first try and the panels
        estimate = row.settled_q + float(row.q.sum())
        if abs(f1[r] - f0[r] - estimate) <= abs(f1[r] - f0[r] - result.estimate[r]):
            result.sums[r] = row.settled_sums + row.sums.sum(axis=0)
            result.estimate[r] = estimate
            result.final_points[r] = row.final_points()
            edges = row.settled_edges + list(zip(row.lo.tolist(), row.hi.tolist()))
            result.edges[r] = np.unique(np.array(edges).reshape(-1))
            if keep_rule:
                result.rules[r] = row.rule(method)
    return result


def _sweep(forward, rows: dict, result: PathIntegral, max_points: int) -> None:
    """f on a uniform grid of every row, then bisection of the intervals where f jumps."""
    interior = np.arange(1, SWEEP_INTERVALS) / SWEEP_INTERVALS
    keys = np.array(list(rows))
    values = forward(np.repeat(keys, interior.size), np.tile(interior, keys.size)).reshape(keys.size, -1)
    for k, r in enumerate(keys):
        rows[r].add_grid(interior, values[k])
        result.forward_points[r] += interior.size
    while True:
        asked_rows, asked_alphas = [], []
        for r, row in rows.items():
            da, df = np.diff(row.grid_a), np.abs(np.diff(row.grid_f))
            variation = df.sum()
            wide = np.flatnonzero((df > LOCATE_SHARE * variation) & (df > LOCATE_DENSITY * variation * da)
                                  & (da >= 2 * MIN_WIDTH))
            wide = wide[:max(0, max_points - int(result.forward_points[r]))]  # forward points <= max_points
            asked_rows.append(np.full(wide.size, r))
            asked_alphas.append(0.5 * (row.grid_a[wide] + row.grid_a[wide + 1]))
        asked_rows, asked_alphas = np.concatenate(asked_rows), np.concatenate(asked_alphas)
        if asked_rows.size == 0:
            return
        _add_forward(forward, rows, result, asked_rows, asked_alphas)


def _add_forward(forward, rows: dict, result: PathIntegral, asked_rows, asked_alphas) -> None:
    values = forward(asked_rows, asked_alphas)
    for r in np.unique(asked_rows):
        mine = asked_rows == r
        rows[int(r)].add_grid(asked_alphas[mine], values[mine])
        result.forward_points[r] += int(mine.sum())


@dataclass(frozen=True)
class _Job:
    """What the panels of one ``integrate`` call share: the two callables, the hard rows (``_Row`` by row),
    the result being filled, the rule ``method``, each row's ``limit`` and its budget ``max_points``."""

    forward: object
    gradients: object
    rows: dict
    result: PathIntegral
    method: str
    limit: np.ndarray
    max_points: int

    def settle_below(self, r: int, panel_points: int) -> float:
        # all settled panels together miss at most limit / 2: a row never needs to split them
        return self.limit[r] / (2 * max(1, self.max_points // panel_points))


class _Panels(NamedTuple):
    """Panels [lo, hi] of rows ``owners`` and their weighted gradient sums, q and error (one entry per panel)."""

    owners: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    sums: np.ndarray
    q: np.ndarray
    err: np.ndarray

    def of(self, r: int) -> "_Panels":
        mine = self.owners == r
        return _Panels(*(part[mine] for part in self))


def _panel_gradients(job: _Job, panel_points: int, owners, lo, hi) -> _Panels:
    """Gradient sums of the panels [lo, hi] of rows ``owners``: (sums, q, err) per panel."""
    alphas, weights = panel_rule(job.method, lo, hi, panel_points)
    sums, q = job.gradients(owners, alphas, weights)
    rows = job.rows
    exact = np.array([rows[int(r)].f_at([h])[0] - rows[int(r)].f_at([low])[0] for r, low, h in zip(owners, lo, hi)])
    np.add.at(job.result.gradient_points, owners, panel_points)
    return _Panels(owners, lo, hi, np.asarray(sums, np.float64), np.asarray(q, np.float64),
                   np.asarray(q, np.float64) - exact)


def _take(row: _Row, panels: _Panels, points: int, settle_below: float) -> None:
    """Add panels of ``points`` points each to a row: settled (summed and freed) when their error
    is below ``settle_below``."""
    lo, hi, sums, q, err = panels.lo, panels.hi, panels.sums, panels.q, panels.err
    small = np.abs(err) <= settle_below
    row.settled_points += points * int(small.sum())
    row.settled_sums = row.settled_sums + sums[small].sum(axis=0)
    row.settled_q += float(q[small].sum())
    row.settled_err += float(err[small].sum())
    row.settled_edges += list(zip(lo[small].tolist(), hi[small].tolist()))
    row.settled_counts += [points] * int(small.sum())
    live = ~small
    row.lo, row.hi = np.concatenate([row.lo, lo[live]]), np.concatenate([row.hi, hi[live]])
    row.q, row.err = np.concatenate([row.q, q[live]]), np.concatenate([row.err, err[live]])
    row.sums = np.concatenate([row.sums, sums[live]])
    row.points = np.concatenate([row.points, np.full(int(live.sum()), points)])


def _first_panels(job: _Job, panel_points: int, first_panels: int) -> None:
    owners, lo, hi = [], [], []
    for r, row in job.rows.items():
        edges = row.grid_a[place_panels(row.grid_a, row.grid_f, first_panels)]
        owners.append(np.full(len(edges) - 1, r))
        lo.append(edges[:-1])
        hi.append(edges[1:])
    panels = _panel_gradients(job, panel_points, np.concatenate(owners), np.concatenate(lo), np.concatenate(hi))
    for r, row in job.rows.items():
        _take(row, panels.of(r), panel_points, job.settle_below(r, panel_points))


def _choose(row: _Row, limit: float, budget: int) -> np.ndarray:
    """Indices of the live panels to split this round: largest |error| first, until they hold
    SPLIT_SHARE of the live error (and every panel whose error alone exceeds ``limit``), at
    most ``budget``; only panels wide enough to split."""
    size = np.abs(row.err)
    order = np.argsort(-size, kind="stable")
    order = order[(row.hi[order] - row.lo[order]) >= 2 * MIN_WIDTH]
    if order.size == 0 or budget < 1:
        return order[:0]
    share = np.cumsum(size[order]) - size[order] < SPLIT_SHARE * size.sum()  # before the share is reached
    chosen = order[share | (size[order] > limit)]
    return chosen[:budget] if chosen.size else order[:1]


def _refine(job: _Job, panel_points: int) -> None:
    rows, result, limit = job.rows, job.result, job.limit
    active = {r for r, row in rows.items() if abs(row.gap()) > limit[r]}
    while active:
        plans = {}
        for r in sorted(active):
            budget = (job.max_points - int(result.gradient_points[r])) // (2 * panel_points)
            chosen = _choose(rows[r], limit[r], budget)
            if chosen.size:
                plans[r] = chosen
            else:  # budget spent, or every panel as narrow as it can be
                active.discard(r)
        if not plans:
            return
        splits = _split(job, plans)
        owners = np.concatenate([np.full(2 * len(plans[r]), r) for r in plans])
        lo = np.concatenate([np.concatenate([rows[r].lo[plans[r]], splits[r]]) for r in plans])
        hi = np.concatenate([np.concatenate([splits[r], rows[r].hi[plans[r]]]) for r in plans])
        panels = _panel_gradients(job, panel_points, owners, lo, hi)
        for r, chosen in plans.items():
            row = rows[r]
            keep = np.ones(len(row.lo), bool)
            keep[chosen] = False  # the split panels are replaced by their halves
            row.lo, row.hi, row.q = row.lo[keep], row.hi[keep], row.q[keep]
            row.err, row.sums, row.points = row.err[keep], row.sums[keep], row.points[keep]
            _take(row, panels.of(r), panel_points, job.settle_below(r, panel_points))
            if abs(row.gap()) <= limit[r]:
                active.discard(r)


def _split(job: _Job, plans: dict) -> dict:
    """Where each chosen panel of each row is split ({row: alphas}); f there swept first where not yet known."""
    asked_rows, asked_alphas, splits = [], [], {}
    for r, chosen in plans.items():
        row = job.rows[r]
        cumulative = monitor(row.grid_a, row.grid_f)
        at = np.array([split_point(row.grid_a, cumulative, row.lo[i], row.hi[i]) for i in chosen])
        splits[r] = at
        new = ~np.isin(at, row.grid_a)
        asked_rows.append(np.full(int(new.sum()), r))
        asked_alphas.append(at[new])
    asked_rows, asked_alphas = np.concatenate(asked_rows), np.concatenate(asked_alphas)
    if asked_rows.size:
        _add_forward(job.forward, job.rows, job.result, asked_rows, asked_alphas)
    return splits
