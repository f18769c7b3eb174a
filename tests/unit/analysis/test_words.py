"""The sentence that says why (explain.analysis.words), on a model whose attributions are known exactly."""

import keras
import numpy as np

import explain
from explain.analysis import words

T, F, S = 6, 2, 2


def _bundle():
    s_in, t_in = keras.Input((S,), name="account"), keras.Input((T, F), name="usage")
    out = keras.layers.Dense(1, name="lin")(keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)]))
    model = keras.Model([s_in, t_in], out)
    w = np.zeros((S + T * F, 1), "float32")
    w[0] = 0.1          # tenure: a small effect
    w[S + 4 * F] = 1.0  # calls, period 5
    w[S + 5 * F] = 1.0  # calls, period 6
    model.get_layer("lin").set_weights([w, np.zeros(1, "float32")])
    static = np.array([[6.0, 1.0], [30.0, 1.0], [30.0, 1.0]], "float32")
    temporal = np.zeros((3, T, F), "float32")
    temporal[0, 4:, 0] = 6.0  # customer 0: calls rose to 6 in the last two periods
    temporal[1:, :, 0] = 1.0
    return explain.Bundle.from_objects(model, static, temporal, ids=["A", "B", "C"],
                                       static_features=["Tenure", "Plan"], temporal_features=["Calls", "Data"],
                                       periods=[f"2025-0{m}" for m in range(1, 7)], units={"Tenure": "months"})


def test_drivers_carry_the_window_the_value_and_the_usual_value():
    bundle = _bundle()
    a = explain.explain_customers(bundle, ["A"], explain.Settings(baseline="zero", steps=2))
    values = {k: v[0] for k, v in bundle.inputs_for(["A"]).items()}
    zero = {"static": np.zeros(S), "temporal": np.zeros((T, F))}
    found = words.drivers_of(a, bundle, 0, values, zero)
    assert [d.label for d in found] == ["Calls", "Tenure"]  # Plan and Data have no effect: not reasons
    calls, tenure = found
    assert calls.periods == ("2025-05", "2025-06") and calls.value == 6.0 and calls.usual == 0.0
    np.testing.assert_allclose(calls.effect, 12.0, rtol=1e-5)  # (6 - 0) * 1 in two periods
    np.testing.assert_allclose(tenure.effect, 0.6, rtol=1e-5)
    text = words.why_sentence("A", 0.93, "churn", found, base_rate="26 % of customers churn")
    assert text == ("A is 93 % likely to churn (26 % of customers churn), mainly because calls rose to 6 in "
                    "2025-05 to 2025-06 (usually 0); a tenure of 6 months (usually 0) adds a little.")


def test_only_drivers_that_push_the_way_the_score_moved():
    bundle = _bundle()
    mean = {"static": bundle.static.mean(0), "temporal": bundle.temporal.mean(0)}
    a = explain.integrated_gradients(bundle.model, bundle.inputs_for(["B"]),
                                     {k: v[None] for k, v in mean.items()}, steps=2)
    values = {k: v[0] for k, v in bundle.inputs_for(["B"]).items()}
    found = words.drivers_of(a, bundle, 0, values, mean)
    gap = float(a.prediction[0] - a.baseline_prediction[0])
    assert gap < 0 and found and all(d.effect < 0 for d in found)
    assert "fell to 1" in words.why_sentence("B", -2.0, "churn", found, space="logit")


def test_a_score_outside_0_1_is_not_a_percentage():
    assert words.why_sentence("X", 3.2, "churn", [], space="logit") == "X scores 3.20 for churn (logit)."
