"""integrated_gradients takes inputs and baselines as a list or tuple in the model's input order
(as ``model([static, temporal])`` does), besides the dict by role."""

import re

import numpy as np
import pytest

from explain.core import ig
from explain.core.errors import AttributionError
from tests.support.models import data, lstm_model, zero_baseline

pytest.importorskip("keras")


def literal(template: str) -> str:
    return max(re.split(r"\{[^{}]*\}", template), key=len).strip()


@pytest.mark.parametrize("temporal_first", [False, True])
def test_list_in_input_order_equals_dict(temporal_first):
    model = lstm_model(seed=2, temporal_first=temporal_first)
    x, b = data(3, seed=4), zero_baseline()
    order = ("temporal", "static") if temporal_first else ("static", "temporal")
    expected = ig.integrated_gradients(model, x, b, steps=16)
    # the model itself takes the list in this order
    np.testing.assert_allclose(np.asarray(model([x[r] for r in order]))[:, 0], expected.prediction, rtol=1e-5)
    for as_sequence in (list, tuple):
        got = ig.integrated_gradients(model, as_sequence(x[r] for r in order), as_sequence(b[r] for r in order),
                                      steps=16)
        np.testing.assert_array_equal(got.static, expected.static)
        np.testing.assert_array_equal(got.temporal, expected.temporal)
        np.testing.assert_array_equal(got.delta, expected.delta)
    mixed = ig.integrated_gradients(model, x, [b[r] for r in order], steps=16)
    np.testing.assert_array_equal(mixed.temporal, expected.temporal)


def test_wrong_order_or_count_is_refused():
    model = lstm_model(seed=2, temporal_first=True)  # takes [temporal, static]
    x, b = data(2), zero_baseline()
    with pytest.raises(AttributionError, match=re.escape("inputs static has shape (2, 6, 3)")):
        ig.integrated_gradients(model, [x["static"], x["temporal"]], b, steps=8)
    with pytest.raises(AttributionError, match=re.escape(literal(ig.NOT_TWO_ARRAYS))) as caught:
        ig.integrated_gradients(model, x, [b["temporal"]], steps=8)
    assert "baselines is a list of 1 item(s)" in str(caught.value) and "[temporal, static]" in str(caught.value)
