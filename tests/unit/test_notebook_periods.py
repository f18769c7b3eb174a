"""The notebook's explain() on a per-period model and a two-head model (issue 41): output_period= and output=."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import explain  # noqa: E402
from tests.unit.core.test_outputs import T, _data, _single_head, per_period_model, two_head_model  # noqa: E402


def test_output_period_by_number_and_label_and_the_last_by_default():
    model = per_period_model("gru", seed=9)
    x = _data(5, seed=6)
    full = np.asarray(model([x["static"], x["temporal"]]), np.float64)[:, :, 0]
    labels = [f"w{i}" for i in range(1, T + 1)]
    last = explain.explain(model, [x["static"], x["temporal"]], baseline="zero", periods=labels)
    np.testing.assert_allclose(last.prediction, full[:, -1], rtol=1e-5, atol=1e-6)
    for period, p in ((3, 3), ("w6", 6)):
        e = explain.explain(model, [x["static"], x["temporal"]], baseline="zero", periods=labels, output_period=period)
        np.testing.assert_allclose(e.prediction, full[:, p - 1], rtol=1e-5, atol=1e-6)
        assert np.all(e.temporal[:, p:] == 0.0)
        total = e.static.sum(axis=1) + e.temporal.sum(axis=(1, 2))
        np.testing.assert_allclose(total, e.prediction - e.baseline_prediction, atol=2e-4)
        assert e.settings.output_period == p


def test_output_by_name():
    model = two_head_model()
    x = _data(4)
    e = explain.explain(model, [x["static"], x["temporal"]], baseline="zero", output="spend", steps=32)
    want = np.asarray(_single_head(model, "spend", None)([x["static"], x["temporal"]]), np.float64)[:, 0]
    np.testing.assert_allclose(e.prediction, want, rtol=1e-5, atol=1e-6)
    assert e.settings.output == "spend" and e.bundle.output_names == ["spend"]
