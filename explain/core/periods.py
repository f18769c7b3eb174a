"""A history's period in words: its unit (day, week, month, quarter or year), read from the period
labels (or given by ``bundle.json``'s ``period_unit``), and the "recent" window that fits it.

``unit_of(["2025-01-06", "2025-01-13", ...])`` is ``"week"``; ``Words("week").recent`` is 4 (the
last 4 weeks), ``Words("day").recent`` 30 and ``Words("month").recent`` 3. Labels that are none of
these (``t1``, ``p01``) are ``"period"``.

Long histories in a heatmap (the computation; ``explain.plots`` draws what it gives):

* :func:`plan` bins more than ``MAX_PERIODS`` periods by a calendar unit read from the labels (daily
  dates by week, or by month when weeks are still too many; weekly by month; monthly by quarter;
  quarterly by year), else in groups of equal length (``t1 to t7``), or by the unit a :class:`View`
  asks for (``bin_choices``: the units that make sense for the labels), over the periods a view
  zooms into (the others are left out). A bin's attribution is the sum over its periods
  (attributions add up: every feature's total, and the customer's, survive binning exactly), its
  value and baseline the mean over its real periods; padded periods are no data, a bin of padding
  only is padding. Each bin keeps its raw period range ("2025-01-06 to 2025-01-12") for the hover.
* More than ``TOP_FEATURES`` features: ordered by total |attribution| (largest first), the first
  ``TOP_FEATURES - 1`` shown and the others folded into one row, "the other K features" (their sum).
* :func:`fold_ranking`: a ranking of many features cut to its top N, the rest summed in one bar.

Standard library and numpy (pandas, lazily, to read dates).
"""

from __future__ import annotations

import math
import re
import warnings
from datetime import date
from statistics import median
from typing import NamedTuple, Sequence

import numpy as np

UNITS = ("day", "week", "month", "quarter", "year")
GENERIC = "period"
RECENT = {"day": 30, "week": 4, "month": 3, "quarter": 2, "year": 1, GENERIC: 3}
ADJECTIVES = {"day": "daily", "week": "weekly", "month": "monthly", "quarter": "quarterly", "year": "yearly",
              GENERIC: "temporal"}

_MONTH = re.compile(r"^\d{4}[-/](0[1-9]|1[0-2])$")                 # 2025-01, 2025/01
_QUARTER = re.compile(r"^\d{4}[-/ ]?Q[1-4]$", re.IGNORECASE)        # 2025-Q1, 2025Q1
_ISO_WEEK = re.compile(r"^\d{4}-?W(0[1-9]|[1-4]\d|5[0-3])$")         # 2025-W01
_YEAR = re.compile(r"^(19|20|21)\d{2}$")                             # 2025
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")                           # 2025-01-06 (a time after it is ignored)
# the gap in days between consecutive dates -> the unit
_GAPS = (("day", 1, 1), ("week", 7, 7), ("month", 28, 31), ("quarter", 89, 92), ("year", 365, 366))


def unit_of(periods: Sequence, declared: str | None = None) -> str:
    """The unit of these period labels: ``declared`` when given, else read from the labels (all of
    one form: ``YYYY-MM`` month, ``YYYY-Qn`` quarter, ``YYYY-Www`` week, ``YYYY`` year, or dates
    whose typical gap is 1, 7, 28-31, 89-92 or 365-366 days), else ``"period"``."""
    if declared:
        return declared
    labels = [str(p).strip() for p in periods]
    if not labels:
        return GENERIC
    for unit, pattern in (("month", _MONTH), ("quarter", _QUARTER), ("week", _ISO_WEEK), ("year", _YEAR)):
        if all(pattern.match(label) for label in labels):
            return unit
    if len(labels) > 1 and all(_DATE.match(label) for label in labels):
        try:
            days = [date.fromisoformat(label[:10]).toordinal() for label in labels]
        except ValueError:
            return GENERIC
        gap = median(b - a for a, b in zip(days, days[1:]))
        for unit, low, high in _GAPS:
            if low <= gap <= high:
                return unit
    return GENERIC


class Words(NamedTuple):
    """How the pages and summaries say a history's periods."""

    unit: str  # "week"

    @property
    def units(self) -> str:
        """'weeks'."""
        return f"{self.unit}s"

    @property
    def adjective(self) -> str:
        """'weekly' ('temporal' when the unit is unknown)."""
        return ADJECTIVES.get(self.unit, ADJECTIVES[GENERIC])

    @property
    def recent(self) -> int:
        """How many periods the summary calls recent: 30 days, 4 weeks, 3 months, 2 quarters, 1 year."""
        return RECENT.get(self.unit, RECENT[GENERIC])

    def count(self, n: int) -> str:
        """'4 weeks', '1 day'."""
        return f"{n} {self.unit if n == 1 else self.units}"


def words(bundle) -> Words:
    """The ``Words`` of a bundle's (first) history: its ``period_unit``, else read from its periods."""
    return Words(getattr(bundle, "period_unit", "") or unit_of(getattr(bundle, "periods", [])))


# ----------------------------------------------------------------------------- long histories in a heatmap

MAX_PERIODS = 60          # periods shown from which a heatmap bins them
TOP_FEATURES = 12         # rows of a heatmap from which the others are folded
TOP_RANKING = 15          # bars of a ranking from which the others are folded
AUTO, NONE = "auto", "none"
BIN_UNITS = (("week", 7), ("month", 31), ("quarter", 92), ("year", 366))  # (unit, days at most)
_KEYS = {"week": lambda d: d.strftime("%G-W%V"), "month": lambda d: d.strftime("%Y-%m"),
         "quarter": lambda d: f"{d.year}-Q{(d.month - 1) // 3 + 1}", "year": lambda d: str(d.year)}


class View(NamedTuple):
    """How a reader asked to see a long history: the bin (``"auto"``, ``"none"`` or a unit of
    :func:`bin_choices`) and the periods zoomed into, ``first`` to ``last`` (indices, inclusive;
    ``last`` None: to the end)."""

    bin: str = AUTO
    first: int = 0
    last: int | None = None

    def span(self, t: int) -> tuple[int, int]:
        """(first, last) of a history of ``t`` periods, inclusive, clipped to it."""
        last = t - 1 if self.last is None else min(int(self.last), t - 1)
        first = min(max(0, int(self.first)), last)
        return first, last


class Plan(NamedTuple):
    """How a (T, F) heatmap is shown: the bin of each period (T,) (-1: outside the zoom), the
    bins' labels and raw ranges, the feature index of each row shown (None: the folded row), the
    features folded, the padded bins (or None), a note in words of what was binned, zoomed or
    folded ("" when nothing was), the periods with data (T,), and the note of the same plan drawn
    as a history of lines (:meth:`kept_means`: means per bin, the folded features left out)."""

    which: np.ndarray
    labels: list
    ranges: list
    rows: list
    folded: np.ndarray
    padding: np.ndarray | None
    note: str
    real: np.ndarray
    history_note: str = ""

    @property
    def kept(self) -> list:
        """The features shown on rows of their own (every one unless some are folded), in row order."""
        return [j for j in self.rows if j is not None]

    def kept_means(self, x):
        """(T', K) of a (T, F) array of values: the mean per bin over the periods with data of each
        kept feature (:attr:`kept`; NaN for a bin of padding); None stays None. What a history of
        lines draws: a mean of values (the folded features have no line: their values do not add up)."""
        if x is None:
            return None
        return self._per_bin(x, mean=True)[:, self.kept]

    @property
    def periods_changed(self) -> bool:
        return len(self.labels) != len(self.which) or bool((self.which != np.arange(len(self.which))).any())

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
        used = self.real & (self.which >= 0)
        out = np.zeros((n, x.shape[1]))
        np.add.at(out, self.which[used], np.nan_to_num(x[used]))
        if mean:
            counts = np.bincount(self.which[used], minlength=n)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(counts[:, None] > 0, out / np.maximum(counts, 1)[:, None], np.nan)
        return out

    def _rows(self, x: np.ndarray, total: bool) -> np.ndarray:
        if not len(self.folded):
            return x
        kept = [j for j in self.rows if j is not None]
        last = np.nansum(x[:, self.folded], axis=1, keepdims=True) if total else np.full((x.shape[0], 1), np.nan)
        return np.concatenate([x[:, kept], last], axis=1)


def _dates(periods):
    """The period labels as numpy datetime64[D] days, or None when they are not all dates in order."""
    import pandas as pd

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


def _step_days(dates) -> float:
    return float(np.median(np.diff(dates.asi8))) / 86_400e9 if len(dates) > 1 else 1.0


def bin_choices(periods) -> list[str]:
    """The bins a reader may choose for these labels: "auto", "none", and the calendar units longer
    than a period that give at least two bins (dates only: days by week, month, quarter or year;
    weeks by month, quarter or year; months by quarter or year)."""
    dates = _dates(periods)
    out = [AUTO, NONE]
    if dates is None or len(dates) < 2:
        return out
    step = _step_days(dates)
    for unit, days in BIN_UNITS:
        if days > step * 1.5 and 1 < len({_KEYS[unit](d) for d in dates}) < len(dates):
            out.append(unit)
    return out


def _by_unit(periods, dates, unit: str):
    keys = [_KEYS[unit](d) for d in dates]
    labels = list(dict.fromkeys(keys))
    index = {k: i for i, k in enumerate(labels)}
    which = np.array([index[k] for k in keys], np.int64)
    return which, labels, _ranges(periods, which), unit


def bins(periods, max_periods: int = MAX_PERIODS, unit: str = AUTO) -> tuple[np.ndarray, list, list, str]:
    """(bin of each period (T,) int, bin labels, raw range of each bin, unit name) for ``periods``.
    ``unit`` "auto": one bin per period when there are at most ``max_periods``, else the first
    calendar unit that gives at most ``max_periods`` bins (equal groups when the labels are not
    dates); "none": one bin per period; a unit of :func:`bin_choices`: by that unit."""
    periods = [str(p) for p in periods]
    t = len(periods)
    if unit == NONE or (unit == AUTO and t <= max_periods):
        return np.arange(t), periods, periods, "period"
    dates = _dates(periods)
    if unit != AUTO:
        if dates is None or unit not in _KEYS:
            raise ValueError(f"periods cannot be binned by {unit!r}: choose one of {bin_choices(periods)}")
        return _by_unit(periods, dates, unit)
    if dates is not None and t > 1:
        step = _step_days(dates)
        for name, days in BIN_UNITS:
            if days <= step * 1.5:
                continue  # a unit no longer than a period bins nothing
            found = _by_unit(periods, dates, name)
            if len(found[1]) <= max_periods:
                return found
    size = math.ceil(t / max_periods)
    which = np.arange(t) // size
    ranges = _ranges(periods, which)
    return which, ranges, ranges, f"{size} periods"


def auto_unit(periods, max_periods: int = MAX_PERIODS) -> str:
    """What "auto" bins these periods by: "period" (not binned), a unit, or "N periods"."""
    return bins(periods, max_periods)[3]


def _ranges(periods, which) -> list:
    out = []
    for b in range(int(which.max()) + 1 if len(which) else 0):
        members = np.flatnonzero(which == b)
        first, last = periods[members[0]], periods[members[-1]]
        out.append(first if first == last else f"{first} to {last}")
    return out


def plan(periods, features, importance, *, padding=None, max_periods: int = MAX_PERIODS,
         top: int = TOP_FEATURES, view: View | None = None) -> Plan:
    """The :class:`Plan` of a heatmap of ``periods`` x ``features`` whose features weigh
    ``importance`` (F,) (their total |attribution|: the order of the rows when some are folded),
    seen as ``view`` asks (default: "auto" over the whole history)."""
    view = view or View()
    periods = [str(p) for p in periods]
    t, f = len(periods), len(features)
    pad = np.zeros(t, bool) if padding is None else np.asarray(padding, bool)
    first, last = view.span(t)
    zoomed = (first, last) != (0, t - 1)
    inner, labels, ranges, unit = bins(periods[first:last + 1], max_periods, view.bin)
    which = np.full(t, -1, np.int64)
    which[first:last + 1] = inner
    notes, lines, own = [], [], Words(unit_of(periods))  # lines: the same said of a history's lines
    own = own.units if own.unit != GENERIC else "periods"
    if zoomed:
        notes.append(f"{periods[first]} to {periods[last]}, {last - first + 1} of {t} {own}")
        lines.append(notes[-1])
    if len(labels) < last - first + 1:
        shown = f"groups of {unit}" if unit.endswith("periods") else f"{unit}s"
        notes.append(f"{last - first + 1} {own} shown as {len(labels)} {shown}, each cell the sum of its {own}")
        lines.append(f"{last - first + 1} {own} shown as {len(labels)} {shown}, each point the mean of its {own}")
    rows, folded = list(range(f)), np.zeros(0, np.int64)
    if f > top:
        order = np.argsort(-np.nan_to_num(np.asarray(importance, np.float64)), kind="stable")
        rows, folded = order[:top - 1].tolist() + [None], order[top - 1:]
        notes.append(f"the other {len(folded)} of {f} features summed in the last row")
        lines.append(f"the {top - 1} of {f} features with the largest effects")
    padded = None
    if padding is not None:
        inside = (which >= 0) & ~pad
        padded = np.bincount(which[inside], minlength=len(labels)) == 0
    return Plan(which, labels, ranges, rows, folded, padded, "; ".join(notes), ~pad, "; ".join(lines))


def heatmap_plan(periods, features, *arrays, padding=None, view: View | None = None,
                 top: int = TOP_FEATURES) -> Plan:
    """:func:`plan` for a heatmap of ``arrays`` (T, F) each (one plan for heatmaps that are
    compared): the rows ordered by their total |attribution| together over the periods shown."""
    t = len(periods)
    first, last = (view or View()).span(t)
    importance = sum(np.nansum(np.abs(np.asarray(a, np.float64)[first:last + 1]), axis=0) for a in arrays)
    return plan(periods, features, importance, padding=padding, view=view, top=top)


class Folded(NamedTuple):
    """A ranking cut to its top: the rows shown (feature indices, None: the other features
    together, last), the features folded, and the shown rows' numbers (one array per input)."""

    rows: list
    folded: np.ndarray
    columns: tuple

    def names(self, labels) -> list:
        return [str(labels[j]) if j is not None else f"the other {len(self.folded)} features" for j in self.rows]


def fold_ranking(order_by, *columns, top: int | None = TOP_RANKING) -> Folded:
    """The rows of a ranking of ``len(order_by)`` features, largest ``|order_by|`` first: every one
    when there are at most ``top`` (or ``top`` is None), else the ``top - 1`` largest and one row,
    "the other K features", holding each column's sum over them (sizes and signed means add up)."""
    size = np.abs(np.nan_to_num(np.asarray(order_by, np.float64)))
    order = np.argsort(-size, kind="stable")
    arrays = [np.asarray(c, np.float64) for c in columns]
    if top is None or len(order) <= top:
        return Folded(order.tolist(), np.zeros(0, np.int64), tuple(a[order] for a in arrays))
    kept, folded = order[:top - 1], order[top - 1:]
    return Folded(kept.tolist() + [None], folded,
                  tuple(np.append(a[kept], np.nansum(a[folded])) for a in arrays))
