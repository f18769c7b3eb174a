"""The batch job on Ray under Keras' JAX backend: ``KERAS_BACKEND=jax python -m explain batch --engine ray``
writes the store the TensorFlow local job writes (every array within 1e-5 of its largest value; the completeness
gap ``delta``, a difference of predictions, within 1e-5 of the largest prediction), and the Ray
workers are told the driver's backend (``runtime_env`` env var), so a cluster's nodes do not fall back to
TensorFlow. The TensorFlow job runs in this process where it is on TensorFlow; the JAX driver runs on the pytest
worker's Ray (the conftest fixture ``ray_cluster``, through ``RAY_ADDRESS``), whose workers share JAX's persistent
compilation cache with it (tests.support.backends.jax_compilation_cache). Skipped where jax or ray is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("jax")
pytest.importorskip("ray")

from explain.batch import ray_job  # noqa: E402
from explain.batch.store import read_store  # noqa: E402
from tests.support.backends import jax_cache_environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "bundles" / "demo"
TOLERANCE = 1e-5  # of the largest value


@pytest.fixture(scope="module", autouse=True)
def jax_cache(tmp_path_factory):
    """JAX's persistent compilation cache for the processes these tests start, Ray's workers included (one folder
    per pytest worker, shared with the other JAX test files on it); this process's environment as it was after."""
    yield from jax_cache_environment(tmp_path_factory)


def _run(args, backend: str, timeout: float = 1200, env: dict | None = None) -> None:
    import keras

    if backend == "tensorflow" and keras.config.backend() == "tensorflow":  # the command line's main() here
        from explain.cli import main

        assert main(args) == 0, f"{backend}: {' '.join(args)} failed"
        return
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    out = subprocess.run([sys.executable, "-m", "explain", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, f"{backend}: {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


def _close(tf_values, jax_values, what, scale=None):
    tf_values, jax_values = np.asarray(tf_values, np.float64), np.asarray(jax_values, np.float64)
    assert tf_values.shape == jax_values.shape, what
    scale = max(float(np.abs(tf_values).max()) if scale is None else scale, 1e-12)
    worst = float(np.abs(tf_values - jax_values).max()) / scale
    assert worst <= TOLERANCE, f"{what}: the JAX Ray store differs from the TensorFlow local one by {worst:.2e}"


@pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")
def test_jax_ray_store_equals_the_tensorflow_local_store(ray_cluster, tmp_path):
    from tests.support import ray_cluster as cluster

    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"C{n:05d}\n" for n in range(1, 41, 3)))  # 14 customers, 4 chunks of 4
    common = ["--bundle", str(DEMO), "--customers-file", str(ids), "--steps", "8", "--batch-size", "4"]
    _run(["batch", *common, "--out", str(tmp_path / "tf_local")], "tensorflow")
    # one actor: the backend reaches every worker the same way (the job's runtime_env)
    _run(["batch", *common, "--out", str(tmp_path / "jax_ray"), "--engine", "ray", "--workers", "1"], "jax",
         env={"RAY_ADDRESS": cluster.address()})
    tf_long, tf_summary = read_store(tmp_path / "tf_local")
    jax_long, jax_summary = read_store(tmp_path / "jax_ray")
    assert len(tf_long) == len(jax_long) > 0 and len(tf_summary) == len(jax_summary) == 14
    for tf_table, jax_table, what in ((tf_long, jax_long, "long"), (tf_summary, jax_summary, "summary")):
        assert list(tf_table.columns) == list(jax_table.columns)
        tf_table, jax_table = tf_table.reset_index(drop=True), jax_table.reset_index(drop=True)
        numeric = [c for c in tf_table.columns if pd.api.types.is_float_dtype(tf_table[c].dtype)]
        assert numeric, what
        for column in tf_table.columns:
            if column == "delta":  # f(x) - f(baseline) - sum: its rounding is the predictions' (2e-7 on 0.9)
                scale = float(np.abs(tf_table[["prediction", "baseline_prediction"]].to_numpy()).max())
                _close(tf_table[column].to_numpy(), jax_table[column].to_numpy(), f"{what} {column}", scale)
            elif column in numeric:
                _close(tf_table[column].to_numpy(), jax_table[column].to_numpy(), f"{what} {column}")
            else:
                assert tf_table[column].tolist() == jax_table[column].tolist(), f"{what} {column}"


def test_the_workers_are_told_the_drivers_backend(monkeypatch):
    """``_connect`` passes KERAS_BACKEND (the driver's, from the env var or keras.json) in the runtime_env that
    every worker on every node starts with, local Ray or a cluster."""
    seen = []

    class FakeRay:
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def init(**kwargs):
            seen.append(kwargs["runtime_env"]["env_vars"])

    monkeypatch.delitem(sys.modules, "keras", raising=False)  # backend.name() reads the env var, not a loaded Keras
    for backend in ("jax", "tensorflow"):
        monkeypatch.setenv("KERAS_BACKEND", backend)
        ray_job._connect(FakeRay, None)
        ray_job._connect(FakeRay, "ray://head:10001")
    assert [env["KERAS_BACKEND"] for env in seen] == ["jax", "jax", "tensorflow", "tensorflow"]
