"""The Customer page on a bundle whose model predicts per period (issue 41): the risk curve over the periods with
the explained period marked (the last by default), the period choice explains that period (its prediction is the
model's output there; later periods get exactly 0), the link keeps it; a Bidirectional model says later periods
can matter (AppTest)."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import explain  # noqa: E402
from tests.support.apptest import app, array, charts, errors, plain  # noqa: E402
from tests.unit.core.test_outputs import T, _data, per_period_model  # noqa: E402

PERIODS = [f"2025-{m:02d}" for m in range(1, T + 1)]


def _save(folder, kind):
    model = per_period_model(kind, seed=7)
    x = _data(15, seed=4)
    path = explain.save_bundle(folder, model, x["static"], x["temporal"], periods=PERIODS)
    return path, np.asarray(model([x["static"], x["temporal"]]), np.float64)[:, :, 0]


@pytest.fixture(scope="module")
def lstm(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("per") / "bundle", "lstm")


def _curve(at):
    spec = charts(at)["risk_curve_chart"]
    line, mark = spec["data"][0], spec["data"][1]
    return list(line["x"]), array(line["y"]), mark["x"][0]


def _metric(at) -> float:
    return float(next(m for m in at.metric if m.label.startswith("Predicted")).value)


def _heatmap_later_zero(at, p) -> bool:
    spec = next(s for k, s in charts(at).items() if any(t["type"] == "heatmap" for t in s["data"]))
    z = array(next(t for t in spec["data"] if t["type"] == "heatmap")["z"])
    return bool(np.all(z[:, p:] == 0.0)) and bool(np.any(z[:, :p] != 0.0))


def test_customer_page_shows_the_risk_curve_and_explains_the_period_chosen(lstm, monkeypatch):
    path, outputs = lstm
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    at = app({"customer": "3"})
    assert not errors(at) and not at.exception
    x, y, marked = _curve(at)
    assert x == PERIODS and marked == PERIODS[-1]
    np.testing.assert_allclose(y, outputs[3], rtol=1e-5, atol=1e-6)
    assert _metric(at) == pytest.approx(outputs[3, -1], abs=1e-3)
    words = " ".join(plain(m.value) for m in at.markdown) + " ".join(plain(c.value) for c in at.caption)
    assert f"Explained below: {PERIODS[-1]}" in words and "reads the periods in order" in words

    at.select_slider(key="output_period_pick").set_value(PERIODS[4]).run()
    assert not at.exception and not errors(at)
    assert _curve(at)[2] == PERIODS[4]
    assert _metric(at) == pytest.approx(outputs[3, 4], abs=1e-3)
    assert at.query_params["output_period"] == "5"
    assert _heatmap_later_zero(at, 5)

    again = app({"customer": "3", "output_period": PERIODS[1]})  # a link by label
    assert _curve(again)[2] == PERIODS[1] and _metric(again) == pytest.approx(outputs[3, 1], abs=1e-3)


def test_a_bidirectional_model_says_later_periods_can_matter(tmp_path, monkeypatch):
    path, _ = _save(tmp_path / "bundle", "bidirectional")
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    at = app({"customer": "2", "output_period": "4"})
    assert not at.exception and not errors(at)
    assert any("can matter" in plain(i.value) and "Bidirectional" in plain(i.value) for i in at.info)


def test_a_two_head_bundle_opens_on_its_first_head_without_a_curve(tmp_path, monkeypatch):
    from tests.unit.core.test_outputs import two_head_model

    model = two_head_model()
    x = _data(10, seed=1)
    path = explain.save_bundle(tmp_path / "heads", model, x["static"], x["temporal"])
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    at = app({"customer": "4"})
    assert not at.exception and not errors(at)
    assert "risk_curve_chart" not in charts(at)
    churn = np.asarray(model([x["static"], x["temporal"]])[0], np.float64)[4, 0]
    assert _metric(at) == pytest.approx(churn, abs=1e-3)
