"""Long histories made readable in a heatmap: periods binned, features ordered and folded, a colour
range that one extreme cell cannot set. Presentation only: sums and means of what a figure is
given, the way a histogram bins its data (the analysis layer's numbers are not changed).

* More than ``MAX_PERIODS`` periods: binned by a calendar unit read from the labels (daily dates
  by week, or by month when weeks are still too many; weekly by month; monthly by quarter;
  quarterly by year), else in groups of equal length (``t1-t7``). A bin's attribution is the sum
  over its periods (attributions add up), its value and baseline the mean over its real periods;
  padded periods are no data, a bin of padding only is padding. Hover gives the raw period range.
* More than ``TOP_FEATURES`` features: ordered by total |attribution| (largest first), the first
  ``TOP_FEATURES - 1`` shown and the others folded into one row, "the other K features" (their sum).

:func:`plan` decides once per figure (or per set of figures compared); its ``sums`` and ``means``
apply that to each array the figure draws.
* :func:`robust_limit`: the colour limit of a large heatmap is the 99th percentile of |cell|
  when the largest cell is more than ``OUTLIER_RATIO`` times that (the figure's legend says so,
  and cells beyond show the scale's end colour), else the largest |cell|.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

MAX_PERIODS = 60
TOP_FEATURES = 12
ROBUST_CELLS = 500        # heatmaps with at least this many cells get a robust colour range
ROBUST_QUANTILE = 99.0
OUTLIER_RATIO = 3.0
GAPLESS = 40              # periods shown from which cells are drawn without gaps
UNITS = (("week", 7), ("month", 31), ("quarter", 92), ("year", 366))  # (unit, days at most)


class Plan(NamedTuple):
    """How a (T, F) heatmap is shown: the bin of each period (T,), the bins' labels and raw ranges,
    the feature index of each row shown (None: the folded row), the features folded, the padded
    bins (or None), a note in words of what was binned or folded ("" when nothing was), and the
    periods with data (T,)."""

    which: np.ndarray
    labels: list
    ranges: list
    rows: list
    folded: np.ndarray
    padding: np.ndarray | None
    note: str
    real: np.ndarray

    @property
    def periods_changed(self) -> bool:
        return len(self.labels) < len(self.which)

    def row_names(self, features) -> list:
        return [str(features[j]) if j is not None else f"the other {len(self.folded)} features" for j in self.rows]

    def row_of(self, j: int) -> int:
        """The row showing feature ``j``."""
        return self.rows.index(j) if j in self.rows else len(self.rows) - 1

    def sums(self, x) -> np.ndarray:
        """(T', F') of a (T, F) array of attributions: summed per bin over the periods with data,
        the folded features summed into the last row."""
        return self._rows(self._per_bin(x, mean=False), total=True)

    def means(self, x):
        """(T', F') of a (T, F) array of values: the mean per bin over the periods with data (NaN
        for a bin of padding, and in the folded row); None stays None."""
        if x is None:
            return None
        return self._rows(self._per_bin(x, mean=True), total=False)

    def _per_bin(self, x, mean: bool) -> np.ndarray:
        x = np.asarray(x, np.float64)
        if not self.periods_changed:
            return x.copy()
        n = len(self.labels)
        out = np.zeros((n, x.shape[1]))
        np.add.at(out, self.which[self.real], np.nan_to_num(x[self.real]))
        if mean:
            counts = np.bincount(self.which[self.real], minlength=n)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(counts[:, None] > 0, out / np.maximum(counts, 1)[:, None], np.nan)
        return out

    def _rows(self, x: np.ndarray, total: bool) -> np.ndarray:
        if not len(self.folded):
            return x
        kept = [j for j in self.rows if j is not None]
        last = np.nansum(x[:, self.folded], axis=1, keepdims=True) if total else np.full((x.shape[0], 1), np.nan)
        return np.concatenate([x[:, kept], last], axis=1)


def _dates(periods) -> pd.DatetimeIndex | None:
    """The period labels as dates, or None when they are not all dates."""
    text = [str(p) for p in periods]
    if not text or not all(any(c.isdigit() for c in t) for t in text):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dates = pd.to_datetime(pd.Series(text), errors="coerce", format="mixed")
        except (ValueError, TypeError):
            return None
    if dates.isna().any() or not dates.is_monotonic_increasing:
        return None
    return pd.DatetimeIndex(dates)


def bins(periods, max_periods: int = MAX_PERIODS) -> tuple[np.ndarray, list, list, str]:
    """(bin of each period (T,) int, bin labels, raw range of each bin, unit name) for ``periods``;
    one bin per period when there are at most ``max_periods``."""
    periods = [str(p) for p in periods]
    t = len(periods)
    if t <= max_periods:
        return np.arange(t), periods, periods, "period"
    dates = _dates(periods)
    if dates is not None and t > 1:
        step = float(np.median(np.diff(dates.asi8))) / 86_400e9  # days between periods
        for unit, days in UNITS:
            if days <= step * 1.5:
                continue  # a unit no longer than a period bins nothing
            key = {"week": lambda d: d.strftime("%G-W%V"), "month": lambda d: d.strftime("%Y-%m"),
                   "quarter": lambda d: f"{d.year}-Q{(d.month - 1) // 3 + 1}", "year": lambda d: str(d.year)}[unit]
            keys = [key(d) for d in dates]
            labels = list(dict.fromkeys(keys))
            if len(labels) <= max_periods:
                index = {k: i for i, k in enumerate(labels)}
                which = np.array([index[k] for k in keys])
                return which, labels, _ranges(periods, which), unit
    size = math.ceil(t / max_periods)
    which = np.arange(t) // size
    ranges = _ranges(periods, which)
    return which, ranges, ranges, f"{size} periods"


def _ranges(periods, which) -> list:
    out = []
    for b in range(int(which.max()) + 1):
        members = np.flatnonzero(which == b)
        first, last = periods[members[0]], periods[members[-1]]
        out.append(first if first == last else f"{first} to {last}")
    return out


def plan(periods, features, importance, *, padding=None, max_periods: int = MAX_PERIODS,
         top: int = TOP_FEATURES) -> Plan:
    """The :class:`Plan` of a heatmap of ``periods`` x ``features`` whose features weigh
    ``importance`` (F,) (their total |attribution|: the order of the rows when some are folded)."""
    t, f = len(periods), len(features)
    pad = np.zeros(t, bool) if padding is None else np.asarray(padding, bool)
    which, labels, ranges, unit = bins(periods, max_periods)
    notes = []
    if len(labels) < t:
        unit_text = unit if unit.endswith("periods") else f"{unit}s"
        notes.append(f"{t} periods shown as {len(labels)} {unit_text}, attributions summed in each")
    rows, folded = list(range(f)), np.zeros(0, np.int64)
    if f > top:
        order = np.argsort(-np.nan_to_num(np.asarray(importance, np.float64)), kind="stable")
        rows, folded = order[:top - 1].tolist() + [None], order[top - 1:]
        notes.append(f"the {top - 1} largest of {f} features, the other {len(folded)} summed in one row")
    padded = None
    if padding is not None:
        padded = pad if len(labels) == t else np.bincount(which[~pad], minlength=len(labels)) == 0
    return Plan(which, labels, ranges, rows, folded, padded, "; ".join(notes), ~pad)


def robust_limit(*arrays) -> tuple[float, bool]:
    """(colour limit m of [-m, m], clipped) over ``arrays`` (see the module docstring); 1.0 when all are 0."""
    cells = np.concatenate([np.abs(np.asarray(x, np.float64)).ravel() for x in arrays]) if arrays else np.zeros(0)
    cells = cells[np.isfinite(cells)]
    largest = float(cells.max()) if cells.size else 0.0
    if largest == 0:
        return 1.0, False
    if cells.size >= ROBUST_CELLS:
        quantile = float(np.percentile(cells[cells > 0], ROBUST_QUANTILE))
        if quantile > 0 and largest > OUTLIER_RATIO * quantile:
            return quantile, True
    return largest, False


def clipped_note(limit: float) -> str:
    """The colour bar's line saying that the range is clipped."""
    return f"<br>range ±{limit:.2g}:<br>99th pct of<br>|cells|; larger<br>ones at the end"
