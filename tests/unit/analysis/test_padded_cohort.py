"""Padding is "no data" in every aggregate: a 64-week history behind Masking(0) + an LSTM with hand-set
weights (tests/support/padded.py), a third of the customers padded at the start.

The Cohort aggregates, computed here and read back from a batch store, are checked against means
computed in the test over the real weeks only (numpy's nanmean, an independent route), have no NaN,
rank the planted driver first and give the ignored feature exactly zero; the mean of a cohort
(Compare) is the mean over the customers with data at each week.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from explain.analysis import cohort
from explain.analysis.explainer import explain_customers
from explain.batch.local import run_batch_job
from explain.batch.store import open_store
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support import padded

SETTINGS = Settings(baseline="mean", steps=32)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = padded.write(tmp_path_factory.mktemp("padded") / "bundle")
    bundle = load_bundle(folder)
    ids = [str(i) for i in bundle.ids]
    return folder, bundle, ids, explain_customers(bundle, ids, SETTINGS)


def reference(static, temporal, padding):
    """The aggregates over real weeks only, with numpy's nan-aware reductions."""
    t = np.where(padding[..., None], np.nan, temporal)
    per_feature = np.nansum(t, axis=1)
    everything = np.concatenate([static, per_feature], axis=1)
    return {"mean_abs": np.nanmean(np.abs(t), axis=0), "signed_mean": np.nanmean(t, axis=0),
            "feature_abs": np.abs(everything).mean(axis=0), "feature_signed": everything.mean(axis=0),
            "period_abs": np.nanmean(np.where(padding, np.nan, np.nansum(np.abs(t), axis=2)), axis=0),
            "period_signed": np.nanmean(np.where(padding, np.nan, np.nansum(t, axis=2)), axis=0)}


def check(agg, ref, bundle):
    for name, expected in ref.items():
        np.testing.assert_allclose(getattr(agg, name), expected, rtol=1e-9, atol=1e-12, err_msg=name)
    for name in ("mean_abs", "signed_mean", "feature_abs", "feature_signed", "period_abs", "period_signed"):
        assert np.isfinite(getattr(agg, name)).all(), name  # every week has some real customers here
    temporal = agg.feature_abs[bundle.n_static:]
    assert bundle.temporal_features[int(np.argmax(temporal))] == padded.PLANTED
    assert agg.feature_names[int(np.argmax(agg.feature_abs))] == f"{padded.PLANTED} (all periods)"
    assert temporal[bundle.temporal_features.index(padded.IGNORED)] == 0.0


def test_the_bundle_has_padded_customers_with_no_attribution_there(case):
    folder, bundle, ids, a = case
    pad = cohort.padding_of(a)
    short = padded.short_customers(folder)
    assert len(short) >= 10 and sorted(np.asarray(ids)[pad.any(axis=1)]) == short
    assert np.all(a.temporal[pad] == 0.0)  # the engine: padded cells carry no attribution
    np.testing.assert_allclose(a.total(), a.prediction - a.baseline_prediction, atol=1e-5)


def test_computed_aggregates_are_means_over_real_weeks(case):
    _, bundle, _, a = case
    pad = cohort.padding_of(a)
    agg = cohort.aggregate(a.static, a.temporal, bundle.static_labels, bundle.temporal_labels, pad)
    check(agg, reference(a.static, a.temporal, pad), bundle)
    # a plain mean would count the padded weeks as zero effects: week 1 would look n / n_real times smaller
    plain = np.abs(a.temporal).mean(axis=0)
    real = (~pad[:, 0]).sum()
    assert real < len(pad)
    np.testing.assert_allclose(agg.mean_abs[0], plain[0] * len(pad) / real)
    np.testing.assert_array_equal(agg.customers_per_period, (~pad).sum(axis=0))


def test_a_batch_store_reads_back_padding_as_no_data_and_aggregates_the_same(case, tmp_path):
    folder, bundle, ids, a = case
    run_batch_job(bundle, tmp_path / "store", SETTINGS, chunk_size=16, progress=False)
    stored = open_store(tmp_path / "store").arrays(bundle, ids)
    pad = cohort.padding_of(stored)
    np.testing.assert_array_equal(pad, cohort.padding_of(a))
    assert np.isnan(stored.temporal[pad]).all() and np.isfinite(stored.temporal[~pad]).all()
    # the batch's calls are compiled (XLA): the graph calls' numbers within float rounding
    scale = np.abs(a.temporal[~pad]).max()
    np.testing.assert_allclose(stored.temporal[~pad], a.temporal[~pad], rtol=1e-5, atol=1e-6 * scale)
    np.testing.assert_allclose(stored.total(), a.total(), rtol=1e-5, atol=1e-5 * np.abs(a.total()).max())
    np.testing.assert_allclose(stored.total(), a.prediction - a.baseline_prediction, atol=1e-5)  # completeness
    agg = cohort.aggregate(stored.static, stored.temporal, bundle.static_labels, bundle.temporal_labels, pad)
    check(agg, reference(stored.static, stored.temporal, pad), bundle)
    # the padding is found from the NaN cells alone too (what a store holds)
    again = cohort.aggregate(stored.static, stored.temporal, bundle.static_labels, bundle.temporal_labels)
    np.testing.assert_allclose(again.feature_abs, agg.feature_abs)


def test_a_cohorts_mean_counts_each_week_over_the_customers_with_data_there(case):
    _, bundle, ids, a = case
    mean = cohort.mean_of(a, bundle, ids)
    pad = cohort.padding_of(a)
    values = np.where(pad[..., None], np.nan, bundle.inputs_for(ids)["temporal"])
    np.testing.assert_allclose(mean["values"], np.nanmean(values, axis=0), rtol=1e-6)
    np.testing.assert_allclose(mean["temporal"], np.nanmean(np.where(pad[..., None], np.nan, a.temporal), axis=0))
    assert np.isfinite(mean["values"]).all() and np.isfinite(mean["temporal"]).all()
    assert (mean["values"] > 0.05 - 1e-6).all()  # no padded zero pulled a week's mean down


def test_the_batch_job_says_whether_its_calls_were_cut(case, tmp_path, capsys, monkeypatch):
    """The batch's last line says how the engine called the model: on this Masking bundle with customers
    padded at the start, cut calls (the engine's own note); on a bundle without a Masking layer, full calls
    and why."""
    import explain
    from explain.core.engine import cut_notes
    from tests.support import models

    folder, bundle, ids, _ = case
    run_batch_job(bundle, tmp_path / "store", SETTINGS, chunk_size=16, progress=True)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("engine: ")]
    assert said == [f"engine: {cut_notes(bundle.model)}"]
    assert re.fullmatch(r"engine: calls cut to the periods after the padding at the start of the histories, "
                        r"XLA-compiled \(\d+ call shapes\)", said[0])

    monkeypatch.setenv("EXPLAIN_XLA", "0")  # the batch's calls not compiled: the same line without XLA
    cut_model = load_bundle(folder)  # a new model: new engines
    run_batch_job(cut_model, tmp_path / "graph", SETTINGS, chunk_size=16, progress=True)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("engine: ")]
    assert said == ["engine: calls cut to the periods after the padding at the start of the histories"]

    model, _, _ = models.linear_model(seed=1)
    x = models.data(12, seed=2)
    explain.save_bundle(tmp_path / "plain_bundle", model, x["static"], x["temporal"])
    run_batch_job(load_bundle(tmp_path / "plain_bundle"), tmp_path / "plain", Settings(baseline="zero", steps=8),
                  chunk_size=6, progress=True)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("engine: ")]
    assert said == ["engine: full calls (no history padded by a Masking layer)"]


def test_compiled_batch_chunks_are_the_same_in_another_process(case, tmp_path):
    """A resumed job computes its remaining chunks in a new process (new compiles): on this padded bundle,
    whose calls are cut and compiled (XLA), a chunk computed in another process is bit for bit this one's,
    so a resumed store equals an uninterrupted one."""
    import subprocess
    import sys
    from pathlib import Path

    folder, bundle, ids, _ = case
    root = Path(__file__).resolve().parents[3]
    args = ["--steps", str(SETTINGS.steps), "--baseline", "mean", "--batch-size", "16"]
    here = run_batch_job(bundle, tmp_path / "here", SETTINGS, chunk_size=16, progress=False)
    assert here.complete
    other = tmp_path / "other"
    done = subprocess.run([sys.executable, "-m", "explain", "batch", "--bundle", str(folder), "--out", str(other),
                           *args], cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "XLA-compiled" in done.stderr  # its calls were compiled too
    mine, theirs = open_store(tmp_path / "here").arrays(bundle, ids), open_store(other).arrays(bundle, ids)
    np.testing.assert_array_equal(mine.temporal, theirs.temporal)
    np.testing.assert_array_equal(mine.static, theirs.static)
