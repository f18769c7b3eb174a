"""How long histories and long rankings are shown, chosen by the reader: one bin/zoom control for
every long heatmap (Customer, Compare, What-if, Cohort) and one "Show all N features" toggle for
every ranking. The numbers are binned and folded by ``explain.plots.periods``; the figures draw them.

Session state, per control ``key``: ``_view_KEY_bin`` ("auto", "none", "week", ...),
``_view_KEY_range`` ((first label, last label)), ``_all_KEY`` (bool).
"""

from __future__ import annotations

import streamlit as st

from explain.core.periods import GENERIC, unit_of
from explain.plots import periods as P

BIN_WORDS = {P.AUTO: "auto", "week": "weeks", "month": "months", "quarter": "quarters", "year": "years"}
BIN_HELP = ("A long history is drawn in bins: each cell is the sum of the attributions of its periods (totals "
            "are unchanged); hover a cell for the periods it holds. The period's own unit (days, ...) draws one "
            "column each.")
ZOOM_HELP = "Draw only these periods (the bins and the colour range follow them)."


def _keep(widget: str, key: str) -> None:
    if st.session_state.get(widget) is not None:  # a segmented control can be unselected
        st.session_state[key] = st.session_state[widget]


def view_ui(periods, key: str) -> P.View | None:
    """The bin and the zoom of a history's heatmaps, for histories longer than ``P.MAX_PERIODS``
    periods (None: shorter, drawn as they are). Offers only the bins that make sense for the labels
    (``P.bin_choices``); "auto" says what it bins by."""
    periods = [str(p) for p in periods]
    if len(periods) <= P.MAX_PERIODS:
        return None
    ss = st.session_state
    choices = P.bin_choices(periods)
    bin_key, range_key = f"_view_{key}_bin", f"_view_{key}_range"
    if ss.get(bin_key) not in choices:
        ss[bin_key] = P.AUTO
    chosen = ss.get(range_key)
    if isinstance(chosen, (tuple, list)) and len(chosen) == 2 and all(p in periods for p in chosen):
        ss[range_key] = tuple(chosen)
    else:
        ss[range_key] = (periods[0], periods[-1])
    ss[f"w{bin_key}"] = ss[bin_key]
    first, last = (periods.index(p) for p in ss[range_key])
    auto = P.auto_unit(periods[first:last + 1])
    said = "" if auto == "period" else f" ({auto if auto.endswith('periods') else auto + 's'})"
    unit = unit_of(periods)  # "every period" said in the labels' own unit: "days"
    words = {**BIN_WORDS, P.AUTO: f"auto{said}", P.NONE: "every period" if unit == GENERIC else f"{unit}s"}
    left, right = st.columns([3, 2])
    with left:
        st.segmented_control("Periods shown as", choices, format_func=lambda c: words.get(c, c), key=f"w{bin_key}",
                             help=BIN_HELP, on_change=_keep, args=(f"w{bin_key}", bin_key))
    with right:
        # the value given (not set through the session state): what makes the slider a range
        st.select_slider("Zoom into the periods", periods, value=ss[range_key], key=f"w{range_key}", help=ZOOM_HELP,
                         on_change=_keep, args=(f"w{range_key}", range_key))
    first, last = sorted(periods.index(p) for p in ss[range_key])
    return P.View(ss[bin_key], first, last)


def top_of(n: int, key: str, top: int = P.TOP_RANKING) -> int | None:
    """What :func:`top_ui` returns for ``key``, read before its toggle is drawn (a page that builds
    the figure before the place of the toggle)."""
    if n <= top:
        return None
    return None if st.session_state.get(f"_all_{key}", False) else top


def top_ui(n: int, key: str, what: str = "features", top: int = P.TOP_RANKING) -> int | None:
    """The bars a ranking of ``n`` features shows: ``top`` (the others folded into one bar) unless the
    reader asks for all with the toggle "Show all N features"; None (every one) when there are at most ``top``."""
    if n <= top:
        return None
    ss = st.session_state
    state = f"_all_{key}"
    ss.setdefault(state, False)
    ss[f"w{state}"] = ss[state]
    st.toggle(f"Show all {n} {what}", key=f"w{state}", on_change=_keep, args=(f"w{state}", state),
              help=f"Off: the {top - 1} largest and one bar for the other {n - top + 1} together.")
    return top_of(n, key, top)
