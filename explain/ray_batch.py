"""The batch job on a Ray cluster: the same store as ``explain.batch``, written by an actor pool.

    python -m explain batch --bundle DIR --out OUT --engine ray [--address auto|ray://HOST:PORT] [--workers N]

Ray does the scheduling; this module only says what one chunk is. The chunks are the local
job's (``--batch-size`` customers each, in the same order), so the store is the same one:
same manifest, same part and summary files, same ``_SUCCESS``, read unchanged by
``read_store``, ``find_store`` and the Cohort page, and resumable by either engine.

- The driver never loads the bundle: a Ray task opens it once (the same ``load_bundle``, so
  every problem is reported before any work), checks the settings on one customer and sends
  back the manifest. The driver then checks the output folder (refusals as in the local job),
  writes the manifest and streams ``ray.data.range(n_chunks)`` through ``map_batches`` with a
  fixed pool of ``ChunkWriter`` actors, one chunk per call. It holds the manifest and one small
  row per finished chunk: its memory does not grow with the number of customers.
- Each actor opens the bundle once (the same safe loader, the same engine), refuses a bundle
  whose content hash differs from the manifest's, and for each chunk: keeps it if its two files
  verify (``batch._verify_chunk``), else computes and writes it with the local job's own
  functions (``batch._compute_chunk``, ``batch._write_chunk``: temporary file, then rename).
- A killed actor is restarted and its chunk retried by Ray (``max_restarts=-1``,
  ``max_task_retries=-1``). The retry verifies first, so a chunk that was written before the
  kill is not written again, and a half-written one never had its final name. Temporary files
  of killed actors are removed at the end (and at the start of a rerun).
- Output: a local folder that every node sees at the same path (one machine, or a shared file
  system), or a URI pyarrow understands (``s3://bucket/prefix``, ``gs://...``, ``file://...``):
  see ``explain/ray_store.py`` for how files get there.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from explain import batch
from explain import store_format as fmt
from explain.errors import ExplainError
from explain.settings import Settings
from explain.text import one_line

RAY_PIN = "ray[data]==2.60.0"
ROOT = Path(__file__).resolve().parent.parent

# ---- messages (tests match these) ------------------------------------------------------------
NO_RAY = ("--engine ray needs Ray, which is an optional extra and is not installed here ({why}). "
          "Install it with `pip install -r requirements-ray.txt` (that is {pin}) on this machine and on "
          "every node of the cluster, or run without --engine ray (the local engine).")
ONLY_WITH_RAY = "{option} only applies to --engine ray; drop it, or add --engine ray."
BAD_WORKERS = "--workers (Ray actors, one chunk at a time each) must be a positive integer, got {value!r}."
NO_CONNECT = ("Cannot connect to the Ray cluster at --address {address} ({why}). Start one with `ray start "
              "--head` (see README, Batch on a Ray cluster), check the address (auto, or ray://HOST:10001), "
              "or leave --address out to start a local Ray with this machine's cores.")
OTHER_BUNDLE = ("The bundle {path} on node {node} has content hash {got}..., not {wanted}... as on the node "
                "that planned the job: every node must see the same bundle files at the same path.")


def _import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as error:
        raise ExplainError(NO_RAY.format(why=one_line(error), pin=RAY_PIN)) from None
    return ray


def _plan(bundle_path: str, ids: list[str] | None, request: Settings, chunk_size: int) -> dict:
    """(Runs as a Ray task.) Open the bundle, check the ids and the settings; the manifest."""
    from explain.bundle import load_bundle
    from explain.explainer import explain_customers

    bundle = load_bundle(bundle_path)
    if not bundle.content_hash:
        raise ExplainError(batch.NO_HASH)
    ids = [str(i) for i in bundle.ids] if ids is None else batch.check_ids(bundle, ids)
    explain_customers(bundle, ids[:1], request)  # bad settings fail here, before any folder is made
    return fmt.new_manifest(bundle, ids, request, chunk_size)


class ChunkWriter:
    """A Ray Data actor: the bundle and its model loaded once; one chunk per call."""

    def __init__(self, bundle_path: str, ids, manifest: dict, request: Settings, target: str,
                 engine_batch_size: int | None = None):
        from explain.bundle import load_bundle
        from explain import ray_store

        self.bundle = load_bundle(bundle_path)
        wanted = manifest["bundle"]["content_hash"]
        if self.bundle.content_hash != wanted:
            import socket

            raise ExplainError(OTHER_BUNDLE.format(path=bundle_path, node=socket.gethostname(),
                                                   got=self.bundle.content_hash[:12], wanted=wanted[:12]))
        if ids is not None:  # the ids of a --customers-file, put in the object store once
            import ray

            ids = ray.get(ids)
        self.ids = [str(i) for i in self.bundle.ids] if ids is None else list(ids)
        self.manifest, self.request, self.engine_batch_size = manifest, request, engine_batch_size
        self.target = ray_store.target(target)

    def __call__(self, rows: dict) -> dict:
        import numpy as np

        size = self.manifest["chunk_size"]
        chunks, customers, computed = [], [], []
        for chunk in (int(c) for c in rows["id"]):
            ids = self.ids[chunk * size:(chunk + 1) * size]
            with self.target.chunk(chunk) as folder:  # a local folder holding (a copy of) the chunk's files
                if fmt.verify_chunk(folder, self.manifest, chunk, ids) is None:
                    done = False
                else:
                    long, summary = batch.compute_chunk(self.bundle, ids, self.request, self.engine_batch_size)
                    fmt.write_chunk(folder, self.manifest, chunk, long, summary)
                    done = True
            chunks.append(chunk)
            customers.append(len(ids))
            computed.append(done)
        return {"chunk": np.array(chunks, np.int64), "customers": np.array(customers, np.int64),
                "computed": np.array(computed, bool)}


def _connect(ray, address: str | None) -> bool:
    """ray.init: the cluster at ``address``, or a local Ray with this machine's cores (True if
    this call started it)."""
    if ray.is_initialized():
        return False
    env = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}}
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
        raise ExplainError(NO_CONNECT.format(address=address, why=one_line(error))) from None
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


def run_ray_batch_job(bundle, out, request: Settings = Settings(), *, chunk_size: int = batch.DEFAULT_CHUNK_SIZE,
                      ids=None, workers: int | None = None, address: str | None = None,
                      progress: bool = True, engine_batch_size: int | None = None) -> batch.BatchResult:
    """``batch.run_batch_job`` on Ray: the same store in ``out`` (a folder or a pyarrow URI).

    ``bundle``: a bundle folder, seen at the same path by every node. ``workers``: actors in the
    pool (default: the cluster's CPUs). ``address``: an existing cluster (``auto``,
    ``ray://HOST:PORT``); default: the running Ray of this process, else a new local one.
    """
    from explain import ray_store

    started = time.perf_counter()
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ExplainError(batch.BAD_CHUNK_SIZE.format(value=chunk_size))
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ExplainError(BAD_WORKERS.format(value=workers))
    bundle_path = str(Path(getattr(bundle, "path", None) or bundle).expanduser().resolve())
    ids = None if ids is None else list(dict.fromkeys(str(i) for i in ids))  # as batch.check_ids
    target = ray_store.target(out)
    target.refuse_early()
    ray = _import_ray()
    started_here = _connect(ray, address)
    try:
        try:
            manifest = ray.get(ray.remote(num_cpus=1)(_plan).remote(bundle_path, ids, request, chunk_size))
        except Exception as error:
            cause = _cause(error)
            if cause is None:
                raise
            raise cause from None
        n_chunks = manifest["n_chunks"]
        with target.open(manifest) as (manifest, temps):
            if workers is None:
                workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
            workers = min(workers, n_chunks)
            ids_ref = None if manifest["customers"].get("all") else ray.put(ids)
            context = ray.data.DataContext.get_current()
            context.enable_progress_bars = False
            context.print_on_execution_start = False
            # the chunk numbers as blocks in the object store: no read task competes with the actors for CPUs
            dataset = ray.data.from_items([{"id": k} for k in range(n_chunks)], override_num_blocks=min(n_chunks, 256)).map_batches(
                ChunkWriter, batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers),
                fn_constructor_kwargs={"bundle_path": bundle_path, "ids": ids_ref, "manifest": manifest,
                                       "request": request, "target": target.spec,
                                       "engine_batch_size": engine_batch_size},
                num_cpus=1)  # Ray Data's defaults restart a dead actor and retry its chunk (max_restarts=-1, max_task_retries=-1)
            computed = reused = 0
            from tqdm import tqdm

            bar = tqdm(total=manifest["customers"]["count"], unit=" customers", desc=f"batch (ray, {workers} workers)",
                       file=sys.stderr, disable=not progress, dynamic_ncols=True, smoothing=0.1)
            try:
                for rows in dataset.iter_batches(batch_size=None, batch_format="numpy"):
                    computed += int(rows["computed"].sum())
                    reused += int((~rows["computed"]).sum())
                    bar.update(int(rows["customers"].sum()))
            except KeyboardInterrupt:
                bar.close()
                print(f"interrupted: the finished chunks are kept in {out}; rerun the same command to resume.",
                      file=sys.stderr)
                raise
            except Exception as error:
                bar.close()
                cause = _cause(error)
                if cause is None:
                    raise
                raise ExplainError(f"{cause} The finished chunks are kept in {out}; fix the cause and rerun "
                                   "the same command to resume.") from None
            bar.close()
            manifest = target.finish(manifest)
    finally:
        if started_here:
            ray.shutdown()
    return batch.BatchResult(path=target.display_path, n_customers=manifest["customers"]["count"],
                             n_chunks=n_chunks, computed_chunks=computed, reused_chunks=reused,
                             removed_temporary_files=temps, rows=manifest["rows_per_customer"] * manifest["customers"]["count"],
                             seconds=time.perf_counter() - started, manifest=manifest)


def run_ray_batch(args) -> int:
    """``python -m explain batch --engine ray``: the CLI's entry point (see ``explain/cli.py``)."""
    from explain.cli import read_customers_file, settings_from_args

    ids = None
    if args.customers_file:
        ids = read_customers_file(args.customers_file)
    result = run_ray_batch_job(args.bundle, args.out, settings_from_args(args), chunk_size=args.batch_size, ids=ids,
                               workers=args.workers, address=args.address, progress=True)
    print(result.describe())
    return 0
