"""Where the integration points went, for one customer: the prediction along the straight path from
the baseline to the customer, f(alpha) on a dense grid (model calls only, in one batched sweep),
and the final rule the engine integrated the gradient with: its points, their weights and panels.

The rule comes from the engine itself: :func:`path_points` runs the same integration as
``integrated_gradients`` (``explain.core.ig._integrate``, the same settings and chunks), which hands
back each row's final rule, so the points drawn are the points the attributions were summed over.
A fixed ``steps=N`` shows that rule's N points on [0, 1] (the same for every customer);
``steps="auto"`` the points placed for this customer (``explain.core.adaptive``), in panels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explain.core import ig
from explain.core.engine import Ends, engine_for
from explain.core.errors import AttributionError
from explain.core.settings import AUTO, Settings, completeness_limit

SWEEP_ALPHAS = 257  # the dense sweep: alphas 0, 1/256, ..., 1
ONE_CUSTOMER = "path_points explains one customer at a time; the inputs hold {n}."


@dataclass(frozen=True)
class PathLeg:
    """One path (the joint path, or one input's leg with ``path="per-input"``) of one customer."""

    name: str  # "joint", or the key of the input that moves along this leg
    alphas: np.ndarray  # (m,) the dense sweep, 0 .. 1
    values: np.ndarray  # (m,) f at them, in the space used
    point_alphas: np.ndarray  # (p,) the final rule's points, by alpha
    point_weights: np.ndarray  # (p,) their weights (they sum to 1)
    point_values: np.ndarray  # (p,) f at them
    point_panels: np.ndarray  # (p,) int: the panel of each point, 0 the first from alpha 0
    edges: np.ndarray  # (panels + 1,) the panels' edges, [0, 1] for one rule on the whole path
    start: float  # f at alpha 0: the baseline (for a per-input leg: only that input at its baseline)
    end: float  # f at alpha 1: the customer
    delta: float  # end - start - the sum of this leg's attributions
    limit: float  # |delta| the auto integration aimed for (nan with a fixed steps)
    gradient_points: int  # every gradient evaluation spent on this leg (discarded tries too)
    forward_points: int  # every model evaluation without a gradient spent on it (f(0), f(1) too)

    @property
    def panels(self) -> int:
        return len(self.edges) - 1

    @property
    def final_points(self) -> int:
        return int(len(self.point_alphas))


@dataclass(frozen=True)
class PathPoints:
    """:func:`path_points`'s result: one leg per path, and the settings it was computed with."""

    legs: dict  # name -> PathLeg: {"joint": ...}, or one per input (path="per-input")
    steps: int | str  # the setting: N, or "auto"
    method: str
    space_used: str  # "output", "logit" or "log-odds"
    target: int
    tolerance: float
    max_points: int
    samples: int  # baselines per customer (sample:K); the first one's path is shown

    @property
    def adaptive(self) -> bool:
        return self.steps == AUTO


def path_points(model, inputs: dict, baselines: dict, settings: Settings | None = None, *, sweep: int = SWEEP_ALPHAS,
                batch_size: int | None = None, ids=None, output_names=None, should_stop=None,
                roles: dict | None = None, **overrides) -> PathPoints:
    """f along the path from the baseline to one customer (``sweep`` alphas from 0 to 1) and the
    points the engine integrates the gradient at, with the settings of ``integrated_gradients``
    (the same arguments: ``settings`` whole and keyword overrides such as ``steps=``; ``inputs`` hold one
    customer). For a distribution of K baselines the path to the first one is shown."""
    engine = engine_for(model, roles)
    settings = ig.request_settings(settings, overrides, engine.n_outputs, output_names)
    x, raw, padding, n = ig._check_inputs(engine, inputs, ids)
    if n != 1:
        raise AttributionError(ONE_CUSTOMER.format(n=n))
    b, k = ig._check_baselines(engine, baselines, n, ids, x, padding)
    rows = ig._rows(x, raw, b, n, k, ids)
    first = {key: v[:1] for key, v in rows.baseline.items()}  # the first baseline sample
    x1, raw1, labels = {key: v[:1] for key, v in rows.x.items()}, {key: v[:1] for key, v in rows.raw.items()}, \
        rows.labels[:1]
    run = ig.Run(engine, settings, int(batch_size or ig.DEFAULT_BATCH_SIZE), should_stop)
    if settings.path == "joint":
        legs = {"joint": (first, engine.keys)}
    else:  # as integrated_gradients: one input moves, the others stay at the customer's values
        legs = {key: ({other: first[other] if other == key else x1[other] for other in engine.keys}, (key,))
                for key in engine.keys}
    alphas = np.linspace(0.0, 1.0, int(sweep))
    found = {name: _leg(run, name, Ends(x1, leg_b, raw1), moving, labels, alphas)
             for name, (leg_b, moving) in legs.items()}
    return PathPoints(legs=found, steps=settings.steps, method=settings.method,
                      space_used="output" if settings.space == "output" else engine.logit_kind,
                      target=int(settings.target), tolerance=float(settings.tolerance),
                      max_points=int(settings.max_points), samples=int(k))


def _leg(run: ig.Run, name: str, ends: Ends, moving, labels, alphas) -> PathLeg:
    engine, settings = run.engine, run.settings
    rules: list = []
    attrs, spent, fx, fb = ig._integrate(run, ends, moving, labels, rules=rules)
    point_alphas, point_weights, edges = (np.asarray(v, np.float64) for v in rules[0])
    both = np.concatenate([alphas, point_alphas])  # one batched sweep: the grid and the rule's points
    values = engine.sweep(ends, np.zeros(both.size, np.int64), both, settings.target, settings.space, run.chunk,
                          should_stop=run.should_stop)
    total = sum(float(np.sum(a)) for a in attrs.values())
    limit = (float(completeness_limit(fx, fb, settings.tolerance)[0]) if settings.steps == AUTO else float("nan"))
    panels = np.clip(np.searchsorted(edges, point_alphas, side="right") - 1, 0, len(edges) - 2)
    return PathLeg(name=name, alphas=alphas, values=values[:alphas.size], point_alphas=point_alphas,
                   point_weights=point_weights, point_values=values[alphas.size:], point_panels=panels,
                   edges=edges, start=float(fb[0]), end=float(fx[0]), delta=float(fx[0] - fb[0] - total),
                   limit=limit, gradient_points=int(spent.gradient_points[0]),
                   forward_points=int(spent.forward_points[0]))
