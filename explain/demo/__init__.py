"""The deterministic demo bundles: the churn demo and the embedding demo."""

import importlib

_MODULES = ('churn', 'embedding')


def __getattr__(name: str):
    """Submodules on first use (``explain.demo.churn.X`` without an import), so importing the package stays light."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
