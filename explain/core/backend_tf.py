"""The engine's compiled functions on TensorFlow (Keras' default backend here): ``tf.function``
+ ``GradientTape``, one trace per model and output space (see ``explain.core.backend`` for the
interface and ``explain.core.engine`` for what the functions compute).

Each function has a dynamic batch dimension (an ``input_signature`` with ``None``), so the
number of customers, the steps or the chunk size never retrace it.
"""

from __future__ import annotations

import numpy as np

from explain.core.errors import NO_TENSORFLOW

try:
    import tensorflow as tf
except ImportError as error:  # not a base dependency (pyproject.toml): say which to install
    raise ImportError(NO_TENSORFLOW) from error

from explain.core import xla

NAME = "tensorflow"


def dtype(name):
    return tf.as_dtype(name)


def constant(value, dtype_):
    return tf.constant(value, dtype_)


def numpy(tensor) -> np.ndarray:
    return tensor.numpy()


def matmul(a, b):
    return tf.matmul(a, b)


def _trace(python_function, signature):
    """The concrete function of ``python_function`` for ``signature``, traced without AutoGraph:
    these bodies loop over Python lists only, and Keras 3 layers use no Python control flow on
    tensors (they run under JAX too), while AutoGraph's rewriting of their source was most of the
    first trace (1.3 of 2.1 s for the demo model on 2 cores: the first visitor's wait). A model
    whose own code needs AutoGraph (a custom layer with ``if tensor:``) fails that trace with a
    ``TypeError`` and is traced again with it."""
    try:
        return tf.function(python_function, input_signature=signature, autograph=False).get_concrete_function()
    except TypeError:  # tf.errors.OperatorNotAllowedInGraphError is one
        return tf.function(python_function, input_signature=signature).get_concrete_function()


def _dims(shape, tensor) -> list:
    """``shape`` (a point shape) with a free time axis (None) read from ``tensor`` (batch first)."""
    return [d if d is not None else tf.shape(tensor)[i + 1] for i, d in enumerate(shape)]


class Compiler:
    """The TensorFlow functions of one engine (``explain.core.engine.Engine``)."""

    def __init__(self, engine):
        self.engine = engine

    def check(self, layout) -> str | None:
        return None  # TensorFlow traces every input Keras accepts, text through its lookup layer too

    def build(self, kind: str, space: str):
        return getattr(self, f"_build_{kind}")(space)

    def for_chunks(self, space, fn, rows, alphas):
        return xla.for_chunks(self.engine, space, fn, rows, alphas)  # small chunks: XLA when enabled

    def fixed(self, space, rows):
        return xla.Fixed(self.engine, space, rows)  # a batch job's calls of ``rows`` rows, XLA-compiled

    def _call(self, points, raw, space):
        """The model (or its logit head) at ``points`` (one tensor per key, interpolation space);
        categorical inputs are fed their ids ``raw`` while their embeddings return the points."""
        e = self.engine
        model = e.model_ref()
        feed = e.layout.feed({key: raw[key] if key in e.categorical else points[key] for key in e.keys})
        with e.substituted(points):
            if space == "logit" and e.logit_kind == "logit":
                out = e.head(feed)
            else:
                out = model(feed, training=False)
        if isinstance(out, (list, tuple)):
            out = out[0]
        if len(out.shape) == 1:
            out = out[:, None]
        if space == "logit" and e.logit_kind == "log-odds":
            p = tf.clip_by_value(tf.cast(out, tf.float64), 1e-12, 1.0 - 1e-12)
            out = tf.math.log(p) - tf.math.log1p(-p)
        return out

    def _point_specs(self):
        e = self.engine
        return [tf.TensorSpec((None, *e.point_shapes[k]), e.point_dtypes[k]) for k in e.keys]

    def _raw_specs(self):
        e = self.engine
        return [tf.TensorSpec((None, *e.shapes[k]), e.raw_dtypes[k]) for k in e.categorical]

    def _path_points(self, xs, bs, alphas):
        """{key: (c * k, *shape)}: b + a (x - b) of every row at each of its own k alphas (c, k)."""
        c, k = tf.shape(alphas)[0], tf.shape(alphas)[1]
        points = {}
        for key, x, b in zip(self.engine.keys, xs, bs):
            shape = self.engine.point_shapes[key]
            a = tf.reshape(tf.cast(alphas, x.dtype), (c, k, *([1] * len(shape))))  # (c, k, 1, ...)
            # points: (c, k, *shape) -> (c * k, *shape)
            points[key] = tf.reshape(b[:, None] + a * (x - b)[:, None], (c * k, *_dims(shape, x)))
        return points

    def _build_path(self, space):
        e = self.engine
        signature = [
            self._point_specs(), self._point_specs(), self._raw_specs(),
            tf.TensorSpec((None, None), tf.float64),  # alphas (c, k): each row its own
            tf.TensorSpec((None, None), tf.float64),  # weights (c, k)
            tf.TensorSpec((), tf.int32),  # target column
        ]

        def path_gradients(xs, bs, raws, alphas, weights, target):
            e.traces["path"] += 1  # Python side effect: runs at trace time only
            c, k = tf.shape(alphas)[0], tf.shape(alphas)[1]
            points = self._path_points(xs, bs, alphas)
            raw = {key: tf.repeat(r, k, axis=0) for key, r in zip(e.categorical, raws)}  # (c * k, ...)
            with tf.GradientTape() as tape:
                tape.watch(list(points.values()))
                out = tf.gather(self._call(points, raw, space), target, axis=1)  # (c * k,)
                total = tf.reduce_sum(out)
            grads = tape.gradient(total, [points[key] for key in e.keys])
            e.disconnected[space] = {key: g is None for key, g in zip(e.keys, grads)}
            sums, finite = [], tf.ones((c,), tf.bool)
            for key, g in zip(e.keys, grads):
                shape = e.point_shapes[key]
                g = tf.zeros_like(points[key]) if g is None else g
                # grads: (c * k, *shape) -> (c, k, prod(shape)); each row's weighted sum over its k in float64
                g = tf.reshape(tf.cast(g, tf.float64), (c, k, -1))
                sums.append(tf.reshape(tf.einsum("ckp,ck->cp", g, weights), (c, *_dims(shape, points[key]))))
                finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(g), axis=[1, 2]))
            return sums, finite

        concrete = _trace(path_gradients, signature)  # called directly: less overhead per call
        concrete.python_function = path_gradients  # explain.core.xla compiles the same body
        return concrete

    def _build_sweep(self, space):
        e = self.engine

        def sweep(xs, bs, raws, alphas, target):
            e.traces["sweep"] += 1
            c, k = tf.shape(alphas)[0], tf.shape(alphas)[1]
            raw = {key: tf.repeat(r, k, axis=0) for key, r in zip(e.categorical, raws)}
            out = tf.gather(self._call(self._path_points(xs, bs, alphas), raw, space), target, axis=1)
            return tf.reshape(tf.cast(out, tf.float64), (c, k))

        return _trace(sweep, [self._point_specs(), self._point_specs(), self._raw_specs(),
                              tf.TensorSpec((None, None), tf.float64), tf.TensorSpec((), tf.int32)])

    def _build_forward(self, space):
        e = self.engine

        def forward(xs, raws):
            e.traces["forward"] += 1
            points = dict(zip(e.keys, xs))
            return tf.cast(self._call(points, dict(zip(e.categorical, raws)), space), tf.float64)  # (n, K)

        return _trace(forward, [self._point_specs(), self._raw_specs()])

    def _build_points(self, space):
        e = self.engine

        def point_gradients(ps, raws, target):
            e.traces["points"] += 1
            with tf.GradientTape() as tape:
                tape.watch(ps)
                out = tf.gather(self._call(dict(zip(e.keys, ps)), dict(zip(e.categorical, raws)), space),
                                target, axis=1)
                total = tf.reduce_sum(out)
            grads = tape.gradient(total, ps)
            grads = [tf.zeros_like(p) if g is None else g for p, g in zip(ps, grads)]
            return tf.cast(out, tf.float64), grads

        return _trace(point_gradients, [self._point_specs(), self._raw_specs(), tf.TensorSpec((), tf.int32)])

    def _build_embed(self, key):
        e = self.engine
        spec = e.layout.spec(key)

        def embed(raw):
            e.traces["embed"] += 1
            index = spec.lookup(raw) if spec.lookup is not None else raw
            vectors = tf.cast(spec.embedding(index), e.point_dtypes[key])
            padded = tf.equal(index, 0) if spec.mask_zero else tf.zeros(tf.shape(index), tf.bool)
            return vectors, padded

        return _trace(embed, [tf.TensorSpec((None, *e.shapes[key]), e.raw_dtypes[key])])
