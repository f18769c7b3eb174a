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
