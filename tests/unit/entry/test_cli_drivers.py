"""`python -m explain drivers` on the demo after `python -m explain batch`: the planted drivers come
first, the segments cover every customer, the JSON holds DESIGN.md's keys, HTML opens offline."""

import html
import json
import shutil
from pathlib import Path

import pytest

from explain.cli import main

ROOT = Path(__file__).resolve().parents[3]


# The commands' own function (explain.cli.main) in this process: `python -m explain` is sys.exit(main()), and its
# process is run by tests/unit/entry/test_cli.py; a fresh interpreter per command cost about 5 s of CPU each.


@pytest.fixture(scope="module")
def demo_store(bundle_dir):
    """The demo (a private copy) and its store of every customer, written by the command line."""
    assert main(["batch", "--bundle", str(bundle_dir), "--out", str(bundle_dir / "attributions" / "all")]) == 0
    return bundle_dir


def test_drivers_json_ranks_the_planted_drivers_first_and_covers_every_customer(demo_store, tmp_path, capsys):
    out = tmp_path / "drivers.json"
    capsys.readouterr()
    code = main(["drivers", "--bundle", str(demo_store), "--out", str(out)])  # the store is found
    result = capsys.readouterr()
    assert code == 0, result.err
    doc = json.loads(out.read_text())
    planted = json.loads((demo_store / "demo_metrics.json").read_text())["planted_drivers"]
    planted = set(planted["static"]) | set(planted["temporal"])
    top5 = [r["feature"] for r in doc["ranking"][:5]]
    assert len(planted & set(top5)) >= 4, top5  # measured: all 5
    assert doc["customers"] == 3000
    assert [r["mean_abs"] for r in doc["ranking"]] == sorted((r["mean_abs"] for r in doc["ranking"]), reverse=True)
    assert {r["input"] for r in doc["ranking"]} == {"static", "temporal"}
    assert len(doc["segments"]) >= 2
    assert sum(s["size"] for s in doc["segments"]) == 3000
    assert sorted(c for s in doc["segments"] for c in s["customers"]) == sorted(
        line.split(",")[0] for line in (demo_store / "static.csv").read_text().splitlines()[1:])
    for segment in doc["segments"]:
        assert set(segment) >= {"name", "size", "share", "mean_prediction", "top_drivers", "churn_rate"}
        assert segment["top_drivers"] and 0 <= segment["churn_rate"] <= 1
    assert doc["time_profile"][0]["periods"][-1] == "2025-12"
    assert doc["sentence"] in result.out
    assert doc["segments"][0]["name"] in result.out


def test_drivers_html_opens_offline_with_its_figures(demo_store, tmp_path):
    out = tmp_path / "drivers.html"
    assert main(["drivers", "--bundle", str(demo_store), "--store", str(demo_store / "attributions" / "all"),
                 "--against", str(demo_store / "attributions" / "all"), "--window", "3", "--out", str(out)]) == 0
    text = html.unescape(out.read_text())
    assert text.count("plotly.js v") == 1 and '<script src="https' not in text  # the library inline, once
    assert "No driver's weight changed beyond noise" in text  # a store against itself
    assert "the last 3 period(s)" in text


@pytest.mark.parametrize("args, message", [
    (["--out", "x.csv"], "--out x.csv must end in .json or .html"),
    (["--store", "nowhere", "--out", "x.json"], "nowhere is not a batch output folder"),
    (["--window", "13", "--out", "x.json"], "window must be a whole number of periods from 1 to 12"),
])
def test_drivers_bad_input_is_one_clear_line(demo_store, tmp_path, capsys, args, message):
    args = [a if a != "x.json" and a != "x.csv" else str(tmp_path / a) for a in args]
    assert main(["drivers", "--bundle", str(demo_store), *args]) == 2
    err = capsys.readouterr().err
    assert message.replace("x.csv", str(tmp_path / "x.csv")) in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written


def test_drivers_without_a_store_names_the_command(tmp_path, monkeypatch, capsys):
    bundle = tmp_path / "demo"
    shutil.copytree(ROOT / "bundles" / "demo", bundle, ignore=shutil.ignore_patterns("attributions"))
    # an empty $EXPLAIN_STORES: the session's own (tests/conftest.py) may hold a store of the demo's content,
    # computed by a dashboard test that ran before this one
    monkeypatch.setenv("EXPLAIN_STORES", str(tmp_path / "no-stores"))
    code = main(["drivers", "--bundle", str(bundle), "--out", str(tmp_path / "d.json")])
    assert code == 2 and "python -m explain batch --bundle" in capsys.readouterr().err
    assert not (tmp_path / "d.json").exists()
