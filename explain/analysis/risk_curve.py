"""A customer's risk over the periods, for a model with a prediction per period (``explain.core.outputs``).

``risk_curve(bundle, customer, settings)``: the model's output for the explained head and target at every period,
which period is explained, whether later periods can matter to it (``outputs.causal``), and the words an analyst
reads first. None for a model with one prediction per customer.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from explain.core import outputs
from explain.core.engine import predict

CAUSAL = ("The model reads the periods in order: what happened after {label} has no effect on the risk there "
          "(those periods' effects are exactly 0).")
LOOKS_AHEAD = ("This model reads the whole history at once ({why}): periods after {label} can matter to the risk "
               "there, and get effects of their own.")
UNKNOWN_ORDER = ("Whether this model reads the periods in order is not known (a layer whose behaviour over time is "
                 "not known): periods after {label} can matter to the risk there.")


class RiskCurve(NamedTuple):
    """``values`` (T,) the model's output for ``target_name`` at each of ``periods`` (labels); ``explained`` the
    number (1 = first) of the period explained; ``causal`` as ``outputs.causal``; ``sentence`` and ``order`` (what
    later periods can do) in words."""

    customer: str
    periods: list
    values: np.ndarray
    explained: int
    target_name: str
    causal: bool | None
    sentence: str
    order: str


def risk_curve(bundle, customer, settings) -> RiskCurve | None:
    """The risk curve of ``customer`` under ``settings`` (its head, period and target), or None when the model has
    one prediction per customer."""
    choice = outputs.choose(bundle, settings.output, settings.output_period)
    if choice is None or choice.period is None:
        return None
    source = outputs.source_of(bundle.model)
    whole = outputs.head_model(source, choice.output)
    target = settings.replace(output=choice.output, output_period=choice.period).resolved(
        choice.output_names, choice.target).target
    out = predict(whole, bundle.inputs_for([str(customer)]))
    labels = [str(p) for p in bundle.periods]
    values = out.reshape(len(labels), -1)[:, target] if out.size % len(labels) == 0 else out.reshape(-1)
    name = str(choice.output_names[target])
    causal = outputs.causal(source)
    return RiskCurve(str(customer), labels, values, choice.period, name, causal,
                     _sentence(name, labels, values, choice.period), _order(source, causal, labels[choice.period - 1]))


def _sentence(name: str, labels: list, values: np.ndarray, explained: int) -> str:
    top = int(np.argmax(values))
    return (f"Predicted {name} per period: {values[0]:.2f} in {labels[0]}, {values[-1]:.2f} in {labels[-1]}, "
            f"highest {values[top]:.2f} in {labels[top]}. Explained below: {labels[explained - 1]} "
            f"({values[explained - 1]:.2f}).")


def _order(model, causal: bool | None, label: str) -> str:
    if causal is True:
        return CAUSAL.format(label=label)
    if causal is False:
        kinds = sorted({type(layer).__name__ for layer in outputs.look_ahead_layers(model)})
        return LOOKS_AHEAD.format(label=label, why=", ".join(kinds) or "a layer that looks ahead")
    return UNKNOWN_ORDER.format(label=label)
