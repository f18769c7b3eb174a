"""Integrated Gradients for a model with static and temporal inputs: the API and its arithmetic.

``integrated_gradients`` checks the inputs, baselines and settings, maps categorical ids to
their embedding vectors (layer IG), keeps padded periods padded along the whole path, lays
out one row per (customer, baseline sample), asks the compiled engine
(``explain/core/engine.py``) for the quadrature-weighted gradient sums chunk by chunk, multiplies
by ``(x - b)`` and reports f(x), f(b), the delta and the points spent of every customer.
``steps="auto"`` integrates adaptively, each customer with its own points
(``explain/core/adaptive.py``), until the attributions add up.

Inputs, baselines and attributions are dicts keyed as ``explain.core.inputs`` decides:
``"static"`` and ``"temporal"`` for the common two-input model, the model's input names
otherwise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from explain.core import adaptive, chunks
from explain.core.engine import (
    AMBIGUOUS_ROLES,
    DISCONNECTED_INPUT,
    MULTI_OUTPUT,
    NOT_TWO_INPUTS,
    Ends,
    StopCheck,
    check_stop,
    engine_for,
)
from explain.core.errors import AttributionError
from explain.core.inputs import ROLES, MeanEmbedding, input_layout
from explain.core.quadrature import alphas_and_weights
from explain.core.settings import (
    ABSOLUTE_TOLERANCE,
    AUTO,
    DEFAULT_TOLERANCE,
    PATHS,
    SPACES,
    Settings,
    completeness_limit,
    parse_space,
    resolve_target,
)

__all__ = ["ABSOLUTE_TOLERANCE", "AMBIGUOUS_ROLES", "AUTO_MAX_STEPS", "AUTO_START_STEPS", "Attribution",
           "DEFAULT_BATCH_SIZE", "DEFAULT_TOLERANCE", "DISCONNECTED_INPUT", "MULTI_OUTPUT", "NOT_TWO_INPUTS",
           "PATHS", "ROLES", "SPACES", "Settings", "describe_model", "engine_for", "integrated_gradients",
           "model_notes", "model_problems", "path_profile"]

DEFAULT_BATCH_SIZE = 4096  # interpolation points per gradient call
AUTO_START_STEPS = adaptive.START_POINTS  # steps="auto" first tries the rule with 16 points
AUTO_MAX_STEPS = adaptive.DEFAULT_MAX_POINTS  # and spends at most 2,048 gradient evaluations per row by default
ADAPTIVE_MEMORY = 256 * 2 ** 20  # bytes of gradient sums held for live panels (rows are taken in groups)
ADAPTIVE_PANELS_HELD = 64  # live panels per row assumed by that bound

# Message templates (tests import them).
NOT_CATEGORY_IDS = (
    "The model's {role} input {name!r} has dtype {dtype}; Integrated Gradients needs a float input or category "
    "ids for its Embedding {embedding!r} (attributed at the embedding's output), but {what} {key} holds {example!r}. "
    "Pass whole-number ids from 0 to {high} (or the category texts its lookup layer knows)."
)
NOT_NUMERIC = "{what} {role} is not numeric: convert every column to numbers (floats) first."
MISSING_ARRAY = "{what} has no {role!r} array; expected a dict with keys {expected}."
SHAPE_MISMATCH = (
    "{what} {role} has shape {shape}; expected {expected} to match the model's {role} input "
    "{model_shape}{extra}."
)
CUSTOMER_COUNT_MISMATCH = (
    "inputs {key} has {count} customers but inputs {first} has {first_count}; "
    "every input must have one row per customer, in the same order."
)
NOT_FINITE = (
    "{what} contain NaN or infinite values for customer {customer} ({role} input{where}). "
    "Fill or drop the missing values before explaining this customer."
)
NOT_FINITE_RESULT = (
    "The model returned NaN or infinite {what} for customer {customer} ({where}). Check the "
    "model for overflow (for example a log of zero) at these inputs or use another baseline."
)
BASELINE_EQUALS_MASK = (
    "The baseline of customer {customer} equals the Masking layer's mask value {value!r} in every feature of "
    "{count} real period(s) of input {name!r} (periods {positions}): the model would read them as padding at the "
    "start of the path, so the path jumps there and the attributions cannot add up (steps='auto' would run to "
    "its limit). Build the baseline with explain.core.baselines, whose real months never equal the mask value, or "
    "change those months of the baseline."
)
BAD_BATCH_SIZE = "batch_size={value!r} must be a positive integer (interpolation points per call) or None."
NOT_TWO_ARRAYS = (
    "{what} is a {kind} of {count} item(s); expected {expected} arrays in the model's input order "
    "[{order}] (as model([...]) takes them), or a dict with keys {keys}."
)
SAMPLE_SHAPES = (
    "baselines: a distribution of baselines needs every array with a sample axis: static "
    "(1 or n, K, S) and temporal (1 or n, K, T, F), with the same K (a mean embedding cannot be "
    "sampled). Got {shapes}."
)


@dataclass(frozen=True)
class Attribution:
    """Integrated Gradients of n customers.

    ``inputs[key]`` holds each model input's attributions in that input's shape, (n, S),
    (n, T, F), or (n, C) / (n, T) for categorical ids (the embedding's attribution summed over
    the embedding dimension). ``static`` is every static-like input's attributions side by
    side, (n, S_total), in model input order; ``temporal`` is the temporal-like input's, or
    None when the model has several (read ``inputs``). ``padding[key]`` (n, T) is True where a
    history is padding (Masking or mask_zero): those cells have no attribution.

    ``delta`` = f(x) - f(b) - (sum of all attributions), in ``space_used``. ``steps``: the
    points of the final rule per baseline (with steps="auto" they differ per customer);
    ``gradient_points`` and ``forward_points``: every gradient and model evaluation spent on
    each customer (all baselines, paths and discarded tries together). With
    ``path="per-input"`` each input has its own path and its own completeness:
    ``per_input[key]`` holds ``reference_prediction`` (the model with only that input at its
    baseline), ``delta`` (f(x) - reference - sum of that input's attributions) and ``steps``;
    ``delta`` is the one with the largest magnitude and ``steps`` the largest.

    ``ignored_inputs``: keys of the inputs the model does not use (its graph does not connect
    them to the output); their attributions are exactly 0 (IG's dummy axiom) and ``notes``
    says so in a sentence each.

    What made it: ``settings`` (the request, target as an index; ``baseline`` None when the arrays were
    given directly) and ``baselines``, the baseline arrays the customers were compared with, as given to
    ``integrated_gradients`` (a read-only copy): ``baselines[key]`` (1 or n, *input shape), or (1 or n, K,
    *input shape) for a distribution of K baselines (a categorical input's ids as given, or its
    ``MeanEmbedding``); ``baseline_of(i)`` is customer i's. Padded periods of a customer are padding in the
    path whatever the array holds there. None on a result that did not come from ``integrated_gradients``
    (a stored one). ``arrival``: for a change since an earlier time (``explain.core.change``), the part of
    f(x) - f(b) due to periods that hold data now and were padding then, spread evenly over their cells;
    None otherwise.
    """

    static: np.ndarray  # (n, S) float64
    temporal: np.ndarray | None  # (n, T, F) float64
    prediction: np.ndarray  # (n,) f(x)
    baseline_prediction: np.ndarray  # (n,) f(b); the mean over samples for a distribution
    delta: np.ndarray  # (n,)
    steps: np.ndarray  # (n,) int: points of the final rule per customer (per baseline)
    settings: Settings
    space_used: str  # "output", "logit" (pre-activation) or "log-odds" (of the output)
    per_input: dict | None = None
    inputs: dict = field(default_factory=dict)  # key -> (n, *input shape)
    padding: dict = field(default_factory=dict)  # key -> (n, T) bool, temporal inputs only
    roles: dict = field(default_factory=dict)  # key -> "static" | "temporal"
    gradient_points: np.ndarray | None = None  # (n,) int: gradient evaluations spent per customer
    forward_points: np.ndarray | None = None  # (n,) int: model evaluations without a gradient, f(x), f(b) included
    ignored_inputs: tuple = ()  # keys of the inputs the model does not use: attributions exactly 0
    notes: tuple = ()  # sentences a reader of the result needs (an ignored input, ...)
    baselines: dict | None = None  # key -> the baseline as given, (1 or n, [K,] ...) read-only; None: not known
    arrival: np.ndarray | None = None  # (n,): f(x) - f(b) due to periods that arrived (explain.core.change)

    def __post_init__(self):
        if self.gradient_points is None:  # read from an older store: a rule of ``steps`` points
            object.__setattr__(self, "gradient_points", np.asarray(self.steps, np.int64).copy())
        if not self.inputs:
            object.__setattr__(self, "inputs", {"static": self.static, "temporal": self.temporal})
            object.__setattr__(self, "roles", {"static": "static", "temporal": "temporal"})

    @property
    def n_customers(self) -> int:
        return int(self.prediction.shape[0])

    def baseline_of(self, i: int) -> dict:
        """Customer ``i``'s baseline: {key: (*input shape)}, or (K, *input shape) for a distribution of K
        baselines (a ``MeanEmbedding`` as it is); empty when ``baselines`` is not known."""
        return {key: value if isinstance(value, MeanEmbedding) else value[min(int(i), len(value) - 1)]
                for key, value in (self.baselines or {}).items()}

    def total(self) -> np.ndarray:
        """Sum of all attributions per customer, (n,)."""
        return sum(a.reshape(a.shape[0], -1).sum(axis=1) for a in self.inputs.values())


# --------------------------------------------------------------------------- validation


def _expected_keys(engine) -> str:
    return ", ".join(repr(k) for k in engine.keys)


def _static_first(engine):
    """The inputs in the order their problems are reported: static-like ones first."""
    return sorted(engine.specs, key=lambda spec: ROLES.index(spec.role))


def _by_key(engine, value, what):
    """A list or tuple in the model's input order (as ``model([...])`` takes it) -> a dict by key."""
    if not isinstance(value, (list, tuple)):
        return value
    if len(value) != len(engine.keys):
        raise AttributionError(NOT_TWO_ARRAYS.format(
            what=what, kind=type(value).__name__, count=len(value), expected=len(engine.keys),
            order=", ".join(engine.keys), keys=_expected_keys(engine)))
    return dict(zip(engine.keys, value))


def _as_array(value, dtype, what="inputs", role="static"):
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise AttributionError(NOT_NUMERIC.format(what=what, role=role)) from None
    return np.ascontiguousarray(arr).astype(dtype.as_numpy_dtype)


def _as_ids(value, spec, engine, what):
    """Category ids (ints) or texts of a categorical input, as the model input takes them."""
    arr = np.asarray(value)
    high = int(spec.embedding.input_dim) - 1
    if spec.dtype == "string":
        if arr.dtype.kind not in "USO":
            arr = arr.astype(str)
        return arr.astype(object).astype(str)

    def refuse(example):
        raise AttributionError(NOT_CATEGORY_IDS.format(
            role=spec.role, name=spec.name, dtype=spec.dtype, embedding=spec.embedding.name, what=what,
            key=spec.key, example=example, high=high))

    if arr.dtype.kind in "USO":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            refuse(arr.reshape(-1)[0] if arr.size else arr)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            refuse(float(arr[bad][0]))
    arr = arr.astype(engine.raw_dtypes[spec.key].as_numpy_dtype)
    if spec.lookup is None and arr.size and (arr.min() < 0 or arr.max() > high):
        refuse(int(arr[(arr < 0) | (arr > high)][0]))
    return arr


def _shape_error(what, key, arr, shape, lead, extra=""):
    return AttributionError(SHAPE_MISMATCH.format(
        what=what, role=key, shape=arr.shape, expected=lead + ", ".join(map(str, shape)) + ")",
        model_shape=(None, *shape), extra=extra))


def _check_inputs(engine, inputs, ids):
    """(points {key: (n, *point shape)}, raw ids {key: (n, *shape)}, padding {key: (n, T)}, n)."""
    inputs = _by_key(engine, inputs, "inputs")
    if not isinstance(inputs, dict):
        inputs = {}
    arrays, raw = {}, {}
    for spec in _static_first(engine):
        key = spec.key
        if key not in inputs:
            raise AttributionError(MISSING_ARRAY.format(what="inputs", role=key, expected=_expected_keys(engine)))
        if spec.kind == "categorical":
            arr = _as_ids(inputs[key], spec, engine, "inputs")
            raw[key] = arr
        else:
            arr = _as_array(inputs[key], engine.point_dtypes[key], "inputs", key)
        shape = engine.shapes[key]
        if arr.ndim != len(shape) + 1 or tuple(arr.shape[1:]) != tuple(shape):
            raise _shape_error("inputs", key, arr, shape, "(n, ")
        arrays[key] = arr
    first = engine.keys[0]
    for key in engine.keys[1:]:
        if arrays[key].shape[0] != arrays[first].shape[0]:
            raise AttributionError(CUSTOMER_COUNT_MISMATCH.format(
                key=key, count=arrays[key].shape[0], first=first, first_count=arrays[first].shape[0]))
    n = arrays[first].shape[0]
    _check_finite({k: v for k, v in arrays.items() if k not in raw}, "Inputs", ids)
    vectors, padded = engine.embed(raw)
    points = {key: vectors[key] if key in raw else arrays[key] for key in engine.keys}
    padding = {}
    for spec in engine.specs:
        if spec.role != "temporal":
            continue
        if spec.mask_value is not None:
            padding[spec.key] = spec.padding(arrays[spec.key])
        elif spec.key in padded:
            pad = padded[spec.key]
            padding[spec.key] = pad if pad.ndim == 2 else pad.all(axis=-1)
        else:
            padding[spec.key] = np.zeros((n, spec.shape[0]), bool)
    return points, raw, padding, n


def _baseline_points(engine, spec, value, n, ids):
    """(array (1 or n, [K,] *point shape), sampled) of one input's baseline, in interpolation space."""
    key, shape = spec.key, engine.shapes[spec.key]
    if isinstance(value, MeanEmbedding):
        if spec.kind != "categorical":
            raise AttributionError(f"baselines {key}: a mean embedding is only for a categorical input; "
                                   f"{key!r} is numeric.")
        values = _as_ids(value.values, spec, engine, "baselines")
        if values.ndim != len(shape) + 1 or tuple(values.shape[1:]) != tuple(shape):
            raise _shape_error("baselines", key, values, shape, "(rows, ")
        vectors, padded = engine.embed({key: values})
        v, real = vectors[key], ~padded[key]  # (m, *shape, d), (m, *shape)
        if spec.role == "temporal":  # one vector for every period: the mean over all real (row, period) cells
            axes = tuple(range(real.ndim))
            mean = (v * real[..., None]).sum(axis=axes) / max(real.sum(), 1)
            mean = np.broadcast_to(mean, (*shape, v.shape[-1]))
        else:
            mean = (v * real[..., None]).sum(axis=0) / np.maximum(real.sum(axis=0), 1)[..., None]
        return mean[None], False
    if spec.kind == "categorical":
        arr = _as_ids(value, spec, engine, "baselines")
    else:
        arr = _as_array(value, engine.point_dtypes[key], "baselines", key)
    sampled = arr.ndim == len(shape) + 2
    feature_shape = arr.shape[2:] if sampled else arr.shape[1:]
    if arr.ndim < 2 or tuple(feature_shape) != tuple(shape) or arr.shape[0] not in (1, n):
        raise _shape_error("baselines", key, arr, shape, "(1 or n, K, " if sampled else "(1 or n, ",
                           f" with n = {n} customers")
    if spec.kind != "categorical":
        if not np.isfinite(arr).all():
            flat = arr.reshape(arr.shape[0], -1)
            i = int(np.flatnonzero(~np.isfinite(flat).all(axis=1))[0])
            raise AttributionError(NOT_FINITE.format(what="Baselines", customer=_customer_label(ids, i), role=key,
                                                     where=""))
        return arr, sampled
    lead = arr.shape[:2] if sampled else arr.shape[:1]
    vectors, _ = engine.embed({key: arr.reshape(-1, *shape)})
    return vectors[key].reshape(*lead, *engine.point_shapes[key]), sampled


def _check_baselines(engine, baselines, n, ids, points, padding):
    """{key: (n, K, *point shape)} float64 (padding as in the customer) and K."""
    baselines = _by_key(engine, baselines, "baselines")
    if not isinstance(baselines, dict):
        baselines = {}
    parts, sampled = {}, {}
    for spec in _static_first(engine):
        if spec.key not in baselines:
            raise AttributionError(MISSING_ARRAY.format(what="baselines", role=spec.key,
                                                        expected=_expected_keys(engine)))
        parts[spec.key], sampled[spec.key] = _baseline_points(engine, spec, baselines[spec.key], n, ids)
    if any(sampled.values()):
        ks = {parts[key].shape[1] for key in engine.keys if sampled[key]}
        if not all(sampled.values()) or len(ks) != 1:
            shown = ", ".join(f"{key} {getattr(baselines[key], 'shape', type(baselines[key]).__name__)}"
                              for key in engine.keys)
            raise AttributionError(SAMPLE_SHAPES.format(shapes=shown))
    out = {}
    for key in engine.keys:
        arr = np.asarray(parts[key], np.float64)
        if not sampled[key]:
            arr = arr[:, None]  # one baseline: K = 1
        out[key] = np.broadcast_to(arr, (n, *arr.shape[1:]))
    k = out[engine.keys[0]].shape[1]
    for spec in engine.specs:  # padded periods of the customer stay padding all along the path
        key = spec.key
        pad = padding.get(key)
        if pad is None or not pad.any() and spec.mask_value is None:
            continue
        extra = (1,) * (out[key].ndim - 3)  # (n, K, T, ...) -> mask (n, 1, T, 1, ...)
        mask = pad.reshape(n, 1, pad.shape[1], *extra)
        out[key] = np.where(mask, points[key][:, None].astype(np.float64), out[key])
        if spec.mask_value is not None:
            at_mask = np.all(out[key] == np.float64(spec.mask_value), axis=-1) & ~pad[:, None]  # (n, K, T)
            if at_mask.any():
                i, _, _ = np.argwhere(at_mask)[0]
                periods = np.flatnonzero(at_mask[i].any(axis=0))
                raise AttributionError(BASELINE_EQUALS_MASK.format(
                    customer=_customer_label(ids, int(i)), value=float(spec.mask_value), count=len(periods),
                    name=spec.name,
                    positions=", ".join(str(p + 1) for p in periods[:6]) + (" ..." if len(periods) > 6 else "")))
    return out, k


def _customer_label(ids, i):
    return repr(str(ids[i])) if ids is not None else f"at row {i}"


def _check_finite(arrays, what, ids):
    for role, arr in arrays.items():
        bad = ~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            more = int(bad.sum()) - 1
            where = f"; {more} more customer(s) too" if more else ""
            raise AttributionError(NOT_FINITE.format(what=what, customer=_customer_label(ids, i), role=role,
                                                     where=where))


# --------------------------------------------------------------------------- API


def integrated_gradients(
    model,
    inputs: dict,
    baselines: dict,
    settings: Settings | None = None,
    *,
    batch_size: int | None = None,
    ids=None,
    output_names=None,
    should_stop: StopCheck = None,
    roles: dict | None = None,
    **overrides,
) -> Attribution:
    """Integrated Gradients of ``model`` for n customers, for all its inputs at once.

    inputs: ``{"static": (n, S), "temporal": (n, T, F)}`` for a two-input model, else one
    array per input keyed by input name (category ids or texts for a categorical input).
    baselines: the same with a leading dimension of n or 1 (shared), or with a sample axis
    ``(1 or n, K, ...)`` for expected gradients (IG averaged over the K baselines); a
    categorical input's baseline may be ids or a ``MeanEmbedding``. Padded periods of a
    customer (Masking, mask_zero) are padding in the baseline too.

    settings: the request (``explain.core.settings.Settings``), passed whole; its ``baseline`` names
    where ``baselines`` came from (None: arrays given directly, the default ``Settings(baseline=None)``).
    Keyword overrides change some of its settings (``settings.replace``): ``steps``, ``method``, ``target``,
    ``space``, ``path``, ``tolerance``, ``max_points`` (``integrated_gradients(model, x, b, steps=64)``):
    steps: gradient evaluations per customer (and baseline), the rule's points on [0, 1]; or
    "auto": adaptive integration per customer (``explain.core.adaptive``): the rule with 16
    points first, then, where that does not add up, panels placed where the prediction changes
    along the path, refined until |delta| <= tolerance * |f(x) - f(b)| (at least 1e-4) or
    ``max_points`` gradient evaluations per customer and baseline.
    target: an output column index, or a name from ``output_names``. space: "output", or
    "logit" for the pre-activation output (log-odds of the output if there is none).
    path: "joint" (all inputs move together) or "per-input" (one moves, the others stay at
    the customer's values). The result's ``settings`` are these, the target as an index.

    batch_size: the most interpolation points per gradient call; it never changes a result.
    ids: customer ids, used in error messages. should_stop: a callable asked before every
    gradient call; when it returns True, ``explain.core.errors.Stopped`` is raised (between two
    chunks). roles: {input name: "static" | "temporal"} for 2-D categorical inputs whose role is
    not the default.
    """
    model = _viewed(model, settings, overrides)
    engine = engine_for(model, roles)
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
                                   or batch_size < 1):
        raise AttributionError(BAD_BATCH_SIZE.format(value=batch_size))
    settings = request_settings(settings, overrides, engine.n_outputs, output_names)
    x, raw, padding, n = _check_inputs(engine, inputs, ids)
    b, k = _check_baselines(engine, baselines, n, ids, x, padding)
    rows = _rows(x, raw, b, n, k, ids)
    # points per gradient call: TensorFlow's 4,096 as always; JAX's by measurement (explain.core.chunks)
    chunk = int(batch_size or (DEFAULT_BATCH_SIZE if engine.backend == "tensorflow"
                               else chunks.points_per_call(engine, settings.space)))
    run = Run(engine, settings, chunk, should_stop)
    return _attribution(run, rows, _integrate_legs(run, rows), padding, _given(engine, baselines))


def _viewed(model, settings: Settings | None, overrides: dict):
    """``model`` seen through the output ``settings`` ask for (``settings.output``, ``settings.output_period``;
    ``explain.core.outputs``): a model with a prediction per period or several heads given directly is explained at
    that head and period (default: the first head, the last period); a view (a bundle's) as it is."""
    from explain.core import outputs

    output = overrides.get("output", getattr(settings, "output", None))
    period = overrides.get("output_period", getattr(settings, "output_period", None))
    if outputs.source_of(model) is not model:
        return model
    if output is None and period is None and not outputs.needs_view(model):
        return model
    return outputs.output_view(model, output, period)


def request_settings(settings: Settings | None, overrides: dict, n_outputs: int, output_names=None) -> Settings:
    """The settings of one request: ``settings`` (None: ``Settings(baseline=None)``, baseline arrays given
    directly) with the keyword ``overrides`` (checked as the constructor checks them), the target resolved to
    an output index of ``n_outputs`` (by name through ``output_names``)."""
    if settings is None:
        settings = Settings(baseline=None)
    elif not isinstance(settings, Settings):
        raise TypeError(f"settings must be an explain.Settings or None, not {type(settings).__name__}")
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(Settings)})
    if unknown:
        raise TypeError(f"unknown setting(s) {', '.join(unknown)}; the settings are "
                        f"{', '.join(f.name for f in dataclasses.fields(Settings))}")
    if overrides:
        settings = settings.replace(**overrides)  # checks every setting
    return settings.replace(target=resolve_target(settings.target, n_outputs, output_names))


def _given(engine, baselines) -> dict:
    """The baseline arrays as given ((1 or n, ...), or (1 or n, K, ...) for a distribution), a read-only copy;
    a ``MeanEmbedding`` as it is (``Attribution.baselines``)."""
    out = {}
    for key, value in _by_key(engine, baselines, "baselines").items():
        if key not in engine.keys:
            continue
        if not isinstance(value, MeanEmbedding):
            value = np.array(value)  # a copy: the caller's array may change afterwards
            value.flags.writeable = False
        out[key] = value
    return out


@dataclass(frozen=True)
class Run:
    """One request as the engine runs it: the engine, the settings (target an index), the points per
    gradient call and the stop check (``integrated_gradients``, ``explain.core.points``)."""

    engine: object
    settings: Settings
    chunk: int
    should_stop: StopCheck = None


class _Legs(NamedTuple):
    """What the legs of a request found: attributions by key (n * K, ...), {leg: (f at the leg's start, its
    delta, what it spent)}, f(x) (n * K,)."""

    attrs: dict
    legs: dict
    fx: np.ndarray


@dataclass(frozen=True)
class _Rows:
    """One row per (customer, baseline sample): (n * K, ...) arrays, and how rows are named in errors."""

    x: dict
    raw: dict
    baseline: dict
    labels: np.ndarray
    n: int
    k: int

    def mean_k(self, a: np.ndarray) -> np.ndarray:
        """(n * K, ...) -> (n, ...): the average over a customer's baseline samples."""
        return a.reshape(self.n, self.k, *a.shape[1:]).mean(axis=1)


def _rows(x: dict, raw: dict, b: dict, n: int, k: int, ids) -> _Rows:
    row_ids = np.repeat(np.asarray(ids, dtype=object), k) if ids is not None else None
    return _Rows(x={key: np.repeat(v, k, axis=0) for key, v in x.items()},
                 raw={key: np.repeat(v, k, axis=0) for key, v in raw.items()},
                 baseline={key: v.reshape(n * k, *v.shape[2:]) for key, v in b.items()},
                 labels=row_ids if row_ids is not None else np.repeat(np.arange(n), k), n=n, k=k)


def _integrate_legs(run: Run, rows: _Rows) -> _Legs:
    """The joint path as one leg, or one leg per input (that input moves, the others stay at the customer's
    values)."""
    engine = run.engine
    if run.settings.path == "joint":
        legs = {"joint": (rows.baseline, engine.keys)}
    else:
        legs = {key: ({other: rows.baseline[other] if other == key else rows.x[other] for other in engine.keys},
                      (key,))
                for key in engine.keys}
    attrs = {key: np.zeros((rows.n * rows.k, *engine.point_shapes[key])) for key in engine.keys}
    results, fx = {}, None
    for leg, (leg_b, moving) in legs.items():
        a, used, fx, f_ref = _integrate(run, Ends(rows.x, leg_b, rows.raw), moving, rows.labels)
        for key in moving:
            attrs[key] += a[key]
        results[leg] = (f_ref, fx - f_ref - _row_total(a), used)
    return _Legs(attrs, results, fx)


def _attribution(run: Run, rows: _Rows, found: _Legs, padding: dict, given: dict) -> Attribution:
    """The result: per input in its own shape (an ignored input exactly 0, categorical ones per feature), averaged
    over baseline samples, with its completeness and the baselines as given."""
    engine, settings = run.engine, run.settings
    n, k = rows.n, rows.k
    per_key = {}
    for spec in engine.specs:
        a = found.attrs[spec.key]
        a = a if spec.key not in engine.ignored else np.zeros_like(a)  # exact zeros, not -0.0
        if spec.kind == "categorical":  # layer IG: summed over the embedding dimension, per original feature
            a = a.sum(axis=-1)
        per_key[spec.key] = rows.mean_k(a)
    prediction = rows.mean_k(found.fx)
    baseline_prediction, delta, steps_used, per_input = _completeness(run, rows, found.legs, per_key, prediction)

    def total_k(spent):  # what every leg and baseline sample of a customer spent: (n,)
        return sum(getattr(leg[2], spent) for leg in found.legs.values()).reshape(n, k).sum(axis=1)

    static_keys = engine.layout.keys_of("static")
    temporal_keys = engine.layout.keys_of("temporal")
    static = np.concatenate([per_key[key].reshape(n, -1) for key in static_keys], axis=1)
    return Attribution(
        static=static, temporal=per_key[temporal_keys[0]] if len(temporal_keys) == 1 else None,
        prediction=prediction, baseline_prediction=baseline_prediction, delta=delta,
        steps=steps_used.reshape(n, k).max(axis=1), settings=settings,
        space_used="output" if settings.space == "output" else engine.logit_kind, per_input=per_input,
        gradient_points=total_k("gradient_points"), forward_points=total_k("forward_points"),
        inputs=per_key, padding={key: padding[key] for key in temporal_keys}, roles=dict(engine.roles),
        ignored_inputs=engine.ignored, notes=tuple(engine.ignored_notes()), baselines=given,
    )


def _completeness(run: Run, rows: _Rows, legs: dict, per_key: dict, prediction):
    """(baseline prediction, delta, steps used per row, per-input completeness or None): the joint path's delta,
    or each input's own and the largest of them."""
    engine, settings = run.engine, run.settings
    n, k = rows.n, rows.k
    if settings.path == "joint":
        baseline_prediction = rows.mean_k(legs["joint"][0])
        delta = prediction - baseline_prediction - sum(v.reshape(n, -1).sum(1) for v in per_key.values())
        return baseline_prediction, delta, legs["joint"][2].steps, None
    fb = engine.forward_points(rows.baseline, rows.raw, settings.space, run.chunk, run.should_stop)[:, settings.target]
    _check_outputs(fb, rows.labels, "at the baseline")
    per_input = {
        key: {"reference_prediction": rows.mean_k(legs[key][0]), "delta": rows.mean_k(legs[key][1]),
              "steps": legs[key][2].steps.reshape(n, k).max(axis=1),
              "gradient_points": legs[key][2].gradient_points.reshape(n, k).sum(axis=1)}
        for key in engine.keys
    }
    deltas = np.stack([per_input[key]["delta"] for key in engine.keys])  # (inputs, n)
    delta = deltas[np.abs(deltas).argmax(axis=0), np.arange(n)]
    steps_used = np.max([legs[key][2].steps for key in engine.keys], axis=0)
    return rows.mean_k(fb), delta, steps_used, per_input


def _row_total(attrs: dict) -> np.ndarray:
    return sum(a.reshape(a.shape[0], -1).sum(axis=1) for a in attrs.values())


def _check_outputs(values, labels, where):
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AttributionError(NOT_FINITE_RESULT.format(what="outputs", customer=_customer_label(labels, i),
                                                        where=where))


def _integrate(run: Run, ends: Ends, moving, labels, *, rules: list | None = None):
    """Attributions along b -> x of every row for the ``moving`` inputs ({key: (rows, *point shape)}),
    what was spent (:class:`Spent`), f(x) (rows,) and f(b) (rows,). ``rules``, a list when given, gets
    each row's final rule appended: (alphas, weights, its panels' edges) (``explain.core.points`` draws it).

    A fixed ``steps`` is the rule with that many points for every row; "auto" is adaptive
    integration (``explain.core.adaptive``) per row until |delta| <= tolerance * |f(x) - f(b)|
    (at least ABSOLUTE_TOLERANCE) or ``settings.max_points`` gradient evaluations.
    """
    engine, settings = run.engine, run.settings
    rows = len(ends.x[engine.keys[0]])
    both = engine.forward_points({key: np.concatenate([ends.x[key], ends.b[key]]) for key in engine.keys},
                                 {key: np.concatenate([v, v]) for key, v in ends.raw.items()}, settings.space,
                                 run.chunk, run.should_stop)[:, settings.target]
    fx, fb = both[:rows], both[rows:]
    _check_outputs(fx, labels, "model output")
    _check_outputs(fb, labels, "at the baseline")
    direction = {key: ends.x[key].astype(np.float64) - ends.b[key] for key in moving}  # (x - b), float64
    gradients = _gradients(run, ends, moving, direction, labels)
    if settings.steps != AUTO:
        alphas, weights = alphas_and_weights(settings.method, settings.steps)
        every = np.arange(rows)
        flat, _ = gradients(every, np.broadcast_to(alphas, (rows, alphas.size)),
                            np.broadcast_to(weights, (rows, alphas.size)))
        spent = Spent.fixed(rows, settings.steps)
        if rules is not None:
            rules.extend([(alphas, weights, np.array([0.0, 1.0]))] * rows)
    else:
        flat, spent = _adaptive(run, ends, gradients, (fx, fb), moving, rules)
    attrs, offset = {}, 0
    for key in moving:  # the flat sums back to each input's shape: attributions = (x - b) * sums
        size = int(np.prod(engine.point_shapes[key]))
        attrs[key] = direction[key] * flat[:, offset:offset + size].reshape(rows, *engine.point_shapes[key])
        offset += size
    return attrs, spent, fx, fb


def _gradients(run: Run, ends: Ends, moving, direction: dict, labels):
    """The gradient callable of ``explain.core.adaptive``: rows ``index`` at their own alphas and weights ->
    their weighted gradient sums flattened over the ``moving`` inputs (m, D) and q = sums . (x - b) (m,)."""
    engine, settings = run.engine, run.settings

    def gradients(index, alphas, weights):
        sums, finite = engine.path_sums(ends, alphas, weights, settings.target, settings.space, run.chunk,
                                        should_stop=run.should_stop, index=index)
        if not finite.all():
            i = int(index[np.flatnonzero(~finite)[0]])
            raise AttributionError(NOT_FINITE_RESULT.format(
                what="gradients", customer=_customer_label(labels, i), where="along the path from the baseline"))
        flat = np.concatenate([sums[key].reshape(len(index), -1) for key in moving], axis=1)
        q = sum((direction[key][index] * sums[key]).reshape(len(index), -1).sum(axis=1) for key in moving)
        return flat, q

    return gradients


def _adaptive(run: Run, ends: Ends, gradients, f: tuple, moving, rules: list | None):
    """steps="auto": the flat gradient sums (rows, D) and what was spent, rows taken in groups so that the live
    panels' sums stay within ADAPTIVE_MEMORY; ``f``: (f(x), f(b)) of every row."""
    engine, settings = run.engine, run.settings
    fx, fb = f
    rows = len(fx)

    def forward(index, alphas):
        return engine.sweep(ends, index, alphas, settings.target, settings.space, run.chunk,
                            should_stop=run.should_stop)

    limit = completeness_limit(fx, fb, settings.tolerance)
    width = sum(int(np.prod(engine.point_shapes[key])) for key in moving)
    flat, spent = np.zeros((rows, width)), Spent.fixed(rows, 0)
    group = max(1, min(rows, ADAPTIVE_MEMORY // max(1, 8 * flat.shape[1] * ADAPTIVE_PANELS_HELD)))
    for start in range(0, rows, group):  # groups of rows: the live panels' sums stay within ADAPTIVE_MEMORY
        part = np.arange(start, min(rows, start + group))
        found = adaptive.integrate(lambda i, a: forward(part[i], a),
                                   lambda i, a, w: gradients(part[i], a, w),
                                   fb[part], fx[part], limit[part], method=settings.method,
                                   max_points=settings.max_points, keep_rule=rules is not None)
        flat[part] = found.sums
        if rules is not None:
            rules.extend((a, w, edges) for (a, w), edges in zip(found.rules, found.edges))
        spent.put(part, found)
    return flat, spent


@dataclass
class Spent:
    """Per row: the final rule's points (``steps``), every gradient evaluation and every forward
    evaluation spent (f(x) and f(b) included)."""

    steps: np.ndarray
    gradient_points: np.ndarray
    forward_points: np.ndarray

    @classmethod
    def fixed(cls, rows: int, steps: int) -> "Spent":
        return cls(np.full(rows, steps, np.int64), np.full(rows, steps, np.int64), np.full(rows, 2, np.int64))

    def put(self, part, found) -> None:
        self.steps[part], self.gradient_points[part] = found.final_points, found.gradient_points
        self.forward_points[part] = found.forward_points


def path_profile(model, inputs: dict, baselines: dict, *, points: int = 33, target: int = 0, space: str = "output",
                 should_stop: StopCheck = None, roles: dict | None = None):
    """Prediction and gradient size along the straight path from the baseline to one customer.

    Returns a dict of float64 arrays over ``alphas`` (points,): ``prediction``,
    ``grad_norm_static``, ``grad_norm_temporal`` (L2 norms of the gradient of all inputs of
    that role) and ``grad_norm`` {key: norm of that input's gradient}. Flat stretches with
    tiny gradients show saturation. ``should_stop`` as in ``integrated_gradients``.
    """
    engine = engine_for(model, roles)
    space = parse_space(space)
    target = resolve_target(target, engine.n_outputs, None)
    x, raw, padding, n = _check_inputs(engine, inputs, None)
    b, _ = _check_baselines(engine, baselines, n, None, x, padding)
    alphas = np.linspace(0.0, 1.0, points)
    path = {}
    for key in engine.keys:
        x0, b0 = x[key][0].astype(np.float64), b[key][0, 0]
        path[key] = b0 + alphas.reshape(-1, *([1] * x0.ndim)) * (x0 - b0)  # (points, *point shape)
    raw_path = {key: np.repeat(v[:1], points, axis=0) for key, v in raw.items()}
    check_stop(should_stop)
    out, grads = engine.point_gradients(path, raw_path, target, space)
    norms = {key: np.linalg.norm(g.reshape(points, -1), axis=1) for key, g in grads.items()}

    def role_norm(role):
        parts = [norms[key] ** 2 for key in engine.keys if engine.roles[key] == role]
        return np.sqrt(np.sum(parts, axis=0))

    return {"alphas": alphas, "prediction": out, "grad_norm_static": role_norm("static"),
            "grad_norm_temporal": role_norm("temporal"), "grad_norm": norms}


def describe_model(model, roles: dict | None = None) -> dict:
    """What the engine detected: every input's role, kind, shape, dtype, embedding and padding;
    outputs; logit head. ``static_input``/``temporal_input`` describe the first of each role."""
    engine = engine_for(model, roles)
    described = [spec.describe() for spec in engine.specs]

    def first(role):
        spec = next(s for s in engine.specs if s.role == role)
        return {"name": spec.name, "shape": (None, *spec.shape), "dtype": spec.dtype, "position": spec.position}

    return {
        "static_input": first("static"),
        "temporal_input": first("temporal"),
        "inputs": described,
        "outputs": engine.n_outputs,
        "logit_space": engine.logit_kind,
        "traces": dict(engine.traces),
    }


def model_notes(model, roles=None) -> list[str]:
    """Warnings about ``model`` that do not stop an attribution: one sentence per input the model
    does not use (its attributions are exactly 0). Empty when the engine refuses the model
    (``model_problems`` says why)."""
    roles = dict(roles) if isinstance(roles, dict) and roles else None
    try:
        return engine_for(model, roles).ignored_notes()
    except AttributionError:
        return []


def model_problems(model, inputs: dict | None = None, baselines: dict | None = None,
                   roles=None) -> list[str]:
    """Every problem the engine would raise for ``model`` before or at its first gradient pass,
    in the words of ``integrated_gradients``: inputs it cannot attribute (an integer input
    without an Embedding, a 4-D input, roles it cannot tell), inputs connected to the output
    without a gradient (a stop_gradient; an input the model does not use is a note: ``model_notes``), and
    (with ``inputs`` and ``baselines``) a baseline period equal to the mask value.

    ``baselines``: one baseline (arrays by input key) or several by name (``{"zero": {...},
    "mean": {...}}``). ``roles``: {input name: role} as ``integrated_gradients`` takes it (a
    sequence of roles in model order, such as ``Bundle.input_roles``, is the default and ignored).
    """
    roles = dict(roles) if isinstance(roles, dict) and roles else None
    layout = input_layout(model, roles)
    if layout.count < 2:
        return [NOT_TWO_INPUTS.format(count=layout.count, shapes=list(layout.shapes) or "(no symbolic inputs)")]
    problems = [spec.problem for spec in layout.specs if spec.problem]
    if layout.roles is None and not problems:
        problems.append(AMBIGUOUS_ROLES.format(shapes=list(layout.shapes)) if layout.problem == "roles"
                        else layout.problem)
    if problems:
        return problems
    try:
        engine = engine_for(model, roles)
        engine.function("path", "output")  # tracing it finds inputs whose gradient is None
    except AttributionError as error:
        return [str(error)]
    problems += engine.disconnected_problems("output", 0)
    if inputs is None or baselines is None or problems:
        return problems
    named = baselines if baselines and all(isinstance(v, dict) for v in baselines.values()) else {"": baselines}
    for name, baseline in named.items():
        try:
            x, raw, padding, n = _check_inputs(engine, inputs, None)
            _check_baselines(engine, baseline, n, None, x, padding)
        except AttributionError as error:
            problems.append(f"{name} baseline: {error}" if name else str(error))
    return problems
