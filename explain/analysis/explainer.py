"""Attributions for customers of a bundle: the one call the CLI, the batch job and the app share."""

from __future__ import annotations

import numpy as np

from explain.core import baselines as baseline_builders
from explain.core.engine import StopCheck
from explain.core.ig import Attribution, integrated_gradients
from explain.core.kept import Kept
from explain.core.settings import Baseline, Settings

# Baselines computed from the whole data set (not from the customers explained), kept per
# bundle content and spec: a batch job or the dashboard asks for the same one per chunk.
_CACHE = Kept(32)  # (bundle content, baseline, seed, categorical rule) -> the baseline arrays


def baseline_for(bundle, inputs: dict, spec: Baseline | str, seed: int = 0, categorical: str = "mode") -> dict:
    """The baseline arrays named by ``spec`` for these customers' ``inputs`` (read-only).

    A bundle whose model has categorical, padded or more than two inputs builds them for every
    input (``explain.core.baselines`` with its layout), categorical ones by the ``categorical`` rule."""
    spec = Baseline.parse(spec)
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

    The target is resolved against the bundle's output names here, once; the settings go to the engine
    whole: the result's ``settings`` are these settings (baseline included) with the target as an index,
    its ``baselines`` the arrays of ``settings.baseline`` it used.
    ``should_stop``: see ``integrated_gradients`` (``explain.core.errors.Stopped`` between chunks).
    ``baseline``: the baseline arrays of ``settings.baseline``, already computed (``baseline_for``
    on the whole data set) when ``bundle`` holds only some customers (the Ray engine's chunks).
    """
    settings = settings.for_bundle(bundle)
    ids = [str(ids)] if isinstance(ids, (str, bytes)) else [str(i) for i in ids]  # one id, not its characters
    inputs = bundle.inputs_for(ids)
    if baseline is None:
        baseline = baseline_for(bundle, inputs, settings.baseline, settings.seed, settings.categorical)
    return integrated_gradients(bundle.model, inputs, baseline, settings, batch_size=batch_size, ids=ids,
                                output_names=bundle.output_names, should_stop=should_stop,
                                roles=getattr(bundle, "roles", None) or None)
