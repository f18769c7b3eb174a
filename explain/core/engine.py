"""The compiled side of the IG engine: one set of compiled functions per model.

The engine works in *interpolation space*: one float tensor per model input, the input itself
for a numeric input and the output of its ``Embedding`` for a categorical one (layer IG).
``embed`` maps category ids (or text, through the model's lookup layer) to their vectors;
``path_sums`` (one call per chunk of rows) returns the quadrature-weighted gradient sums of
every input, each row at its own alphas and weights; ``sweep`` returns the model's output
along each row's path (model calls only); ``forward_points`` and ``point_gradients`` complete it. While such a
function is traced, each Embedding's ``call`` is replaced (for the tracing thread only) by one
that returns the interpolated vectors, while the model still receives the customer's ids: its
lookups and ``mask_zero`` masks see the customer's real ids all along the path.

The chunking, the alphas and weights of each row, the checks and the cancellation are written
here once, on NumPy; the compiled functions come from Keras' backend (``explain.core.backend``:
TensorFlow's ``tf.function`` by default, ``jax.jit`` with ``KERAS_BACKEND=jax``), one trace per
model and output space. Every call holds the engine's lock (one model is shared by the
dashboard's sessions), except a batch job's compiled calls (``compiled_calls``), traced under it and then
run two at a time in threads (``_InFlight``: the totals added in call order, the same numbers); each call
first asks ``should_stop`` (a callable returning True to stop; it may also raise): ``Stopped`` is raised
between two chunks, never in the middle of one.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import os
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import numpy as np

from explain.core import backend
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
CUT_STEP = 8  # a call's cut (leading periods left out) is a multiple of this: few shapes for backends that trace each
CUT_ROWS = 4  # rows of the first cut call on which the cut is checked against the full call
CUT_TOLERANCE = 1e-6  # ... within this fraction of the largest |output| and |gradient sum|
COMPILED_CUT_STEP = 32  # the cut's multiple while calls are compiled (``compiled_calls``): 365 days, 12 shapes
COMPILED_TOLERANCE = 1e-5  # the first compiled call equals the graph call within this fraction of the largest
COMPILED_IN_FLIGHT = 2  # compiled calls run at once, each of 1/2 the rows: 2 cores, 17 rows one by one 1.12 us per
# point and period, 9 rows two at a time 0.89 (one call's loop of small matrix products keeps 2 cores half busy)

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

    def path_sums(self, x, b, raw, alphas, weights, target, space, batch_size, should_stop: StopCheck = None,
                  index=None):
        """Path integrals of every row b -> x, in chunks of at most ``batch_size`` points.

        ``x``, ``b``: {key: (n, *point shape)}; ``raw``: {key: (n, *shape)} ids of the categorical
        inputs; ``alphas``, ``weights``: (k,) shared by every row, or (n, k), each row its own.
        ``index`` (m,): the rows are x[index], b[index] (several panels of one customer), gathered
        chunk by chunk. Returns {key: sum_j w_j * grad f(b + a_j (x - b))} float64 and whether all
        those gradients were finite, per row. How the rows are chunked never changes a row's result
        (with the cut below on: within float rounding).

        Histories padded at the start (``Masking``): when ``self.cut`` allows it, rows are grouped by
        their leading padding and each call runs on the periods after the padding all its rows share
        (``Cut``); the gradients of the cut periods are exact zeros, as the full call's.
        """
        fn = self.function("path", space)
        n, k = (len(x[self.keys[0]]) if index is None else len(index)), np.shape(alphas)[-1]
        alphas, weights = (np.broadcast_to(np.asarray(a, np.float64), (n, k)) for a in (alphas, weights))
        sums = {key: np.zeros((n, *self.point_shapes[key]), np.float64) for key in self.keys}
        finite = np.ones(n, bool)
        target = self._target(target)
        per_call = max(1, batch_size // k)  # rows per call
        alpha_block = min(k, batch_size)  # alphas per call (< k only when k > batch_size)
        fn = self.compiler.for_chunks(space, fn, min(n, per_call), k if alpha_block == k else 0)
        lead = self.cut.leading(x, b, index) if self.cut.possible else None
        if lead is not None and lead.max() < CUT_STEP:
            lead = None  # nothing to cut: the calls (and every number) as without the cut
        compiled = lead is not None and self.cut.compiling()
        step = COMPILED_CUT_STEP if compiled else CUT_STEP
        # compiled (TensorFlow's XLA: ``xla.Fixed`` traces each shape once, under the lock): COMPILED_IN_FLIGHT calls at
        # a time, as many points in flight as one call's. JAX traces in the calling thread: one at a time there;
        # so do the graph calls of a model whose cut was refused.
        threads = compiled and self.cut.state is not False and self.backend == "tensorflow"
        width = COMPILED_IN_FLIGHT if threads else 1
        per_call = -(-per_call // width)
        calls = _InFlight(width, self.lock)
        order = np.arange(n) if lead is None else np.argsort(-lead, kind="stable")  # similar padding share a call
        starts = range(0, n, per_call)
        if compiled:  # the longest calls first: their freed buffers take the shorter calls' (ascending sizes
            starts = starts[::-1]  # fragment the heap: 2.2 against 1.4 GB over 12 cut lengths of 1,088 points)
            first = order[:per_call]  # ... and the cut checked first, on the most padded rows, in every process
            if self.cut.state is None and lead[first].min() >= step:
                self.cut.enabled(self, fn, self._path_args(x, b, raw, first if index is None else index[first]),
                                 alphas[first], weights[first], target, space)
        for start in starts:
            rows = order[start:start + per_call] if lead is not None else slice(start, min(n, start + per_call))
            source = rows if index is None else index[rows]
            xs, bs, raws = self._path_args(x, b, raw, source)
            call, cut = fn, 0
            if lead is not None:
                cut = int(lead[rows].min()) // step * step
                if cut and self.cut.enabled(self, fn, (xs, bs, raws), alphas[rows], weights[rows], target, space) \
                        or compiled and self.cut.state:  # compiled: the rows without a cut through the clone too
                    call = self.cut.call(space, per_call if compiled else None)
                    xs, bs = self.cut.trimmed(self, (xs, bs), cut)
                else:
                    cut = 0
            for a0 in range(0, k, alpha_block):
                block = (rows, slice(a0, a0 + alpha_block))
                check_stop(should_stop)
                calls.submit(call, (xs, bs, raws, self.fx.constant(alphas[block], self.float64),
                                    self.fx.constant(weights[block], self.float64), target), (rows, cut),
                             alone=not (isinstance(call, _Checked) and self.cut.compiled))  # checked: in threads
                for done in calls.finished():
                    self._add(sums, finite, *done)
        for done in calls.finished(everything=True):
            self._add(sums, finite, *done)
        problems = self.disconnected_problems(space, int(target))
        if problems:
            raise AttributionError(problems[0])
        return sums, finite

    def _add(self, sums: dict, finite: np.ndarray, where: tuple, result) -> None:
        """One call's gradient sums and finite flags into the totals of its rows."""
        (rows, cut), (s, ok) = where, result
        for key, part in zip(self.keys, s):
            self.cut.add(sums[key], rows, self.fx.numpy(part), cut if key in self.cut.keys else 0)
        finite[rows] &= self.fx.numpy(ok)

    def sweep(self, x, b, raw, rows, alphas, target, space, batch_size, should_stop: StopCheck = None,
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
            xs, bs, raws = self._path_args(x, b, raw, owners[block])
            check_stop(should_stop)
            with self.lock:
                out[block] = self.fx.numpy(fn(xs, bs, raws, self.fx.constant(grid[block], self.float64), target))
        values = np.empty(m)
        values[order] = out[group, slot]
        return values

    def _path_args(self, x, b, raw, rows):
        xs, raws = self._points_args(x, raw, rows)
        return xs, [self.fx.constant(b[key][rows], self.point_dtypes[key]) for key in self.keys], raws

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


class Cut:
    """Calls cut to the periods after a leading padding that all rows of the call share (``path_sums``).

    Possible when every temporal input is numeric behind a ``Masking`` layer (a history padded at the start
    keeps its padding all along the path: the baseline is padding there too) and the model is fed a list.
    The cut calls run a clone of the model with a free time axis (``keras.models.clone_model``, the same
    weights). Enabled only after one check, on the first call that can be cut (``CUT_ROWS`` of its rows): the
    clone's outputs at both ends of the path and its gradient sums on the kept periods equal the full model's
    within ``CUT_TOLERANCE`` of the largest, and the full model's gradient sums on the cut periods are exactly 0
    (masked periods that leave an LSTM's or GRU's state unchanged). A model whose output depends on the
    positions or the length (a Conv1D, a pooling over time, a Flatten: its clone fails) keeps full calls;
    ``note`` says which and why.
    """

    def __init__(self, engine, model):
        specs = engine.layout.specs
        temporal = [s for s in specs if s.role == "temporal"]
        self.keys = tuple(s.key for s in temporal)
        self.mask = {s.key: float(s.mask_value) for s in temporal if s.mask_value is not None}
        self.possible = bool(temporal) and len(self.mask) == len(temporal) and engine.layout.keys is None
        self.state: bool | None = None if self.possible else False
        self.note = ("full calls (no call had padding at the start to cut)" if self.possible
                     else "full calls (no history padded by a Masking layer)")
        self.clone = self.engine = None
        self.model_ref = weakref.ref(model)
        self.fixed: dict[tuple, _Checked] = {}  # (space, rows): compiled cut calls (``compiled_calls``)
        self.compiled: bool | None = None  # None: not checked yet; False: refused (``compiled_note`` says why)
        self.compiled_note = ""

    def leading(self, x, b, index) -> np.ndarray:
        """(n,) periods of leading padding of each row (every temporal input; x and baseline both padding)."""
        lead = None
        for key, value in self.mask.items():
            pad = np.all(x[key] == value, axis=-1) & np.all(b[key] == value, axis=-1)  # (rows, T)
            first = np.where(pad.all(axis=1), pad.shape[1] - 1, np.argmin(pad, axis=1))  # keep one period
            lead = first if lead is None else np.minimum(lead, first)
        return lead if index is None else lead[index]

    def function(self, kind, space):
        return self.engine.function(kind, space)

    def compiling(self) -> bool:
        """Whether the calls are compiled now (``compiled_calls``) and not refused."""
        return self.compiled is not False and _COMPILED.get(self.model_ref(), 0) > 0

    def call(self, space, rows: int | None):
        """The cut calls' path function: the clone's graph function, or while ``rows`` is given (calls are
        compiled) the backend's function compiled for calls of ``rows`` rows, checked on its first call."""
        graph = self.engine.function("path", space)
        if rows is None or self.compiled is False:
            return graph
        key = (space, rows)
        if key not in self.fixed:
            self.fixed[key] = _Checked(self, self.engine.compiler.fixed(space, rows), graph)
        return self.fixed[key]

    def describe(self) -> str:
        """``note``, and how the compiled calls went (``compiled_calls``) when there were any."""
        shapes = sum(getattr(c.fn, "shapes", 0) for c in self.fixed.values())
        if self.compiled is False:
            return f"{self.note}; {self.compiled_note}"
        if self.compiled and shapes:
            return f"{self.note}, XLA-compiled ({shapes} call shapes)"
        return self.note

    def trimmed(self, engine, tensors, cut: int):
        """Each list of tensors (one per engine key) with the temporal ones cut to ``[:, cut:]``."""
        return [[t[:, cut:] if key in self.mask else t for key, t in zip(engine.keys, ts)] for ts in tensors]

    @staticmethod
    def add(total: np.ndarray, rows, part: np.ndarray, cut: int) -> None:
        if cut:
            total[rows, cut:] += part  # the cut periods' gradients: exact zeros
        else:
            total[rows] += part

    def enabled(self, engine, fn, args, alphas, weights, target, space) -> bool:
        """Whether the cut is on (checked once, on this call's first rows; see the class)."""
        with engine.lock:  # one check, whichever thread comes first
            if self.state is None:
                self._decide(engine, fn, args, alphas, weights, target, space)
        return bool(self.state)

    def _decide(self, engine, fn, args, alphas, weights, target, space) -> None:
        try:
            self.state, self.note = self._check(engine, fn, args, alphas, weights, target, space)
        except Exception as error:  # a model the clone or the cut call does not take: full calls
            self.state, self.note = False, f"full calls (the model cannot be cut: {type(error).__name__})"
        if not self.state:
            self.clone = self.engine = None

    def _check(self, engine, fn, args, alphas, weights, target, space):
        import keras

        model = engine.model_ref()
        inputs = [keras.Input(shape=(None, *tuple(t.shape[2:])) if s.key in self.mask else tuple(t.shape[1:]),
                              dtype=t.dtype, name=s.name) for s, t in zip(engine.layout.specs, model.inputs)]
        # the same layers (weights shared, Embeddings substituted as in the model) on a free time axis
        self.clone = keras.models.clone_model(model, input_tensors=inputs, clone_function=lambda layer: layer)
        self.engine = _free_time_engine(engine, self.clone, self.mask)
        fx, m = engine.fx, CUT_ROWS
        xs, bs, raws = ([t[:m] for t in ts] for ts in args)
        lead = self.leading({k: fx.numpy(t) for k, t in zip(engine.keys, xs)},
                            {k: fx.numpy(t) for k, t in zip(engine.keys, bs)}, None)
        cut = int(lead.min())
        cxs, cbs = self.trimmed(engine, (xs, bs), cut)
        a, w = (fx.constant(v[:m], engine.float64) for v in (alphas, weights))
        with engine.lock:
            full = [fx.numpy(engine.function("forward", space)(p, raws)) for p in (xs, bs)]
            part = [fx.numpy(self.engine.function("forward", space)(p, raws)) for p in (cxs, cbs)]
            sums, _ = fn(xs, bs, raws, a, w, target)
            cut_sums, _ = self.engine.function("path", space)(cxs, cbs, raws, a, w, target)
        if not all(_close(f, p) for f, p in zip(full, part)):
            return False, "full calls (the model's output depends on the padded periods: the cut was refused)"
        for key, s, c in zip(engine.keys, sums, cut_sums):
            s, c = fx.numpy(s), fx.numpy(c)
            if key in self.mask and (np.any(s[:, :cut] != 0) or not _close(s[:, cut:], c)):
                return False, "full calls (gradients change when the padded periods are cut: the cut was refused)"
            if key not in self.mask and not _close(s, c):
                return False, "full calls (gradients change when the padded periods are cut: the cut was refused)"
        return True, "calls cut to the periods after the padding at the start of the histories"


class _Checked:
    """A compiled cut call (``Cut.call``); its first call is checked against the graph call on the same rows
    (``COMPILED_TOLERANCE``): a backend that cannot compile the model or gives other numbers leaves the cut
    calls on the graph (``Cut.compiled`` False, ``Cut.compiled_note`` says why). A shape that fails to compile
    later runs on the graph too."""

    def __init__(self, cut: Cut, fn, graph):
        self.cut, self.fn, self.graph = cut, fn, graph

    def __call__(self, *args):
        if self.cut.compiled is None:
            return self._first(*args)
        if self.cut.compiled is False:
            return self.graph(*args)
        try:
            return self.fn(*args)
        except Exception:  # noqa: BLE001 - a shape XLA cannot compile: this call on the graph
            with self.cut.engine.lock:  # (in a thread of ``_InFlight``: the graph traced by one thread at a time)
                return self.graph(*args)

    def _first(self, *args):
        fx = self.cut.engine.fx
        expected = self.graph(*args)
        try:
            got = self.fn(*args)
        except Exception as error:  # noqa: BLE001 - the backend cannot compile this model
            return self._refuse(f"compiled calls refused ({type(error).__name__}): graph calls", expected)
        same = all(_close(fx.numpy(e), fx.numpy(g), COMPILED_TOLERANCE) for e, g in zip(expected[0], got[0]))
        if not same or not np.array_equal(fx.numpy(expected[1]), fx.numpy(got[1])):
            return self._refuse("compiled calls refused (their gradients differ from the graph's): graph calls",
                                expected)
        self.cut.compiled = True
        return got

    def _refuse(self, note, result):
        self.cut.compiled, self.cut.compiled_note = False, note
        return result


class _InFlight:
    """Runs a chunk's calls in order, ``width`` at a time, and hands their results back in the order they were
    submitted (the totals add up as one by one: the same numbers). ``width`` 1, or a call ``alone``: at once,
    holding the engine's lock. Else in ``width`` threads, without the lock: compiled calls that passed their check
    (``_Checked``; each shape traced once under the lock by ``explain.core.xla.Fixed``)."""

    _POOL: "tuple[int, ThreadPoolExecutor] | None" = None  # (the process it was made in, the pool)
    _POOL_LOCK = threading.Lock()

    def __init__(self, width: int, lock):
        self.width, self.lock = max(1, int(width)), lock
        self.pending: collections.deque = collections.deque()

    @classmethod
    def pool(cls):
        with cls._POOL_LOCK:  # shared by every engine; a forked child (its threads not copied) makes its own
            if cls._POOL is None or cls._POOL[0] != os.getpid():
                cls._POOL = (os.getpid(), ThreadPoolExecutor(COMPILED_IN_FLIGHT, thread_name_prefix="explain-calls"))
            return cls._POOL[1]

    def submit(self, call, args: tuple, where, alone: bool = False) -> None:
        if self.width == 1 or alone:
            done = Future()
            with self.lock:
                done.set_result(call(*args))
            self.pending.append((where, done))
        else:
            self.pending.append((where, self.pool().submit(call, *args)))

    def finished(self, everything: bool = False):
        """(where, result) of the oldest calls: all of them, or while ``width`` or more are pending."""
        while self.pending and (everything or len(self.pending) >= self.width):
            where, future = self.pending.popleft()
            yield where, future.result()


def _free_time_engine(engine, clone, mask):
    """A copy of ``engine`` whose compiled functions call ``clone`` (its temporal inputs: any number of periods)."""
    free = copy.copy(engine)
    free.model_ref = weakref.ref(clone)  # the clone is held by the engine's ``Cut``
    free.point_shapes = {k: (None, *v[1:]) if k in mask else v for k, v in engine.point_shapes.items()}
    free.shapes = {k: (None, *v[1:]) if k in mask else v for k, v in engine.shapes.items()}
    free.head, free.logit_kind = _logit_head(clone, engine.fx.matmul)
    free.traces, free.disconnected, free._functions = dict.fromkeys(engine.traces, 0), {}, {}
    free.compiler, free.cut = engine.fx.Compiler(free), None
    return free


def _close(a: np.ndarray, b: np.ndarray, tolerance: float = CUT_TOLERANCE) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return False
    scale = max(np.max(np.abs(a), initial=0.0), np.max(np.abs(b), initial=0.0))
    return bool(np.max(np.abs(a - b), initial=0.0) <= tolerance * scale)


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


_COMPILED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def compiled_calls(model):
    """While inside: the cut calls of ``model``'s engines (``Cut``) are compiled for their fixed shape (the
    ``batch_size // alphas`` rows of a call split over ``COMPILED_IN_FLIGHT`` calls run at once in threads, each
    padded to its share; the cut in steps of ``COMPILED_CUT_STEP``): XLA under TensorFlow, about 0.7x the time of
    a graph call on a Masking + LSTM over 365 days (two at a time: about 0.8x of that), one compile (about 2 s)
    per cut length. For jobs of many calls (``explain batch``); single requests keep the graph calls. The
    numbers equal the graph calls' within float rounding (the first compiled call is checked: ``_Checked``)."""
    with _ENGINES_LOCK:
        _COMPILED[model] = _COMPILED.get(model, 0) + 1
    try:
        yield
    finally:
        with _ENGINES_LOCK:
            _COMPILED[model] -= 1


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
