"""Baseline builders: each returns ``{"static": ..., "temporal": ...}`` arrays for the engine.

A baseline is the reference an explanation is measured against: attributions add up to
f(customer) - f(baseline). Shapes: ``(1, S)`` and ``(1, T, F)`` for one baseline shared by
all customers, ``(n, S)`` and ``(n, T, F)`` for one per customer, and ``(1, K, S)`` and
``(1, K, T, F)`` for a distribution of K baselines (expected gradients).

``data`` is the whole data set, ``inputs`` the customers being explained, both
``{"static": (n, S), "temporal": (n, T, F)}``.
"""

from __future__ import annotations

import numpy as np

from explain.errors import AttributionError
from explain.labels import mask as cohort_mask  # noqa: F401  (baselines.cohort_mask: its old home)
from explain.labels import text as labels_text
from explain.settings import (BAD_SAMPLES, BAD_SPEC, BAD_WIDTH, DEFAULT_BLUR_WIDTH, DEFAULT_SAMPLES, KINDS,  # noqa: F401
                              MAX_SAMPLES, Baseline)

UNKNOWN_CUSTOMER = "Baseline customer {customer!r} is not in the data set. Some valid ids: {examples}."
EMPTY_COHORT = (
    "The cohort {value!r} has no customers: the label column holds {present}. Pick one of "
    "those values, or a bundle with a label column."
)
NO_LABELS = "A cohort baseline needs a label column in the bundle (bundle.json 'label_column'); this bundle has none."

DESCRIPTIONS = {
    "zero": "every feature at 0 (in the model's raw units): 'nothing at all'. Simple, but 0 may "
            "be an unrealistic customer (zero tenure, zero charge).",
    "mean": "the average customer: each static feature at its mean, each monthly feature at its "
            "mean over all customers and months. Attributions say how this customer differs from average.",
    "median": "the typical customer: each feature at its median, robust to outliers.",
    "customer": "another real customer: attributions explain the difference between the two scores.",
    "cohort": "the average of a group of customers sharing a label (for example customers who stayed): "
              "attributions explain why this customer scores differently from that group.",
    "flat": "the customer's own data with each monthly feature held flat at its own average: "
            "static features get no attribution; the heatmap shows which months' ups and downs matter.",
    "blur": "the customer's own history smoothed over time: static features get no attribution; "
            "attributions show the effect of sudden changes, not of overall levels.",
    "sample": "K customers drawn at random (expected gradients): IG is averaged over K baselines, "
              "so no single reference point dominates.",
}


def zero(data: dict) -> dict:
    return {"static": np.zeros((1, *data["static"].shape[1:])),
            "temporal": np.zeros((1, *data["temporal"].shape[1:]))}


def mean(data: dict) -> dict:
    """Per-feature mean; temporal: per feature over customers and periods, same every period."""
    return _per_feature(data, np.mean)


def median(data: dict) -> dict:
    return _per_feature(data, np.median)


def _per_feature(data, reduce):
    static = np.asarray(data["static"], np.float64)
    temporal = np.asarray(data["temporal"], np.float64)
    t_feature = reduce(temporal.reshape(-1, temporal.shape[-1]), axis=0)  # (F,)
    return {"static": reduce(static, axis=0)[None],
            "temporal": np.broadcast_to(t_feature, temporal.shape[1:])[None].copy()}


def customer(data: dict, index: int) -> dict:
    return {"static": np.asarray(data["static"][index:index + 1], np.float64),
            "temporal": np.asarray(data["temporal"][index:index + 1], np.float64)}


def cohort(data: dict, mask) -> dict:
    """Mean of the rows selected by ``mask`` (temporal: per period and feature)."""
    mask = np.asarray(mask, bool)
    return {"static": np.asarray(data["static"], np.float64)[mask].mean(axis=0)[None],
            "temporal": np.asarray(data["temporal"], np.float64)[mask].mean(axis=0)[None]}


def flat(inputs: dict) -> dict:
    """Each customer's own history held at its mean over periods; static at its own values."""
    temporal = np.asarray(inputs["temporal"], np.float64)
    return {"static": np.asarray(inputs["static"], np.float64),
            "temporal": np.broadcast_to(temporal.mean(axis=1, keepdims=True), temporal.shape).copy()}


def blur(inputs: dict, width: float = DEFAULT_BLUR_WIDTH) -> dict:
    """Each customer's history smoothed along time by a Gaussian of ``width`` periods (sigma).

    The edges are reflected (scipy's mode "reflect"), so a constant history stays constant
    and a very wide blur tends to the customer's own mean. Static at its own values.
    """
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not width > 0:
        raise AttributionError(BAD_WIDTH.format(width=width))
    temporal = np.asarray(inputs["temporal"], np.float64)
    periods = temporal.shape[1]
    radius = int(min(np.ceil(4.0 * width), 50 * periods))  # truncated at 4 sigma, as scipy's gaussian_filter
    offsets = np.arange(-radius, radius + 1)
    kernel = np.exp(-0.5 * (offsets / width) ** 2)
    # weights[t, u]: contribution of period u to smoothed period t, with reflection at the ends
    weights = np.zeros((periods, periods))
    for t in range(periods):
        for o, w in zip(offsets, kernel):
            u = t + o
            while u < 0 or u >= periods:
                u = -u - 1 if u < 0 else 2 * periods - u - 1
            weights[t, u] += w
    weights /= weights.sum(axis=1, keepdims=True)
    return {"static": np.asarray(inputs["static"], np.float64),
            "temporal": np.einsum("tu,nuf->ntf", weights, temporal)}


def sample(data: dict, k: int = DEFAULT_SAMPLES, seed: int = 0) -> dict:
    """K customers drawn without replacement (seeded): ``(1, K, S)`` and ``(1, K, T, F)``."""
    n = data["static"].shape[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_SAMPLES:
        raise AttributionError(BAD_SAMPLES.format(high=MAX_SAMPLES, k=k))
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(k, n), replace=False))
    return {"static": np.asarray(data["static"], np.float64)[rows][None],
            "temporal": np.asarray(data["temporal"], np.float64)[rows][None]}


def parse_spec(spec: str | Baseline) -> tuple[str, str | float | int | None]:
    """'customer:C00042' -> ('customer', 'C00042'); 'mean' -> ('mean', None) (``Baseline.parse``)."""
    parsed = Baseline.parse(spec)
    return parsed.kind, parsed.argument


def from_spec(spec: str | Baseline, data: dict, inputs: dict, *, ids=None, labels=None, seed: int = 0) -> dict:
    """Build the baseline named by ``spec`` (a ``Baseline`` or its text, the CLI's ``--baseline``)."""
    spec = Baseline.parse(spec)
    kind, arg = spec.kind, spec.argument
    if kind == "zero":
        return zero(data)
    if kind in ("mean", "median"):
        return {"mean": mean, "median": median}[kind](data)
    if kind == "customer":
        id_list = [str(i) for i in (ids if ids is not None else range(data["static"].shape[0]))]
        if arg not in id_list:
            raise AttributionError(UNKNOWN_CUSTOMER.format(customer=arg, examples=", ".join(id_list[:5])))
        return customer(data, id_list.index(arg))
    if kind == "cohort":
        if labels is None:
            raise AttributionError(NO_LABELS)
        mask = cohort_mask(labels, arg)
        if not mask.any():
            present = ", ".join(sorted({labels_text(v) for v in labels}))
            raise AttributionError(EMPTY_COHORT.format(value=arg, present=present))
        return cohort(data, mask)
    if kind == "flat":
        return flat(inputs)
    if kind == "blur":
        return blur(inputs, spec.width)
    return sample(data, arg, seed)


def describe(spec: str | Baseline) -> str:
    """One sentence saying what the baseline is, for the 'how to read this' text."""
    spec = Baseline.parse(spec)
    text = DESCRIPTIONS[spec.kind]
    if spec.argument is not None:
        text = f"({spec.kind} {str(spec).partition(':')[2]}) " + text
    return text
