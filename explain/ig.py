"""Integrated Gradients for a model with a static and a temporal input: the API and its arithmetic.

``integrated_gradients`` checks the inputs, baselines and settings, lays out one row per
(customer, baseline sample), asks the compiled engine (``explain/engine.py``) for the
quadrature-weighted gradient sums chunk by chunk, multiplies by ``(x - b)`` and reports
f(x), f(b) and the delta of every customer. ``steps="auto"`` doubles the steps per customer
until the attributions add up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from explain.engine import StopCheck, check_stop, engine_for
from explain.errors import AttributionError
from explain.inputs import ROLES
from explain.quadrature import alphas_and_weights
from explain.settings import AUTO, DEFAULT_TOLERANCE, PATHS, SPACES, Settings, parse_space, resolve_target

__all__ = ["ABSOLUTE_TOLERANCE", "AUTO_MAX_STEPS", "AUTO_START_STEPS", "Attribution", "DEFAULT_BATCH_SIZE",
           "DEFAULT_TOLERANCE", "PATHS", "ROLES", "SPACES", "Settings", "describe_model", "engine_for",
           "integrated_gradients", "path_profile"]

DEFAULT_BATCH_SIZE = 4096  # interpolation points per gradient call
AUTO_START_STEPS = 16
AUTO_MAX_STEPS = 1024
ABSOLUTE_TOLERANCE = 1e-4  # floor, for customers whose f(x) is close to f(b)

# Message templates (tests import them).
NOT_NUMERIC = "{what} {role} is not numeric: convert every column to numbers (floats) first."
MISSING_ARRAY = "{what} has no {role!r} array; expected a dict with keys 'static' and 'temporal'."
SHAPE_MISMATCH = (
    "{what} {role} has shape {shape}; expected {expected} to match the model's {role} input "
    "{model_shape}{extra}."
)
CUSTOMER_COUNT_MISMATCH = (
    "inputs static has {n_static} customers but inputs temporal has {n_temporal}; "
    "both must have one row per customer, in the same order."
)
NOT_FINITE = (
    "{what} contain NaN or infinite values for customer {customer} ({role} input{where}). "
    "Fill or drop the missing values before explaining this customer."
)
NOT_FINITE_RESULT = (
    "The model returned NaN or infinite {what} for customer {customer} ({where}). Check the "
    "model for overflow (for example a log of zero) at these inputs or use another baseline."
)
BAD_BATCH_SIZE = "batch_size={value!r} must be a positive integer (interpolation points per call) or None."
SAMPLE_SHAPES = (
    "baselines: a distribution of baselines needs both arrays with a sample axis: static "
    "(1 or n, K, S) and temporal (1 or n, K, T, F), with the same K. Got {static} and {temporal}."
)


@dataclass(frozen=True)
class Attribution:
    """Integrated Gradients of n customers.

    ``delta`` = f(x) - f(b) - (sum of static + temporal attributions), in ``space_used``.
    With ``path="per-input"`` each input has its own path and its own completeness:
    ``per_input[role]`` holds ``reference_prediction`` (the model with only that input at
    its baseline) and ``delta`` (f(x) - reference - sum of that input's attributions), and
    ``delta`` is the one of the two with the larger magnitude.
    """

    static: np.ndarray  # (n, S) float64
    temporal: np.ndarray  # (n, T, F) float64
    prediction: np.ndarray  # (n,) f(x)
    baseline_prediction: np.ndarray  # (n,) f(b); the mean over samples for a distribution
    delta: np.ndarray  # (n,)
    steps: np.ndarray  # (n,) int: gradient evaluations used per customer (per baseline)
    settings: Settings
    space_used: str  # "output", "logit" (pre-activation) or "log-odds" (of the output)
    per_input: dict | None = None

    @property
    def n_customers(self) -> int:
        return int(self.prediction.shape[0])

    def total(self) -> np.ndarray:
        """Sum of all attributions per customer, (n,)."""
        return self.static.sum(axis=1) + self.temporal.sum(axis=(1, 2))


# --------------------------------------------------------------------------- validation


def _as_array(value, dtype, what="inputs", role="static"):
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise AttributionError(NOT_NUMERIC.format(what=what, role=role)) from None
    return np.ascontiguousarray(arr).astype(dtype.as_numpy_dtype)


def _check_inputs(engine, inputs, ids):
    out = {}
    for role in ROLES:
        if role not in inputs:
            raise AttributionError(MISSING_ARRAY.format(what="inputs", role=role))
        arr = _as_array(inputs[role], engine.dtypes[role], "inputs", role)
        expected = (None, *engine.shapes[role])
        if arr.ndim != len(expected) or any(e is not None and e != a for e, a in zip(expected, arr.shape)):
            raise AttributionError(
                SHAPE_MISMATCH.format(
                    what="inputs", role=role, shape=arr.shape, expected=f"(n, {', '.join(map(str, engine.shapes[role]))})",
                    model_shape=expected, extra="",
                )
            )
        out[role] = arr
    if out["static"].shape[0] != out["temporal"].shape[0]:
        raise AttributionError(
            CUSTOMER_COUNT_MISMATCH.format(n_static=out["static"].shape[0], n_temporal=out["temporal"].shape[0])
        )
    _check_finite(out, "Inputs", ids)
    return out


def _check_baselines(engine, baselines, n, ids):
    """Return (static (n, K, S), temporal (n, K, T, F), is_distribution)."""
    out = {}
    for role in ROLES:
        if role not in baselines:
            raise AttributionError(MISSING_ARRAY.format(what="baselines", role=role))
        out[role] = _as_array(baselines[role], engine.dtypes[role], "baselines", role)
    sample = out["static"].ndim == 3 or out["temporal"].ndim == 4
    if sample and not (
        out["static"].ndim == 3 and out["temporal"].ndim == 4 and out["static"].shape[1] == out["temporal"].shape[1]
    ):
        raise AttributionError(SAMPLE_SHAPES.format(static=out["static"].shape, temporal=out["temporal"].shape))
    for role in ROLES:
        arr = out[role]
        feature_shape = arr.shape[2:] if sample else arr.shape[1:]
        if arr.ndim < 2 or tuple(feature_shape) != tuple(engine.shapes[role]) or arr.shape[0] not in (1, n):
            lead = "(1 or n, K, " if sample else "(1 or n, "
            raise AttributionError(
                SHAPE_MISMATCH.format(
                    what="baselines", role=role, shape=arr.shape,
                    expected=lead + ", ".join(map(str, engine.shapes[role])) + ")",
                    model_shape=(None, *engine.shapes[role]), extra=f" with n = {n} customers",
                )
            )
        if not sample:
            arr = arr[:, None]  # one baseline: K = 1
        out[role] = np.broadcast_to(arr, (n, *arr.shape[1:]))
    _check_finite({r: out[r].reshape(n, -1) for r in ROLES}, "Baselines", ids)
    return out["static"], out["temporal"], sample


def _customer_label(ids, i):
    return repr(str(ids[i])) if ids is not None else f"at row {i}"


def _check_finite(arrays, what, ids):
    for role in ROLES:
        arr = arrays[role]
        bad = ~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            more = int(bad.sum()) - 1
            where = f"; {more} more customer(s) too" if more else ""
            raise AttributionError(NOT_FINITE.format(what=what, customer=_customer_label(ids, i), role=role, where=where))


NOT_TWO_ARRAYS = (
    "{what} is a {kind} of {count} item(s); expected two arrays in the model's input order "
    "[{order}] (as model([...]) takes them), or a dict with keys 'static' and 'temporal'."
)


def _by_role(engine, value, what):
    """A list or tuple in the model's input order (as ``model([...])`` takes it) -> a dict by role."""
    if not isinstance(value, (list, tuple)):
        return value
    if len(value) != 2:
        raise AttributionError(NOT_TWO_ARRAYS.format(what=what, kind=type(value).__name__, count=len(value),
                                                     order=", ".join(engine.layout.roles)))
    return dict(zip(engine.layout.roles, value))


# --------------------------------------------------------------------------- API


def integrated_gradients(
    model,
    inputs: dict,
    baselines: dict,
    *,
    steps: int | str = 64,
    method: str = "gausslegendre",
    target: int | str = 0,
    space: str = "output",
    path: str = "joint",
    batch_size: int | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    ids=None,
    output_names=None,
    should_stop: StopCheck = None,
) -> Attribution:
    """Integrated Gradients of ``model`` for n customers, for both inputs at once.

    inputs: ``{"static": (n, S), "temporal": (n, T, F)}``, or a list/tuple of the two arrays in
    the model's input order (as ``model([...])`` takes them). baselines: the same with a leading
    dimension of n or 1 (shared), or with a sample axis, ``(1 or n, K, S)`` and
    ``(1 or n, K, T, F)``, for expected gradients (IG averaged over the K baselines).
    steps: gradient evaluations per customer (and baseline), or "auto": doubled from 16 per
    customer until |delta| <= tolerance * |f(x) - f(b)| (at least 1e-4) or 1024 steps.
    target: an output column index, or a name from ``output_names``. space: "output", or
    "logit" for the pre-activation output (log-odds of the output if there is none).
    path: "joint" (both inputs move together) or "per-input" (one moves, the other stays at
    the customer's values). batch_size: the most interpolation points per gradient call; it
    never changes a result. ids: customer ids, used in error messages. should_stop: a callable
    asked before every gradient call; when it returns True, ``explain.errors.Stopped`` is
    raised (between two chunks; it may also raise an exception of its own).
    """
    engine = engine_for(model)
    inputs, baselines = _by_role(engine, inputs, "inputs"), _by_role(engine, baselines, "baselines")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1):
        raise AttributionError(BAD_BATCH_SIZE.format(value=batch_size))
    settings = Settings(baseline=None, steps=steps, method=method, target=target, space=space, path=path,
                        tolerance=tolerance)  # checks every setting
    target_index = resolve_target(settings.target, engine.n_outputs, output_names)
    settings = settings.replace(target=target_index)
    steps, method, space, path, tolerance = settings.steps, settings.method, settings.space, settings.path, settings.tolerance
    x = _check_inputs(engine, inputs, ids)
    n = x["static"].shape[0]
    bs, bt, is_sample = _check_baselines(engine, baselines, n, ids)
    k = bs.shape[1]
    chunk = int(batch_size or DEFAULT_BATCH_SIZE)
    space_used = "output" if space == "output" else engine.logit_kind

    # One "row" per (customer, baseline sample): (n * K, ...).
    xs = np.repeat(x["static"], k, axis=0)
    xt = np.repeat(x["temporal"], k, axis=0)
    bs, bt = bs.reshape(n * k, *bs.shape[2:]), bt.reshape(n * k, *bt.shape[2:])
    row_ids = np.repeat(np.asarray(ids, dtype=object), k) if ids is not None else None
    row_labels = row_ids if row_ids is not None else np.repeat(np.arange(n), k)

    legs = {"joint": (bs, bt)} if path == "joint" else {"static": (bs, xt), "temporal": (xs, bt)}
    attr_s = np.zeros((n * k, *engine.shapes["static"]))
    attr_t = np.zeros((n * k, *engine.shapes["temporal"]))
    steps_used = np.zeros(n * k, dtype=np.int64)
    leg_results = {}
    for leg, (ls, lt) in legs.items():
        a_s, a_t, used, fx, f_ref = _integrate(
            engine, (xs, xt), (ls, lt), steps, method, target_index, space, chunk, tolerance, row_labels,
            only=None if leg == "joint" else leg, should_stop=should_stop,
        )
        attr_s += a_s
        attr_t += a_t
        steps_used = np.maximum(steps_used, used)
        total = {"joint": a_s.sum(1) + a_t.sum((1, 2)), "static": a_s.sum(1), "temporal": a_t.sum((1, 2))}[leg]
        leg_results[leg] = (f_ref, fx - f_ref - total)

    def mean_k(a):  # (n * K, ...) -> (n, ...)
        return a.reshape(n, k, *a.shape[1:]).mean(axis=1)

    static, temporal = mean_k(attr_s), mean_k(attr_t)
    prediction = mean_k(fx)
    per_input = None
    if path == "joint":
        baseline_prediction = mean_k(leg_results["joint"][0])
        delta = prediction - baseline_prediction - static.sum(1) - temporal.sum((1, 2))
    else:
        fb = engine.forward(bs, bt, space, chunk, should_stop)[:, target_index]
        _check_outputs(fb, row_labels, "at the baseline")
        baseline_prediction = mean_k(fb)
        per_input = {
            role: {"reference_prediction": mean_k(leg_results[role][0]), "delta": mean_k(leg_results[role][1])}
            for role in ROLES
        }
        ds, dt = per_input["static"]["delta"], per_input["temporal"]["delta"]
        delta = np.where(np.abs(ds) >= np.abs(dt), ds, dt)
    return Attribution(
        static=static, temporal=temporal, prediction=prediction, baseline_prediction=baseline_prediction,
        delta=delta, steps=steps_used.reshape(n, k).max(axis=1), settings=settings, space_used=space_used,
        per_input=per_input,
    )


def _check_outputs(values, labels, where):
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AttributionError(NOT_FINITE_RESULT.format(what="outputs", customer=_customer_label(labels, i), where=where))


def _integrate(engine, x, b, steps, method, target, space, chunk, tolerance, labels, only=None, should_stop=None):
    """Attributions along b -> x of every row: (rows, S), (rows, T, F), steps used (rows,),
    f(x) (rows,) and f(b) (rows,).

    ``only`` keeps one input's attributions (per-input path: the other input does not move).
    With steps="auto", rows whose |delta| exceeds ``tolerance`` * |f(x) - f(b)| (at least
    ABSOLUTE_TOLERANCE) are recomputed with twice the steps until they meet it or reach
    AUTO_MAX_STEPS.
    """
    xs, xt = x
    bs, bt = b
    rows = xs.shape[0]
    attr_s = np.zeros((rows, *engine.shapes["static"]))
    attr_t = np.zeros((rows, *engine.shapes["temporal"]))
    used = np.zeros(rows, dtype=np.int64)
    fx = fb = None
    todo = np.arange(rows)
    m = AUTO_START_STEPS if steps == AUTO else int(steps)
    while todo.size:
        alphas, weights = alphas_and_weights(method, m)
        s, t, finite, f_x, f_b = engine.path_sums(
            xs[todo], xt[todo], bs[todo], bt[todo], alphas, weights, target, space, chunk, should_stop
        )
        if fx is None:  # first round: every row
            fx, fb = f_x, f_b
            _check_outputs(fx, labels, "model output")
            _check_outputs(fb, labels, "at the baseline")
        if not finite.all():
            i = int(todo[np.flatnonzero(~finite)[0]])
            raise AttributionError(
                NOT_FINITE_RESULT.format(what="gradients", customer=_customer_label(labels, i),
                                         where="along the path from the baseline")
            )
        # attributions: (x - b) * average gradient, in float64
        a_s = (xs[todo].astype(np.float64) - bs[todo]) * s
        a_t = (xt[todo].astype(np.float64) - bt[todo]) * t
        if only == "static":
            a_t[:] = 0.0
        elif only == "temporal":
            a_s[:] = 0.0
        attr_s[todo], attr_t[todo], used[todo] = a_s, a_t, m
        if steps != AUTO or 2 * m > AUTO_MAX_STEPS:
            break
        difference = fx[todo] - fb[todo]
        err = np.abs(difference - a_s.sum(1) - a_t.sum((1, 2)))
        todo = todo[err > np.maximum(tolerance * np.abs(difference), ABSOLUTE_TOLERANCE)]
        m *= 2
    return attr_s, attr_t, used, fx, fb


def path_profile(model, inputs: dict, baselines: dict, *, points: int = 33, target: int = 0, space: str = "output",
                 should_stop: StopCheck = None):
    """Prediction and gradient size along the straight path from the baseline to one customer.

    Returns a dict of float64 arrays over ``alphas`` (points,): ``prediction``,
    ``grad_norm_static``, ``grad_norm_temporal`` (L2 norms of the gradient of each input).
    Flat stretches with tiny gradients show saturation. ``should_stop`` as in
    ``integrated_gradients``.
    """
    engine = engine_for(model)
    space = parse_space(space)
    target = resolve_target(target, engine.n_outputs, None)
    x = _check_inputs(engine, inputs, None)
    bs, bt, _ = _check_baselines(engine, baselines, x["static"].shape[0], None)
    alphas = np.linspace(0.0, 1.0, points)
    ps = (bs[0, 0] + alphas[:, None] * (x["static"][0] - bs[0, 0])).astype(engine.dtypes["static"].as_numpy_dtype)
    pt = (bt[0, 0] + alphas[:, None, None] * (x["temporal"][0] - bt[0, 0])).astype(engine.dtypes["temporal"].as_numpy_dtype)
    fn = engine.function("points", space)
    check_stop(should_stop)
    with engine.lock:
        out, gs, gt = fn(tf.constant(ps), tf.constant(pt), tf.constant(target, tf.int32))
    return {
        "alphas": alphas,
        "prediction": out.numpy(),
        "grad_norm_static": np.linalg.norm(gs.numpy().reshape(points, -1), axis=1),
        "grad_norm_temporal": np.linalg.norm(gt.numpy().reshape(points, -1), axis=1),
    }


def describe_model(model) -> dict:
    """What the engine detected: input roles, names, shapes, dtypes, outputs, logit head."""
    engine = engine_for(model)
    return {
        "static_input": {"name": engine.input_names["static"], "shape": (None, *engine.shapes["static"]),
                          "dtype": engine.dtypes["static"].name, "position": engine.static_position},
        "temporal_input": {"name": engine.input_names["temporal"], "shape": (None, *engine.shapes["temporal"]),
                            "dtype": engine.dtypes["temporal"].name, "position": 1 - engine.static_position},
        "outputs": engine.n_outputs,
        "logit_space": engine.logit_kind,
        "traces": dict(engine.traces),
    }
