"""Long histories drawn readably: the heatmap's period plan (what is binned, zoomed and folded), a
colour range that one extreme cell cannot set, no cell gaps once cells are narrow, and the few
short x ticks of a history's small charts. The figures (``explain.plots.figures``) draw the plan
their caller made once (``heatmap_plan``), the heatmap and the history lines alike.

The plan (what a heatmap of a long history shows):

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
* :func:`heatmap_plan`: the plan of one or more heatmaps compared (their rows ordered together);
  :func:`compare_plan`: two customers' (each one's padding left out of the order).
* :func:`fold_ranking`: a ranking of many features cut to its top N, the rest summed in one bar.

Drawing them:

* :func:`robust_limit`: the colour limit of a large heatmap is the 99th percentile of |cell|
  when the largest cell is more than ``OUTLIER_RATIO`` times that (the figure's legend says so,
  and cells beyond show the scale's end colour), else the largest |cell|.
* :func:`history_ticks`: the x ticks of a history's small charts, few and short enough to stand side
  by side in a chart of a given width: calendar labels (dates, ``2025-01``, ``2025-Q1``,
  ``2025-W01``, ``2025``; read by ``explain.core.periods``' regexes) ticked at the starts of months
  (every 1, 2, 3, 6, 12, ... months) as "Jan", "Apr" (the year added where the ticks cross one, or
  the year alone), short spans at days ("Jan 5"), other labels every k periods (1, 2, 5, 10, ...; a
  bin's range by its first period). :func:`history_span`: the first and last period in words
  ("5 Jan 1970 to 28 Dec 1970"), the one line under the charts.

Numpy (pandas, lazily, to read dates).
"""

from __future__ import annotations

import functools
import math
import warnings
from datetime import date
from typing import NamedTuple

import numpy as np

from explain.core.periods import DATE_RE, GENERIC, MONTH_RE, QUARTER_RE, WEEK_RE, YEAR_RE, Words, unit_of

# ----------------------------------------------------------------------------- the plan

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

    def with_padding(self, padding) -> Plan:
        """The same bins and rows for a history padded at ``padding`` (T,) bool (None: nothing padded):
        its periods with data and its bins of padding only (what a compared customer's heatmap draws grey)."""
        if padding is None:
            return self._replace(padding=None, real=np.ones(len(self.which), bool))
        pad = np.asarray(padding, bool)
        inside = (self.which >= 0) & ~pad
        return self._replace(padding=np.bincount(self.which[inside], minlength=len(self.labels)) == 0, real=~pad)

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
    return list(_bin_choices(tuple(str(p) for p in periods)))


# bin_choices and bins read the labels as dates once per set of labels (kept: a 365-day history took 6 ms of every
# page run for the same answer), and give each caller its own copy
@functools.lru_cache(maxsize=32)
def _bin_choices(periods: tuple) -> tuple:
    dates = _dates(periods)
    out = [AUTO, NONE]
    if dates is None or len(dates) < 2:
        return tuple(out)
    step = _step_days(dates)
    for unit, days in BIN_UNITS:
        if days > step * 1.5 and 1 < len({_KEYS[unit](d) for d in dates}) < len(dates):
            out.append(unit)
    return tuple(out)


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
    which, labels, ranges, name = _bins(tuple(str(p) for p in periods), max_periods, unit)
    return which.copy(), list(labels), list(ranges), name


@functools.lru_cache(maxsize=64)
def _bins(periods: tuple, max_periods: int, unit: str) -> tuple[np.ndarray, list, list, str]:
    periods = list(periods)
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
    made = Plan(which, labels, ranges, rows, folded, None, "; ".join(notes), ~pad, "; ".join(lines))
    return made if padding is None else made.with_padding(pad)


def heatmap_plan(periods, features, *arrays, padding=None, view: View | None = None,
                 top: int = TOP_FEATURES) -> Plan:
    """:func:`plan` for a heatmap of ``arrays`` (T, F) each (one plan for heatmaps that are
    compared): the rows ordered by their total |attribution| together over the periods shown."""
    t = len(periods)
    first, last = (view or View()).span(t)
    importance = sum(np.nansum(np.abs(np.asarray(a, np.float64)[first:last + 1]), axis=0) for a in arrays)
    return plan(periods, features, importance, padding=padding, view=view, top=top)


def compare_plan(periods, features, first, second, *, padding=(None, None), view: View | None = None) -> Plan:
    """One plan for two customers' heatmaps of ``first`` and ``second`` (T, F) and their difference: the rows
    ordered by their total |attribution| together, each one's padded periods (``padding``: (T,) bool or None
    each) left out of the order; its padding where either has no data (``Plan.with_padding``: each one's)."""
    pads = [None if p is None else np.asarray(p, bool) for p in padding]
    arrays = [np.where(p[:, None], np.nan, np.asarray(a, np.float64)) if p is not None else np.asarray(a, np.float64)
              for a, p in zip((first, second), pads)]
    either = None if pads[0] is None and pads[1] is None else np.logical_or(*(
        p if p is not None else np.zeros(len(periods), bool) for p in pads))
    return heatmap_plan(periods, features, *arrays, padding=either, view=view)


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


# ----------------------------------------------------------------------------- colours and gaps

ROBUST_CELLS = 500        # heatmaps with at least this many cells get a robust colour range
ROBUST_QUANTILE = 99.0
OUTLIER_RATIO = 3.0
GAPLESS = 40              # periods shown from which cells are drawn without gaps


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
    return f"<br>colours end at<br>±{limit:.2g}: 99 % of<br>the cells are<br>within; the few<br>beyond: darkest"


# ----------------------------------------------------------------------------- a history's x ticks

TICKS_AT_MOST = 6      # ticks per small chart
TICK_CHAR_PX = 6.0     # the width of one character of a tick label (font size 10), a little more than Arial's
TICK_GAP_PX = 10       # the least space between one label's end and the next label's start
EDGE_PX = 12           # how far the last label may pass its chart's right edge (into the gap between charts)
LABEL_CHARS = 10       # a longer non-calendar label keeps its end ("..." before it); the hover keeps it whole
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
MONTH_STEPS = (1, 2, 3, 6, 12, 24, 60, 120)              # months between ticks, finest first
DAY_STEPS = (1, 2, 3, 7, 14, 28)                          # periods between ticks of a short span of dates
PERIOD_STEPS = (1, 2, 3, 4, 5, 6, 7, 10, 12, 13, 15, 20, 25, 26, 30, 50, 52, 60, 100, 200, 250, 500, 1000)


class Ticks(NamedTuple):
    """A history chart's x ticks: the periods ticked (indices) and their texts."""
    indices: list
    texts: list


def _calendar(labels: list[str]) -> tuple[str, list[date]] | None:
    """(kind, a date per label) when every label is one calendar kind, in increasing order: "day" (dates,
    daily or weekly), "month", "quarter", "week" (ISO weeks: their Thursday, which names the ISO year) or
    "year"; else None."""
    for kind, pattern, made in (
            ("day", DATE_RE, lambda m: date(int(m[1]), int(m[2]), int(m[3]))),
            ("month", MONTH_RE, lambda m: date(int(m[1]), int(m[2]), 1)),
            ("quarter", QUARTER_RE, lambda m: date(int(m[1]), 3 * int(m[2]) - 2, 1)),
            ("week", WEEK_RE, lambda m: date.fromisocalendar(int(m[1]), int(m[2]), 4)),
            ("year", YEAR_RE, lambda m: date(int(m[1]), 1, 1))):
        matches = [pattern.match(label) for label in labels]
        if labels and all(matches):
            try:
                dates = [made(m) for m in matches]
            except ValueError:  # 2025-02-30, week 53 of a year without one
                return None
            return (kind, dates) if all(a < b for a, b in zip(dates, dates[1:])) else None
    return None


def _fits(indices: list, texts: list, px: float) -> bool:
    """Labels starting at their ticks (``px`` per period) leave room between each other."""
    return all((b - a) * px >= len(t) * TICK_CHAR_PX + TICK_GAP_PX for a, b, t in zip(indices, indices[1:], texts))


def _trimmed(indices: list, texts: list, t: int, px: float) -> list:
    """The ticks without a last one whose label would run past its chart's right edge (and the gap beyond)."""
    if indices and (t - indices[-1]) * px + EDGE_PX < len(texts[-1]) * TICK_CHAR_PX:
        return indices[:-1]
    return indices


def _month_candidates(kind: str, dates: list[date]):
    """(indices, their texts) ticked at the starts of months, every ``step`` months, finest first."""
    months = [d.year * 12 + d.month - 1 for d in dates]
    starts = [i for i in range(len(dates)) if (i == 0 or months[i] != months[i - 1])
              and (kind != "day" or dates[i].day <= 7)]  # a daily history starting mid-month: not at its first day

    def texts(chosen: list) -> list:
        names = [f"Q{(dates[i].month - 1) // 3 + 1}" if kind == "quarter" else MONTHS[dates[i].month - 1]
                 for i in chosen]
        if len({dates[i].year for i in chosen}) > 1:  # the year on the first tick and where it changes
            names = [f"{name} {dates[i].year}" if k == 0 or dates[i].year != dates[chosen[k - 1]].year else name
                     for k, (i, name) in enumerate(zip(chosen, names))]
        return names

    for step in MONTH_STEPS if kind != "quarter" else MONTH_STEPS[2:]:
        chosen = [i for i in starts if months[i] % step == 0]
        yield chosen, (lambda c: [str(dates[i].year) for i in c]) if step >= 12 else texts


def _step_candidates(labels: list[str], steps, text):
    for step in steps:
        yield list(range(0, len(labels), step)), lambda c: [text(i) for i in c]


def _short(label: str) -> str:
    first = label.split(" to ")[0]  # a bin's range ("t1 to t7"): its first period
    return first if len(first) <= LABEL_CHARS else "\u2026" + first[-(LABEL_CHARS - 1):].lstrip()  # the end differs


def _day_text(d: date) -> str:
    return f"{MONTHS[d.month - 1]} {d.day}"


def history_span(periods) -> str:
    """The first and the last of ``periods`` in words: "5 Jan 1970 to 28 Dec 1970" (dates), "Jan 2024 to
    Dec 2025" (months), quarters, ISO weeks and years as written, else the labels ("t1 to t52")."""
    labels = [str(p) for p in periods]
    if not labels:
        return ""
    kind, dates = _calendar(labels) or (None, None)
    if kind == "day":
        ends = [f"{d.day} {MONTHS[d.month - 1]} {d.year}" for d in (dates[0], dates[-1])]
    elif kind == "month":
        ends = [f"{MONTHS[d.month - 1]} {d.year}" for d in (dates[0], dates[-1])]
    else:
        ends = [labels[0].split(" to ")[0], labels[-1].split(" to ")[-1]]
    return ends[0] if len(labels) == 1 else f"{ends[0]} to {ends[1]}"


def history_ticks(periods, chart_px: float) -> Ticks:
    """The ticks of a history chart ``chart_px`` wide whose x axis holds ``periods`` (its labels, one
    category each): at most ``TICKS_AT_MOST``, each label starting at its tick and ending before the
    next one starts (``TICK_CHAR_PX`` a character), the finest calendar step that fits (see the
    module docstring); at least the first period."""
    labels = [str(p) for p in periods]
    t = len(labels)
    if not t:
        return Ticks([], [])
    px = chart_px / t
    found = _calendar(labels)
    kind, dates = found if found else (None, None)
    if kind == "year":
        candidates = _step_candidates(labels, (1, 2, 5, 10, 20, 50, 100), lambda i: labels[i])
    elif kind is not None:
        months = list(_month_candidates(kind, dates))
        days = _step_candidates(labels, DAY_STEPS, lambda i: _day_text(dates[i])) if kind == "day" else []
        candidates = [*months, *days]  # months first: a short span of dates falls back to days
    else:
        candidates = _step_candidates(labels, (*PERIOD_STEPS, -(-t // 2)), lambda i: _short(labels[i]))
    best = None
    for indices, texts_of in candidates:
        indices = _trimmed(indices, texts_of(indices), t, px)
        texts = texts_of(indices)
        if indices and len(indices) <= TICKS_AT_MOST and _fits(indices, texts, px):
            if len(indices) >= 2:
                best = (indices, texts)
                break
            best = best or (indices, texts)
    if best is None:
        best = ([0], [_day_text(dates[0]) if kind == "day" else _short(labels[0])])
    return Ticks(list(best[0]), list(best[1]))
