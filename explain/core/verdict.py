"""The verdict in words: which risk band a score falls in ("high risk: likely to churn").

The bands come from the bundle (``bundle.json`` key ``risk_bands``, read by
:func:`parse_bands` when the bundle is loaded), else :data:`DEFAULT_BANDS`::

    "risk_bands": [
      {"name": "low risk",    "from": 0.0, "says": "likely to stay"},
      {"name": "medium risk", "from": 0.3, "says": "may churn"},
      {"name": "high risk",   "from": 0.6, "says": "likely to churn"}
    ]

A band holds the scores from its ``from`` up to the next band's (the first band also holds
everything below it, the last everything above); ``says`` is optional. ``{output}`` in a
``says`` text is replaced by the output's name. The score is the model's output (a probability
for a sigmoid), whatever space the attributions are computed in. No streamlit.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import numpy as np


class Band(NamedTuple):
    name: str
    start: float  # scores >= start (up to the next band's start)
    says: str = ""


DEFAULT_BANDS = (Band("low risk", 0.0, "unlikely to {output}"), Band("medium risk", 0.3, "may {output}"),
                 Band("high risk", 0.6, "likely to {output}"))
BANDS_EXPECTED = ('a list of at least 2 bands, each {"name": text, "from": a number, "says": text (optional)}, '
                  'with increasing "from" values, for example [{"name": "low risk", "from": 0}, '
                  '{"name": "high risk", "from": 0.6, "says": "likely to churn"}]')
BAD_BANDS = "'risk_bands' {problem}; expected {expected}."


class Verdict(NamedTuple):
    band: str         # "high risk"
    says: str         # "likely to churn" ("" when the band says nothing)
    index: int        # 0 = the lowest band
    of: int           # how many bands
    range_text: str   # "0.6 and above"

    @property
    def headline(self) -> str:
        """'High risk: likely to churn'."""
        text = self.band[:1].upper() + self.band[1:]
        return f"{text}: {self.says}" if self.says else text


def parse_bands(value: Any) -> tuple[tuple[Band, ...] | None, str | None]:
    """(bands, None) from a ``risk_bands`` JSON value, or (None, the problem in words)."""
    def bad(problem):
        return None, BAD_BANDS.format(problem=problem, expected=BANDS_EXPECTED)

    if not isinstance(value, list) or len(value) < 2:
        return bad(f"is {json.dumps(value)[:60]}" if not isinstance(value, list) else f"has {len(value)} band(s)")
    bands = []
    for k, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            return bad(f"band {k + 1} has no \"name\" text")
        start = item.get("from")
        if isinstance(start, bool) or not isinstance(start, (int, float)) or not np.isfinite(start):
            return bad(f"band {k + 1} ({item['name']!r}) has no number \"from\"")
        says = item.get("says", "")
        if not isinstance(says, str):
            return bad(f"band {k + 1} ({item['name']!r}) has a \"says\" that is not text")
        unknown = sorted(set(item) - {"name", "from", "says"})
        if unknown:
            return bad(f"band {k + 1} ({item['name']!r}) has unknown key(s) {', '.join(map(repr, unknown))}")
        bands.append(Band(item["name"].strip(), float(start), says.strip()))
    if any(b.start <= a.start for a, b in zip(bands, bands[1:])):
        return bad('has "from" values that do not increase')
    return tuple(bands), None


def bands_of(bundle) -> tuple[Band, ...]:
    """The bundle's risk bands (``bundle.json`` ``risk_bands``), else :data:`DEFAULT_BANDS`."""
    return tuple(getattr(bundle, "risk_bands", None) or DEFAULT_BANDS)


def cuts(bands) -> list[float]:
    """The band edges between bands (for a histogram's dashed lines)."""
    return [b.start for b in bands[1:]]


def ranges(bands) -> dict[str, tuple[float, float]]:
    """{"high risk (>= 0.6)": (low, high)}: each band's name with its range, for filters."""
    out = {}
    for k, band in enumerate(bands):
        low = -np.inf if k == 0 else band.start
        high = bands[k + 1].start if k + 1 < len(bands) else np.inf
        out[f"{band.name} ({_range_text(bands, k)})"] = (low, high)
    return out


def _range_text(bands, k: int, words: bool = False) -> str:
    """Band ``k``'s scores: '< 0.3', '0.3 to 0.6', '>= 0.6' (words: 'below 0.3', '0.6 and above')."""
    if k == 0:
        return f"{'below' if words else '<'} {bands[1].start:g}"
    if k == len(bands) - 1:
        return f"{bands[k].start:g} and above" if words else f">= {bands[k].start:g}"
    return f"{bands[k].start:g} to {bands[k + 1].start:g}"


def verdict(score: float, bands, output: str = "churn") -> Verdict:
    """The band of ``score`` among ``bands``, its words with ``{output}`` filled in."""
    index = max([0] + [k for k, band in enumerate(bands) if score >= band.start])
    band = bands[index]
    return Verdict(band.name, band.says.replace("{output}", str(output)), index, len(bands),
                   _range_text(bands, index, words=True))


def quality(delta: float, prediction: float, baseline_prediction: float) -> str:
    """How much of the difference f(x) - f(b) the attributions account for, in plain percent:
    '99.9 %'; their sum over the difference, 1 - delta / (f(x) - f(b)), shown as it is: above
    100 % when they overshoot, below 0 when their sum has the wrong sign ('-258 %, the sign is
    wrong'). A difference under 0.01 counts as 0.01 (as the badge), so that a tiny one does not alarm.
    """
    gap = prediction - baseline_prediction
    scale = max(abs(gap), 0.01)
    share = 1.0 - delta / (scale if gap >= 0 else -scale)
    if share < 0:
        return f"{100 * share:.0f} %, the sign is wrong"
    text = f"{100 * share:.1f}"
    if text == "100.0" and delta != 0:
        text = "over 99.9"
    return f"{text} %"
