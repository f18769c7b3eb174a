"""Attributions for customers of a bundle: the one call the CLI, the batch job and the app share."""

from __future__ import annotations

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


def baseline_for(bundle, inputs: dict, spec: str, seed: int = 0) -> dict:
    """The baseline arrays named by ``spec`` for these customers' ``inputs``."""
    return baseline_builders.from_spec(spec, bundle.data(), inputs, ids=bundle.ids, labels=bundle.labels, seed=seed)


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
