"""Integrated Gradients for Keras models with a static and a temporal input."""

from explain.errors import AttributionError, BundleError, ExplainError, UnsafeModelError
from explain.ig import Attribution, Settings, integrated_gradients, path_profile

__all__ = [
    "Attribution",
    "AttributionError",
    "BundleError",
    "ExplainError",
    "Settings",
    "UnsafeModelError",
    "integrated_gradients",
    "path_profile",
]
