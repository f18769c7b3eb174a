"""Attributions for customers of a bundle: the one call the CLI, the batch job and the app share."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from explain.bundle.heads import viewed
from explain.core import baselines as baseline_builders
from explain.core.change import integrated_change
from explain.core.engine import StopCheck
from explain.core.errors import ExplainError
from explain.core.ig import Attribution, integrated_gradients
from explain.core.kept import Kept
from explain.core.settings import Baseline, Settings

PREVIOUS_NEEDS_END_ALIGNED = (
    "{spec}: this bundle pads short histories at the end (bundle.json 'temporal_padding': 'end'), so a position "
    "is not the same period for every customer and a history cannot be shifted one period back. Use an "
    "earlier export of the same customers instead: --baseline-bundle DIR (baseline bundle:DIR)."
)
SNAPSHOT_MISSING = (
    "{count} customer(s) are not in the earlier snapshot {path}: {examples}. They joined since, so there is no "
    "earlier score to explain a change from: leave them out (--customers-file), or explain them against another "
    "baseline."
)
SNAPSHOT_NEEDS_IDS = "An earlier snapshot (bundle:DIR) is read by customer id: pass ids= to baseline_for."
SNAPSHOT_DIFFERS = (
    "The earlier snapshot {path} does not match the bundle {bundle}: {what}. A snapshot must be the same model's "
    "inputs at an earlier time: the same input names, features and number of periods."
)

# Baselines computed from the whole data set (not from the customers explained), kept per
# bundle content and spec: a batch job or the dashboard asks for the same one per chunk.
_CACHE = Kept(32)  # (bundle content, baseline, seed, categorical rule) -> the baseline arrays


def baseline_for(bundle, inputs: dict, spec: Baseline | str, seed: int = 0, categorical: str = "mode", *,
                 ids=None) -> dict:
    """The baseline arrays named by ``spec`` for these customers' ``inputs`` (read-only).

    A bundle whose model has categorical, padded or more than two inputs builds them for every
    input (``explain.core.baselines`` with its layout), categorical ones by the ``categorical`` rule."""
    spec = Baseline.parse(spec)
    if spec.kind == "bundle":
        return snapshot_inputs(bundle, open_snapshot(spec.argument), ids)
    if spec.kind == "previous" and getattr(bundle, "temporal_padding", "start") == "end" and not bundle.plain:
        raise ExplainError(PREVIOUS_NEEDS_END_ALIGNED.format(spec=spec))
    layout = getattr(bundle, "engine_layout", None)
    build_args = {"layout": layout, "categorical": categorical} if layout is not None else {}
    build_args["statistics"] = getattr(bundle, "statistics", None)  # data-wide means stored with the bundle's cache
    if not spec.data_wide or not bundle.content_hash:  # in-memory bundles have no hash
        return baseline_builders.from_spec(spec, bundle.data(), inputs, ids=bundle.ids, labels=bundle.labels,
                                           seed=seed, **build_args)

    def build():
        arrays = baseline_builders.from_spec(spec, bundle.data(), inputs, ids=bundle.ids, labels=bundle.labels,
                                             seed=seed, **build_args)
        for array in arrays.values():
            if isinstance(array, np.ndarray):  # a MeanEmbedding is frozen already
                array.flags.writeable = False
        return arrays

    return _CACHE.get((bundle.content_hash, str(spec), seed if spec.kind == "sample" else 0, categorical), build)


def explain_customers(bundle, ids, settings: Settings = Settings(), *, batch_size: int | None = None,
                      should_stop: StopCheck = None, baseline: dict | None = None) -> Attribution:
    """Integrated Gradients of the customers ``ids`` (a list, or one id) of ``bundle`` under ``settings``.

    The head and period (``settings.output``, ``output_period``: a model with several outputs or a prediction per
    period) and the target are resolved against the bundle here, once; the settings go to the engine
    whole: the result's ``settings`` are these settings (baseline included) with the target as an index,
    its ``baselines`` the arrays of ``settings.baseline`` it used.
    ``should_stop``: see ``integrated_gradients`` (``explain.core.errors.Stopped`` between chunks).
    ``baseline``: the baseline arrays of ``settings.baseline``, already computed (``baseline_for``
    on the whole data set) when ``bundle`` holds only some customers (the Ray engine's chunks).
    """
    bundle, settings = viewed(bundle, settings)  # the head and period explained (explain.bundle.heads)
    ids = [str(ids)] if isinstance(ids, (str, bytes)) else [str(i) for i in ids]  # one id, not its characters
    inputs = bundle.inputs_for(ids)
    if baseline is None:
        baseline = baseline_for(bundle, inputs, settings.baseline, settings.seed, settings.categorical, ids=ids)
    return attribute(bundle, inputs, baseline, settings, ids=ids, batch_size=batch_size, should_stop=should_stop)


def attribute(bundle, inputs: dict, baseline: dict, settings: Settings, *, ids=None, batch_size: int | None = None,
              should_stop: StopCheck = None) -> Attribution:
    """IG of ``inputs`` (rows of ``bundle``, or edited ones: the what-if) from ``baseline`` under ``settings``
    (resolved for the bundle): ``integrated_change`` when the baseline is the customers earlier (previous:K,
    bundle:DIR: periods that arrived since then), else ``integrated_gradients``."""
    explain = integrated_change if settings.baseline is not None and settings.baseline.change else integrated_gradients
    return explain(bundle.model, inputs, baseline, settings, batch_size=batch_size, ids=ids,
                   output_names=bundle.output_names, should_stop=should_stop,
                   roles=getattr(bundle, "roles", None) or None)


# ---- an earlier snapshot of the same customers (bundle:DIR, --baseline-bundle DIR) ------------------------

_SNAPSHOTS = Kept(4)  # resolved folder -> the opened snapshot bundle


def open_snapshot(path, *, loader=None, limits=None):
    """The bundle at ``path``, an earlier export of the same customers, opened once per process (with the
    command's ``loader`` and ``limits`` when it opens it first: the same safety rules as the bundle's)."""
    from explain.bundle.load import load_bundle
    from explain.modelfile.limits import DEFAULT_LIMITS

    folder = Path(path).expanduser().resolve()
    try:
        stamp = max(item.stat().st_mtime_ns for item in (folder, *folder.iterdir()))  # a new export: opened anew
    except OSError:
        stamp = None  # load_bundle says what is wrong with the folder
    return _SNAPSHOTS.get((str(folder), stamp),
                          lambda: load_bundle(folder, loader=loader, limits=limits or DEFAULT_LIMITS))


def snapshot_inputs(bundle, snapshot, ids) -> dict:
    """The rows of ``snapshot`` for the customers ``ids`` of ``bundle``, matched by id: one baseline per customer.
    ``ExplainError`` when the snapshot's inputs differ or a customer is missing."""
    if ids is None:
        raise ExplainError(SNAPSHOT_NEEDS_IDS)
    where = {"path": snapshot.path, "bundle": bundle.path or "in memory"}
    mine, theirs = bundle.arrays, snapshot.arrays
    if set(mine) != set(theirs):
        raise ExplainError(SNAPSHOT_DIFFERS.format(what=f"inputs {sorted(theirs)} instead of {sorted(mine)}", **where))
    for key in mine:
        if theirs[key].shape[1:] != mine[key].shape[1:]:
            raise ExplainError(SNAPSHOT_DIFFERS.format(
                what=f"input {key!r} has shape {theirs[key].shape[1:]} instead of {mine[key].shape[1:]}", **where))
    names = (bundle.static_features, bundle.temporal_features)
    if (snapshot.static_features, snapshot.temporal_features) != names:
        raise ExplainError(SNAPSHOT_DIFFERS.format(what="the feature columns differ", **where))
    ids = [str(i) for i in ids]
    known = set(snapshot.ids.tolist())
    missing = [i for i in ids if i not in known]
    if missing:
        raise ExplainError(SNAPSHOT_MISSING.format(count=len(missing), path=snapshot.path,
                                                   examples=", ".join(missing[:5]) + (" ..." if len(missing) > 5
                                                                                     else "")))
    return snapshot.inputs_for(ids)
