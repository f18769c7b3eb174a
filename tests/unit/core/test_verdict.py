"""Risk bands and the verdict in words (explain.core.verdict), and their bundle.json key."""

import json
import shutil

import pytest

from explain.bundle.load import validate_bundle
from explain.core import verdict
from tests.support.apptest import DEMO

BANDS = verdict.DEFAULT_BANDS


@pytest.mark.parametrize("score, band", [(-0.5, "low risk"), (0.0, "low risk"), (0.2999, "low risk"),
                                         (0.3, "medium risk"), (0.5999, "medium risk"), (0.6, "high risk"),
                                         (1.0, "high risk"), (7.0, "high risk")])
def test_each_score_falls_in_the_band_whose_range_holds_it(score, band):
    said = verdict.verdict(score, BANDS, "churn")
    assert said.band == band
    low, high = verdict.ranges(BANDS)[next(k for k in verdict.ranges(BANDS) if k.startswith(band))]
    assert low <= score < high  # the filter's range agrees with the verdict


def test_the_words_name_the_output():
    assert verdict.verdict(0.9, BANDS, "default").headline == "High risk: likely to default"
    assert verdict.verdict(0.1, BANDS, "churn").range_text == "below 0.3"
    assert verdict.cuts(BANDS) == [0.3, 0.6]


def test_quality_is_a_plain_percentage_of_the_difference_explained():
    assert verdict.quality(0.0, 0.9, 0.1) == "100.0 %"
    assert verdict.quality(0.08, 0.9, 0.1) == "90.0 %"  # 0.08 of 0.8 missing
    assert verdict.quality(5e-5, 0.9, 0.1) == "over 99.9 %"  # never rounds a gap up to 100 %
    assert verdict.quality(0.8, 0.9, 0.1) == "0.0 %"  # the attributions sum to 0
    assert verdict.quality(2.97, 0.83, 0.0) == "-258 %, the sign is wrong"  # issue 27's customer: never shown as 0
    assert verdict.quality(-0.2, 0.9, 0.1) == "125.0 %"  # an overshoot is shown as it is
    assert verdict.quality(-0.08, 0.1, 0.9) == "90.0 %"  # a negative difference: 0.72 of -0.8 explained
    assert verdict.quality(0.5, 0.1, 0.9) == "162.5 %"  # attributions -1.3 for a difference of -0.8


@pytest.mark.parametrize("value, words", [
    ("high", "is \"high\""), ([{"name": "a", "from": 0}], "has 1 band(s)"),
    ([{"name": "a", "from": 0}, {"from": 0.5}], "band 2 has no \"name\""),
    ([{"name": "a", "from": 0}, {"name": "b", "from": "0.5"}], "band 2 ('b') has no number"),
    ([{"name": "a", "from": 0.5}, {"name": "b", "from": 0.5}], "do not increase"),
    ([{"name": "a", "from": 0}, {"name": "b", "from": 0.5, "colour": "red"}], "unknown key(s) 'colour'"),
])
def test_bad_bands_are_named_with_what_was_expected(value, words):
    bands, problem = verdict.parse_bands(value)
    assert bands is None and words in problem and "expected a list of at least 2 bands" in problem


def test_a_bad_risk_bands_key_is_a_problem_of_the_bundle(tmp_path):
    folder = tmp_path / "b"
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("attributions"))
    config = json.loads((folder / "bundle.json").read_text())
    config["risk_bands"] = [{"name": "a", "from": 0.6}, {"name": "b", "from": 0.3}]
    (folder / "bundle.json").write_text(json.dumps(config))
    report = validate_bundle(folder)
    assert any(p.file == "bundle.json" and p.column == "risk_bands" and "do not increase" in str(p)
               for p in report.problems)


def test_html_report_names_the_target_and_says_the_verdict():
    from explain.analysis.explainer import explain_customers
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings
    from explain.plots import html as html_report

    bundle = load_bundle(DEMO)
    ids = ["C00001"]
    a = explain_customers(bundle, ids, Settings(steps=16))
    text = html_report.html_report(a, bundle, ids, 0, Settings(steps=16))
    assert "<tr><th>target</th><td>churn</td></tr>" in text  # the name, not the index 0
    score = float(a.prediction[0])  # output space: the model's probability
    words = "High risk" if score >= 0.6 else "Medium risk" if score >= 0.3 else "Low risk"
    assert f"<p class='verdict'>{words}" in text
