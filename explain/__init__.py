"""Integrated Gradients for Keras models with a static and a temporal input.

The names below are imported on first use (PEP 562), so ``import explain.errors`` or
``explain.safe_load`` does not import TensorFlow: the memory-capped child process of
``safe_load.load_model_isolated`` imports this package before it sets its limit.
"""

import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up chatter

_EXPORTS = {
    "Attribution": "explain.ig",
    "AttributionError": "explain.errors",
    "Baseline": "explain.settings",
    "Bundle": "explain.bundle",
    "BundleError": "explain.errors",
    "explain_customers": "explain.explainer",
    "ExplainError": "explain.errors",
    "integrated_gradients": "explain.ig",
    "load_bundle": "explain.bundle",
    "path_profile": "explain.ig",
    "Request": "explain.explainer",
    "save_bundle": "explain.objects",
    "Settings": "explain.settings",
    "Stopped": "explain.errors",
    "UnsafeModelError": "explain.errors",
    "validate_bundle": "explain.bundle",
}

# Submodules reachable as attributes without an import: ``explain.figures.heatmap(...)``.
_SUBMODULES = ("baselines", "figures", "report")

__all__ = sorted(_EXPORTS, key=str.lower)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"explain.{name}")  # sets the attribute on the package
    if name not in _EXPORTS:
        raise AttributeError(f"module 'explain' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS, *_SUBMODULES])
