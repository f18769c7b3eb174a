"""The baseline of a customer with a padded (short) history keeps its real periods real: each feature's mean
over every customer's real weeks placed on the customer's own real weeks, the padding kept; said in words;
and the warning when the baseline scores within 0.02 of the customer. Checked against a baseline built in
the test with numpy and scored with the model itself."""

from __future__ import annotations

import numpy as np
import pytest

from explain.analysis import report
from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core import baselines
from explain.core.settings import Settings
from tests.support import padded


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return load_bundle(padded.write(tmp_path_factory.mktemp("padded") / "bundle"))


def test_a_short_customers_mean_baseline_is_the_mean_of_real_weeks_on_its_own_real_weeks(bundle):
    short = padded.short_customers(bundle.path)[:3]
    a = explain_customers(bundle, short, Settings(baseline="mean", steps=16))
    data = bundle.data()
    history = np.asarray(data["temporal"], np.float64)
    real = ~(history == 0).all(axis=2)  # Masking(0): a padded week is all zeros
    mean = history[real].mean(axis=0)  # (F,): over every customer's real weeks only
    own = bundle.inputs_for(short)["temporal"].astype(np.float64)
    own_real = ~(own == 0).all(axis=2)
    assert (~own_real).any(axis=1).all()  # each of them is padded
    expected = np.where(own_real[..., None], mean, own)  # the mean on real weeks, the padding kept
    static = np.broadcast_to(np.asarray(data["static"], np.float64).mean(axis=0), (len(short), bundle.n_static))
    scored = bundle.model.predict([static.astype("float32"), expected.astype("float32")], verbose=0)[:, 0]
    np.testing.assert_allclose(a.baseline_prediction, scored, atol=1e-5)
    # not the mean that counts padded zeros (which would be lower in every feature)
    assert (mean > history.reshape(-1, history.shape[2]).mean(axis=0)).all()


def test_the_baseline_says_what_it_does_with_a_short_history(bundle):
    words = baselines.describe("mean", layout=bundle.layout, unit="week")
    assert ("For a customer with a short history the baseline is as short: each feature's mean over every "
            "customer's real weeks is placed on the customer's own real weeks, and the padded ones stay padding"
            ) in words
    assert "not how long the history is" in words
    assert "short history" not in baselines.describe("mean", unit="week")  # nothing padded: nothing said
    assert "short history" not in baselines.describe("flat", layout=bundle.layout, unit="week")  # its own history


def test_the_analysts_words_say_no_data_on_the_side_the_bundle_pads(bundle):
    start = baselines.describe("mean", layout=bundle.layout, unit="week", analyst=True)
    end = baselines.describe("mean", layout=bundle.layout, unit="week", analyst=True, padding="end")
    assert "Weeks before a customer's first week are no data yet" in start
    assert "Weeks after a customer's last week are no data" in end and "before a customer's first" not in end
    for words in (start, end):
        assert not [w for w in ("mask", "masking", "offset", "padding") if w in words.lower()]


@pytest.mark.parametrize("fx, fb, warned", [(0.999, 0.989, True), (0.5, 0.5, True), (0.30, 0.28, True),
                                            (0.30, 0.279, False), (0.9, 0.2, False)])
def test_a_baseline_within_002_of_the_customer_is_warned_about(fx, fb, warned):
    note = report.close_baseline_note(fx, fb)
    assert (note is not None) == warned
    if warned:
        assert f"({fb:.3f}) is within 0.02 of this customer's ({fx:.3f})" in note
