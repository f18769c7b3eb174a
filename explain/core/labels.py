"""Label values as text: how the dashboard, the cohort baseline and the filters name a label.

A label column may hold integers, floats read from CSV (``1.0``), booleans or strings; they
are compared as text, with whole floats written as integers (``1.0`` -> ``"1"``), so that
``cohort:1`` names the same customers whatever the column's dtype (one spelling per value:
``cohort:1.0`` names none). ``bundle.json``'s ``positive_label`` is matched as text or as a
number (``"1"``, ``1`` and ``1.0`` name the label ``1``): JSON gives it a type the table may not have.
"""

from __future__ import annotations

import numpy as np


def text(value) -> str:
    """One label value as text: ``1.0`` -> ``"1"``, ``"yes"`` -> ``"yes"``."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _number(value) -> float | None:
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


def same(a, b) -> bool:
    """Whether two label values name the same label: equal as text, or equal as numbers."""
    if text(a) == text(b):
        return True
    x, y = _number(a), _number(b)
    return x is not None and x == y


def occurs(labels, value) -> bool:
    """Whether a label given in ``bundle.json`` (``positive_label``) names one of ``labels``'
    values, as text or as a number."""
    return any(same(v, value) for v in {text(v) for v in labels})


def mask(labels, value: str) -> np.ndarray:
    """Rows whose label, written as text, equals ``value`` (bool, one per row)."""
    return np.array([text(v) == str(value) for v in labels], bool)


def values(bundle) -> list[str]:
    """The bundle's label values as text, the non-positive ones (customers who stayed) first; [] without labels."""
    if bundle.labels is None:
        return []
    found = {text(v) for v in bundle.labels}
    given = bundle.positive_label
    return sorted(found, key=lambda v: (given is not None and same(v, given), v))


def positive(bundle) -> str | None:
    """The positive label as text (the bundle's ``positive_label``, else the last value); None without labels."""
    found = values(bundle)
    if not found:
        return None
    if bundle.positive_label is None:
        return found[-1]
    return next((v for v in found if same(v, bundle.positive_label)), text(bundle.positive_label))


def counts(bundle) -> dict[str, int]:
    """{label value: number of customers} in the order of :func:`values`."""
    if bundle.labels is None:
        return {}
    written = [text(v) for v in bundle.labels]
    return {v: written.count(v) for v in values(bundle)}
