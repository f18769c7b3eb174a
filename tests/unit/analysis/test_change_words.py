"""The words of a change since an earlier period (baseline previous:K): "A's risk rose from 13 % to 25 % since
2025-05, mainly because calls went from 0 to 6 in 2025-05", on a linear model whose attributions are known
exactly, and on the demo against the model's own scores one period earlier."""

import numpy as np
import pytest

from explain.analysis import words
from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core.settings import Baseline, Settings
from tests.unit.analysis.test_words import _bundle


def test_the_headline_says_the_change_its_time_and_the_reason_with_both_values():
    bundle = _bundle()
    settings = Settings(baseline="previous", steps=16)
    result = explain_customers(bundle, ["A"], settings)
    # A's calls: 0, 0, 0, 0, 6, 6; a period earlier the window held 0, 0, 0, 0, 0, 6 (the first period repeated)
    assert result.prediction[0] == pytest.approx(0.001 * 6 + 0.02 * 12, abs=1e-6)
    assert result.baseline_prediction[0] == pytest.approx(0.001 * 6 + 0.02 * 6, abs=1e-6)
    story = words.story(result, bundle, 0, "A", settings=settings)
    assert story.headline.startswith("A's risk rose from 13 % to 25 % since 2025-05")
    assert "mainly because calls went from 0 to 6 in 2025-05, raising the risk by 0.12" in story.headline
    assert story.reference == "a month earlier"
    assert not any("Tenure" in r for r in story.reasons)  # static features did not change: no effect


def test_three_periods_back_and_a_fall():
    bundle = _bundle()
    settings = Settings(baseline="previous:3", steps=16)
    assert words.change_since(settings.baseline, bundle) == "since 2025-03"
    assert words.reference_name(settings.baseline, bundle) == "3 months earlier"
    result = explain_customers(bundle, ["B"], settings)  # B's calls are flat at 1: nothing changed
    story = words.story(result, bundle, 0, "B", settings=settings)
    assert story.headline.startswith("B's risk stayed at")


@pytest.mark.parametrize(("score", "gap", "expected"), [
    (0.78, 0.47, "C's risk rose from 31 % to 78 % since 2025-11"),
    (0.22, -0.1, "C's risk fell from 32 % to 22 % since 2025-11"),
    (0.0099, 0.0022, "C's risk rose from 0.77 % to 0.99 % since 2025-11"),  # more digits where 1 % and 1 %
    (0.5, 0.0, "C's risk stayed at 50 % since 2025-11"),
])
def test_change_head(score, gap, expected):
    assert words.change_head("C", score, gap, target="churn", since="since 2025-11") == expected


def test_change_phrases_say_then_and_now_once_with_the_unit():
    one = words.Driver("Support calls", 0.2, 6.0, 1.0, ("2025-12", "2025-12"), "calls", " in 2025-12")
    assert words.phrase(one, "a month earlier") == "support calls went from 1 to 6 calls in 2025-12"
    mean = words.Driver("Data usage", 0.1, 2.8, 4.6, ("2025-11", "2025-12"), "GB", " in the last 2 months", count=2)
    assert words.phrase(mean, "a month earlier") == "data usage went from an average of 4.6 to 2.8 GB in the last 2 " \
                                                    "months"
    same = words.Driver("App logins", 0.03, 20.04, 19.98, ("2025-06", "2025-11"), "", " in 2025-06 to 2025-11",
                        count=6)
    assert words.phrase(same, "a month earlier") == "app logins stayed at an average of 20 in 2025-06 to 2025-11 (as " \
                                                    "a month earlier)"
    plan = words.Driver("Plan", 0.05, "premium", "basic")
    assert words.phrase(plan, words.CHANGE_SNAPSHOT) == "plan went from basic to premium"
    tenure = words.Driver("Tenure", 0.01, 12.0, 11.0, None, "months")
    assert words.phrase(tenure, words.CHANGE_SNAPSHOT) == "tenure went from 11 to 12 months"


@pytest.fixture(scope="module")
def demo_bundle(bundle_dir):
    return load_bundle(bundle_dir)


def test_demo_change_words_match_the_models_scores_a_period_earlier(demo_bundle):
    ids = [str(i) for i in demo_bundle.ids[:6]]
    settings = Settings(baseline="previous", steps=32)
    result = explain_customers(demo_bundle, ids, settings)
    x = demo_bundle.inputs_for(ids)
    then = {"static": x["static"], "temporal": np.concatenate([x["temporal"][:, :1], x["temporal"][:, :-1]], axis=1)}
    expected = demo_bundle.predict(then)[:, 0]
    np.testing.assert_allclose(result.baseline_prediction, expected, atol=1e-6)
    np.testing.assert_allclose(result.total(), result.prediction - result.baseline_prediction, atol=2e-3)
    since = f"since {demo_bundle.periods[-2]}"
    for i, cid in enumerate(ids):
        headline = words.story(result, demo_bundle, i, cid, settings=settings).headline
        assert headline.startswith(f"{cid}'s risk ") and since in headline
        assert ("rose" in headline) == (result.prediction[i] > result.baseline_prediction[i]) or "stayed" in headline


def test_reference_names_of_the_other_baselines_are_unchanged():
    assert words.reference_name(Baseline.parse("mean")) == "the average customer"
    assert words.change_reference(Baseline.parse("mean")) is None
