"""bundle.json's ``target``: the output explained by default. A softmax ["stay", "churn"] model built
here (its churn logit is a known linear function): ``target`` by name or index, the ``positive_label``
class when no target is given, output 0 otherwise; ``attribute`` without --target explains it, and a
target that is not an output is a problem naming the key."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explain import cli
from explain.analysis.explainer import explain_customers
from explain.bundle.config import UNKNOWN_TARGET, default_target
from explain.bundle.load import load_bundle, validate_bundle
from explain.core.settings import Settings
from tests.support.softmax import softmax_bundle


@pytest.mark.parametrize("config, expected", [
    ({"target": "churn"}, 1), ({"target": 1}, 1), ({"target": "stay"}, 0), ({"target": 0}, 0),
    ({"positive_label": 1}, 1), ({"positive_label": "churn"}, 1), ({"positive_label": 0}, 0),
    ({"positive_label": 1, "target": "stay"}, 0), ({}, 0),
])
def test_the_bundles_target(tmp_path, config, expected):
    folder, _ = softmax_bundle(tmp_path / "b", **config)
    assert load_bundle(folder).target == expected


@pytest.mark.parametrize("target", ["chrun", 2, "2"])
def test_a_target_that_is_not_an_output_is_a_problem_naming_the_key(tmp_path, target):
    folder, _ = softmax_bundle(tmp_path / "b", target=target)
    report = validate_bundle(folder)
    assert not report.ok
    assert UNKNOWN_TARGET.format(value=target, names="'stay', 'churn'", last=1) in report.format()


def test_default_target_rule_without_a_model():
    assert default_target(["churn"], None, 1) == (0, None)  # one output: positive_label names a label, not a class
    assert default_target(["no", "yes"], None, "yes") == (1, None)
    assert default_target(["no", "yes"], None, 1.0) == (1, None)
    assert default_target(["no", "yes"], None, "1") == (1, None)
    assert default_target(["no", "yes"], None, 7) == (0, None)
    assert default_target(["no", "yes"], None, True) == (0, None)


def test_attribute_without_target_explains_the_bundles_target(tmp_path, capsys):
    folder, w = softmax_bundle(tmp_path / "b", target="churn")
    out = tmp_path / "a.json"
    assert cli.main(["attribute", "--bundle", str(folder), "--customer", "S03", "--baseline", "zero",
                     "--steps", "64", "--out", str(out)]) == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["settings"]["target"] == 1 and result["settings"]["target_name"] == "churn"
    bundle = load_bundle(folder)
    x = np.concatenate([bundle.static[bundle.index_of("S03")], bundle.temporal[bundle.index_of("S03")].ravel()])
    churn = 1 / (1 + np.exp(-(x @ w - 0.3)))
    customer = result["customers"][0]
    assert customer["prediction"] == pytest.approx(churn, abs=1e-6)
    assert customer["baseline_prediction"] == pytest.approx(1 / (1 + np.exp(0.3)), abs=1e-6)
    # an explicit --target still wins, and the same customer's stay attributions are the negatives
    assert cli.main(["attribute", "--bundle", str(folder), "--customer", "S03", "--baseline", "zero",
                     "--steps", "64", "--target", "stay", "--out", str(out)]) == 0
    stay = json.loads(out.read_text())["customers"][0]
    np.testing.assert_allclose(stay["static"]["values"], -np.asarray(customer["static"]["values"]), atol=1e-6)


def test_settings_without_target_resolve_to_the_bundles(tmp_path):
    folder, _ = softmax_bundle(tmp_path / "b", positive_label=1)
    bundle = load_bundle(folder)
    assert Settings().for_bundle(bundle).target == 1
    assert Settings(target="stay").for_bundle(bundle).target == 0
    assert Settings.from_strings(Settings().to_strings()).target is None  # round trip keeps "the bundle's"
    a = explain_customers(bundle, ["S01", "S02"], Settings(steps=16))
    np.testing.assert_allclose(a.prediction, bundle.predict(bundle.inputs_for(["S01", "S02"]))[:, 1], rtol=1e-5)
