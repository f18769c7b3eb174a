"""The compiled side of the IG engine: one set of compiled functions per model.

The engine works in *interpolation space*: one float tensor per model input, the input itself
for a numeric input and the output of its ``Embedding`` for a categorical one (layer IG).
``embed`` maps category ids (or text, through the model's lookup layer) to their vectors;
``path_sums`` reads as points -> gradient calls -> sums: each row's path b -> x at its own alphas
and weights (``Ends``), cut into calls of at most ``batch_size`` points, each call's
quadrature-weighted gradient sums added into its rows' totals. ``sweep`` returns the model's output
along each row's path (model calls only); ``forward_points`` and ``point_gradients`` complete it.
While such a function is traced, each Embedding's ``call`` is replaced (for the tracing thread only)
by one that returns the interpolated vectors, while the model still receives the customer's ids:
its lookups and ``mask_zero`` masks see the customer's real ids all along the path.

The chunking, the alphas and weights of each row, the checks and the cancellation are written
here once, on NumPy; the compiled functions come from Keras' backend (``explain.core.backend``:
TensorFlow's ``tf.function`` by default, ``jax.jit`` with ``KERAS_BACKEND=jax``), one trace per
model and output space. Three helpers have modules of their own: the padding cut
(``explain.core.cut``: calls on the periods after a shared leading padding), the call pool
(``explain.core.calls``: the calls in order, a batch job's compiled ones two at a time in threads)
and the compiled calls (``explain.core.xla``). Every call holds the engine's lock (one model is
shared by the dashboard's sessions), except a batch job's compiled calls; each call first asks
``should_stop`` (a callable returning True to stop; it may also raise): ``Stopped`` is raised
between two chunks, never in the middle of one.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from explain.core import backend, xla
from explain.core.calls import COMPILED_IN_FLIGHT, InFlight
from explain.core.cut import CUT_STEP, Checked, Cut, Probe
from explain.core.errors import AttributionError, Stopped
from explain.core.inputs import input_layout

# Message templates (tests match them).
NOT_TWO_INPUTS = (
    "The model has {count} input(s) {shapes}; expected at least two: a static input of shape "
    "(None, S) and a temporal input of shape (None, T, F), in any order (more of either are fine)."
)
AMBIGUOUS_ROLES = (
    "Cannot tell the model's static input from its temporal one: input shapes are {shapes}. "
    "Expected at least one 2-D input (None, S) and one 3-D input (None, T, F). Reshape the inputs "
    "so that their ranks differ, or wrap the model so that it does."
)
DISCONNECTED_INPUT = (
    "The model's output {target} has no gradient with respect to its {role} input {name!r} (it is None), "
    "although the model's graph connects that input to the output: a stop_gradient or a cast to an integer "
    "cuts it, so its attributions could not add up. Remove the stop_gradient or the cast, or feed that "
    "input through an Embedding."
)
IGNORED_INPUT = (
    "The model does not use its {role} input {name!r} (its graph does not connect it to the output): "
    "every attribution of that input is 0."
)
MULTI_OUTPUT = (
    "The model has {count} outputs; expected one output of shape (None, K). Build a model "
    "that returns the output to explain."
)

StopCheck = Callable[[], bool] | None


class Ends(NamedTuple):
    """Both ends of each row's path in interpolation space, and the ids the model reads all along it:
    ``x``, ``b`` {key: (n, *point shape)} the customer and the baseline, ``raw`` {key: (n, *shape)} the
    categorical inputs' ids."""

    x: dict
    b: dict
    raw: dict


backend.module()  # imported with the engine: without TensorFlow (the default backend) this says what to install


def check_stop(should_stop: StopCheck) -> None:
    """Raise ``Stopped`` if ``should_stop()`` is true (``should_stop`` may also raise itself)."""
    if should_stop is not None and should_stop():
        raise Stopped("stopped between two chunks (should_stop returned True)")


class Engine:
    """Compiled functions of one model; thread-safe (every model call holds ``lock``)."""

    def __init__(self, model, roles=None):
        self.model_ref = weakref.ref(model)
        self.lock = model_lock(model)
        self.roles_given = roles
        layout = input_layout(model, roles)
        shapes = list(layout.shapes)
        if layout.count < 2:
            raise AttributionError(NOT_TWO_INPUTS.format(count=layout.count, shapes=shapes))
        for spec in layout.specs:  # an integer input without an embedding, a 4-D input, ...
            if spec.problem:
                raise AttributionError(spec.problem)
        if layout.roles is None:
            raise AttributionError(AMBIGUOUS_ROLES.format(shapes=shapes) if layout.problem == "roles"
                                   else layout.problem)
        self.fx = backend.module()  # the backend's compiled functions (Keras' own backend)
        self.backend = self.fx.NAME
        self.compiler = self.fx.Compiler(self)
        problem = self.compiler.check(layout)
        if problem:
            raise AttributionError(problem)
        self.layout = layout
        self.specs = layout.specs
        self.keys = layout.engine_keys
        self.input_names = {s.key: s.name for s in self.specs}
        self.roles = {s.key: s.role for s in self.specs}
        self.shapes = {s.key: tuple(s.shape) for s in self.specs}  # feature shapes of the model inputs
        self.categorical = tuple(s.key for s in self.specs if s.kind == "categorical")
        self.ignored = tuple(s.key for s in self.specs if s.unused)  # inputs the graph does not connect to the output
        # interpolation space: the input, or its embedding (feature shape + (d,))
        self.point_shapes, self.point_dtypes, self.raw_dtypes = {}, {}, {}
        for s in self.specs:
            if s.kind == "categorical":
                self.point_shapes[s.key] = (*s.shape, int(s.embedding.output_dim))
                self.point_dtypes[s.key] = self.fx.dtype(s.embedding.compute_dtype or "float32")
                self.raw_dtypes[s.key] = self.fx.dtype(s.dtype)
            else:
                self.point_shapes[s.key] = tuple(s.shape)
                self.point_dtypes[s.key] = self.fx.dtype(s.dtype)
        self.dtypes = dict(self.point_dtypes)
        self.float64 = self.fx.dtype("float64")
        self.static_position = layout.position("static")
        outputs = model.outputs if getattr(model, "outputs", None) else None
        if outputs is not None and len(outputs) != 1:
            raise AttributionError(MULTI_OUTPUT.format(count=len(outputs)))
        out_shape = tuple(outputs[0].shape) if outputs else (None, 1)
        self.n_outputs = int(out_shape[-1]) if len(out_shape) == 2 and out_shape[-1] else 1
        self.head, self.logit_kind = _logit_head(model, self.fx.matmul)
        self.traces = {"path": 0, "forward": 0, "sweep": 0, "points": 0, "embed": 0}
        self.disconnected: dict[str, dict[str, bool]] = {}
        self._functions: dict[tuple[str, str], object] = {}
        self.cut = Cut(self, model)  # calls cut to the periods after a shared leading padding (path_sums)

    # -- compiled functions (explain.core.backend_tf / backend_jax) ------------

    def substituted(self, points):
        """While tracing: each categorical input's Embedding returns its points (this thread only)."""
        return _substituted({self.layout.spec(key).embedding: points[key] for key in self.categorical})

    def function(self, kind: str, space: str):
        """The compiled function ``kind`` ("path", "sweep", "forward", "points") for ``space``, or
        ("embed", key): the ids of one categorical input to their vectors."""
        key = (kind, space)
        with self.lock:
            if key not in self._functions:
                self._functions[key] = self.compiler.build(kind, space)
            return self._functions[key]

    # -- numpy-facing calls ----------------------------------------------------

    def embed(self, raw: dict, batch_size: int = 4096) -> tuple[dict, dict]:
        """Embedding vectors (n, *shape, d) float64 and padding (n, *shape) bool of the
        categorical inputs in ``raw``."""
        vectors, padded = {}, {}
        for key, values in raw.items():
            fn = self.function("embed", key)
            parts_v, parts_p = [], []
            for start in range(0, max(len(values), 1), max(1, batch_size)):
                with self.lock:
                    v, p = fn(self.fx.constant(values[start:start + batch_size], self.raw_dtypes[key]))
                parts_v.append(self.fx.numpy(v).astype(np.float64))
                parts_p.append(self.fx.numpy(p))
            vectors[key], padded[key] = np.concatenate(parts_v), np.concatenate(parts_p)
        return vectors, padded

    def _points_args(self, points, raw, rows=slice(None)):
        xs = [self.fx.constant(points[key][rows], self.point_dtypes[key]) for key in self.keys]
        raws = [self.fx.constant(raw[key][rows], self.raw_dtypes[key]) for key in self.categorical]
        return xs, raws

    def forward_points(self, points, raw, space, batch_size, should_stop: StopCheck = None) -> np.ndarray:
        """Model outputs, (n, K) float64, in ``space``, at ``points`` (interpolation space)."""
        fn = self.function("forward", space)
        n = len(points[self.keys[0]])
        parts = []
        step = max(1, batch_size)
        for start in range(0, n, step):
            check_stop(should_stop)
            xs, raws = self._points_args(points, raw, slice(start, start + step))
            with self.lock:
                parts.append(self.fx.numpy(fn(xs, raws)))
        return np.concatenate(parts, axis=0) if parts else np.zeros((0, self.n_outputs))

    def outputs(self, inputs: dict, space, batch_size, should_stop: StopCheck = None) -> np.ndarray:
        """Model outputs, (n, K) float64, in ``space``, for ``inputs`` keyed like ``keys`` (the
        model's values: floats, or the ids/texts of a categorical input)."""
        raw = {key: np.asarray(inputs[key]) for key in self.categorical}
        vectors, _ = self.embed(raw, batch_size)
        points = {key: vectors[key] if key in raw else np.asarray(inputs[key], self.point_dtypes[key].as_numpy_dtype)
                  for key in self.keys}
        return self.forward_points(points, raw, space, batch_size, should_stop)

    def forward(self, static, temporal, space, batch_size, should_stop: StopCheck = None) -> np.ndarray:
        """Model outputs, (n, K) float64, in ``space``, of a model with one static and one
        temporal input (``outputs`` takes any model's inputs)."""
        return self.outputs({"static": static, "temporal": temporal}, space, batch_size, should_stop)

    def point_gradients(self, points, raw, target, space):
        """(outputs (m,), {key: gradients (m, *point shape)}) at each point."""
        fn = self.function("points", space)
        xs, raws = self._points_args(points, raw)
        with self.lock:
            out, grads = fn(xs, raws, self._target(target))
        return self.fx.numpy(out), {key: self.fx.numpy(g) for key, g in zip(self.keys, grads)}

    def path_sums(self, ends: Ends, alphas, weights, target, space, batch_size, *, should_stop: StopCheck = None,
                  index=None):
        """Path integrals of every row b -> x, in chunks of at most ``batch_size`` points.

        ``ends``: the rows' x, b {key: (n, *point shape)} and raw {key: (n, *shape)} ids of the categorical
        inputs; ``alphas``, ``weights``: (k,) shared by every row, or (n, k), each row its own.
        ``index`` (m,): the rows are x[index], b[index] (several panels of one customer), gathered
        chunk by chunk. Returns {key: sum_j w_j * grad f(b + a_j (x - b))} float64 and whether all
        those gradients were finite, per row. How the rows are chunked never changes a row's result
        (with the cut on: within float rounding).

        Histories padded at the start (``Masking``): when ``self.cut`` allows it, rows are grouped by
        their leading padding and each call runs on the periods after the padding all its rows share
        (``explain.core.cut.Cut``); the gradients of the cut periods are exact zeros, as the full call's.
        """
        n = len(ends.x[self.keys[0]]) if index is None else len(index)
        k = np.shape(alphas)[-1]
        alphas, weights = (np.broadcast_to(np.asarray(a, np.float64), (n, k)) for a in (alphas, weights))
        path = _Path(ends, index, alphas, weights, self._target(target), space)
        chunks = self._chunks(path, n, batch_size)  # the points -> calls of rows and alphas
        sums = {key: np.zeros((n, *self.point_shapes[key]), np.float64) for key in self.keys}
        finite = np.ones(n, bool)
        calls = InFlight(chunks.width, self.lock)
        for rows in chunks.rows(n):  # -> the gradient calls, in order
            call, cut, (xs, bs, raws) = self._call_for(path, chunks, rows)
            for a0 in range(0, k, chunks.alpha_block):
                block = (rows, slice(a0, a0 + chunks.alpha_block))
                check_stop(should_stop)
                calls.submit(call, (xs, bs, raws, self.fx.constant(alphas[block], self.float64),
                                    self.fx.constant(weights[block], self.float64), path.target), (rows, cut),
                             alone=not (isinstance(call, Checked) and self.cut.compiled))  # checked: in threads
                for done in calls.finished():  # -> the sums of their rows
                    self._add(sums, finite, *done)
        for done in calls.finished(everything=True):
            self._add(sums, finite, *done)
        problems = self.disconnected_problems(space, int(target))
        if problems:
            raise AttributionError(problems[0])
        return sums, finite

    def _chunks(self, path: "_Path", n: int, batch_size: int) -> "_Chunks":
        """How ``path_sums`` cuts its ``n`` rows and their alphas into calls (and, for compiled calls, the cut
        checked first, on the most padded rows)."""
        k = path.alphas.shape[1]
        per_call = max(1, batch_size // k)  # rows per call
        alpha_block = min(k, batch_size)  # alphas per call (< k only when k > batch_size)
        fn = self.compiler.for_chunks(path.space, self.function("path", path.space), min(n, per_call),
                                      k if alpha_block == k else 0)
        lead = self.cut.leading(path.ends.x, path.ends.b, path.index) if self.cut.possible else None
        if lead is not None and lead.max() < CUT_STEP:
            lead = None  # nothing to cut: the calls (and every number) as without the cut
        if lead is not None and xla.is_bucket(fn) and not self.cut.compiling() \
                and lead.min() < xla.WHOLE_HISTORY_BELOW * self.longest_history():
            lead = None  # a small request's XLA bucket is ready: the whole history compiled beats a cut graph call
        compiled = lead is not None and self.cut.compiling()
        step = xla.COMPILED_CUT_STEP if compiled else CUT_STEP
        # compiled (TensorFlow's XLA: ``xla.Fixed`` traces each shape once, under the lock): COMPILED_IN_FLIGHT calls
        # at a time, as many points in flight as one call's. JAX traces in the calling thread: one at a time there;
        # so do the graph calls of a model whose cut was refused.
        threads = compiled and self.cut.state is not False and self.backend == "tensorflow"
        width = COMPILED_IN_FLIGHT if threads else 1
        per_call = -(-per_call // width)
        order = np.arange(n) if lead is None else np.argsort(-lead, kind="stable")  # similar padding share a call
        if compiled:  # the cut checked before the first call, on the most padded rows, in every process
            first = order[:per_call]
            if self.cut.state is None and lead[first].min() >= step:
                self.cut.enabled(self, Probe(fn, self._path_args(path.ends, path.source(first)), path.alphas[first],
                                             path.weights[first], path.target, path.space))
        return _Chunks(fn, per_call, alpha_block, lead, compiled, step, width, order)

    def longest_history(self) -> int:
        """The longest history the model reads (periods of its sequence inputs; 0 without one of fixed length)."""
        return max((shape[0] for shape in self.point_shapes.values() if len(shape) >= 2 and shape[0] is not None),
                   default=0)

    def _call_for(self, path: "_Path", chunks: "_Chunks", rows):
        """(the function, the periods cut, its tensors (x, b, ids)) of the call of ``rows``: the full call, or
        one cut to the periods after their shared leading padding."""
        xs, bs, raws = self._path_args(path.ends, path.source(rows))
        if chunks.lead is None:
            return chunks.fn, 0, (xs, bs, raws)
        cut = int(chunks.lead[rows].min()) // chunks.step * chunks.step
        if cut and self.cut.enabled(self, Probe(chunks.fn, (xs, bs, raws), path.alphas[rows], path.weights[rows],
                                                path.target, path.space)) \
                or chunks.compiled and self.cut.state:  # compiled: the rows without a cut through the clone too
            xs, bs = self.cut.trimmed(self, (xs, bs), cut)
            return self.cut.call(path.space, chunks.per_call if chunks.compiled else None), cut, (xs, bs, raws)
        return chunks.fn, 0, (xs, bs, raws)

    def _add(self, sums: dict, finite: np.ndarray, where: tuple, result) -> None:
        """One call's gradient sums and finite flags into the totals of its rows."""
        (rows, cut), (s, ok) = where, result
        for key, part in zip(self.keys, s):
            self.cut.add(sums[key], rows, self.fx.numpy(part), cut if key in self.cut.keys else 0)
        finite[rows] &= self.fx.numpy(ok)

    def sweep(self, ends: Ends, rows, alphas, target, space, batch_size, *, should_stop: StopCheck = None,
              width: int = 32) -> np.ndarray:
        """f(b + a (x - b)) at points (m,) of rows ``rows`` (m,) at ``alphas`` (m,): (m,) float64,
        the ``target`` column in ``space``; model calls only (no gradient). The points of one row
        share a call row of up to ``width`` alphas (x and b are sent once for them; a call row of
        fewer points repeats one); calls hold at most ``batch_size`` points."""
        rows, alphas = np.asarray(rows, np.int64), np.asarray(alphas, np.float64)
        m = len(rows)
        if m == 0:
            return np.zeros(0)
        order = np.argsort(rows, kind="stable")
        r, a = rows[order], alphas[order]
        starts = np.concatenate([[0], np.flatnonzero(np.diff(r)) + 1])
        counts = np.diff(np.concatenate([starts, [m]]))
        width = int(min(width, counts.max()))
        position = np.arange(m) - np.repeat(starts, counts)
        piece, slot = position // width, position % width
        first = np.concatenate([[True], (np.diff(r) != 0) | (np.diff(piece) != 0)])
        group = np.cumsum(first) - 1  # call row of each point
        grid = np.repeat(a[first][:, None], width, axis=1)  # padding repeats a point of the same call row
        grid[group, slot] = a
        fn = self.function("sweep", space)
        target = self._target(target)
        owners, out = r[first], np.zeros(grid.shape)
        per_call = max(1, batch_size // width)
        for start in range(0, len(owners), per_call):
            block = slice(start, start + per_call)
            xs, bs, raws = self._path_args(ends, owners[block])
            check_stop(should_stop)
            with self.lock:
                out[block] = self.fx.numpy(fn(xs, bs, raws, self.fx.constant(grid[block], self.float64), target))
        values = np.empty(m)
        values[order] = out[group, slot]
        return values

    def _path_args(self, ends: Ends, rows):
        xs, raws = self._points_args(ends.x, ends.raw, rows)
        return xs, [self.fx.constant(ends.b[key][rows], self.point_dtypes[key]) for key in self.keys], raws

    def _target(self, target: int):
        return self.fx.constant(target, self.fx.dtype("int32"))

    def disconnected_problems(self, space: str, target: int) -> list[str]:
        """Inputs whose gradient is None although the graph connects them to the output (a
        stop_gradient, an integer cast): their attributions could not add up. Unused inputs are
        no problem (``ignored``)."""
        return [DISCONNECTED_INPUT.format(target=f"column {target}", role=self.roles[key], name=self.input_names[key])
                for key, missing in self.disconnected.get(space, {}).items() if missing and key not in self.ignored]

    def ignored_notes(self) -> list[str]:
        """One sentence per input the model does not use (its attributions are exactly 0)."""
        return [IGNORED_INPUT.format(role=self.roles[key], name=self.input_names[key]) for key in self.ignored]

    def free_time(self, clone, mask) -> "Engine":
        """A copy of this engine whose compiled functions call ``clone`` (its temporal inputs ``mask``: any number
        of periods): the padding cut's calls (``explain.core.cut.Cut``)."""
        free = copy.copy(self)
        free.model_ref = weakref.ref(clone)  # the clone is held by the engine's ``Cut``
        free.point_shapes = {k: (None, *v[1:]) if k in mask else v for k, v in self.point_shapes.items()}
        free.shapes = {k: (None, *v[1:]) if k in mask else v for k, v in self.shapes.items()}
        free.head, free.logit_kind = _logit_head(clone, self.fx.matmul)
        free.traces, free.disconnected, free._functions = dict.fromkeys(self.traces, 0), {}, {}
        free.compiler, free.cut = self.fx.Compiler(free), None
        return free


class _Path(NamedTuple):
    """One ``path_sums`` request: the rows' ends (``index``: the rows are ends[index], or None), each row's
    ``alphas`` and ``weights`` (n, k) float64, the ``target`` column (a tensor) and the output ``space``."""

    ends: Ends
    index: np.ndarray | None
    alphas: np.ndarray
    weights: np.ndarray
    target: object
    space: str

    def source(self, rows):
        """The rows of ``ends`` that rows ``rows`` of this request read."""
        return rows if self.index is None else self.index[rows]


@dataclass(frozen=True)
class _Chunks:
    """How ``path_sums`` calls the model: ``fn`` on ``per_call`` rows and ``alpha_block`` alphas a call;
    ``lead`` (n,) each row's leading padding when calls may be cut (in multiples of ``step``), else None;
    ``compiled``: a batch job's compiled calls, ``width`` of them at once; rows in ``order``."""

    fn: object
    per_call: int
    alpha_block: int
    lead: np.ndarray | None
    compiled: bool
    step: int
    width: int
    order: np.ndarray

    def rows(self, n: int):
        """Each call's rows: slices in order, or (with the cut) similar padding together; compiled calls the
        longest first (their freed buffers take the shorter calls': ascending sizes fragment the heap, 2.2
        against 1.4 GB over 12 cut lengths of 1,088 points)."""
        starts = range(0, n, self.per_call)
        for start in (starts[::-1] if self.compiled else starts):
            yield self.order[start:start + self.per_call] if self.lead is not None \
                else slice(start, min(n, start + self.per_call))


@contextlib.contextmanager
def _substituted(replacements: dict):
    """While tracing: each Embedding layer's ``call`` returns the given tensor (this thread only)."""
    owner = threading.get_ident()
    patched = []
    try:
        for layer, tensor in replacements.items():
            original = layer.call

            def call(*args, _tensor=tensor, _original=original, **kwargs):
                if threading.get_ident() != owner:
                    return _original(*args, **kwargs)
                return _tensor

            object.__setattr__(layer, "call", call)
            patched.append(layer)
        yield
    finally:
        for layer in patched:
            object.__delattr__(layer, "call")


def _logit_head(model, matmul):
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

    def head(feed):
        z = matmul(hidden(feed, training=False), last.kernel)
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


def model_array(value) -> np.ndarray:
    """A model input's values as the model takes them: float32 numbers (float64 stays
    float64), integer ids and texts as they are."""
    value = np.asarray(value)
    if value.dtype.kind == "f":
        return value if value.dtype == np.float64 else value.astype(np.float32)
    if value.dtype.kind in "iuUSO":
        return value
    return value.astype(np.float32)


def predict(model, inputs, *, batch_size: int = 1024, should_stop: StopCheck = None) -> np.ndarray:
    """The model's outputs, (n, K) float64, for its inputs keyed as ``explain.core.inputs`` keys them
    (``{"static": (n, S), "temporal": (n, T, F)}`` for a two-input model).

    The plain forward pass, for any model (also one that IG refuses, such as an integer input
    without an Embedding): chunks of ``batch_size`` customers, each holding the model's lock
    after asking ``should_stop``.
    """
    layout = input_layout(model)
    keys = layout.engine_keys
    n = len(inputs[keys[0]]) if keys else 0
    parts = []
    for start in range(0, n, max(1, int(batch_size))):
        chunk = {key: model_array(inputs[key][start:start + batch_size]) for key in keys}
        check_stop(should_stop)
        with model_lock(model):
            out = model(layout.feed(chunk), training=False)
        parts.append(np.asarray(out, dtype=np.float64).reshape(len(chunk[keys[0]]), -1))
    return np.concatenate(parts) if parts else np.zeros((0, _output_width(model)))


def _output_width(model) -> int:
    try:
        return int(model.outputs[0].shape[-1])
    except Exception:  # a subclassed model without symbolic outputs
        return 1


def cut_notes(model) -> str:
    """How the engines of ``model`` called it on padded histories (``Cut.note``): cut or full calls, and why."""
    with _ENGINES_LOCK:
        engines = list((_ENGINES.get(model) or {}).values())
    return "; ".join(sorted({engine.cut.describe() for engine in engines}))


def engine_for(model, roles=None) -> Engine:
    """The engine (compiled functions) of ``model``, built once per roles and shared by all threads."""
    key = tuple(sorted((roles or {}).items()))
    with _ENGINES_LOCK:
        engines = _ENGINES.get(model)
        if engines is None:
            engines = _ENGINES[model] = {}
        if key not in engines:
            engines[key] = Engine(model, roles)
        return engines[key]


def warm_up_xla(model, *, background: bool = True) -> bool:
    """The dashboard's XLA path (``explain.core.xla``): enabled for ``model``'s engine and the one-customer bucket
    of the default settings' alphas compiled (in a daemon thread, or here with ``background=False``); a model the
    engine refuses, or any failure, is logged and skipped (the graph path serves every request without it). True
    if the bucket is compiled (``background=False``) or being compiled."""
    try:
        from explain.core.quadrature import alphas_and_weights
        from explain.core.settings import Settings

        engine = engine_for(model)
        if engine.backend != "tensorflow":
            return False  # jax.jit compiles every call already
        state = xla.enable(engine)
        default = Settings()
        alphas = len(alphas_and_weights(default.method, int(default.steps))[0])
        xla.warm_up(engine, steps=[alphas], spaces=[default.space], rows=[1], background=background)
        return background or state.ready.get((default.space, 1, alphas)) is not None
    except Exception:  # noqa: BLE001 - the graph path serves every request without it
        logging.getLogger("explain.app").warning("XLA warm-up skipped", exc_info=True)
        return False


def xla_wanted(model) -> bool:
    """Whether the dashboard puts ``model``'s small requests on the XLA path: ``EXPLAIN_XLA=1`` always, ``0`` never,
    else for histories of ``xla.LONG_HISTORY`` periods or more (365 days: a customer's attribution 5-7x faster; 12
    months: as fast as the graph, so not worth a compile)."""
    choice = xla.chosen()
    if choice is not None:
        return choice
    try:
        engine = engine_for(model)
    except Exception:  # noqa: BLE001 - a model the engine refuses: its page says why
        return False
    return engine.backend == "tensorflow" and engine.longest_history() >= xla.LONG_HISTORY
