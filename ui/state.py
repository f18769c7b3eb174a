"""Moved: the dashboard's caches are in ``ui.cache`` (issue 39). These names stay importable from here only until
the files that still say ``from ui import state`` (app.py, pages/{compare,customer,data,diagnostics,whatif}.py,
ui/{keep,launch,pickers,tour,whatif}.py) say ``from ui import cache``; then this file goes."""

from ui.cache import (  # noqa: F401
    active_bundle,
    ask_for_faithfulness,
    attributions,
    baseline_arrays,
    cohort_mean,
    default_customer,
    delta_sweep,
    faithfulness_checks,
    feature_groups,
    integration_points,
    model_layers,
    observed,
    open_bundle,
    path_profile,
    predictions,
    timings,
    warm_up,
    whatif_context,
    whatif_outcome,
    whatif_search,
)
