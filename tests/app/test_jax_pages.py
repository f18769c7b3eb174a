"""Every dashboard page through AppTest on Keras' JAX backend, against the same pages on TensorFlow.

Keras picks its backend when it is imported, so each backend's pages run in one separate process
(KERAS_BACKEND=jax or tensorflow; one process drives every page, so JAX compiles once per function):
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

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "bundles" / "demo"
TOLERANCE = 1e-5  # of the largest value

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")

PAGES = """
import json, os, shutil, sys, tempfile
from pathlib import Path
sys.path.insert(0, {root!r})
import keras
from explain.batch.local import run_batch_job
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support.apptest import DEMO, app, array, charts, errors, plain

out = {{"backend": keras.config.backend()}}
work = Path(tempfile.mkdtemp())
os.environ["EXPLAIN_STORES"] = str(work / "stores")
os.environ.pop("EXPLAIN_BUNDLE", None)


def numbers(at, keys):
    assert not at.exception, [e.value for e in at.exception]
    assert not errors(at), errors(at)
    shown, got = charts(at), {{}}
    for key in keys:
        for i, trace in enumerate(shown[key]["data"]):
            for axis in ("x", "y", "z"):
                try:
                    got[f"{{key}}/{{i}}/{{axis}}"] = array(trace[axis]).tolist()
                except (KeyError, ValueError, TypeError):
                    pass
    return got


def predictions(at):
    return {{m.label.split(":")[0]: float(m.value) for m in at.metric if ": predicted" in m.label}}


# What drives churn: a store of every customer made by this process's engine (steps 16: the page's settings)
folder = work / "demo"
shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("attributions"))
run_batch_job(load_bundle(folder), folder / "attributions" / "june", Settings(steps=16), progress=False)
os.environ["EXPLAIN_BUNDLE"] = str(folder)
at = app({{"steps": "16"}}, page="pages/drivers.py")
out["drivers"] = numbers(at, ["drivers_ranking"])
out["drivers_sentence"] = plain(at.info[0].value)
os.environ.pop("EXPLAIN_BUNDLE")

at = app({{"customer": "C00005", "compare": "C00007", "steps": "32"}}, page="pages/compare.py")
out["compare"] = numbers(at, ["compare_a", "compare_b", "compare_diff"])

at = app({{"customer": "C00002", "steps": "32"}}, page="pages/whatif.py")
next(b for b in at.button if b.label == "Apply this edit").click().run()
assert not at.exception and not errors(at), errors(at)
out["whatif_edit"] = predictions(at)
out["whatif_scenario"] = at.query_params["whatif"]
next(b for b in at.button if b.label == "Search").click().run()
assert not at.exception and not errors(at), errors(at)
out["whatif_found"] = any("bring the prediction from" in plain(s.value) for s in at.success)
next(b for b in at.button if b.label == "Show these edits above").click().run()
assert not at.exception and not errors(at), errors(at)
out["whatif_search"] = predictions(at)

at = app({{"steps": "16"}}, page="pages/cohort.py")
out["cohort"] = numbers(at, ["cohort_abs", "cohort_signed"])

at = app({{"customer": "C00003", "steps": "32"}}, page="pages/diagnostics.py")
out["diagnostics"] = numbers(at, ["diag_points", "diag_path"])
next(b for b in at.button if b.label.startswith("Run faithfulness checks")).click().run()
out["faithfulness"] = numbers(at, ["faith_deletion", "faith_insertion", "faith_occlusion"])
out["diagnostics_charts"] = sorted(charts(at))

at = app(page="pages/data.py")
assert not at.exception and not errors(at), errors(at)
out["data"] = [m.label for m in at.metric] + [plain(m.value) for m in at.markdown][:5]
print(json.dumps(out))
"""


def run(backend: str) -> dict:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", PAGES.format(root=str(ROOT))], cwd=ROOT, env=env,
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


def test_every_page_renders_on_jax_with_the_tensorflow_numbers():
    tf, jax = run("tensorflow"), run("jax")
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
