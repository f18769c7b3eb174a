"""Questions asked of a bundle's attributions: explaining customers, drivers across customers (segments,
drift), feature groups, cohorts, diagnostics, faithfulness, what-if, counterfactuals, and their exports (JSON,
long tables, sentences)."""

import importlib

_MODULES = (
    'cohort', 'counterfactual', 'diagnostics', 'drivers', 'explainer', 'faithfulness', 'groups', 'models', 'movers',
    'over_runs', 'report', 'risk_curve', 'trust_metrics', 'whatif', 'words'
)


def __getattr__(name: str):
    """Submodules on first use (``explain.analysis.X`` without an import), so importing the package stays light."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
