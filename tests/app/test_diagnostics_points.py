"""The Diagnostics page's points chart through AppTest: f(alpha) along the path with the engine's
integration points, on the demo (a fixed steps: the rule's points; auto: this customer's) and on a
padded bundle of 64 weeks behind Masking (tests/support/padded.py). The chart's ends and dots are
checked against the customer's attribution computed here (explain_customers)."""

import numpy as np
import pytest

from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core.quadrature import alphas_and_weights
from explain.core.settings import Settings
from tests.support import padded
from tests.support.apptest import DEMO, app, array, charts, errors, plain

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")

SENTENCE = "where the prediction changes along the path, the engine placed more points"


def points_chart(at):
    assert not at.exception and not errors(at), errors(at)
    spec = charts(at)["diag_points"]
    line, dots = spec["data"][:2]
    assert line["mode"] == "lines" and dots["mode"] == "markers"
    x, y = array(line["x"]), array(line["y"])
    assert len(x) == 257 and x[0] == 0 and x[-1] == 1 and np.isfinite(y).all()
    return spec, x, y, array(dots["x"]), array(dots["y"]), array(dots["customdata"])


def caption(at) -> str:
    return next(plain(c.value) for c in at.caption if "The line is the prediction along the straight path" in c.value)


@pytest.fixture(autouse=True)
def _demo_bundle(monkeypatch):
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)


def test_a_fixed_steps_shows_its_rules_points_on_the_demo():
    at = app({"customer": "C00003", "steps": "32"}, page="pages/diagnostics.py")
    _, x, y, dots_x, dots_y, custom = points_chart(at)
    alphas, weights = alphas_and_weights("gausslegendre", 32)
    np.testing.assert_allclose(dots_x, alphas)
    np.testing.assert_allclose(custom[:, 0], weights)
    a = explain_customers(load_bundle(DEMO), ["C00003"], Settings(steps=32))
    assert y[0] == pytest.approx(a.baseline_prediction[0], abs=1e-6)
    assert y[-1] == pytest.approx(a.prediction[0], abs=1e-6)
    np.testing.assert_allclose(dots_y, np.interp(dots_x, x, y), atol=0.02)  # the dots lie on the line
    text = caption(at)
    assert "the same 32 points of the gausslegendre rule for every customer" in text
    assert f"{int(a.gradient_points[0])} gradient and {int(a.forward_points[0])} forward evaluations" in text
    header = " ".join(plain(c.value) for c in at.caption)
    assert "32 gradient and 2 forward evaluations" in header  # the page's first line says what was spent


def test_auto_shows_this_customers_points_on_the_demo():
    at = app({"customer": "C00003", "steps": "auto"}, page="pages/diagnostics.py")
    _, x, y, dots_x, _, custom = points_chart(at)
    a = explain_customers(load_bundle(DEMO), ["C00003"], Settings(steps="auto"))
    assert len(dots_x) == a.steps[0] and custom[:, 0].sum() == pytest.approx(1.0, abs=1e-9)
    text = caption(at)
    assert SENTENCE in text and f"{int(a.steps[0])} points in" in text and f"delta {float(a.delta[0]):+.2e}" in text


def test_the_chart_on_a_padded_bundle_of_64_weeks(tmp_path, monkeypatch):
    folder = padded.write(tmp_path / "padded")
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    short = padded.short_customers(folder)[0]
    for steps in ("auto", "16"):
        at = app({"customer": short, "steps": steps}, page="pages/diagnostics.py")
        spec, x, y, dots_x, _, custom = points_chart(at)
        a = explain_customers(load_bundle(folder), [short], Settings(steps=steps))
        assert y[0] == pytest.approx(a.baseline_prediction[0], abs=1e-6)
        assert y[-1] == pytest.approx(a.prediction[0], abs=1e-6)
        assert len(dots_x) == a.steps[0] and custom[:, 0].sum() == pytest.approx(1.0, abs=1e-9)
        assert spec["layout"]["yaxis"]["title"]["text"] == "churn (output)"
