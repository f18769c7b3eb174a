"""Champion against challenger (explain.analysis.models): the demo model against itself agrees exactly; a
challenger whose static branch is cut is found out ("no longer matters"); the numbers against references
computed here (shares from the engine's attributions, disagreements from the model's own scores, tau-b by
counting pairs, the top-3 overlap by sets); the bootstrap is seeded; a challenger that reads other inputs is
refused with a message that says what differs."""

import itertools

import keras
import numpy as np
import pytest

from explain.analysis import models
from explain.analysis.cohort import sample_ids
from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core.errors import ExplainError
from explain.core.settings import Settings

SETTINGS = Settings(steps=16)
CUSTOMERS = 40


@pytest.fixture(scope="module")
def demo(bundle_dir):
    return load_bundle(bundle_dir)


def twin(model):
    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    return copy


def cut_static(model):
    """The demo model with its static branch cut: the Dense layer reading the static input has zero weights."""
    copy = twin(model)
    layer = copy.get_layer("static_dense")
    layer.set_weights([np.zeros_like(w) for w in layer.get_weights()])
    return copy


@pytest.fixture(scope="module")
def cut_result(demo):
    return models.compare_models(demo, cut_static(demo.model), customers=CUSTOMERS, settings=SETTINGS)


def test_the_demo_model_against_itself_agrees_exactly(demo):
    result = models.compare_models(demo, twin(demo.model), customers=CUSTOMERS, settings=SETTINGS)
    assert result.kendall_tau.value >= 0.99 and result.kendall_tau.low >= 0.99
    assert result.disagreements == ()
    assert max(abs(c.change) for c in result.changed) < 1e-6
    assert result.top3_overlap.all_three == 1.0
    assert "agree on the order of the drivers" in result.sentence and "do not agree" not in result.sentence
    assert np.allclose(result.champion_scores, result.challenger_scores, atol=1e-6)


def test_a_cut_static_branch_is_found_and_said_in_words(demo, cut_result):
    result = cut_result
    assert result.kendall_tau.value <= 0.8
    static = {r.feature.name for r in result.champion_ranking if r.feature.role == "static"}
    assert {r.feature.name for r in result.challenger_ranking if r.share == 0.0} == static  # exactly no effect
    top = result.changed[:3]
    said = [c for c in top if c.feature.name in static]
    assert said, [c.words for c in top]
    assert all(" no longer matter" in c.words and c.words.endswith("-> 0 %") for c in said)
    assert said[0].words in result.sentence
    assert "do not agree on the order of the drivers" in result.sentence


def test_shares_and_disagreements_match_references_computed_here(demo, cut_result):
    result, ids = cut_result, sample_ids(demo, str(CUSTOMERS), 0)
    assert list(result.customers) == ids
    attribution = explain_customers(demo, ids, SETTINGS)
    per_feature = np.concatenate([attribution.static, attribution.temporal.sum(axis=1)], axis=1)  # (n, S + F)
    mean_abs = np.abs(per_feature).mean(axis=0)
    names = list(demo.static_features) + list(demo.temporal_features)
    expected = dict(zip(names, mean_abs / mean_abs.sum()))
    assert {r.feature.name: r.share for r in result.champion_ranking} == pytest.approx(expected, abs=1e-9)
    assert [r.feature.name for r in result.champion_ranking] == sorted(names, key=lambda f: -expected[f])
    # disagreements: from the two models' own scores, not from the attributions
    inputs = demo.inputs_for(ids)
    first = demo.model.predict(demo.model_inputs(inputs), verbose=0)[:, 0]
    second = cut_static(demo.model).predict(demo.model_inputs(inputs), verbose=0)[:, 0]
    flagged = {i for i, a, b in zip(ids, first, second) if (a >= 0.5) != (b >= 0.5)}
    assert flagged and {d.customer for d in result.disagreements} == flagged
    for d in result.disagreements:
        assert d.flagged_by == ("champion" if d.champion_score >= 0.5 else "challenger")
        assert len(d.champion_reasons) == 3 and not any(r.label in {demo.static_labels[0]}
                                                        for r in d.challenger_reasons)
    row = ids.index(result.disagreements[0].customer)
    top = np.argsort(-np.abs(per_feature[row]))[:3]
    labels = dict(zip(names, list(demo.static_labels) + list(demo.temporal_labels)))
    assert [r.label for r in result.disagreements[0].champion_reasons] == [labels[names[j]] for j in top]
    assert [r.attribution for r in result.disagreements[0].champion_reasons] == pytest.approx(per_feature[row, top])


def brute_tau_b(x, y):
    concordant = discordant = tied_x = tied_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        tied_x += dx == 0
        tied_y += dy == 0
        if dx * dy > 0:
            concordant += 1
        elif dx * dy < 0:
            discordant += 1
    pairs = len(x) * (len(x) - 1) // 2
    return (concordant - discordant) / np.sqrt((pairs - tied_x) * (pairs - tied_y))


@pytest.mark.parametrize("x, y", [
    ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
    ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]),
    ([0.3, 0.1, 0.0, 0.0, 0.9, 0.2], [0.0, 0.0, 0.0, 0.4, 0.5, 0.1]),  # ties in both, as a cut branch makes
    (list(np.random.default_rng(3).integers(0, 4, 30)), list(np.random.default_rng(4).integers(0, 5, 30))),
])
def test_tau_b_against_counting_pairs(x, y):
    assert models.kendall_tau_b(x, y) == pytest.approx(brute_tau_b(x, y), abs=1e-12)
    stats = pytest.importorskip("scipy.stats")
    assert models.kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y, variant="b").statistic, abs=1e-12)


def test_tau_b_of_a_constant_vector_is_undefined():
    assert np.isnan(models.kendall_tau_b([1, 1, 1], [1, 2, 3]))


def test_the_bootstrap_is_seeded_and_its_interval_holds_the_value(cut_result):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(50, 8)) * np.arange(1, 9)
    b = a * rng.uniform(0.5, 1.5, size=8) + rng.normal(scale=2, size=(50, 8))
    first, again = models.bootstrap_tau(a, b, seed=7), models.bootstrap_tau(a, b, seed=7)
    assert first == again
    assert models.bootstrap_tau(a, b, seed=8) != first
    assert first.low <= first.value <= first.high and first.low < first.high
    # the interval: percentiles of tau over resampled customers, recomputed here
    picks = np.random.default_rng(7).integers(50, size=(models.RESAMPLES, 50))
    taus = [brute_tau_b(np.abs(a[r]).mean(0), np.abs(b[r]).mean(0)) for r in picks]
    assert (first.low, first.high) == pytest.approx(tuple(np.percentile(taus, [2.5, 97.5])), abs=1e-12)
    tau = cut_result.kendall_tau
    assert tau.low <= tau.value <= tau.high


def test_top3_overlap_by_sets():
    a = np.array([[5.0, -4, 3, 0, 0], [1, 2, 3, 4, 5], [0, 0, 0, 0, 1]])
    b = np.array([[5.0, 0, -3, 4, 0], [5, 4, 3, 2, 1], [0, 0, 0, 0, 1]])
    overlap = models.top_overlap(a, b)
    # customer 1: {0,1,2} vs {0,3,2}: 2; customer 2: {4,3,2} vs {0,1,2}: 1; customer 3: {4} vs {4}: 1
    assert overlap.mean == pytest.approx(4 / 3)
    assert overlap.at_least_two == pytest.approx(1 / 3) and overlap.all_three == 0.0


def test_a_challenger_with_another_input_shape_is_refused(demo):
    static = keras.Input(shape=(8,), name="static")
    temporal = keras.Input(shape=(12, 6), name="temporal")
    out = keras.layers.Dense(1, activation="sigmoid")(
        keras.layers.Concatenate()([static, keras.layers.Flatten()(temporal)]))
    other = keras.Model({"static": static, "temporal": temporal}, out)
    with pytest.raises(ExplainError, match="does not take the inputs of the bundle's model") as error:
        models.compare_models(demo, other, customers=5, settings=SETTINGS, name="new.keras")
    assert "new.keras" in str(error.value) and "shape (None, 8), the bundle's model (None, 9)" in str(error.value)


def test_a_challenger_with_another_output_is_refused(demo):
    static, temporal = keras.Input(shape=(9,)), keras.Input(shape=(12, 6))
    out = keras.layers.Dense(3, activation="softmax")(
        keras.layers.Concatenate()([static, keras.layers.Flatten()(temporal)]))
    with pytest.raises(ExplainError, match=r"its output has shape \(None, 3\)"):
        models.check_challenger(demo, keras.Model([static, temporal], out))


@pytest.mark.parametrize("options, message", [
    ({"customers": 1}, "customers=1 must be a whole number of at least 2"),
    ({"customers": "ten"}, "customers='ten' must be"),
    ({"threshold": "high"}, "threshold='high' must be a finite number"),
])
def test_bad_options_are_refused(demo, options, message):
    with pytest.raises(ExplainError, match=message):
        models.compare_models(demo, demo.model, settings=SETTINGS, **options)


def test_json_holds_the_contracts_keys(cut_result):
    doc = cut_result.to_dict()
    assert {"kendall_tau", "changed", "disagreements", "champion_ranking", "challenger_ranking", "customers",
            "top3_overlap", "settings", "sentence"} <= set(doc)
    assert set(doc["kendall_tau"]) >= {"value", "low", "high"}
    assert all(set(c) >= {"feature", "champion_share", "challenger_share"} for c in doc["changed"])
    changes = [abs(c["challenger_share"] - c["champion_share"]) for c in doc["changed"]]
    assert changes == sorted(changes, reverse=True)
    assert doc["customers"] == CUSTOMERS and doc["settings"]["steps"] == 16


def test_a_padded_model_unlike_the_demo(tmp_path):
    """Masking(0) + LSTM over 64 weeks, short histories padded: the padded weeks count in no mean; a challenger
    whose history weights swap support and usage is said to lean on usage instead."""
    from tests.support import padded

    bundle = load_bundle(padded.write(tmp_path / "padded"))
    itself = models.compare_models(bundle, padded.model(), customers=30, settings=SETTINGS)
    assert itself.kendall_tau.value == 1.0 and itself.disagreements == ()
    swapped = padded.model()
    lstm = swapped.get_layer("memory")
    kernel, recurrent, bias = lstm.get_weights()
    kernel[:, 2] = [padded.W_USAGE, padded.W_SUPPORT, 0.0]
    lstm.set_weights([kernel, recurrent, bias])
    result = models.compare_models(bundle, swapped, customers=30, settings=SETTINGS)
    ids = list(result.customers)
    other = models.challenger_bundle(bundle, swapped)
    attribution = explain_customers(other, ids, SETTINGS, baseline=explain_customers(bundle, ids, SETTINGS).baselines)
    pad = attribution.padding["temporal"]  # (n, T) True at padded weeks
    assert pad.any()
    history = np.where(pad[:, :, None], 0.0, attribution.temporal).sum(axis=1)  # (n, F): real weeks only
    per_feature = np.concatenate([attribution.static, history], axis=1)
    mean_abs = np.abs(per_feature).mean(axis=0)
    names = padded.STATIC + padded.TEMPORAL
    assert {r.feature.name: r.share for r in result.challenger_ranking} == pytest.approx(
        dict(zip(names, mean_abs / mean_abs.sum())), abs=1e-9)
    shares = {c.feature.name: c for c in result.changed}
    assert shares["usage"].challenger_share > shares["usage"].champion_share
    assert shares["support"].challenger_share < shares["support"].champion_share
    assert shares[padded.IGNORED].champion_share == shares[padded.IGNORED].challenger_share == 0.0
    assert result.changed[0].feature.name in {"support", "usage"} and " matter" in result.changed[0].words
