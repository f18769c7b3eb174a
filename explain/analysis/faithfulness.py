"""Faithfulness checks: do the attributions say what the model does?

Three checks from the literature, all through batched model calls:

* **Deletion and insertion curves** (Samek et al. 2017's perturbation curves, Petsiuk et
  al. 2018's insertion): rank every input cell of a customer (the S static features and
  the T x F temporal cells together, as the joint path sees them) by |attribution|, then
  replace the top k by the baseline's values (deletion, from the customer towards the
  baseline) or put the customer's top k into the baseline (insertion), for k on a grid from
  0 to all cells. The same for seeded random orders and for a gradient x (input - baseline)
  ranking. A faithful ranking moves the prediction fastest.
* **Model randomisation** (Adebayo et al. 2018, "Sanity checks for saliency maps"): the
  attributions of the same customers after re-initialising the model's learned weights
  layer by layer from the output down (cascading), compared with the original ones by
  Spearman's rank correlation. Attributions that barely change when the weights are
  destroyed describe the input, not the model.
* **Occlusion agreement**: per period (all features of one month set to the baseline) and
  per feature (one static feature, or one temporal feature in every month), the prediction
  change against the IG total of that period or feature, by rank correlation. For a linear
  model the two are equal.

How the curves are summarised. Each customer's curve runs between f(x) and f(b) (the
prediction with every cell at the baseline), in either direction. The curves shown are the
**share of the prediction gap**: sum_i s_i (f_i(k) - f_i(b)) / sum_i |f_i(x) - f_i(b)|,
with s_i the sign of f_i(x) - f_i(b), so deletion falls from 1 to 0 and insertion rises from
0 to 1 whatever the direction of each customer (customers weigh by their gap, so the
ones whose prediction is near the baseline's add no noise). **AOPC** (area over the
perturbation curve) is the area between the curve and its start, over the fraction of
cells replaced from 0 to 1: for deletion the area of 1 - share, for insertion the area of
share. A random order gives about 0.5; larger is more faithful. ``aopc_output`` is the same
area in the model's output units (AOPC x the mean |f(x) - f(b)|), Samek's AOPC averaged
over customers.

The k grid: every k from 0 to all cells when there are at most ``MAX_CURVE_POINTS - 1``
cells (the demo has 9 + 12 x 6 = 81), else ``MAX_CURVE_POINTS`` evenly spaced k (0, 1 %, ...
100 % of the cells). All perturbed inputs of a chunk of customers go to the model in one
compiled forward call (at most ``ROWS_PER_CALL`` rows each).

A baseline that is a distribution (``sample:K``) is replaced by its mean for the curves and
for occlusion (the attributions still average IG over the K baselines).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from explain.analysis import trust_metrics as tm
from explain.analysis.explainer import baseline_for, explain_customers
from explain.core import ig
from explain.core.engine import StopCheck, engine_for
from explain.core.errors import ExplainError
from explain.core.files import write_atomic
from explain.core.settings import Settings

DEFAULT_CUSTOMERS = 200
DEFAULT_RANDOM_ORDERS = 5
MAX_CURVE_POINTS = 101
ROWS_PER_CALL = 65536  # perturbed inputs per forward call
VALUES_PER_CHUNK = 4_000_000  # perturbed input values built at once (32 MB of float64)
DEFAULT_REPEATS = 3  # independent re-initialisations of the randomisation check
FALLS_BELOW = 0.5  # the randomisation check passes at a layer whose rank correlation is below this
RANKINGS = ("ig", "gradient_x_input", "random")
KINDS = ("deletion", "insertion")

# Message templates (tests import them).
BAD_COUNT = "{name}={value!r} must be a positive integer ({what})."
NOT_JSON = "--out {path} must name a .json file: the faithfulness report is JSON."
CANNOT_CLONE = (
    "The model cannot be cloned for the randomisation check ({reason}). The check re-initialises "
    "a copy of the model (keras.models.clone_model), never the model itself; a functional or "
    "Sequential Keras model can be cloned."
)
NO_LEARNED_LAYERS = "The model has no layer with trainable weights, so there is nothing to re-initialise."


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Curves:
    """Deletion and insertion curves of one set of customers for each ranking."""

    k: np.ndarray  # (m,) cells replaced
    cells: int  # S + T * F
    predictions: dict  # {kind: {ranking: (n, m)}}; ranking "random" is (R, n, m)
    gap: np.ndarray  # (n,) f(x) - f(b), b the baseline the cells are replaced with

    @property
    def fractions(self) -> np.ndarray:
        return self.k / max(self.cells, 1)

    def share(self, kind: str, ranking: str) -> np.ndarray:
        """The share of the prediction gap (module docstring): (m,), or (R, m) for "random"."""
        p = self.predictions[kind][ranking]
        ref = p[..., :, -1:] if kind == "deletion" else p[..., :, :1]  # f(b) in either direction
        s = np.sign(self.gap)[:, None]
        return (s * (p - ref)).sum(axis=-2) / max(np.abs(self.gap).sum(), 1e-12)

    def aopc(self, kind: str, ranking: str) -> np.ndarray:
        """Area over (deletion) or under (insertion) the share curve: float, or (R,) for "random"."""
        share = self.share(kind, ranking)
        height = 1.0 - share if kind == "deletion" else share
        return np.trapezoid(height, self.fractions, axis=-1)


@dataclass(frozen=True)
class Randomisation:
    """Cascading model randomisation: one column per step, top layer first.

    Step j re-initialises ``layers[: j + 1]``. Rank correlations are means over customers,
    one row per independent re-initialisation (repeat).
    """

    layers: list
    spearman_runs: np.ndarray  # (repeats, L) signed attributions
    spearman_abs_runs: np.ndarray  # (repeats, L) |attributions|
    prediction_change: np.ndarray  # (L,) mean |f_random(x) - f(x)|
    input_only_abs: float  # rank correlation of |attribution| with |x - b| / spread: the input alone

    @property
    def spearman(self) -> np.ndarray:
        return self.spearman_runs.mean(axis=0)

    @property
    def spearman_abs(self) -> np.ndarray:
        return self.spearman_abs_runs.mean(axis=0)

    @property
    def falls(self) -> bool:
        """Whether the signed rank correlation is below ``FALLS_BELOW`` at the first layer re-initialised."""
        return bool(self.layers) and bool(self.spearman[0] < FALLS_BELOW)

    @property
    def falls_abs(self) -> bool:
        """The same for the rank correlation of |attributions|."""
        return bool(self.layers) and bool(self.spearman_abs[0] < FALLS_BELOW)

    def verdict(self) -> str:
        """The check in words: does the rank correlation fall, and what do the |attributions| do?"""
        if not self.layers:
            return NO_LEARNED_LAYERS
        first, first_abs, last_abs = float(self.spearman[0]), float(self.spearman_abs[0]), float(self.spearman_abs[-1])
        runs = ", ".join(f"{v:.2f}" for v in self.spearman_runs[:, 0])
        words = [f"Re-initialising the top layer ({self.layers[0]}) brings the rank correlation of the "
                 f"attributions with the original ones to {first:.2f} (mean of {len(self.spearman_runs)} "
                 f"re-initialisations: {runs})"]
        if np.isnan(first):
            words.append(": undefined, the randomised model's attributions are constant.")
        elif first < FALLS_BELOW:
            words.append(f", below {FALLS_BELOW}: the attributions depend on the learned weights, as they should.")
        else:
            words.append(f": it does NOT fall below {FALLS_BELOW}. The attributions barely depend on that layer's "
                         "learned weights; they may reflect the input more than the model.")
        stuck = [name for name, r in zip(self.layers[1:], self.spearman[1:]) if r >= FALLS_BELOW]
        if stuck:
            words.append(f" It is still at or above {FALLS_BELOW} after re-initialising down to "
                         + ", ".join(stuck) + ".")
        words.append(f" The rank correlation of |attributions| is {first_abs:.2f} after the top layer"
                     + (f" (it does NOT fall below {FALLS_BELOW})" if first_abs >= FALLS_BELOW else "")
                     + f" and {last_abs:.2f} with every layer re-initialised, against {self.input_only_abs:.2f} "
                     "for |x - b| alone (each feature in units of its spread)")
        if abs(last_abs - self.input_only_abs) <= 0.1:
            words.append(": the sizes left after randomisation are about those the input's distance from the "
                         "baseline gives, which IG multiplies by whatever the weights.")
        else:
            words.append(".")
        return "".join(words)


@dataclass(frozen=True)
class Occlusion:
    """Prediction change when one group of cells is set to the baseline, against IG's total for it."""

    groups: dict  # {"period": [names], "feature": [names]}
    change: dict  # {"period": (n, T), "feature": (n, S + F)}: f(x) - f(x with the group at the baseline)
    ig_total: dict  # the IG total of each group, same shapes

    def spearman(self, by: str) -> float:
        """Mean over customers of the rank correlation (customers with constant values left out)."""
        r = rank_correlation(self.change[by], self.ig_total[by])
        return float(np.nanmean(r)) if np.isfinite(r).any() else float("nan")

    def pooled_spearman(self, by: str) -> float:
        """One rank correlation over every (customer, group) pair."""
        return float(rank_correlation(self.change[by].reshape(1, -1), self.ig_total[by].reshape(1, -1))[0])


@dataclass(frozen=True)
class Faithfulness:
    """Everything ``run`` measured for one set of customers."""

    ids: list
    settings: Settings
    curves: Curves
    randomisation: Randomisation
    occlusion: Occlusion
    random_orders: int
    seed: int
    seconds: dict = field(default_factory=dict)
    metrics: tm.TrustMetrics | None = None  # CPD, CPP, comprehensiveness, sufficiency, infidelity, sensitivity-max
    planted_source: str | None = None  # where the planted drivers were declared
    planted_cells: int = 0


# --------------------------------------------------------------------------- helpers


def rank_correlation(a, b) -> np.ndarray:
    """Spearman's rank correlation of each row of ``a`` with the same row of ``b``: (n,).

    Ties get their average rank; a row with constant values in either array gives NaN.
    """
    a, b = np.atleast_2d(np.asarray(a, np.float64)), np.atleast_2d(np.asarray(b, np.float64))
    ra = pd.DataFrame(a).rank(axis=1, method="average").to_numpy()
    rb = pd.DataFrame(b).rank(axis=1, method="average").to_numpy()
    ra = ra - ra.mean(axis=1, keepdims=True)
    rb = rb - rb.mean(axis=1, keepdims=True)
    denominator = np.sqrt((ra ** 2).sum(axis=1) * (rb ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (ra * rb).sum(axis=1) / np.where(denominator > 0, denominator, 1.0), np.nan)


def k_grid(cells: int, max_points: int = MAX_CURVE_POINTS) -> np.ndarray:
    """The numbers of cells replaced: every k from 0 to ``cells``, or ``max_points`` evenly spaced."""
    if cells + 1 <= max_points:
        return np.arange(cells + 1)
    return np.unique(np.round(np.linspace(0, cells, max_points)).astype(np.int64))


def flatten(static, temporal) -> np.ndarray:
    """(n, S) and (n, T, F) -> (n, S + T * F): static features first, then the cells period by period."""
    static, temporal = np.asarray(static), np.asarray(temporal)
    return np.concatenate([static.reshape(static.shape[0], -1), temporal.reshape(temporal.shape[0], -1)], axis=1)


def _unflatten(z, shapes):
    # z: (rows, S + T * F) -> (rows, S), (rows, T, F)
    s = int(np.prod(shapes["static"]))
    return z[:, :s].reshape(-1, *shapes["static"]), z[:, s:].reshape(-1, *shapes["temporal"])


def single_baseline(baselines: dict, n: int) -> dict:
    """The baseline arrays as (n, S) and (n, T, F): broadcast, and a distribution (sample:K) averaged."""
    static, temporal = np.asarray(baselines["static"], np.float64), np.asarray(baselines["temporal"], np.float64)
    if static.ndim == 3:  # (1 or n, K, S): a distribution of baselines
        static, temporal = static.mean(axis=1), temporal.mean(axis=1)
    return {"static": np.broadcast_to(static, (n, *static.shape[1:])),
            "temporal": np.broadcast_to(temporal, (n, *temporal.shape[1:]))}


def predict(model, static, temporal, *, target: int = 0, space: str = "output",
            should_stop: StopCheck = None) -> np.ndarray:
    """The model's ``target`` output in ``space`` for every row, (rows,) float64, in compiled batched calls.

    ``should_stop``: as for ``integrated_gradients`` (``explain.core.errors.Stopped`` between calls)."""
    engine = engine_for(model)
    static = np.ascontiguousarray(static, dtype=engine.dtypes["static"].as_numpy_dtype)
    temporal = np.ascontiguousarray(temporal, dtype=engine.dtypes["temporal"].as_numpy_dtype)
    return engine.forward(static, temporal, space, ROWS_PER_CALL, should_stop=should_stop)[:, target]


def _check_count(name, value, what):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ExplainError(BAD_COUNT.format(name=name, value=value, what=what))


# --------------------------------------------------------------------------- the checks


def perturbation_curves(model, inputs: dict, baselines: dict, scores: dict, *, target: int = 0,
                        space: str = "output", k=None, should_stop: StopCheck = None) -> Curves:
    """Deletion and insertion curves for each ranking in ``scores``.

    scores: {name: (n, S + T * F)} (cells ranked by the value, largest first; pass |attribution|),
    or (R, n, S + T * F) for several orders of one name. k: the grid (default :func:`k_grid`).
    """
    engine = engine_for(model)
    x = flatten(inputs["static"], inputs["temporal"]).astype(np.float64)  # (n, D)
    n, cells = x.shape
    b = flatten(**single_baseline(baselines, n))
    k = k_grid(cells) if k is None else np.asarray(k, np.int64)
    m = k.size
    per_call = max(1, min(ROWS_PER_CALL // m, VALUES_PER_CHUNK // (m * cells)))  # customers per forward call
    predictions = {kind: {} for kind in KINDS}
    for name, score in scores.items():
        score = np.asarray(score, np.float64)
        runs = score if score.ndim == 3 else score[None]
        out = {kind: np.zeros((runs.shape[0], n, m)) for kind in KINDS}
        for r, run in enumerate(runs):
            order = np.argsort(-run, axis=1, kind="stable")  # (n, D): cells, most important first
            position = np.empty_like(order)
            np.put_along_axis(position, order, np.arange(cells)[None].repeat(n, 0), axis=1)
            for start in range(0, n, per_call):
                rows = slice(start, start + per_call)
                top = position[rows, None, :] < k[None, :, None]  # (c, m, D): replaced after k steps
                for kind in KINDS:
                    moved, kept = (b[rows], x[rows]) if kind == "deletion" else (x[rows], b[rows])
                    z = np.where(top, moved[:, None], kept[:, None]).reshape(-1, cells)  # (c * m, D)
                    out[kind][r, rows] = predict(model, *_unflatten(z, engine.shapes), target=target,
                                                 space=space, should_stop=should_stop).reshape(-1, m)
        for kind in KINDS:
            predictions[kind][name] = out[kind] if score.ndim == 3 else out[kind][0]
    some = next(iter(predictions["deletion"].values()))
    some = some if some.ndim == 2 else some[0]
    return Curves(k=k, cells=cells, predictions=predictions, gap=some[:, 0] - some[:, -1])


def occlusion(model, inputs: dict, baselines: dict, attribution, *, target: int = 0, space: str = "output",
              periods=None, features=None, should_stop: StopCheck = None) -> Occlusion:
    """Set each period, then each feature (static ones, then temporal ones in every period), to the
    baseline: one forward call over all of them (per chunk of customers); compare the prediction change
    with IG's totals of the same cells."""
    xs = np.asarray(inputs["static"], np.float64)
    xt = np.asarray(inputs["temporal"], np.float64)
    n, S = xs.shape
    T, F = xt.shape[1:]
    base = single_baseline(baselines, n)
    groups = 1 + T + S + F  # the customer, then each period, static feature, temporal feature at the baseline
    per_call = max(1, min(ROWS_PER_CALL // groups, VALUES_PER_CHUNK // (groups * (S + T * F))))
    change = np.zeros((n, groups - 1))
    for start in range(0, n, per_call):
        rows = slice(start, start + per_call)
        bs, bt = base["static"][rows], base["temporal"][rows]
        # variants: (c, groups, S) and (c, groups, T, F)
        vs = np.repeat(xs[rows, None], groups, axis=1)
        vt = np.repeat(xt[rows, None], groups, axis=1)
        for t in range(T):
            vt[:, 1 + t, t, :] = bt[:, t, :]
        for j in range(S):
            vs[:, 1 + T + j, j] = bs[:, j]
        for f in range(F):
            vt[:, 1 + T + S + f, :, f] = bt[:, :, f]
        out = predict(model, vs.reshape(-1, S), vt.reshape(-1, T, F), target=target, space=space,
                      should_stop=should_stop).reshape(-1, groups)
        change[rows] = out[:, :1] - out[:, 1:]  # f(x) - f(x with the group at the baseline)
    a_s, a_t = np.asarray(attribution.static), np.asarray(attribution.temporal)
    return Occlusion(
        groups={"period": list(periods or [f"t{t + 1}" for t in range(T)]),
                "feature": list(features or [f"static_{j}" for j in range(S)] + [f"temporal_{f}" for f in range(F)])},
        change={"period": change[:, :T], "feature": change[:, T:]},
        ig_total={"period": a_t.sum(axis=2), "feature": np.concatenate([a_s, a_t.sum(axis=1)], axis=1)},
    )


def learned_layers(model) -> list:
    """Layers with trainable weights, from the output down (the order of the cascading check)."""
    return [layer for layer in reversed(model.layers) if layer.trainable_weights]


def _seeded(config, counter):
    """A copy of a layer config whose unseeded initializers get seeds counter, counter + 1, ..."""
    if isinstance(config, dict):
        inner = config.get("config")
        if "class_name" in config and isinstance(inner, dict) and "seed" in inner and inner["seed"] is None:
            return {**config, "config": {**inner, "seed": next(counter)}}
        return {key: _seeded(value, counter) for key, value in config.items()}
    if isinstance(config, list):
        return [_seeded(value, counter) for value in config]
    return config


def _clone(model, seed: int):
    """A clone of ``model`` whose weights are freshly drawn by its own initializers, seeded from ``seed``."""
    import itertools

    import keras

    counter = itertools.count(1000 * int(seed))

    def clone_layer(layer):
        return layer.__class__.from_config(_seeded(layer.get_config(), counter))

    try:
        return keras.models.clone_model(model, clone_function=clone_layer)
    except Exception as error:  # noqa: BLE001 - subclassed models and exotic layers: say so
        raise ExplainError(CANNOT_CLONE.format(reason=f"{type(error).__name__}: {error}")) from None


def model_randomisation(model, inputs: dict, baselines: dict, attribute, *, seed: int = 0,
                        repeats: int = DEFAULT_REPEATS, target: int = 0, space: str = "output",
                        original=None) -> Randomisation:
    """Cascading randomisation: re-initialise the learned layers of a clone from the top, one more each
    step, and compare ``attribute(clone)`` with ``attribute(model)`` (rank correlation per customer).

    attribute: model -> Attribution of the same customers (the same settings each time);
    original: ``attribute(model)`` when it is already known. ``repeats`` independent
    re-initialisations (seeds ``seed``, ``seed + 1``, ...) are averaged. ``model`` is never changed:
    the weights are set on a clone (``keras.models.clone_model`` + ``set_weights``).
    """
    _check_count("repeats", repeats, "how many re-initialisations")
    original = attribute(model) if original is None else original
    reference = flatten(original.static, original.temporal)  # (n, D)
    fx = predict(model, inputs["static"], inputs["temporal"], target=target, space=space)
    trained = model.get_weights()
    clones = [_clone(model, seed + r) for r in range(repeats)]
    fresh = [[layer.get_weights() for layer in learned_layers(c)] for c in clones]
    work = clones[0]  # one clone does every run: its compiled IG function is traced once
    del clones
    layers = learned_layers(work)
    signed, absolute, moved = (np.zeros((repeats, len(layers))) for _ in range(3))
    for r in range(repeats):
        work.set_weights(trained)
        for j, layer in enumerate(layers):
            layer.set_weights(fresh[r][j])
            attribution = attribute(work)
            values = flatten(attribution.static, attribution.temporal)
            signed[r, j] = np.nanmean(rank_correlation(reference, values))
            absolute[r, j] = np.nanmean(rank_correlation(np.abs(reference), np.abs(values)))
            moved[r, j] = np.abs(predict(work, inputs["static"], inputs["temporal"], target=target,
                                         space=space) - fx).mean()
    # How far the input's own distance from the baseline (per feature, in units of its spread)
    # explains the ranking of |attribution|: the floor the |attribution| correlation falls to.
    x = flatten(inputs["static"], inputs["temporal"]).astype(np.float64)
    b = flatten(**single_baseline(baselines, x.shape[0]))
    spread = _feature_spread(inputs)
    input_only = np.nanmean(rank_correlation(np.abs(reference), np.abs(x - b) / spread))
    return Randomisation(layers=[layer.name for layer in layers], spearman_runs=signed, spearman_abs_runs=absolute,
                         prediction_change=moved.mean(axis=0), input_only_abs=float(input_only))


def _feature_spread(inputs) -> np.ndarray:
    """Standard deviation of each static feature and each temporal feature (over customers and
    periods), laid out as :func:`flatten` lays out the cells; 1 where a feature is constant."""
    static, temporal = np.asarray(inputs["static"], np.float64), np.asarray(inputs["temporal"], np.float64)
    T, F = temporal.shape[1:]
    spread = np.concatenate([static.std(axis=0), np.tile(temporal.reshape(-1, F).std(axis=0), T)])
    return np.where(spread > 0, spread, 1.0)


def sample_ids(bundle, customers: int = DEFAULT_CUSTOMERS, seed: int = 0) -> list:
    """``customers`` ids drawn without replacement with ``seed`` (all of them if there are fewer), in table order."""
    _check_count("customers", customers, "how many customers to check")
    n = bundle.n_customers
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(customers, n), replace=False))
    return [str(i) for i in bundle.ids[rows]]


def run(bundle, settings: Settings = Settings(), *, customers: int = DEFAULT_CUSTOMERS, seed: int = 0,
        random_orders: int = DEFAULT_RANDOM_ORDERS, repeats: int = DEFAULT_REPEATS, ids=None,
        batch_size: int | None = None, should_stop: StopCheck = None, trust: tm.Options | None = None
        ) -> Faithfulness:
    """All the checks on ``customers`` customers of ``bundle`` drawn with ``seed`` (or on ``ids``).

    ``seed`` also seeds the random orders and the re-initialisations. ``should_stop``: as for
    ``integrated_gradients``: ``explain.core.errors.Stopped`` between two model calls when it says so.
    ``trust``: the sizes of the trust metrics (default ``tm.Options`` with these random orders and seed).
    """
    _check_count("random_orders", random_orders, "how many seeded random orders")
    ids = [str(i) for i in ids] if ids is not None else sample_ids(bundle, customers, seed)
    seconds = {}
    started = time.perf_counter()
    inputs = bundle.inputs_for(ids)
    baselines = baseline_for(bundle, inputs, settings.baseline, settings.seed, ids=ids)
    attribution = explain_customers(bundle, ids, settings, batch_size=batch_size, should_stop=should_stop)
    settings = attribution.settings  # the target as an index
    target, space = settings.target, settings.space
    replacement = single_baseline(baselines, len(ids))
    gradient_x_input = ig.integrated_gradients(  # one step of the right rule: grad f(x) * (x - b)
        bundle.model, inputs, replacement, settings, steps=1, method="right", path="joint", batch_size=batch_size,
        ids=ids, should_stop=should_stop)
    seconds["attributions"] = time.perf_counter() - started

    started = time.perf_counter()
    scores = _ranking_scores(attribution, gradient_x_input, random_orders, seed)
    curves = perturbation_curves(bundle.model, inputs, baselines, scores, target=target, space=space,
                                 should_stop=should_stop)
    seconds["curves"] = time.perf_counter() - started

    started = time.perf_counter()
    trust = tm.Options(random_orders=random_orders, seed=seed) if trust is None else trust
    metrics, source, planted = _trust_metrics(bundle, inputs, baselines, [attribution, gradient_x_input],
                                              settings=settings, options=trust, batch_size=batch_size,
                                              should_stop=should_stop)
    seconds["metrics"] = time.perf_counter() - started

    started = time.perf_counter()
    occluded = occlusion(bundle.model, inputs, baselines, attribution, target=target, space=space,
                         periods=bundle.periods, features=[*bundle.static_labels, *bundle.temporal_labels],
                         should_stop=should_stop)
    seconds["occlusion"] = time.perf_counter() - started

    started = time.perf_counter()

    def attribute(model):
        return ig.integrated_gradients(model, inputs, baselines, settings, batch_size=batch_size, ids=ids,
                                       should_stop=should_stop)

    randomisation = model_randomisation(bundle.model, inputs, baselines, attribute, seed=seed, repeats=repeats,
                                        target=target, space=space, original=attribution)
    seconds["randomisation"] = time.perf_counter() - started
    seconds["total"] = sum(seconds.values())
    return Faithfulness(ids=ids, settings=settings, curves=curves, randomisation=randomisation, occlusion=occluded,
                        random_orders=random_orders, seed=seed, seconds=seconds, metrics=metrics,
                        planted_source=source, planted_cells=planted)


def _ranking_scores(attribution, gradient_x_input, random_orders: int, seed: int) -> dict:
    """|IG|, |gradient x input| and ``random_orders`` seeded random orders (R, n, D), ranking the cells."""
    flat = flatten(attribution.static, attribution.temporal)
    rng = np.random.default_rng(seed)
    return {"ig": np.abs(flat),
            "gradient_x_input": np.abs(flatten(gradient_x_input.static, gradient_x_input.temporal)),
            "random": np.stack([rng.permuted(np.tile(np.arange(flat.shape[1], dtype=np.float64), (flat.shape[0], 1)),
                                             axis=1) for _ in range(random_orders)])}


def _trust_metrics(bundle, inputs, baselines, attributions, *, settings, options, batch_size, should_stop) -> tuple:
    """(TrustMetrics of IG and gradient x input (``attributions``, in that order), planted source, planted cells)."""
    mask, source = tm.planted_mask(bundle)
    problem = trust_problem(bundle.model, inputs, baselines, settings, planted=mask, batch_size=batch_size,
                            should_stop=should_stop)
    flat = {name: flatten(a.static, a.temporal) for name, a in zip(("ig", "gradient_x_input"), attributions)}
    return tm.measure(problem, flat, options), source, int(mask.sum()) if mask is not None else 0


# --------------------------------------------------------------------------- trust metrics (trust_metrics.py)


def trust_problem(model, inputs: dict, baselines: dict, settings: Settings, *, planted=None,
                  batch_size: int | None = None, should_stop: StopCheck = None) -> tm.Problem:
    """The customers flat, their baseline (a distribution: its mean), and the model and the two explainers
    (IG under ``settings``; gradient x (input - baseline)) as batched calls on flat rows."""
    engine = engine_for(model)
    x = flatten(inputs["static"], inputs["temporal"]).astype(np.float64)
    b = flatten(**single_baseline(baselines, x.shape[0])).astype(np.float64)

    def predict_flat(z):  # (rows,): some models' outputs keep a trailing axis of 1
        return predict(model, *_unflatten(z, engine.shapes), target=settings.target, space=settings.space,
                       should_stop=should_stop).reshape(len(z))

    def explainer(**overrides):
        def attribute(z, bz):
            (zs, zt), (bs, bt) = _unflatten(z, engine.shapes), _unflatten(bz, engine.shapes)
            a = ig.integrated_gradients(model, {"static": zs, "temporal": zt}, {"static": bs, "temporal": bt},
                                        settings, batch_size=batch_size, should_stop=should_stop, **overrides)
            return flatten(a.static, a.temporal)
        return attribute

    explainers = {"ig": explainer(), "gradient_x_input": explainer(steps=1, method="right", path="joint")}
    return tm.Problem(x=x, b=b, spread=_feature_spread(inputs), predict=predict_flat, attribute=explainers,
                      planted=planted)


def customer_stability(bundle, customer, settings: Settings = Settings(), *, radius: float = 0.01,
                       samples: int = 16, seed: int = 0) -> dict:
    """Sensitivity-max of one customer's IG: the largest change, over ``samples`` draws with every input within
    +/- ``radius`` x its value, of the attributions' Euclidean length (``norm``) and of any one attribution
    (``largest``), in the output's units, with the attributions' own length (``size``) to compare."""
    _check_count("samples", samples, "how many perturbed copies of the customer")
    attribution = explain_customers(bundle, [str(customer)], settings)
    inputs = bundle.inputs_for([str(customer)])
    baselines = baseline_for(bundle, inputs, settings.baseline, settings.seed, ids=[str(customer)])
    problem = trust_problem(bundle.model, inputs, baselines, attribution.settings)
    delta = tm.ball(problem.x, radius, samples, np.random.default_rng(seed))
    z = np.concatenate([problem.x[:, None], problem.x[:, None] + delta], axis=1).reshape(-1, problem.x.shape[1])
    a = problem.attribute["ig"](z, np.repeat(problem.b, samples + 1, axis=0))
    change = a[1:] - a[:1]
    return {"norm": float(np.linalg.norm(change, axis=1).max()), "largest": float(np.abs(change).max()),
            "size": float(np.linalg.norm(a[0])), "radius": radius, "samples": samples}


# --------------------------------------------------------------------------- the report


def _number(value):
    value = float(value)
    return None if not np.isfinite(value) else round(value, 6)


def to_json_dict(result: Faithfulness) -> dict:
    """The JSON report: settings, AOPC per ranking and curve, the curves, randomisation, occlusion, timings."""
    curves = result.curves
    aopc, shares = {}, {}
    for kind in KINDS:
        mean_gap = float(np.abs(curves.gap).mean())
        aopc[kind], shares[kind] = {}, {}
        for ranking in RANKINGS:
            value = curves.aopc(kind, ranking)
            share = curves.share(kind, ranking)
            if ranking == "random":
                aopc[kind]["random_runs"] = [_number(v) for v in value]
                aopc[kind]["random_std"] = _number(np.std(value))
                value, share = value.mean(), share.mean(axis=0)
            aopc[kind][ranking] = _number(value)
            aopc[kind][f"{ranking}_output"] = _number(value * mean_gap)
            shares[kind][ranking] = [_number(v) for v in share]
    rnd, occ = result.randomisation, result.occlusion
    return {
        "settings": {**result.settings.as_dict(), "customers": len(result.ids), "seed": result.seed,
                     "random_orders": result.random_orders, "cells": curves.cells,
                     "curve_points": int(curves.k.size)},
        "customers": list(result.ids),
        "aopc": aopc,
        "curves": {"k": curves.k.tolist(), "fractions": [_number(v) for v in curves.fractions], **shares},
        "mean_abs_gap": _number(np.abs(curves.gap).mean()),
        "randomisation": {
            "layers": [{"reinitialised": rnd.layers[: j + 1], "layer": name, "spearman": _number(rnd.spearman[j]),
                        "spearman_abs": _number(rnd.spearman_abs[j]),
                        "spearman_runs": [_number(v) for v in rnd.spearman_runs[:, j]],
                        "spearman_abs_runs": [_number(v) for v in rnd.spearman_abs_runs[:, j]],
                        "prediction_change": _number(rnd.prediction_change[j])}
                       for j, name in enumerate(rnd.layers)],
            "repeats": int(rnd.spearman_runs.shape[0]),
            "input_only_abs": _number(rnd.input_only_abs),
            "falls_below": FALLS_BELOW,
            "falls": rnd.falls,
            "falls_abs": rnd.falls_abs,
            "verdict": rnd.verdict(),
        },
        "occlusion": {by: {"spearman": _number(occ.spearman(by)), "pooled_spearman": _number(occ.pooled_spearman(by)),
                           "groups": occ.groups[by]} for by in ("period", "feature")},
        **metrics_json(result),
        "seconds": {key: round(value, 3) for key, value in result.seconds.items()},
    }


def metrics_json(result: Faithfulness) -> dict:
    """``metrics`` ({metric: {method: value, "better"}}), ``random_runs`` (each order's value), ``metric_settings``,
    ``planted``
    ({"aup", "aur"} of IG, ``by_method``, ``cells``, ``source``; null when no planted drivers are declared)
    and ``verdict``."""
    m = result.metrics
    if m is None:
        return {}
    metrics = {name: {**{method: _number(v) for method, v in m.values[name].items()}, "better": tm.BETTER[name]}
               for name in tm.METRICS}
    planted = None if m.planted is None else {
        "aup": _number(m.planted["ig"]["aup"]), "aur": _number(m.planted["ig"]["aur"]),
        "by_method": {method: {k: _number(v) for k, v in pr.items()} for method, pr in m.planted.items()},
        "cells": result.planted_cells, "source": result.planted_source}
    return {"metrics": metrics, "random_runs": {name: [_number(v) for v in m.random_runs[name]] for name in tm.METRICS},
            "metric_settings": {**m.options.as_dict(), "definitions": tm.definitions(m.options)},
            "planted": planted, "verdict": tm.verdict(m, result.randomisation.falls)}


def check_out(path) -> None:
    """Refuse an output path that is not a .json file (before anything is computed)."""
    if Path(path).suffix.lower() != ".json":
        raise ExplainError(NOT_JSON.format(path=path))


def summary_lines(result: Faithfulness) -> list:
    """The report in a few lines of words, for the command line."""
    curves, occ = result.curves, result.occlusion
    lines = [tm.verdict(result.metrics, result.randomisation.falls)] if result.metrics is not None else []
    lines += [f"{len(result.ids)} customers, {curves.cells} cells each, {curves.k.size} points per curve, "
             f"{result.random_orders} random orders; {result.seconds.get('total', 0):.1f} s "
             f"(curves {result.seconds.get('curves', 0):.1f} s)"]
    for kind in KINDS:
        random = curves.aopc(kind, "random")
        lines.append(f"AOPC {kind}: IG {curves.aopc(kind, 'ig'):.3f}, gradient x input "
                     f"{curves.aopc(kind, 'gradient_x_input'):.3f}, random {random.mean():.3f} "
                     f"(+/- {random.std():.3f})")
    lines.append(result.randomisation.verdict())
    lines.append(f"Occlusion against IG totals (rank correlation, mean over customers): per period "
                 f"{occ.spearman('period'):.3f}, per feature {occ.spearman('feature'):.3f}")
    if result.metrics is not None:
        lines += tm.metric_lines(result.metrics)
    return lines


def write_report(path, result: Faithfulness):
    """Write the JSON report atomically (a temporary file, then a rename)."""
    check_out(path)
    text = json.dumps(to_json_dict(result), indent=1)
    return write_atomic(path, lambda tmp: tmp.write_text(text + "\n", encoding="utf-8"))
