"""Plotly builders and the HTML report: finished results + names -> figures. They draw; they never compute."""

import importlib

_MODULES = ('diagnostics', 'drivers', 'figures', 'html', 'models', 'models_html', 'over_runs', 'periods', 'risk_curve',
            'style')


def __getattr__(name: str):
    """Submodules on first use (``explain.plots.X`` without an import), so importing the package stays light."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
