"""Every dashboard page through AppTest on Keras' JAX backend, against the same pages on TensorFlow.

Keras picks its backend when it is imported, so JAX's pages run in one separate process (KERAS_BACKEND=jax; one
process drives every page, so JAX compiles once per function; tests.support.jax_pages) and TensorFlow's in this
process (in one of their own where this one is not on TensorFlow):
What drives churn (from a store computed in that process, so under JAX by the JAX engine), Compare,
What-if (an edit and the search), Cohort, Diagnostics (with the integration-points chart) and Data & model.
No page may raise or show an error, and the numbers the pages show agree within 1e-5 of the largest:
the drivers ranking, Compare's three heatmaps, What-if's original and edited predictions, Cohort's
heatmaps, Diagnostics' path and points and its faithfulness checks (deletion and insertion curves,
occlusion; the randomisation check draws new weights with each backend's own random numbers, so it is only
shown, not compared). (The Customer page: tests/unit/core/test_backends.py.)
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.backends import jax_cache_environment, jax_process_flags
from tests.support.jax_pages import pages

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "bundles" / "demo"
TOLERANCE = 1e-5  # of the largest value

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")

@pytest.fixture(scope="module", autouse=True)
def jax_cache(tmp_path_factory):
    """JAX's persistent compilation cache for the process these tests start (one folder per test session, shared
    with the JAX test files of every pytest worker); this process's environment as it was afterwards."""
    yield from jax_cache_environment(tmp_path_factory)


def run(backend: str, work: Path) -> dict:
    """The pages' numbers on ``backend``: in this process where it is on that backend (TensorFlow), else in a
    process started on it (tests.support.jax_pages)."""
    import keras

    if keras.config.backend() == backend:
        result = pages(work)
    else:
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", **jax_process_flags())
        env.pop("EXPLAIN_BUNDLE", None)
        out = subprocess.run([sys.executable, "-m", "tests.support.jax_pages", str(work)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=2400)
        assert out.returncode == 0, f"{backend}: the pages failed:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
        result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["backend"] == backend
    return result


def assert_close(tf_values, jax_values, what):
    tf_values, jax_values = np.asarray(tf_values, float), np.asarray(jax_values, float)
    assert tf_values.shape == jax_values.shape, what
    gaps = np.isnan(tf_values)  # a chart's breaks between groups of bars
    assert (gaps == np.isnan(jax_values)).all(), what
    tf_values, jax_values = tf_values[~gaps], jax_values[~gaps]
    if not tf_values.size:
        return
    scale = max(float(np.abs(tf_values).max()), 1e-12)
    worst = float(np.abs(tf_values - jax_values).max()) / scale
    assert worst <= TOLERANCE, f"{what}: JAX differs from TensorFlow by {worst:.2e} of the largest"


def test_every_page_renders_on_jax_with_the_tensorflow_numbers(tmp_path):
    tf, jax = run("tensorflow", tmp_path / "tensorflow"), run("jax", tmp_path / "jax")
    for page in ("drivers", "compare", "cohort", "diagnostics", "faithfulness"):
        assert tf[page] and sorted(tf[page]) == sorted(jax[page]), page
        for key in tf[page]:
            assert_close(tf[page][key], jax[page][key], f"{page} {key}")
    assert {"diag_points", "faith_random"} <= set(jax["diagnostics_charts"])
    assert jax["drivers_sentence"]
    # What-if: the same edit, the same two predictions; the search finds edits that bring it below 0.5
    assert tf["whatif_scenario"] == jax["whatif_scenario"] == "t0@9-11=b"
    for name in ("Original", "What-if"):
        assert abs(tf["whatif_edit"][name] - jax["whatif_edit"][name]) <= TOLERANCE, name
    assert jax["whatif_found"] and jax["whatif_search"]["What-if"] < 0.5 <= jax["whatif_search"]["Original"]
    assert abs(tf["whatif_search"]["Original"] - jax["whatif_search"]["Original"]) <= TOLERANCE
    assert jax["data"] == tf["data"]
