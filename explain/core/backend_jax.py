"""The engine's compiled functions on JAX (``KERAS_BACKEND=jax``): ``jax.jit`` over the model
called with its variables as arguments (a ``keras.StatelessScope``, what ``model.stateless_call``
does), gradients by ``jax.value_and_grad`` (see ``explain.core.backend`` for the interface and
``explain.core.engine`` for what the functions compute).

XLA compiles one program per shape: the rows of a call are padded to the next power of two
(repeating the last row, then cut off), so a request compiles at most a few shapes and the
numbers of a row never depend on its neighbours. 64-bit floats are switched on
(``jax_enable_x64``) so that the weighted gradient sums and log-odds are float64, as on
TensorFlow; the model itself still computes in its own dtype (float32 weights stay float32).

JAX has no ``None`` gradient: an input cut off by a ``stop_gradient`` or an integer cast gets
zeros. Such an input is found, as TensorFlow's ``None``, from the traced program: its gradient
depends on none of the function's arguments (not the points, not the model's weights) and is
all zeros.
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)  # float64 sums and log-odds, as on TensorFlow

import jax.numpy as jnp  # noqa: E402 - after the x64 switch
import keras  # noqa: E402
import numpy as np  # noqa: E402

NAME = "jax"
TEXT_INPUT = ("The model's input {name!r} goes through a {layer} layer before its Embedding: that layer runs on "
              "TensorFlow and cannot be compiled by JAX. Explain this model with KERAS_BACKEND=tensorflow, or feed "
              "the input as integer ids straight into its Embedding.")


class Dtype:
    """A dtype as the engine uses it (``.name``, ``.as_numpy_dtype``, like TensorFlow's ``DType``)."""

    def __init__(self, name):
        self.np = jnp.dtype(name)
        self.name = self.np.name
        self.as_numpy_dtype = self.np.type

    def __eq__(self, other):
        return isinstance(other, Dtype) and other.np == self.np

    def __hash__(self):
        return hash(self.np)

    def __repr__(self):
        return f"Dtype({self.name!r})"


def dtype(name) -> Dtype:
    return Dtype(getattr(name, "name", name))


def constant(value, dtype_: Dtype) -> np.ndarray:
    return np.asarray(value, dtype_.np)  # on the host: padded there, sent to the device by the call


def numpy(tensor) -> np.ndarray:
    return np.asarray(tensor)


def matmul(a, b):
    return keras.ops.matmul(a, b)


def bucket(rows: int) -> int:
    """The rows a call is compiled for: the next power of two (1, 2, 4, ...)."""
    return 1 << max(0, int(rows) - 1).bit_length()


def _pad(value, size: int):
    """Arrays (and lists of them) with a leading row axis padded to ``size`` rows by repeating the last row."""
    if isinstance(value, (list, tuple)):
        return [_pad(v, size) for v in value]
    value = np.asarray(value)
    if value.ndim == 0 or len(value) == size:
        return value
    last = value[-1:] if len(value) else np.zeros((1, *value.shape[1:]), value.dtype)
    return np.concatenate([value, np.repeat(last, size - len(value), axis=0)])


def _cut(value, rows: int):
    if isinstance(value, (list, tuple)):
        return [_cut(v, rows) for v in value]
    return value[:rows] if np.ndim(value) else value


class _Padded:
    """Call a jitted function of (state, args) with the model's current variables and the rows of every argument
    padded to a bucket (``fn(*args)`` calls ``jitted(state, [*args padded])``)."""

    def __init__(self, compiler, jitted):
        self.compiler, self.jitted = compiler, jitted

    def __call__(self, *args):
        rows = len(args[0][0]) if isinstance(args[0], (list, tuple)) else len(args[0])
        size = bucket(rows)
        out = self.jitted(self.compiler.state(), [_pad(a, size) for a in args])
        return _cut(jax.device_get(out), rows)  # one transfer back for all outputs


def _depends(jaxpr) -> list[bool]:
    """Per output of ``jaxpr``: whether it depends on any of its arguments (constants do not count)."""
    live = set(jaxpr.invars)
    for eqn in jaxpr.eqns:
        if any(type(v).__name__ != "Literal" and v in live for v in eqn.invars):
            live.update(eqn.outvars)
    return [type(v).__name__ != "Literal" and v in live for v in jaxpr.outvars]


class Compiler:
    """The JAX functions of one engine (``explain.core.engine.Engine``)."""

    def __init__(self, engine):
        self.engine = engine

    def check(self, layout) -> str | None:
        for spec in layout.specs:
            if spec.lookup is not None:
                return TEXT_INPUT.format(name=spec.name, layer=type(spec.lookup).__name__)
        return None

    def build(self, kind: str, space: str):
        return getattr(self, f"_build_{kind}")(space)

    def for_chunks(self, space, fn, rows, alphas):
        return fn  # every call is compiled already

    def fixed(self, space, rows):
        return self.engine.function("path", space)  # jax.jit compiles each shape already

    def state(self) -> list:
        """The model's variables now (weights may change between calls)."""
        return [v.value for v in self.engine.model_ref().variables]

    def _call(self, state, points, raw, space):
        """As TensorFlow's ``_call`` (``explain.core.backend_tf``), with the variables taken from ``state``."""
        e = self.engine
        model = e.model_ref()
        feed = e.layout.feed({key: raw[key] if key in e.categorical else points[key] for key in e.keys})
        with keras.StatelessScope(state_mapping=list(zip(model.variables, state))), e.substituted(points):
            if space == "logit" and e.logit_kind == "logit":
                out = e.head(feed)
            else:
                out = model(feed, training=False)
        if isinstance(out, (list, tuple)):
            out = out[0]
        out = jnp.asarray(out)
        if out.ndim == 1:
            out = out[:, None]
        if space == "logit" and e.logit_kind == "log-odds":
            p = jnp.clip(out.astype(jnp.float64), 1e-12, 1.0 - 1e-12)
            out = jnp.log(p) - jnp.log1p(-p)
        return out

    def _gradients(self, state, ps, raw, target, space):
        """(outputs of column ``target`` (m,), gradients of their sum by each point (list like ``ps``))."""
        e = self.engine

        def total(points):
            out = jnp.take(self._call(state, dict(zip(e.keys, points)), raw, space), target, axis=1)  # (m,)
            return jnp.sum(out), out

        (_, out), grads = jax.value_and_grad(total, has_aux=True)(list(ps))
        return out, grads

    def _path_points(self, xs, bs, alphas):
        """[(c * k, *shape)]: b + a (x - b) of every row at each of its own k alphas (c, k)."""
        c, k = alphas.shape
        points = []
        for key, x, b in zip(self.engine.keys, xs, bs):
            shape = self.engine.point_shapes[key]
            a = alphas.astype(x.dtype).reshape(c, k, *([1] * len(shape)))  # (c, k, 1, ...)
            # points: (c, k, *shape) -> (c * k, *shape)
            points.append((b[:, None] + a * (x - b)[:, None]).reshape(c * k, *x.shape[1:]))
        return points

    def _build_path(self, space):
        e = self.engine

        def path_gradients(state, args):
            xs, bs, raws, alphas, weights, target = args
            e.traces["path"] += 1  # Python side effect: runs at trace time only
            c, k = alphas.shape
            raw = {key: jnp.repeat(r, k, axis=0) for key, r in zip(e.categorical, raws)}  # (c * k, ...)
            _, grads = self._gradients(state, self._path_points(xs, bs, alphas), raw, target, space)
            sums, finite = [], jnp.ones((c,), bool)
            for x, g in zip(xs, grads):
                # grads: (c * k, *shape) -> (c, k, prod(shape)); each row's weighted sum over its k in float64
                g = g.astype(jnp.float64).reshape(c, k, -1)
                sums.append(jnp.einsum("ckp,ck->cp", g, weights).reshape(c, *x.shape[1:]))
                finite = finite & jnp.all(jnp.isfinite(g), axis=(1, 2))
            return sums, finite

        self._find_disconnected(space)
        return _Padded(self, jax.jit(path_gradients))

    def _find_disconnected(self, space):
        """``engine.disconnected[space]``: per input, whether its gradient is cut (see the module's text)."""
        e = self.engine
        ps = [np.zeros((1, *(d or 1 for d in e.point_shapes[k])), e.point_dtypes[k].np) for k in e.keys]
        raws = {k: jnp.zeros((1, *(d or 1 for d in e.shapes[k])), e.raw_dtypes[k].np) for k in e.categorical}
        target = np.int32(0)

        def grads_only(state, ps):
            return self._gradients(state, ps, raws, target, space)[1]

        traced = jax.make_jaxpr(grads_only)(self.state(), ps)
        depends = _depends(traced.jaxpr)
        values = None
        result = {}
        for i, key in enumerate(e.keys):
            if depends[i]:
                result[key] = False
                continue
            if values is None:  # a constant gradient: zeros (cut) or a model without weights
                values = jax.core.eval_jaxpr(traced.jaxpr, traced.consts, *jax.tree_util.tree_leaves(
                    (self.state(), ps)))
            result[key] = not np.any(np.asarray(values[i]))
        e.disconnected[space] = result

    def _build_sweep(self, space):
        e = self.engine

        def sweep(state, args):
            xs, bs, raws, alphas, target = args
            e.traces["sweep"] += 1
            c, k = alphas.shape
            raw = {key: jnp.repeat(r, k, axis=0) for key, r in zip(e.categorical, raws)}
            points = dict(zip(e.keys, self._path_points(xs, bs, alphas)))
            out = jnp.take(self._call(state, points, raw, space), target, axis=1)
            return out.astype(jnp.float64).reshape(c, k)

        return _Padded(self, jax.jit(sweep))

    def _build_forward(self, space):
        e = self.engine

        def forward(state, args):
            xs, raws = args
            e.traces["forward"] += 1
            out = self._call(state, dict(zip(e.keys, xs)), dict(zip(e.categorical, raws)), space)
            return out.astype(jnp.float64)  # (n, K)

        return _Padded(self, jax.jit(forward))

    def _build_points(self, space):
        e = self.engine

        def point_gradients(state, args):
            ps, raws, target = args
            e.traces["points"] += 1
            out, grads = self._gradients(state, ps, dict(zip(e.categorical, raws)), target, space)
            return out.astype(jnp.float64), grads

        return _Padded(self, jax.jit(point_gradients))

    def _build_embed(self, key):
        e = self.engine
        spec = e.layout.spec(key)
        model = e.model_ref()

        def embed(state, args):
            (raw,) = args
            e.traces["embed"] += 1
            with keras.StatelessScope(state_mapping=list(zip(model.variables, state))):
                vectors = jnp.asarray(spec.embedding(raw)).astype(e.point_dtypes[key].np)
            padded = jnp.equal(raw, 0) if spec.mask_zero else jnp.zeros(raw.shape, bool)
            return vectors, padded

        return _Padded(self, jax.jit(embed))
