"""Keras' import without its scikit-learn wrappers in the dashboard's and the command line's processes
(``explain.core.backend.skip_keras_sklearn_wrappers``): scikit-learn and SciPy's statistics are not loaded with
Keras, every other ``import sklearn`` still works, and ``import explain`` alone changes nothing (a notebook may use
Keras' wrappers). Each case in a fresh interpreter: an import happens once per process."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SKIPPED = """
import json, sys
from explain.core import backend
assert backend.skip_keras_sklearn_wrappers() and backend.skip_keras_sklearn_wrappers()  # twice: one finder
import numpy as np, keras
loaded = {"sklearn": "sklearn" in sys.modules, "scipy.stats": "scipy.stats" in sys.modules}
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
out = model.predict(np.ones((2, 3), "float32"), verbose=0)
import sklearn.cluster  # the segments' import: found as usual
labels = sklearn.cluster.KMeans(2, n_init=1, random_state=0).fit_predict(np.array([[0.0], [0.1], [5.0], [5.1]]))
print(json.dumps({**loaded, "predicted": list(out.shape), "sklearn_after": "sklearn" in sys.modules,
                  "segments": len(set(labels.tolist())),
                  "finders": sum(type(f).__name__ == "_NoSklearnForKerasWrappers" for f in sys.meta_path)}))
"""

LIBRARY = """
import json, sys
import explain, keras
print(json.dumps({"sklearn": "sklearn" in sys.modules,
                  "finders": sum(type(f).__name__ == "_NoSklearnForKerasWrappers" for f in sys.meta_path)}))
"""


def run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_keras_loads_without_sklearn_and_sklearn_still_works_for_the_segments():
    got = run(SKIPPED)
    assert got == {"sklearn": False, "scipy.stats": False, "predicted": [2, 1], "sklearn_after": True,
                   "segments": 2, "finders": 1}


def test_import_explain_leaves_keras_import_as_it_is():
    got = run(LIBRARY)
    assert got["finders"] == 0
