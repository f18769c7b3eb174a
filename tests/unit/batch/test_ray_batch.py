"""The batch job on Ray (``--engine ray``): the local job's store, row for row, through an actor
killed mid-run and a driver killed mid-run, from CSV and from shuffled Parquet tables read with Ray
Data; refusals as the local job's; the regrouping of the tables into chunks equals the loader's
arrays (that part needs no Ray).

Runs on the pytest worker's local Ray with 2 CPUs (the conftest fixture ``ray_cluster``, shared with the other
Ray test files on the worker: tests/support/ray_cluster.py); ``ray`` is an optional extra: these tests are skipped
where it is not installed; scripts/test.sh installs it, so CI runs them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from explain.batch import ray_job as ray_batch
from explain.batch import ray_tables
from explain.batch.format import MANIFEST, StoreError
from explain.batch.local import run_batch_job
from explain.batch.store import open_store, read_store
from explain.batch.stores import find_store
from explain.bundle.load import load_bundle
from explain.cli import main
from explain.core.errors import ExplainError
from explain.core.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
REQUEST = Settings(steps=8)
SETTINGS = ["--steps", "8"]
CHUNK = 4  # many small chunks: a kill lands mid-run

needs_ray = pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None,
    reason="ray is not installed (pip install -r requirements-ray.txt; CI installs it)")


@pytest.fixture(scope="module")
def ids(bundle_dir):
    return [str(i) for i in load_bundle(bundle_dir).ids[::50]]  # 60 customers over the data set, 15 chunks


@pytest.fixture(scope="module")
def local(tmp_path_factory, bundle_dir, ids):
    """The local engine's store of ``ids``, read back: (folder, long, summary)."""
    out = tmp_path_factory.mktemp("local") / "local.parquet"
    run_batch_job(load_bundle(bundle_dir), out, REQUEST, chunk_size=CHUNK, ids=ids, progress=False)
    return (out, *read_store(out))


PARQUET_CUSTOMERS = 600  # every 5th of the demo's 3,000: the regrouping and the data-wide baseline need no more


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory, bundle_dir):
    """A cut of the demo (every 5th customer, PARQUET_CUSTOMERS, with all their periods) as a Parquet bundle whose
    rows are in another order than the loader's: static rows shuffled (so the customers' order changes too),
    temporal rows shuffled across customers and periods, so regrouping per customer and ordering by period are
    both needed."""
    folder = tmp_path_factory.mktemp("parquet") / "shuffled"
    folder.mkdir()
    for name in ("model.keras", "bundle.json"):
        shutil.copy2(bundle_dir / name, folder / name)
    rng = np.random.default_rng(7)
    static = pd.read_csv(bundle_dir / "static.csv", dtype={"customer_id": str})
    static = static.iloc[::len(static) // PARQUET_CUSTOMERS]
    temporal = pd.read_csv(bundle_dir / "temporal.csv", dtype={"customer_id": str, "period": str})
    temporal = temporal[temporal["customer_id"].isin(static["customer_id"])]
    assert len(static) == PARQUET_CUSTOMERS and len(temporal) % PARQUET_CUSTOMERS == 0
    static.iloc[rng.permutation(len(static))].to_parquet(folder / "static.parquet", index=False)
    temporal.iloc[rng.permutation(len(temporal))].to_parquet(folder / "temporal.parquet", index=False)
    return folder


def _regrouped(folder: Path, ids: list[str], chunk_size: int, n_buckets: int, block_rows: int) -> dict:
    """ray_tables' steps 2-4 run here without Ray, on blocks of ``block_rows`` rows and
    ``n_buckets`` buckets, as Ray Data would run them: {chunk: (ids, static, temporal)}."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    bundle = load_bundle(folder)
    layout = ray_tables.table_layout(folder, bundle)
    parts = []
    for kind, name in ((ray_tables.STATIC, "static"), (ray_tables.TEMPORAL, "temporal")):
        info = layout["files"][name]
        table = (pacsv.read_csv(info["path"], convert_options=ray_tables.csv_text_options(info)) if info["csv"]
                 else pq.read_table(info["path"]))
        for start in range(0, table.num_rows, block_rows):
            parts.append(ray_tables.normalised_rows(table.slice(start, block_rows), kind=kind, layout=layout,
                                                    n_buckets=n_buckets))
    position = np.arange(len(ids))
    keys = pa.table({"customer_id": ids, "chunk": position // chunk_size, "slot": position % chunk_size})
    rows = pa.concat_tables([ray_tables.key_rows(keys, n_buckets=n_buckets), *parts])
    customers = pa.concat_tables([ray_tables.customers_of_bucket(rows.filter(pc.equal(rows["bucket"], b)),
                                                                 layout=layout)
                                  for b in range(n_buckets)])
    out = {}
    for chunk in sorted(set(customers["chunk"].to_pylist())):
        row = ray_tables.chunk_row(customers.filter(pc.equal(customers["chunk"], chunk))).to_pylist()[0]
        out[chunk] = ray_tables.chunk_arrays(row, layout)
    return out


@pytest.mark.parametrize("which", ["csv", "parquet"])
def test_the_tables_regrouped_per_chunk_are_the_loaders_arrays(which, bundle_dir, parquet_dir):
    """What the actors get from Ray Data is, chunk by chunk, bit for bit what ``load_bundle``
    gives the local job: same customers in the same order, same float32 values, periods in the
    loader's order. (No Ray needed: the steps are plain Arrow functions.)"""
    folder = bundle_dir if which == "csv" else parquet_dir
    bundle = load_bundle(folder)
    ids = [str(i) for i in bundle.ids[::7]][::-1]  # a subset, in another order than the file's
    chunk_size = 50
    chunks = _regrouped(folder, ids, chunk_size, n_buckets=3, block_rows=4000)
    assert sorted(chunks) == list(range(-(-len(ids) // chunk_size)))
    for chunk, (chunk_ids, static, temporal) in chunks.items():
        assert chunk_ids == ids[chunk * chunk_size:(chunk + 1) * chunk_size]
        expected = bundle.inputs_for(chunk_ids)
        assert static.dtype == expected["static"].dtype and temporal.dtype == expected["temporal"].dtype
        np.testing.assert_array_equal(static, expected["static"])
        np.testing.assert_array_equal(temporal, expected["temporal"])


def test_a_customer_missing_from_the_tables_is_named(bundle_dir, tmp_path):
    """A table that changed after the bundle was checked: the regrouping names the customer."""
    bundle = load_bundle(bundle_dir)
    layout = ray_tables.table_layout(bundle_dir, bundle)
    keys = pa.table({"customer_id": ["C00001", "NOT-THERE"], "chunk": [0, 0], "slot": [0, 1]})
    rows = ray_tables.key_rows(keys, n_buckets=1)
    with pytest.raises(ExplainError, match=r"static.csv does not match what was checked .*customer 'C00001' has 0 "
                                           r"row\(s\), expected 1"):
        ray_tables.customers_of_bucket(rows, layout=layout)


def _same_store(out: Path, local) -> None:
    """``out`` holds exactly the local engine's rows, and a manifest that differs only in times."""
    local_out, local_long, local_summary = local
    long, summary = read_store(out)
    pd.testing.assert_frame_equal(long, local_long, check_exact=True)
    pd.testing.assert_frame_equal(summary, local_summary, check_exact=True)
    times = ("created", "completed")
    mine = {k: v for k, v in json.loads((out / MANIFEST).read_text()).items() if k not in times}
    theirs = {k: v for k, v in json.loads((local_out / MANIFEST).read_text()).items() if k not in times}
    assert mine == theirs and mine["format_version"] == 3  # the compact store, as the local engine writes it
    arrays, local_arrays = read_store(out, long=False)[0], read_store(local_out, long=False)[0]
    for key in local_arrays:
        np.testing.assert_array_equal(arrays[key], local_arrays[key])
    assert not [p for p in out.rglob(".*") if p.is_file()], "temporary or lock files left behind"


def _part_files(out: Path) -> int:
    return len(list(out.glob("part-*.parquet"))) if out.is_dir() else 0


def _chunk_writers() -> list[psutil.Process]:
    """The actor processes of this test's Ray (descendants of this process)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "ChunkWriter" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            pass
    return found


@needs_ray
def test_same_rows_as_local_with_an_actor_killed_mid_run(ray_cluster, bundle_dir, ids, local, tmp_path):
    out = tmp_path / "ray.parquet"
    n_chunks = -(-len(ids) // CHUNK)
    outcome = {}

    def job():
        try:
            outcome["result"] = ray_batch.run_ray_batch_job(bundle_dir, out, REQUEST, chunk_size=CHUNK, ids=ids,
                                                            workers=2, progress=False)
        except BaseException as error:  # reported by the assertion below
            outcome["error"] = error

    thread = threading.Thread(target=job)
    thread.start()
    deadline = time.monotonic() + 300
    while _part_files(out) == 0 and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = _chunk_writers()[:1]
    for actor in killed:
        actor.kill()  # SIGKILL, mid-run: Ray restarts the actor and retries its chunk
    thread.join(600)
    assert "error" not in outcome, outcome.get("error")
    assert killed and _part_files(out) == n_chunks
    result = outcome["result"]
    # a chunk the killed actor had written before the kill is verified and kept by the retry (reused),
    # never written twice: which chunks, if any, depends on when the kill lands
    assert result.complete and result.computed_chunks + result.reused_chunks == n_chunks
    assert result.reused_chunks < n_chunks // 2, result  # only what was in flight on the killed actor
    _same_store(out, local)
    # the dashboard's reader finds it, and the local engine resumes it as its own: nothing to compute
    assert find_store(load_bundle(bundle_dir), REQUEST, [out.parent], ids=ids) == out
    again = run_batch_job(load_bundle(bundle_dir), out, REQUEST, chunk_size=CHUNK, ids=ids, progress=False)
    assert again.computed_chunks == 0 and again.reused_chunks == n_chunks


@needs_ray
def test_resume_after_the_driver_is_killed_gives_the_same_store(ray_cluster, bundle_dir, ids, local, tmp_path):
    """``kill -9`` of the job's driver mid-run, then the same command again: the finished chunks are kept, the
    rest computed. The driver is the command line in its own process, on this test's Ray (``RAY_ADDRESS``, as
    ``ray job submit`` runs it on a cluster), with one actor: the kill takes the driver, and Ray then ends the
    actor it owned; the cluster stays, and the second command runs on it (in this process). The output is a
    ``file://`` URI, so this also runs the pyarrow-filesystem path (the one S3 takes)."""
    from tests.support import ray_cluster as cluster

    out = tmp_path / "killed.parquet"
    customers = tmp_path / "customers.txt"
    customers.write_text("\n".join(ids) + "\n")
    n_chunks = -(-len(ids) // CHUNK)
    args = ["batch", "--bundle", str(bundle_dir), "--out", out.as_uri(), "--customers-file", str(customers),
            *SETTINGS, "--batch-size", str(CHUNK), "--engine", "ray", "--workers", "1"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT), "RAY_ADDRESS": cluster.address()}
    proc = subprocess.Popen([sys.executable, "-m", "explain", *args], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    family, writers = [], []
    try:
        deadline = time.monotonic() + 300
        while _part_files(out) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        writers = _chunk_writers()  # the killed job's actor, on this test's Ray
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    finally:
        for process in family:  # the driver (and anything it started), mid-run
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        proc.wait(60)
        psutil.wait_procs(family, timeout=60)
    assert writers, "the killed job's actor was not found"
    psutil.wait_procs(writers, timeout=120)  # Ray ends the actors of a dead driver: nothing of it writes on
    done = _part_files(out)
    assert 0 < done < n_chunks, f"the kill should land mid-run ({done} of {n_chunks} chunks written)"

    # the same command again (on this test's Ray): keeps the finished chunks, computes the rest
    assert main(args) == 0
    store = open_store(out)
    assert store.complete
    _same_store(out, local)
    assert not list(out.rglob("*.part"))


@needs_ray
def test_every_customer_of_a_shuffled_parquet_bundle_same_as_local(ray_cluster, parquet_dir, tmp_path):
    """Ray Data's read_parquet path, the whole bundle (no customers file) and a data-wide
    baseline computed once by the planning task: the local engine's store, bit for bit."""
    request = Settings(steps=8, baseline="median")
    local_out, ray_out = tmp_path / "local", tmp_path / "ray"
    size = PARQUET_CUSTOMERS // 6
    run_batch_job(load_bundle(parquet_dir), local_out, request, chunk_size=size, progress=False)
    result = ray_batch.run_ray_batch_job(parquet_dir, ray_out, request, chunk_size=size, workers=1, progress=False)
    assert result.complete and result.n_customers == PARQUET_CUSTOMERS and result.computed_chunks == 6
    _same_store(ray_out, (local_out, *read_store(local_out)))

    # more chunks than blocks (a large run: the driver keeps one entry per block, so blocks are
    # capped): three chunks per block, the same store. One actor takes both blocks (two blocks per worker): the
    # same two blocks as two actors with one block per worker, one TensorFlow process less
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray_tables, "MIN_BLOCKS", 1)
        patch.setattr(ray_tables, "BLOCKS_PER_WORKER", 2)
        assert ray_tables.blocks_for(6, 1) == 2
        capped = ray_batch.run_ray_batch_job(parquet_dir, tmp_path / "capped", request, chunk_size=size, workers=1,
                                             progress=False)
    assert capped.complete and capped.computed_chunks == 6
    _same_store(tmp_path / "capped", (local_out, *read_store(local_out)))


def test_blocks_are_one_per_chunk_for_small_runs_and_capped_for_large_ones():
    for workers in (1, 2, 16):
        cap = max(ray_tables.MIN_BLOCKS, ray_tables.BLOCKS_PER_WORKER * workers)
        assert [ray_tables.blocks_for(n, workers) for n in (1, 5, cap)] == [1, 5, cap]
        assert ray_tables.blocks_for(cap + 1, workers) == ray_tables.blocks_for(250_000, workers) == cap


@needs_ray
def test_a_different_run_is_refused_and_nothing_is_changed(ray_cluster, bundle_dir, ids, local, tmp_path):
    out = tmp_path / "copy.parquet"
    shutil.copytree(local[0], out)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    with pytest.raises(StoreError, match=r"setting steps: stored 8, requested 16"):
        ray_batch.run_ray_batch_job(bundle_dir, out, Settings(steps=16), chunk_size=CHUNK, ids=ids, progress=False)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="holds 1 file\\(s\\) this tool did not write: 'notes.txt'"):
        ray_batch.run_ray_batch_job(bundle_dir, out, REQUEST, chunk_size=CHUNK, ids=ids, progress=False)
    (out / "notes.txt").unlink()
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_every_worker_of_the_command_lines_ray_starts_with_keras_without_its_sklearn_wrappers():
    """``_connect`` gives a local Ray and a cluster the setup hook that every worker runs as it starts, and the hook
    names ``backend.skip_unused_optional_imports`` (what it leaves out: tests/unit/core/test_keras_import.py)."""
    import importlib

    from explain.core import backend

    seen = []

    class Ray:
        def is_initialized(self):
            return False

        def init(self, **kwargs):
            seen.append(kwargs["runtime_env"])

    assert ray_batch._connect(Ray(), None) and ray_batch._connect(Ray(), "auto")
    assert [env["worker_process_setup_hook"] for env in seen] == [ray_batch.WORKER_SETUP] * 2
    module, name = ray_batch.WORKER_SETUP.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) is backend.skip_unused_optional_imports


def test_without_address_the_command_line_uses_the_cluster_of_ray_address(monkeypatch):
    """Ray's own ``RAY_ADDRESS`` (``ray job submit`` sets it for the command it runs) names the cluster where
    ``--address`` is left out: ``ray.init`` is given that address and no ``num_cpus`` (which Ray refuses when it
    connects to a cluster); ``--address`` wins over it; without either, a local Ray with this machine's cores."""
    seen = []

    class Ray:
        def is_initialized(self):
            return False

        def init(self, **kwargs):
            seen.append({k: kwargs.get(k) for k in ("address", "num_cpus")})

    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert ray_batch._connect(Ray(), None) and ray_batch._connect(Ray(), "auto")
    monkeypatch.delenv("RAY_ADDRESS")
    assert ray_batch._connect(Ray(), None)
    assert seen == [{"address": "ray://head:10001", "num_cpus": None}, {"address": "auto", "num_cpus": None},
                    {"address": None, "num_cpus": os.cpu_count()}]


def test_without_ray_the_message_says_how_to_install_it(monkeypatch, bundle_dir, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as where it is not installed
    code = main(["batch", "--bundle", str(bundle_dir), "--out", str(tmp_path / "out"), "--engine", "ray"])
    err = capsys.readouterr().err
    assert code == 2 and "pip install -r requirements-ray.txt" in err and ray_batch.RAY_PIN in err
    assert not (tmp_path / "out").exists()


def test_ray_options_without_engine_ray_are_refused(bundle_dir, tmp_path, capsys):
    code = main(["batch", "--bundle", str(bundle_dir), "--out", str(tmp_path / "out"), "--workers", "2"])
    assert code == 2 and ray_batch.ONLY_WITH_RAY.format(option="--workers") in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
