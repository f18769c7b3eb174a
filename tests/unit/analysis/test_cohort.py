"""Many customers at once (explain/analysis/cohort.py): sampling, batches, filters, aggregates, a cohort's mean."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from explain.analysis import cohort
from explain.bundle.load import Bundle
from explain.core.errors import ExplainError, Stopped
from tests.support import models as M

RNG = np.random.default_rng(3)


def fake_bundle(n, labels=None):
    return SimpleNamespace(ids=np.array([f"K{i:04d}" for i in range(n)], dtype=object), n_customers=n,
                           labels=None if labels is None else np.asarray(labels))


@pytest.mark.parametrize("size", ["200", "500", "1000"])
def test_a_sample_is_seeded_in_table_order_and_without_repeats(size):
    bundle = fake_bundle(1500)
    ids = cohort.sample_ids(bundle, size)
    assert len(ids) == len(set(ids)) == int(size)
    rows = [int(i[1:]) for i in ids]
    assert rows == sorted(rows) and set(ids) <= set(bundle.ids)
    assert cohort.sample_ids(bundle, size) == ids  # the same sample on every rerun and session
    assert cohort.sample_ids(bundle, size, seed=1) != ids


def test_all_or_more_than_there_are_is_everyone():
    bundle = fake_bundle(150)
    assert cohort.sample_ids(bundle, "all") == bundle.ids.tolist() == cohort.sample_ids(bundle, "200")


@pytest.mark.parametrize("n, size", [(0, 100), (1, 100), (100, 100), (101, 100), (250, 100), (7, 3)])
def test_batches_cut_the_ids_in_order_with_only_the_last_one_shorter(n, size):
    ids = [f"x{i}" for i in range(n)]
    parts = cohort.batches(ids, size)
    assert [i for part in parts for i in part] == ids
    assert all(len(part) == size for part in parts[:-1]) and all(0 < len(part) <= size for part in parts)


def test_gather_joins_finished_batches_in_batch_order_whatever_order_they_finished():
    ids = [f"x{i}" for i in range(25)]
    static, temporal = RNG.normal(size=(25, 4)), RNG.normal(size=(25, 3, 2))
    part = lambda rows: SimpleNamespace(static=static[rows], temporal=temporal[rows])  # noqa: E731
    parts = {2: part(slice(20, 25)), 0: part(slice(0, 10))}  # batch 1 not finished (stopped)
    done, s, t, pad = cohort.gather(parts, ids, size=10)
    assert pad.shape == (15, 3) and not pad.any()  # nothing can be padded here
    assert done == ids[:10] + ids[20:]
    keep = list(range(10)) + list(range(20, 25))
    np.testing.assert_array_equal(s, static[keep])
    np.testing.assert_array_equal(t, temporal[keep])


def test_risk_bands_split_every_risk_once_and_match_their_limits():
    risk = np.concatenate([RNG.uniform(size=200), [0.0, 0.3, 0.6, 1.0, 0.2999, 0.5999]])
    counts = sum(cohort.in_bands(risk, [band]).astype(int) for band in cohort.BANDS)
    assert (counts == 1).all()  # each customer in exactly one band, 1.0 included
    np.testing.assert_array_equal(cohort.in_bands(risk, ["low (< 0.3)"]), risk < 0.3)
    np.testing.assert_array_equal(cohort.in_bands(risk, ["high (>= 0.6)"]), risk >= 0.6)
    np.testing.assert_array_equal(cohort.in_bands(risk, ["low (< 0.3)", "high (>= 0.6)"]), (risk < 0.3) | (risk >= 0.6))
    assert not cohort.in_bands(risk, []).any()


def test_label_filter_compares_labels_as_text():
    row_labels = np.array([0.0, 1.0, 1.0, 0.0, 2.0])
    np.testing.assert_array_equal(cohort.with_labels(row_labels, ["1"]), [False, True, True, False, False])
    np.testing.assert_array_equal(cohort.with_labels(row_labels, ["0", "2"]), [True, False, False, True, True])
    assert not cohort.with_labels(row_labels, []).any()


def test_aggregates_equal_loops_over_customers():
    n, S, T, F = 9, 3, 4, 2
    static, temporal = RNG.normal(size=(n, S)), RNG.normal(size=(n, T, F))
    agg = cohort.aggregate(static, temporal, ["a", "b", "c"], ["u", "v"])
    assert agg.feature_names == ["a (static)", "b (static)", "c (static)", "u (all periods)", "v (all periods)"]
    for t in range(T):
        for f in range(F):
            assert agg.mean_abs[t, f] == pytest.approx(sum(abs(temporal[i, t, f]) for i in range(n)) / n)
            assert agg.signed_mean[t, f] == pytest.approx(sum(temporal[i, t, f] for i in range(n)) / n)
    for j in range(S):
        assert agg.feature_abs[j] == pytest.approx(np.mean([abs(static[i, j]) for i in range(n)]))
        assert agg.feature_signed[j] == pytest.approx(np.mean([static[i, j] for i in range(n)]))
    for f in range(F):
        totals = [sum(temporal[i, t, f] for t in range(T)) for i in range(n)]
        assert agg.feature_abs[S + f] == pytest.approx(np.mean(np.abs(totals)))
        assert agg.feature_signed[S + f] == pytest.approx(np.mean(totals))
    for t in range(T):
        assert agg.period_abs[t] == pytest.approx(np.mean([sum(abs(temporal[i, t, f]) for f in range(F))
                                                           for i in range(n)]))
        assert agg.period_signed[t] == pytest.approx(np.mean([sum(temporal[i, t, f] for f in range(F))
                                                              for i in range(n)]))


def test_cohort_ids_are_a_seeded_sample_of_that_label_only():
    row_labels = np.array([1.0, 0.0] * 150 + [2.0])
    bundle = fake_bundle(len(row_labels), row_labels)
    ids = cohort.cohort_ids(bundle, "0", limit=100)
    assert len(ids) == len(set(ids)) == 100
    assert all(row_labels[int(i[1:])] == 0.0 for i in ids)
    assert cohort.cohort_ids(bundle, "0", limit=100) == ids
    assert cohort.cohort_ids(bundle, "2") == ["K0300"]  # fewer than the limit: all of them


@pytest.mark.parametrize("row_labels, value, message", [
    (None, "0", cohort.NO_LABELS),
    ([0, 1, 0], "7", cohort.EMPTY_COHORT.format(value="7")),
])
def test_no_cohort_is_a_clear_error(row_labels, value, message):
    with pytest.raises(ExplainError) as caught:
        cohort.cohort_ids(fake_bundle(3, row_labels), value)
    assert str(caught.value) == message


def linear_bundle(n=40):
    model, ws, wt = M.linear_model(seed=4, temporal_first=True)  # not the demo: temporal input first, linear
    data = M.data(n=n, seed=5)
    bundle = Bundle.from_arrays(model, data["static"], data["temporal"], ids=[f"L{i:02d}" for i in range(n)])
    return dataclasses.replace(bundle, labels=np.array([0, 1, 1, 0] * (n // 4)), label_name="y",
                               positive_label=1), ws, wt


def test_scores_are_the_models_output_for_every_customer_in_any_chunking():
    bundle, ws, wt = linear_bundle(40)
    expected = (bundle.static.astype(np.float64) @ ws + np.einsum("ntf,tf->n", bundle.temporal.astype(np.float64), wt)
                + 0.3)
    for chunk in (1, 7, 40, 1024):
        calls = []
        scores = cohort.scores(bundle, should_stop=lambda: calls.append(1) or False, chunk=chunk)
        assert scores.shape == (40, 1) and len(calls) == -(-40 // chunk)
        np.testing.assert_allclose(scores[:, 0], expected, rtol=1e-5, atol=1e-5)


def test_scores_stop_when_asked_between_chunks():
    bundle, *_ = linear_bundle(40)
    calls = []

    def should_stop():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # what a rerun does: an exception the library does not catch
        return False

    with pytest.raises(KeyboardInterrupt):
        cohort.scores(bundle, should_stop=should_stop, chunk=10)
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(Stopped):
        cohort.scores(bundle, should_stop=lambda: calls.append(1) or len(calls) == 2, chunk=10)
    assert len(calls) == 2


def test_a_cohorts_mean_is_the_mean_over_its_customers():
    bundle, *_ = linear_bundle(40)
    ids = cohort.cohort_ids(bundle, "1", limit=8)
    rows = [bundle.index_of(i) for i in ids]
    attribution = SimpleNamespace(static=RNG.normal(size=(8, M.S)), temporal=RNG.normal(size=(8, M.T, M.F)),
                                  prediction=RNG.uniform(size=8))
    mean = cohort.mean_of(attribution, bundle, ids)
    assert mean["n"] == 8 and all(bundle.labels[r] == 1 for r in rows)
    np.testing.assert_allclose(mean["static"], sum(attribution.static) / 8)
    np.testing.assert_allclose(mean["temporal"], sum(attribution.temporal) / 8)
    np.testing.assert_allclose(mean["values"], sum(bundle.temporal[r] for r in rows) / 8, rtol=1e-6)
    assert mean["prediction"] == pytest.approx(float(np.mean(attribution.prediction)))
