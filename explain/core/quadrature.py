"""Alphas and weights of each integration rule on [0, 1].

``steps`` is the number of gradient evaluations. Every rule's weights sum to exactly 1,
so that a constant gradient g integrates to exactly g. (Captum and alibi give the
trapezoid rule n points with step 1/n; its weights then sum to (n - 1)/n and every
attribution comes out about 1/n too small. Here the step is 1/(n - 1).)
"""

from __future__ import annotations

import functools

import numpy as np

from explain.core.errors import AttributionError

METHODS = ("gausslegendre", "trapezoid", "left", "right", "middle")
MIN_STEPS = 1
MAX_STEPS = 4096

UNKNOWN_METHOD = "Unknown integration method {method!r}. Expected one of: {expected}."
STEPS_OUT_OF_RANGE = (
    "steps={steps!r} is out of range for method {method!r}: expected an integer from "
    "{low} to {high} (or \"auto\"). More steps make the integral more accurate and the "
    "computation slower; 32-64 is a good start."
)


def alphas_and_weights(method: str, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(alphas, weights)``, both float64 of shape ``(steps,)``; weights sum to 1.

    The arrays are cached and read-only (Gauss-Legendre nodes cost milliseconds at 256).
    """
    if method not in METHODS:
        raise AttributionError(UNKNOWN_METHOD.format(method=method, expected=", ".join(METHODS)))
    low = 2 if method == "trapezoid" else MIN_STEPS
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not low <= steps <= MAX_STEPS:
        raise AttributionError(
            STEPS_OUT_OF_RANGE.format(steps=steps, method=method, low=low, high=MAX_STEPS)
        )
    return _rule(method, int(steps))


@functools.lru_cache(maxsize=64)
def _rule(method: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    if method == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(n)  # on [-1, 1], weights sum to 2
        alphas, weights = (nodes + 1.0) / 2.0, weights / 2.0
    elif method == "trapezoid":
        alphas = np.linspace(0.0, 1.0, n)
        weights = np.full(n, 1.0 / (n - 1))
        weights[[0, -1]] /= 2.0
    else:
        offset = {"left": 0.0, "right": 1.0, "middle": 0.5}[method]
        alphas = (np.arange(n, dtype=np.float64) + offset) / n
        weights = np.full(n, 1.0 / n)
    alphas, weights = alphas.astype(np.float64), weights.astype(np.float64)
    alphas.flags.writeable = weights.flags.writeable = False
    return alphas, weights
