"""examples/notebook.py runs end to end as a plain script, in a fresh folder."""

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explain.bundle.load import load_bundle
from explain.core.ig import integrated_gradients

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "notebook.py"

pytestmark = pytest.mark.slow


def _array(value) -> np.ndarray:
    """A Plotly JSON array: a list, or base64 ``{"dtype", "bdata", "shape"}`` (Plotly >= 6)."""
    if isinstance(value, dict):
        shape = [int(k) for k in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
    return np.asarray(value, dtype=np.float64)


def test_example_runs_and_draws_the_customers_heatmap(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, str(EXAMPLE)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    spec = json.loads((tmp_path / "heatmap.json").read_text())
    heatmaps = [t for t in spec["data"] if t["type"] == "heatmap"]
    assert len(heatmaps) == 1
    heat = heatmaps[0]
    bundle = load_bundle(tmp_path / "churn_bundle")
    assert heat["x"] == bundle.periods == [f"2025-{m:02d}" for m in range(1, 13)]
    assert heat["y"] == bundle.temporal_labels == ["Support calls", "data_usage_gb"]
    # the cells are the first customer's IG against the data's mean, recomputed here on the saved bundle
    z = _array(heat["z"])
    inputs = bundle.inputs_for([bundle.ids[0]])
    base = {"static": bundle.static.mean(axis=0, keepdims=True),
            "temporal": np.repeat(bundle.temporal.mean(axis=(0, 1), keepdims=True), 12, axis=1)}
    again = integrated_gradients(bundle.model, inputs, base, steps=64)
    assert z.shape == (2, 12) and np.abs(z).max() > 0
    np.testing.assert_allclose(z, again.temporal[0].T, rtol=1e-3, atol=1e-6)
    assert bundle.n_customers == 600 and bundle.static_labels[0] == "Tenure" and bundle.label_name == "label"
    assert "explain serve --bundle churn_bundle" in result.stdout
    assert (tmp_path / "report.html").stat().st_size > 1_000_000  # plotly.js inline: opens offline
    completeness = [line for line in result.stdout.splitlines() if line.startswith("delta")]
    assert completeness and abs(float(completeness[0].split(":")[1])) < 1e-2
