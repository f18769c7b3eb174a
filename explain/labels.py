"""Label values as text: how the dashboard, the cohort baseline and the filters name a label.

A label column may hold integers, floats read from CSV (``1.0``), booleans or strings; they
are compared as text, with whole floats written as integers (``1.0`` -> ``"1"``), so that
``cohort:1`` names the same customers whatever the column's dtype.
"""

from __future__ import annotations

import numpy as np


def text(value) -> str:
    """One label value as text: ``1.0`` -> ``"1"``, ``"yes"`` -> ``"yes"``."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def mask(labels, value: str) -> np.ndarray:
    """Rows whose label, written as text, equals ``value`` (bool, one per row)."""
    return np.array([text(v) == str(value) for v in labels], bool)


def values(bundle) -> list[str]:
    """The bundle's label values as text, the non-positive ones (customers who stayed) first; [] without labels."""
    if bundle.labels is None:
        return []
    found = {text(v) for v in bundle.labels}
    positive_text = text(bundle.positive_label) if bundle.positive_label is not None else None
    return sorted(found, key=lambda v: (v == positive_text, v))


def positive(bundle) -> str | None:
    """The positive label as text (the bundle's ``positive_label``, else the last value); None without labels."""
    found = values(bundle)
    if not found:
        return None
    return text(bundle.positive_label) if bundle.positive_label is not None else found[-1]


def counts(bundle) -> dict[str, int]:
    """{label value: number of customers} in the order of :func:`values`."""
    if bundle.labels is None:
        return {}
    written = [text(v) for v in bundle.labels]
    return {v: written.count(v) for v in values(bundle)}
