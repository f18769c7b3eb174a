"""The XLA-compiled path (explain.core.xla) gives the graph path's attributions (within 1e-5),
compiles once per bucket, and stays off until enabled."""

import functools

import numpy as np
import pytest

import explain
from explain.bundle import load as bundle_io
from explain.core import xla
from explain.core.engine import engine_for, warm_up_xla, xla_wanted
from explain.demo.churn import DEFAULT_DEMO_DIR
from tests.support.models import T, data, linear_model, lstm_model, zero_baseline

TOLERANCE = 1e-5


def _both(model, inputs, baselines, **kwargs):
    """(graph path, XLA path) attributions of the same request."""
    engine = engine_for(model)
    xla.disable(engine)
    graph = explain.integrated_gradients(model, inputs, baselines, **kwargs)
    state = xla.enable(engine, background=False)
    try:
        calls = state.calls
        fast = explain.integrated_gradients(model, inputs, baselines, **kwargs)
        assert state.calls > calls, "the request did not take the compiled path"
    finally:
        xla.disable(engine)
    return graph, fast


def _close(graph, fast):
    for part in ("static", "temporal"):
        np.testing.assert_allclose(getattr(fast, part), getattr(graph, part), rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(fast.prediction, graph.prediction, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(fast.baseline_prediction, graph.baseline_prediction, rtol=0, atol=TOLERANCE)


@functools.cache
def temporal_first_lstm():
    """Unlike the demo: inputs reversed, 5 units. One model for the module's four cases: each case is its own
    (space, bucket), compiled on its own; the graph path's functions (one per space) are shared."""
    return lstm_model(seed=3, temporal_first=True, units=5)


@pytest.mark.parametrize("customers", [1, 3])  # 3: padded to the bucket of 4
@pytest.mark.parametrize("space", ["output", "logit"])
def test_xla_equals_graph_on_a_temporal_first_lstm(customers, space):
    model = temporal_first_lstm()
    x = data(n=customers, seed=4)
    graph, fast = _both(model, x, zero_baseline(), steps=32, space=space)
    _close(graph, fast)
    assert np.abs(graph.temporal).max() > 1e-3  # the comparison is not of zeros


def test_xla_is_exact_on_a_linear_model():
    model, ws, wt = linear_model(seed=5)
    x = data(n=2, seed=6)
    graph, fast = _both(model, x, zero_baseline(), steps=16, method="trapezoid")
    _close(graph, fast)
    np.testing.assert_allclose(fast.static, x["static"] * ws, atol=TOLERANCE)  # IG of a linear model: (x - b) w
    np.testing.assert_allclose(fast.temporal, x["temporal"] * wt, atol=TOLERANCE)


def test_xla_equals_graph_on_the_demo():
    bundle = bundle_io.load_bundle(DEFAULT_DEMO_DIR)
    ids = [str(i) for i in bundle.ids[:5]]
    inputs = bundle.inputs_for(ids)
    mean = {role: inputs[role].mean(axis=0, keepdims=True) for role in ("static", "temporal")}
    graph, fast = _both(bundle.model, inputs, mean, steps=64)  # 5 customers: the bucket of 16
    _close(graph, fast)


def test_each_bucket_compiles_once_and_large_requests_stay_on_the_graph_path():
    model = lstm_model(seed=7)
    engine = engine_for(model)
    state = xla.enable(engine, buckets=(1, 4), background=False)
    try:
        for n in (1, 2, 3, 4, 1):
            explain.integrated_gradients(model, data(n=n, seed=n), zero_baseline(), steps=16)
        assert state.compiles == 2  # buckets 1 and 4 at 16 alphas, each once
        calls = state.calls
        explain.integrated_gradients(model, data(n=9, seed=9), zero_baseline(), steps=16)  # above every bucket
        assert state.calls == calls and state.compiles == 2
    finally:
        xla.disable(engine)


def test_background_mode_never_compiles_in_the_request():
    model = lstm_model(seed=8)
    engine = engine_for(model)
    state = xla.enable(engine, buckets=(1,), background=True)
    try:
        first = explain.integrated_gradients(model, data(n=1, seed=1), zero_baseline(), steps=8)
        assert state.calls == 0  # the bucket was not ready: the graph path answered
        xla.warm_up(engine, steps=[8], background=False)
        again = explain.integrated_gradients(model, data(n=1, seed=1), zero_baseline(), steps=8)
        assert state.calls == 1 and state.compiles == 1
        _close(first, again)
    finally:
        xla.disable(engine)


def test_warm_up_needs_enable():
    model = lstm_model(seed=9)
    with pytest.raises(RuntimeError, match="enable"):
        xla.warm_up(engine_for(model), steps=[T], background=False)


def test_warm_up_xla_compiles_the_default_settings_one_customer_bucket_only_when_asked(monkeypatch):
    """The dashboard (``engine.xla_wanted``, ``engine.warm_up_xla``): a short history only with EXPLAIN_XLA=1; then
    XLA enabled for the model's engine and the one-customer bucket of the default settings' alphas compiled (in a
    thread). Long histories: tests/unit/core/test_xla_long.py."""
    import threading

    from explain.core import quadrature
    from explain.core.settings import Settings

    model = lstm_model(seed=10)
    engine = engine_for(model)
    xla.disable(engine)
    monkeypatch.delenv(xla.ENV, raising=False)
    assert not xla_wanted(model) and xla.state_of(engine) is None  # off unless asked (or a long history)
    started = []
    real = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: (started.append(self), real(self))[1])
    monkeypatch.setenv(xla.ENV, "1")
    try:
        assert xla_wanted(model)
        warm_up_xla(model)
        state = xla.state_of(engine)
        assert state is not None and started
        for thread in started:
            thread.join(timeout=120)
        default = Settings()
        alphas = len(quadrature.alphas_and_weights(default.method, int(default.steps))[0])
        assert set(state.ready) == {(default.space, 1, alphas)} and state.compiles == 1
    finally:
        xla.disable(engine)


def test_warm_up_xla_logs_and_skips_a_failure(monkeypatch, caplog):
    monkeypatch.setenv(xla.ENV, "1")
    monkeypatch.setattr(xla, "enable", lambda engine: (_ for _ in ()).throw(RuntimeError("no XLA here")))
    with caplog.at_level("WARNING", logger="explain.app"):
        warm_up_xla(lstm_model(seed=11))  # no exception
    assert "XLA warm-up skipped" in caplog.text


def test_compiled_calls_count_nested_blocks_per_model():
    model, other = lstm_model(seed=12), lstm_model(seed=13)
    assert not xla.compiling(model)
    with xla.compiled_calls(model):
        with xla.compiled_calls(model):
            assert xla.compiling(model) and not xla.compiling(other)
        assert xla.compiling(model)
    assert not xla.compiling(model)
