"""Data-wide means and medians a chunk of customers at a time (issue 26): the same numbers as numpy on the
float64 cells, padded periods left out, and a memory-mapped history is read, never converted whole."""

import numpy as np
import pytest

from explain.core import baselines


@pytest.fixture
def history(tmp_path):
    """(n, T, F) float32 with padded starts (every feature 0), saved and memory-mapped."""
    rng = np.random.default_rng(3)
    values = rng.normal(1.0, 2.0, size=(1001, 29, 4)).astype(np.float32)
    lengths = rng.integers(1, 30, size=1001)
    values[np.arange(29)[None, :] < (29 - lengths)[:, None]] = 0.0
    np.save(tmp_path / "h.npy", values)
    return values, np.load(tmp_path / "h.npy", mmap_mode="r")


@pytest.mark.parametrize("kind, reduce", [("mean", np.mean), ("median", np.median)])
def test_chunked_statistic_equals_numpy_on_float64_cells(history, monkeypatch, kind, reduce):
    values, mapped = history
    monkeypatch.setattr(baselines, "CHUNK_VALUES", 29 * 4 * 37)   # 37 customers at a time: 28 chunks
    cells = values.astype(np.float64)
    real = ~np.all(cells == 0.0, axis=-1)
    np.testing.assert_array_equal(baselines.feature_statistic(mapped, kind, 0.0), reduce(cells[real], axis=0))
    np.testing.assert_array_equal(baselines.feature_statistic(mapped, kind), reduce(cells.reshape(-1, 4), axis=0))
    static = values[:, 0, :]
    np.testing.assert_array_equal(baselines.feature_statistic(static, kind), reduce(static.astype(np.float64), axis=0))


def test_mean_baseline_of_a_memory_mapped_bundle_reads_chunks(history, monkeypatch):
    _, mapped = history
    seen = []
    real_asarray = np.asarray

    def spy(value, *args, **kwargs):
        if isinstance(value, np.memmap) or getattr(value, "base", None) is mapped:
            seen.append(value.shape)
        return real_asarray(value, *args, **kwargs)
    monkeypatch.setattr(baselines.np, "asarray", spy)
    monkeypatch.setattr(baselines, "CHUNK_VALUES", 29 * 4 * 100)
    data = {"static": np.zeros((1001, 2), np.float32), "temporal": mapped}
    out = baselines.mean(data)
    assert out["temporal"].shape == (1, 29, 4)
    assert seen and max(shape[0] for shape in seen) <= 100           # never the whole history at once


@pytest.mark.parametrize("chunk", [1, 7, 1001])
def test_feature_sums_fed_in_any_chunks_give_the_chunked_mean_bit_for_bit(history, chunk):
    """The bundle's first-open read feeds FeatureSums in its own chunks: the same bits as feature_statistic."""
    values, mapped = history
    for mask_value in (None, 0.0):
        sums = baselines.FeatureSums(4)
        for start in range(0, len(values), chunk):
            sums.add(values[start:start + chunk], mask_value)
        np.testing.assert_array_equal(sums.mean(), baselines.feature_statistic(mapped, "mean", mask_value))
    empty = baselines.FeatureSums(4)
    empty.add(np.zeros((3, 29, 4), np.float32), 0.0)                # every period padding: no real cell
    assert np.isnan(empty.mean()).all()


def test_stored_means_are_used_only_for_the_same_mask_and_width(history):
    _, mapped = history
    data = {"static": np.ones((1001, 2), np.float32), "temporal": mapped}
    chosen = {"static": {"mean": np.array([5.0, 6.0]), "mask_value": None},
              "temporal": {"mean": np.array([1.0, 2.0, 3.0, 4.0]), "mask_value": None}}
    out = baselines.from_spec("mean", data, data, statistics=chosen)   # stored numbers win, not the data's
    np.testing.assert_array_equal(out["static"], [[5.0, 6.0]])
    np.testing.assert_array_equal(out["temporal"], np.broadcast_to([1.0, 2.0, 3.0, 4.0], (1, 29, 4)))
    direct = baselines.mean(data)
    for wrong in ({"mean": np.arange(4.0), "mask_value": 0.0}, {"mean": np.arange(3.0), "mask_value": None}):
        out = baselines.mean(data, {"temporal": wrong})                # computed with another mask / width
        np.testing.assert_array_equal(out["temporal"], direct["temporal"])
    assert baselines.stored_statistic({"temporal": chosen["temporal"]}, "temporal", "median", None, 4) is None
