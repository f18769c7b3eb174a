"""One customer's ``Attribution`` read from a finished batch store instead of computed (issue 42).

The Customer, Compare and Diagnostics pages ask ``ui.cache.attributions`` for one customer; when a finished
store of the bundle was made with exactly the page's settings (``explain.batch.stores.stores_of(bundle).exact``:
same bundle content, baseline, steps, method, target, space, path, tolerance, seed), the store already holds
what the page shows: the attributions, the prediction, the baseline's prediction, delta, the steps and the
points spent. What a store does not keep is made here without a model call: the baseline arrays
(``baseline_for``, from the data), the padding of the history (the engine's rule), the engine's notes and
ignored inputs (read from the model's graph) and the resolved settings. The result is the same
``Attribution`` the engine would return, its numbers the store's (tests/app/test_team.py compares them).

Served from a store only what a store can answer whole: the joint path (a per-input path keeps a delta per
input, which a store does not), a baseline that is not the customers at an earlier time (its ``arrival``
part is not stored), the bundle's own output (no head or period view), one history input. Otherwise None:
the page computes as before.

The dashboard's own background store of a small bundle (``ui.stores.background``) uses adaptive steps; the
page's default is a fixed 64 steps, so the default view is *not* served from it (its delta, steps and
attributions would differ from what the page computes); a visitor who chooses "auto" steps is, and so is
the default view when a store of the default settings (``python -m explain batch`` with them) is there.
"""

from __future__ import annotations

import numpy as np

from explain.analysis.explainer import baseline_for
from explain.batch.store import Store
from explain.bundle.heads import viewed
from explain.core import ig
from explain.core.settings import Settings


def servable(bundle, settings: Settings) -> bool:
    """Whether a store can answer this request whole (see the module's docstring)."""
    if settings.path != "joint" or (settings.baseline is not None and settings.baseline.change):
        return False
    shown, _ = viewed(bundle, settings)
    return shown is bundle


def attribution(bundle, cid: str, settings: Settings, store: Store) -> ig.Attribution | None:
    """``cid``'s attribution under ``settings`` from ``store`` (made with exactly these settings), shaped as the
    engine's; None when this bundle's model has another layout than a store keeps (several histories)."""
    engine = ig.engine_for(bundle.model, getattr(bundle, "roles", None) or None)
    static_keys, temporal_keys = engine.layout.keys_of("static"), engine.layout.keys_of("temporal")
    if len(temporal_keys) != 1:
        return None
    inputs = bundle.inputs_for([cid])
    baselines = baseline_for(bundle, inputs, settings.baseline, settings.seed, settings.categorical, ids=[cid])
    _, _, padding, _ = ig._check_inputs(engine, inputs, [cid])
    stored = store.arrays(bundle, [cid])
    summary = store.summary([cid])
    per_key = _by_input(engine, stored, static_keys, temporal_keys[0], padding)
    request = ig.request_settings(settings, {}, engine.n_outputs, bundle.output_names)
    return ig.Attribution(
        static=stored.static.copy(), temporal=per_key[temporal_keys[0]], prediction=stored.prediction,
        baseline_prediction=stored.baseline_prediction, delta=stored.delta, steps=stored.steps, settings=request,
        space_used="output" if request.space == "output" else engine.logit_kind,
        gradient_points=stored.gradient_points, forward_points=_forward_points(summary),
        inputs=per_key, padding={temporal_keys[0]: padding[temporal_keys[0]]}, roles=dict(engine.roles),
        ignored_inputs=engine.ignored, notes=tuple(engine.ignored_notes()), baselines=ig._given(engine, baselines))


def _by_input(engine, stored, static_keys, temporal_key: str, padding: dict) -> dict:
    """{input key: (1, *shape)} as the engine keeps them: the store's static columns split by input (model order),
    its history with the padded periods at 0 (the store writes them as "no data")."""
    per_key, start = {}, 0
    for key in static_keys:
        width = int(np.prod(engine.shapes[key]))  # (S,) numbers, or (C,) category ids
        per_key[key] = stored.static[:, start:start + width].copy()
        start += width
    temporal = np.nan_to_num(stored.temporal, nan=0.0)
    temporal[padding[temporal_key]] = 0.0
    per_key[temporal_key] = temporal
    return per_key


def _forward_points(summary) -> np.ndarray | None:
    if "forward_points" not in summary or summary["forward_points"].isna().any():
        return None
    return summary["forward_points"].to_numpy(np.int64)
