"""The command line: the same numbers as the API, clear errors, atomic output."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explain.analysis.explainer import explain_customers
from explain.analysis.report import LONG_COLUMNS, POINTS_COLUMNS
from explain.bundle.load import load_bundle
from explain.cli import main
from explain.core.settings import Settings

DEMO = Path(__file__).resolve().parents[3] / "bundles" / "demo"
ROOT = DEMO.parent.parent


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "explain", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


@pytest.fixture(scope="module")
def demo():
    return load_bundle(DEMO)


def test_attribute_json_equals_api(demo, tmp_path, capsys):
    out = tmp_path / "x.json"  # in this process: the entry point's own process is test_check_..._exits_1's
    code = main(["attribute", "--bundle", str(DEMO), "--customer", "C00002", "--customer", "C00010",
                 "--baseline", "median", "--steps", "32", "--method", "trapezoid", "--out", str(out)])
    result = capsys.readouterr()
    assert code == 0, result.err
    doc = json.loads(out.read_text())
    assert doc["settings"] == {**doc["settings"], "baseline": "median", "steps": 32, "method": "trapezoid",
                               "target": 0, "space": "output", "path": "joint"}
    api = explain_customers(demo, ["C00002", "C00010"], Settings(baseline="median", steps=32, method="trapezoid"))
    for i, customer in enumerate(doc["customers"]):
        assert customer["id"] == ["C00002", "C00010"][i]
        assert customer["static"]["features"] == list(demo.static_features)
        assert customer["temporal"]["periods"] == list(demo.periods)
        np.testing.assert_allclose(customer["static"]["values"], api.static[i], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(customer["temporal"]["values"], api.temporal[i], rtol=1e-6, atol=1e-9)
        assert customer["prediction"] == pytest.approx(api.prediction[i], rel=1e-6)
        assert customer["delta"] == pytest.approx(api.delta[i], abs=1e-7)
        total = np.sum(customer["static"]["values"]) + np.sum(customer["temporal"]["values"])
        assert (customer["prediction"] - customer["baseline_prediction"] - total
                == pytest.approx(customer["delta"], abs=1e-9))
    assert "C00002:" in result.out  # a summary in words per customer: the Customer page's first sentence
    line = next(line for line in result.out.splitlines() if line.startswith("C00010:"))
    assert "likely to churn" in line and "(the median customer: " in line and "add up to" in line


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_attribute_long_format(demo, tmp_path, suffix):
    out = tmp_path / f"x{suffix}"
    assert main(["attribute", "--bundle", str(DEMO), "--customer", "C00003", "--steps", "16", "--out", str(out)]) == 0
    frame = (pd.read_csv(out, dtype={"customer_id": str}, keep_default_na=False) if suffix == ".csv"
             else pd.read_parquet(out))
    assert list(frame.columns) == LONG_COLUMNS + POINTS_COLUMNS  # the contract's long format, then what was spent
    assert len(frame) == demo.n_static + demo.n_periods * demo.n_temporal
    assert set(frame["gradient_points"]) == {16} and set(frame["forward_points"]) == {2}  # f(x) and f(b)
    static = frame[frame["input"] == "static"]
    assert list(static["feature"]) == list(demo.static_features)
    np.testing.assert_allclose(static["value"].astype(float), demo.inputs_for(["C00003"])["static"][0], rtol=1e-6)
    temporal = frame[frame["input"] == "temporal"]
    assert list(temporal["period"].unique()) == list(demo.periods)
    assert not list(tmp_path.glob(".*part"))  # no temporary file left behind


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_attribute_long_format_says_what_auto_spent_on_each_customer(demo, tmp_path, suffix):
    out, ids = tmp_path / f"x{suffix}", ["C00003", "C00010", "C00042"]
    assert main(["attribute", "--bundle", str(DEMO), *(a for i in ids for a in ("--customer", i)), "--steps", "auto",
                 "--out", str(out)]) == 0
    frame = (pd.read_csv(out, dtype={"customer_id": str}, keep_default_na=False) if suffix == ".csv"
             else pd.read_parquet(out))
    api = explain_customers(demo, ids, Settings(steps="auto"))
    spent = frame.groupby("customer_id", sort=False)[POINTS_COLUMNS].agg(["min", "max"])
    assert list(spent.index) == ids
    for name in POINTS_COLUMNS:  # one value per customer, on every row of theirs: the API's
        assert list(spent[(name, "min")]) == list(spent[(name, "max")]) == [int(v) for v in getattr(api, name)]
    assert frame["gradient_points"].dtype.kind == "i"


@pytest.mark.parametrize("args, message", [
    (["--customer", "NOPE"], "unknown customer id"),
    (["--customer", "C00001", "--baseline", "average"], "Unknown baseline 'average'"),
    (["--customer", "C00001", "--baseline", "customer:ZZZ"], "Baseline customer 'ZZZ' is not in the data set"),
    (["--customer", "C00001", "--baseline", "cohort:7"], "The cohort '7' has no customers"),
    (["--customer", "C00001", "--steps", "0"], "steps=0 is out of range"),
    (["--customer", "C00001", "--target", "5"], "target=.5.? is out of range"),
    (["--customer", "C00001", "--target", "stay"], "not an output name; the output names are \\['churn'\\]"),
])
def test_attribute_errors_are_messages_not_tracebacks(tmp_path, capsys, args, message):
    out = tmp_path / "x.json"
    assert main(["attribute", "--bundle", str(DEMO), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(message, err), err
    assert not out.exists()


def test_bad_output_suffix(tmp_path, capsys):
    assert main(["attribute", "--bundle", str(DEMO), "--customer", "C00001", "--out", str(tmp_path / "x.xlsx")]) == 2
    assert "must end in one of .json, .csv, .parquet" in capsys.readouterr().err


def test_check_demo_is_clean_and_broken_bundle_exits_1(tmp_path, capsys):
    assert main(["check", "--bundle", str(DEMO)]) == 0, capsys.readouterr()  # in this process: the same function
    broken = tmp_path / "b"
    broken.mkdir()
    for name in ("model.keras", "temporal.csv", "bundle.json"):
        (broken / name).write_bytes((DEMO / name).read_bytes())
    lines = (DEMO / "static.csv").read_text().splitlines()
    header = lines[0].split(",")
    lines[3] = ",".join(["abc" if h == "tenure_months" else v for h, v in zip(header, lines[3].split(","))])
    (broken / "static.csv").write_text("\n".join(lines) + "\n")
    bad = run_cli("check", "--bundle", str(broken))  # `python -m explain` itself: its exit status is main()'s
    assert bad.returncode == 1
    assert "tenure_months" in bad.stdout and "abc" in bad.stdout


def test_auto_reports_points_and_batch_counts_customers_outside_the_tolerance(demo, tmp_path, capsys):
    ids = [str(i) for i in demo.ids[:12]]
    out = tmp_path / "auto.json"
    args = ["--steps", "auto", "--tolerance", "0.0005", "--max-points", "48"]
    assert main(["attribute", "--bundle", str(DEMO), *sum((["--customer", i] for i in ids), []), *args,
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["settings"]["max_points"] == 48
    api = explain_customers(demo, ids, Settings(steps="auto", tolerance=0.0005, max_points=48))
    points = [c["gradient_points"] for c in doc["customers"]]
    assert points == api.gradient_points.tolist() and max(points) <= 48 and min(points) >= 16
    assert [c["forward_points"] for c in doc["customers"]] == api.forward_points.tolist()
    capsys.readouterr()
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    store = tmp_path / "store"
    assert main(["batch", "--bundle", str(DEMO), "--customers-file", str(tmp_path / "ids.txt"), *args,
                 "--batch-size", "5", "--out", str(store)]) == 0
    summary = pd.read_parquet(store / "_summary")
    np.testing.assert_array_equal(summary["gradient_points"], api.gradient_points)
    limit = np.maximum(0.0005 * np.abs(summary["prediction"] - summary["baseline_prediction"]), 1e-4)
    outside = int((np.abs(summary["delta"]) > limit).sum())
    assert 0 < outside < len(ids)  # a tight tolerance and a small budget: some customers do not make it
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"{outside} of {len(ids)} customers outside the tolerance") and "--max-points" in last
    assert json.loads((store / "_manifest.json").read_text())["outside_tolerance"] == outside
