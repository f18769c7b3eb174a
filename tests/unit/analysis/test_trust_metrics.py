"""Trust metrics on models whose correct attributions are known: a linear model (exact IG (x - b) * w: CPD,
CPP, comprehensiveness and sufficiency by hand from the known ranking, infidelity 0, sensitivity-max
|delta| * |w|), a model that reads one feature only (AUP = AUR = 1 when it is planted), the bundle.json
'planted' key, the seeded random orders, the command line on 100 demo customers and the two pages."""

import json
from pathlib import Path

import numpy as np
import pytest

import explain
from explain.analysis import faithfulness as fa
from explain.analysis import trust_metrics as tm
from explain.bundle.load import BundleError, load_bundle
from explain.cli import main
from explain.core.errors import ExplainError
from explain.core.settings import Settings
from tests.support.models import F, S, T, data, linear_model

DEMO = Path(__file__).resolve().parents[3] / "bundles" / "demo"
CELLS = S + T * F
SETTINGS = Settings(baseline=None, steps=4)


@pytest.fixture(scope="module")
def linear():
    model, ws, wt = linear_model(seed=11)
    rng = np.random.default_rng(2)
    x = data(10)
    b = {"static": rng.normal(size=(1, S)), "temporal": rng.normal(size=(1, T, F))}
    w = np.concatenate([ws, wt.ravel()])
    problem = fa.trust_problem(model, x, b, SETTINGS)
    exact = (problem.x - problem.b) * w  # the exact IG of a linear model, flattened
    return problem, exact, w, model


# ----------------------------------------------------------------------------- linear model: ranking metrics


def test_ranking_metrics_of_exact_ig_equal_the_hand_computed_sums(linear):
    problem, a, _, _ = linear
    options = tm.Options(ranks=7, fractions=(0.05, 0.2, 0.5))
    got = tm.ranking_metrics(problem, np.abs(a), options)
    order = np.argsort(-np.abs(a), axis=1)
    ranked = np.take_along_axis(a, order, axis=1)  # (n, D): the contributions, largest |.| first
    # removing cell j moves a linear model by exactly a_j: each step of CPD is one |a|
    assert got["cpd"] == pytest.approx(np.abs(ranked[:, :7]).sum(axis=1).mean(), rel=1e-4)
    assert got["cpp"] == pytest.approx(np.abs(ranked[:, ::-1][:, :7]).sum(axis=1).mean(), rel=1e-4)
    sign = np.sign(a.sum(axis=1))  # f(x) - f(b) = sum of a
    comp, suff = [], []
    for q in (0.05, 0.2, 0.5):
        k = max(1, round(q * CELLS))
        comp.append(sign * ranked[:, :k].sum(axis=1))  # f(x) - f(x without the top k)
        suff.append(sign * ranked[:, k:].sum(axis=1))  # f(x) - f(only the top k kept)
    assert got["comprehensiveness"] == pytest.approx(np.mean(comp), rel=1e-4, abs=1e-6)
    assert got["sufficiency"] == pytest.approx(np.mean(suff), rel=1e-4, abs=1e-6)
    # a wrong ranking (the reverse) scores worse on all four
    wrong = tm.ranking_metrics(problem, -np.abs(a), options)
    assert wrong["cpd"] < got["cpd"] and wrong["cpp"] > got["cpp"]
    assert wrong["comprehensiveness"] < got["comprehensiveness"] and wrong["sufficiency"] > got["sufficiency"]


def test_fraction_sizes_round_and_keep_at_least_one_cell():
    assert tm.fraction_sizes(tm.FRACTIONS, 81).tolist() == [1, 4, 8, 16, 40]  # 0.81 -> 1, 4.05, 8.1, 16.2, 40.5
    assert tm.fraction_sizes((0.01,), 10).tolist() == [1]


# ----------------------------------------------------------------------------- linear model: infidelity, sensitivity


def test_infidelity_of_exact_ig_on_a_linear_model_is_zero_and_a_doubled_one_is_not(linear):
    # I . a / (x - b) = I . w = f(x) - f(x - I) for a linear model: the squared error is 0 for every draw
    problem, a, w, _ = linear
    draws = tm.infidelity_draws(problem, tm.Options(noise_samples=16), np.random.default_rng(0))
    noise, change = draws
    assert noise.shape == (10, 16, CELLS)
    np.testing.assert_allclose(change, noise @ w, rtol=1e-3, atol=1e-4)  # the model moves by w . I
    np.testing.assert_allclose(noise.std(axis=(0, 1)), 0.1 * problem.spread, rtol=0.2)  # stated std
    assert tm.infidelity(problem, a, draws) < 1e-7
    # 2a claims slopes 2w: the error is w . I for every draw
    assert tm.infidelity(problem, 2 * a, draws) == pytest.approx(((noise @ w) ** 2).mean(), rel=1e-3)


def test_sensitivity_max_of_ig_on_a_linear_model_is_the_largest_delta_times_w(linear):
    # IG with a fixed baseline: a(x + d) - a(x) = d * w exactly
    problem, _, w, _ = linear
    delta = tm.ball(problem.x, 0.01, 6, np.random.default_rng(4))
    assert np.all(np.abs(delta) <= 0.01 * np.abs(problem.x)[:, None] + 1e-15)
    expected = np.linalg.norm(delta * w, axis=-1).max(axis=1)
    for method in ("ig", "gradient_x_input"):  # gradient x (x - b) of a linear model is the same
        got = tm.sensitivity_max(problem.attribute[method], problem.x, problem.b, delta)
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-6)


def test_measure_gives_every_metric_for_every_method_and_ig_wins_on_a_linear_model(linear):
    problem, a, _, _ = linear
    options = tm.Options(ranks=10, noise_samples=8, radius_samples=3, random_orders=3)
    m = tm.measure(problem, {"ig": a, "gradient_x_input": a}, options)
    assert set(m.values) == set(tm.METRICS)
    for name in tm.METRICS:
        assert set(m.values[name]) == {"ig", "gradient_x_input", "random"}
        assert len(m.random_runs[name]) == 3
    won, compared = m.wins("random")
    assert won == compared == list(tm.AGAINST_RANDOM)
    assert m.values["sensitivity_max"]["random"] == m.values["sensitivity_max"]["ig"]  # a reordering: same
    assert m.planted is None
    assert tm.verdict(m, True).startswith("IG beats random order on 5 of 5 measures")
    assert "randomised-model check passed" in tm.verdict(m, True)


def test_random_orders_are_seeded_permutations_of_igs_values():
    a = np.random.default_rng(0).normal(size=(4, 12))
    one, again = tm.random_reorders(a, tm.Options(seed=3)), tm.random_reorders(a, tm.Options(seed=3))
    np.testing.assert_array_equal(one, again)
    assert not np.array_equal(one, tm.random_reorders(a, tm.Options(seed=4)))
    assert one.shape == (5, 4, 12)
    np.testing.assert_array_equal(np.sort(one, axis=-1), np.broadcast_to(np.sort(a, axis=-1), one.shape))


@pytest.mark.parametrize("field, value", [("ranks", 0), ("noise", 0.0), ("radius", -1.0), ("noise_samples", 1.5),
                                          ("fractions", (0.0,))])
def test_bad_options_say_which_and_what(field, value):
    with pytest.raises(ExplainError, match=f"{field}=.* must be"):
        tm.Options(**{field: value})


# ----------------------------------------------------------------------------- planted drivers


def test_precision_and_recall_areas_by_hand():
    # normalised scores 0.5, 1, 0.25, 0; planted cells 0 and 2. Levels 0.25, 0.5, 1 (widths .25, .25, .5):
    # found {0,1,2}: p 2/3, r 1; found {0,1}: p 1/2, r 1/2; found {1}: p 0, r 0
    aup, aur = tm.precision_recall_area(np.array([[1.0, 2.0, 0.5, 0.0]]), np.array([True, False, True, False]))
    assert aup == pytest.approx(0.25 * 2 / 3 + 0.25 * 0.5)
    assert aur == pytest.approx(0.25 + 0.25 * 0.5)
    assert np.isnan(tm.precision_recall_area(np.zeros((2, 4)), np.array([True, False, False, False]))[0])


def one_feature_model(j: int):
    """A linear model that reads static feature ``j`` only."""
    model, ws, wt = linear_model(seed=1)
    dense_s, dense_t = [layer for layer in model.layers if layer.trainable_weights]
    weights = np.zeros((S, 1))
    weights[j] = 1.7
    dense_s.set_weights([weights, np.array([0.0])])
    dense_t.set_weights([np.zeros_like(dense_t.get_weights()[0])])
    return model


def test_a_model_reading_one_planted_feature_gets_aup_and_aur_of_one():
    model = one_feature_model(2)
    x = data(6)
    b = {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}
    planted = np.zeros(CELLS, bool)
    planted[2] = True
    problem = fa.trust_problem(model, x, b, SETTINGS, planted=planted)
    a = explain.integrated_gradients(model, x, b, steps=4)
    flat = fa.flatten(a.static, a.temporal)
    assert np.count_nonzero(flat[:, np.arange(CELLS) != 2]) == 0
    m = tm.measure(problem, {"ig": flat}, tm.Options(ranks=3, noise_samples=4, radius_samples=2, random_orders=4))
    assert m.planted["ig"] == {"aup": pytest.approx(1.0), "aur": pytest.approx(1.0)}
    wrong = planted.copy()
    wrong[2], wrong[3] = False, True  # planted elsewhere: nothing found
    assert tm.precision_recall_area(flat, wrong) == (0.0, 0.0)


def planted_bundle(tmp_path, planted):
    """The demo bundle with its demo_metrics.json left out and bundle.json 'planted' set."""
    folder = tmp_path / "b"
    folder.mkdir()
    for name in ("model.keras", "static.csv", "temporal.csv"):
        (folder / name).write_bytes((DEMO / name).read_bytes())
    config = json.loads((DEMO / "bundle.json").read_text())
    (folder / "bundle.json").write_text(json.dumps({**config, "planted": planted}))
    return folder


def test_bundle_json_planted_names_cells_and_bad_names_are_refused(tmp_path):
    folder = planted_bundle(tmp_path, [{"feature": "tenure_months"},
                                       {"feature": "late_payments", "periods": ["2025-11", 12]}])
    bundle = load_bundle(folder)
    mask, source = tm.planted_mask(bundle)
    assert source == "bundle.json 'planted'"
    expected = np.zeros(9 + 12 * 6, bool)
    expected[0] = True  # tenure_months, the first static feature
    expected[9 + 10 * 6 + 2] = expected[9 + 11 * 6 + 2] = True  # late_payments (the third) in November, December
    np.testing.assert_array_equal(mask, expected)
    (folder / "bundle.json").write_text(json.dumps({**json.loads((folder / "bundle.json").read_text()),
                                                    "planted": [{"feature": "tenure"}]}))
    with pytest.raises(ExplainError, match="planted driver 'tenure' is not a feature.*tenure_months"):
        tm.planted_mask(load_bundle(folder))


@pytest.mark.parametrize("planted, message", [
    ([{"feature": "late_payments", "periods": ["2025-13", 0]}],
     r"'late_payments' names period\(s\) \['2025-13', 0\] that the bundle does not have \(periods: 2025-01, "),
    ([{"feature": "tenure_months", "periods": [1]}], "'tenure_months' is a static feature, which has no periods"),
])
def test_bundle_json_planted_periods_are_checked_against_the_bundle(tmp_path, planted, message):
    with pytest.raises(ExplainError, match=message):
        tm.planted_mask(load_bundle(planted_bundle(tmp_path, planted)))


def test_bundle_json_planted_of_the_wrong_shape_is_a_problem_of_the_bundle(tmp_path):
    with pytest.raises(BundleError, match="'planted' must be a non-empty list of objects"):
        load_bundle(planted_bundle(tmp_path, {"feature": "tenure_months"}))


def test_the_demo_declares_its_five_planted_drivers_in_every_period():
    mask, source = tm.planted_mask(load_bundle(DEMO))
    assert source == "demo_metrics.json 'planted_drivers'"
    assert mask.sum() == 2 + 3 * 12  # two static drivers, three temporal ones in each of 12 months
    assert mask[:9].tolist() == [True, True] + [False] * 7


# ----------------------------------------------------------------------------- the demo: command line, stability


def test_cli_on_100_demo_customers_meets_the_issue(tmp_path, capsys):
    out = tmp_path / "f.json"
    code = main(["faithfulness", "--bundle", str(DEMO), "--customers", "100", "--repeats", "1", "--random-orders", "3",
                 "--noise-samples", "16", "--radius-samples", "4", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert {"metrics", "random_runs", "metric_settings", "planted", "verdict", "randomisation"} <= set(doc)
    for name in ("cpd", "cpp", "comprehensiveness", "sufficiency", "infidelity", "sensitivity_max"):
        metric = doc["metrics"][name]
        assert set(metric) == {"ig", "random", "gradient_x_input", "better"}
        assert metric["better"] == tm.BETTER[name] and len(doc["random_runs"][name]) == 3
        if name != "sensitivity_max":
            ig, random = metric["ig"], metric["random"]
            assert ig > random if metric["better"] == "higher" else ig < random, (name, metric)
    assert doc["planted"]["aup"] >= 0.5 and doc["planted"]["aup"] > doc["planted"]["by_method"]["random"]["aup"]
    assert doc["planted"]["cells"] == 38
    assert doc["metric_settings"]["noise_samples"] == 16 and doc["metric_settings"]["fractions"] == list(tm.FRACTIONS)
    printed = capsys.readouterr().out
    assert printed.startswith("IG beats random order on 5 of 5 measures") and "check passed" in printed


def test_customer_stability_is_bounded_by_its_own_parts():
    bundle = load_bundle(DEMO)
    s = fa.customer_stability(bundle, "C00003", Settings(steps=16), radius=0.01, samples=4)
    assert 0 < s["largest"] <= s["norm"] <= np.sqrt(CELLS) * s["largest"] + 1e-12
    assert s["norm"] < s["size"]  # a 1 % change moves the effects by a small part of their size
    words = tm.stability_words(s, "churn")
    assert words.startswith("A 1 % change in this customer's inputs moves the effects by at most")
    assert f"{s['norm']:.3g}" in words and "4 draws" in words


# ----------------------------------------------------------------------------- the pages


def test_diagnostics_page_says_the_verdict_then_the_table():
    from tests.support.apptest import app, plain

    at = app({"customer": "C00003", "steps": "16"}, page="pages/diagnostics.py")
    assert not any("IG beats random order" in m.value for m in at.markdown)  # not before asked
    next(b for b in at.button if b.label.startswith("Run faithfulness checks")).click().run(timeout=600)
    assert not at.exception, [e.value for e in at.exception]
    verdict = next(plain(m.value) for m in at.markdown if "IG beats random order" in m.value)
    assert "5 of 5 measures" in verdict and "randomised-model check passed" in verdict
    table = next(d.value for d in at.dataframe if "measure" in d.value.columns)
    assert list(table["measure"]) == [tm.NAMES[m] for m in tm.METRICS]
    assert list(table["better"]) == [tm.BETTER[m] for m in tm.METRICS]
    assert (table["IG better than"].iloc[:5].str.contains("random order")).all()


def test_customer_page_stability_line_appears_when_opened():
    from tests.support.apptest import app, plain

    at = app({"customer": "C00003", "steps": "16"})
    assert at.session_state["stability"] is False  # the popover beside the badge, closed
    assert not any("moves the effects by at most" in plain(m.value) for m in at.markdown)  # closed: not computed
    at.session_state["stability"] = True  # opened, as the browser's click sets it (on_change="rerun")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    line = next(plain(m.value) for m in at.markdown if "moves the effects by at most" in plain(m.value))
    assert line.startswith("A 1 % change in this customer's inputs moves the effects by at most")
    assert "16 draws" in line and "predicted churn" in line
