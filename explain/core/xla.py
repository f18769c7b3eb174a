"""An optional XLA-compiled path for small IG requests, with fixed shape buckets.

The engine's path function (``explain.core.engine``) has a dynamic batch dimension: one trace
serves every request. XLA needs fixed shapes, so this module pads the customers of a call
to one of a few bucket sizes (``BUCKETS``: 1, 4, 16, 64 customers by default) and compiles the
engine's own path function (the same Python body, ``jit_compile=True``) once per (output
space, bucket, number of alphas). Padded rows repeat the last customer and are dropped from
the results, so the numbers are those of the graph path up to float rounding (tests check
1e-5). On 2 cores a gradient over 64 points of the demo model runs about 2x faster
compiled, about 10% faster at 4,096 points; a chunk of more customers than the largest
bucket, or of more than ``MAX_POINTS`` points, stays on the graph path
(``bench/xla.py`` measures the ratios).

Off unless :func:`enable` is called for a model. A request takes the compiled path only
when its bucket is compiled already (:func:`warm_up`, or the background compile that a
first request of a bucket starts): compiling costs seconds, and is never paid by the
request that needs it. The engine calls :func:`for_chunks` (one line) to get the
function a request's chunks use.

    engine = explain.core.engine.engine_for(model)
    explain.core.xla.enable(engine)                               # opt in (the dashboard does)
    explain.core.xla.warm_up(engine, steps=[64], background=True)  # compile before the first request

TensorFlow only: under ``KERAS_BACKEND=jax`` every function of the engine is XLA-compiled by
``jax.jit`` already, so :func:`for_chunks` returns the engine's own function and :func:`warm_up`
does nothing. The dashboard's start (``explain.core.engine.warm_up_xla(model)``): with ``EXPLAIN_XLA=1``,
enable and compile the one-customer bucket of the default settings.

A batch job's calls are compiled too, another way (:func:`compiled_calls`): while inside, the calls that
``explain.core.cut.Cut`` cuts run a function compiled for their fixed number of rows (:class:`Fixed`), each
cut length in steps of ``COMPILED_CUT_STEP``, the first call checked against the graph's
(``COMPILED_TOLERANCE``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref

import numpy as np


def _tf():
    """TensorFlow, imported on first use: this module is imported under JAX too (where every
    function is compiled by ``jax.jit`` already and this path stays off)."""
    import tensorflow as tf  # installed: only TensorFlow engines get here

    return tf

ENV = "EXPLAIN_XLA"  # "1": the dashboard's small requests compiled; "0": neither they nor a batch job's (chosen())
LONG_HISTORY = 48  # periods from which the dashboard compiles small requests without EXPLAIN_XLA (engine.xla_wanted)
# a small request padded at the start takes its compiled bucket (the whole history) while its padding is less than
# this share of the periods, else the padding cut's graph call: on 365 days one compiled call costs about what a graph
# call of 50-75 periods does (2-core AMD EPYC, 2026-12-06)
WHOLE_HISTORY_BELOW = 0.8
CACHE_FLAG = "--tf_xla_persistent_cache_directory"  # TensorFlow's own: compiled executables kept on disk, by their HLO
BUCKETS = (1, 4, 16)  # customers per compiled call
MAX_POINTS = 1024  # customers x alphas above which a call stays on the graph path
NOT_ENABLED = "XLA is not enabled for this model: call explain.core.xla.enable(model) first."
COMPILED_CUT_STEP = 32  # the cut's multiple while calls are compiled (``compiled_calls``): 365 days, 12 shapes
COMPILED_TOLERANCE = 1e-5  # the first compiled call equals the graph call within this fraction of the largest

_STATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


class XlaPath:
    """The compiled functions of one engine, by (space, bucket, alphas)."""

    def __init__(self, engine, buckets=BUCKETS, max_points: int = MAX_POINTS, background: bool = True):
        self.engine_ref = weakref.ref(engine)
        self.buckets = tuple(sorted(int(b) for b in buckets))
        self.max_points = int(max_points)
        self.background = background
        self.ready: dict[tuple, object] = {}  # compiled, callable
        self.pending: set[tuple] = set()
        self.compiles = 0  # how many buckets were compiled (tests and bench read it)
        self.calls = 0  # chunks computed on the compiled path
        self._jit: dict[str, object] = {}
        self._building: dict[tuple, threading.Event] = {}
        self._lock = threading.Lock()

    def bucket(self, rows: int) -> int | None:
        return next((b for b in self.buckets if b >= rows), None)

    def _function(self, space: str):
        engine = self.engine_ref()
        if space not in self._jit:
            body = engine.function("path", space).python_function
            self._jit[space] = _tf().function(body, jit_compile=True, reduce_retracing=False)
        return self._jit[space]

    def compile(self, space: str, bucket: int, alphas: int) -> None:
        """Compile one bucket now (in this thread; or wait for the thread compiling it): a call
        on zeros of its shapes."""
        key = (space, bucket, alphas)
        with self._lock:
            if key in self.ready:
                return
            building = self._building.get(key)
            if building is None:
                building = self._building[key] = threading.Event()
                mine = True
            else:
                mine = False
        if not mine:
            building.wait()
            return
        try:
            self.ready[key] = self._compiled(space, bucket, alphas)
            with self._lock:
                self.compiles += 1
        except Exception:  # a model XLA cannot compile: this bucket stays on the graph path
            self.ready[key] = None
            raise
        finally:
            with self._lock:
                self.pending.discard(key)
                self._building.pop(key, None)
            building.set()

    def _compiled(self, space: str, bucket: int, alphas: int):
        tf = _tf()
        engine = self.engine_ref()
        xs = [tf.zeros((bucket, *engine.point_shapes[k]), engine.point_dtypes[k]) for k in engine.keys]
        raws = [tf.zeros((bucket, *engine.shapes[k]), engine.raw_dtypes[k]) for k in engine.categorical]
        a = tf.constant(np.tile(np.linspace(0.0, 1.0, alphas), (bucket, 1)), tf.float64)  # (bucket, alphas)
        args = (xs, xs, raws, a, a, tf.constant(0, tf.int32))
        with engine.lock:  # tracing calls the model's Python code: one thread at a time
            fn = self._function(space).get_concrete_function(*args)
        fn(*args)  # the XLA compile, outside the model's lock
        return fn

    def _compile_later(self, key) -> None:
        with self._lock:
            if key in self.ready or key in self.pending:
                return
            self.pending.add(key)

        def run():
            try:
                self.compile(*key)
            except Exception:  # noqa: BLE001 - compile() left this bucket on the graph path
                pass

        threading.Thread(target=run, name=f"explain-xla-{key}", daemon=True).start()

    def function_for(self, space: str, rows: int, alphas: int, graph_fn):
        """The compiled function for chunks of ``rows`` customers and ``alphas`` alphas, or ``graph_fn``."""
        bucket = self.bucket(rows)
        if bucket is None or alphas < 1 or bucket * alphas > self.max_points:
            return graph_fn
        key = (space, bucket, alphas)
        fn = self.ready.get(key, False)
        if fn is False:
            if self.background:
                self._compile_later(key)
                return graph_fn
            self.compile(*key)
            fn = self.ready[key]
        if fn is None:
            return graph_fn
        return _Padded(self, fn, bucket)


def is_bucket(fn) -> bool:
    """Whether ``fn`` (what :func:`for_chunks` returned) is a compiled bucket of small requests."""
    return isinstance(fn, _Padded) and isinstance(fn.owner, XlaPath)


class _Padded:
    """Call a compiled bucket with a chunk of any size up to the bucket: pad, call, cut."""

    def __init__(self, owner: XlaPath, fn, bucket: int):
        self.owner, self.fn, self.bucket = owner, fn, bucket

    def __call__(self, xs, bs, raws, alphas, weights, target):
        """The engine's path call: lists of per-row tensors (points x, baselines b, raw ids), each
        row's alphas and weights (rows, k), target; returns (sums per input, finite) of the real rows."""
        tf = _tf()
        rows = int(xs[0].shape[0])
        pad = self.bucket - rows

        def padded(parts):
            return [tf.concat([p, tf.repeat(p[-1:], pad, axis=0)], 0) for p in parts] if pad else list(parts)

        self.owner.calls += 1
        alphas, weights = padded([alphas, weights])
        sums, finite = self.fn(padded(xs), padded(bs), padded(raws), alphas, weights, target)
        return [part[:rows] for part in sums], finite[:rows]


class Fixed:
    """An engine's path function XLA-compiled for calls of ``rows`` rows (fewer are padded), one compile per
    shape of the other axes (the length of a cut history): the compiled calls of a batch job
    (:func:`compiled_calls`). Fixed rows and cut lengths in steps of ``COMPILED_CUT_STEP`` keep a job to a
    dozen compiles of about 2 s on 365 days."""

    def __init__(self, engine, space: str, rows: int):
        self.body = engine.function("path", space).python_function
        self.rows = int(rows)
        self.calls = 0
        self.functions: dict[tuple, object] = {}  # (point shapes): the concrete compiled function
        self.lock = engine.lock

    def __call__(self, xs, bs, raws, alphas, weights, target):
        key = tuple(tuple(t.shape[1:]) for t in xs) + (tuple(alphas.shape[1:]),)
        fn = self.functions.get(key)
        if fn is None:
            tf = _tf()
            padded = [tf.TensorSpec((self.rows, *t.shape[1:]), t.dtype) for t in xs]
            raw = [tf.TensorSpec((self.rows, *t.shape[1:]), t.dtype) for t in raws]
            a = tf.TensorSpec((self.rows, alphas.shape[1]), alphas.dtype)
            specs = (padded, padded, raw, a, a, tf.TensorSpec((), tf.int32))
            with self.lock:  # tracing calls the model's Python code (and calls run in threads: traced once)
                fn = self.functions.get(key)
                if fn is None:
                    fn = self.functions[key] = tf.function(self.body, jit_compile=True, autograph=False) \
                        .get_concrete_function(*specs)
        return _Padded(self, fn, self.rows)(xs, bs, raws, alphas, weights, target)

    @property
    def shapes(self) -> int:
        return len(self.functions)


def enable(engine, *, buckets=BUCKETS, max_points: int = MAX_POINTS, background: bool = True) -> XlaPath:
    """Let small IG requests of ``engine`` (``explain.core.engine.engine_for(model)``) use the compiled
    path once their bucket is compiled.

    ``background=False``: a request whose bucket is not compiled compiles it (tests, scripts).
    """
    with _STATES_LOCK:
        state = _STATES.get(engine)
        if state is None or state.buckets != tuple(sorted(buckets)) or state.background != background \
                or state.max_points != max_points:
            state = _STATES[engine] = XlaPath(engine, buckets, max_points, background)
        return state


def disable(engine) -> None:
    with _STATES_LOCK:
        _STATES.pop(engine, None)


def state_of(engine) -> XlaPath | None:
    return _STATES.get(engine)


def warm_up(engine, *, steps=(65,), spaces=("output",), rows=(1,), background: bool = True):
    """Compile the buckets of ``rows`` customers x ``steps`` alphas (the points per path of the
    settings expected first: the rule's alphas, e.g. 64 for 64 Gauss-Legendre steps) for
    ``spaces``; in a daemon thread unless ``background=False``.
    Returns the thread (or None)."""
    if getattr(engine, "backend", "tensorflow") != "tensorflow":
        return None  # jax.jit compiles every call already
    state = _STATES.get(engine)
    if state is None:
        raise RuntimeError(NOT_ENABLED)
    jobs = [(space, b, int(k)) for space in spaces for b in {state.bucket(r) for r in rows} - {None} for k in steps]

    def run():
        for job in jobs:
            try:
                state.compile(*job)
            except Exception:  # noqa: BLE001 - compile() left that bucket on the graph path
                pass

    if not background:
        run()
        return None
    thread = threading.Thread(target=run, name="explain-xla-warm-up", daemon=True)
    thread.start()
    return thread


def for_chunks(engine, space: str, graph_fn, rows: int, alphas: int):
    """The engine's hook: the function to call for chunks of ``rows`` customers and ``alphas``
    alphas: the compiled bucket when XLA is enabled for this engine and the bucket is ready,
    else ``graph_fn``."""
    state = _STATES.get(engine)
    if getattr(engine, "backend", "tensorflow") != "tensorflow":
        return graph_fn
    return graph_fn if state is None else state.function_for(space, rows, alphas, graph_fn)


_COMPILED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> compiled_calls blocks open
_COMPILED_LOCK = threading.Lock()


@contextlib.contextmanager
def compiled_calls(model):
    """While inside: the cut calls of ``model``'s engines (``explain.core.cut.Cut``) are compiled for their fixed
    shape (the ``batch_size // alphas`` rows of a call split over ``explain.core.calls.COMPILED_IN_FLIGHT`` calls
    run at once in threads, each padded to its share; the cut in steps of ``COMPILED_CUT_STEP``): XLA under
    TensorFlow, about 0.7x the time of a graph call on a Masking + LSTM over 365 days (two at a time: about 0.8x
    of that), one compile (about 2 s) per cut length. For jobs of many calls (``explain batch``); single requests
    keep the graph calls. The numbers equal the graph calls' within float rounding (the first compiled call is
    checked: ``explain.core.cut.Checked``)."""
    with _COMPILED_LOCK:
        _COMPILED[model] = _COMPILED.get(model, 0) + 1
    try:
        yield
    finally:
        with _COMPILED_LOCK:
            _COMPILED[model] -= 1


def compiling(model) -> bool:
    """Whether a ``compiled_calls`` block of ``model`` is open."""
    return model is not None and _COMPILED.get(model, 0) > 0


def chosen() -> bool | None:
    """The owner's ``EXPLAIN_XLA``: True for "1", False for "0", None when unset or anything else (each caller's
    default: the dashboard by the history's length, a batch job compiled)."""
    return {"1": True, "0": False}.get(os.environ.get(ENV, "").strip())


def kept_folder() -> str | None:
    """Where TensorFlow keeps XLA executables in this process's ``TF_XLA_FLAGS`` (:func:`keep_compiled`, or the
    user's own flag), or None."""
    for flag in os.environ.get("TF_XLA_FLAGS", "").split():
        if flag.startswith(CACHE_FLAG + "="):
            return flag.split("=", 1)[1] or None
    return None


def keep_compiled(folder=None) -> str | None:
    """Let TensorFlow keep the XLA executables it compiles in ``folder`` (default: ``xla`` in
    ``explain.core.files.user_cache``) and read them back in later processes: the dashboard's bucket of a 365-day
    model then loads instead of compiling again (``explain check`` compiles it once). Sets ``TF_XLA_FLAGS``, so it
    must run before TensorFlow is imported: for the command line's and the dashboard's processes only; does nothing
    when TensorFlow is imported already, the flag is set, the folder cannot be made or has a space in its path
    (``TF_XLA_FLAGS`` is split at spaces), or the installed TensorFlow is older than 2.15 (an unknown flag would stop
    it). Returns the folder, or None."""
    import sys
    from importlib import metadata
    from pathlib import Path

    from explain.core.files import user_cache

    flags = os.environ.get("TF_XLA_FLAGS", "")
    if "tensorflow" in sys.modules or kept_folder() is not None:
        return None
    versions = []
    for name in ("tensorflow", "tensorflow-cpu"):
        try:
            versions.append(tuple(int(p) for p in metadata.version(name).split(".")[:2]))
        except (metadata.PackageNotFoundError, ValueError):
            pass
    if not versions or max(versions) < (2, 15):
        return None
    folder = Path(folder) if folder is not None else user_cache() / "xla"
    if any(c.isspace() for c in str(folder)):
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return None
    os.environ["TF_XLA_FLAGS"] = f"{flags} {CACHE_FLAG}={folder}".strip()
    return str(folder)
