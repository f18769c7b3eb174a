"""A history's period in words: its unit (day, week, month, quarter or year), read from the period
labels (or given by ``bundle.json``'s ``period_unit``), and the "recent" window that fits it.

``unit_of(["2025-01-06", "2025-01-13", ...])`` is ``"week"``; ``Words("week").recent`` is 4 (the
last 4 weeks), ``Words("day").recent`` 30 and ``Words("month").recent`` 3. Labels that are none of
these (``t1``, ``p01``) are ``"period"``.

The regexes that read a calendar label (``MONTH_RE``, ``QUARTER_RE``, ``WEEK_RE``, ``YEAR_RE``,
``DATE_RE``) live here once: ``explain.plots.periods`` reads the same labels to bin a long history
and to tick its charts (their groups: the year, then the month, quarter or week, or the day).

Standard library only.
"""

from __future__ import annotations

import re
from datetime import date
from statistics import median
from typing import NamedTuple, Sequence

UNITS = ("day", "week", "month", "quarter", "year")
GENERIC = "period"
RECENT = {"day": 30, "week": 4, "month": 3, "quarter": 2, "year": 1, GENERIC: 3}
ADJECTIVES = {"day": "daily", "week": "weekly", "month": "monthly", "quarter": "quarterly", "year": "yearly",
              GENERIC: "temporal"}

MONTH_RE = re.compile(r"^(\d{4})[-/](0[1-9]|1[0-2])$")                 # 2025-01, 2025/01
QUARTER_RE = re.compile(r"^(\d{4})[-/ ]?Q([1-4])$", re.IGNORECASE)     # 2025-Q1, 2025Q1
WEEK_RE = re.compile(r"^(\d{4})-?W(0[1-9]|[1-4]\d|5[0-3])$")            # 2025-W01 (ISO)
YEAR_RE = re.compile(r"^((?:19|20|21)\d{2})$")                          # 2025
DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")                       # 2025-01-06 (a time after it is ignored)
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
    for unit, pattern in (("month", MONTH_RE), ("quarter", QUARTER_RE), ("week", WEEK_RE), ("year", YEAR_RE)):
        if all(pattern.match(label) for label in labels):
            return unit
    if len(labels) > 1 and all(DATE_RE.match(label) for label in labels):
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
