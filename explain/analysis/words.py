"""Why one customer scores what they score, in the analyst's words, with the customer's own values.

    C00877 is 99 % likely to churn (26 % of customers churn), mainly because support calls rose to 6 in 2025-11 to
    2025-12 (usually 1) and data usage fell to 2.1 GB in 2025-06 to 2025-12 (usually 4.3); a tenure of 6 months adds
    a little.

:func:`drivers_of` finds the few inputs that carry the difference between the customer and the baseline (each
history feature over the window of periods where its effect sits), with the customer's value and the baseline's
("usually") there; :func:`why_sentence` writes them as one sentence. Arrays in, text out: no model call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explain.core.text import unit_after

SHARE_MAIN = 0.2  # a driver with at least this share of the explained difference is a main reason
WINDOW_SHARE = 0.25  # a period belongs to a feature's window when its effect is at least this share of the largest


@dataclass(frozen=True)
class Driver:
    """One reason: an input feature (over a window of periods for a history) and what it did."""

    label: str
    effect: float  # the sum of its attributions (same units as the prediction)
    value: float | str  # the customer's value (mean over the window for a history)
    usual: float | None  # the baseline's value there (what "usually" means), when known
    periods: tuple[str, str] | None = None  # first and last period of the window (a history feature)
    unit: str = ""


def _window(effects: np.ndarray, sign: float) -> tuple[int, int]:
    """The contiguous run of periods around the largest effect of this sign, where the effect stays above a share
    of it: where in the history the feature mattered."""
    signed = np.where(np.isnan(effects), 0.0, effects) * sign
    peak = int(np.argmax(signed))
    floor = WINDOW_SHARE * signed[peak]
    first = last = peak
    while first > 0 and signed[first - 1] >= floor:
        first -= 1
    while last < len(signed) - 1 and signed[last + 1] >= floor:
        last += 1
    return first, last


def _static_drivers(attribution, bundle, i, values, baseline) -> list[Driver]:
    units = getattr(bundle, "units", {}) or {}
    out = []
    for j, label in enumerate(bundle.static_labels):
        value = values["static"][j]
        usual = None if baseline is None else float(np.asarray(baseline["static"]).reshape(-1)[j])
        unit = unit_after(label, units.get(bundle.static_features[j], ""))
        out.append(Driver(str(label), float(attribution.static[i, j]),
                          value if isinstance(value, str) else float(value), usual, None, unit or ""))
    return out


def _temporal_drivers(attribution, bundle, i, values, baseline) -> list[Driver]:
    if attribution.temporal is None:
        return []
    units = getattr(bundle, "units", {}) or {}
    attr = np.asarray(attribution.temporal[i], np.float64)  # (T, F)
    history = np.asarray(values["temporal"], np.float64)
    base = None if baseline is None else np.asarray(baseline["temporal"], np.float64).reshape(history.shape)
    out = []
    for j, label in enumerate(bundle.temporal_labels):
        column = attr[:, j]
        total = float(np.nansum(column))
        if total == 0.0:
            continue
        a, b = _window(column, np.sign(total))
        effect = float(np.nansum(column[a:b + 1]))
        value = float(np.nanmean(history[a:b + 1, j]))
        usual = None if base is None else float(np.nanmean(base[a:b + 1, j]))
        unit = unit_after(label, units.get(bundle.temporal_features[j], ""))
        out.append(Driver(str(label), effect, value, usual, (str(bundle.periods[a]), str(bundle.periods[b])),
                          unit or ""))
    return out


def drivers_of(attribution, bundle, i: int, values: dict, baseline: dict | None = None, top: int = 3) -> list[Driver]:
    """The ``top`` drivers of customer ``i`` that push the score the way it moved (largest first).

    ``values``: the customer's ``{"static": (S,), "temporal": (T, F)}``; ``baseline``: the baseline's, for "usually".
    """
    gap = float(attribution.prediction[i] - attribution.baseline_prediction[i])
    sign = 1.0 if gap >= 0 else -1.0
    found = _static_drivers(attribution, bundle, i, values, baseline) + _temporal_drivers(
        attribution, bundle, i, values, baseline)
    pushing = [d for d in found if d.effect * sign > 0]
    return sorted(pushing, key=lambda d: -abs(d.effect))[:top]


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 or float(value).is_integer() else f"{value:.2g}"


def _phrase(driver: Driver) -> str:
    name = driver.label if driver.label[:2].isupper() else driver.label[:1].lower() + driver.label[1:]
    unit = f" {driver.unit}" if driver.unit else ""
    if isinstance(driver.value, str):
        return f"{name} is {driver.value}"
    value = f"{_number(driver.value)}{unit}"
    when = ""
    if driver.periods is not None:
        first, last = driver.periods
        when = f" in {first}" if first == last else f" in {first} to {last}"
    if driver.usual is None:
        return f"{name} was {value}{when}"
    usual = f" (usually {_number(driver.usual)})"
    if driver.periods is None:
        return f"a {name} of {value}{usual}"
    if np.isclose(driver.value, driver.usual, rtol=0.05, atol=1e-9):
        verb = "was"
    else:
        verb = "rose to" if driver.value > driver.usual else "fell to"
    return f"{name} {verb} {value}{when}{usual}"


def why_sentence(customer: str, score: float, target: str, drivers: list[Driver], *, base_rate: str = "",
                 space: str = "output") -> str:
    """One or two sentences: the score, what is usual, and the main reasons with the customer's values.

    ``base_rate``: what is usual in words ("26 % of customers churn"); ``space``: "output" says the score as a
    percentage when it lies in [0, 1], else as a number (log-odds)."""
    if space == "output" and 0.0 <= score <= 1.0:
        head = f"{customer} is {score:.0%} likely to {target}"
    else:
        head = f"{customer} scores {score:.2f} for {target} ({space})"
    head = head.replace("%", " %")
    if base_rate:
        head += f" ({base_rate})"
    if not drivers:
        return head + "."
    total = sum(abs(d.effect) for d in drivers)
    main = [d for d in drivers if abs(d.effect) >= SHARE_MAIN * total] or drivers[:1]
    minor = [d for d in drivers if d not in main]
    text = head + ", mainly because " + _join([_phrase(d) for d in main])
    if minor:
        text += "; " + _join([_phrase(d) for d in minor]) + (" adds" if len(minor) == 1 else " add") + " a little"
    return text + "."


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
