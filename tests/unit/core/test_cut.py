"""Calls cut to the periods after the padding at the start of the histories (issue 26 item 5,
``explain.core.cut.Cut``): on Masking + LSTM and Masking + GRU models built here, with histories left-padded
by varied lengths, the path sums with the cut equal the engine's with the cut off and an independent reference
(the same layers called on each customer's real periods only, gradients by GradientTape) within 1e-6 of the
largest; the padded periods get exact zeros; completeness holds; rows come back in their order; the chunking
does not matter. A Conv1D 'causal' model and a Flatten model keep full calls (the check refuses the cut) with the
numbers of the engine without the cut, bit for bit; so does a model without padding. Under KERAS_BACKEND=jax
the same tests check JAX's cut calls (the reference on real periods is TensorFlow's: there the engine without the
cut is the reference)."""

from __future__ import annotations

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from explain.core.calls import COMPILED_IN_FLIGHT, InFlight
from explain.core.cut import CUT_STEP, Checked
from explain.core.engine import Ends, Engine
from explain.core.ig import integrated_gradients
from explain.core.quadrature import alphas_and_weights
from explain.core.xla import COMPILED_CUT_STEP, compiled_calls

T, F, S = 40, 3, 2


def build(kind: str, seed: int = 0):
    """The model of ``kind`` seeded ``seed``, built once per module (the same seed gives the same weights; no test
    changes them): the tests that read the same model share it and, through ``graph_sums``, one graph engine."""
    return _build(kind, seed)


@functools.cache
def _build(kind: str, seed: int):
    keras.utils.set_random_seed(seed)
    static, temporal = keras.Input((S,), name="static_in"), keras.Input((T, F), name="history")
    h = keras.layers.Masking(0.0)(temporal)
    if kind == "lstm":
        h = keras.layers.LSTM(6)(h)
    elif kind == "gru":
        h = keras.layers.GRU(6)(h)
    elif kind == "conv":  # output depends on the padded periods (the bias at every step, the mean over T)
        h = keras.layers.GlobalAveragePooling1D()(keras.layers.Conv1D(4, 3, padding="causal")(h))
    else:  # Flatten: a Dense over the whole sequence, needs T periods
        h = keras.layers.Flatten()(h)
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Concatenate()([static, h]))
    return keras.Model([static, temporal], out)


def data(n: int = 23, seed: int = 1, padded: bool = True):
    rng = np.random.default_rng(seed)
    xt = rng.normal(size=(n, T, F))
    lead = rng.integers(0, T - 2, n) if padded else np.zeros(n, int)
    lead[:3] = [T - 1, 0, CUT_STEP] if padded else 0
    for i, length in enumerate(lead):
        xt[i, :length] = 0.0
    real = ~(xt == 0).all(axis=2)
    bt = np.where(real[..., None], rng.normal(0.1, 0.05, size=(n, T, F)), 0.0)  # padding as in the customer
    x = {"static": rng.normal(size=(n, S)), "temporal": xt}
    b = {"static": np.zeros((n, S)), "temporal": bt}
    return x, b, lead


def sums(engine, x, b, batch_size=16 * 3, cut=True, steps=16):
    alphas, weights = alphas_and_weights("gausslegendre", steps)
    if not cut:
        engine.cut.state = False
    return engine.path_sums(Ends(x, b, {}), alphas, weights, 0, "output", batch_size)[0]


def reference(model, x, b, lead, steps=16):
    """sum_j w_j grad f(b + a_j (x - b)) computed per customer on its real periods only (the same layers), the
    nodes of a customer as the rows of one GradientTape call (no row sees another); one ``tf.function`` with a
    free time axis for all the customers' lengths."""
    alphas, weights = alphas_and_weights("gausslegendre", steps)
    recurrent = [layer for layer in model.layers
                 if isinstance(layer, (keras.layers.Masking, keras.layers.LSTM, keras.layers.GRU))]

    @tf.function(input_signature=[tf.TensorSpec((None, S), tf.float32), tf.TensorSpec((None, None, F), tf.float32)],
                 autograph=False)
    def gradients(ps, pt):
        with tf.GradientTape() as tape:
            tape.watch([ps, pt])
            h = pt
            for layer in recurrent:
                h = layer(h)
            total = tf.reduce_sum(model.layers[-1](model.layers[-2]([ps, h])))
        return tape.gradient(total, [ps, pt])

    out = {"static": np.zeros_like(x["static"]), "temporal": np.zeros_like(x["temporal"])}
    for i, start in enumerate(lead):
        ps = b["static"][i] + alphas[:, None] * (x["static"][i] - b["static"][i])
        pt = b["temporal"][i, start:] + alphas[:, None, None] * (x["temporal"][i, start:] - b["temporal"][i, start:])
        gs, gt = gradients(tf.constant(ps, tf.float32), tf.constant(pt, tf.float32))
        out["static"][i] = weights @ gs.numpy()
        out["temporal"][i, start:] = np.einsum("k,ktf->tf", weights, gt.numpy())
    return out


_ONCE: dict[tuple, tuple[list, dict]] = {}


def once(key: tuple, model, compute):
    """``compute()`` (numbers from a fresh Engine, or the reference) the first time ``key`` is asked in this module,
    the same numbers afterwards: the tests that build the same model (the same seed) on the same data share the
    numbers their check is against. The model's weights must be those the numbers were computed with."""
    weights = [keras.ops.convert_to_numpy(w) for w in model.weights]
    if key not in _ONCE:
        _ONCE[key] = (weights, compute())
    first, numbers = _ONCE[key]
    assert len(first) == len(weights) and all(np.array_equal(u, v) for u, v in zip(first, weights)), key
    return {name: value.copy() for name, value in numbers.items()}


_GRAPH: dict[int, Engine] = {}  # id(model) -> the engine of its graph calls (models are kept by ``_build``)


def graph_engine(model) -> Engine:
    """One engine (graph calls, cut) per model for the module's graph numbers: its cut is checked once, its functions
    traced once, whatever the batch size (how the rows are chunked is what some tests vary)."""
    if id(model) not in _GRAPH:
        _GRAPH[id(model)] = Engine(model)
    return _GRAPH[id(model)]


def graph_sums(model, key: tuple, x, b, batch_size=16 * 3):
    """``sums`` of the model's graph engine (graph calls, cut) on ``model``, ``key`` naming the model and the data."""
    return once(("graph", *key, batch_size), model, lambda: sums(graph_engine(model), x, b, batch_size=batch_size))


def expected_sums(model, key: tuple, x, b, lead, graph):
    """The reference on real periods under TensorFlow; under JAX the graph calls (see the module's docstring)."""
    if keras.config.backend() != "tensorflow":
        return graph
    return once(("reference", *key), model, lambda: reference(model, x, b, lead))


def assert_near(a, b):
    scale = max(np.abs(a).max(), np.abs(b).max())
    assert np.abs(a - b).max() <= 1e-6 * scale


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cut_path_sums_equal_the_full_ones_and_a_reference_on_real_periods(kind):
    model = build(kind)
    x, b, lead = data()
    engine = Engine(model)
    _GRAPH.setdefault(id(model), engine)  # the graph engine of the chunking tests afterwards (its numbers: below)
    cut = sums(engine, x, b)
    assert engine.cut.state is True and "cut" in engine.cut.note
    assert engine.cut.engine.traces["path"] >= 1  # the cut calls ran
    once(("graph", kind, 0, 1, 16 * 3), model, lambda: cut)  # the compiled calls' test checks against these
    full = sums(Engine(model), x, b, cut=False)
    expected = expected_sums(model, (kind, 0, 1), x, b, lead, full)
    for key in ("static", "temporal"):
        assert_near(cut[key], full[key])
        assert_near(cut[key], expected[key])  # each row in its own place: rows come back in their order
    padded = np.arange(T)[None, :] < lead[:, None]
    assert not cut["temporal"][padded].any()  # exact zeros on padded periods


@pytest.mark.parametrize("batch_size", [16, 16 * 2, 16 * 5, 16 * 23])
def test_chunking_does_not_change_the_cut_results(batch_size):
    model = build("lstm")
    x, b, _ = data()
    base = graph_sums(model, ("lstm", 0, 1), x, b)
    other = graph_sums(model, ("lstm", 0, 1), x, b, batch_size=batch_size)
    for key in base:
        assert_near(other[key], base[key])


def test_completeness_with_the_cut():
    model = build("gru", seed=3)
    x, b, _ = data(seed=4)
    a = integrated_gradients(model, x, b, steps=64, batch_size=64 * 4)
    total = a.inputs["static"].sum(axis=1) + a.inputs["temporal"].sum(axis=(1, 2))
    np.testing.assert_allclose(total, a.prediction - a.baseline_prediction, atol=1e-5)
    assert not a.inputs["temporal"][a.padding["temporal"]].any()


@pytest.mark.parametrize("kind", ["conv", "flatten"])
def test_position_dependent_models_keep_full_calls_and_their_numbers(kind):
    model = build(kind)
    x, b, _ = data()
    engine = Engine(model)
    checked = sums(engine, x, b)
    assert engine.cut.state is False and engine.cut.note.startswith("full calls")
    plain = Engine(model)
    plain.cut.possible = False  # the engine without any cut machinery
    alphas, weights = alphas_and_weights("gausslegendre", 16)
    full = plain.path_sums(Ends(x, b, {}), alphas, weights, 0, "output", 16 * 3)[0]
    for key in full:
        assert np.array_equal(checked[key], full[key])


def test_no_padding_gives_the_numbers_without_the_cut_bit_for_bit():
    model = build("lstm")
    x, b, _ = data(padded=False)
    engine = Engine(model)
    got = sums(engine, x, b)
    assert engine.cut.state is None  # nothing to cut: never checked, never cloned
    full = sums(Engine(model), x, b, cut=False)
    for key in got:
        assert np.array_equal(got[key], full[key])


def test_a_model_saved_after_its_calls_were_cut_loads_as_it_was(tmp_path):
    """The cut's clone shares the model's layers (new inbound nodes on them): the model saved afterwards
    still loads with the same layers and the same outputs, and explains to the same numbers."""
    from explain.core.engine import engine_for

    model = build("lstm", seed=5)
    x, b, _ = data(seed=6)
    first = integrated_gradients(model, x, b, steps=16, batch_size=16 * 3)  # 3 rows a call: calls to cut
    assert engine_for(model).cut.state is True  # the calls were cut
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")
    assert [layer.name for layer in again.layers] == [layer.name for layer in model.layers]
    inputs = {"static_in": x["static"].astype("float32"), "history": x["temporal"].astype("float32")}
    # called directly (no predict function traced for each model): the same computation on each model's weights
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(again(inputs, training=False)),
                                  keras.ops.convert_to_numpy(model(inputs, training=False)))
    assert_near(integrated_gradients(again, x, b, steps=16, batch_size=16 * 3).inputs["temporal"],
                first.inputs["temporal"])


# ---- compiled cut calls (``compiled_calls``: a batch job's calls, XLA under TensorFlow) ----------------------


def compiled_sums(model, x, b, batch_size=16 * 3, engine=None):
    engine = Engine(model) if engine is None else engine
    with compiled_calls(model):
        got = sums(engine, x, b, batch_size=batch_size)
    return engine, got


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_compiled_cut_calls_equal_the_graph_calls_and_the_reference(kind):
    model = build(kind)
    x, b, lead = data()
    engine, fast = compiled_sums(model, x, b)
    assert engine.cut.state is True and engine.cut.compiled is True
    graph = graph_sums(model, (kind, 0, 1), x, b)
    expected = expected_sums(model, (kind, 0, 1), x, b, lead, graph)
    for key in ("static", "temporal"):
        assert_near(fast[key], graph[key])
        assert_near(fast[key], expected[key])
    padded = np.arange(T)[None, :] < lead[:, None]
    assert not fast["temporal"][padded].any()  # exact zeros on padded periods, compiled too
    if keras.config.backend() == "tensorflow":
        (fixed,) = [c.fn for c in engine.cut.fixed.values()]
        assert fixed.rows == -(-3 // COMPILED_IN_FLIGHT)  # 3 rows per call, COMPILED_IN_FLIGHT calls at a time
        assert 1 <= fixed.shapes <= len({c // COMPILED_CUT_STEP for c in range(T)})
        assert fixed.calls >= 2  # every call of the rows ran compiled (the first one checked against the graph)
        assert engine.cut.describe().endswith(f", XLA-compiled ({fixed.shapes} call shapes)")
    assert not engine.cut.compiling()  # outside the block: graph calls again
    again = sums(engine, x, b)
    for key in again:
        assert_near(again[key], graph[key])


_PADDED: dict[int, Engine] = {}  # id(model) -> the engine of the padding tests' compiled calls


@pytest.mark.parametrize("batch_size", [16, 16 * 5, 16 * 23])
def test_compiled_calls_pad_the_last_rows_without_changing_a_number(batch_size):
    model = build("lstm")
    x, b, _ = data()
    graph = graph_sums(model, ("lstm", 0, 1), x, b, batch_size=batch_size)
    # one engine for the three batch sizes (its cut checked once; each size's rows per call compiled on their own)
    if id(model) not in _PADDED:
        _PADDED[id(model)] = Engine(model)
    engine = _PADDED[id(model)]
    _, fast = compiled_sums(model, x, b, batch_size=batch_size, engine=engine)  # 23 rows: the last call is padded
    for key in graph:
        assert_near(fast[key], graph[key])


@pytest.mark.skipif(keras.config.backend() != "tensorflow", reason="XLA's compiled calls are TensorFlow's")
@pytest.mark.parametrize("fault", ["other numbers", "no compile", "a later shape fails"])
def test_refused_compiled_calls_fall_back_to_the_graph_calls(fault, monkeypatch):
    from explain.core import xla

    model = build("lstm", seed=7)
    x, b, _ = data(seed=8)
    graph = graph_sums(model, ("lstm", 7, 8), x, b)
    real = xla.Fixed.__call__
    seen = []

    def faulty(self, *args):
        seen.append(1)
        if fault == "other numbers":
            sums_, finite = real(self, *args)
            return [s * 1.001 for s in sums_], finite
        if fault == "no compile" or len(seen) > 1:
            raise RuntimeError("XLA cannot compile this")
        return real(self, *args)

    monkeypatch.setattr(xla.Fixed, "__call__", faulty)
    engine, got = compiled_sums(model, x, b)
    assert seen  # the compiled function was tried
    for key in graph:
        if fault == "a later shape fails":
            assert_near(got[key], graph[key])
        else:  # refused on the first call: every number the graph calls'
            assert np.array_equal(got[key], graph[key])
    if fault == "a later shape fails":
        assert engine.cut.compiled is True and len(seen) > 1
    else:
        assert engine.cut.compiled is False and len(seen) == 1
        reason = "differ from the graph's" if fault == "other numbers" else "RuntimeError"
        assert reason in engine.cut.describe() and engine.cut.describe().endswith("graph calls")


@pytest.mark.skipif(keras.config.backend() != "tensorflow", reason="XLA's compiled calls are TensorFlow's")
def test_compiled_calls_run_the_longest_first_after_the_check(monkeypatch):
    """Compiled calls go from the longest cut length to the shortest (ascending sizes fragment the heap: a job
    over 365 days peaked 0.8 GB higher), and the cut is checked before the first of them."""
    model = build("lstm", seed=9)
    x, b, _ = data(n=40, seed=10)
    lengths, real = [], InFlight.submit

    def recording(self, call, args, *rest, **kwargs):  # the calls in the order they are handed to the threads
        assert engine.cut.state is True  # checked before the first compiled call
        if isinstance(call, Checked):
            lengths.append(max(int(t.shape[1]) for t in args[0] if len(t.shape) == 3))
        return real(self, call, args, *rest, **kwargs)

    monkeypatch.setattr(InFlight, "submit", recording)
    engine = Engine(model)
    with compiled_calls(model):
        fast = sums(engine, x, b, batch_size=16 * 4)  # 4 rows per call, 2 in flight: 20 calls of 2 rows
    assert len(lengths) == 40 // -(-4 // COMPILED_IN_FLIGHT)
    assert lengths == sorted(lengths, reverse=True) and lengths[0] > lengths[-1]
    graph = graph_sums(model, ("lstm", 9, 10, 40), x, b, batch_size=16 * 4)
    for key in graph:
        assert_near(fast[key], graph[key])


@pytest.mark.skipif(keras.config.backend() != "tensorflow", reason="JAX's calls run one at a time")
def test_compiled_calls_in_threads_give_the_numbers_of_the_same_calls_one_at_a_time(monkeypatch):
    """A batch job's compiled calls run COMPILED_IN_FLIGHT at a time in threads (``calls.InFlight``); the totals are
    added in the order the calls were made, so the numbers are bit for bit those of the same calls made one
    after the other (what resume and the Ray engine rely on)."""
    import threading

    from explain.core import xla

    model = build("lstm", seed=9)  # the model and customers of the longest-first test: the same graph numbers
    x, b, _ = data(n=40, seed=10)
    threads, real = set(), xla.Fixed.__call__

    def recording(self, *args):
        threads.add(threading.current_thread().name)
        return real(self, *args)

    monkeypatch.setattr(xla.Fixed, "__call__", recording)
    engine = Engine(model)
    with compiled_calls(model):
        in_threads = sums(engine, x, b, batch_size=16 * 4)
    assert COMPILED_IN_FLIGHT > 1 and any(name.startswith("explain-calls") for name in threads), threads
    submit = InFlight.submit
    monkeypatch.setattr(InFlight, "submit",
                        lambda self, call, args, where, alone=False: submit(self, call, args, where, alone=True))
    threads.clear()
    with compiled_calls(model):  # the same engine: the same compiled functions, rows and calls
        one_by_one = sums(engine, x, b, batch_size=16 * 4)
    assert threads == {threading.current_thread().name}
    for key in in_threads:
        np.testing.assert_array_equal(in_threads[key], one_by_one[key])
    graph = graph_sums(model, ("lstm", 9, 10, 40), x, b, batch_size=16 * 4)
    for key in graph:
        assert_near(in_threads[key], graph[key])
