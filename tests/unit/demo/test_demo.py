"""The shipped demo bundle (bundles/demo) and its deterministic rebuild."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explain.bundle.load import load_bundle, validate_bundle
from explain.demo import churn as demo
from explain.demo.churn import DEFAULT_DEMO_DIR, auc, build_demo

TABLES = ("static.csv", "temporal.csv", "bundle.json")


@pytest.fixture(scope="module")
def shipped():
    return load_bundle(DEFAULT_DEMO_DIR)


@pytest.fixture(scope="module")
def metrics():
    return json.loads((DEFAULT_DEMO_DIR / "demo_metrics.json").read_text())


def test_shipped_bundle_validates_clean():
    report = validate_bundle(DEFAULT_DEMO_DIR)
    assert report.ok, report.format()
    assert report.notes == []


def test_shipped_bundle_sizes(shipped):
    assert shipped.n_customers >= 2000
    assert shipped.n_static >= 8
    assert shipped.n_periods == 12
    assert shipped.n_temporal >= 6
    assert shipped.periods == [f"2025-{m:02d}" for m in range(1, 13)]
    assert shipped.ids[0] == "C00001" and len(set(shipped.ids)) == shipped.n_customers
    assert shipped.output_names == ["churn"]
    assert shipped.label_name == "churned" and set(np.unique(shipped.labels)) == {0, 1}
    assert [t.name for t in shipped.model.inputs] == ["static", "temporal"]
    # every feature has a display name and a unit
    assert all(label != name for label, name in zip(shipped.static_labels, shipped.static_features))
    assert set(shipped.units) == set(shipped.static_features) | set(shipped.temporal_features)


def test_shipped_files_are_small():
    total = sum(p.stat().st_size for p in DEFAULT_DEMO_DIR.iterdir() if p.is_file())
    assert total < 5 * 1024 * 1024
    assert not [p for p in DEFAULT_DEMO_DIR.iterdir() if p.name.startswith(".building-")]


def test_metrics(metrics, shipped):
    assert metrics["auc_test"] >= 0.75
    assert 0.2 <= metrics["churn_rate"] <= 0.3
    assert metrics["churn_rate"] == pytest.approx(shipped.labels.mean(), abs=1e-4)
    assert metrics["n_train"] + metrics["n_test"] == shipped.n_customers
    assert "churned ~ Bernoulli" in metrics["rule"]
    drivers = metrics["planted_drivers"]
    assert set(drivers["static"]) <= set(shipped.static_features)
    assert set(drivers["temporal"]) <= set(shipped.temporal_features)


def test_labels_follow_the_planted_drivers(shipped):
    """The tables carry the documented rule: churners differ on every planted driver."""
    churned = shipped.labels == 1
    static = dict(zip(shipped.static_features, shipped.static.T))
    temporal = {name: shipped.temporal[:, :, k] for k, name in enumerate(shipped.temporal_features)}
    calls, usage = temporal["support_calls"], temporal["data_usage_gb"]
    support_rise = calls[:, 9:].mean(1) - calls[:, :9].mean(1)
    usage_change = usage[:, 9:].mean(1) / usage[:, :9].mean(1) - 1
    late_recent = temporal["late_payments"][:, 6:].sum(1)
    assert churned[static["contract_month_to_month"] == 1].mean() > 2 * churned[
        static["contract_month_to_month"] == 0].mean()
    assert static["tenure_months"][churned].mean() < static["tenure_months"][~churned].mean()
    assert support_rise[churned].mean() > support_rise[~churned].mean() + 0.3
    assert usage_change[churned].mean() < usage_change[~churned].mean() - 0.1
    assert late_recent[churned].mean() > late_recent[~churned].mean()


def test_model_responds_to_the_planted_drivers(shipped):
    """Pushing a driver towards churn raises the mean prediction; a distractor barely moves it."""
    inputs = shipped.inputs_for(shipped.ids[:300])
    base = shipped.predict(inputs).mean()
    s_index = {name: k for k, name in enumerate(shipped.static_features)}
    t_index = {name: k for k, name in enumerate(shipped.temporal_features)}

    def shifted(edit):
        changed = {key: value.copy() for key, value in inputs.items()}
        edit(changed)
        return shipped.predict(changed).mean() - base

    rise = shifted(lambda x: x["temporal"].__setitem__(
        (slice(None), slice(9, 12), t_index["support_calls"]),
        x["temporal"][:, 9:12, t_index["support_calls"]] + 2))
    fall = shifted(lambda x: x["temporal"].__setitem__(
        (slice(None), slice(9, 12), t_index["data_usage_gb"]),
        x["temporal"][:, 9:12, t_index["data_usage_gb"]] * 0.4))
    month_to_month = shifted(lambda x: x["static"].__setitem__(
        (slice(None), s_index["contract_month_to_month"]), 1.0))
    distractor = shifted(lambda x: x["temporal"].__setitem__(
        (slice(None), slice(9, 12), t_index["dropped_calls"]),
        x["temporal"][:, 9:12, t_index["dropped_calls"]] + 2))
    assert rise > 0.1 and fall > 0.1 and month_to_month > 0.05
    assert abs(distractor) < min(rise, fall) / 2


def test_auc_matches_pair_counting():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 200)
    scores = np.round(rng.normal(size=200) + labels, 1)  # rounding makes ties
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    assert auc(labels, scores) == pytest.approx(pairs, abs=1e-12)
    assert auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0


def test_tables_are_deterministic():
    first = demo.make_demo_tables(50, seed=3)
    second = demo.make_demo_tables(50, seed=3)
    assert first[0].equals(second[0]) and first[1].equals(second[1])
    assert not demo.make_demo_tables(50, seed=4)[0].equals(first[0])


@pytest.mark.slow
def test_rebuild_is_identical(tmp_path, shipped, metrics):
    out = build_demo(tmp_path / "demo")
    for name in TABLES:
        assert (out / name).read_bytes() == (DEFAULT_DEMO_DIR / name).read_bytes(), name
    rebuilt = load_bundle(out)
    np.testing.assert_allclose(rebuilt.predict(shipped.data()), shipped.predict(),
                               rtol=0, atol=1e-5)
    again = json.loads((out / "demo_metrics.json").read_text())
    assert again["auc_test"] == pytest.approx(metrics["auc_test"], abs=1e-3)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["bundle.json", "demo_metrics.json", "model.keras", "static.csv", "temporal.csv"])
