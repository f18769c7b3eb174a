"""Exports and words: exact numbers on a linear model, the long format, atomic writes."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

import explain
from explain.analysis import report
from explain.bundle.load import Bundle
from explain.core import files
from explain.core.errors import ExplainError
from tests.support.models import F, S, T, data, linear_model


@pytest.fixture(scope="module")
def case():
    model, ws, wt = linear_model(seed=3)
    x = data(3, seed=4)
    bundle = Bundle.from_arrays(model, x["static"], x["temporal"], ids=["A", "B", "007"])
    baseline = {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}
    attribution = explain.integrated_gradients(model, x, baseline, steps=4)
    return bundle, attribution, x, ws, wt


def test_long_frame_is_exact_and_ordered(case):
    bundle, attribution, x, ws, wt = case
    frame = report.long_frame(attribution, bundle, ["A", "B", "007"])
    assert list(frame.columns) == report.LONG_COLUMNS
    assert len(frame) == 3 * (S + T * F)
    b = frame[frame["customer_id"] == "B"]
    static = b[b["input"] == "static"]
    np.testing.assert_allclose(static["attribution"], x["static"][1] * ws, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(static["value"], x["static"][1], rtol=1e-6)
    temporal = b[b["input"] == "temporal"]
    cell = temporal[(temporal["period"] == bundle.periods[2]) & (temporal["feature"] == bundle.temporal_features[1])]
    assert cell["attribution"].item() == pytest.approx(x["temporal"][1, 2, 1] * wt[2, 1], rel=1e-5, abs=1e-7)
    assert list(frame["customer_id"].unique()) == ["A", "B", "007"]  # ids stay text, in order


def test_json_dict_matches_design(case):
    bundle, attribution, *_ = case
    doc = report.to_json_dict(attribution, bundle, ["A", "B", "007"])
    assert set(doc["settings"]) >= {"steps", "method", "target", "space", "path"}
    customer = doc["customers"][2]
    assert customer["id"] == "007"
    assert np.array(customer["temporal"]["values"]).shape == (T, F)  # periods x features
    total = np.sum(customer["static"]["values"]) + np.sum(customer["temporal"]["values"])
    assert (customer["prediction"] - customer["baseline_prediction"] - total
            == pytest.approx(customer["delta"], abs=1e-9))


@pytest.mark.parametrize("suffix", [".json", ".csv", ".parquet"])
def test_write_attributions_round_trip(case, tmp_path, suffix):
    bundle, attribution, *_ = case
    path = report.write_attributions(tmp_path / f"out{suffix}", attribution, bundle, ["A", "B", "007"])
    assert [p.name for p in tmp_path.iterdir()] == [f"out{suffix}"]  # no temporary file left
    if suffix == ".json":
        assert len(json.loads(path.read_text())["customers"]) == 3
    elif suffix == ".csv":
        assert set(pd.read_csv(path, dtype={"customer_id": str})["customer_id"]) == {"A", "B", "007"}
    else:
        assert len(pd.read_parquet(path)) == 3 * (S + T * F)


def test_failed_write_leaves_nothing(tmp_path):
    def boom(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        files.write_atomic(tmp_path / "x.json", boom)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ExplainError, match="must end in one of"):
        report.write_attributions(tmp_path / "x.txt", None, None, [])


@pytest.mark.parametrize("delta, status", [(0.001, "fine"), (-0.02, "check"), (0.2, "too few steps"), (0.004, "fine")])
def test_delta_status(delta, status):
    # difference explained 0.5: fine up to 1 % of it, check up to 5 %
    assert report.delta_status(delta, 0.7, 0.2)[0] == status


def test_no_largest_effects_while_the_attributions_do_not_add_up(case):
    # the same customer with attributions whose sum has the wrong sign (a delta of 3.6 times the difference)
    bundle, attribution, *_ = case
    gap = float(attribution.prediction[0] - attribution.baseline_prediction[0])
    broken = dataclasses.replace(attribution, delta=np.array([3.58 * gap, 0.0, 0.0]))
    text = report.summary_text(broken, bundle, 0, customer_id="A")
    assert "Largest effects" not in text
    assert "-258 %, the sign is wrong" in text and "cannot be trusted" in text and "Choose 'auto'" in text
    auto = dataclasses.replace(broken, settings=broken.settings.replace(steps="auto"))
    assert "--max-points" in report.summary_text(auto, bundle, 0)
    assert "Largest effects" in report.summary_text(attribution, bundle, 0)  # when they add up: named


def test_summary_text_names_the_largest_effect_with_its_sign(case):
    bundle, attribution, x, ws, _ = case
    text = report.summary_text(attribution, bundle, 0, customer_id="A")
    j = int(np.argmax(np.abs(attribution.static[0])))
    top = report.contributions(attribution, bundle, 0, static_values=x["static"][0])[0]
    assert f"{top[1]:+.2f} from {top[0]}" in text
    assert "add up" in text or "miss" in text
    assert f"{bundle.static_labels[j]} = " in " ".join(p for p, _ in report.contributions(
        attribution, bundle, 0, static_values=x["static"][0]))


HOSTILE_IDS = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"]


@pytest.mark.parametrize("writer", ["download", "attribute"])
def test_csv_exports_start_no_cell_with_a_formula(writer, tmp_path):
    """Page downloads (``csv_bytes``) and ``attribute --out x.csv`` (``write_attributions``): ids and names
    that a spreadsheet would run get a leading quote; numbers, negative ones included, stay numbers."""
    import csv
    import io

    model, _, _ = linear_model(seed=3)
    x = data(4, seed=5)
    x["static"][0, 0] = -1.5  # a negative value: a number, written as a number
    names = ["\tTab", "\rreturn", "=1+1"] + [f"s{j}" for j in range(S - 3)]
    bundle = Bundle.from_arrays(model, x["static"], x["temporal"], ids=HOSTILE_IDS, static_features=names)
    attribution = explain.integrated_gradients(model, x, {"static": np.zeros((1, S)),
                                                          "temporal": np.zeros((1, T, F))}, steps=4)
    if writer == "download":
        text = report.csv_bytes(attribution, bundle, HOSTILE_IDS).decode("utf-8")
    else:
        text = report.write_attributions(tmp_path / "out.csv", attribution, bundle, HOSTILE_IDS).read_bytes().decode()
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    expected = report.long_frame(attribution, bundle, HOSTILE_IDS)
    assert len(rows) == len(expected)
    for row in rows:
        for column, cell in row.items():
            if column in ("value", "attribution"):
                float(cell)  # a number, as written
            else:
                assert not cell.startswith(files.FORMULA_STARTS), (column, cell)
    assert {row["customer_id"] for row in rows} == {"'" + i for i in HOSTILE_IDS}
    assert {"'\tTab", "'\rreturn", "'=1+1"} <= {row["feature"] for row in rows}
    np.testing.assert_allclose([float(r["value"]) for r in rows], expected["value"].astype(float), rtol=1e-6)
    np.testing.assert_allclose([float(r["attribution"]) for r in rows], expected["attribution"], rtol=1e-6)
    assert float(rows[0]["value"]) == -1.5
