"""The batch job on a Ray cluster: the same store as ``explain.batch.local``, written by an actor pool.

    python -m explain batch --bundle DIR --out OUT --engine ray [--address auto|ray://HOST:PORT] [--workers N]

Ray does the scheduling; this module only says what the plan and one chunk are. The chunks are
the local job's (``--batch-size`` customers each, in the same order), so the store is the same
one: same manifest, same part files (compact, format 3) and summary files, same ``_SUCCESS``, read unchanged by
``read_store``, ``find_store`` and the Cohort page, and resumable by either engine.

- The driver never loads the bundle. A Ray task (``_plan``) opens it once (the same
  ``load_bundle``, so every problem is reported before any work), checks the settings on one
  customer, computes a data-wide baseline once, and returns the plan (manifest, table layout,
  model hash, baseline) and, as an object ref the driver never fetches, the key table
  ``customer_id, chunk, slot``. The driver checks the output folder (refusals as in the local
  job) and writes the manifest.
- ``explain.batch.ray_tables`` reads the tables with Ray Data and regroups them into one row per
  chunk (the temporal long table grouped per customer on the way), materialised in the object
  store, one chunk per block up to ``ray_tables.blocks_for`` blocks (then several per block). The
  driver holds the plan, Ray Data's bookkeeping of those blocks and one small row per finished
  chunk: its memory does not grow with the number of customers.
- A fixed pool of ``ChunkWriter`` actors (``map_batches`` with an actor pool) takes the chunks:
  each actor loads the model once (the same safe loader, the same engine), refuses a model file
  whose hash differs from the planning node's, and per chunk keeps it if its two files verify
  (``store_format.verify_chunk``), else computes and writes it with the local job's functions
  (``batch.compute_chunk``, ``store_format.write_chunk``: temporary file, then rename).
- A killed actor is restarted and its block retried by Ray (``max_restarts=-1``,
  ``max_task_retries=-1``). The retry verifies each chunk first, so a chunk that was written
  before the kill is not written again (it counts as reused), and a half-written one never had
  its final name. Temporary files of killed actors are removed at the end (and at the start of
  a rerun).
- Output: a local folder that every node sees at the same path (one machine, or a shared file
  system), or a URI pyarrow understands (``s3://bucket/prefix``, ``gs://...``, ``file://...``):
  see ``explain/batch/ray_store.py`` for how files get there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from pathlib import Path

from explain.batch import format as fmt
from explain.batch import job
from explain.batch import local as batch
from explain.core import backend as keras_backend
from explain.core.errors import ExplainError
from explain.core.settings import Settings
from explain.core.text import one_line

RAY_PIN = "ray[data]==2.60.0"
ROOT = Path(__file__).resolve().parents[2]
# run by every Ray worker process as it starts (runtime_env's worker_process_setup_hook), before it imports this
# module and Keras: Keras' import without its scikit-learn wrappers, about 0.8 s less a planning task or actor
WORKER_SETUP = "explain.core.backend.skip_unused_optional_imports"

# ---- messages (tests match these) ------------------------------------------------------------
NO_RAY = ("--engine ray needs Ray, which is an optional extra and is not installed here ({why}). "
          "Install it with `pip install -r requirements-ray.txt` (that is {pin}) on this machine and on "
          "every node of the cluster, or run without --engine ray (the local engine).")
ONLY_WITH_RAY = "{option} only applies to --engine ray; drop it, or add --engine ray."
BAD_WORKERS = "--workers (Ray actors, one chunk at a time each) must be a positive integer, got {value!r}."
NO_CONNECT = ("Cannot connect to the Ray cluster at {address} ({why}). Start one with `ray start "
              "--head` (see README, Batch on a Ray cluster), check the address (auto, or ray://HOST:10001), "
              "or leave --address and RAY_ADDRESS out to start a local Ray with this machine's cores.")
OTHER_BUNDLE = ("The model file {path} on node {node} has sha256 {got}..., not {wanted}... as on the node "
                "that planned the job: every node must see the same bundle files at the same path.")
CHUNK_INCOMPLETE = ("Chunk {chunk} arrived with {got} of its {expected} customers (were the bundle's tables "
                    "replaced while the job ran?); rerun the same command (finished chunks are kept).")
MISSING_CHUNKS = ("Only {done} of {total} chunks came through; the others' customers were not found in the "
                  "bundle's tables. Were the tables replaced while the job ran? The finished chunks are kept "
                  "in {out}; rerun the same command to resume.")


def _import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as error:
        raise ExplainError(NO_RAY.format(why=one_line(error), pin=RAY_PIN)) from None
    return ray


def _plan(bundle_path: str, ids: list[str] | None, request: Settings, chunk_size: int, limits=None):
    """(Runs as a Ray task, once.) Check the bundle (``load_bundle``: every problem before any
    work), the ids and the settings. Returns (the plan: manifest, table layout, model hash,
    data-wide baseline; the key table ``customer_id, chunk, slot`` of the run)."""
    import numpy as np
    import pyarrow as pa

    from explain.analysis.explainer import baseline_for, explain_customers
    from explain.batch.ray_tables import table_layout
    from explain.bundle.load import LEGACY_MODEL_FILE, MODEL_FILE, load_bundle
    from explain.modelfile.limits import OWNER_LIMITS

    bundle = load_bundle(bundle_path, limits=limits or OWNER_LIMITS)  # the caller's own bundle: the owner's limits
    if not bundle.content_hash:
        raise ExplainError(batch.NO_HASH)
    ids = [str(i) for i in bundle.ids] if ids is None else batch.check_ids(bundle, ids)
    explain_customers(bundle, ids[:1], request)  # bad settings fail here, before any folder is made
    settings = request.for_bundle(bundle)
    baseline = None  # a data-wide baseline (mean, median, sample, ...) needs the whole data set: computed here once
    if settings.baseline.data_wide:
        baseline = {k: np.array(v) for k, v in
                    baseline_for(bundle, bundle.inputs_for(ids[:1]), settings.baseline, settings.seed).items()}
    # the file load_bundle opened: model.keras, else a legacy model.h5
    model_file = MODEL_FILE if (Path(bundle_path) / MODEL_FILE).is_file() else LEGACY_MODEL_FILE
    plan = {"manifest": fmt.new_manifest(bundle, ids, request, chunk_size), "bundle_path": bundle_path,
            "model_file": model_file, "model_sha256": _sha256(Path(bundle_path) / model_file),
            "layout": table_layout(bundle_path, bundle, limits or OWNER_LIMITS),
            "periods": list(bundle.periods), "output_names": list(bundle.output_names),
            "input_roles": tuple(bundle.input_roles), "baseline": baseline}
    position = np.arange(len(ids))
    keys = pa.table({"customer_id": pa.array(ids, pa.string()), "chunk": position // chunk_size,
                     "slot": position % chunk_size})
    return plan, keys


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ChunkWriter:
    """A Ray Data actor: the model loaded once (the same safe loader and engine as the local
    job); per call, one chunk's arrays (from ``ray_tables``), verified or computed and written."""

    def __init__(self, plan: dict, request: Settings, target: str, engine_batch_size: int | None = None):
        from explain.batch import ray_store
        from explain.modelfile.safe_load import open_model

        path = Path(plan["bundle_path"]) / plan["model_file"]
        got = _sha256(path)
        if got != plan["model_sha256"]:
            import socket

            raise ExplainError(OTHER_BUNDLE.format(path=path, node=socket.gethostname(), got=got[:12],
                                                   wanted=plan["model_sha256"][:12]))
        self.model = open_model(path)  # load_bundle's default loader (safe_load.load_model for .keras)
        self.plan, self.manifest, self.request = plan, plan["manifest"], request
        self.engine_batch_size = engine_batch_size
        self.target = ray_store.target(target)

    def _bundle(self, ids, static, temporal):
        """The chunk as a bundle: its customers only (the data-wide baseline comes from the plan)."""
        import numpy as np

        from explain.bundle.load import Bundle

        layout = self.plan["layout"]
        return Bundle(path=None, model=self.model, ids=np.asarray(ids, dtype=object), static=static, temporal=temporal,
                      static_features=layout["static_features"], temporal_features=layout["temporal_features"],
                      periods=self.plan["periods"], output_names=self.plan["output_names"],
                      input_roles=self.plan["input_roles"])

    def __call__(self, rows: dict) -> dict:
        import numpy as np

        from explain.batch.ray_tables import chunk_arrays

        size, n_chunks = self.manifest["chunk_size"], self.manifest["n_chunks"]
        chunks, customers, computed = [], [], []
        for k in range(len(rows["chunk"])):
            chunk = int(rows["chunk"][k])
            ids, static, temporal = chunk_arrays({name: rows[name][k] for name in rows}, self.plan["layout"])
            expected = min(size, self.manifest["customers"]["count"] - chunk * size) if 0 <= chunk < n_chunks else -1
            if list(rows["slots"][k]) != list(range(expected)):
                raise ExplainError(CHUNK_INCOMPLETE.format(chunk=chunk, got=len(ids), expected=expected))
            with self.target.chunk(chunk) as folder:  # a local folder holding (a copy of) the chunk's files
                if fmt.verify_chunk(folder, self.manifest, chunk, ids) is None:
                    done = False
                else:
                    arrays, summary = batch.compute_chunk(self._bundle(ids, static, temporal), ids, self.request,
                                                          self.engine_batch_size, baseline=self.plan["baseline"])
                    fmt.write_chunk(folder, self.manifest, chunk, arrays, summary)
                    done = True
            chunks.append(chunk)
            customers.append(len(ids))
            computed.append(done)
        return {"chunk": np.array(chunks, np.int64), "customers": np.array(customers, np.int64),
                "computed": np.array(computed, bool)}


def _connect(ray, address: str | None) -> bool:
    """ray.init: the cluster at ``address`` (else at Ray's ``RAY_ADDRESS`` environment variable), or a local Ray
    with this machine's cores (True if this call started it or connected to it)."""
    if ray.is_initialized():
        return False
    # Ray's own variable (`ray job submit` sets it for the command it runs): that cluster, as if named by --address
    where = f"--address {address}" if address else f"RAY_ADDRESS={os.environ.get('RAY_ADDRESS')}"
    address = address or os.environ.get("RAY_ADDRESS") or None
    # the workers compute on the driver's Keras backend (KERAS_BACKEND, else keras.json): a cluster's nodes
    # would otherwise each pick their own (TensorFlow by default)
    env = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
                        "KERAS_BACKEND": keras_backend.name()}, "worker_process_setup_hook": WORKER_SETUP}
    if address is None:
        # local: the workers import this checkout (on a cluster, each node has it installed)
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env["env_vars"]["PYTHONPATH"] = path
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, runtime_env=env,
                 logging_level="ERROR", log_to_driver=False)
        return True
    try:
        ray.init(address=address, runtime_env=env, logging_level="ERROR", log_to_driver=False)
    except Exception as error:  # ConnectionError, ValueError, RuntimeError, grpc errors...
        raise ExplainError(NO_CONNECT.format(address=where, why=one_line(error))) from None
    return True


def _cause(error: BaseException) -> BaseException:
    """The ExplainError inside Ray's wrappers (RayTaskError, UserCodeException), if any."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ExplainError):
            return error
        inner = getattr(error, "cause", None)
        error = inner if isinstance(inner, BaseException) else (error.__cause__ or error.__context__)
    return None


def run_ray_batch_job(bundle, out, request: Settings = Settings(), *, chunk_size: int = job.DEFAULT_CHUNK_SIZE,
                      ids=None, workers: int | None = None, address: str | None = None,
                      progress: bool = True, engine_batch_size: int | None = None, limits=None) -> job.BatchResult:
    """``batch.run_batch_job`` on Ray: the same store in ``out`` (a folder or a pyarrow URI).

    ``bundle``: a bundle folder, seen at the same path by every node. ``workers``: actors in the
    pool (default: the cluster's CPUs). ``address``: an existing cluster (``auto``,
    ``ray://HOST:PORT``); default: the running Ray of this process, else a new local one. ``limits``: the sizes
    the bundle's files are checked against (default ``OWNER_LIMITS``: the caller's own bundle), by the planning
    task's ``load_bundle`` and again before Ray Data reads the tables (``ray_tables.table_layout``).
    """
    from explain.batch import ray_store

    started = time.perf_counter()
    chunk_size = job.check_chunk_size(chunk_size)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ExplainError(BAD_WORKERS.format(value=workers))
    bundle_path = str(Path(getattr(bundle, "path", None) or bundle).expanduser().resolve())
    ids = None if ids is None else list(dict.fromkeys(str(i) for i in ids))  # as batch.check_ids
    target = ray_store.target(out)
    target.refuse_early()
    ray = _import_ray()
    started_here = _connect(ray, address)
    try:
        with _own_errors():
            plan_ref, keys_ref = ray.remote(num_cpus=1, num_returns=2, max_calls=1)(_plan).remote(
                bundle_path, ids, request, chunk_size, limits)
            plan = ray.get(plan_ref)  # small: the key table stays in the object store
        n_chunks = plan["manifest"]["n_chunks"]
        with target.open(plan["manifest"]) as (manifest, temps):
            plan = {**plan, "manifest": manifest}  # the stored one when resuming
            cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
            workers = min(workers or cpus, n_chunks)
            if progress:
                print(f"reading the bundle's tables with Ray Data into {n_chunks} chunk(s)...", file=sys.stderr)
            dataset = _pool_dataset(ray, plan, keys_ref, n_chunks=n_chunks, cpus=cpus, workers=workers, actor_kwargs={
                "plan": plan, "request": request, "target": target.spec, "engine_batch_size": engine_batch_size})
            computed, reused = job.follow(_finished(dataset, out), total=manifest["customers"]["count"],
                                          desc=f"batch (ray, {workers} workers)", progress=progress, where=out)
            if computed + reused != n_chunks:
                raise ExplainError(MISSING_CHUNKS.format(done=computed + reused, total=n_chunks, out=out))
            manifest = target.finish(manifest)
    finally:
        if started_here:
            ray.shutdown()
    return job.result(target.display_path, manifest, n_chunks=n_chunks, computed=computed, reused=reused,
                      temporary_files=temps, started=started)


@contextlib.contextmanager
def _own_errors():
    """An ExplainError raised inside Ray's wrappers re-raised as itself (its message, not Ray's traceback)."""
    try:
        yield
    except Exception as error:
        cause = _cause(error)
        if cause is None:
            raise
        raise cause from None


def _pool_dataset(ray, plan: dict, keys_ref, *, n_chunks: int, cpus: int, workers: int, actor_kwargs: dict):
    """The run's chunks read by Ray Data (:func:`explain.batch.ray_tables.chunks`), mapped through a pool of
    ``workers`` :class:`ChunkWriter` actors (made with ``actor_kwargs``); Ray Data's own progress output off."""
    from explain.batch import ray_tables

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # its per-dataset INFO lines; our bar says it
    with _own_errors():
        chunks = ray_tables.chunks(ray, plan["layout"], keys_ref, n_customers=plan["manifest"]["customers"]["count"],
                                   n_chunks=n_chunks, cpus=cpus, workers=workers)
    return chunks.map_batches(
        ChunkWriter, batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers),
        fn_constructor_kwargs=actor_kwargs,
        # Ray Data's defaults restart a dead actor and retry its chunk (max_restarts=-1, max_task_retries=-1)
        num_cpus=1)


def _finished(dataset, out):
    """``(customers, computed)`` per chunk as the actors finish them; an error from inside Ray as its own words."""
    try:
        for rows in dataset.iter_batches(batch_size=None, batch_format="numpy"):
            for customers, computed in zip(rows["customers"], rows["computed"]):
                yield int(customers), bool(computed)
    except Exception as error:
        cause = _cause(error)
        if cause is None:
            raise
        raise ExplainError(f"{cause} The finished chunks are kept in {out}; fix the cause and rerun "
                           "the same command to resume.") from None
