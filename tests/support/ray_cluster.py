"""One local Ray cluster per pytest worker for the Ray tests (tests/unit/batch/test_ray_*.py), through the
conftest fixture ``ray_cluster``: started by the first test that asks for it, shared by the tests after it (in
this process, and by the command lines they start, which connect to it through Ray's ``RAY_ADDRESS``), and shut
down as soon as the next test of this worker is in a file that does not use it (an idle cluster costs about 2 s of
CPU a minute), or at the end of the session.

Its workers start as the command line's local Ray starts them (``ray_job._connect``: this checkout on their
``PYTHONPATH``, Keras without its scikit-learn wrappers), and with the test session's JAX persistent compilation
cache (tests.support.backends.session_jax_cache: the same folder as the JAX test files of every worker) and their
XLA flags (``jax_process_flags``: the cache's keys include them), so a JAX driver's actors on it read back what
another JAX process compiled.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = "ray_cluster"
NUM_CPUS = 2

# Ray ends a worker process idle for 1 s beyond num_cpus of them; each new one costs about 1.5 s of CPU (Ray, Ray
# Data, pyarrow): a job of this process (Ray Data's readers, its helper actors) reuses those of the job before
KEEP_IDLE_WORKERS = {"num_workers_soft_limit": 8, "idle_worker_killing_time_threshold_ms": 600_000}

_state: dict = {}


def start(tmp_path_factory):
    """The running cluster's ``ray`` module (started here if it is not running yet)."""
    import pytest

    ray = pytest.importorskip("ray")
    if _state.get("ray") is not None and ray.is_initialized():
        return ray
    from explain.batch import ray_job
    from tests.support.backends import jax_compilation_cache, jax_process_flags, session_jax_cache

    env = {"env_vars": {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"},
           "worker_process_setup_hook": ray_job.WORKER_SETUP}
    cache = jax_compilation_cache(session_jax_cache(tmp_path_factory))
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    with pytest.MonkeyPatch.context() as patch:  # the environment Ray's own processes (and so every worker) inherit
        for name, value in {**cache, **jax_process_flags(), "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "2"}.items():
            patch.setenv(name, value)
        patch.delenv("RAY_ADDRESS", raising=False)
        context = ray.init(num_cpus=NUM_CPUS, include_dashboard=False, runtime_env=env, logging_level="ERROR",
                           log_to_driver=False, _system_config=KEEP_IDLE_WORKERS)
    _state.update(ray=ray, address=context.address_info["gcs_address"])
    return ray


def address() -> str:
    """The running cluster's address, for ``RAY_ADDRESS`` of a command line that should use it."""
    return _state["address"]


def stop() -> None:
    """Shut the cluster down, if this module started it and it runs."""
    ray = _state.pop("ray", None)
    _state.pop("address", None)
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def stop_unless_needed_by(item, nextitem) -> None:
    """After ``item``: stop the cluster unless ``nextitem`` is in a file where some test uses it."""
    if _state.get("ray") is None:
        return
    if nextitem is not None:
        users = _state.get("users")
        if users is None:
            users = _state["users"] = {i.path for i in item.session.items if FIXTURE in i.fixturenames}
        if nextitem.path in users:
            return
    stop()
