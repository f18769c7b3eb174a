"""The compiled side of the IG engine: one set of TensorFlow functions per model.

``Engine`` reaches the model only through its compiled functions: ``path_sums`` (one call per
chunk of customers returns the quadrature-weighted gradient sums, f(x) and f(b)),
``forward`` and ``point_gradients``. Each has a dynamic batch dimension (an
``input_signature`` with ``None``), so the number of customers, the steps or the chunk size
never retrace it: one trace per model and output space. Every call holds the engine's lock
(one model is shared by the dashboard's sessions) and first asks ``should_stop`` (a
callable returning True to stop; it may also raise): ``Stopped`` is raised between two
chunks, never in the middle of one.
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable

import numpy as np
import tensorflow as tf

from explain.errors import AttributionError, Stopped
from explain.inputs import ROLES, input_layout

# Message templates (tests match them).
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
MULTI_OUTPUT = (
    "The model has {count} outputs; expected one output of shape (None, K). Build a model "
    "that returns the output to explain."
)

StopCheck = Callable[[], bool] | None


def check_stop(should_stop: StopCheck) -> None:
    """Raise ``Stopped`` if ``should_stop()`` is true (``should_stop`` may also raise itself)."""
    if should_stop is not None and should_stop():
        raise Stopped("stopped between two chunks (should_stop returned True)")


class Engine:
    """Compiled functions of one model; thread-safe (every model call holds ``lock``)."""

    def __init__(self, model):
        self.model_ref = weakref.ref(model)
        self.lock = model_lock(model)
        layout = input_layout(model)
        if layout.count != 2:
            raise AttributionError(NOT_TWO_INPUTS.format(count=layout.count, shapes=list(layout.shapes)))
        if layout.roles is None:
            raise AttributionError(AMBIGUOUS_ROLES.format(shapes=list(layout.shapes)))
        self.layout = layout
        self.static_position = layout.position("static")
        self.input_names = {role: layout.name(role) for role in ROLES}
        self.shapes = {role: layout.shape(role)[1:] for role in ROLES}
        self.dtypes = {}
        for role, tensor in zip(layout.roles, model.inputs):
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
        self.head, self.logit_kind = _logit_head(model)
        self.traces = {"path": 0, "forward": 0, "points": 0}
        self.disconnected: dict[str, bool] = {}
        self._functions: dict[tuple[str, str], object] = {}

    # -- model calls ---------------------------------------------------------

    def _call(self, static, temporal, space):
        model = self.model_ref()
        pair = self.layout.feed({"static": static, "temporal": temporal})
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

    def forward(self, static, temporal, space, batch_size, should_stop: StopCheck = None) -> np.ndarray:
        """Model outputs, (n, K) float64, in ``space``."""
        fn = self.function("forward", space)
        parts = []
        step = max(1, batch_size)
        for start in range(0, static.shape[0], step):
            check_stop(should_stop)
            with self.lock:
                parts.append(fn(tf.constant(static[start:start + step]), tf.constant(temporal[start:start + step])).numpy())
        return np.concatenate(parts, axis=0) if parts else np.zeros((0, self.n_outputs))

    def path_sums(self, xs, xt, bs, bt, alphas, weights, target, space, batch_size, should_stop: StopCheck = None):
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
                check_stop(should_stop)
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
_LOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_ENGINES_LOCK = threading.Lock()
_LOCKS_LOCK = threading.Lock()


def model_lock(model) -> threading.RLock:
    """The one lock of ``model``: every call of it (compiled or not) holds it, so that threads
    (the dashboard's sessions) can share one model."""
    with _LOCKS_LOCK:
        lock = _LOCKS.get(model)
        if lock is None:
            lock = _LOCKS[model] = threading.RLock()
        return lock


def predict(model, inputs, *, batch_size: int = 1024, should_stop: StopCheck = None) -> np.ndarray:
    """The model's outputs, (n, K) float64, for ``{"static": (n, S), "temporal": (n, T, F)}``.

    The plain forward pass, for any model with one 2-D and one 3-D input (also one that IG
    refuses, such as an integer input): chunks of ``batch_size`` customers, each holding the
    model's lock after asking ``should_stop``.
    """
    layout = input_layout(model)
    n = inputs["static"].shape[0]
    parts = []
    for start in range(0, n, max(1, int(batch_size))):
        chunk = {role: np.asarray(inputs[role][start:start + batch_size], dtype=np.float32) for role in ROLES}
        check_stop(should_stop)
        with model_lock(model):
            out = model(layout.feed(chunk), training=False)
        parts.append(np.asarray(out, dtype=np.float64).reshape(len(chunk["static"]), -1))
    return np.concatenate(parts) if parts else np.zeros((0, _output_width(model)))


def _output_width(model) -> int:
    try:
        return int(model.outputs[0].shape[-1])
    except Exception:  # a subclassed model without symbolic outputs
        return 1


def engine_for(model) -> Engine:
    """The engine (compiled functions) of ``model``, built once and shared by all threads."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(model)
        if engine is None:
            engine = _ENGINES[model] = Engine(model)
        return engine

