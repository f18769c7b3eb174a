"""Data-wide means stored with the array cache (issue 26): the first open of a bundle computes each numeric input's
mean over every customer and real period where it reads the values anyway (the array layout's one read of every
value, a long bundle's checked arrays), the cache keeps them (under its manifest's checksum), and the mean baseline
takes them instead of reading a memory-mapped history again. They are the same bits as the direct computation
(``explain.core.baselines.feature_statistic``), for padded float64 and unpadded float32 histories, in both layouts,
on the first open and on the cached one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explain.bundle import arrays as array_io
from explain.bundle import cache
from explain.bundle.load import load_bundle
from explain.bundle.save import save_bundle
from explain.core import baselines
from tests.unit.bundle.test_array_layout import MASK, S, T, W, four_input_model

keras = pytest.importorskip("keras")

N = 257  # customers: many chunks of a few customers each


@pytest.fixture(autouse=True)
def cached_whatever_the_size(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setattr(array_io, "CHUNK_BYTES", 7 * T * 3 * 8 + 5)   # 7 customers of 'days' a chunk: 37 chunks


def inputs(seed=5):
    """Four inputs of N customers: 'days' float64 padded at the start with -1,
    'weeks' float32 unpadded, 'plans' category ids (no mean), 'profile' static float32; values of many magnitudes,
    so a sum in another order would differ in its last bits."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, T + 1, size=N)
    days = rng.lognormal(0.0, 3.0, size=(N, T, 3)) * rng.choice([-1.0, 1.0], size=(N, T, 3))
    plans = rng.integers(1, 5, size=(N, T)).astype(np.int32)
    for i, length in enumerate(lengths):
        days[i, :T - length] = MASK
        plans[i, :T - length] = 0
    return {"profile": rng.normal(size=(N, S)).astype(np.float32) * 1e3, "days": days,
            "weeks": rng.lognormal(0.0, 2.0, size=(N, W, 2)).astype(np.float32), "plans": plans}


@pytest.fixture(scope="module")
def model():
    return four_input_model()


def direct(bundle):
    """Each numeric input's mean computed from the bundle's arrays, as the baseline does without stored ones."""
    return {"profile": baselines.feature_statistic(bundle.arrays["profile"], "mean"),
            "days": baselines.feature_statistic(bundle.arrays["days"], "mean", MASK),
            "weeks": baselines.feature_statistic(bundle.arrays["weeks"], "mean")}


def references(values):
    """The same means by numpy on the float64 cells (an independent reference, equal within rounding)."""
    days = values["days"]
    return {"profile": values["profile"].astype(np.float64).mean(axis=0),
            "days": days[~np.all(days == MASK, axis=-1)].mean(axis=0),
            "weeks": values["weeks"].astype(np.float64).reshape(-1, 2).mean(axis=0)}


@pytest.mark.parametrize("layout", ["long", "arrays"])
def test_first_and_cached_opens_carry_the_means_bit_for_bit(tmp_path, model, layout, monkeypatch):
    values = inputs()
    folder = save_bundle(tmp_path / layout, model, values, layout=layout, ids=[f"K{k:04d}" for k in range(N)])
    first = load_bundle(folder)
    place = folder / cache.CACHE_DIR
    assert (place / cache.MANIFEST).is_file()
    second = load_bundle(folder)
    assert isinstance(second.arrays["days"], np.memmap)
    want, reference = direct(first), references(values)
    for bundle in (first, second):
        assert set(bundle.statistics) == {"profile", "days", "weeks"}          # not the category ids
        assert bundle.statistics["days"]["mask_value"] == MASK and bundle.statistics["weeks"]["mask_value"] is None
        for key in want:
            np.testing.assert_array_equal(bundle.statistics[key]["mean"], want[key])
            np.testing.assert_allclose(bundle.statistics[key]["mean"], reference[key], rtol=1e-12)
    stored = json.loads((place / cache.MANIFEST).read_text())["statistics"]
    assert stored["days"]["mean"] == [float(x) for x in want["days"]]


@pytest.mark.parametrize("layout", ["long", "arrays"])
def test_the_mean_baseline_of_a_cached_bundle_reads_no_history_and_is_the_same(tmp_path, model, layout,
                                                                                monkeypatch):
    from explain.analysis import explainer

    folder = save_bundle(tmp_path / layout, model, inputs(seed=8), layout=layout, ids=[f"K{k:04d}" for k in range(N)])
    load_bundle(folder)
    bundle = load_bundle(folder)
    rows = bundle.inputs_for(["K0003", "K0100"])
    computed = baselines.from_spec("mean", bundle.data(), rows, layout=bundle.engine_layout)   # no statistics
    read = []
    direct_statistic = baselines.feature_statistic

    def spy(values, kind, mask_value=None):
        read.append(values.shape)
        return direct_statistic(values, kind, mask_value)
    monkeypatch.setattr(baselines, "feature_statistic", spy)
    explainer._CACHE.clear()
    stored = explainer.baseline_for(bundle, rows, "mean")
    assert read == []                                         # every mean came from the cache
    assert set(stored) == set(computed)
    for key in ("profile", "days", "weeks", "plans"):
        np.testing.assert_array_equal(np.asarray(stored[key]), np.asarray(computed[key]))
    explainer._CACHE.clear()
    explainer.baseline_for(bundle, rows, "median")            # the median is not stored: read from the arrays
    assert {shape[0] for shape in read} == {N}


def test_a_changed_history_gets_new_means(tmp_path, model):
    values = inputs(seed=2)
    folder = save_bundle(tmp_path / "a", model, values, layout="arrays", ids=[f"K{k:04d}" for k in range(N)])
    before = load_bundle(folder).statistics["weeks"]["mean"]
    weeks = values["weeks"].copy()
    weeks[0, 0, 0] += 1000.0
    np.save(folder / "temporal_weeks.npy", weeks)
    after = load_bundle(folder)
    assert after.statistics["weeks"]["mean"][0] != before[0]
    np.testing.assert_array_equal(after.statistics["weeks"]["mean"], direct(after)["weeks"])


def test_a_plain_two_input_bundle_stores_its_means_for_the_classic_builders(tmp_path, monkeypatch):
    demo = load_bundle("bundles/demo")
    folder = save_bundle(tmp_path / "small", demo.model, demo.static[:300], np.asarray(demo.temporal[:300]),
                         ids=demo.ids[:300].tolist(), periods=demo.periods, static_features=demo.static_features,
                         temporal_features=demo.temporal_features, layout="arrays")
    load_bundle(folder)
    bundle = load_bundle(folder)
    assert bundle.engine_layout is None and set(bundle.statistics) == {"static", "temporal"}
    data = bundle.data()
    computed, stored = baselines.mean(data), baselines.mean(data, bundle.statistics)
    for key in ("static", "temporal"):
        np.testing.assert_array_equal(stored[key], computed[key])
    np.testing.assert_allclose(stored["temporal"][0, 0], np.asarray(data["temporal"], np.float64)
                               .reshape(-1, data["temporal"].shape[-1]).mean(axis=0), rtol=1e-12)


def test_no_stored_means_without_a_cache(tmp_path, model, monkeypatch):
    """A small long bundle (no cache) computes its means when asked; the array layout's read gives them anyway."""
    monkeypatch.setattr(cache, "MIN_BYTES", 1 << 40)
    values = inputs(seed=3)
    long = load_bundle(save_bundle(tmp_path / "long", model, values, layout="long"))
    arrays = load_bundle(save_bundle(tmp_path / "arrays", model, values, layout="arrays"))
    assert long.statistics == {}
    assert set(arrays.statistics) == {"days", "weeks"}
    np.testing.assert_array_equal(arrays.statistics["days"]["mean"], direct(long)["days"])


def test_every_customers_scores_are_kept_beside_the_cache_of_that_content(tmp_path, model, monkeypatch):
    """The dashboard's scores of every customer: stored once, read back by a later process of the same content,
    never for another content, another shape, a damaged file or a bundle without a cache."""
    from explain.analysis import cohort

    values = inputs(seed=4)
    folder = save_bundle(tmp_path / "a", model, values, layout="arrays", ids=[f"K{k:04d}" for k in range(N)])
    bundle = load_bundle(folder)
    scores = cohort.scores(bundle)
    np.testing.assert_allclose(scores[:3, 0], np.asarray(model.predict(
        [bundle.inputs_for(["K0000", "K0001", "K0002"])[k] for k in ("profile", "days", "weeks", "plans")],
        verbose=0))[:, 0], rtol=1e-5)
    assert cache.read_scores(folder, bundle.content_hash, scores.shape) is None
    place = cache.write_scores(folder, bundle.content_hash, scores)
    assert place == folder / cache.CACHE_DIR
    np.testing.assert_array_equal(cache.read_scores(folder, bundle.content_hash, scores.shape), scores)
    assert cache.read_scores(folder, "another content", scores.shape) is None
    assert cache.write_scores(folder, "another content", scores) is None
    assert cache.read_scores(folder, bundle.content_hash, (N, 2)) is None
    raw = bytearray((place / cache.SCORES).read_bytes())
    raw[-3] ^= 0xFF                                              # one flipped byte: its CRC-32 no longer adds up
    (place / cache.SCORES).write_bytes(bytes(raw))
    assert cache.read_scores(folder, bundle.content_hash, scores.shape) is None
    cache.write_scores(folder, bundle.content_hash, scores)
    weeks = values["weeks"].copy()
    weeks[1, 1, 1] = 7.0
    np.save(folder / "temporal_weeks.npy", weeks)                # another content: the cache is rebuilt
    changed = load_bundle(folder)
    assert cache.read_scores(folder, changed.content_hash, scores.shape) is None
    assert cache.read_scores(folder, bundle.content_hash, scores.shape) is None
    monkeypatch.setattr(cache, "MIN_BYTES", 1 << 40)
    small = tmp_path / "small"
    save_bundle(small, model, values, layout="long")
    plain = load_bundle(small)
    assert cache.write_scores(small, plain.content_hash, scores) is None and not (small / cache.CACHE_DIR).exists()
