"""Long histories drawn readably: a colour range that one extreme cell cannot set, and no cell
gaps once cells are narrow. The binning, zoom and folding of periods and features is computed in
``explain.core.periods`` (re-exported here: ``plan``, ``bins``, ``Plan``, ``View``); the figures
draw what it gives.

* :func:`robust_limit`: the colour limit of a large heatmap is the 99th percentile of |cell|
  when the largest cell is more than ``OUTLIER_RATIO`` times that (the figure's legend says so,
  and cells beyond show the scale's end colour), else the largest |cell|.
* :func:`history_ticks`: the x ticks of a history's small charts, few and short enough to stand side
  by side in a chart of a given width: calendar labels (dates, ``2025-01``, ``2025-Q1``,
  ``2025-W01``, ``2025``) ticked at the starts of months (every 1, 2, 3, 6, 12, ... months) as
  "Jan", "Apr" (the year added where the ticks cross one, or the year alone), short spans at days
  ("Jan 5"), other labels every k periods (1, 2, 5, 10, ...; a bin's range by its first period).
  :func:`history_span`: the first and last period in words ("5 Jan 1970 to 28 Dec 1970"), the one
  line under the charts.
"""

from __future__ import annotations

import re
from datetime import date
from typing import NamedTuple

import numpy as np

from explain.core.periods import (  # noqa: F401 (re-exported: what the figures and their callers use)
    AUTO,
    MAX_PERIODS,
    NONE,
    TOP_FEATURES,
    TOP_RANKING,
    Folded,
    Plan,
    View,
    bin_choices,
    bins,
    fold_ranking,
    heatmap_plan,
    plan,
)

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
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")                        # 2025-01-06 (a time after it ignored)
_MONTH = re.compile(r"^(\d{4})[-/](0[1-9]|1[0-2])$")                 # 2025-01
_QUARTER = re.compile(r"^(\d{4})[-/ ]?Q([1-4])$", re.IGNORECASE)     # 2025-Q1
_WEEK = re.compile(r"^(\d{4})-?W(0[1-9]|[1-4]\d|5[0-3])$")          # 2025-W01 (ISO)
_YEAR = re.compile(r"^((?:19|20|21)\d{2})$")                          # 2025


class Ticks(NamedTuple):
    """A history chart's x ticks: the periods ticked (indices) and their texts."""
    indices: list
    texts: list


def _calendar(labels: list[str]) -> tuple[str, list[date]] | None:
    """(kind, a date per label) when every label is one calendar kind, in increasing order: "day" (dates,
    daily or weekly), "month", "quarter", "week" (ISO weeks: their Thursday, which names the ISO year) or
    "year"; else None."""
    for kind, pattern, made in (
            ("day", _DAY, lambda m: date(int(m[1]), int(m[2]), int(m[3]))),
            ("month", _MONTH, lambda m: date(int(m[1]), int(m[2]), 1)),
            ("quarter", _QUARTER, lambda m: date(int(m[1]), 3 * int(m[2]) - 2, 1)),
            ("week", _WEEK, lambda m: date.fromisocalendar(int(m[1]), int(m[2]), 4)),
            ("year", _YEAR, lambda m: date(int(m[1]), 1, 1))):
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
