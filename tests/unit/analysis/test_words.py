"""The Customer page's words (explain.analysis.words), on a linear model whose attributions are known exactly:
every sentence names the customer's value, what it is compared with and the effect with its direction."""

import re

import keras
import numpy as np
import pytest

import explain
from explain.analysis import words
from explain.analysis.report import delta_status
from explain.core.settings import Baseline

T, F, S = 6, 2, 2
JARGON = ("mask", "logit", "delta", "gausslegendre", "offset", "padding")


def _bundle(labels=None):
    s_in, t_in = keras.Input((S,), name="account"), keras.Input((T, F), name="usage")
    out = keras.layers.Dense(1, name="lin")(keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)]))
    model = keras.Model([s_in, t_in], out)
    w = np.zeros((S + T * F, 1), "float32")
    w[0] = 0.001         # tenure: a small effect
    w[S + 4 * F] = 0.02  # calls, period 5
    w[S + 5 * F] = 0.02  # calls, period 6 (scores stay within 0 and 1: said as percentages)
    model.get_layer("lin").set_weights([w, np.zeros(1, "float32")])
    static = np.array([[6.0, 1.0], [30.0, 1.0], [30.0, 1.0]], "float32")
    temporal = np.zeros((3, T, F), "float32")
    temporal[0, 4:, 0] = 6.0  # customer A: calls rose to 6 in the last two periods
    temporal[1:, :, 0] = 1.0
    return explain.Bundle.from_objects(model, static, temporal, ids=["A", "B", "C"],
                                       static_features=["Tenure", "Plan"], temporal_features=["Calls", "Data"],
                                       periods=[f"2025-0{m}" for m in range(1, 7)],
                                       units={"Tenure": "months", "Calls": "calls"}, labels=labels,
                                       output_names=["churn"])


def test_drivers_carry_the_window_the_value_the_reference_and_the_effect():
    bundle = _bundle()
    a = explain.explain_customers(bundle, ["A"], explain.Settings(baseline="zero", steps=2))
    values = {k: v[0] for k, v in bundle.inputs_for(["A"]).items()}
    zero = {"static": np.zeros(S), "temporal": np.zeros((T, F))}
    found = words.drivers(a, bundle, 0, values, zero)
    assert [d.label for d in found] == ["Calls", "Tenure"]  # Plan and Data have no effect: not reasons
    calls, tenure = found
    assert calls.periods == ("2025-05", "2025-06") and calls.value == 6.0 and calls.reference == 0.0
    assert calls.when == " in the last 2 months" and calls.count == 2
    np.testing.assert_allclose(calls.effect, 0.24, rtol=1e-5)  # (6 - 0) * 0.02 in two periods
    np.testing.assert_allclose(tenure.effect, 0.006, rtol=1e-5)  # (6 - 0) * 0.001
    assert words.reason(calls, "zero") == "Calls averaged 6 in the last 2 months (against 0) - raises the risk by 0.24."
    assert words.reason(tenure, "the average customer") == (
        "Tenure is 6 months (the average customer: 0 months) - raises the risk by 0.006.")


def test_the_sentence_names_value_reference_and_effect_against_the_average_customer():
    bundle = _bundle()
    settings = explain.Settings(baseline="mean", steps=2)
    a = explain.explain_customers(bundle, ["A"], settings)
    story = words.story(a, bundle, 0, "A", settings=settings)
    mean_calls = float(bundle.temporal[:, :, 0].mean())  # the mean baseline: every customer and month, 1.33
    effect = 0.02 * 2 * (6.0 - mean_calls)  # exact for a linear model
    text = story.headline
    assert text.startswith(f"A is {float(a.prediction[0]):.0%} likely to churn".replace("%", " %"))
    assert (f"calls averaged 6 in the last 2 months (the average customer: {mean_calls:.2g}), raising the risk by "
            f"{effect:.2f}") in text, text
    assert "attribution" not in text and not [w for w in JARGON if w in text.lower()]
    assert story.reference == "the average customer"
    assert story.reasons[0].startswith("Calls averaged 6") and "raises the risk by" in story.reasons[0]
    tenure = next(r for r in story.reasons if r.startswith("Tenure"))
    assert f"Tenure is 6 months (the average customer: {bundle.static[:, 0].mean():.0f} months)" in tenure
    assert f"lowers the risk by {abs(0.001 * (6 - bundle.static[:, 0].mean())):.2f}" in tenure  # below the average


def test_only_drivers_that_push_the_way_the_score_moved_are_in_the_first_sentence():
    bundle = _bundle()
    settings = explain.Settings(baseline="mean", steps=2)
    a = explain.explain_customers(bundle, ["B"], settings)
    story = words.story(a, bundle, 0, "B", settings=settings)
    assert a.prediction[0] < a.baseline_prediction[0]
    sentence = story.headline.split("mainly because", 1)[1]
    assert "lowering the risk by" in sentence and "raising" not in sentence
    assert "tenure" not in sentence  # its effect raises the score: a reason of the list below, not of the sentence
    assert any(r.startswith("Tenure is 30 months") and "raises the risk" in r for r in story.reasons)
    assert any(r.startswith("Calls averaged 1") and "lowers the risk" in r for r in story.reasons)


@pytest.mark.parametrize("spec, named", [
    ("mean", "the average customer"), ("median", "the median customer"), ("customer:C7", "customer C7"),
    ("cohort:0", "the average customer who stayed"), ("cohort:1", "the average customer who churned"),
    ("zero", "zero"), ("flat", "their own average"), ("blur", "their own smoothed history"),
    ("sample:16", "the average of 16 sampled customers"),
])
def test_the_reference_is_named_by_baseline_kind(spec, named):
    bundle = _bundle(labels=[1, 0, 0])
    assert words.reference_name(Baseline.parse(spec), bundle, "churn") == named


def test_each_baseline_kind_names_its_reference_in_the_first_sentence():
    bundle = _bundle(labels=[1, 0, 0])
    for spec in ("median", "customer:B", "cohort:0", "sample:2", "zero"):
        settings = explain.Settings(baseline=spec, steps=2)
        a = explain.explain_customers(bundle, ["A"], settings)
        story = words.story(a, bundle, 0, "A", settings=settings)
        named = words.reference_name(settings.baseline, bundle, "churn")
        assert (f"({named}: " in story.headline or "(against 0)" in story.headline), (spec, story.headline)
        assert "calls averaged 6" in story.headline, story.headline


def test_a_score_outside_0_1_is_not_a_percentage_and_its_effects_are_log_odds():
    assert words.why_sentence("X", 3.2, "churn", [], reference="zero", space="logit") == \
        "X scores 3.20 for churn (log-odds)."
    d = words.Driver("Tenure", -0.5, 3.0, 10.0, unit="months")
    text = words.why_sentence("X", 3.2, "churn", [d], reference="the average customer", space="logit", gap=-0.5)
    assert text.endswith("tenure is 3 months (the average customer: 10 months), lowering the log-odds by 0.50.")


def test_tiny_and_extreme_scores_are_said_as_less_than_1_and_over_99_percent():
    assert words.why_sentence("X", 0.001, "churn", [], reference="zero").startswith("X is less than 1 % likely")
    assert words.why_sentence("X", 0.999, "churn", [], reference="zero").startswith("X is over 99 % likely")


def test_known_outcome_and_the_models_misses_use_the_verdicts_risk_bands():
    bundle = _bundle(labels=[0, 1, 0])  # A stayed, B churned
    from explain.core import verdict

    bands = verdict.DEFAULT_BANDS  # low below 0.3, high from 0.6
    scores = np.array([0.9, 0.1, 0.45])
    high, low = words.misses(bundle, scores, bands)
    assert (high, low) == (["A"], ["B"])  # A: high risk but stayed; B: low risk but churned; C: medium, not a miss
    said = verdict.verdict(0.9, bands, "churn")
    text, missed = words.known_outcome(bundle, "A", said, "churn")
    assert missed and text == ("Known outcome: stayed. The model missed this one: it scores them high risk "
                               "(0.6 and above), but they stayed.")
    text, missed = words.known_outcome(bundle, "B", verdict.verdict(0.1, bands, "churn"), "churn")
    assert missed and text.startswith("Known outcome: churned. The model missed this one") and "low risk" in text
    assert words.known_outcome(bundle, "C", verdict.verdict(0.45, bands, "churn"), "churn") == (
        "Known outcome: stayed.", False)
    assert words.known_outcome(_bundle(), "A", said) == (None, False)  # no labels: nothing said
    assert words.misses(_bundle(), scores) == ([], [])


def test_the_gap_is_said_as_the_share_that_adds_up_and_the_share_unexplained():
    status, advice = delta_status(2.7e-08, 0.9, 0.2)
    assert status == "fine" and "being explained" not in advice
    assert "add up to over 99.9 % of the score difference (under 0.1 % unexplained" in advice, advice
    status, advice = delta_status(0.0007, 0.9, 0.2)  # 0.1 % of 0.7
    assert "99.9 % of the score difference (0.1 % unexplained" in advice, advice
    status, advice = delta_status(0.02, 0.9, 0.2)  # 2.9 %
    assert status == "check" and "97.1 % of the score difference: 2.9 % is unexplained" in advice, advice


def test_label_facts_are_read_once_per_bundle_content_and_a_copy_without_labels_has_none(monkeypatch):
    import dataclasses

    from explain.core import labels

    bundle = dataclasses.replace(_bundle(labels=[1, 0, 0]), content_hash="h-words-test")
    calls = []
    real = labels.values
    monkeypatch.setattr(labels, "values", lambda b: calls.append(1) or real(b))
    first = words.label_facts(bundle)
    assert first[0] == ["0", "1"] and first[1] == "1" and first[2].tolist() == [True, False, False]
    read = len(calls)
    assert read >= 1 and words.label_facts(bundle) is first and len(calls) == read  # kept: not read again
    assert words.base_rate(bundle, "churn") == "33 % of customers churn"
    unlabelled = dataclasses.replace(bundle, labels=None)  # e.g. the what-if report's copy
    assert words.label_facts(unlabelled) == ([], None, None) and words.misses(unlabelled, [0.9, 0.1, 0.5]) == ([], [])


@pytest.mark.parametrize("effects, sign, window", [
    # a broad effect over weeks 2-9 and a spike at the end: the window holds most of the effect, not the spike
    ([0, 0, .04, .05, .05, .05, .05, .04, .04, .03, 0, 0, .08], 1.0, (2, 8)),
    ([0, 0, 0, .3, 0, 0], 1.0, (3, 3)),                      # one period holds it all
    ([0, -.2, -.2, .5, -.2, 0], -1.0, (1, 4)),               # the sign asked for: the negative cells
    ([np.nan, np.nan, .1, .1, .1, .1], 1.0, (2, 4)),         # no data: never in it; the first of equals
])
def test_a_history_features_window_holds_most_of_its_effect(effects, sign, window):
    effects = np.asarray(effects, np.float64)
    first, last = words._window(effects, sign)
    assert (first, last) == window
    mass = np.where(np.isnan(effects), 0, np.maximum(sign * effects, 0))
    assert mass[first:last + 1].sum() >= words.WINDOW_COVER * mass.sum() - 1e-12
    for a in range(len(effects)):  # and no shorter run does
        for b in range(a, a + (last - first)):
            assert mass[a:b + 1].sum() < words.WINDOW_COVER * mass.sum()


# ----------------------------------------------------------------------------- feature groups (issue 38, item 4)

N_GROUPED = 40


def _grouped_bundle(groups=None, n: int = N_GROUPED):
    """A linear model on three static features (tenure, monthly charge, bill) and one history (calls): the
    attribution of a static feature against the mean baseline is exactly w * (x - mean). Charge and bill move
    together over the customers (bill = charge + a little noise); customer G0 pays much more than everyone on both,
    G1 has a high charge and a low bill."""
    s_in, t_in = keras.Input((3,), name="account"), keras.Input((T, 1), name="usage")
    out = keras.layers.Dense(1, name="lin")(keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)]))
    model = keras.Model([s_in, t_in], out)
    w = np.zeros((3 + T, 1), "float32")
    w[:3, 0] = [-0.002, 0.003, 0.002]  # tenure, charge, bill
    w[3 + T - 1, 0] = 0.01  # calls in the last month
    model.get_layer("lin").set_weights([w, np.full(1, 0.3, "float32")])
    rng = np.random.default_rng(3)
    charge = rng.uniform(20, 80, n)
    static = np.stack([rng.uniform(1, 60, n), charge, charge + rng.normal(0, 2, n)], axis=1)
    static[0, 1:] = [95.0, 97.0]  # G0: both far above the average customer
    static[1, 1:] = [90.0, 15.0]  # G1: a high charge and a low bill
    temporal = rng.uniform(0, 3, (n, T, 1))
    return explain.Bundle.from_objects(model, static.astype("float32"), temporal.astype("float32"),
                                       ids=[f"G{k}" for k in range(n)],
                                       static_features=["Tenure", "Charge", "Bill"], temporal_features=["Calls"],
                                       periods=[f"2025-0{m}" for m in range(1, 7)],
                                       units={"Tenure": "months", "Charge": "USD", "Bill": "USD"},
                                       groups=groups, output_names=["churn"])


def _exact(bundle, column: int, cid: str) -> float:
    """The exact attribution of a static feature of the linear model against the mean baseline."""
    weights = {0: -0.002, 1: 0.003, 2: 0.002}
    return weights[column] * float(bundle.static[bundle.index_of(cid), column] - bundle.static[:, column].mean())


def test_a_declared_groups_members_that_push_the_same_way_are_one_reason_with_their_summed_effect():
    from explain.analysis import groups

    bundle = _grouped_bundle({"Billing": ["Charge", "Bill"]})
    assert groups.find(bundle) == (groups.FeatureGroup("Billing", ("Charge", "Bill"), False),)
    settings = explain.Settings(baseline="mean", steps=4)
    a = explain.explain_customers(bundle, ["G0"], settings)
    story = words.story(a, bundle, 0, "G0", settings=settings)
    charge, bill = _exact(bundle, 1, "G0"), _exact(bundle, 2, "G0")  # both raise the risk
    assert charge > 0.05 and bill > 0.05
    head = story.headline
    assert head.count("billing") == 1 and "Billing" not in head, head  # the group named once
    mean_charge, mean_bill = bundle.static[:, 1].mean(), bundle.static[:, 2].mean()
    assert (f"mainly because billing (charge and bill): charge is 95 USD (the average customer: {mean_charge:.0f} "
            f"USD) and bill is 97 USD (the average customer: {mean_bill:.0f} USD), raising the risk by "
            f"{charge + bill:.2f} in all") in head, head
    (group,) = story.groups
    assert group.label == "Billing" and [m.label for m in group.members] == ["Charge", "Bill"]
    np.testing.assert_allclose(group.effect, charge + bill, rtol=1e-4)  # exact: the members' attributions summed
    np.testing.assert_allclose(group.effect, float(a.static[0, 1] + a.static[0, 2]), rtol=1e-9)
    # the members one by one below, each with its value, reference and own effect, marked with the group
    lines = {r.split(" is ")[0]: r for r in story.reasons}
    assert lines["Charge"] == (f"Charge is 95 USD (the average customer: {mean_charge:.0f} USD) - raises the risk by "
                               f"{charge:.2f}. Together with bill (the group Billing): raises the risk by "
                               f"{charge + bill:.2f}.")
    assert lines["Bill"].startswith(f"Bill is 97 USD (the average customer: {mean_bill:.0f} USD) - raises the "
                                    f"risk by {bill:.2f}. Together with charge (the group Billing)")
    assert list(lines).index("Charge") + 1 == list(lines).index("Bill")  # side by side, where the group stands


def test_members_that_push_opposite_ways_are_said_apart():
    bundle = _grouped_bundle({"Billing": ["Charge", "Bill"]})
    settings = explain.Settings(baseline="mean", steps=4)
    a = explain.explain_customers(bundle, ["G1"], settings)
    story = words.story(a, bundle, 0, "G1", settings=settings)
    assert _exact(bundle, 1, "G1") > 0 > _exact(bundle, 2, "G1")  # charge raises, bill lowers
    assert story.groups == [] and "billing" not in story.headline.lower()
    assert not any("Together with" in r for r in story.reasons), story.reasons
    assert any(r.startswith("Charge is 90 USD") and "raises the risk" in r for r in story.reasons)
    assert any(r.startswith("Bill is 15 USD") and "lowers the risk" in r for r in story.reasons)


def test_groups_found_from_the_data_are_named_by_their_members_and_a_bundle_without_any_has_no_group_phrase():
    from explain.analysis import groups

    bundle = _grouped_bundle()  # nothing declared: charge and bill are found (Spearman ~ 0.99), nothing else
    (found,) = groups.find(bundle)
    assert found == groups.FeatureGroup("Charge and bill", ("Charge", "Bill"), True)
    settings = explain.Settings(baseline="mean", steps=4)
    a = explain.explain_customers(bundle, ["G0"], settings)
    story = words.story(a, bundle, 0, "G0", settings=settings, groups=groups.of(bundle))
    assert story.headline.count("charge and bill, which move together: charge is 95 USD") == 1, story.headline
    assert "Together with bill (they move together): raises the risk by" in story.reasons[0]
    alone = words.story(a, bundle, 0, "G0", settings=settings, groups=())  # no groups: each feature its own reason
    assert alone.groups == [] and "move together" not in alone.text() and "Together with" not in alone.text()
    assert re.search(r"charge is 95 USD \(the average customer: \d+ USD\), raising the risk by", alone.headline)
    uncorrelated = _grouped_bundle()
    static = uncorrelated.static.copy()
    static[:, 2] = np.random.default_rng(9).permutation(static[:, 2])  # bill shuffled: no partner left
    plain = explain.Bundle.from_objects(uncorrelated.model, static, uncorrelated.temporal,
                                        static_features=["Tenure", "Charge", "Bill"], temporal_features=["Calls"])
    assert groups.find(plain) == ()


def test_grouped_sums_members_only_when_two_or_more_push_the_same_way():
    from explain.analysis.groups import FeatureGroup

    d = lambda label, effect: words.Driver(label, effect, 1.0, 0.0, column=label.lower())  # noqa: E731
    found = [d("A", 0.3), d("B", 0.2), d("C", -0.15), d("D", 0.1), d("E", 0.05)]
    both = FeatureGroup("AB", ("a", "b"), True)
    mixed = FeatureGroup("CD", ("c", "d"), True)
    lonely = FeatureGroup("EZ", ("e", "z"), False)  # z has no effect: E is said alone
    items = words.grouped(found, [both, mixed, lonely])
    assert [getattr(i, "label") for i in items] == ["AB", "C", "D", "E"]
    assert items[0].effect == 0.3 + 0.2 and [m.label for m in items[0].members] == ["A", "B"]
    lines = words.reasons_of(items, "the average customer", limit=2)
    assert len(lines) == 3 and lines[2].startswith("C is 1 ")  # the group counts as one reason, its members listed
    assert lines[0].endswith("Together with B (they move together): raises the risk by 0.50.")


@pytest.mark.parametrize("score, gap, reference, probability, said", [
    (0.99, 0.93, "the average customer", True, "higher than for the average customer (6 %)"),
    (0.58, -0.22, "the average customer", True, "lower than for the average customer (80 %)"),
    (0.4, 0.1, "zero", True, "higher than for a customer with every value at 0 (30 %)"),
    (4.34, 7.16, "customer C00012", False, "higher than for customer C00012 (-2.82)"),
])
def test_the_first_sentence_says_which_way_the_score_differs_from_whom(score, gap, reference, probability, said):
    assert words.compared_with(score - gap, gap, reference, probability) == said
    sentence = words.why_sentence("C1", score, "churn", [], reference=reference, gap=gap,
                                  space="output" if probability else "logit")
    assert sentence.endswith(f": {said}.")
