"""The IG engine on arrays: settings, inputs, baselines, quadrature, the compiled gradients, completeness, and the
shared vocabulary (errors, risk bands, labels, text); adaptive: the panel quadrature of steps="auto"; change:
the change of a score since an earlier time.
Imports nothing above it."""

import importlib

_MODULES = (
    'adaptive', 'backend', 'backend_jax', 'backend_tf', 'baselines', 'bounded_json', 'calls', 'chunks',
    'change', 'cut', 'engine', 'errors', 'files', 'ig', 'inputs', 'kept', 'labels', 'outputs', 'periods', 'points',
    'quadrature', 'settings', 'text', 'verdict', 'xla'
)


def __getattr__(name: str):
    """Submodules on first use (``explain.core.X`` without an import), so importing the package stays light."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
