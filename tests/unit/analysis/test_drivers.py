"""Drivers across customers: IG on the demo finds the drivers planted in its churn rule
(bundles/demo/demo_metrics.json), and explain.analysis.drivers summarises attributions correctly."""

import json
from pathlib import Path

import numpy as np

from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core.settings import Settings

DEMO = Path(__file__).resolve().parents[3] / "bundles" / "demo"


def driver_ranks(a, features, planted):
    """Over the churners the model flags (score > 0.5, more than 100 of them), per feature (static
    as is, temporal summed over the months): the share whose largest push is a planted driver, the
    mean number of planted drivers among the three largest, and the smallest mean |attribution|
    of a planted driver against the largest of an unplanted one."""
    scored = a.prediction > 0.5
    assert scored.sum() > 100
    per_feature = np.concatenate([a.static, a.temporal.sum(axis=1)], axis=1)[scored]
    top1 = np.mean([features[j] in planted for j in per_feature.argmax(axis=1)])
    top3 = np.mean([len(planted & {features[j] for j in np.argsort(-row)[:3]}) for row in per_feature])
    unplanted_best = max(np.abs(per_feature[:, j]).mean() for j, f in enumerate(features) if f not in planted)
    planted_worst = min(np.abs(per_feature[:, j]).mean() for j, f in enumerate(features) if f in planted)
    return top1, top3, planted_worst, unplanted_best


def test_planted_drivers_rank_at_the_top_for_churners():
    bundle = load_bundle(DEMO)
    planted = json.loads((DEMO / "demo_metrics.json").read_text())["planted_drivers"]
    planted = set(planted["static"]) | set(planted["temporal"])
    features = list(bundle.static_features) + list(bundle.temporal_features)
    churners = [cid for cid, label in zip(bundle.ids, bundle.labels) if label == 1]
    a = explain_customers(bundle, churners, Settings(baseline="mean", steps=32))
    top1, top3, planted_worst, unplanted_best = driver_ranks(a, features, planted)
    assert top1 >= 0.9, top1  # measured: 1.00
    assert top3 >= 2.5, top3  # measured: 2.86 of the 3 largest pushes are planted drivers
    assert planted_worst > unplanted_best
    # and completeness holds for every churner
    assert np.all(np.abs(a.delta) <= 0.01 + 0.02 * np.abs(a.prediction - a.baseline_prediction))


def test_planted_drivers_on_the_embedding_demo():
    """bundles/demo-embedding: categorical ids into embeddings, histories padded behind Masking.

    Categorical baseline: the frequency-weighted mean embedding (with the most frequent
    category, a customer in it gets no attribution for it by construction).
    """
    folder = DEMO.parent / "demo-embedding"
    bundle = load_bundle(folder)
    planted = json.loads((folder / "demo_metrics.json").read_text())["planted_drivers"]
    planted = set(planted["static"]) | set(planted["temporal"])
    features = list(bundle.static_features) + list(bundle.temporal_features)
    churners = [cid for cid, label in zip(bundle.ids, bundle.labels) if label == 1]
    a = explain_customers(bundle, churners, Settings(baseline="mean", steps=32, categorical="mean-embedding"))
    top1, top3, planted_worst, unplanted_best = driver_ranks(a, features, planted)
    assert top1 >= 0.9, top1  # measured: 0.97
    assert top3 >= 2.5, top3  # measured: 2.79
    assert planted_worst > unplanted_best
    assert np.all(np.abs(a.delta) <= 0.01 + 0.02 * np.abs(a.prediction - a.baseline_prediction))
    padded = a.padding["history"]
    assert padded.sum() > 0 and np.all(a.inputs["history"][padded] == 0.0)  # padding: no attribution


# ----------------------------------------------------------------------------- explain.analysis.drivers
# Arrays with known answers: each result against a reference computed here, loop by loop.

import pytest  # noqa: E402

from explain.analysis import drivers as D  # noqa: E402
from explain.batch.store import Rows  # noqa: E402
from explain.batch.summary import from_parts, to_parts  # noqa: E402
from explain.core.errors import ExplainError  # noqa: E402

PERIODS = ("w1", "w2", "w3", "w4", "w5", "w6")
LAYOUT = D.Layout((("history", "temporal", ("outages", "logins"), ("Outages", "App logins"), PERIODS),
                   ("profile", "static", ("price_hike", "fibre"), ("Price hike", "Fibre line"), None)))


def synthetic(n=300, seed=0, padded=0.2):
    """Rows of a temporal-first layout: random values and attributions, the first ``padded``
    share of customers with their first half of history padded (NaN)."""
    rng = np.random.default_rng(seed)
    hv, ha = rng.normal(size=(n, 6, 2)), rng.normal(size=(n, 6, 2))
    sv = np.c_[rng.normal(size=n), rng.integers(0, 2, n)].astype(float)
    sa = rng.normal(size=(n, 2))
    pad = np.zeros((n, 6), bool)
    pad[: int(padded * n), :3] = True
    hv[pad], ha[pad] = np.nan, np.nan
    ids = np.array([f"K{i:04d}" for i in range(n)], dtype=object)
    return Rows(ids, rng.uniform(size=n), {"history": hv, "profile": sv}, {"history": ha, "profile": sa})


def test_ranking_and_window_sums_treat_padding_as_no_data():
    rows = synthetic()
    d = D.compute(None, rows, layout=LAYOUT, window=4)
    n = len(rows.ids)
    ha, hv = rows.attributions["history"], rows.values["history"]
    for j, name in enumerate(("outages", "logins")):
        col = d.column(name)
        for i in range(n):  # the last 4 periods: the padded ones (w1-w3) are not summed, and not zeros
            cells = [ha[i, t, j] for t in range(2, 6) if not np.isnan(ha[i, t, j])]
            assert d.attributions[i, col] == pytest.approx(sum(cells))
            values = [hv[i, t, j] for t in range(2, 6) if not np.isnan(hv[i, t, j])]
            assert d.values[i, col] == pytest.approx(sum(values) / len(values))
    reference = {}
    for j, f in enumerate(d.features):
        column = d.attributions[:, j]
        reference[f.name] = (np.mean(np.abs(column)), np.mean(column))
    assert [r.feature.name for r in d.ranking] == sorted(reference, key=lambda k: -reference[k][0])
    for r in d.ranking:
        assert (r.mean_abs, r.mean_signed) == pytest.approx(reference[r.feature.name])
    assert sum(r.share for r in d.ranking) == pytest.approx(1.0)
    # window 2 of a history whose first 3 periods are padded: w5, w6 are real, so every customer has data
    assert all(r.customers == n for r in d.ranking)


def test_a_window_of_padding_only_leaves_the_customer_out_of_that_mean():
    rows = synthetic(n=50, padded=0.2)
    d = D.compute(None, rows, layout=LAYOUT)  # the whole history: padded customers keep w4-w6
    early = D.compute(None, Rows(rows.ids, rows.prediction,
                                   {**rows.values, "history": rows.values["history"][:, :3]},
                                   {**rows.attributions, "history": rows.attributions["history"][:, :3]}),
                      layout=D.Layout((LAYOUT.inputs[0][:4] + (PERIODS[:3],), LAYOUT.inputs[1])))
    outages = next(r for r in early.ranking if r.feature.name == "outages")
    assert outages.customers == 40  # the 10 padded customers have no data in w1-w3
    kept = ~np.isnan(early.attributions[:, early.column("outages")])
    assert kept.sum() == 40 and not kept[:10].any()
    assert outages.mean_abs == pytest.approx(np.abs(rows.attributions["history"][10:, :3, 0].sum(axis=1)).mean())
    assert next(r for r in d.ranking if r.feature.name == "outages").customers == 50


def test_time_profile_counts_customers_with_data_and_the_recent_periods_holding_90_percent():
    rows = synthetic(n=200, padded=0.25)
    d = D.compute(None, rows, layout=LAYOUT)
    (profile,) = d.time_profiles
    a = rows.attributions["history"]
    for t in range(6):
        has = ~np.isnan(a[:, t, :]).all(axis=1)
        assert profile.customers[t] == has.sum()
        assert profile.mean_abs[t] == pytest.approx(np.abs(a[has, t, :]).sum(axis=1).mean())
    mass = [np.nansum(np.abs(a[:, t, :])) for t in range(6)]
    k = next(k for k in range(1, 7) if sum(mass[6 - k:]) >= 0.9 * sum(mass) - 1e-12)
    assert profile.recent_periods == k
    assert profile.last_share == pytest.approx(mass[-1] / sum(mass))
    assert profile.before_last.tolist() == [5, 4, 3, 2, 1, 0]


def test_a_profile_decided_by_the_last_period_says_so():
    n = 100
    a = np.zeros((n, 6, 2))
    a[:, 5, 0] = 1.0   # 91 % of the mass in the last period
    a[:, 0, 1] = 0.1
    rows = Rows(np.arange(n).astype(str).astype(object), np.full(n, 0.5),
                  {"history": np.ones((n, 6, 2)), "profile": np.ones((n, 2))},
                  {"history": a, "profile": np.zeros((n, 2))})
    (profile,) = D.compute(None, rows, layout=LAYOUT).time_profiles
    assert profile.recent_periods == 1 and profile.last_share == pytest.approx(1 / 1.1)
    assert "The last 1 of 6 periods hold 90 %" in D.profile_sentence(profile)


def test_a_store_explained_at_an_earlier_period_profiles_up_to_that_period():
    """A causal per-period model explained at period 4 of 6 (--output-period 4): periods 5 and 6 are exactly 0 for
    every customer; the profile ends at period 4 ("the last period alone (t4)"), as a history ending there would."""
    n = 100
    a = np.zeros((n, 6, 2))
    a[:, 3, 0] = 1.0
    a[:, 0, 1] = 0.5
    rows = Rows(np.arange(n).astype(str).astype(object), np.full(n, 0.5),
                {"history": np.ones((n, 6, 2)), "profile": np.ones((n, 2))},
                {"history": a, "profile": np.zeros((n, 2))})
    (profile,) = D.compute(None, rows, layout=LAYOUT).time_profiles
    assert len(profile.periods) == 4 and profile.last_share == pytest.approx(1 / 1.5)
    assert f"The last {profile.recent_periods} of 4 periods" in D.profile_sentence(profile)
    assert f"the last period alone ({profile.periods[-1]})" in D.profile_sentence(profile)


def planted_profiles(n=600, seed=3):
    """Three groups: 'price' (a large positive price_hike attribution), 'outage' (a rising
    outages history with a positive attribution) and 'calm' (small negative ones)."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.array(["price", "outage", "calm"]), n // 3)
    hv = rng.poisson(1.0, size=(n, 6, 2)).astype(float)
    ha = rng.normal(0, 0.01, size=(n, 6, 2))
    sv = np.c_[rng.normal(0, 1, n), rng.integers(0, 2, n)].astype(float)
    sa = rng.normal(0, 0.01, size=(n, 2))
    price, outage, calm = group == "price", group == "outage", group == "calm"
    sv[price, 0] += 3
    sa[price, 0] += rng.uniform(0.2, 0.4, price.sum())
    hv[outage, 4:, 0] += 4
    ha[outage, 4:, 0] += rng.uniform(0.1, 0.2, (outage.sum(), 2))
    sa[calm, 0] -= 0.05
    ha[calm, 5, 0] -= 0.05
    prediction = np.where(price | outage, 0.7, 0.1) + rng.normal(0, 0.02, n)
    rows = Rows(np.array([f"K{i:04d}" for i in range(n)], dtype=object), prediction,
                  {"history": hv, "profile": sv}, {"history": ha, "profile": sa})
    return rows, group


def test_segments_recover_planted_reasons_and_name_them():
    rows, group = planted_profiles()
    d = D.compute(None, rows, layout=LAYOUT)
    assert sum(s.size for s in d.segments) == len(group)
    assert sorted(np.concatenate([s.rows for s in d.segments]).tolist()) == list(range(len(group)))
    for planted, words in (("price", ("high price hike",)), ("outage", ("rising outages", "high outages"))):
        best = max(d.segments, key=lambda s: np.mean(group[s.rows] == planted))
        members = group[best.rows]
        assert np.mean(members == planted) >= 0.9          # purity
        assert np.sum(members == planted) >= 0.9 * 200     # recall
        assert best.name.lower().startswith(words), best.name  # the outages rise: high and rising are both true
        assert best.mean_prediction == pytest.approx(rows.prediction[best.rows].mean())
        assert list(best.customers) == list(rows.ids[best.rows])
        assert rows.prediction[best.rows[0]] == rows.prediction[best.rows].max()  # highest risk first
    assert [s.mean_prediction for s in d.segments] == sorted((s.mean_prediction for s in d.segments), reverse=True)
    assert max(d.silhouette, key=d.silhouette.get) == len(d.segments)
    assert len({s.name for s in d.segments}) == len(d.segments)


def test_segments_of_identical_profiles_are_one_segment():
    n = 40
    rows = Rows(np.arange(n).astype(str).astype(object), np.full(n, 0.3),
                  {"history": np.ones((n, 6, 2)), "profile": np.ones((n, 2))},
                  {"history": np.full((n, 6, 2), 0.01), "profile": np.full((n, 2), 0.02)})
    d = D.compute(None, rows, layout=LAYOUT)
    assert len(d.segments) == 1 and d.segments[0].size == n and d.silhouette == {}


@pytest.mark.parametrize("member_values, member_trend, binary, expected", [
    ([1, 1, 1, 0], None, True, "fibre line"),
    ([0, 0, 1, 0], None, True, "no fibre line"),
    ([5, 6, 5, 6], None, False, "high price hike"),
    ([-5, -6, -5, -6], None, False, "low price hike"),
    ([0, 0, 0, 0], [3, 3, 3, 3], False, "rising outages"),
    ([0, 0, 0, 0], [-3, -3, -3, -3], False, "falling outages"),
    ([0, 0, 0, 0], [-0.1, -0.1, -0.1, -0.1], False, "no fall in outages"),  # the others fall by 1
])
def test_driver_words(member_values, member_trend, binary, expected):
    n = 40
    rng = np.random.default_rng(0)
    members = np.zeros(n, bool)
    members[:4] = True
    if binary:
        feature, column = D.Feature("fibre", "Fibre line", "profile", "static"), rng.integers(0, 2, n).astype(float)
    elif member_trend is None:
        feature, column = D.Feature("price_hike", "Price hike", "profile", "static"), rng.normal(0, 1, n)
    else:
        feature, column = D.Feature("outages", "Outages", "history", "temporal"), rng.normal(0, 1, n)
    column[:4] = member_values
    trend = rng.normal(-1 if expected == "no fall in outages" else 0, 0.5, n)
    if member_trend is not None:
        trend[:4] = member_trend
    assert D.driver_words(feature, members, column[:, None], trend[:, None], 0) == expected


def test_drift_is_found_where_planted_and_not_between_the_same_data():
    rows, group = planted_profiles()
    before = D.compute(None, rows, layout=LAYOUT)
    a = before.attributions
    same = D.drift(before.features, a, a.copy())
    assert not same.changed and all(r.change == 0 for r in same.rows)
    assert "No driver's weight changed beyond noise" in same.sentence
    later = a.copy()
    j = before.column("outages")
    later[:, j] *= 1.5  # outages weigh half as much again
    result = D.drift(before.features, later, a)
    assert [r.feature.name for r in result.changed] == ["outages"]
    row = result.changed[0]
    assert row.change == pytest.approx(np.abs(later[:, j]).mean() - np.abs(a[:, j]).mean())
    assert row.low > 0 and "Outages gained weight" in result.sentence


def test_drift_between_two_samples_of_one_population_is_noise():
    first, _ = planted_profiles(seed=3)
    second, _ = planted_profiles(seed=4)
    a = D.compute(None, first, layout=LAYOUT)
    b = D.compute(None, second, layout=LAYOUT, against=first)
    assert b.drift is not None and not b.drift.changed, b.drift.sentence
    # the interval is about the size of the sampling noise: 2 x its standard error is not "changed"
    r = b.drift.rows[0]
    assert r.low < 0 < r.high
    assert np.allclose(sorted(x.before for x in b.drift.rows), sorted(x.mean_abs for x in a.ranking))


@pytest.mark.parametrize("window", [0, 7, 2.5, True])
def test_a_bad_window_is_refused(window):
    with pytest.raises(ExplainError, match=r"window must be a whole number of periods from 1 to 6"):
        D.compute(None, synthetic(n=20), layout=LAYOUT, window=window)


def test_nothing_to_summarise():
    empty = Rows(np.array([], dtype=object), np.zeros(0), {"history": np.zeros((0, 6, 2)),
                   "profile": np.zeros((0, 2))}, {"history": np.zeros((0, 6, 2)), "profile": np.zeros((0, 2))})
    with pytest.raises(ExplainError, match="There is nothing to summarise"):
        D.compute(None, empty, layout=LAYOUT)


def test_json_document_holds_the_design_keys():
    rows, _ = planted_profiles(n=150)
    doc = D.compute(None, rows, layout=LAYOUT).to_dict()
    assert doc["customers"] == 150
    assert set(doc["ranking"][0]) >= {"feature", "input", "mean_abs", "mean_signed"}
    assert [r["mean_abs"] for r in doc["ranking"]] == sorted((r["mean_abs"] for r in doc["ranking"]), reverse=True)
    assert set(doc["segments"][0]) >= {"name", "size", "share", "mean_prediction", "top_drivers", "customers"}
    assert doc["time_profile"][0]["input"] == "history" and len(doc["time_profile"][0]["mean_abs"]) == 6
    json.dumps(doc)  # plain JSON types only


# ----------------------------------------------------------------------------- issue 38: truthful words
# Segment names, words against everyone, feature groups and the ranking's reference, on arrays
# built so that the right answer is known.

STATIC2 = D.Layout((("profile", "static", ("a", "b"), ("Tenure", "First order size"), None),))


def static_rows(values, attributions, prediction=None):
    n = values.shape[0]
    return Rows(np.array([f"S{i:04d}" for i in range(n)], dtype=object),
                  np.full(n, 0.3) if prediction is None else prediction, {"profile": values}, {"profile": attributions})


def test_a_segment_is_named_by_raising_effects_that_are_not_negligible():
    """Churn-reason segments are named after what raises their risk; an effect under NEGLIGIBLE of the top
    feature's mean |attribution| names nothing, so a segment with only such effects has no strong reason."""
    n = 300
    rng = np.random.default_rng(1)
    values = rng.normal(10, 2, (n, 2))
    assigned = np.repeat([0, 1, 2], n // 3)
    attributions = np.zeros((n, 2))
    attributions[:100] = rng.normal([0.2, 0.0], 0.001, (100, 2))       # A raises a lot
    attributions[100:200] = rng.normal([0.004, -0.003], 0.0005, (100, 2))  # both tiny (< 0.1 * top mean |A|)
    attributions[200:] = rng.normal([0.05, 0.06], 0.001, (100, 2))     # both raise, B more
    values[:100, 0] += 5
    prediction = np.where(assigned == 0, 0.8, np.where(assigned == 1, 0.2, 0.5))
    segments, _ = D.describe_segments(assigned, STATIC2.features, D.Customers(
        np.arange(n).astype(str), prediction, None, values, attributions, np.full((n, 2), np.nan)))
    floor = D.NEGLIGIBLE * np.abs(attributions).mean(axis=0).max()
    by_prediction = {round(s.mean_prediction, 1): s for s in segments}
    assert by_prediction[0.8].name == "High tenure"
    assert by_prediction[0.2].name == D.NO_STRONG_REASON and np.abs(attributions[100:200].mean(0)).max() < floor
    assert by_prediction[0.5].name.startswith(("First order size", "High first order size", "Low first order size"))
    for s in segments:  # no name made of a lowering or negligible effect, unless it says "Lower risk"
        named = [d for d in s.drivers if d.words.lower() in s.name.lower()]
        assert all(d.raises and abs(d.mean_attribution) >= floor for d in named) or s.name.startswith("Lower risk")


def test_a_segment_is_named_after_its_main_effect_not_a_small_raising_one():
    """A segment whose mean effects are -0.1 on A and +0.01 on B is named after A (B is under a
    quarter of the largest |mean|), and A is said to lower its risk, never listed as a reason to churn."""
    n = 200
    rng = np.random.default_rng(0)
    values = rng.normal(10, 2, (n, 2))
    attributions = np.zeros((n, 2))
    assigned = np.repeat([0, 1], n // 2)
    values[:100, 0] += 5  # the first segment: long tenure...
    attributions[:100] = rng.normal([-0.1, 0.01], 0.001, (100, 2))  # ...which lowers its risk; B a little up
    attributions[100:] = rng.normal([0.0, 0.08], 0.001, (100, 2))   # the second: B raises it
    prediction = np.where(assigned == 0, 0.1, 0.6)
    features = STATIC2.features
    segments, _ = D.describe_segments(assigned, features, D.Customers(
        np.arange(n).astype(str), prediction, None, values, attributions, np.full((n, 2), np.nan)))
    low = next(s for s in segments if s.mean_prediction < 0.2)
    # not "High first order size" (+0.01 < 0.25 * 0.1), and said to be a lower-risk segment: its main effect lowers
    assert low.name == "Lower risk: high tenure", low.name
    assert [d.feature.name for d in low.drivers] == ["a"]
    (main,) = low.drivers
    assert main.mean_attribution == pytest.approx(attributions[:100, 0].mean()) and not main.raises
    assert main.segment_value == pytest.approx(values[:100, 0].mean())
    assert main.everyone_value == pytest.approx(values[:, 0].mean())
    text = D.reason_text(main)
    assert f"{main.segment_value:.3g} on average here against {main.everyone_value:.3g} for everyone" in text
    assert "lowers the risk by 0.1" in text and "raises" not in text
    high = next(s for s in segments if s.mean_prediction > 0.5)
    assert high.drivers[0].raises and "raises the risk by 0.08" in D.reason_text(high.drivers[0])
    # the JSON says the same, per effect
    d = D.compute(None, static_rows(values, attributions, prediction), layout=STATIC2)
    for s in d.to_dict()["segments"]:
        for x in s["top_drivers"]:
            assert x["effect"] == ("raises" if x["mean_attribution"] > 0 else "lowers")
            assert x["reason"].endswith(f"{x['effect']} the risk by {abs(x['mean_attribution']):.3g} on average")


def test_main_effects_keep_either_way_what_reaches_a_quarter_of_the_largest():
    mean = np.array([0.01, -0.1, 0.03, -0.024, 0.0])
    assert D.main_effects(mean) == [1, 2]  # -0.1 and +0.03 (>= 0.025); 0.01 and -0.024 are not
    assert D.main_effects(np.zeros(3)) == []


def test_words_compare_the_segments_mean_with_everyones_mean_on_a_skewed_feature():
    """First order size, skewed: the segment's mean (2.0) is above everyone's median (about 1) but
    below everyone's mean (about 3): it is a low first order size, not a high one."""
    rng = np.random.default_rng(5)
    n = 2000
    column = rng.lognormal(0.0, 1.5, n)
    members = np.zeros(n, bool)
    members[:100] = True
    column[:100] = 2.0
    assert np.median(column) < 2.0 < column.mean()
    feature = D.Feature("b", "First order size", "profile", "static")
    words = D.driver_words(feature, members, column[:, None], np.full((n, 1), np.nan), 0)
    assert words == "low first order size"
    column[:100] = column.mean() + 0.5  # and above everyone's mean: high
    assert D.driver_words(feature, members, column[:, None], np.full((n, 1), np.nan), 0) == "high first order size"


def correlated(n=1500, seed=2, padded=0.3):
    """Static: orders, items (monotone in one latent purchase frequency), u1 (independent);
    history: spend (follows the latent, the first ``padded`` share of customers with half their
    history padded) and u2 (independent). Attributions: independent noise, larger on the purchases."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    orders = np.round(np.exp(z) * 3 + rng.normal(0, 0.3, n))
    items = np.exp(1.2 * z) * 5 + rng.normal(0, 0.5, n)
    u1 = rng.normal(size=n)
    spend = (20 + 8 * z)[:, None] + rng.normal(0, 3, (n, 6))
    u2 = rng.normal(size=(n, 6))
    hv = np.stack([spend, u2], axis=2)
    sv = np.c_[orders, items, u1]
    ha = rng.normal(0, 0.01, (n, 6, 2))
    ha[:, :, 0] -= 0.02 * z[:, None]  # spending less than average raises the risk
    sa = np.c_[-0.05 * z, -0.04 * z, rng.normal(0, 0.01, n)] + rng.normal(0, 0.005, (n, 3))
    pad = np.zeros((n, 6), bool)
    pad[: int(padded * n), :3] = True
    hv[pad], ha[pad] = np.nan, np.nan
    layout = D.Layout((("profile", "static", ("orders", "items", "u1"), ("Orders", "Items", "Unrelated one"), None),
                       ("history", "temporal", ("spend", "u2"), ("Spend", "Unrelated two"), PERIODS)))
    rows = Rows(np.array([f"G{i:04d}" for i in range(n)], dtype=object), rng.uniform(size=n),
                  {"profile": sv, "history": hv}, {"profile": sa, "history": ha})
    return rows, layout


def test_groups_are_found_among_features_built_to_correlate_and_not_among_the_others():
    rows, layout = correlated()
    d = D.compute(None, rows, layout=layout, baseline="mean")
    (group,) = d.groups
    assert {f.name for f in group.members} == {"orders", "items", "spend"} and group.found
    assert group.how == "found from the data: these move together"
    # the customer-level values behind it, checked here with scipy: every pair |rho| >= 0.7, the others < 0.7
    from scipy.stats import spearmanr
    level = {"orders": rows.values["profile"][:, 0], "items": rows.values["profile"][:, 1],
             "u1": rows.values["profile"][:, 2], "spend": np.nanmean(rows.values["history"][:, :, 0], 1),
             "u2": np.nanmean(rows.values["history"][:, :, 1], 1)}
    for x in ("orders", "items", "spend"):
        for y in level:
            if y != x:
                rho = abs(spearmanr(level[x], level[y]).statistic)
                assert (rho >= 0.7) == (y in {"orders", "items", "spend"}), (x, y, rho)
    shares = {r.feature.name: r.share for r in d.ranking}
    assert group.share == pytest.approx(shares["orders"] + shares["items"] + shares["spend"])
    assert group.mean_abs == pytest.approx(sum(r.mean_abs for r in d.ranking if r.feature.name != "u1"
                                               and r.feature.name != "u2"))
    summed = np.nansum(np.c_[d.attributions[:, d.column("orders")], d.attributions[:, d.column("items")],
                             d.attributions[:, d.column("spend")]], axis=1)
    assert group.together == pytest.approx(np.abs(summed).mean())  # the group as one feature: exact sums
    assert group.name == f"{group.members[0].label}, {group.members[1].label.lower()} and " \
                         f"{group.members[2].label.lower()}"
    # the grouped ranking: the group in place of its members, first
    top = d.grouped_ranking[0]
    assert top.feature.role == "group" and top.share == pytest.approx(group.share)
    assert [r.feature.name for r in d.grouped_ranking[1:]] == [r.feature.name for r in d.ranking
                                                                if r.feature.name in ("u1", "u2")]
    assert f"{group.name} (group of 3, {100 * group.share:.0f} %" in d.group_sentence
    assert f"lower {group.members[0].label.lower()} than the average customer raises it" in d.group_sentence
    assert "found from the data: these move together" in d.group_sentence
    doc = d.to_dict()
    (entry,) = doc["groups"]
    assert set(entry) >= {"name", "features", "share", "found"} and entry["found"] is True
    assert set(entry["features"]) == {"orders", "items", "spend"} and entry["share"] == pytest.approx(group.share)
    assert {r["feature"]: r.get("group") for r in doc["ranking"]} == {"orders": group.name, "items": group.name,
                                                                      "spend": group.name, "u1": None, "u2": None}
    json.dumps(doc)
    # the segment heatmap's group row is the sum of its members' rows
    rows_shown, z = d.segment_effects(grouped=True)
    k = [f.name for f in rows_shown].index(group.name)
    for s, line in zip(d.segments, z):
        assert line[k] == pytest.approx(sum(s.mean_attributions[j] for j in group.columns))


def test_declared_groups_replace_discovery_and_single_members_are_dropped():
    rows, layout = correlated(n=400)
    declared = D.Layout(layout.inputs, groups=(("Noise", ("u1", "u2")), ("Alone", ("orders",))))
    d = D.compute(None, rows, layout=declared)
    (group,) = d.groups
    assert group.name == "Noise" and not group.found and {f.name for f in group.members} == {"u1", "u2"}
    assert d.to_dict()["groups"][0]["found"] is False and "declared in bundle.json" in d.group_sentence
    uncorrelated = D.compute(None, synthetic(n=300), layout=LAYOUT)
    assert uncorrelated.groups == () and uncorrelated.to_dict()["groups"] == [] and uncorrelated.group_sentence is None


def test_the_ranking_says_what_its_directions_are_relative_to():
    rows, layout = correlated(n=800)
    d = D.compute(None, rows, layout=layout, source={"settings": {"baseline": "mean"}})
    spend = next(r for r in d.ranking if r.feature.name == "spend")
    assert spend.value_effect < -0.7  # less spend, more risk
    assert spend.mean_signed != 0
    assert "relative to the average customer (the baseline)" in d.sentence
    assert "lower than the average customer raises it" in D.direction_words(spend, "mean")
    doc = d.to_dict()
    assert doc["reference"] == "the average customer"
    entry = next(r for r in doc["ranking"] if r["feature"] == "spend")
    assert entry["direction_words"].endswith("lower than the average customer raises it")
    assert D.reference_words("cohort:0") == "the average customer whose outcome is 0"
    assert D.reference_words(None) == "the baseline"
    assert "a higher value raises it" in D.direction_words(D.Ranked(spend.feature, 1.0, 0.5, 1.0, 9, 0.9), "zero")


def test_the_summary_parts_keep_groups_reasons_and_the_reference():
    rows, layout = correlated(n=500)
    d = D.compute(None, rows, layout=layout, baseline="median")
    back = from_parts(*to_parts(d))
    assert back.to_dict() == d.to_dict()
    assert back.groups == d.groups and back.reference == "the typical (median) customer"
    assert [x.segment_value for s in back.segments for x in s.drivers] == \
           [x.segment_value for s in d.segments for x in s.drivers]


def test_a_yes_no_feature_says_having_it_and_the_profile_names_an_earlier_peak():
    n = 300
    rng = np.random.default_rng(4)
    fibre = rng.integers(0, 2, n).astype(float)
    values = np.c_[rng.normal(size=n), fibre]
    attributions = np.c_[rng.normal(0, 0.01, n), np.where(fibre == 1, -0.05, 0.05)]  # no fibre: higher risk
    d = D.compute(None, static_rows(values, attributions), layout=STATIC2, baseline="mean")
    first = next(r for r in d.ranking if r.feature.name == "b")
    assert first.binary and first.value_effect < -0.9
    assert D.direction_words(first, "mean").endswith("; not having it raises it")
    # a profile whose largest share is before its recent periods says where
    a = np.zeros((n, 6, 2))
    a[:, 0, 0] = 0.3  # the first period: 30 % of the effect, the other five 14 % each
    a[:, 1:, 1] = 0.14
    rows = Rows(np.arange(n).astype(str).astype(object), np.full(n, 0.5),
                  {"history": np.ones((n, 6, 2)), "profile": np.ones((n, 2))},
                  {"history": a, "profile": np.zeros((n, 2))})
    (profile,) = D.compute(None, rows, layout=LAYOUT).time_profiles
    assert profile.recent_periods == 6 and profile.peak == 0
    assert profile.shares[0] == pytest.approx(0.3 / 1.0)
    a[:, 0, 0], a[:, 1, 0] = 0.9, 0.0  # now 0.9 of 1.6 in the first: the recent 5 hold less than 90 %
    (profile,) = D.compute(None, rows, layout=LAYOUT).time_profiles
    assert profile.recent_periods == 6  # the whole history is needed for 90 %: no bar is light
    a[:, 0, 0] = 0.05  # 0.05 of 0.75: the last 5 hold 93 %, the first is light and the smallest
    (profile,) = D.compute(None, rows, layout=LAYOUT).time_profiles
    assert profile.recent_periods == 5 and "The largest single share" not in D.profile_sentence(profile)
    # the tallest bar before the recent periods: 8 % in the first of 20 periods, 92 % spread over the last 19
    t = 20
    periods = tuple(f"p{k:02d}" for k in range(t))
    long = D.Layout((("history", "temporal", ("calls",), ("Calls",), periods),))
    a = np.full((n, t, 1), 0.92 / 19)
    a[:, 0, 0] = 0.08
    (profile,) = D.compute(None, Rows(np.arange(n).astype(str).astype(object), np.full(n, 0.5),
                                        {"history": np.ones((n, t, 1))}, {"history": a}), layout=long).time_profiles
    assert profile.recent_periods == 19 and profile.peak == 0 and not profile.recent[0]
    assert "The largest single share, 8.0 %, is earlier: p00 (19 periods before the last), where 300 customers " \
           "have data." in D.profile_sentence(profile)


def test_a_found_groups_name_lists_short_members_or_says_and_related():
    def f(label):
        return D.Feature(label.lower(), label, "profile", "static")

    assert D._group_name([f("Orders"), f("Items"), f("Spend")]) == "Orders, items and spend"
    assert D._group_name([f("Orders"), f("Items"), f("Spend"), f("Visits")]) == "Orders and related"
    assert D._group_name([f("Bill amount (USD)"), f("Monthly charge (USD)"), f("Number of products")]) == \
        "Bill amount (USD) and related"  # listing them would pass 40 characters
