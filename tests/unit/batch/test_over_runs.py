"""Drivers over runs and the biggest movers, from stores whose attributions and scores the test planted
(tests/support/planted_stores.py: no model call), checked against numbers computed here from the planted arrays."""

from __future__ import annotations

import json

import keras
import numpy as np
import pandas as pd
import pytest

from explain.analysis.drivers import Layout, effects
from explain.analysis.over_runs import TOO_FEW
from explain.batch import drivers as batch_drivers
from explain.batch.store import Rows, open_store
from explain.batch.stores import in_run_order, stores_of
from explain.bundle.load import load_bundle
from explain.bundle.save import save_bundle
from explain.cli import main
from explain.core.errors import ExplainError
from explain.core.settings import Settings
from tests.support.planted_stores import planted_attributions, write_store

MONTHS = [f"2025-{m:02d}" for m in range(1, 7)]
N = 600
SCALES = (1.0, 1.6, 2.4, 3.5)  # the first static feature's attributions, run by run


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    rng = np.random.default_rng(5)
    history, account = keras.Input((6, 2), name="usage"), keras.Input((3,), name="account")
    joined = keras.layers.Concatenate()([keras.layers.Flatten()(history), account])
    model = keras.Model([history, account], keras.layers.Dense(1, activation="sigmoid")(joined))
    static = pd.DataFrame({"customer_id": [f"K{i:04d}" for i in range(N)], "price": rng.normal(size=N),
                           "tenure": rng.normal(size=N), "plan": rng.normal(size=N)})
    path = save_bundle(tmp_path_factory.mktemp("runs") / "bundle", model, static, rng.normal(size=(N, 6, 2)),
                       periods=MONTHS, temporal_features=["calls", "drops"],
                       display_names={"price": "Price", "calls": "Support calls"})
    return load_bundle(path)


def expected_shares(b, attributions) -> np.ndarray:
    """Each feature's share of the total mean |attribution| (a history's summed over its periods), here."""
    per_customer = []
    for spec in Layout.of(b).inputs:
        a = attributions[spec[0]]
        per_customer.append(a if spec[1] == "static" else a.sum(axis=1))
    mean_abs = np.abs(np.concatenate(per_customer, axis=1)).mean(axis=0)
    return mean_abs / mean_abs.sum()


def monthly_stores(b, folder, scales, same=False):
    """One store per scale, finished in reverse order of their months (the months order them)."""
    out = []
    for k, scale in enumerate(scales):
        planted = planted_attributions(b, seed=0 if same else 10 + k, scale={0: scale})
        path = write_store(b, folder / f"run{k}", planted, completed=f"2026-0{9 - k}-01T00:00:00Z",
                           last_periods=[f"2025-{m:02d}" for m in range(1 + k, 7 + k)])
        out.append((path, planted))
    return out


def test_a_feature_planted_to_grow_rises_run_by_run_and_the_words_say_so(bundle, tmp_path):
    stores = monthly_stores(bundle, tmp_path, SCALES)
    result = batch_drivers.over_runs(bundle, [p for p, _ in stores[::-1]], cache=False)  # any order given
    assert [r.label for r in result.runs] == ["2025-06", "2025-07", "2025-08", "2025-09"]  # by the data's last month
    assert [r.store for r in result.runs] == [str(p) for p, _ in stores]
    p = len(Layout.of(bundle).features)
    for run, (_, planted) in zip(result.runs, stores):
        assert np.allclose(run.share[:p], expected_shares(bundle, planted), atol=1e-12)
        assert np.all(run.low <= run.share) and np.all(run.share <= run.high)
        assert np.all(run.high - run.low > 0)
    price = [r.share[0] for r in result.runs]
    assert np.all(np.diff(price) > 0)
    top = result.moves[0]
    assert top.feature.name == "price" and top.changed and top.monotone
    assert result.sentence.startswith(f"Price rose from {100 * price[0]:.0f} % to {100 * price[-1]:.0f} % of the "
                                      "effect over 4 runs (2025-06 to 2025-09), at every run"), result.sentence


def test_equal_stores_move_within_the_intervals_and_nothing_is_claimed(bundle, tmp_path):
    stores = monthly_stores(bundle, tmp_path, (1.0, 1.0, 1.0), same=True)
    result = batch_drivers.over_runs(bundle, [p for p, _ in stores], cache=False)
    assert not any(m.changed for m in result.moves)
    assert all(m.change == pytest.approx(0, abs=1e-12) for m in result.moves)
    assert result.sentence.startswith("No feature's share of the effect moved beyond its interval over 3 runs "
                                      "(2025-06 to 2025-08)"), result.sentence


def test_the_share_interval_is_a_plain_bootstrap_of_customers(bundle, tmp_path):
    """With at most 2,000 customers each bootstrap group is one customer: the standard error of a share must be
    that of a plain bootstrap over customers, computed here with many more resamples."""
    (path, planted), = monthly_stores(bundle, tmp_path, (2.0,))
    other = write_store(bundle, tmp_path / "other", planted_attributions(bundle, seed=99))
    result = batch_drivers.over_runs(bundle, [path, other], cache=False)
    run = next(r for r in result.runs if r.store == str(path))
    per_customer = np.abs(np.concatenate([planted["static"], planted["temporal"].sum(axis=1)], axis=1))
    rng = np.random.default_rng(1)
    boot = np.stack([per_customer[rng.integers(N, size=N)].mean(axis=0) for _ in range(3000)])
    reference = (boot / boot.sum(axis=1, keepdims=True)).std(axis=0)
    order = [f.name for f in result.rows[:5]]
    wanted = reference[[["price", "tenure", "plan", "calls", "drops"].index(n) for n in order]]
    assert np.allclose(run.error[:5], wanted, rtol=0.25), (run.error[:5], wanted)


def test_runs_without_distinct_calendar_months_are_ordered_by_when_they_finished(bundle, tmp_path):
    planted = planted_attributions(bundle, seed=1)
    paths = [write_store(bundle, tmp_path / f"s{k}", planted, completed=f"2026-0{5 - k}-02T10:00:00Z")
             for k in range(3)]
    ordered = in_run_order([open_store(p) for p in paths])
    assert [label for label, _ in ordered] == ["2026-03-02 10:00", "2026-04-02 10:00", "2026-05-02 10:00"]
    assert [s.path.name for _, s in ordered] == ["s2", "s1", "s0"]


def test_a_single_run_is_refused_with_the_command_that_makes_more(bundle, tmp_path):
    (path, _), = monthly_stores(bundle, tmp_path, (1.0,))
    with pytest.raises(ExplainError, match="at least two stores"):
        batch_drivers.over_runs(bundle, [path])
    assert "python -m explain batch" in TOO_FEW


def test_a_runs_groups_are_kept_next_to_the_store_and_read_back_equal(bundle, tmp_path, monkeypatch):
    stores = [p for p, _ in monthly_stores(bundle, tmp_path, (1.0, 2.0))]
    first = batch_drivers.over_runs(bundle, stores)
    assert len(list(tmp_path.glob("run*.shares-*.npz"))) == 2
    monkeypatch.setattr(batch_drivers, "run_sums", lambda *a, **k: pytest.fail("the store was read again"))
    again = batch_drivers.over_runs(bundle, stores)
    assert again.sentence == first.sentence
    assert all(np.array_equal(a.share, b.share) and np.array_equal(a.low, b.low) for a, b in zip(first.runs,
                                                                                                 again.runs))


def test_effects_sum_a_history_over_the_window(bundle):
    planted = planted_attributions(bundle, seed=3)
    rows = Rows(np.asarray(bundle.ids, object), np.zeros(N), {}, planted)
    got = effects(rows, Layout.of(bundle), window=2)
    assert np.allclose(got, np.concatenate([planted["static"], planted["temporal"][:, -2:].sum(axis=1)], axis=1))


# ----------------------------------------------------------------------------- the biggest movers


def reference_movers(bundle, planted, now, then, n):
    """Brute force over every customer: the n largest rises (> 0), ties in store order, each with the cell of the
    largest positive attribution, named here from the bundle's columns and months."""
    names = [(c, None) for c in ["price", "tenure", "plan"]] + [(c, m) for m in MONTHS for c in ["calls", "drops"]]
    cells = np.concatenate([planted["static"], planted["temporal"].reshape(N, -1)], axis=1)
    rise = now - then
    order = [i for i in np.argsort(-rise, kind="stable") if rise[i] > 0][:n]
    return [(str(bundle.ids[i]), then[i], now[i], *names[int(np.argmax(cells[i]))]) for i in order]


@pytest.fixture
def previous_store(bundle, tmp_path, monkeypatch):
    """A store of the baseline previous where the bundle's stores are looked for ($EXPLAIN_STORES/<hash>/)."""
    monkeypatch.setenv("EXPLAIN_STORES", str(tmp_path / "stores"))
    planted = planted_attributions(bundle, seed=7)
    rng = np.random.default_rng(8)
    then = rng.uniform(0.05, 0.6, N)
    now = np.clip(then + rng.normal(0, 0.15, N), 0, 1)
    now[[17, 400]] = then[[17, 400]] + 0.35  # a tie: the store's order decides
    path = write_store(bundle, tmp_path / "stores" / bundle.content_hash[:16] / "previous", planted,
                       settings=Settings(baseline="previous"),
                       prediction=now, baseline_prediction=then, chunk_size=37)
    return path, planted, now, then


def test_movers_are_the_largest_rises_with_their_first_reasons(bundle, previous_store):
    path, planted, now, then = previous_store
    result = batch_drivers.movers(bundle, path, n=12, cache=False)
    wanted = reference_movers(bundle, planted, now, then, 12)
    got = [(m.customer, m.then, m.now, m.feature, m.period) for m in result.rows]
    assert got == [(cid, pytest.approx(a), pytest.approx(b), f, p) for cid, a, b, f, p in wanted]
    rise = now - then
    assert (result.customers, result.rose, result.above) == (N, int((rise > 0).sum()), int((rise > 0.2).sum()))
    top = result.rows[0]
    reason = f"support calls in {top.period}" if top.feature == "calls" else top.reason
    assert result.sentence.startswith(f"{result.above} customers' risk rose by more than 0.2 since 2025-05; the "
                                      f"biggest: {top.customer}, {top.then:.2f} -> {top.now:.2f}, mainly {reason}.")


def test_movers_are_found_in_the_bundles_store_folders_and_kept_next_to_the_store(bundle, previous_store,
                                                                                 monkeypatch):
    path, *_ = previous_store
    assert [s.path.name for s in stores_of(bundle).changes()] == ["previous"]
    first = batch_drivers.movers(bundle)
    assert list(path.parent.glob("previous.movers-*.json"))
    monkeypatch.setattr(batch_drivers, "find_movers", lambda *a, **k: pytest.fail("the store was read again"))
    assert batch_drivers.movers(bundle) == first


@pytest.mark.parametrize("baseline, message", [("mean", "not with the customers at an earlier time")])
def test_a_store_of_another_baseline_gives_no_movers(bundle, tmp_path, baseline, message):
    path = write_store(bundle, tmp_path / "mean", planted_attributions(bundle, seed=2),
                       settings=Settings(baseline=baseline))
    with pytest.raises(ExplainError, match=message):
        batch_drivers.movers(bundle, path)


def test_no_previous_store_says_the_command_that_makes_one(bundle, tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLAIN_STORES", str(tmp_path / "none"))
    with pytest.raises(ExplainError, match="python -m explain batch --bundle .* --baseline previous --out"):
        batch_drivers.movers(bundle)


# ----------------------------------------------------------------------------- the command line


def test_the_drivers_command_writes_the_series_and_the_movers(bundle, previous_store, tmp_path):
    runs = [p for p, _ in monthly_stores(bundle, tmp_path / "months", SCALES[:3])]
    out = tmp_path / "drivers.json"
    args = ["drivers", "--bundle", str(bundle.path), "--store", str(runs[0]), "--out", str(out),
            *(x for p in runs for x in ("--over", str(p))), "--movers", str(previous_store[0])]
    assert main(args) == 0
    doc = json.loads(out.read_text())
    series = doc["drift_over_runs"]
    assert [r["label"] for r in series["runs"]] == ["2025-06", "2025-07", "2025-08"]
    assert set(series["runs"][0]) >= {"store", "label", "shares"}
    share = series["runs"][0]["shares"]["price"]
    assert set(share) == {"share", "low", "high"} and share["low"] <= share["share"] <= share["high"]
    assert series["sentence"].startswith("Price rose")
    assert doc["movers"]["movers"][0]["customer"] == batch_drivers.movers(bundle, previous_store[0]).rows[0].customer
    assert set(doc["movers"]["movers"][0]) >= {"customer", "then", "now", "rise", "reason"}
    html_out = tmp_path / "drivers.html"
    assert main([*args[:5], "--out", str(html_out), *args[7:]]) == 0
    text = html_out.read_text()
    assert "Drivers over runs" in text and "Biggest movers since 2025-05" in text


def test_a_groups_share_is_its_members_shares_added_with_its_own_interval(bundle, tmp_path):
    stores = monthly_stores(bundle, tmp_path, (1.0, 3.0))
    result = batch_drivers.over_runs(bundle, [p for p, _ in stores], groups=[("Usage", (3, 4))], cache=False)
    assert [f.name for f in result.rows] == ["price", "tenure", "plan", "calls", "drops", "Usage"]
    assert result.rows[-1].role == "group"
    for run, (_, planted) in zip(result.runs, stores):
        assert run.share[5] == pytest.approx(expected_shares(bundle, planted)[3:].sum())
        assert run.low[5] <= run.share[5] <= run.high[5]
    doc = result.to_dict()
    assert set(doc["runs"][0]["group_shares"]) == {"Usage"} and "Usage" not in doc["runs"][0]["shares"]
    usage = next(m for m in result.moves if m.feature.name == "Usage")
    assert usage.changed and usage.change < 0  # the price hike's growing share leaves less to the histories
    assert sorted(result.top(10)) == [0, 1, 2, 3, 4]
    assert sorted(result.top(10, grouped=True)) == [0, 1, 2, 5]  # the group in place of its members


def test_without_stores_the_runs_are_every_finished_store_of_the_default_settings(bundle, tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLAIN_STORES", str(tmp_path / "stores"))
    folder = tmp_path / "stores" / bundle.content_hash[:16]
    for k in range(3):
        write_store(bundle, folder / f"run{k}", planted_attributions(bundle, 20 + k, {0: 1 + k}),
                    completed=f"2026-0{k + 2}-01T00:00:00Z")
    write_store(bundle, folder / "zero", planted_attributions(bundle, 1), settings=Settings(baseline="zero"))
    result = batch_drivers.over_runs(bundle)
    assert [r.store for r in result.runs] == [str(folder / f"run{k}") for k in range(3)]  # not the zero baseline
    assert [r.label for r in result.runs] == ["2026-02-01 00:00", "2026-03-01 00:00", "2026-04-01 00:00"]


def test_a_stores_kept_files_are_pruned_to_the_most_recent(bundle, tmp_path):
    from explain.analysis.drivers import Sums
    from explain.batch.summary import KEEP_SUMMARIES, side_path, write_sums

    store = open_store(write_store(bundle, tmp_path / "june", planted_attributions(bundle, 1)))
    paths = [side_path(store, "shares", {"window": w}, "npz") for w in range(KEEP_SUMMARIES + 3)]
    for path in paths:
        assert write_sums(path, Sums.empty(2, 5))
    kept = sorted(tmp_path.glob("june.shares-*.npz"))
    assert len(kept) == KEEP_SUMMARIES and paths[-1] in kept
