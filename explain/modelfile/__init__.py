"""The only way a model file is opened: every check runs before any Keras code, then a trial load."""

import importlib

_MODULES = ('common', 'config', 'h5', 'limits', 'safe_load', 'savedmodel', 'trial', 'trust')


def __getattr__(name: str):
    """Submodules on first use (``explain.modelfile.X`` without an import), so importing the package stays light."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
