"""bundle.json 'output' and 'output_period' (issue 41): the head and period a bundle explains by default, checked
against the model and the periods; explain.bundle.heads.viewed gives the bundle of another head or period."""

import json

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import explain  # noqa: E402
from explain.bundle.heads import viewed  # noqa: E402
from explain.bundle.load import load_bundle, validate_bundle  # noqa: E402
from explain.core.settings import Settings  # noqa: E402
from tests.unit.core.test_outputs import T, _data, per_period_model, two_head_model  # noqa: E402

PERIODS = [f"2025-{m:02d}" for m in range(1, T + 1)]


def _with_config(path, **values):
    config = path / "bundle.json"
    data = json.loads(config.read_text()) if config.is_file() else {}
    data.update(values)
    config.write_text(json.dumps(data))
    for stale in path.glob(".explain*"):  # the array cache: bundle.json changed
        if stale.is_dir():
            import shutil

            shutil.rmtree(stale)
    return path


def test_bundle_json_names_the_default_head_and_a_bad_one_is_a_problem(tmp_path):
    model = two_head_model()
    x = _data(6)
    path = explain.save_bundle(tmp_path / "heads", model, x["static"], x["temporal"])
    spend = load_bundle(_with_config(path, output="spend"))
    want = np.asarray(model([x["static"], x["temporal"]])[1], np.float64)[:, 0]
    np.testing.assert_allclose(spend.predict()[:, 0], want, rtol=1e-5, atol=1e-6)
    assert spend.output == "spend"
    churn, settings = viewed(spend, Settings(output="churn"))
    np.testing.assert_allclose(churn.predict()[:, 0], np.asarray(model([x["static"], x["temporal"]])[0])[:, 0],
                               rtol=1e-5)
    assert settings.output == "churn" and churn.output_names == ["churn"]
    report = validate_bundle(_with_config(path, output="value"))
    assert not report.ok and "'churn', 'spend'" in report.format()


def test_bundle_json_output_period_by_label_is_the_default_period(tmp_path):
    model = per_period_model("lstm")
    x = _data(6)
    path = explain.save_bundle(tmp_path / "per", model, x["static"], x["temporal"], periods=PERIODS)
    bundle = load_bundle(_with_config(path, output_period="2025-03"))
    assert bundle.output_period == 3
    np.testing.assert_allclose(bundle.predict()[:, 0], np.asarray(model([x["static"], x["temporal"]]))[:, 2, 0],
                               rtol=1e-5)
    assert Settings().for_bundle(bundle).output_period == 3  # the bundle's period unless another is asked
    other, settings = viewed(bundle, Settings(output_period="7"))
    assert settings.output_period == 7 and other.content_hash == bundle.content_hash
    assert viewed(bundle, Settings(output_period=3))[0] is bundle


def test_a_bad_output_period_in_bundle_json_names_the_file_and_the_valid_periods(tmp_path):
    x = _data(4)
    path = explain.save_bundle(tmp_path / "per", per_period_model("gru"), x["static"], x["temporal"], periods=PERIODS)
    with pytest.raises(explain.ExplainError) as error:
        load_bundle(_with_config(path, output_period="March"))
    assert "bundle.json" in str(error.value) and "'2025-01'" in str(error.value) and "1 to 8" in str(error.value)
