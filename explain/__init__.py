"""Integrated Gradients for Keras models with a static and a temporal input.

The names below are imported on first use (PEP 562), so ``import explain.core.errors`` or
``explain.modelfile.safe_load`` does not import TensorFlow: the memory-capped child process of
``safe_load.load_model_isolated`` imports this package before it sets its limit.
"""

import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up chatter

_EXPORTS = {
    "Attribution": "explain.core.ig",
    "AttributionError": "explain.core.errors",
    "Baseline": "explain.core.settings",
    "Bundle": "explain.bundle.load",
    "compare_models": "explain.notebook",
    "drivers": "explain.batch.drivers",
    "movers": "explain.batch.drivers",
    "over_runs": "explain.batch.drivers",
    "Drivers": "explain.analysis.drivers",
    "BundleError": "explain.core.errors",
    "explain": "explain.notebook",
    "explain_customers": "explain.analysis.explainer",
    "Explanation": "explain.notebook",
    "ExplainError": "explain.core.errors",
    "integrated_change": "explain.core.change",
    "integrated_gradients": "explain.core.ig",
    "load_bundle": "explain.bundle.load",
    "path_profile": "explain.core.ig",
    "save_bundle": "explain.bundle.save",
    "Settings": "explain.core.settings",
    "Stopped": "explain.core.errors",
    "UnsafeModelError": "explain.core.errors",
    "validate_bundle": "explain.bundle.load",
}

# Subpackages and two modules under short names, reachable as attributes without an import:
# ``explain.figures.heatmap(a, bundle)``, ``explain.plots.figures.temporal_heatmap(...)``, ``explain.report``.
_SUBMODULES = {
    "analysis": "explain.analysis", "batch": "explain.batch", "bundle": "explain.bundle", "core": "explain.core",
    "demo": "explain.demo", "modelfile": "explain.modelfile", "plots": "explain.plots",
    "baselines": "explain.core.baselines", "figures": "explain.figures", "report": "explain.analysis.report",
}

__all__ = sorted(_EXPORTS, key=str.lower)


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = importlib.import_module(_SUBMODULES[name])
        globals()[name] = module
        return module
    if name not in _EXPORTS:
        raise AttributeError(f"module 'explain' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS, *_SUBMODULES])
