"""What-if scenarios (explain/analysis/whatif.py) and the counterfactual search (explain/analysis/counterfactual.py),
on small models whose answers are known and on the demo bundle."""

import keras
import numpy as np
import pytest

from explain.analysis import counterfactual, whatif
from explain.analysis.whatif import Edit, Scenario, ScenarioError
from explain.bundle.load import Bundle, load_bundle
from explain.core.errors import ExplainError
from explain.core.settings import Settings
from tests.support.apptest import DEMO
from tests.support.models import F, S, T, linear_model

MEAN = Settings(baseline="mean", steps=32)


def small_bundle(model, seed=3, n=40):
    """An in-memory bundle; static feature 4 takes only the values 0 and 1 (a category)."""
    rng = np.random.default_rng(seed)
    static = rng.normal(size=(n, S))
    static[:, 4] = rng.integers(0, 2, size=n)
    temporal = rng.normal(size=(n, T, F))
    bundle = Bundle.from_arrays(model, static, temporal, ids=[f"K{i:02d}" for i in range(n)])
    labels = np.array([i % 2 for i in range(n)])
    return Bundle(**{**{k: getattr(bundle, k) for k in bundle.__dataclass_fields__ if k != "_positions"},
                     "labels": labels, "label_name": "left"})


def sigmoid_linear(ws, wt, bias):
    """p = sigmoid(s . ws + sum(t * wt) + bias): for it, IG ranks edits exactly like the logit change."""
    s_in, t_in = keras.Input((S,)), keras.Input((T, F))
    d_s, d_t = keras.layers.Dense(1), keras.layers.Dense(1, use_bias=False)
    out = keras.layers.Activation("sigmoid")(keras.layers.Add()([d_s(s_in), d_t(keras.layers.Flatten()(t_in))]))
    model = keras.Model([s_in, t_in], out)
    d_s.set_weights([np.asarray(ws, np.float32)[:, None], np.array([bias], np.float32)])
    d_t.set_weights([np.asarray(wt, np.float32).reshape(-1, 1)])
    return model


@pytest.fixture(scope="module")
def linear():
    model, ws, wt = linear_model(seed=4)
    return small_bundle(model), ws, wt


# ----------------------------------------------------------------------------- the URL form


def test_every_kind_of_edit_round_trips_through_its_url_form(linear):
    bundle, _, _ = linear
    scenario = Scenario((
        Edit("static", 0, "set", float(np.round(bundle.static[3, 0], 3))), Edit("static", 4, "set", 1.0),
        Edit("static", 1, "baseline"), Edit("static", 2, "median", cohort="1"), Edit("static", 3, "scale", 0.5),
        Edit("temporal", 1, "baseline", periods=(3, 5)), Edit("temporal", 0, "median", periods=(0, 0)),
        Edit("temporal", 2, "scale", 1.5, (4, 5)), Edit("temporal", 2, "set", float(bundle.temporal[0, 0, 2]), (2, 2)),
    ))
    text = scenario.text()
    assert "," in text and " " not in text
    back = whatif.parse_scenario(text, bundle)
    assert [e.text() for e in back.edits] == [e.text() for e in scenario.edits]
    for got, want in zip(back.edits, scenario.edits):
        assert (got.role, got.feature, got.kind, got.periods, got.cohort) == \
            (want.role, want.feature, want.kind, want.periods, want.cohort)
        if want.value is not None:
            assert got.value == pytest.approx(want.value, rel=1e-6)
    assert whatif.parse_scenario("", bundle) == Scenario()


@pytest.mark.parametrize("text, fragment", [
    ("x0=1", "is not of the form"),
    ("s9=0", whatif.UNKNOWN_FEATURE.format(role="static", index=9, count=S, first=0, last=S - 1)),
    ("t1=0", "without its periods"),
    ("t1@4-2=b", whatif.BAD_PERIODS.format(a=4, b=2, last=T - 1)),
    ("t1@0-6=b", whatif.BAD_PERIODS.format(a=0, b=6, last=T - 1)),
    ("s0@1=0", "gives periods for a static feature"),
    ("s0=99", "outside the range observed in the data"),
    ("s4=0.5", "not one of the values observed in the data (0, 1)"),
    ("s4*2", "a feature with a few observed values (0, 1)"),
    ("t0@0*-1", whatif.BAD_SCALE.format(k="-1")),
    ("t0@0*nan", whatif.BAD_SCALE.format(k="nan")),
    ("t0@0=inf", "does not give a number"),
    ("s0=med:7", whatif.UNKNOWN_COHORT.format(label="left", value="7")),
    (",".join(["s0=b"] * (whatif.MAX_EDITS + 1)), whatif.TOO_MANY.format(count=whatif.MAX_EDITS + 1)),
])
def test_a_bad_scenario_is_refused_with_a_message_naming_it(linear, text, fragment):
    bundle, _, _ = linear
    with pytest.raises(ScenarioError) as info:
        whatif.parse_scenario(text, bundle)
    message = str(info.value)
    assert fragment in message
    assert message.startswith("The what-if scenario ") and (text[:40] in message)


# ----------------------------------------------------------------------------- applying


def test_each_edit_changes_exactly_its_cells_to_the_expected_values(linear):
    bundle, _, _ = linear
    ctx = whatif.context(bundle, "K05", MEAN)
    x_s, x_t = bundle.static[5].astype(float), bundle.temporal[5].astype(float)
    low, high = bundle.temporal[:, :, 2].min(), bundle.temporal[:, :, 2].max()
    scenario = whatif.parse_scenario("s0=b,t1@2-4=med,t2@0-5*3,t0@5=0.25,s2=med:1", bundle)
    inputs, notes = whatif.apply(ctx, scenario)
    want_s, want_t = x_s.copy(), x_t.copy()
    want_s[0] = bundle.static[:, 0].mean()
    want_t[2:5, 1] = np.median(bundle.temporal[:, 2:5, 1], axis=0)
    want_t[:, 2] = np.clip(x_t[:, 2] * 3, low, high)
    want_t[5, 0] = 0.25
    want_s[2] = np.median(bundle.static[bundle.labels == 1, 2])
    np.testing.assert_allclose(inputs["static"][0], want_s, rtol=0, atol=1e-6)
    np.testing.assert_allclose(inputs["temporal"][0], want_t, rtol=0, atol=1e-6)
    clipped = np.any(x_t[:, 2] * 3 > high) or np.any(x_t[:, 2] * 3 < low)
    assert clipped == any("moved into its range" in n for n in notes)
    cells = whatif.edited_cells(ctx, inputs)
    assert cells["static"].tolist() == [not np.isclose(a, b) for a, b in zip(want_s, x_s)]


def test_a_category_set_to_a_mean_baseline_moves_to_the_nearest_observed_value(linear):
    bundle, _, _ = linear
    ctx = whatif.context(bundle, "K05", MEAN)
    inputs, notes = whatif.apply(ctx, whatif.parse_scenario("s4=b", bundle))
    mean = bundle.static[:, 4].mean()
    assert inputs["static"][0, 4] == (1.0 if mean >= 0.5 else 0.0)
    assert notes and "observed values" in notes[0]


def test_the_edited_customer_gets_exact_linear_attributions(linear):
    bundle, ws, wt = linear
    ctx = whatif.context(bundle, "K07", MEAN)
    outcome = whatif.evaluate(ctx, whatif.parse_scenario("s1=b,t2@1-3=med,s3*0.5", bundle))
    a = outcome.attribution
    mean_s, mean_t = bundle.static.astype(float).mean(0), bundle.temporal.astype(float).mean((0, 1))
    for row, inputs in ((0, bundle.inputs_for(["K07"])), (1, outcome.inputs)):
        x_s, x_t = inputs["static"][0].astype(float), inputs["temporal"][0].astype(float)
        np.testing.assert_allclose(a.static[row], (x_s - mean_s) * ws, atol=1e-5)
        np.testing.assert_allclose(a.temporal[row], (x_t - mean_t) * wt, atol=1e-5)
    change_s = outcome.inputs["static"][0] - bundle.static[7]
    change_t = outcome.inputs["temporal"][0] - bundle.temporal[7]
    assert outcome.change == pytest.approx(float(change_s @ ws + (change_t * wt).sum()), abs=1e-5)
    np.testing.assert_allclose(a.static[1] - a.static[0], change_s * ws, atol=1e-5)  # the difference heatmap's input


# ----------------------------------------------------------------------------- the search: known answers


def test_the_search_finds_the_one_static_edit_that_crosses(linear):
    bundle, _, _ = linear
    row = int(np.flatnonzero(bundle.static[:, 4] == 1)[0])
    ws = np.array([0.1, -0.1, 0.1, 0.05, 6.0])  # only the category feature 4 matters
    model = sigmoid_linear(ws, np.zeros((T, F)), bias=-3.0)
    b = small_bundle(model)
    cid = str(b.ids[row])
    ctx = whatif.context(b, cid, MEAN)
    result = counterfactual.search(ctx, threshold=0.5)
    assert result.reached and result.original_prediction > 0.9
    assert [e.text() for e in result.scenario.edits] == ["s4=0"]
    x = b.static[row].astype(float).copy()
    x[4] = 0
    logit = x @ ws - 3.0
    assert result.prediction == pytest.approx(1 / (1 + np.exp(-logit)), abs=1e-5)
    assert "not what the customer will do" in result.caution


def test_the_search_finds_the_two_month_window_that_crosses():
    wt = np.zeros((T, F))
    wt[4, 1] = wt[5, 1] = 2.0
    model = sigmoid_linear(np.full(S, 0.01), wt, bias=-4.0)
    bundle = small_bundle(model)
    temporal = np.asarray(bundle.temporal).copy()
    temporal[0, 4:6, 1] = 3.0  # +6 each in the logit: one month at the baseline leaves 2, both leave -4
    bundle = Bundle(**{**{k: getattr(bundle, k) for k in bundle.__dataclass_fields__ if k != "_positions"},
                       "temporal": temporal.astype(np.float32)})
    ctx = whatif.context(bundle, "K00", MEAN)
    result = counterfactual.search(ctx, threshold=0.5)
    assert result.reached
    (edit,) = result.scenario.edits
    assert (edit.role, edit.feature, edit.periods) == ("temporal", 1, (4, 5)) and edit.kind in ("baseline", "median")

    locked = counterfactual.search(ctx, threshold=0.5, locked=["temporal_1"])  # the only feature that matters
    assert not locked.reached and all(e.feature != 1 or e.role != "temporal" for e in locked.scenario.edits)
    assert locked.prediction > 0.5 and locked.stopped
    with pytest.raises(ExplainError, match="Cannot lock 'nope'"):
        counterfactual.search(ctx, locked=["nope"])


def test_the_search_evaluates_candidates_in_batches_and_keeps_its_bounds(monkeypatch):
    wt = np.random.default_rng(0).normal(size=(T, F))
    bundle = small_bundle(sigmoid_linear(np.random.default_rng(1).normal(size=S), wt, bias=2.0))
    ctx = whatif.context(bundle, "K03", MEAN)
    calls = []
    predict = counterfactual.predict
    monkeypatch.setattr(counterfactual, "predict",
                        lambda b, s, t, target, **kw: calls.append(len(s)) or predict(b, s, t, target, **kw))
    result = counterfactual.search(ctx, threshold=0.05, max_edits=2)
    assert len(result.scenario.edits) <= 2 and result.rounds <= 2
    assert sum(calls) == result.evaluated + 1 and len(calls) <= 3 * result.rounds + 2  # not one call per candidate
    assert max(calls) > 20
    inputs, _ = whatif.apply(ctx, result.scenario)
    observed = whatif.Observed.of(bundle)
    assert np.all(inputs["static"][0] >= observed.static_min - 1e-6)
    assert np.all(inputs["static"][0] <= observed.static_max + 1e-6)
    assert np.all(inputs["temporal"][0] >= observed.temporal_min - 1e-6)
    assert np.all(inputs["temporal"][0] <= observed.temporal_max + 1e-6)

    quick = counterfactual.search(ctx, threshold=0.05, time_limit=1e-9)
    assert quick.rounds == 0 and not quick.scenario and "time limit" in quick.stopped
    for bad, message in (({"threshold": 1.5}, "between 0 and 1"), ({"max_edits": 0}, "max_edits=0")):
        with pytest.raises(ExplainError, match=message):
            counterfactual.search(ctx, **bad)


def test_padded_months_are_never_edited_and_do_not_count_in_the_ranges():
    keras.utils.set_random_seed(2)
    s_in, t_in = keras.Input((S,)), keras.Input((T, F))
    h = keras.layers.LSTM(4)(keras.layers.Masking(mask_value=0.0)(t_in))
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Concatenate()([h, keras.layers.Dense(2)(s_in)]))
    model = keras.Model([s_in, t_in], out)
    rng = np.random.default_rng(5)
    temporal = 5 + rng.normal(size=(30, T, F))
    temporal[:10, :3] = 0.0  # the first ten customers have three months of padding
    bundle = Bundle.from_arrays(model, rng.normal(size=(30, S)), temporal)
    observed = whatif.Observed.of(bundle)
    assert observed.mask_value == 0.0 and observed.temporal_min.min() > 0.5
    ctx = whatif.context(bundle, "0", MEAN)
    assert ctx.padded.tolist() == [True] * 3 + [False] * (T - 3)
    with pytest.raises(ScenarioError, match="which is padding"):
        whatif.apply(ctx, whatif.parse_scenario("t0@2-3=b", bundle))
    p = float(whatif.predict(bundle, bundle.static[:1], bundle.temporal[:1], 0)[0])
    result = counterfactual.search(ctx, threshold=max(0.01, p - 0.05), max_edits=3)
    assert result.evaluated > 0
    for edit in result.scenario.edits:
        assert edit.role == "static" or edit.periods[0] >= 3


# ----------------------------------------------------------------------------- the demo


@pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")
def test_on_the_demo_the_search_brings_a_high_risk_customer_below_one_half():
    bundle = load_bundle(DEMO)
    scores = bundle.predict()[:, 0]
    cid = str(bundle.ids[int(np.argmax(scores))])
    ctx = whatif.context(bundle, cid, Settings())
    # the time limit is wall time (and, on JAX, compiles): this test is about what the search finds, not how fast
    # (tests/unit/analysis/test_whatif_size.py holds the limit), so a loaded machine must not stop it early
    result = counterfactual.search(ctx, threshold=0.5, locked=["contract_month_to_month"], max_edits=3, time_limit=120)
    assert result.reached and len(result.scenario.edits) <= 3
    assert all(not (e.role == "static" and e.feature == 1) for e in result.scenario.edits)
    edited = whatif.parse_scenario(result.scenario.text(), bundle)  # the URL form reopens the same result
    inputs, _ = whatif.apply(ctx, edited)
    assert float(bundle.predict(inputs)[0, 0]) == pytest.approx(result.prediction, abs=1e-4)
    assert float(bundle.predict(inputs)[0, 0]) < 0.5 <= scores.max()
    outcome = whatif.evaluate(ctx, edited)
    assert outcome.predictions[0] == pytest.approx(float(scores.max()), abs=1e-5)
    assert np.all(np.abs(outcome.attribution.delta) < 0.01)


def test_the_download_holds_both_rows_with_the_edited_values_and_the_scenario(linear):
    import json

    from explain.analysis import report

    bundle, _, _ = linear
    ctx = whatif.context(bundle, "K02", MEAN)
    outcome = whatif.evaluate(ctx, whatif.parse_scenario("s0=b,t1@3-5=med", bundle))
    data = json.loads(whatif.report_json(bundle, "K02", outcome, MEAN))
    original, edited = data["customers"]
    assert [original["id"], edited["id"]] == whatif.scenario_ids("K02")
    np.testing.assert_allclose(edited["temporal"]["inputs"], outcome.inputs["temporal"][0], atol=1e-6)
    np.testing.assert_allclose(original["static"]["inputs"], bundle.static[2], atol=1e-6)
    np.testing.assert_allclose(edited["temporal"]["values"], outcome.attribution.temporal[1], atol=1e-12)
    assert data["scenario"]["whatif"] == "s0=b,t1@3-5=med"
    assert data["scenario"]["prediction_change"] == pytest.approx(outcome.change)
    assert "(the customer has " in data["scenario"]["edits"][0]
    frame = report.long_frame(outcome.attribution, whatif.report_bundle(bundle, "K02", outcome),
                              whatif.scenario_ids("K02"))
    assert frame["customer_id"].nunique() == 2 and len(frame) == 2 * (S + T * F)


def test_an_empty_scenario_gives_two_identical_rows(linear):
    bundle, _, _ = linear
    outcome = whatif.evaluate(whatif.context(bundle, "K01", MEAN), Scenario())
    a = outcome.attribution
    assert outcome.change == 0 and np.array_equal(a.temporal[0], a.temporal[1])
    assert np.array_equal(a.static[0], a.static[1]) and not outcome.edited["temporal"].any()


def test_typed_values_replace_earlier_ones_of_the_same_input(linear):
    bundle, _, _ = linear
    ctx = whatif.context(bundle, "K04", MEAN)
    x = float(bundle.static[4, 0])
    scenario = whatif.parse_scenario("s0=b,t1@2-4=b", bundle)
    typed = scenario.with_value("temporal", 1, 0.5, period=3).with_value("temporal", 1, 0.25, period=3)
    assert typed.text() == "s0=b,t1@2-4=b,t1@3=0.25"  # the cell's last value wins, after the window
    inputs, _ = whatif.apply(ctx, typed)
    assert inputs["temporal"][0, 3, 1] == 0.25
    assert inputs["temporal"][0, 2, 1] == pytest.approx(ctx.baseline["temporal"][2, 1])
    assert typed.with_value("static", 0, 0.125).text() == "t1@2-4=b,t1@3=0.25,s0=0.125"
    assert typed.with_value("static", 0, x, original=x).text() == "t1@2-4=b,t1@3=0.25"  # back to the customer's


def test_an_edit_in_words_rounds_to_what_a_reader_can_tell_apart_and_its_url_form_stays_exact(linear):
    bundle = linear[0]
    values = {"static": np.array([1.684482, 0.0, 0.0, 12345.678, 1.0] + [0.0] * (S - 5)),
              "temporal": np.full((T, F), 1.6845)}
    edit = Edit("static", 0, "set", -1.658971)
    assert edit.describe(bundle, values).endswith(": set to -1.66 (the customer has 1.68)")
    assert edit.text() == "s0=-1.658971"  # the link keeps every digit
    assert edit.describe(bundle, None).endswith(": set to -1.66")
    assert Edit("static", 3, "set", 12000.0).describe(bundle, values).endswith("set to 12000 (the customer has 12346)")
    assert Edit("static", 4, "set", 0.0).describe(bundle, values).endswith("set to 0 (the customer has 1)")
    # values that 3 digits would show as equal get the digits that tell them apart
    near = Edit("temporal", 0, "set", 1.6849, periods=(0, 0)).describe(bundle, values)
    assert near.endswith("set to 1.6849 (the customer has 1.6845)")
    scaled = Edit("static", 0, "scale", 1.5).describe(bundle, values)
    assert scaled.endswith("multiplied by 1.5 (the customer has 1.68)")
