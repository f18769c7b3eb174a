"""A folder or Python objects -> a checked :class:`~explain.bundle.load.Bundle` (model + data + names)."""

import importlib

_MODULES = ('arrays', 'cache', 'checks', 'config', 'convert', 'heads', 'load', 'many', 'objects', 'problems', 'roles',
            'save', 'tables')


def __getattr__(name: str):
    """Submodules on first use (``explain.bundle.load.X`` without an import), so importing the package stays light."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
