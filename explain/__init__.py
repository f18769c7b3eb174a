"""Integrated Gradients for Keras models with a static and a temporal input."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up chatter

from explain.errors import AttributionError, BundleError, ExplainError, UnsafeModelError  # noqa: E402
from explain.ig import Attribution, Settings, integrated_gradients, path_profile  # noqa: E402
from explain.bundle import Bundle, load_bundle, validate_bundle  # noqa: E402
from explain.explainer import Request, explain_customers  # noqa: E402

__all__ = [
    "Attribution",
    "AttributionError",
    "Bundle",
    "BundleError",
    "explain_customers",
    "ExplainError",
    "integrated_gradients",
    "load_bundle",
    "path_profile",
    "Request",
    "Settings",
    "UnsafeModelError",
    "validate_bundle",
]
