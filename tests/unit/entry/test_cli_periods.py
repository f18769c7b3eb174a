"""Issue 41's done-when for per-period outputs and heads, through the command line: a per-period LSTM saved with
save_bundle; `attribute` explains the last period by default and period 5 with --output-period 5 (the predictions
are the model's outputs there, the attributions add up, later periods get exactly 0); a two-head model by --output."""

import json

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import explain  # noqa: E402
from explain.bundle.load import load_bundle  # noqa: E402
from explain.cli import main  # noqa: E402
from tests.unit.core.test_outputs import T, _data, _single_head, per_period_model, two_head_model  # noqa: E402

IDS = ["0", "3", "7"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = per_period_model("lstm", seed=5)
    x = _data(12, seed=2)
    periods = [f"2025-{m:02d}" for m in range(1, T + 1)]
    path = explain.save_bundle(tmp_path_factory.mktemp("per") / "bundle", model, x["static"], x["temporal"],
                               periods=periods)
    return model, x, path, periods


def _attribute(path, out, *extra):
    args = ["attribute", "--bundle", str(path), *(a for i in IDS for a in ("--customer", i)), "--steps", "64",
            "--out", str(out), *extra]
    assert main(args) == 0
    return json.loads(out.read_text())


def _check_period(document, model, x, p):
    rows = [int(i) for i in IDS]
    want = np.asarray(model([x["static"], x["temporal"]]), np.float64)[rows, p - 1, 0]
    got = np.array([c["prediction"] for c in document["customers"]])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for c in document["customers"]:
        temporal = np.array(c["temporal"]["values"])
        total = sum(c["static"]["values"]) + temporal.sum()
        assert abs(total - (c["prediction"] - c["baseline_prediction"])) < 1e-3
        assert abs(c["delta"]) < 1e-3
        assert np.all(temporal[p:] == 0.0), f"period {p}: later periods {temporal[p:]}"
        assert np.any(temporal[:p] != 0.0)
    assert document["settings"]["output_period"] == p


def test_attribute_explains_the_last_period_by_default_and_period_5_on_request(saved, tmp_path):
    model, x, path, periods = saved
    _check_period(_attribute(path, tmp_path / "last.json"), model, x, T)
    _check_period(_attribute(path, tmp_path / "p5.json", "--output-period", "5"), model, x, 5)
    by_label = _attribute(path, tmp_path / "label.json", "--output-period", periods[4])
    _check_period(by_label, model, x, 5)


def test_a_bad_period_lists_the_valid_ones(saved, tmp_path, capsys):
    _, _, path, periods = saved
    args = ["attribute", "--bundle", str(path), "--customer", "0", "--out", str(tmp_path / "x.json")]
    assert main([*args, "--output-period", "9"]) == 2
    err = capsys.readouterr().err
    assert "from 1 to 8" in err and periods[0] in err and "Traceback" not in err
    assert main([*args, "--output-period", "March"]) == 2
    assert "'2025-01'" in capsys.readouterr().err


def test_save_bundle_accepts_every_per_period_kind_and_two_heads(tmp_path):
    x = _data(6)
    for kind in ("gru", "conv", "bidirectional"):
        bundle = load_bundle(explain.save_bundle(tmp_path / kind, per_period_model(kind), x["static"],
                                                 x["temporal"]))
        assert bundle.output_period == T
        np.testing.assert_allclose(bundle.predict()[:, 0], np.asarray(
            per_period_model(kind)([x["static"], x["temporal"]]))[:, -1, 0], rtol=1e-5)
    heads = load_bundle(explain.save_bundle(tmp_path / "heads", two_head_model(), x["static"], x["temporal"]))
    assert heads.output == "churn"


def test_a_per_period_output_of_another_length_is_refused_naming_both(tmp_path):
    s = keras.Input((4,), name="static")
    t = keras.Input((T, 3), name="temporal")
    h = keras.layers.Conv1D(2, 3, padding="valid")(t)  # T - 2 periods
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Concatenate()(
        [h, keras.layers.RepeatVector(T - 2)(keras.layers.Dense(2)(s))]))
    x = _data(4)
    with pytest.raises(explain.ExplainError) as error:
        explain.save_bundle(tmp_path / "short", keras.Model([s, t], out), x["static"], x["temporal"])
    assert "6 periods" in str(error.value) and "8 periods" in str(error.value)


def test_output_by_name_explains_that_head(tmp_path):
    model = two_head_model()
    x = _data(10)
    path = explain.save_bundle(tmp_path / "heads", model, x["static"], x["temporal"])
    got = _attribute(path, tmp_path / "spend.json", "--output", "spend", "--steps", "32")
    single = _single_head(model, "spend", None)
    rows = [int(i) for i in IDS]
    want = np.asarray(single([x["static"], x["temporal"]]), np.float64)[rows, 0]
    np.testing.assert_allclose([c["prediction"] for c in got["customers"]], want, rtol=1e-5, atol=1e-6)
    assert got["settings"]["output"] == "spend" and got["settings"]["target_name"] == "spend"
    assert main(["attribute", "--bundle", str(path), "--customer", "0", "--output", "value",
                 "--out", str(tmp_path / "v.json")]) == 2


def test_batch_stores_of_two_periods_are_told_apart_and_drivers_reads_the_one_asked(saved, tmp_path):
    path = saved[2]  # the module's per-period LSTM bundle (its stores are read by no other test here)
    stores = path / "attributions"
    for name, extra in (("p5", ["--output-period", "5"]), ("last", [])):
        assert main(["batch", "--bundle", str(path), "--out", str(stores / name), "--steps", "16", *extra]) == 0
    for extra, store in ((["--output-period", "5"], "p5"), ([], "last")):
        out = tmp_path / f"drivers_{store}.json"
        assert main(["drivers", "--bundle", str(path), *extra, "--out", str(out)]) == 0
        document = json.loads(out.read_text())
        assert document["source"]["store"].endswith(store)
        assert document["source"]["settings"]["output_period"] == (5 if store == "p5" else T)
