"""Resumable stores of every customer's attributions: the local job, the Ray job, the store's format and reader."""

import importlib

_MODULES = ('drivers', 'format', 'job', 'local', 'ray_job', 'ray_store', 'ray_tables', 'store', 'stores', 'summary')


def __getattr__(name: str):
    """Submodules on first use (``explain.batch.local.X`` without an import), so importing the package stays light."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
