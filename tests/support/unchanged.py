"""Attributions recorded before a refactor (issue 39), and the code that computes them again: the demo
under several settings and the padded bundle of ``tests.support.padded``.

``python -m tests.support.unchanged`` writes ``tests/support/unchanged.npz`` (run it only when the
numbers are meant to change, and say why in the commit); ``tests/unit/core/test_unchanged.py`` checks
that today's code gives the same numbers, bit for bit on the machine that recorded them."""

from __future__ import annotations

import platform
import tempfile
from pathlib import Path

import numpy as np

FILE = Path(__file__).with_name("unchanged.npz")
DEMO = Path(__file__).resolve().parents[2] / "bundles" / "demo"
DEMO_IDS = 24  # the first customers of the demo
CASES = {  # name -> Settings keywords
    "default": {},
    "zero-riemann": {"baseline": "zero", "steps": 32, "method": "trapezoid"},
    "auto-logit": {"steps": "auto", "space": "logit"},
    "per-input-median": {"baseline": "median", "path": "per-input", "steps": 16},
    "sample": {"baseline": "sample:4", "steps": 8, "seed": 5},
}
PADDED_CASES = {"padded-default": {}, "padded-auto": {"steps": "auto"}}
FIELDS = ("static", "temporal", "prediction", "baseline_prediction", "delta", "steps")


def machine() -> str:
    """The processor and library versions the numbers depend on: equality bit for bit is expected on these."""
    import hashlib

    import tensorflow as tf

    model, flags = platform.processor(), ""
    try:
        lines = open("/proc/cpuinfo").read().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        flags = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("flags"))
    except (OSError, StopIteration):
        pass
    vector = hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:12]  # the kernels oneDNN picks
    return f"{model} (flags {vector}) | tf {tf.__version__} | numpy {np.__version__} | {platform.python_version()}"


def _arrays(bundle, ids, cases) -> dict:
    from explain import Settings
    from explain.analysis.explainer import explain_customers

    out = {}
    for name, keywords in cases.items():
        result = explain_customers(bundle, ids, Settings(**keywords))
        for field in FIELDS:
            value = getattr(result, field)
            if value is not None:
                out[f"{name}/{field}"] = np.asarray(value)
    return out


def compute() -> dict:
    """Every case's arrays, named ``case/field``."""
    from explain import load_bundle
    from tests.support import padded

    demo = load_bundle(DEMO)
    out = _arrays(demo, [str(i) for i in demo.ids[:DEMO_IDS]], CASES)
    with tempfile.TemporaryDirectory() as tmp:
        folder = padded.write(Path(tmp) / "padded")
        bundle = load_bundle(folder)
        out.update(_arrays(bundle, [str(i) for i in bundle.ids], PADDED_CASES))
    return out


if __name__ == "__main__":
    arrays = compute()
    np.savez_compressed(FILE, machine=np.array(machine()), **arrays)
    print(f"{FILE}: {len(arrays)} arrays on {machine()}")
