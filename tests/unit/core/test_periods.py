"""Period-aware words: the unit read from the period labels (or bundle.json's ``period_unit``), the
"recent" window sized to it, and summaries and labels that say days or weeks where the data has them."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pytest

from explain.analysis import report
from explain.analysis.explainer import explain_customers
from explain.bundle.load import Bundle, load_bundle
from explain.core import baselines
from explain.core.periods import Words, unit_of
from explain.core.settings import Settings
from tests.support import padded

DAYS = [(date(2025, 1, 1) + timedelta(days=k)).isoformat() for k in range(40)]


@pytest.mark.parametrize("labels, unit", [
    ([f"2025-{m:02d}" for m in range(1, 13)], "month"),
    (["2024/11", "2024/12", "2025/01"], "month"),
    (DAYS, "day"),
    ([(date(2024, 1, 1) + timedelta(weeks=k)).isoformat() for k in range(60)], "week"),
    (["2025-01-31", "2025-02-28", "2025-03-31", "2025-04-30"], "month"),
    (["2024-W51", "2024-W52", "2025-W01"], "week"),
    (["2024-Q4", "2025-Q1"], "quarter"),
    (["2023", "2024", "2025"], "year"),
    (["2025-01-01T00:00:00", "2025-01-02T00:00:00"], "day"),
    (["t1", "t2", "t3"], "period"),
    (["2025-01", "Q2"], "period"),
    (["2025-13-01", "2025-14-01"], "period"),
])
def test_the_unit_is_read_from_the_labels(labels, unit):
    assert unit_of(labels) == unit
    assert unit_of(labels, declared="week") == "week"


def test_the_recent_window_fits_the_unit():
    assert [Words(u).recent for u in ("day", "week", "month", "quarter", "year", "period")] == [30, 4, 3, 2, 1, 3]
    assert Words("day").count(30) == "30 days" and Words("week").count(1) == "1 week"
    assert Words("day").adjective == "daily" and Words("period").adjective == "temporal"


def daily_bundle(periods=DAYS):
    """f = sum of the history's first feature (a known linear model), 40 days x 2 features."""
    keras = pytest.importorskip("keras")
    s_in, t_in = keras.Input((1,)), keras.Input((len(periods), 2))
    dense = keras.layers.Dense(1, use_bias=False)
    model = keras.Model([s_in, t_in], keras.layers.Add()([dense(s_in), keras.layers.Lambda(
        lambda t: keras.ops.sum(t[:, :, :1], axis=1))(t_in)]))
    dense.set_weights([np.zeros((1, 1))])
    rng = np.random.default_rng(0)
    return Bundle.from_arrays(model, rng.normal(size=(3, 1)), rng.uniform(0.5, 1.5, size=(3, len(periods), 2)),
                              periods=periods, temporal_features=["calls", "usage"])


def test_a_daily_summary_splits_at_the_last_30_days():
    bundle = daily_bundle()
    assert bundle.period_unit == "day"
    a = explain_customers(bundle, ["0"], Settings(baseline="zero", steps=8))
    phrases = dict(report.contributions(a, bundle, 0))
    recent = f"calls in the last 30 days ({DAYS[10]} to {DAYS[-1]})"
    x = bundle.temporal[0, :, 0].astype(np.float64)
    assert phrases[recent] == pytest.approx(x[10:].sum(), rel=1e-5)  # attribution = x - 0 for a sum
    assert phrases[f"calls before {DAYS[10]}"] == pytest.approx(x[:10].sum(), rel=1e-5)
    assert phrases[f"usage in the last 30 days ({DAYS[10]} to {DAYS[-1]})"] == 0.0
    text = report.summary_text(a, bundle, 0)
    assert "periods" not in text and "month" not in text and "last 30 days" in text
    assert report.input_views(bundle)[1].label == "Daily features"


def test_period_unit_in_bundle_json_wins_and_the_weekly_words(tmp_path):
    folder = padded.write(tmp_path / "weekly")
    bundle = load_bundle(folder)
    assert bundle.period_unit == "week"
    a = explain_customers(bundle, list(bundle.ids[:2]), Settings(steps=8))
    phrases = [phrase for phrase, _ in report.contributions(a, bundle, 1)]
    weeks = padded.WEEKS
    assert f"support in the last 4 weeks ({weeks[-4]} to {weeks[-1]})" in phrases
    assert f"support before {weeks[-4]}" in phrases and not any("period" in p for p in phrases)
    words = baselines.describe("mean", layout=bundle.layout, unit=bundle.period_unit)
    assert "weekly feature" in words and "Weeks that are padding" in words and "month" not in words.lower()
    other = padded.write(tmp_path / "declared", extra={"period_unit": "day"})
    assert load_bundle(other).period_unit == "day"
