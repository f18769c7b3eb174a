"""The padding cut: path calls cut to the periods after the padding at the start that all rows of a call share.

A history padded at the start behind a ``Masking`` layer keeps its padding all along the path (the baseline is
padding there too), and a masked period leaves an LSTM's or GRU's state unchanged: the gradients of those periods
are exact zeros. ``Engine.path_sums`` (``explain.core.engine``) groups rows by their leading padding and asks
``Cut`` for the call of each group: the full call, or one on a clone of the model with a free time axis that sees
only the periods after the shared padding. ``Cut`` is enabled only after one check (``CUT_ROWS`` rows, within
``CUT_TOLERANCE``); ``Checked`` checks the first compiled cut call of a batch job against the graph call
(``explain.core.xla.compiled_calls``).

The check's verdict is a property of the model's weights and of the software that runs it, so it can be kept: the
caller that opened the model (``explain.bundle.load`` for a big bundle) gives :func:`remember` the verdict of an
earlier process for the same model file, Keras, backend and :data:`VERDICT_FORMAT` (then the first call builds the
clone without checking it again: on 20,000 x 365 x 24 the check was 1.4 of the first attribution's 2.2 s), and a
callable that keeps a new verdict.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from explain.core import xla

CUT_STEP = 8  # a call's cut (leading periods left out) is a multiple of this: few shapes for backends that trace each
CUT_ROWS = 4  # rows of the first cut call on which the cut is checked against the full call
CUT_TOLERANCE = 1e-6  # ... within this fraction of the largest |output| and |gradient sum|

VERDICT_FORMAT = 1  # bump when the check tests something else: verdicts kept by earlier versions are checked again
_KNOWN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> (verdict or None, keep)


def remember(model, verdict: tuple[bool, str] | None, keep=None) -> None:
    """For ``model``'s engines: ``verdict`` (enabled, note) of the check made by an earlier process for the same model
    file and software (None: not known), and ``keep(enabled, note)``, called once when this process checks it."""
    _KNOWN[model] = (verdict, keep)


REFUSED_OUTPUT = "full calls (the model's output depends on the padded periods: the cut was refused)"
REFUSED_GRADIENTS = "full calls (gradients change when the padded periods are cut: the cut was refused)"


class Probe(NamedTuple):
    """The first call that can be cut, on which the cut is checked: the full call ``fn`` and its arguments
    (``args``: the points x, baselines b and ids as tensors; ``alphas``, ``weights`` (rows, k) NumPy; ``target``
    a tensor) in ``space``."""

    fn: object
    args: tuple
    alphas: np.ndarray
    weights: np.ndarray
    target: object
    space: str


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
        self.fixed: dict[tuple, Checked] = {}  # (space, rows): compiled cut calls (``compiled_calls``)
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
        return self.compiled is not False and xla.compiling(self.model_ref())

    def call(self, space, rows: int | None):
        """The cut calls' path function: the clone's graph function, or while ``rows`` is given (calls are
        compiled) the backend's function compiled for calls of ``rows`` rows, checked on its first call."""
        graph = self.engine.function("path", space)
        if rows is None or self.compiled is False:
            return graph
        key = (space, rows)
        if key not in self.fixed:
            self.fixed[key] = Checked(self, self.engine.compiler.fixed(space, rows), graph)
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

    def enabled(self, engine, probe: Probe) -> bool:
        """Whether the cut is on (checked once, on this call's first rows; see the class)."""
        with engine.lock:  # one check, whichever thread comes first
            if self.state is None:
                self._decide(engine, probe)
        return bool(self.state)

    def _decide(self, engine, probe: Probe) -> None:
        verdict, keep = _KNOWN.get(self.model_ref(), (None, None))
        checked = False
        try:
            if verdict is not None:  # checked by an earlier process (``remember``)
                if verdict[0]:
                    self._free(engine)
                self.state, self.note = bool(verdict[0]), str(verdict[1])
            else:
                self.state, self.note = self._check(engine, probe)
                checked = True
        except Exception as error:  # a model the clone or the cut call does not take: full calls
            self.state, self.note = False, f"full calls (the model cannot be cut: {type(error).__name__})"
        if checked and keep is not None:  # a check that failed (memory, ...) is made again by the next process
            try:
                keep(self.state, self.note)
            except Exception:  # noqa: BLE001 - keeping it is a saving only; this process goes on with its verdict
                pass
        if not self.state:
            self.clone = self.engine = None

    def _free(self, engine) -> None:
        """``clone`` (the same layers, weights shared, Embeddings substituted as in the model, on a free time axis)
        and ``engine``, the engine of its calls."""
        import keras

        model = engine.model_ref()
        inputs = [keras.Input(shape=(None, *tuple(t.shape[2:])) if s.key in self.mask else tuple(t.shape[1:]),
                              dtype=t.dtype, name=s.name) for s, t in zip(engine.layout.specs, model.inputs)]
        self.clone = keras.models.clone_model(model, input_tensors=inputs, clone_function=lambda layer: layer)
        self.engine = engine.free_time(self.clone, self.mask)

    def _check(self, engine, probe: Probe):
        self._free(engine)
        fx, m, space = engine.fx, CUT_ROWS, probe.space
        xs, bs, raws = ([t[:m] for t in ts] for ts in probe.args)
        lead = self.leading({k: fx.numpy(t) for k, t in zip(engine.keys, xs)},
                            {k: fx.numpy(t) for k, t in zip(engine.keys, bs)}, None)
        cut = int(lead.min())
        cxs, cbs = self.trimmed(engine, (xs, bs), cut)
        a, w = (fx.constant(v[:m], engine.float64) for v in (probe.alphas, probe.weights))
        with engine.lock:
            full = [fx.numpy(engine.function("forward", space)(p, raws)) for p in (xs, bs)]
            part = [fx.numpy(self.engine.function("forward", space)(p, raws)) for p in (cxs, cbs)]
            sums, _ = probe.fn(xs, bs, raws, a, w, probe.target)
            cut_sums, _ = self.engine.function("path", space)(cxs, cbs, raws, a, w, probe.target)
        if not all(close(f, p) for f, p in zip(full, part)):
            return False, REFUSED_OUTPUT
        for key, s, c in zip(engine.keys, sums, cut_sums):
            s, c = fx.numpy(s), fx.numpy(c)
            if key in self.mask and (np.any(s[:, :cut] != 0) or not close(s[:, cut:], c)):
                return False, REFUSED_GRADIENTS
            if key not in self.mask and not close(s, c):
                return False, REFUSED_GRADIENTS
        return True, "calls cut to the periods after the padding at the start of the histories"


class Checked:
    """A compiled cut call (``Cut.call``); its first call is checked against the graph call on the same rows
    (``explain.core.xla.COMPILED_TOLERANCE``): a backend that cannot compile the model or gives other numbers
    leaves the cut calls on the graph (``Cut.compiled`` False, ``Cut.compiled_note`` says why). A shape that
    fails to compile later runs on the graph too."""

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
            with self.cut.engine.lock:  # (in a thread of ``calls.InFlight``: the graph traced by one thread at a time)
                return self.graph(*args)

    def _first(self, *args):
        fx = self.cut.engine.fx
        expected = self.graph(*args)
        try:
            got = self.fn(*args)
        except Exception as error:  # noqa: BLE001 - the backend cannot compile this model
            return self._refuse(f"compiled calls refused ({type(error).__name__}): graph calls", expected)
        same = all(close(fx.numpy(e), fx.numpy(g), xla.COMPILED_TOLERANCE) for e, g in zip(expected[0], got[0]))
        if not same or not np.array_equal(fx.numpy(expected[1]), fx.numpy(got[1])):
            return self._refuse("compiled calls refused (their gradients differ from the graph's): graph calls",
                                expected)
        self.cut.compiled = True
        return got

    def _refuse(self, note, result):
        self.cut.compiled, self.cut.compiled_note = False, note
        return result


def close(a: np.ndarray, b: np.ndarray, tolerance: float = CUT_TOLERANCE) -> bool:
    """Whether ``a`` and ``b`` (finite, the same shape) differ by at most ``tolerance`` of the largest |value|."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return False
    scale = max(np.max(np.abs(a), initial=0.0), np.max(np.abs(b), initial=0.0))
    return bool(np.max(np.abs(a - b), initial=0.0) <= tolerance * scale)
