"""Attributions for customers of a bundle: the one call the CLI, the batch job and the app share."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from explain import baselines as baseline_builders
from explain.ig import DEFAULT_TOLERANCE, Attribution, integrated_gradients


@dataclass(frozen=True)
class Request:
    """What to explain, as the CLI and the dashboard spell it."""

    baseline: str = "mean"
    steps: int | str = 64
    method: str = "gausslegendre"
    target: int | str = 0
    space: str = "output"
    path: str = "joint"
    tolerance: float = DEFAULT_TOLERANCE
    seed: int = 0  # for sample:K

    def as_dict(self) -> dict:
        return {"baseline": self.baseline, "steps": self.steps, "method": self.method,
                "target": self.target, "space": self.space, "path": self.path}


# Baselines computed from the whole data set (not from the customers explained), kept per
# bundle content and spec: a batch job or the dashboard asks for the same one per chunk.
_DATA_WIDE = ("zero", "mean", "median", "customer", "cohort", "sample")
_CACHE: "OrderedDict[tuple, dict]" = OrderedDict()
_CACHE_SIZE = 32
_CACHE_LOCK = threading.Lock()


def baseline_for(bundle, inputs: dict, spec: str, seed: int = 0) -> dict:
    """The baseline arrays named by ``spec`` for these customers' ``inputs`` (read-only)."""
    kind, _ = baseline_builders.parse_spec(spec)
    if kind not in _DATA_WIDE or not bundle.content_hash:  # in-memory bundles have no hash
        return baseline_builders.from_spec(spec, bundle.data(), inputs, ids=bundle.ids, labels=bundle.labels)
    key = (bundle.content_hash, str(spec).strip(), seed if kind == "sample" else 0)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    arrays = baseline_builders.from_spec(spec, bundle.data(), inputs, ids=bundle.ids, labels=bundle.labels, seed=seed)
    for array in arrays.values():
        array.flags.writeable = False
    with _CACHE_LOCK:
        _CACHE[key] = arrays
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return arrays


def explain_customers(bundle, ids, request: Request = Request(), *, batch_size: int | None = None) -> Attribution:
    """Integrated Gradients of the customers ``ids`` of ``bundle`` under ``request``."""
    ids = [str(i) for i in ids]
    inputs = bundle.inputs_for(ids)
    return integrated_gradients(
        bundle.model, inputs, baseline_for(bundle, inputs, request.baseline, request.seed),
        steps=request.steps, method=request.method, target=request.target, space=request.space,
        path=request.path, batch_size=batch_size, tolerance=request.tolerance, ids=ids,
        output_names=bundle.output_names,
    )
