"""The dashboard's scores of every customer come from the array cache on a later start (issue 26): the first
computation is stored beside the cache, and a new process (here: Streamlit's own cache cleared, the scoring made
to fail) reads the same numbers back instead of running the model over every customer again."""

from __future__ import annotations

import numpy as np
import pytest

from explain.bundle import cache
from explain.bundle.load import load_bundle
from explain.bundle.save import save_bundle

pytest.importorskip("keras")


def test_a_cached_bundle_scores_its_customers_once(tmp_path, monkeypatch):
    from explain.analysis import cohort
    from ui import cache as ui_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    demo = load_bundle("bundles/demo")
    folder = save_bundle(tmp_path / "b", demo.model, demo.static[:200], np.asarray(demo.temporal[:200]),
                         ids=demo.ids[:200].tolist(), periods=demo.periods, static_features=demo.static_features,
                         temporal_features=demo.temporal_features, layout="arrays")
    bundle = load_bundle(folder)
    ui_cache._predictions.clear()
    first = ui_cache.predictions(bundle)
    np.testing.assert_allclose(first, np.asarray(demo.model.predict(
        [demo.static[:200], np.asarray(demo.temporal[:200])], verbose=0))[:, 0], rtol=1e-5)
    assert (folder / cache.CACHE_DIR / cache.SCORES).is_file()

    def no_scoring(*args, **kwargs):
        raise AssertionError("every customer was scored again although the scores are stored")
    monkeypatch.setattr(cohort, "scores", no_scoring)
    ui_cache._predictions.clear()
    np.testing.assert_array_equal(ui_cache.predictions(load_bundle(folder)), first)


def test_scoring_a_memory_mapped_bundle_block_by_block_gives_its_scores(tmp_path, monkeypatch):
    from explain.analysis import cohort

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    demo = load_bundle("bundles/demo")
    folder = save_bundle(tmp_path / "b", demo.model, demo.static[:300], np.asarray(demo.temporal[:300]),
                         ids=demo.ids[:300].tolist(), periods=demo.periods, static_features=demo.static_features,
                         temporal_features=demo.temporal_features, layout="arrays")
    bundle = load_bundle(folder)
    assert isinstance(bundle.data()["temporal"], np.memmap)
    whole = cohort.scores(bundle)
    np.testing.assert_array_equal(cohort.score_everyone(bundle), whole)           # one block: the same calls
    blocks = cohort.score_everyone(bundle, block=64)                               # 5 blocks, the last short
    assert blocks.shape == whole.shape
    np.testing.assert_allclose(blocks, whole, rtol=1e-6, atol=1e-7)
    reference = np.asarray(demo.model.predict([demo.static[:300], np.asarray(demo.temporal[:300])], verbose=0))
    np.testing.assert_allclose(blocks, reference, rtol=1e-5, atol=1e-6)
