"""`explain check` on a big bundle (one with an array cache) scores every customer once and keeps the scores for the
dashboard (explain.analysis.cohort.kept_scores), and names the customers whose score is not a finite number."""

from __future__ import annotations

import numpy as np
import pytest

from explain.bundle import cache
from explain.bundle.load import load_bundle
from explain.bundle.save import save_bundle
from explain.cli import main

keras = pytest.importorskip("keras")


@pytest.fixture
def cached(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)
    monkeypatch.setattr(cache, "MIN_BYTES", 0)  # every bundle gets an array cache


def _model(scale: float) -> keras.Model:
    static, temporal = keras.Input((3,), name="static"), keras.Input((6, 2), name="temporal")
    merged = keras.layers.Concatenate()([static, keras.layers.LSTM(4, seed=1)(temporal)])
    dense = keras.layers.Dense(1)
    model = keras.Model([static, temporal], dense(merged))
    weights, bias = dense.get_weights()
    weights[:3] = scale  # the static values reach the output at this scale: 1e30 x 1e10 overflows float32
    dense.set_weights([weights, bias])
    return model


def _bundle(folder, model, static, temporal):
    return save_bundle(folder, model, static, temporal, ids=[f"K{i:03d}" for i in range(len(static))],
                       layout="arrays")


def test_check_scores_every_customer_once_and_the_dashboard_reads_them(cached, tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(0)
    static, temporal = rng.normal(size=(40, 3)).astype("float32"), rng.normal(size=(40, 6, 2)).astype("float32")
    static[:, 1] = 2 * static[:, 0] + rng.normal(scale=0.01, size=40)  # one signal in two columns: a group
    model = _model(0.5)
    folder = _bundle(tmp_path / "b", model, static, temporal)
    assert main(["check", "--bundle", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Scored every customer (40)" in out and "kept beside the array cache" in out and "1 group(s): " in out
    bundle = load_bundle(folder)
    kept = cache.read_scores(folder, bundle.content_hash, (40, 1))
    reference = np.asarray(model.predict([static, temporal], verbose=0), np.float64)  # independent of the engine
    np.testing.assert_allclose(kept, reference, rtol=1e-5, atol=1e-6)

    from explain.analysis import cohort, groups
    from explain.core.kept import Kept

    found = groups.find(bundle)  # computed here, independently of what check kept
    assert [set(g.features) for g in found] == [{"static_0", "static_1"}] and found[0].found
    made_with = {"seed": groups.SEED, "size": groups.GROUP_SAMPLE, "rule": groups.RULE}
    assert cache.read_kept(folder, bundle.content_hash, "groups", made_with) == [
        [g.name, list(g.features), g.found] for g in found]

    def no_scoring(*args, **kwargs):
        raise AssertionError("computed again although check kept the result")
    monkeypatch.setattr(cohort, "scores", no_scoring)
    monkeypatch.setattr(groups, "find", no_scoring)
    monkeypatch.setattr(groups, "_KEPT", Kept(groups.KEPT))  # as in a new process: only the disk has them
    again, read = cohort.kept_scores(load_bundle(folder))
    assert read and np.array_equal(again, kept)
    assert groups.of(load_bundle(folder)) == found
    capsys.readouterr()
    assert main(["check", "--bundle", str(folder)]) == 0  # a second check reads them too (no_scoring not called)
    out = capsys.readouterr().out  # and says so
    assert "Read the scores of an earlier check of the same files for every customer (40)" in out
    assert "Scored every customer" not in out


def test_a_customer_whose_score_is_not_finite_is_named(cached, tmp_path, capsys):
    rng = np.random.default_rng(1)
    static, temporal = rng.normal(size=(30, 3)).astype("float32"), rng.normal(size=(30, 6, 2)).astype("float32")
    static[[4, 17]] = 1e10  # x 1e30 in the output layer: inf in float32
    folder = _bundle(tmp_path / "b", _model(1e30), static, temporal)
    assert main(["check", "--bundle", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "not a finite number for 2 customer(s), e.g. K004, K017" in out and "model.keras" in out
    assert "Scored every customer" not in out


def test_a_small_bundle_is_not_scored_by_check(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    rng = np.random.default_rng(2)
    static, temporal = rng.normal(size=(20, 3)).astype("float32"), rng.normal(size=(20, 6, 2)).astype("float32")
    folder = _bundle(tmp_path / "b", _model(0.5), static, temporal)  # far under cache.MIN_BYTES: no array cache
    assert main(["check", "--bundle", str(folder)]) == 0
    assert "Scored every customer" not in capsys.readouterr().out
