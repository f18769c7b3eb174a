"""The Integrated Gradients engine for a model with a static and a temporal input.

One compiled TensorFlow function per model and output space builds the interpolation
points of a chunk of customers, evaluates the model and its gradients for all of them in
one batched pass and returns the quadrature-weighted gradient sums in float64. Python
only validates, slices the customers into chunks and multiplies by ``(x - b)``.

The function has a dynamic batch dimension (an ``input_signature`` with ``None``), so
changing the number of customers, the steps or the chunk size never retraces it: one
trace per model and space. (Padding to a fixed chunk would do the same, but would make a
single customer at 16 steps pay for a whole chunk.)
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from explain.errors import AttributionError
from explain.quadrature import MAX_STEPS, METHODS, alphas_and_weights

SPACES = ("output", "logit")
PATHS = ("joint", "per-input")
ROLES = ("static", "temporal")
DEFAULT_BATCH_SIZE = 4096  # interpolation points per gradient call
AUTO_START_STEPS = 16
AUTO_MAX_STEPS = 1024
DEFAULT_TOLERANCE = 0.005  # of |f(x) - f(b)|
ABSOLUTE_TOLERANCE = 1e-4  # floor, for customers whose f(x) is close to f(b)

# Message templates (tests import them).
NOT_TWO_INPUTS = (
    "The model has {count} input(s) {shapes}; expected exactly two: a static input of shape "
    "(None, S) and a temporal input of shape (None, T, F), in either order."
)
AMBIGUOUS_ROLES = (
    "Cannot tell the model's static input from its temporal one: input shapes are {shapes}. "
    "Expected one 2-D input (None, S) and one 3-D input (None, T, F). Reshape the inputs "
    "so that their ranks differ, or wrap the model so that it does."
)
NON_FLOAT_INPUT = (
    "The model's {role} input {name!r} has dtype {dtype}; Integrated Gradients needs a float "
    "input, because it differentiates the output with respect to it (gradients of integer or "
    "boolean inputs are None). Feed floats, or attribute at the embedding layer's output "
    "instead of the ids."
)
DISCONNECTED_INPUT = (
    "The model's output {target} does not depend on its {role} input {name!r}: its gradient "
    "is None. Check that the input is connected to the output (not only to a side branch), "
    "and that it is not cast to an integer or passed through a stop_gradient."
)
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
TARGET_OUT_OF_RANGE = (
    "target={target!r} is out of range: the model has {k} output column(s), so the target must "
    "be an integer from 0 to {last}{names}."
)
UNKNOWN_TARGET_NAME = "target={target!r} is not an output name; the output names are {names}."
UNKNOWN_SETTING = "{name}={value!r} is not valid; expected one of: {expected}."
BAD_TOLERANCE = "tolerance={value!r} must be a positive number (a fraction of |f(x) - f(b)|)."
BAD_BATCH_SIZE = "batch_size={value!r} must be a positive integer (interpolation points per call) or None."
MULTI_OUTPUT = (
    "The model has {count} outputs; expected one output of shape (None, K). Build a model "
    "that returns the output to explain."
)
SAMPLE_SHAPES = (
    "baselines: a distribution of baselines needs both arrays with a sample axis: static "
    "(1 or n, K, S) and temporal (1 or n, K, T, F), with the same K. Got {static} and {temporal}."
)


@dataclass(frozen=True)
class Settings:
    """The settings an attribution was computed with."""

    steps: int | str
    method: str
    target: int
    space: str
    path: str
    batch_size: int | None
    tolerance: float

    def as_dict(self) -> dict:
        return {
            "steps": self.steps,
            "method": self.method,
            "target": self.target,
            "space": self.space,
            "path": self.path,
        }


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


# --------------------------------------------------------------------------- engine


class _Engine:
    """Compiled functions of one model; thread-safe."""

    def __init__(self, model):
        self.model_ref = weakref.ref(model)
        self.lock = threading.RLock()
        inputs = list(getattr(model, "inputs", None) or [])
        shapes = [tuple(t.shape) for t in inputs]
        if len(inputs) != 2:
            raise AttributionError(NOT_TWO_INPUTS.format(count=len(inputs), shapes=shapes))
        ranks = [len(s) for s in shapes]
        if sorted(ranks) != [2, 3]:
            raise AttributionError(AMBIGUOUS_ROLES.format(shapes=shapes))
        self.static_position = ranks.index(2)
        self.input_names = {
            "static": inputs[self.static_position].name,
            "temporal": inputs[1 - self.static_position].name,
        }
        self.shapes = {
            "static": shapes[self.static_position][1:],
            "temporal": shapes[1 - self.static_position][1:],
        }
        self.dtypes = {}
        for role, tensor in zip(
            ("static", "temporal") if self.static_position == 0 else ("temporal", "static"), inputs
        ):
            dtype = tf.as_dtype(tensor.dtype)
            if not dtype.is_floating:
                raise AttributionError(
                    NON_FLOAT_INPUT.format(role=role, name=tensor.name, dtype=dtype.name)
                )
            self.dtypes[role] = dtype
        outputs = model.outputs if getattr(model, "outputs", None) else None
        if outputs is not None and len(outputs) != 1:
            raise AttributionError(MULTI_OUTPUT.format(count=len(outputs)))
        out_shape = tuple(outputs[0].shape) if outputs else (None, 1)
        self.n_outputs = int(out_shape[-1]) if len(out_shape) == 2 and out_shape[-1] else 1
        # How the model wants its inputs: a list in model.inputs order, or a dict by key.
        structure = getattr(model, "_inputs_struct", None)
        self.input_keys = None
        if isinstance(structure, dict):
            by_id = {id(t): key for key, t in structure.items()}
            self.input_keys = [by_id.get(id(t)) for t in inputs]
            if None in self.input_keys:
                self.input_keys = None
        self.head, self.logit_kind = _logit_head(model)
        self.traces = {"path": 0, "forward": 0, "points": 0}
        self.disconnected: dict[str, bool] = {}
        self._functions: dict[tuple[str, str], object] = {}

    # -- model calls ---------------------------------------------------------

    def _call(self, static, temporal, space):
        model = self.model_ref()
        pair = [static, temporal] if self.static_position == 0 else [temporal, static]
        if self.input_keys is not None:
            pair = dict(zip(self.input_keys, pair))
        if space == "logit" and self.logit_kind == "logit":
            out = self.head(pair)
        else:
            out = model(pair, training=False)
        if isinstance(out, (list, tuple)):
            out = out[0]
        if len(out.shape) == 1:
            out = out[:, None]
        if space == "logit" and self.logit_kind == "log-odds":
            p = tf.clip_by_value(tf.cast(out, tf.float64), 1e-12, 1.0 - 1e-12)
            out = tf.math.log(p) - tf.math.log1p(-p)
        return out

    def _specs(self):
        s, t = self.shapes["static"], self.shapes["temporal"]
        return (
            tf.TensorSpec((None, *s), self.dtypes["static"]),
            tf.TensorSpec((None, *t), self.dtypes["temporal"]),
        )

    def function(self, kind: str, space: str):
        """The compiled function ``kind`` ("path", "forward" or "points") for ``space``."""
        key = (kind, space)
        with self.lock:
            if key not in self._functions:
                self._functions[key] = getattr(self, f"_build_{kind}")(space)
            return self._functions[key]

    def _build_path(self, space):
        spec_s, spec_t = self._specs()
        signature = [
            spec_s, spec_t, spec_s, spec_t,
            tf.TensorSpec((None,), tf.float64),  # alphas (k,)
            tf.TensorSpec((None,), tf.float64),  # weights (k,)
            tf.TensorSpec((), tf.int32),  # target column
        ]

        @tf.function(input_signature=signature)
        def path_gradients(xs, xt, bs, bt, alphas, weights, target):
            self.traces["path"] += 1  # Python side effect: runs at trace time only
            c, k = tf.shape(xs)[0], tf.shape(alphas)[0]
            a_s = tf.cast(alphas, xs.dtype)[None, :, None]  # (1, k, 1)
            a_t = tf.cast(alphas, xt.dtype)[None, :, None, None]  # (1, k, 1, 1)
            # points: (c, k, S) -> (c * k, S) and (c, k, T, F) -> (c * k, T, F)
            ps = tf.reshape(bs[:, None] + a_s * (xs - bs)[:, None], (c * k, *self.shapes["static"]))
            pt = tf.reshape(bt[:, None] + a_t * (xt - bt)[:, None], (c * k, *self.shapes["temporal"]))
            with tf.GradientTape() as tape:
                tape.watch([ps, pt])
                out = tf.gather(self._call(ps, pt, space), target, axis=1)  # (c * k,)
                total = tf.reduce_sum(out)
            gs, gt = tape.gradient(total, [ps, pt])
            self.disconnected[space] = {"static": gs is None, "temporal": gt is None}
            gs = tf.zeros_like(ps) if gs is None else gs
            gt = tf.zeros_like(pt) if gt is None else gt
            # grads: (c * k, S) -> (c, k, S); weighted sum over k in float64
            gs = tf.reshape(tf.cast(gs, tf.float64), (c, k, *self.shapes["static"]))
            gt = tf.reshape(tf.cast(gt, tf.float64), (c, k, *self.shapes["temporal"]))
            sum_s = tf.einsum("cks,k->cs", gs, weights)
            sum_t = tf.einsum("cktf,k->ctf", gt, weights)
            finite = tf.logical_and(
                tf.reduce_all(tf.math.is_finite(tf.reshape(gs, (c, -1))), axis=1),
                tf.reduce_all(tf.math.is_finite(tf.reshape(gt, (c, -1))), axis=1),
            )
            # f(x) and f(b) of the same customers, in the same call: (c,) each
            ends = tf.gather(self._call(tf.concat([xs, bs], 0), tf.concat([xt, bt], 0), space), target, axis=1)
            ends = tf.cast(ends, tf.float64)
            return sum_s, sum_t, finite, ends[:c], ends[c:]

        return path_gradients.get_concrete_function()  # called directly: less overhead per call

    def _build_forward(self, space):
        spec_s, spec_t = self._specs()

        @tf.function(input_signature=[spec_s, spec_t])
        def forward(xs, xt):
            self.traces["forward"] += 1
            return tf.cast(self._call(xs, xt, space), tf.float64)  # (n, K)

        return forward.get_concrete_function()

    def _build_points(self, space):
        spec_s, spec_t = self._specs()

        @tf.function(input_signature=[spec_s, spec_t, tf.TensorSpec((), tf.int32)])
        def point_gradients(ps, pt, target):
            self.traces["points"] += 1
            with tf.GradientTape() as tape:
                tape.watch([ps, pt])
                out = tf.gather(self._call(ps, pt, space), target, axis=1)
                total = tf.reduce_sum(out)
            gs, gt = tape.gradient(total, [ps, pt])
            gs = tf.zeros_like(ps) if gs is None else gs
            gt = tf.zeros_like(pt) if gt is None else gt
            return tf.cast(out, tf.float64), gs, gt

        return point_gradients.get_concrete_function()

    # -- numpy-facing calls ----------------------------------------------------

    def forward(self, static, temporal, space, batch_size) -> np.ndarray:
        """Model outputs, (n, K) float64, in ``space``."""
        fn = self.function("forward", space)
        parts = []
        step = max(1, batch_size)
        for start in range(0, static.shape[0], step):
            with self.lock:
                parts.append(fn(tf.constant(static[start:start + step]), tf.constant(temporal[start:start + step])).numpy())
        return np.concatenate(parts, axis=0) if parts else np.zeros((0, self.n_outputs))

    def path_sums(self, xs, xt, bs, bt, alphas, weights, target, space, batch_size):
        """Path integrals of every row b -> x, in chunks of at most ``batch_size`` points.

        Returns sum_j w_j * grad f(b + a_j (x - b)): (n, S) and (n, T, F) float64, whether
        all those gradients were finite (n,), f(x) (n,) and f(b) (n,).
        """
        fn = self.function("path", space)
        n, k = xs.shape[0], alphas.shape[0]
        sum_s = np.zeros((n, *self.shapes["static"]), np.float64)
        sum_t = np.zeros((n, *self.shapes["temporal"]), np.float64)
        finite = np.ones(n, bool)
        fx, fb = np.zeros(n), np.zeros(n)
        target = tf.constant(target, tf.int32)
        per_call = max(1, batch_size // k)  # customers per call
        alpha_block = min(k, batch_size)  # alphas per call (< k only when k > batch_size)
        blocks = [(tf.constant(alphas[a0:a0 + alpha_block]), tf.constant(weights[a0:a0 + alpha_block]))
                  for a0 in range(0, k, alpha_block)]
        for start in range(0, n, per_call):
            rows = slice(start, min(n, start + per_call))
            chunk = [tf.constant(a[rows]) for a in (xs, xt, bs, bt)]
            for a, w in blocks:
                with self.lock:
                    s, t, ok, f_x, f_b = fn(*chunk, a, w, target)
                sum_s[rows] += s.numpy()
                sum_t[rows] += t.numpy()
                finite[rows] &= ok.numpy()
            fx[rows], fb[rows] = f_x.numpy(), f_b.numpy()
        for role, missing in self.disconnected.get(space, {}).items():
            if missing:
                raise AttributionError(
                    DISCONNECTED_INPUT.format(
                        target=f"column {int(target)}", role=role, name=self.input_names[role]
                    )
                )
        return sum_s, sum_t, finite, fx, fb


def _logit_head(model):
    """(callable giving the pre-activation output, kind) where kind is "logit" or "log-odds".

    "logit": the last layer is a Dense or an Activation ending in sigmoid or softmax, or a
    linear layer (the model already returns logits); "log-odds": anything else, explained as
    log(p / (1 - p)) of the output.
    """
    layers = getattr(model, "layers", None) or []
    if not layers:
        return None, "log-odds"
    last = layers[-1]
    activation = getattr(getattr(last, "activation", None), "__name__", None)
    if activation == "linear":
        return model, "logit"
    if activation not in ("sigmoid", "softmax"):
        return None, "log-odds"
    import keras

    try:
        hidden = keras.Model(model.inputs, last.input)
    except Exception:  # a subclassed model without a graph: fall back to log-odds
        return None, "log-odds"
    if last.__class__.__name__ == "Activation":
        return hidden, "logit"
    if last.__class__.__name__ != "Dense":
        return None, "log-odds"

    def head(pair):
        z = tf.matmul(hidden(pair, training=False), last.kernel)
        return z + last.bias if last.use_bias else z

    return head, "logit"


_ENGINES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_ENGINES_LOCK = threading.Lock()


def engine_for(model) -> _Engine:
    """The engine (compiled functions) of ``model``, built once and shared by all threads."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(model)
        if engine is None:
            engine = _ENGINES[model] = _Engine(model)
        return engine


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


def _resolve_target(target, n_outputs, output_names):
    names = list(output_names) if output_names is not None else None
    if isinstance(target, str) and not target.lstrip("-").isdigit():
        if names is None or target not in names:
            raise AttributionError(UNKNOWN_TARGET_NAME.format(target=target, names=names or "not given"))
        return names.index(target)
    try:
        index = int(target)
    except (TypeError, ValueError):
        index = None
    if index is None or isinstance(target, bool) or not 0 <= index < n_outputs:
        shown = f" (or a name: {', '.join(names)})" if names else ""
        raise AttributionError(TARGET_OUT_OF_RANGE.format(target=target, k=n_outputs, last=n_outputs - 1, names=shown))
    return index


def _check_choice(name, value, expected):
    if value not in expected:
        raise AttributionError(UNKNOWN_SETTING.format(name=name, value=value, expected=", ".join(expected)))


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
) -> Attribution:
    """Integrated Gradients of ``model`` for n customers, for both inputs at once.

    inputs: ``{"static": (n, S), "temporal": (n, T, F)}``. baselines: the same with a leading
    dimension of n or 1 (shared), or with a sample axis, ``(1 or n, K, S)`` and
    ``(1 or n, K, T, F)``, for expected gradients (IG averaged over the K baselines).
    steps: gradient evaluations per customer (and baseline), or "auto": doubled from 16 per
    customer until |delta| <= tolerance * |f(x) - f(b)| (at least 1e-4) or 1024 steps.
    target: an output column index, or a name from ``output_names``. space: "output", or
    "logit" for the pre-activation output (log-odds of the output if there is none).
    path: "joint" (both inputs move together) or "per-input" (one moves, the other stays at
    the customer's values). batch_size: the most interpolation points per gradient call; it
    never changes a result. ids: customer ids, used in error messages.
    """
    engine = engine_for(model)
    _check_choice("method", method, METHODS)
    _check_choice("space", space, SPACES)
    _check_choice("path", path, PATHS)
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1):
        raise AttributionError(BAD_BATCH_SIZE.format(value=batch_size))
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance > 0:
        raise AttributionError(BAD_TOLERANCE.format(value=tolerance))
    if steps != "auto":
        alphas_and_weights(method, steps)  # validates steps for this method
    target_index = _resolve_target(target, engine.n_outputs, output_names)
    x = _check_inputs(engine, inputs, ids)
    n = x["static"].shape[0]
    bs, bt, is_sample = _check_baselines(engine, baselines, n, ids)
    k = bs.shape[1]
    settings = Settings(steps, method, target_index, space, path, batch_size, float(tolerance))
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
            only=None if leg == "joint" else leg,
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
        fb = engine.forward(bs, bt, space, chunk)[:, target_index]
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


def _integrate(engine, x, b, steps, method, target, space, chunk, tolerance, labels, only=None):
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
    m = AUTO_START_STEPS if steps == "auto" else int(steps)
    while todo.size:
        alphas, weights = alphas_and_weights(method, m)
        s, t, finite, f_x, f_b = engine.path_sums(
            xs[todo], xt[todo], bs[todo], bt[todo], alphas, weights, target, space, chunk
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
        if steps != "auto" or 2 * m > AUTO_MAX_STEPS:
            break
        difference = fx[todo] - fb[todo]
        err = np.abs(difference - a_s.sum(1) - a_t.sum((1, 2)))
        todo = todo[err > np.maximum(tolerance * np.abs(difference), ABSOLUTE_TOLERANCE)]
        m *= 2
    return attr_s, attr_t, used, fx, fb


def path_profile(model, inputs: dict, baselines: dict, *, points: int = 33, target: int = 0, space: str = "output"):
    """Prediction and gradient size along the straight path from the baseline to one customer.

    Returns a dict of float64 arrays over ``alphas`` (points,): ``prediction``,
    ``grad_norm_static``, ``grad_norm_temporal`` (L2 norms of the gradient of each input).
    Flat stretches with tiny gradients show saturation.
    """
    engine = engine_for(model)
    _check_choice("space", space, SPACES)
    target = _resolve_target(target, engine.n_outputs, None)
    x = _check_inputs(engine, inputs, None)
    bs, bt, _ = _check_baselines(engine, baselines, x["static"].shape[0], None)
    alphas = np.linspace(0.0, 1.0, points)
    ps = (bs[0, 0] + alphas[:, None] * (x["static"][0] - bs[0, 0])).astype(engine.dtypes["static"].as_numpy_dtype)
    pt = (bt[0, 0] + alphas[:, None, None] * (x["temporal"][0] - bt[0, 0])).astype(engine.dtypes["temporal"].as_numpy_dtype)
    fn = engine.function("points", space)
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
