"""Keras' and TensorFlow's import without their unused optional imports in the dashboard's and the command line's
processes (``explain.core.backend.skip_unused_optional_imports``): scikit-learn (with SciPy's statistics), IPython and
JAX are not loaded with Keras, every other import of them still works (the segments' scikit-learn, Keras' JAX
backend), and ``import explain`` alone changes nothing (a notebook may use Keras' wrappers). Each case in a fresh
interpreter: an import happens once per process."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SKIPPED = """
import json, sys
from explain.core import backend
assert backend.skip_unused_optional_imports() and backend.skip_unused_optional_imports()  # twice: one finder
import numpy as np, keras
loaded = {name: name in sys.modules for name in ("sklearn", "scipy.stats", "IPython", "jax")}
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
out = model.predict(np.ones((2, 3), "float32"), verbose=0)
import sklearn.cluster  # the segments' import: found as usual
labels = sklearn.cluster.KMeans(2, n_init=1, random_state=0).fit_predict(np.array([[0.0], [0.1], [5.0], [5.1]]))
import importlib, importlib.util  # IPython and JAX, where installed, are found as usual when asked by anything else
found = {name: importlib.import_module(name).__name__ == name for name in ("IPython", "jax")
         if importlib.util.find_spec(name) is not None}
print(json.dumps({**loaded, "predicted": list(out.shape), "sklearn_after": "sklearn" in sys.modules,
                  "segments": len(set(labels.tolist())), "found_after": all(found.values()),
                  "finders": sum(type(f).__name__ == "_UnusedOptionalImports" for f in sys.meta_path)}))
"""

LIBRARY = """
import json, sys
import explain, keras
print(json.dumps({"sklearn": "sklearn" in sys.modules,
                  "finders": sum(type(f).__name__ == "_UnusedOptionalImports" for f in sys.meta_path)}))
"""


def run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_keras_loads_without_sklearn_and_sklearn_still_works_for_the_segments():
    got = run(SKIPPED)
    assert got == {"sklearn": False, "scipy.stats": False, "IPython": False, "jax": False, "predicted": [2, 1],
                   "sklearn_after": True, "segments": 2, "found_after": True, "finders": 1}


JAX_BACKEND = """
import json, os
os.environ["KERAS_BACKEND"] = "jax"
from explain.core import backend
assert backend.skip_unused_optional_imports()
import numpy as np, keras
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="ones")])
out = model.predict(np.ones((2, 3), "float32"), verbose=0)
print(json.dumps({"backend": keras.config.backend(), "predicted": out.ravel().tolist()}))
"""


def test_keras_on_jax_still_loads_jax():
    pytest.importorskip("jax")
    got = run(JAX_BACKEND)
    assert got == {"backend": "jax", "predicted": [3.0, 3.0]}


def test_import_explain_leaves_keras_import_as_it_is():
    got = run(LIBRARY)
    assert got["finders"] == 0
