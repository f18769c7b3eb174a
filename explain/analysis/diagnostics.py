"""What the Diagnostics page shows, computed without Streamlit: the delta of every integration
rule at several step counts, the path from the baseline to a customer, where the engine placed
its integration points on that path, what the engine detected in the model, the model's layers
as a table, and the baseline a customer is shown against. Every model call goes through the
engine (which holds the model's lock).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from explain.analysis.explainer import baseline_for, explain_customers
from explain.core import ig, points
from explain.core.engine import check_stop
from explain.core.quadrature import METHODS

SWEEP_STEPS = (4, 8, 16, 32, 64, 128, 256)
PATH_POINTS = 33
SWEEP_ALPHAS = points.SWEEP_ALPHAS  # the dense forward sweep of f along the path
LAYER_COLUMNS = ["layer", "type", "output shape", "params"]


def delta_sweep(bundle, customer: str, settings, steps=SWEEP_STEPS, should_stop=None) -> dict:
    """delta for each integration rule at each step count, for one customer under ``settings``.

    Returns {"steps": [...], "deltas": {method: [delta per step count]}, "gap": f(x) - f(b),
    "space": settings.space, "seconds": time taken}. ``should_stop`` is asked before each of
    the len(METHODS) x len(steps) computations and between their chunks (see
    :func:`explain.core.engine.check_stop`).
    """
    start = time.perf_counter()
    out = {"steps": list(steps), "deltas": {}, "gap": None}
    for method in METHODS:
        deltas = []
        for n in steps:
            check_stop(should_stop)
            attribution = explain_customers(bundle, [customer], replace(settings, steps=n, method=method),
                                            should_stop=should_stop)
            deltas.append(float(attribution.delta[0]))
            out["gap"] = float(attribution.prediction[0] - attribution.baseline_prediction[0])
        out["deltas"][method] = deltas
    out["space"] = settings.space
    out["seconds"] = time.perf_counter() - start
    return out


def path_profile(bundle, customer: str, settings, points: int = PATH_POINTS) -> dict:
    """Prediction and gradient norms along the straight path from the baseline to ``customer``
    (see :func:`explain.core.ig.path_profile`); for sample:K the path to the first sampled baseline."""
    inputs = bundle.inputs_for([customer])
    base = baseline_for(bundle, inputs, settings.baseline, settings.seed, ids=[customer])
    target = settings.for_bundle(bundle).target
    return ig.path_profile(bundle.model, inputs, base, points=points, target=target, space=settings.space)


def integration_points(bundle, customer: str, settings, alphas: int = SWEEP_ALPHAS,
                       should_stop=None) -> points.PathPoints:
    """f along the straight path from the baseline to ``customer`` (``alphas`` points, model calls
    only) and the points the engine integrates the gradient at under ``settings``, as
    ``explain_customers`` computes that customer (see :func:`explain.core.points.path_points`)."""
    settings = settings.for_bundle(bundle)
    inputs = bundle.inputs_for([str(customer)])
    base = baseline_for(bundle, inputs, settings.baseline, settings.seed, settings.categorical, ids=[str(customer)])
    return points.path_points(bundle.model, inputs, base, settings, sweep=alphas, ids=[str(customer)],
                              output_names=bundle.output_names, should_stop=should_stop,
                              roles=getattr(bundle, "roles", None) or None)


def points_text(result: points.PathPoints) -> str:
    """What the points chart shows, in plain words, then what was spent (plain text: escape it for markdown)."""
    if result.adaptive:
        what = ("The line is the prediction along the straight path from the baseline (alpha 0) to this customer "
                "(alpha 1), each dot a point where the engine evaluated the gradient and each shaded band one of "
                "its panels: where the prediction changes along the path, the engine placed more points.")
    else:
        what = (f"The line is the prediction along the straight path from the baseline (alpha 0) to this customer "
                f"(alpha 1), each dot a point where the engine evaluated the gradient: with steps = {result.steps} "
                f"these are the same {result.steps} points of the {result.method} rule for every customer, wherever "
                f"the prediction changes (steps = auto places them where it changes).")
    spent = []
    for name, leg in result.legs.items():
        where = "" if name == "joint" else f"{name}'s path: "
        spent.append(f"{where}{leg.final_points} points in {leg.panels} panel{'s' if leg.panels != 1 else ''}, "
                     f"{leg.gradient_points} gradient and {leg.forward_points} forward evaluations spent in all, "
                     f"delta {leg.delta:+.2e}")
    sample = (f" Shown for the first of the {result.samples} sampled baselines." if result.samples > 1 else "")
    return what + " " + "; ".join(spent) + "." + sample


def shown_baseline(bundle, customer: str, settings, *, attribution=None, row: int = 0) -> dict:
    """The baseline ``customer`` is compared with: static (S,), temporal (T, F) float64 (a model with
    more inputs: its numeric inputs by key, the histories among them); a distribution of K
    baselines (sample:K) is shown as its mean.

    ``attribution``: the customer's result at ``row``; its baseline (``Attribution.baselines``, the arrays
    IG integrated from) is read, not computed again. Without one (or one that does not carry its
    baseline) the baseline of ``settings`` is computed (``baseline_for``)."""
    if attribution is not None and attribution.baselines:
        one = {key: np.asarray(value)[None] if isinstance(value, np.ndarray) else value
               for key, value in attribution.baseline_of(row).items()}  # (1, ...) or (1, K, ...) as computed
        dtypes = {key: np.asarray(value).dtype for key, value in attribution.baselines.items()
                  if isinstance(value, np.ndarray)}
        ndims = {key: np.ndim(value) for key, value in attribution.inputs.items()}
    else:
        inputs = bundle.inputs_for([customer])
        one = baseline_for(bundle, inputs, settings.baseline, settings.seed, settings.categorical, ids=[customer])
        dtypes = {key: np.asarray(value).dtype for key, value in inputs.items()}
        ndims = {key: np.ndim(value) for key, value in inputs.items()}
    out = {}
    for key, value in one.items():
        if not isinstance(value, np.ndarray) or dtypes[key].kind not in "fiub" or (
                not bundle.plain and bundle.layout.spec(key).embedding is not None):
            continue  # a category (ids or text, or a mean embedding) has no value to draw
        value = np.asarray(value, np.float64)
        if value.ndim == ndims[key] + 1:  # (1, K, ...): K sampled baselines
            value = value.mean(axis=1)
        out[key] = value[0]
    return out


def _shape_text(layer) -> str:
    try:
        output = layer.output
    except Exception:  # a layer used at several places has no single output
        return "(several)"
    shapes = [tuple(t.shape) for t in output] if isinstance(output, (list, tuple)) else [tuple(output.shape)]
    return ", ".join(str(s).replace("None", "batch") for s in shapes)


def _count(weights) -> int:
    return int(sum(int(np.prod(w.shape)) for w in weights))


def model_layers(model) -> tuple[pd.DataFrame, dict]:
    """The model summary as a table (layer, type, output shape, params) and the parameter totals
    {"name", "total", "trainable", "non-trainable"}."""
    rows = []
    for layer in model.layers:
        try:
            params = int(layer.count_params())
        except Exception:  # not built
            params = 0
        rows.append({"layer": str(layer.name), "type": type(layer).__name__, "output shape": _shape_text(layer),
                     "params": params})
    trainable, total = _count(model.trainable_weights), _count(model.weights)
    return pd.DataFrame(rows, columns=LAYER_COLUMNS), {
        "name": str(model.name), "total": total, "trainable": trainable, "non-trainable": total - trainable}


def traces_text(traces) -> str:
    """How many times each compiled function was traced, in words: 'path 1, forward 1, points 1'."""
    if not isinstance(traces, dict):
        return str(traces)
    return ", ".join(f"{name} {count}" for name, count in traces.items()) or "none yet"


def detected_inputs(model) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What the engine detected: one row per input role (name, shape, dtype, position), and one
    row for the model (outputs, logit head, compiled traces)."""
    described = ig.describe_model(model)
    roles = pd.DataFrame([
        {"role": role, "input name": str(described[f"{role}_input"]["name"]),
         "shape": str(described[f"{role}_input"]["shape"]), "dtype": described[f"{role}_input"]["dtype"],
         "position": described[f"{role}_input"]["position"]} for role in ("static", "temporal")])
    summary = pd.DataFrame([{"outputs (K)": described["outputs"], "logit space": described["logit_space"],
                             "compiled traces": traces_text(described["traces"])}])
    return roles, summary
