"""examples/notebook.py runs end to end as a plain script, in a fresh folder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from explain.bundle import load_bundle

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "notebook.py"

pytestmark = pytest.mark.slow


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
    z = heat["z"]
    assert len(z) == 2 and all(len(row) == 12 for row in z) and any(v != 0 for row in z for v in row)
    assert bundle.n_customers == 600 and bundle.static_labels[0] == "Tenure" and bundle.label_name == "label"
    assert "explain serve --bundle churn_bundle" in result.stdout
    assert (tmp_path / "report.html").stat().st_size > 1_000_000  # plotly.js inline: opens offline
    completeness = [line for line in result.stdout.splitlines() if line.startswith("delta")]
    assert completeness and abs(float(completeness[0].split(":")[1])) < 1e-2
