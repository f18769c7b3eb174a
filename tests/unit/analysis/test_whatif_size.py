"""The what-if card at size (issue 42): the data's ranges and medians read by blocks of a memory-mapped history, once
per bundle, and the search's candidate windows listed for all starts at once; every answer checked against the
implementation it replaced (copied below as the reference), on generated data."""

import gc
import pickle
import time
import tracemalloc
import warnings
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from explain.analysis import counterfactual, whatif
from explain.analysis.whatif import Edit
from explain.core.settings import Settings

MASK = -1.0


class Masking:  # what masking_value looks for: a layer of this class name with a mask_value
    mask_value = MASK


def padded_history(rng, n, periods, width, *, integer_feature=True):
    """(n, T, F) float32 with the first months of many customers padding (every feature MASK), one integer feature."""
    temporal = rng.normal(size=(n, periods, width)).astype(np.float32)
    if integer_feature:
        temporal[:, :, 0] = rng.integers(0, 5, size=(n, periods))
    starts = rng.integers(0, periods // 2, size=n)
    temporal[:, :, -1][temporal[:, :, -1] == MASK] = 0.0  # only padding has -1 in every feature
    starts[: n // 4] = 0
    for i, start in enumerate(starts):
        temporal[i, :start] = MASK
    return temporal


def fake_bundle(static, temporal, labels=None):
    return SimpleNamespace(static=static, temporal=temporal, model=SimpleNamespace(layers=[Masking()]),
                           n_customers=len(static), labels=labels, n_periods=temporal.shape[1])


# ----------------------------------------------------------------------------- the replaced code (the references)


def old_ranges(bundle):
    """Observed.of's history part before issue 42: the whole history in float64."""
    temporal = np.asarray(bundle.temporal, np.float64)
    real = ~np.all(temporal == MASK, axis=2)
    cells = temporal[real] if real.any() else temporal.reshape(-1, temporal.shape[2])
    return cells.min(axis=0), cells.max(axis=0), np.all(cells == np.round(cells), axis=0)


def old_monthly_median(bundle, rows):
    temporal = np.asarray(bundle.temporal[rows], np.float64)
    temporal[np.all(temporal == MASK, axis=2)] = np.nan
    with warnings.catch_warnings():  # an all-NaN month
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(temporal, axis=0)


def old_candidate_edits(ctx, current, attribution, row, locked, used):
    """counterfactual.candidate_edits before issue 42 (a loop over every window with np.allclose)."""
    out = []
    for role in whatif.ROLES:
        x = current[role]
        a = (attribution.static if role == "static" else attribution.temporal)[row]
        gap = x - ctx.baseline[role]
        safe = np.where(np.abs(gap) > 1e-12, gap, 1.0)
        slope = np.where(np.abs(gap) > 1e-12, a / safe, 0.0)
        if role == "static":
            for j in range(x.shape[0]):
                if ("static", j) in locked or ("static", j) in used:
                    continue
                cats = ctx.observed.static_categories[j]
                if cats is not None:
                    options = [(Edit("static", j, "set", v), v) for v in cats]
                else:
                    options = [(Edit("static", j, "baseline"), ctx.baseline["static"][j]),
                               (Edit("static", j, "median"), ctx.median(None)["static"][j])]
                    options += [(Edit("static", j, "set", float(v)), v) for v in ctx.observed.static_quantiles[:, j]]
                seen = set()
                for edit, value in options:
                    value = float(ctx.observed.fit("static", j, np.array([value]))[0])
                    if abs(value - x[j]) < 1e-9 or value in seen:
                        continue
                    seen.add(value)
                    out.append((edit, float(slope[j] * (x[j] - value)), {"static": (j, value)}))
            continue
        periods = x.shape[0]
        windows = sorted({w for w in counterfactual.SEARCH_WINDOWS if w < periods} | {periods})
        real = ~ctx.padded
        for f in range(x.shape[1]):
            if ("temporal", f) in locked:
                continue
            for kind, source in (("baseline", ctx.baseline["temporal"][:, f]),
                                 ("median", ctx.median(None)["temporal"][:, f])):
                target = ctx.observed.fit("temporal", f, source)
                fall = slope[:, f] * (x[:, f] - target)
                for w in windows:
                    for start in range(0, periods - w + 1):
                        cells = slice(start, start + w)
                        if not real[cells].all() or np.allclose(x[cells, f], target[cells], rtol=0, atol=1e-9):
                            continue
                        edit = Edit("temporal", f, kind, None, (start, start + w - 1))
                        out.append((edit, float(fall[cells].sum()), {"temporal": (cells, f, target[cells])}))
    return out


# ----------------------------------------------------------------------------- the data's ranges and medians


@pytest.fixture(scope="module")
def mapped(tmp_path_factory):
    """A padded 300 x 120 x 6 float32 history saved as .npy and memory-mapped, as an arrays bundle reads it."""
    rng = np.random.default_rng(42)
    static = rng.normal(size=(300, 3))
    static[:, 1] = rng.integers(0, 2, size=300)
    path = tmp_path_factory.mktemp("size") / "temporal.npy"
    np.save(path, padded_history(rng, 300, 120, 6))
    labels = np.array([str(i % 3) for i in range(300)], dtype=object)
    return fake_bundle(static, np.load(path, mmap_mode="r"), labels)


def test_observed_of_a_memory_mapped_history_equals_float64_and_never_copies_it_whole(mapped, monkeypatch):
    monkeypatch.setattr(whatif, "BLOCK_CELLS", 20 * 120 * 6)  # blocks of 20 customers
    float64_bytes = mapped.temporal.size * 8
    tracemalloc.start()
    try:
        observed = whatif.Observed.of(mapped)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.2 * float64_bytes, f"peak {peak} bytes; the float64 history is {float64_bytes}"
    low, high, integer = old_ranges(mapped)
    np.testing.assert_array_equal(observed.temporal_min, low)
    np.testing.assert_array_equal(observed.temporal_max, high)
    np.testing.assert_array_equal(observed.temporal_integer, integer)
    assert integer[0] and not integer[1:].any() and observed.mask_value == MASK
    assert observed.temporal_min.dtype == np.float64 and low[0] == 0.0  # the padding's -1 is no value


def test_a_history_that_is_all_padding_counts_every_month_as_before():
    temporal = np.full((4, 5, 2), MASK, np.float32)
    observed = whatif.Observed.of(fake_bundle(np.zeros((4, 1)), temporal))
    np.testing.assert_array_equal(observed.temporal_min, [MASK, MASK])
    np.testing.assert_array_equal(observed.temporal_integer, [True, True])


@pytest.mark.parametrize("n, cohort, dtype", [(300, None, None), (300, "1", None), (700, None, np.float32),
                                              (301, None, np.float64)])
def test_the_monthly_medians_equal_nanmedian_of_the_float64_history(n, cohort, dtype, monkeypatch, mapped):
    monkeypatch.setattr(whatif, "MEDIAN_BLOCK_CELLS", 7 * n * 6)  # blocks of 7 months: the last block is short
    generated = None if dtype is None else padded_history(np.random.default_rng(n), n, 40, 6).astype(dtype)
    if dtype == np.float64:  # values float32 cannot hold, and a few NaN (nanmedian's answer there)
        generated[generated != MASK] += 1e-9
        generated[5, 30, 2] = generated[9, 31, 1] = np.nan
    bundle = mapped if dtype is None else fake_bundle(np.zeros((n, 1)), generated)
    rows = np.arange(n) if cohort is None else np.flatnonzero(bundle.labels == cohort)
    got = whatif.monthly_medians(bundle.temporal, None if cohort is None else rows, MASK)
    want = old_monthly_median(bundle, rows)
    np.testing.assert_array_equal(got, want)  # to the last bit, NaN where no customer has the month
    assert np.isfinite(got).all() and got.dtype == np.float64
    assert (np.count_nonzero(~np.all(np.asarray(bundle.temporal)[rows] == MASK, axis=2), axis=0) % 2 == 0).any()


def test_a_month_no_customer_has_is_nan():
    temporal = padded_history(np.random.default_rng(5), 30, 12, 3)
    temporal[:, :2] = MASK
    got = whatif.monthly_medians(temporal, None, MASK)
    assert np.isnan(got[:2]).all() and np.isfinite(got[2:]).all()


def test_every_customers_context_uses_the_bundles_medians_computed_once(mapped, monkeypatch):
    monkeypatch.setattr(whatif, "_MEDIANS", {})  # none kept from other tests
    calls = []
    medians = whatif.monthly_medians
    monkeypatch.setattr(whatif, "monthly_medians", lambda *a: calls.append(a[1]) or medians(*a))
    observed = whatif.Observed.of(mapped)
    contexts = [context_of(mapped, observed, i) for i in (0, 7, 150)]
    first = contexts[0].median(None)
    assert all(ctx.median(None) is first for ctx in contexts[1:])
    assert contexts[2].median("2") is contexts[0].median("2")
    assert len(calls) == 2 and calls[0] is None and len(calls[1]) == 100
    np.testing.assert_array_equal(first["static"], np.median(mapped.static, axis=0))
    copied = pickle.loads(pickle.dumps(observed))  # what a cache that pickles its values hands out
    assert context_of(mapped, copied, 9).median(None) is first and len(calls) == 2
    other = fake_bundle(mapped.static.copy(), mapped.temporal, mapped.labels)  # other static values: computed anew
    assert context_of(other, copied, 9).median(None) is not first and len(calls) == 3
    static = weakref.ref(other.static)
    del other
    gc.collect()
    assert static() is None  # the medians kept do not keep a bundle's arrays alive


def context_of(bundle, observed, i, baseline=None):
    original = {"static": np.asarray(bundle.static[i], np.float64), "temporal": np.asarray(bundle.temporal[i],
                                                                                          np.float64)}
    baseline = baseline or {"static": np.asarray(bundle.static).mean(0),
                            "temporal": np.asarray(bundle.temporal, np.float64).mean(0)}
    padded = np.all(original["temporal"] == MASK, axis=1)
    return whatif.Context(bundle, f"C{i}", Settings(), observed, original, baseline, padded)


# ----------------------------------------------------------------------------- the search's candidates


@pytest.mark.parametrize("seed", range(6))
def test_candidate_edits_equal_the_old_loop_on_random_inputs(seed, mapped):
    rng = np.random.default_rng(seed)
    observed = whatif.Observed.of(mapped)
    i = int(rng.integers(0, 300))
    ctx = context_of(mapped, observed, i)
    current = {r: ctx.original[r].copy() for r in whatif.ROLES}
    real = np.flatnonzero(~ctx.padded)
    current["temporal"][real[: len(real) // 3], 2] = ctx.baseline["temporal"][real[: len(real) // 3], 2]  # no change
    current["temporal"][real[-3:], 0] = ctx.median(None)["temporal"][real[-3:], 0]
    if seed % 2:  # a fall of exactly zero where the slope is zero: ties the ranking must keep in listing order
        current["temporal"][real[::4], 3] = ctx.baseline["temporal"][real[::4], 3]
    attribution = SimpleNamespace(static=rng.normal(size=(1, 3)), temporal=rng.normal(size=(1, 120, 6)))
    attribution.temporal[0, ::5, 4] = 0.0
    locked = {("temporal", 5)} if seed % 3 == 0 else set()
    used = {("static", 0)} if seed % 2 else set()
    want = old_candidate_edits(ctx, current, attribution, 0, locked, used)
    got = counterfactual.candidate_edits(ctx, current, attribution, 0, locked, used)
    assert len(got) == len(want) > 1000
    for (edit, fall, change), (edit0, fall0, change0) in zip(got, want):
        assert edit == edit0 and fall == fall0
        if "static" in change0:
            assert change == change0
        else:
            (cells, f, values), (cells0, f0, values0) = change["temporal"], change0["temporal"]
            assert (cells, f) == (cells0, f0)
            np.testing.assert_array_equal(values, values0)
    pool = counterfactual._Pool.of(ctx, current, attribution, 0, locked, used)
    ranked = sorted(want, key=lambda item: -item[1])
    for count in (1, 128, len(want) + 5):
        assert [(e, fall) for e, fall, _ in pool.best(count)] == [(e, fall) for e, fall, _ in ranked[:count]]


def test_window_sums_equal_numpy_sums_to_the_last_bit():
    values = np.random.default_rng(1).normal(size=400) * 10.0 ** np.random.default_rng(2).integers(-8, 8, size=400)
    for length in (1, 2, 3, 6, 7, 8, 11):
        want = [values[s:s + length].sum() for s in range(400 - length + 1)]
        assert counterfactual._window_sums(values, length).tolist() == want


def test_the_time_limit_is_kept_while_candidates_are_listed(mapped):
    ctx = context_of(mapped, whatif.Observed.of(mapped), 3)
    attribution = SimpleNamespace(static=np.ones((1, 3)), temporal=np.ones((1, 120, 6)))
    current = {r: ctx.original[r].copy() for r in whatif.ROLES}
    passed = time.perf_counter() - 1.0
    assert counterfactual.candidate_edits(ctx, current, attribution, 0, set(), set(), deadline=passed) is None
    assert counterfactual.candidate_edits(ctx, current, attribution, 0, set(), set(),
                                          deadline=time.perf_counter() + 60)


def test_the_cards_words_say_when_the_search_ran_out_of_its_time():
    from ui import keep

    result = SimpleNamespace(reached=False, stopped="reached the time limit of 3 s", threshold=0.5, prediction=0.834)
    assert keep.sentence(result, None, {}, "churn") == (
        "No change of a few values that brings the churn score below 0.5 was found within the 3 s this card gives "
        "the search (the closest so far: 0.83); the What-if page's Search can take longer.")
    result.stopped = "no single edit lowers the prediction further"
    assert keep.sentence(result, None, {}, "churn") == \
        "No change of a few values brings the churn score below 0.5 (the closest: 0.83)."


def test_the_cards_score_under_the_threshold_never_reads_as_the_threshold():
    from ui.keep import below

    assert below(0.4999, 0.5) == "0.4999" and below(0.43, 0.5) == "0.43" and below(0.6, 0.5) == "0.60"
    assert below(0.499999999, 0.5) == "just under 0.5"
    assert below(0.5, 0.5) == "0.50"  # not under: as it is
