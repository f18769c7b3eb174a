"""Finished batch stores written with attributions and scores chosen by a test (no model call): what drivers over
runs and the biggest movers are checked on, against numbers the test planted. The files are the ones
``python -m explain batch`` writes (``explain.batch.format``: manifest, compact part files, summaries, _SUCCESS)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from explain.analysis.report import SUMMARY_COLUMNS
from explain.batch import format as fmt
from explain.core.settings import Settings


def planted_attributions(bundle, seed: int, scale: dict | None = None) -> dict:
    """{input key: (n, *shape)} standard normal attributions of every customer of ``bundle`` drawn with ``seed``;
    ``scale``: {static column index: factor} multiplies a static feature's attributions."""
    rng = np.random.default_rng(seed)
    out = {}
    for spec in fmt.store_inputs(bundle):
        shape = (len(spec["features"]),) if spec["periods"] is None else (len(spec["periods"]), len(spec["features"]))
        out[spec["key"]] = rng.normal(size=(bundle.n_customers, *shape))
        if spec["role"] == "static":
            for j, factor in (scale or {}).items():
                out[spec["key"]][:, j] *= factor
    return out


def write_store(bundle, out, attributions: dict, *, settings: Settings = Settings(), prediction=None,
                baseline_prediction=None, chunk_size: int = 500, completed: str | None = None,
                last_periods: list | None = None) -> Path:
    """A finished compact store of every customer of ``bundle`` holding ``attributions`` ({key: (n, *shape)}).
    ``prediction`` / ``baseline_prediction`` (n,): default 0.5 and 0.5 - the sum of the attributions (so they
    add up). ``completed``: the finishing time written in the manifest. ``last_periods``: the history's period
    labels written in the manifest instead of the bundle's (another month's store of the same layout)."""
    out = Path(out)
    ids = [str(i) for i in bundle.ids]
    n = len(ids)
    manifest = fmt.new_manifest(bundle, ids, settings, chunk_size)
    if last_periods is not None:
        for spec in manifest["inputs"]:
            if spec["periods"] is not None:
                spec["periods"] = list(last_periods)
    total = sum(np.nansum(a.reshape(n, -1), axis=1) for a in attributions.values())
    prediction = np.full(n, 0.5) if prediction is None else np.asarray(prediction, np.float64)
    baseline_prediction = prediction - total if baseline_prediction is None else np.asarray(baseline_prediction)
    (out / fmt.SUMMARY_DIR).mkdir(parents=True)
    fmt.write_json(out / fmt.MANIFEST, manifest)
    for chunk, start in enumerate(range(0, n, chunk_size)):
        rows = slice(start, start + chunk_size)
        k = len(ids[rows])
        summary = pd.DataFrame({"customer_id": ids[rows], "prediction": prediction[rows],
                                "baseline_prediction": baseline_prediction[rows],
                                "delta": prediction[rows] - baseline_prediction[rows] - total[rows],
                                "steps": np.full(k, 16), "gradient_points": np.full(k, 16),
                                "forward_points": np.full(k, 2)})[SUMMARY_COLUMNS]
        fmt.write_chunk(out, manifest, chunk, {key: a[rows] for key, a in attributions.items()}, summary)
    manifest = fmt.completed(manifest, fmt.read_summaries(out, manifest))
    if completed is not None:
        manifest["completed"] = completed
    fmt.write_json(out / fmt.MANIFEST, manifest)
    fmt.write_success(out)
    return out
