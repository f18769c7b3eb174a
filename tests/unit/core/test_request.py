"""The request as one object (issue 39): ``integrated_gradients`` takes a ``Settings`` whole, keyword overrides
change it (``settings.replace``), and the result says what made it: its ``settings`` (target as an index,
baseline None when arrays are given directly) and ``baselines``, the arrays as given (read-only; ``baseline_of(i)``
each customer's). ``explain_customers`` hands its settings over whole: the result carries the bundle's baseline."""

import numpy as np
import pytest

import explain
from explain.analysis.explainer import baseline_for, explain_customers
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from explain.demo.churn import DEFAULT_DEMO_DIR
from tests.support.models import S, data, lstm_model


@pytest.fixture(scope="module")
def lstm():
    return lstm_model()


def test_settings_whole_and_keywords_give_the_same_numbers_and_settings(lstm):
    x = data(3)
    b = {"static": np.zeros((1, S)), "temporal": x["temporal"].mean(axis=0, keepdims=True)}
    by_keywords = explain.integrated_gradients(lstm, x, b, steps=16, method="trapezoid", space="logit")
    settings = Settings(baseline=None, steps=16, method="trapezoid", space="logit")
    whole = explain.integrated_gradients(lstm, x, b, settings)
    overridden = explain.integrated_gradients(lstm, x, b, Settings(baseline=None, steps=8), steps=16,
                                              method="trapezoid", space="logit")
    for other in (whole, overridden):
        for key in by_keywords.inputs:
            np.testing.assert_array_equal(other.inputs[key], by_keywords.inputs[key])
        np.testing.assert_array_equal(other.delta, by_keywords.delta)
        assert other.settings == by_keywords.settings == settings.replace(target=0)
    assert by_keywords.settings.baseline is None  # arrays given directly


def test_the_result_carries_the_baselines_as_given_read_only_and_each_customers(lstm):
    x = data(4)
    shared = {"static": np.full((1, S), 0.5), "temporal": x["temporal"][:1].copy()}
    a = explain.integrated_gradients(lstm, x, shared, steps=8)
    assert set(a.baselines) == {"static", "temporal"}
    assert a.baselines["static"].shape == (1, S) and a.baselines["temporal"].shape == (1, *x["temporal"].shape[1:])
    np.testing.assert_array_equal(a.baseline_of(3)["temporal"], shared["temporal"][0])
    assert not a.baselines["static"].flags.writeable
    shared["static"][:] = 9.0  # the caller's array changed afterwards: the result keeps what was used
    np.testing.assert_array_equal(a.baselines["static"], 0.5)
    own = {"static": x["static"] * 0.5, "temporal": x["temporal"] * 0.5}  # one baseline per customer
    np.testing.assert_array_equal(explain.integrated_gradients(lstm, x, own, steps=8).baseline_of(2)["static"],
                                  x["static"][2] * 0.5)
    sampled = {"static": np.zeros((1, 2, S)), "temporal": np.stack([x["temporal"][:2]])}  # (1, K=2, ...)
    assert explain.integrated_gradients(lstm, x, sampled, steps=8).baseline_of(1)["temporal"].shape == (
        2, *x["temporal"].shape[1:])


def test_an_unknown_setting_is_refused_by_name(lstm):
    with pytest.raises(TypeError, match="stepz"):
        explain.integrated_gradients(lstm, data(1), {"static": np.zeros((1, S)), "temporal": data(1)["temporal"]},
                                     stepz=8)


def test_explain_customers_passes_its_settings_whole_and_the_result_carries_its_baseline():
    bundle = load_bundle(DEFAULT_DEMO_DIR)
    ids = [str(i) for i in bundle.ids[:3]]
    settings = Settings(baseline="median", steps=8)
    a = explain_customers(bundle, ids, settings)
    assert a.settings == settings.for_bundle(bundle)
    expected = baseline_for(bundle, bundle.inputs_for(ids), settings.baseline)
    for key, value in expected.items():
        np.testing.assert_array_equal(a.baselines[key], value)
        np.testing.assert_array_equal(a.baseline_of(2)[key], value[0])
