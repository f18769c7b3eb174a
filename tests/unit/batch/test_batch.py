"""The batch job: resumable after kill -9, chunk-size invariant, refuses foreign folders, findable."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from explain.analysis.explainer import explain_customers
from explain.analysis.report import LONG_COLUMNS, SUMMARY_COLUMNS, long_frame
from explain.batch import local as batch
from explain.batch.format import FORMAT_VERSION, LOCK, MANIFEST, METADATA_KEY, SUCCESS, SUMMARY_DIR, StoreError
from explain.batch.local import run_batch_job
from explain.batch.store import open_store, read_store
from explain.batch.stores import find_store
from explain.bundle.load import load_bundle
from explain.cli import main
from explain.core.errors import ExplainError
from explain.core.settings import Settings
from tests.support.old_store import write_old_store

ROOT = Path(__file__).resolve().parents[3]
# How far other chunk sizes (other batch shapes) may move a float64 result: TensorFlow's CPU kernels
# round float32 in a shape-dependent order on some CPUs (seen: 1.8e-9 on an attribution of 0.128, a
# float32 ulp there is 1.5e-8). 1e-7 is float32's relative precision on values of at most ~1; a wrong
# chunk, customer or setting moves attributions by 1e-4 or more.
CHUNK_ATOL = 1e-7

REQUEST = Settings(steps=8)
SETTINGS = ["--steps", "8"]

# The CLI, slowed down by a sleep before each chunk, so that a kill lands in the middle of the run.
SLOW_CLI = """
import sys, time
import explain.batch.local as batch
original = batch.compute_chunk
def slow(*args, **kwargs):
    time.sleep(float(sys.argv[1]))
    return original(*args, **kwargs)
batch.compute_chunk = slow
from explain.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture(scope="module")
def bundle(bundle_dir):
    return load_bundle(bundle_dir)


@pytest.fixture(scope="module")
def ids(bundle):
    return [str(i) for i in bundle.ids[::10]][:300]  # 300 customers spread over the data set


@pytest.fixture(scope="module")
def customers_file(tmp_path_factory, ids):
    path = tmp_path_factory.mktemp("ids") / "customers.txt"
    path.write_text("\n".join(ids) + "\n")
    return path


@pytest.fixture(scope="module")
def clean(tmp_path_factory, bundle, ids):
    """An uninterrupted run (chunks of 50), read back: (folder, long, summary)."""
    out = tmp_path_factory.mktemp("clean") / "clean.parquet"
    result = run_batch_job(bundle, out, REQUEST, chunk_size=50, ids=ids, progress=False)
    assert result.complete and result.computed_chunks == 6 and result.rows == 300 * 81
    long, summary = read_store(out)
    return out, long, summary


@pytest.fixture(scope="module")
def small(tmp_path_factory, bundle, ids):
    """A finished store of 20 customers in chunks of 10; copy it before changing it."""
    out = tmp_path_factory.mktemp("small") / "store"
    run_batch_job(bundle, out, REQUEST, chunk_size=10, ids=ids[:20], progress=False)
    return out


def snapshot(folder: Path) -> dict:
    """Every file and folder under ``folder`` with its bytes and modification time."""
    return {str(p.relative_to(folder)): (p.is_dir(), None if p.is_dir() else p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*.part")]


def sort_long(frame):
    return frame.sort_values(["customer_id", "input", "period", "feature"]).reset_index(drop=True)


# ---- the output ---------------------------------------------------------------------------------


def test_the_summary_holds_the_points_spent_and_the_manifest_the_customers_outside_the_tolerance(clean):
    out, _, summary = clean
    assert (summary["gradient_points"] == REQUEST.steps).all() and (summary["forward_points"] == 2).all()
    limit = np.maximum(REQUEST.tolerance * np.abs(summary["prediction"] - summary["baseline_prediction"]), 1e-4)
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["outside_tolerance"] == int((np.abs(summary["delta"]) > limit).sum())


def test_layout_reads_with_pandas_and_carries_metadata(clean, bundle, ids):
    out, long, summary = clean
    assert out.is_dir()  # "x.parquet" is the dataset folder
    assert list(long.columns) == LONG_COLUMNS and list(summary.columns) == SUMMARY_COLUMNS
    assert len(long) == 300 * (bundle.n_static + bundle.n_periods * bundle.n_temporal)
    assert summary["customer_id"].tolist() == ids
    # a compact store: pandas reads one row per customer, each input's cells as one array (the manifest etc. skipped)
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["customer_id", "static", "temporal"] and frame["customer_id"].tolist() == ids
    stacked = np.stack(frame["temporal"].to_numpy())  # (300, T x F), period by period as the long format
    np.testing.assert_array_equal(stacked.ravel(), long.loc[long["input"] == "temporal", "attribution"].to_numpy())
    pd.testing.assert_frame_equal(pd.read_parquet(out / SUMMARY_DIR), summary)
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["complete"] and (out / SUCCESS).exists() and not (out / LOCK).exists()
    assert manifest["settings"] == {**REQUEST.for_bundle(bundle).as_dict(), "tolerance": REQUEST.tolerance, "seed": 0}
    assert manifest["bundle"]["content_hash"] == bundle.content_hash
    assert manifest["chunk_size"] == 50 and manifest["n_chunks"] == 6 and manifest["format_version"] == FORMAT_VERSION
    meta = json.loads(pq.read_schema(out / "part-00003.parquet").metadata[METADATA_KEY])
    assert meta["bundle_hash"] == bundle.content_hash and meta["settings"] == manifest["settings"]
    assert meta["chunk"] == 3 and meta["kind"] == "arrays"
    # the numbers are the API's
    some = ids[51:53]
    api = long_frame(explain_customers(bundle, some, REQUEST), bundle, some)
    pd.testing.assert_frame_equal(read_store(out, ids=some)[0], api, check_dtype=False)
    assert not temp_files(out)


def test_each_chunk_calls_the_engine_on_that_chunk_only(monkeypatch, tmp_path, bundle, ids):
    sizes = []
    original = batch.explain_customers

    def recording(bundle, chunk_ids, request, **kwargs):
        sizes.append(len(chunk_ids))
        return original(bundle, chunk_ids, request, **kwargs)

    monkeypatch.setattr(batch, "explain_customers", recording)
    run_batch_job(bundle, tmp_path / "out", REQUEST, chunk_size=10, ids=ids[:45], progress=False)
    assert sizes == [1, 10, 10, 10, 10, 5]  # a 1-customer check of the settings, then one call per chunk


# ---- resume ---------------------------------------------------------------------------------


def test_resume_after_sigkill_gives_the_uninterrupted_rows(tmp_path, bundle_dir, customers_file, clean, capsys):
    out = tmp_path / "run.parquet"
    args = ["batch", "--bundle", str(bundle_dir), "--out", str(out), "--customers-file", str(customers_file),
            *SETTINGS, "--batch-size", "50"]
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", SLOW_CLI, "0.5", *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 120
        while not (out / "part-00000.parquet").exists():
            assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()
            assert time.monotonic() < deadline, "no chunk file appeared"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / SUCCESS).exists()
    finished = len(list(out.glob("part-*.parquet")))
    assert 1 <= finished < 6
    # what a kill in the middle of a write leaves behind
    (out / ".part-00004.parquet.k1ll3d.part").write_bytes(b"PAR1 half a file")
    (out / SUMMARY_DIR / ".summary-00004.parquet.k1ll3d.part").write_bytes(b"PAR1")

    capsys.readouterr()
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "resuming" in captured.err and "customers/s" in captured.err
    reused = int(re.search(r"reused (\d+) finished chunk", captured.out).group(1))
    assert reused == finished
    assert not temp_files(out)
    long, summary = read_store(out)
    assert not long.duplicated(["customer_id", "input", "period", "feature"]).any()
    assert not summary["customer_id"].duplicated().any()
    _, clean_long, clean_summary = clean
    pd.testing.assert_frame_equal(sort_long(long), sort_long(clean_long), check_exact=True)
    pd.testing.assert_frame_equal(summary, clean_summary, check_exact=True)
    # the compact part files themselves: every attribution bit for bit the uninterrupted run's
    resumed, clean_arrays = read_store(out, long=False)[0], read_store(clean[0], long=False)[0]
    assert json.loads((out / MANIFEST).read_text())["format_version"] == FORMAT_VERSION == 3
    for key in clean_arrays:
        np.testing.assert_array_equal(resumed[key], clean_arrays[key])


def test_leftover_temporary_files_are_removed_and_bad_chunks_recomputed(tmp_path, bundle, ids, small):
    out = tmp_path / "store"
    shutil.copytree(small, out)
    before_long, before_summary = read_store(out)
    (out / "part-00001.parquet").unlink()  # interrupted before chunk 1's long file
    (out / SUCCESS).unlink()
    (out / SUMMARY_DIR / "summary-00000.parquet").write_bytes(b"not parquet")  # damaged on disk
    leftovers = [out / "._manifest.json.abc.part", out / ".part-00001.parquet.xyz.part",
                 out / SUMMARY_DIR / ".summary-00001.parquet.q.part"]
    for path in leftovers:
        path.write_bytes(b"partial")
    with pytest.raises(StoreError, match="incomplete: 1 of 2 chunks"):
        read_store(out)
    result = run_batch_job(bundle, out, REQUEST, chunk_size=10, ids=ids[:20], progress=False)
    assert result.removed_temporary_files == 3 and result.computed_chunks == 2 and result.reused_chunks == 0
    assert not any(path.exists() for path in leftovers) and not temp_files(out)
    long, summary = read_store(out)
    pd.testing.assert_frame_equal(long, before_long, check_exact=True)
    pd.testing.assert_frame_equal(summary, before_summary, check_exact=True)


def test_chunk_boundaries_do_not_change_any_number(tmp_path, bundle, ids, clean):
    # Other chunk sizes are other batch shapes for TensorFlow's CPU kernels, whose float32 blocking
    # depends on the shape on some CPUs (seen on an AMD EPYC: differences of 1e-11 to 2e-9, with or
    # without oneDNN), so the comparison allows CHUNK_ATOL; on others the files are bit-identical.
    run_batch_job(bundle, tmp_path / "seven", REQUEST, chunk_size=7, ids=ids, progress=False)
    store = open_store(tmp_path / "seven")
    assert store.n_chunks == 43 and store.complete
    long, summary = read_store(tmp_path / "seven")
    _, clean_long, clean_summary = clean
    pd.testing.assert_frame_equal(long, clean_long, check_exact=False, rtol=0, atol=CHUNK_ATOL)
    pd.testing.assert_frame_equal(summary, clean_summary, check_exact=False, rtol=0, atol=CHUNK_ATOL)


# ---- refusals -----------------------------------------------------------------------------------


def _corrupt_manifest(folder, small):
    shutil.copytree(small, folder)
    text = (folder / MANIFEST).read_text()
    (folder / MANIFEST).write_text(text[: len(text) // 2])  # cut in half


def _foreign(folder, small):
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")


def _foreign_beside_a_store(folder, small):
    shutil.copytree(small, folder)
    (folder / "notes.txt").write_text("my notes")


@pytest.mark.parametrize("make, request_, chunk, message", [
    (_corrupt_manifest, REQUEST, 10, r"its manifest .*_manifest.json cannot be read \(JSONDecodeError"),
    (_foreign, REQUEST, 10, r"holds 1 file\(s\) this tool did not write: 'notes.txt'"),
    (_foreign_beside_a_store, REQUEST, 10, r"this tool did not write: 'notes.txt'"),
    (shutil.copytree, Settings(steps=16), 10, r"differs from this one: setting steps: stored 8, requested 16"),
    (shutil.copytree, Settings(steps=8, baseline="median"), 10, r"setting baseline: stored 'mean', requested 'median'"),
    (shutil.copytree, REQUEST, 5, r"chunk size \(--batch-size\): stored 10, requested 5"),
], ids=["corrupt-manifest", "foreign-folder", "foreign-file-in-store", "other-steps", "other-baseline",
        "other-chunk-size"])
def test_folders_that_are_not_this_run_are_refused_and_left_untouched(tmp_path, bundle, ids, small, make,
                                                                       request_, chunk, message):
    out = tmp_path / "out"
    make(small, out) if make is shutil.copytree else make(out, small)
    before = snapshot(out)
    with pytest.raises(StoreError, match=message) as error:
        run_batch_job(bundle, out, request_, chunk_size=chunk, ids=ids[:20], progress=False)
    assert "Nothing was changed" in str(error.value) and "delete the folder" in str(error.value)
    assert snapshot(out) == before


def test_other_customers_or_bundle_are_refused(tmp_path, bundle, ids, small):
    out = tmp_path / "out"
    shutil.copytree(small, out)
    before = snapshot(out)
    with pytest.raises(StoreError, match=r"customers: stored 20 .*requested 21"):
        run_batch_job(bundle, out, REQUEST, chunk_size=10, ids=ids[:21], progress=False)
    other = dataclasses.replace(bundle, content_hash="f" * 64)
    with pytest.raises(StoreError, match=r"bundle content hash: stored .*this bundle ffffffffffff"):
        run_batch_job(other, out, REQUEST, chunk_size=10, ids=ids[:20], progress=False)
    assert snapshot(out) == before


def test_cli_refusal_is_a_message_and_exit_code_2(tmp_path, bundle_dir, customers_file, capsys):
    out = tmp_path / "out"
    _foreign(out, None)
    code = main(["batch", "--bundle", str(bundle_dir), "--out", str(out), "--customers-file",
                 str(customers_file), *SETTINGS])
    assert code == 2
    err = capsys.readouterr().err
    assert "error: Refusing to write into" in err and "notes.txt" in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_unknown_ids_in_the_customers_file_are_named(tmp_path, bundle_dir, capsys):
    path = tmp_path / "ids.txt"
    path.write_text("C00001\nNOPE\n\nC00002\nc00003\n")
    out = tmp_path / "out"
    assert main(["batch", "--bundle", str(bundle_dir), "--out", str(out), "--customers-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 unknown customer id(s): 'NOPE' (line 2), 'c00003' (line 5)" in err
    assert not out.exists()


def test_a_running_job_locks_its_folder(tmp_path, bundle, ids, small):
    import fcntl

    out = tmp_path / "out"
    shutil.copytree(small, out)
    with open(out / LOCK, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(StoreError, match="Another batch run is writing"):
            run_batch_job(bundle, out, REQUEST, chunk_size=10, ids=ids[:20], progress=False)


# ---- finding a store ------------------------------------------------------------------------------


def test_find_store_matches_hash_and_settings(tmp_path, bundle_dir, bundle, ids):
    stores = bundle_dir / "attributions"  # the default place
    try:
        full = stores / "all-steps8"
        run_batch_job(bundle, full, REQUEST, chunk_size=1000, progress=False)
        subset = stores / "subset-steps16"
        run_batch_job(bundle, subset, Settings(steps=16), chunk_size=10, ids=ids[:20], progress=False)
        partial = stores / "partial-steps8"  # same settings, but not finished: ignored
        shutil.copytree(full, partial)
        (partial / SUCCESS).unlink()
        (partial / "part-00002.parquet").unlink()
        (stores / "junk").mkdir()
        (stores / "junk" / MANIFEST).write_text("{oops")

        assert find_store(bundle, REQUEST) == full
        assert find_store(bundle, Settings(steps=8, target="churn")) == full  # the same target, by name
        assert find_store(bundle, Settings(steps=8, baseline="median")) is None
        assert find_store(bundle, Settings(steps=8, tolerance=0.01)) is None
        assert find_store(bundle, Settings(steps=16)) is None  # holds 20 customers, not all
        assert find_store(bundle, Settings(steps=16), ids=ids[3:7]) == subset
        assert find_store(bundle, Settings(steps=16), ids=[*ids[3:7], ids[25]]) is None
        assert find_store(dataclasses.replace(bundle, content_hash="0" * 64), REQUEST) is None
        assert find_store(bundle, REQUEST, search_dirs=[tmp_path]) is None
        assert find_store(bundle, REQUEST, search_dirs=[full]) == full

        long, summary = read_store(full, ids=["C00011", "C00002"])
        assert summary["customer_id"].tolist() == ["C00011", "C00002"]
        assert long["customer_id"].unique().tolist() == ["C00011", "C00002"]
        api = explain_customers(bundle, ["C00011", "C00002"], REQUEST)
        pd.testing.assert_frame_equal(long, long_frame(api, bundle, ["C00011", "C00002"]), check_dtype=False)
        with pytest.raises(StoreError, match="1 customer id.* not in the batch output"):
            read_store(subset, ids=["C00001", "NOPE"])
        with pytest.raises(ExplainError, match="has no _manifest.json"):
            open_store(stores)
    finally:
        shutil.rmtree(stores, ignore_errors=True)


def test_store_arrays_equal_the_engine_in_any_order_across_chunks(clean, bundle, ids):
    folder = clean[0]
    wanted = [ids[250], ids[3], ids[120], ids[49], ids[50]]  # four of the six chunks, out of order
    stored = open_store(folder).arrays(bundle, wanted)
    api = explain_customers(bundle, wanted, REQUEST)
    assert stored.static.shape == (5, bundle.n_static)
    assert stored.temporal.shape == (5, bundle.n_periods, bundle.n_temporal)
    for name in ("static", "temporal", "prediction", "baseline_prediction", "delta"):
        np.testing.assert_allclose(getattr(stored, name), getattr(api, name), rtol=0, atol=CHUNK_ATOL, err_msg=name)
    np.testing.assert_array_equal(stored.steps, api.steps)
    np.testing.assert_allclose(stored.total() + stored.delta, stored.prediction - stored.baseline_prediction,
                               atol=1e-12)
    assert stored.path == folder and stored.settings["steps"] == 8 and stored.completed
    with pytest.raises(StoreError, match="1 customer id.* not in the batch output"):
        open_store(folder).arrays(bundle, [ids[0], str(bundle.ids[1])])


@pytest.mark.parametrize("kind", ["compact", "format 2"])
def test_store_arrays_refuse_a_store_of_another_layout(kind, small, tmp_path, bundle, ids):
    if kind == "compact":
        store, where = open_store(small), r"does not fit this bundle's features and periods \("
    else:
        store = open_store(write_old_store(bundle, tmp_path / "old", REQUEST, ids[:20], 10, version=2))
        where = r"does not fit this bundle's features and periods \(chunk 0: "
    renamed = dataclasses.replace(bundle, temporal_features=[*bundle.temporal_features[:-1], "renamed"])
    with pytest.raises(StoreError, match=where + r"row 15 of a customer has feature 'bill_amount', this bundle "
                                               r"expects 'renamed'\)"):
        store.arrays(renamed, ids[:3])
    shifted = dataclasses.replace(bundle, periods=[f"m{k}" for k in range(bundle.n_periods)])
    with pytest.raises(StoreError, match="row 10 of a customer has period '2025-01', this bundle expects 'm0'"):
        store.arrays(shifted, ids[:3])
    wider = dataclasses.replace(bundle, static=np.hstack([bundle.static, bundle.static[:, :1]]),
                                static_features=[*bundle.static_features, "extra"])
    with pytest.raises(StoreError, match=(r"81 cells per customer in the store, this bundle has 82" if kind == "compact"
                                          else r"243 rows for the customers asked for, not a multiple of the 82 rows")):
        store.arrays(wider, ids[:3])


def test_a_failing_chunk_names_itself_and_keeps_the_finished_ones(monkeypatch, tmp_path, bundle, ids, small):
    original = batch.compute_chunk

    def failing(bundle_, chunk_ids, *args):
        if chunk_ids[0] == ids[10]:
            raise ExplainError("The model returned NaN.")
        return original(bundle_, chunk_ids, *args)

    monkeypatch.setattr(batch, "compute_chunk", failing)
    out = tmp_path / "out"
    with pytest.raises(ExplainError, match=rf"Chunk 1 \(customers {ids[10]} to {ids[19]}\) failed: The model "
                                           r"returned NaN\. The finished chunks are kept"):
        run_batch_job(bundle, out, REQUEST, chunk_size=10, ids=ids[:20], progress=False)
    assert (out / "part-00000.parquet").exists() and not (out / SUCCESS).exists()
    monkeypatch.setattr(batch, "compute_chunk", original)
    result = run_batch_job(bundle, out, REQUEST, chunk_size=10, ids=ids[:20], progress=False)
    assert (result.reused_chunks, result.computed_chunks) == (1, 1)
    for mine, reference in zip(read_store(out), read_store(small)):
        pd.testing.assert_frame_equal(mine, reference, check_exact=True)
