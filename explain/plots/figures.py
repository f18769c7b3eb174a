"""Plotly figure builders: arrays + names -> ``go.Figure``. No streamlit.

The Customer page's three figures also come as plain figure dicts (``temporal_panel_spec``,
``static_bars_spec``, ``history_spec``: what ``fig.to_dict()`` holds, without the template and
with numpy arrays, built without Plotly's validation); ``temporal_panel``, ``static_bars`` and
``history_figure`` are ``go.Figure`` of them. Subplot grids come from ``make_subplots`` once per
set of arguments (``subplots_layout``); the go builders' figures carry its grid
(``subplots_figure``: ``add_trace(row=, col=)``, ``update_xaxes(row=, col=)`` work on them).

Colour is honest: attributions use one diverging scale, reversed RdBu, centred on zero with
symmetric limits (red = raises the prediction, blue = lowers it, white = no effect), and
figures that are compared share the same limits. Sizes of effect (|attribution|, never
negative) use a sequential scale starting at zero.

Every name and id reaching a figure is untrusted text: Plotly renders a subset of HTML in
ticks, titles and hover labels, so each one goes through :func:`esc` first.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explain.core.text import unit_after
from explain.plots import periods as periods_display
from explain.plots.periods import Plan

# The style every figure shares (colours, escaping, number format, layout) lives in
# explain.plots.style; the Diagnostics page's figures in explain.plots.diagnostics.
from explain.plots.style import (  # noqa: F401 (RED, BLUE, ... re-exported: the figures' colours)
    ATTRIBUTION_TITLE,
    BLUE,
    DIVERGING,
    GREY,
    MAGNITUDE_TITLE,
    RED,
    SEQUENTIAL,
    esc,
    esc_all,
    fmt,
    merge,
    symmetric_limit,
)
from explain.plots.style import layout as _layout
from explain.plots.style import signed_colours as _signed_colours
from explain.plots.style import styled as _styled
from explain.plots.style import units_for as _units_for

NO_DATA = "#d4d4d4"  # padded periods of a history: drawn grey, "no data"
NO_DATA_TEXT = "no data (padding)"


# ----------------------------------------------------------------------------- customer


def _colorscale(scale):
    """A colour scale as a figure dict holds it: a named one as Plotly expands it
    ([[0.0, "rgb(...)"], ...], made once per name)."""
    if not isinstance(scale, str):
        return scale
    return [list(step) for step in _named_scale(scale)]


@functools.lru_cache(maxsize=16)
def _named_scale(name: str) -> tuple:
    return tuple(tuple(step) for step in go.Heatmap(colorscale=name).to_plotly_json()["colorscale"])


class _Grid(NamedTuple):
    """What ``make_subplots`` makes of one set of arguments: its layout dict (no template) and the
    grid it keeps on the figure (``_grid_ref``, ``_grid_str``: what ``add_trace(row=, col=)``,
    ``update_xaxes(row=, col=)``, ``get_subplot`` and ``print_grid`` read; Plotly only reads them)."""
    layout: dict
    ref: list
    text: str


@functools.lru_cache(maxsize=128)
def _grid(rows: int, cols: int, options: tuple) -> _Grid:
    kwargs = {k: list(v) if isinstance(v, tuple) else v for k, v in options}
    fig = make_subplots(rows=rows, cols=cols, **kwargs)
    layout = fig.to_dict()["layout"]
    layout.pop("template", None)
    return _Grid(layout, fig._grid_ref, fig._grid_str)


def _grid_of(rows: int, cols: int, options: dict) -> _Grid:
    """The cached :class:`_Grid` of ``make_subplots(rows, cols, **options)`` (lists given as tuples
    or lists). Subplot titles are cached by their places, not their texts (a placeholder per title;
    :func:`subplots_layout` puts the texts in): a history whose charts are other features than the
    last one's reuses its grid."""
    titles = options.get("subplot_titles")
    if titles:  # one placeholder per title: an empty title stays empty (make_subplots draws no annotation)
        options = {**options, "subplot_titles": tuple(f"\x00{k}" if t else "" for k, t in enumerate(titles))}
    return _grid(rows, cols, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items())))


def _copy(value):
    """A deep copy of a figure dict's JSON-like part (dicts, lists, scalars)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def subplots_layout(rows: int, cols: int, **options) -> dict:
    """``make_subplots(rows, cols, **options)``'s layout dict (domains, anchors, shared axes,
    subplot titles as annotations; no template): made by Plotly once per set of arguments
    (lists given as tuples or lists), a copy each call, with these subplot titles."""
    layout, titles = _copy(_grid_of(rows, cols, options).layout), options.get("subplot_titles")
    for note in layout.get("annotations", []) if titles else ():
        if note.get("text", "").startswith("\x00"):
            note["text"] = titles[int(note["text"][1:])]
    return layout


def subplots_figure(spec: dict, rows: int, cols: int, **options) -> go.Figure:
    """``go.Figure(spec)`` for a figure dict laid out by ``subplots_layout(rows, cols, **options)``,
    carrying ``make_subplots``' subplot grid as a figure made by it does (``add_trace(row=, col=)``,
    ``update_xaxes(row=, col=)``, ``get_subplot`` work); the grid is the cached one, shared as
    ``go.Figure(fig)`` shares it."""
    grid = _grid_of(rows, cols, options)
    return go.Figure({**spec, "_grid_ref": grid.ref, "_grid_str": grid.text})


def _cell(row: int, col: int, cols: int) -> int:
    return (row - 1) * cols + col


def _axis(letter: str, row: int, col: int, cols: int) -> str:
    """The layout key of a subplot's axis: "xaxis", "xaxis2", ..."""
    n = _cell(row, col, cols)
    return f"{letter}axis" if n == 1 else f"{letter}axis{n}"


def _placed(trace: dict, row: int, col: int, cols: int) -> dict:
    """``trace`` drawn in the subplot (row, col), as ``add_trace(row=, col=)`` places it."""
    n = _cell(row, col, cols)
    trace["xaxis"], trace["yaxis"] = ("x", "y") if n == 1 else (f"x{n}", f"y{n}")
    return trace


def _spec(data: list, layout: dict) -> dict:
    return {"data": data, "layout": layout}


def _folded_static(labels, attributions, values, base, units, top):
    """The static bars' inputs cut to the ``top`` largest |attribution| (``explain.plots.periods.fold_ranking``):
    the folded row's value None."""
    cut = periods_display.fold_ranking(attributions, attributions, base, top=top)
    if not len(cut.folded):
        return labels, attributions, values, base, units
    kept = [j for j in cut.rows if j is not None]
    return (cut.names(labels), cut.columns[0], [values[j] for j in kept] + [None],
            np.append(base[kept], np.nan), [units[j] for j in kept] + [None])


def static_bars_spec(labels, attributions, values, *, units=None, baseline=None, title=None,
                     x_title: str = "Effect on the prediction", top: int | None = None) -> dict:
    """:func:`static_bars` as a plain figure dict (no template)."""
    attributions = np.asarray(attributions, np.float64)
    values = [v if isinstance(v, str) else float(v) for v in values]  # a category may be text
    base = np.full(len(values), np.nan) if baseline is None else np.asarray(baseline, np.float64)
    units = _units_for(labels, units)
    labels, attributions, values, base, units = _folded_static(labels, attributions, values, base, units, top)
    order = np.argsort(attributions, kind="stable")  # ascending: plotly draws the first at the bottom
    ticks, hover = [], []
    for j in order:
        name = esc(labels[j])
        if values[j] is None:  # the other features, together
            ticks.append(name)
            hover.append(f"<b>{name}</b> (together)<br>attribution: {attributions[j]:+.4g}")
            continue
        shown = esc(values[j]) if isinstance(values[j], str) else fmt(values[j], units[j])
        tick = esc(values[j]) if isinstance(values[j], str) else fmt(values[j], unit_after(labels[j], units[j]))
        ticks.append(f"{name} = {tick}")
        hover.append(f"<b>{name}</b><br>customer: {shown}"
                     f"<br>baseline: {fmt(base[j], units[j])}<br>attribution: {attributions[j]:+.4g}")
    bars = dict(type="bar", x=attributions[order], y=ticks, orientation="h",
                marker=dict(color=_signed_colours(attributions[order])),
                text=[f"{a:+.3f}" for a in attributions[order]], textposition="outside", cliponaxis=False,
                customdata=hover, hovertemplate="%{customdata}<extra></extra>")
    m = symmetric_limit(attributions)
    layout = dict(xaxis=dict(title=dict(text=x_title), range=[-1.5 * m, 1.5 * m], zeroline=True,
                             zerolinecolor="#444", gridcolor="#eee"), yaxis=dict(automargin=True))
    layout = _styled(layout, title, height=max(260, 34 * len(ticks) + 90), showlegend=False)
    layout["margin"]["r"] = 30
    return _spec([bars], layout)


def static_bars(labels, attributions, values, *, units=None, baseline=None, title=None,
                x_title: str = "Effect on the prediction", top: int | None = None) -> go.Figure:
    """Signed horizontal bars sorted by value: the largest raise at the top, the largest cut at the bottom.

    labels: (S,) display names; attributions, values, baseline: (S,); units: (S,) or None.
    The tick of each bar shows the customer's raw value; hover adds the baseline value.
    ``top``: more features than that are cut to the ``top - 1`` largest |attribution| and one bar,
    "the other K features", their sum (None: every feature).
    """
    return go.Figure(static_bars_spec(labels, attributions, values, units=units, baseline=baseline, title=title,
                                      x_title=x_title, top=top))


def _cell_hover(periods, features, *, values, baseline, units) -> dict:
    """The hover of a heatmap's cells, built in the browser: ``customdata`` (F, T, k) float32 of the value and
    the baseline value (those given; NaN where there is none, and at padded cells, which have no hover) and one
    ``hovertemplate``: the period (a bin's label: the axis title says what a bin is), the feature, the value,
    the baseline and the attribution (``%{z}``). Each row's unit is said after its numbers; rows of different
    units carry their unit as the cells' ``text`` (the unit alone: every number and period comes from the
    values and the axes)."""
    columns = [x for x in (values, baseline) if x is not None]
    shown = [u if u and u not in ("0/1",) else "" for u in _units_for(features, units)]
    one = len(set(shown)) <= 1
    unit = (" " + esc(shown[0]) if shown and shown[0] else "") if one else " %{text}"
    lines = ["period: %{x}", "feature: <b>%{y}</b>"]
    for k, name in enumerate(n for n, x in (("value", values), ("baseline", baseline)) if x is not None):
        lines.append(f"{name}: %{{customdata[{k}]:.4g}}{unit}")
    lines.append("attribution: %{z:+.4g}")
    out = dict(hovertemplate="<br>".join(lines) + "<extra></extra>")
    if columns:
        out["customdata"] = np.stack([np.asarray(x, np.float32).T for x in columns], axis=-1)
    if not one:
        out["text"] = [[esc(u)] * len(periods) for u in shown]
    return out


def heatmap_dict(periods, features, attributions, *, values=None, baseline=None, units=None,
                 zmax: float | None = None, colorbar_title: str = ATTRIBUTION_TITLE,
                 colorscale: str = DIVERGING, zmin: float | None = None, colorbar: dict | None = None,
                 padding=None) -> dict:
    """:func:`heatmap_trace` as a plain trace dict."""
    attributions = np.asarray(attributions, np.float64)
    padding = None if padding is None or not np.any(padding) else np.asarray(padding, bool)
    if zmax is None:
        m, clipped = periods_display.robust_limit(attributions)
        colorbar_title += periods_display.clipped_note(m) if clipped else ""
    else:
        m = float(zmax)
    low = -m if zmin is None else float(zmin)
    bar = dict(title=dict(text=colorbar_title, side="top"), thickness=14, len=0.9)
    bar.update(colorbar or {})
    scale = dict(zmin=low, zmax=m, zmid=0.0) if colorscale == DIVERGING else dict(zmin=low, zmax=m)
    z = attributions.T.copy() if padding is None else np.where(padding[None, :], np.nan, attributions.T)
    return dict(
        type="heatmap", z=z, x=esc_all(periods), y=esc_all(features), colorscale=_colorscale(colorscale), **scale,
        colorbar=bar, xgap=_gap(periods), ygap=1, hoverongaps=False,
        **_cell_hover(periods, features, values=values, baseline=baseline, units=units),
    )


def _gap(periods) -> int:
    """Pixels between cells along the periods: none once cells are narrow (a gap would take half of each)."""
    return 0 if len(periods) > periods_display.GAPLESS else 1


def heatmap_trace(periods, features, attributions, *, values=None, baseline=None, units=None,
                  zmax: float | None = None, colorbar_title: str = ATTRIBUTION_TITLE,
                  colorscale: str = DIVERGING, zmin: float | None = None, colorbar: dict | None = None,
                  padding=None) -> go.Heatmap:
    """A period x feature heatmap trace (periods on x, features on y) of ``attributions`` (T, F).

    Diverging (the default): centred on zero, limits [-zmax, zmax] (zmax defaults to the
    largest |attribution|, or to a robust limit on a large heatmap with an extreme cell, said in
    the colour bar: ``explain.plots.periods.robust_limit``; pass one zmax to every figure that is
    compared). ``padding`` (T,) bool: padded periods are left empty here (``no_data_trace`` draws
    them grey). The hover is built in the browser from the cells' numbers (``customdata``, ``%{z}``) and the
    axes: a binned period is said by its bin's label ("2025-W02"; the axis title says what the bins are).
    """
    return go.Heatmap(heatmap_dict(periods, features, attributions, values=values, baseline=baseline, units=units,
                                   zmax=zmax, colorbar_title=colorbar_title, colorscale=colorscale, zmin=zmin,
                                   colorbar=colorbar, padding=padding))


def no_data_dict(periods, features, padding) -> dict | None:
    """:func:`no_data_trace` as a plain trace dict; None when nothing is padded."""
    if padding is None or not np.any(padding):
        return None
    pad = np.asarray(padding, bool)
    z = np.where(np.broadcast_to(pad[None, :], (len(features), len(pad))), 1.0, np.nan)
    return dict(type="heatmap", z=z, x=esc_all(periods), y=esc_all(features), zmin=0.0, zmax=1.0, showscale=False,
                colorscale=[[0.0, NO_DATA], [1.0, NO_DATA]], name="no data", xgap=_gap(periods), ygap=1,
                hovertemplate=f"period: %{{x}}<br>%{{y}}<br>{NO_DATA_TEXT}<extra></extra>", hoverongaps=False)


def no_data_trace(periods, features, padding) -> go.Heatmap | None:
    """Grey cells at the padded periods (T,) bool of a history, drawn under its heatmap; None
    when nothing is padded."""
    grey = no_data_dict(periods, features, padding)
    return None if grey is None else go.Heatmap(grey)


def _plan_of(plan, periods, features, *arrays, padding=None) -> Plan:
    """The finished ``plan`` the caller made (``explain.plots.periods.heatmap_plan`` with the reader's ``View``:
    what the dashboard and ``explain.figures`` pass), else the default plan of ``arrays`` (every period up to
    ``MAX_PERIODS``, then binned; the top features): a figure drawn from bare arrays in a notebook."""
    return plan if plan is not None else periods_display.heatmap_plan(periods, features, *arrays, padding=padding)


def _period_title(plan) -> str:
    """The x-axis title: "period", or what was zoomed, binned and folded, one line each."""
    return "period" if not plan.note else "<br>".join(esc(line) for line in plan.note.split("; "))


def _units_shown(plan, features, units) -> list:
    units = _units_for(features, units)
    return [units[j] if j is not None else None for j in plan.rows]


def temporal_heatmap(periods, features, attributions, *, values=None, baseline=None, units=None,
                     zmax: float | None = None, title: str | None = None,
                     colorbar_title: str = ATTRIBUTION_TITLE, height: int | None = None, padding=None,
                     plan: Plan | None = None) -> go.Figure:
    """One heatmap of ``attributions`` (T, F): periods on x, features on y (first at the top);
    padded periods grey, "no data". A long history is drawn binned and many features folded as
    ``plan`` says (``explain.plots.periods.heatmap_plan`` of these attributions and their padding;
    the axis title says how). Without a plan: the default one of ``padding`` (T,) bool."""
    plan = _plan_of(plan, periods, features, attributions, padding=padding)
    return _heatmap_figure(plan, features, plan.sums(attributions), values=plan.means(values),
                           baseline=plan.means(baseline), units=_units_shown(plan, features, units), zmax=zmax,
                           title=title, colorbar_title=colorbar_title, height=height)


def _heatmap_figure(plan, features, shown, *, values=None, baseline=None, units=None, zmax=None, title=None,
                    colorbar_title: str = ATTRIBUTION_TITLE, height: int | None = None, **trace) -> go.Figure:
    """The heatmap of ``shown`` (T', F'), the arrays ``plan`` made, with its grey padding."""
    rows = plan.row_names(features)
    grey = no_data_trace(plan.labels, rows, plan.padding)
    fig = go.Figure([grey] if grey is not None else [])
    fig.add_trace(heatmap_trace(plan.labels, rows, shown, values=values, baseline=baseline, units=units, zmax=zmax,
                                colorbar_title=colorbar_title, padding=plan.padding,
                                **trace))
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(title=_period_title(plan), type="category", tickangle=-90)
    return _layout(fig, title, height=height or max(280, 40 * len(rows) + 130))


def magnitude_heatmap(periods, features, magnitudes, *, title: str | None = None,
                      colorbar_title: str = MAGNITUDE_TITLE, plan: Plan | None = None) -> go.Figure:
    """Sequential heatmap of non-negative sizes (T, F), from 0 to the largest (a robust limit on a
    large heatmap with an extreme cell); long histories binned and many features folded as ``plan``
    says (``heatmap_plan`` of these sizes; without one: the default plan)."""
    plan = _plan_of(plan, periods, features, magnitudes)
    shown = plan.sums(magnitudes)
    m, clipped = periods_display.robust_limit(shown)
    return _heatmap_figure(plan, features, shown, zmax=m, zmin=0.0, colorscale=SEQUENTIAL, title=title,
                           colorbar_title=colorbar_title + (periods_display.clipped_note(m) if clipped else ""))


PANEL_GRID = dict(rows=2, cols=2, column_widths=(0.8, 0.2), row_heights=(0.24, 0.76), shared_xaxes=True,
                  shared_yaxes=True, horizontal_spacing=0.015, vertical_spacing=0.03,
                  subplot_titles=("total per period", "", "", "total per feature"))


def temporal_panel_spec(periods, features, attributions, *, values=None, baseline=None, units=None,
                        zmax: float | None = None, title: str | None = None, padding=None,
                        plan: Plan | None = None) -> dict:
    """:func:`temporal_panel` as a plain figure dict (no template)."""
    plan = _plan_of(plan, periods, features, attributions, padding=padding)
    attributions, values, baseline = plan.sums(attributions), plan.means(values), plan.means(baseline)
    units, periods, padding = _units_shown(plan, features, units), plan.labels, plan.padding
    features = plan.row_names(features)
    px, fy = esc_all(periods), esc_all(features)
    layout = subplots_layout(**PANEL_GRID)
    data = []
    grey = no_data_dict(periods, features, padding)
    if grey is not None:
        data.append(_placed(grey, 2, 1, 2))
    data.append(_placed(heatmap_dict(periods, features, attributions, values=values, baseline=baseline, units=units,
                                     zmax=zmax, colorbar=dict(x=1.02, y=0.38, len=0.76, yanchor="middle"),
                                     padding=padding), 2, 1, 2))
    per_period = attributions.sum(axis=1)
    per_feature = attributions.sum(axis=0)
    data.append(_placed(dict(type="bar", x=px, y=per_period, marker=dict(color=_signed_colours(per_period)),
                             hovertemplate="period %{x}<br>total: %{y:+.4g}<extra></extra>"), 1, 1, 2))
    data.append(_placed(dict(type="bar", x=per_feature, y=fy, orientation="h",
                             marker=dict(color=_signed_colours(per_feature)),
                             hovertemplate="%{y}<br>total: %{x:+.4g}<extra></extra>"), 2, 2, 2))
    for col in (1, 2):
        merge(layout[_axis("y", 2, col, 2)], dict(autorange="reversed", automargin=True))
    # upright periods: no overlap on a phone
    merge(layout[_axis("x", 2, 1, 2)], dict(type="category", title=dict(text=_period_title(plan)), tickangle=-90))
    merge(layout[_axis("x", 1, 1, 2)], dict(type="category"))
    merge(layout[_axis("y", 1, 1, 2)], dict(zeroline=True, zerolinecolor="#444", gridcolor="#eee"))
    merge(layout[_axis("x", 2, 2, 2)], dict(zeroline=True, zerolinecolor="#444", gridcolor="#eee"))
    for note in layout.get("annotations", []):
        merge(note, dict(font=dict(size=12, color="#555")))
    # rows a little lower once there are many: the control above it and the 12 rows fit a 1280x720 screen
    per_row, other = (44, 230) if len(features) <= 8 else (32, 220)
    return _spec(data, _styled(layout, title, height=max(380, per_row * len(features) + other), showlegend=False))


def temporal_panel(periods, features, attributions, *, values=None, baseline=None, units=None,
                   zmax: float | None = None, title: str | None = None, padding=None,
                   plan: Plan | None = None) -> go.Figure:
    """The heatmap with its totals beside it: per period above, per feature on the right.

    The totals are sums of the signed attributions (same colours: red raises, blue lowers).
    Padded periods are grey, "no data". ``plan``: the finished plan of this heatmap
    (``explain.plots.periods.heatmap_plan`` of these attributions, their padding and the reader's
    ``View``), made once by the caller: the history beside it draws the same one. Without a plan:
    the default one of ``padding`` (T,) bool (binned when longer than 60 periods).
    """
    return subplots_figure(temporal_panel_spec(periods, features, attributions, values=values, baseline=baseline,
                                               units=units, zmax=zmax, title=title, padding=padding, plan=plan),
                           **PANEL_GRID)


HISTORY_PX = 360   # the narrowest history figure planned for: half of a 1280 px page's main column, or a phone
TITLE_CHARS = 44   # a title line that fits HISTORY_PX at the title's font (size 15); a longer title is wrapped
LINE_PX = 20       # a line of the title
TITLE_TOP_PX = 8   # above the title's first line
SPAN_PX = 24       # the line under the charts that says the history's first and last period
NAME_CHAR_PX = 6.8  # a character of a chart's name (font size 12): a longer name is wrapped
NAME_LINE_PX = 15  # one more line of a chart's name


def _history_grid(labels, units, columns: int, f: int) -> dict:
    """The subplot grid of :func:`history_spec` (``subplots_layout``'s arguments): one chart per
    feature, titled by its name (and unit), ``columns`` a row at most."""
    units = _units_for(labels, units)
    cols = min(columns, f)
    rows = int(math.ceil(f / cols))
    names = tuple(f"{esc(labels[j])}" + (f" ({esc(units[j])})" if units[j] and units[j] not in str(labels[j]) else "")
                  for j in range(f))
    return dict(rows=rows, cols=cols, subplot_titles=names, horizontal_spacing=0.08,
                vertical_spacing=min(0.12, 0.3 / rows) if rows > 1 else 0.1)


def wrapped(text: str, width: int = TITLE_CHARS) -> list[str]:
    """``text`` in lines of at most ``width`` characters (a longer word stays whole): broken before a
    parenthesis when what comes before it fits a line, else at spaces."""
    if len(text) <= width:
        return [text]
    head, paren, rest = text.partition(" (")
    if paren and len(head) <= width:
        return [head, *wrapped("(" + rest, width)]
    lines = [""]
    for word in text.split(" "):
        if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
            lines.append(word)
        else:
            lines[-1] = f"{lines[-1]} {word}" if lines[-1] else word
    return lines


def history_spec(periods, labels, values, *, baseline=None, units=None, title: str | None = None,
                 columns: int = 3, plan: Plan | None = None) -> dict:
    """:func:`history_figure` as a plain figure dict (no template)."""
    return _history(periods, labels, values, baseline=baseline, units=units, title=title, columns=columns,
                    plan=plan)[0]


def _history_axes(layout: dict, x: list, ticks, rows: int, cols: int, f: int) -> None:
    """The small charts' axes: the periods ``x`` once, the categories of the first chart's x axis, which the
    others match (the lines carry no x: ``x0``, ``dx``); the same few short x ticks on each chart (labels
    starting at their tick, ``explain.plots.periods.history_ticks``), written under the last chart of each
    column only; the cells of the grid with no chart hidden."""
    last = {j % cols: j for j in range(f)}  # column -> its last chart
    first = _axis("x", 1, 1, cols)
    merge(layout[first], dict(categoryorder="array", categoryarray=list(x)))
    for j in range(rows * cols):
        r, c = j // cols + 1, j % cols + 1
        xkey, ykey = _axis("x", r, c, cols), _axis("y", r, c, cols)
        if j >= f:
            merge(layout[xkey], dict(visible=False))
            merge(layout[ykey], dict(visible=False))
            continue
        if xkey != first:
            merge(layout[xkey], dict(matches=first.replace("axis", "")))
        merge(layout[xkey], dict(type="category", tickmode="array", tickvals=[x[i] for i in ticks.indices],
                                 ticktext=esc_all(ticks.texts), tickangle=0, tickfont=dict(size=10),
                                 ticklabelposition="outside right", ticks="outside", ticklen=4,
                                 showticklabels=last[j % cols] == j, showgrid=True, gridcolor="#f2f2f2"))
        merge(layout[ykey], dict(gridcolor="#eee", rangemode="tozero", automargin=True))


class _Lines(NamedTuple):
    """What a history's small charts draw: the periods on x (a bin's label once binned) and the raw periods
    drawn (for the line under the charts), a chart's name, values and baseline (T', K) and unit per feature,
    what a point is (" (mean)" of a bin, else "") and the plan's note in lines."""

    periods: list
    raw: list
    labels: list
    values: np.ndarray
    baseline: np.ndarray | None
    units: list
    what: str
    notes: list


def _lines(periods, labels, values, baseline, units, plan) -> _Lines:
    """The history as ``plan`` draws it: a long one in the heatmap's bins (the mean of each bin's periods with
    data) and only the features the heatmap shows on rows of their own (None: every period and feature)."""
    values = np.asarray(values, np.float64)
    base = None if baseline is None else np.asarray(baseline, np.float64)
    units = _units_for(labels, units)
    if plan is None or not (plan.periods_changed or len(plan.folded)):
        return _Lines(list(periods), list(periods), list(labels), values, base, units, "", [])
    raw = [p for p, k in zip(periods, plan.which) if k >= 0]  # the raw periods drawn
    return _Lines(plan.labels, raw, [labels[j] for j in plan.kept], plan.kept_means(values), plan.kept_means(base),
                  [units[j] for j in plan.kept], " (mean)" if plan.periods_changed else "",
                  plan.history_note.split("; ") if plan.history_note else [])


def _line_traces(lines: _Lines, names, cols: int) -> list:
    """Each chart's line of the customer, and the baseline's dashed beside it; their x are the periods in order,
    the categories of the charts' axes (``_history_axes``: set once), given as ``x0`` and ``dx``."""
    x = dict(x0=esc(lines.periods[0]), dx=1) if len(lines.periods) else dict(x=[])
    mode = "lines+markers" if len(lines.periods) <= periods_display.MAX_PERIODS else "lines"  # no blur at 365
    data = []
    for j in range(lines.values.shape[1]):
        r, c = j // cols + 1, j % cols + 1
        data.append(_placed(dict(type="scatter", **x, y=lines.values[:, j].copy(), mode=mode,
                                 line=dict(color="#333"), name="customer", showlegend=j == 0, legendgroup="customer",
                                 hovertemplate=f"{names[j]}<br>%{{x}}{lines.what}: %{{y:.4g}}<extra>customer</extra>"),
                            r, c, cols))
        if lines.baseline is not None:
            data.append(_placed(dict(type="scatter", **x, y=lines.baseline[:, j].copy(), mode="lines",
                                     line=dict(color=GREY, dash="dash"), name="baseline", showlegend=j == 0,
                                     legendgroup="baseline",
                                     hovertemplate=f"{names[j]}<br>%{{x}}{lines.what}: %{{y:.4g}}"
                                                   "<extra>baseline</extra>"),
                                r, c, cols))
    return data


def _history_text(layout: dict, lines: _Lines, title, rows: int, names_px: int) -> dict:
    """``layout`` with the history's words around its charts: the title's lines, the plan's note above the
    charts and the first and last period under them; the figure's height and margins to hold them."""
    note_px = 16 * len(lines.notes) + 10 if lines.notes else 0  # the note's height above the charts
    heading = wrapped(title) if title else []
    above = names_px + note_px + LINE_PX * max(0, len(heading) - 1)  # more room above the charts
    layout = _styled(layout, title, height=170 * rows + 80 + above + SPAN_PX, showlegend=False)
    layout["margin"]["b"] += SPAN_PX
    layout.setdefault("annotations", []).append(dict(  # the first and the last period, once, under the charts
        text=esc(periods_display.history_span(lines.raw)), xref="paper", yref="paper", x=0.5, y=0, xanchor="center",
        yanchor="top", yshift=-20, showarrow=False, font=dict(size=11, color="#555")))
    if lines.notes:  # what was binned, zoomed and left out: small grey lines between the title and the charts
        layout["annotations"].append(dict(
            text="<br>".join(esc(line) for line in lines.notes), xref="paper", yref="paper", x=0, y=1,
            xanchor="left", yanchor="bottom", yshift=24 + names_px, align="left", showarrow=False,
            font=dict(size=11, color="#555")))
    if heading:  # the title's lines from the top down (Plotly hangs a title's further lines below its first)
        layout["title"].update(text="<br>".join(esc(line) for line in heading), yref="container",
                               y=1 - (TITLE_TOP_PX + LINE_PX) / layout["height"], yanchor="bottom")
    layout["margin"]["t"] = (TITLE_TOP_PX + LINE_PX * len(heading) + 6 if heading else 10) + names_px + 20 + note_px
    return layout


def _history(periods, labels, values, *, baseline, units, title, columns: int, plan) -> tuple[dict, dict]:
    """(:func:`history_spec`'s figure dict, its subplot grid's arguments)."""
    lines = _lines(periods, labels, values, baseline, units, plan)
    f = lines.values.shape[1]
    grid = _history_grid(lines.labels, lines.units, columns, f)
    rows, cols = grid["rows"], grid["cols"]
    layout = subplots_layout(**grid)
    data = _line_traces(lines, grid["subplot_titles"], cols)
    # the narrowest chart planned for: HISTORY_PX shared by the columns and the gaps between them
    chart_px = HISTORY_PX * (1 - grid["horizontal_spacing"] * (cols - 1)) / cols
    _history_axes(layout, esc_all(lines.periods), periods_display.history_ticks(lines.periods, chart_px), rows,
                  cols, f)
    names_px = 0
    for note in layout.get("annotations", []):  # the charts' names, in lines that fit a chart
        parts = wrapped(note["text"], max(8, int(chart_px // NAME_CHAR_PX)))
        note.update(text="<br>".join(parts), font=dict(size=12))
        names_px = max(names_px, NAME_LINE_PX * (len(parts) - 1))
    return _spec(data, _history_text(layout, lines, title, rows, names_px)), grid


def history_figure(periods, labels, values, *, baseline=None, units=None, title: str | None = None,
                   columns: int = 3, plan: Plan | None = None) -> go.Figure:
    """The customer's raw monthly history, one small chart per feature (each in its own unit).

    values, baseline: (T, F). The baseline, when given, is drawn dashed in grey. ``plan``: the
    ``explain.plots.periods.Plan`` of the customer's heatmap (``heatmap_plan``): a long history is
    drawn in its bins (the mean of each bin's periods with data) and only the features it shows on
    rows of their own, as the title says (None: every period and feature).
    """
    spec, grid = _history(periods, labels, values, baseline=baseline, units=units, title=title, columns=columns,
                          plan=plan)
    return subplots_figure(spec, **grid)


# ----------------------------------------------------------------------------- compare


def compare_figures(periods, features, first, second, *, names=("A", "B"), values=(None, None),
                    units=None, padding=(None, None),
                    plan: Plan | None = None) -> tuple[go.Figure, go.Figure, go.Figure]:
    """Two heatmaps on ONE shared scale (same zmin/zmax) and their difference (first - second).

    first, second: (T, F) attributions aligned by period; ``padding``: each one's padded periods
    (T,) bool (or None), grey "no data"; the difference is no data where either has none. The
    difference has its own symmetric scale, titled as such. ``plan``: the three's one plan
    (``explain.plots.periods.compare_plan`` of these attributions and paddings, with the reader's ``View``);
    without one: their default plan.
    """
    pads = [None if p is None else np.asarray(p, bool) for p in padding]
    first, second = (np.where(p[:, None], np.nan, np.asarray(a, np.float64)) if p is not None
                     else np.asarray(a, np.float64) for a, p in zip((first, second), pads))
    if plan is None:  # arrays alone (a notebook): their default plan
        plan = periods_display.compare_plan(periods, features, first, second, padding=pads)
    # one binning and row order for the three (the same importance); each grey where it has no data
    plans = [plan.with_padding(p) for p in pads]
    first, second = plans[0].sums(first), plans[1].sums(second)
    shown_units = _units_shown(plan, features, units)
    m, clipped = periods_display.robust_limit(first, second)
    shared = "Effect<br>(shared<br>scale)<br>red: raises<br>blue: lowers" + (
        periods_display.clipped_note(m) if clipped else "")
    figs = [_heatmap_figure(pl, features, a, values=pl.means(v), units=shown_units, zmax=m, title=str(n),
                            height=360, colorbar_title=shared)
            for pl, a, v, n in zip(plans, (first, second), values, names)]
    figs[0].update_traces(showscale=False)  # the same scale as the second one's colorbar
    diff = first - second  # no data (NaN) where either has none
    figs.append(_heatmap_figure(
        plan, features, diff, units=shown_units, height=360,
        title=f"Difference: {names[0]} minus {names[1]} (own scale)",
        colorbar_title="Difference<br>red: first higher<br>blue: second higher"))
    return figs[0], figs[1], figs[2]


def compare_static(labels, first, second, *, names=("A", "B"), top: int | None = None) -> go.Figure:
    """Grouped horizontal bars of two customers' static attributions (sorted by the first);
    ``top``: more features than that are cut to the ``top - 1`` largest (|first| + |second|) and
    one pair of bars, "the other K features" (None: every feature)."""
    first, second = np.asarray(first, np.float64), np.asarray(second, np.float64)
    cut = periods_display.fold_ranking(np.abs(first) + np.abs(second), first, second, top=top)
    labels, (first, second) = cut.names(labels), cut.columns
    order = np.argsort(first, kind="stable")
    y = [esc(labels[j]) for j in order]
    fig = go.Figure([
        go.Bar(x=first[order], y=y, orientation="h", name=esc(names[0]), marker_color="#444",
               hovertemplate="%{y}: %{x:+.4g}<extra>" + esc(names[0]) + "</extra>"),
        go.Bar(x=second[order], y=y, orientation="h", name=esc(names[1]), marker_color="#bbb",
               hovertemplate="%{y}: %{x:+.4g}<extra>" + esc(names[1]) + "</extra>"),
    ])
    m = symmetric_limit(first, second)
    fig.update_xaxes(title="Effect on the prediction", range=[-1.1 * m, 1.1 * m], zeroline=True,
                     zerolinecolor="#444", gridcolor="#eee")
    fig.update_yaxes(automargin=True)
    return _layout(fig, "Static features", height=max(260, 40 * len(y) + 90), barmode="group",
                   legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right"))


# ----------------------------------------------------------------------------- cohort


def signed_legend(name: str) -> list[go.Scatter]:
    """Legend entries for bars coloured by sign (a bar trace's own swatch takes its first bar's
    colour): a red square 'NAME > 0 (raises)' and a blue one 'NAME < 0 (lowers)', no data."""
    return [go.Scatter(x=[None], y=[None], mode="markers", name=f"{name} {words}",
                       marker=dict(symbol="square", size=11, color=colour), hoverinfo="skip")
            for words, colour in (("> 0 (raises)", RED), ("< 0 (lowers)", BLUE))]


def feature_ranking(labels, mean_abs, signed_mean, *, title: str | None = None, top: int | None = None) -> go.Figure:
    """Features ranked by mean |attribution| (purple), with the signed mean beside (red/blue);
    ``top``: more features than that are cut to the ``top - 1`` largest and one pair of bars, "the
    other K features", their sums (``explain.plots.periods.fold_ranking``; None: every feature)."""
    cut = periods_display.fold_ranking(mean_abs, mean_abs, signed_mean, top=top)
    labels, (mean_abs, signed_mean) = cut.names(labels), cut.columns
    order = np.arange(len(labels))[::-1]  # largest at the top, the other features together at the bottom
    y = [esc(labels[j]) for j in order]
    fig = go.Figure([
        go.Bar(x=mean_abs[order], y=y, orientation="h", name="mean |attribution| (size)",
               marker_color="#6a51a3", hovertemplate="%{y}<br>mean |attribution|: %{x:.4g}<extra></extra>"),
        go.Bar(x=signed_mean[order], y=y, orientation="h", name="signed mean (direction)", showlegend=False,
               marker_color=_signed_colours(signed_mean[order]),
               hovertemplate="%{y}<br>signed mean: %{x:+.4g}<extra></extra>"),
        *signed_legend("signed mean"),
    ])
    fig.update_xaxes(title="attribution", zeroline=True, zerolinecolor="#444", gridcolor="#eee")
    fig.update_yaxes(automargin=True)
    return _layout(fig, title, height=max(300, 34 * len(y) + 110), barmode="group",
                   legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right"))


def period_profile(periods, mean_abs, signed_mean, *, title: str | None = None) -> go.Figure:
    """Per period: total size of effect (sum of mean |attribution| over features) and signed total."""
    x = esc_all(periods)
    fig = go.Figure([
        go.Scatter(x=x, y=np.asarray(mean_abs, np.float64), mode="lines+markers", name="size (mean |attribution|)",
                   line=dict(color="#6a51a3"), hovertemplate="%{x}: %{y:.4g}<extra>size</extra>"),
        go.Bar(x=x, y=np.asarray(signed_mean, np.float64), name="signed mean", showlegend=False,
               marker_color=_signed_colours(signed_mean), opacity=0.7,
               hovertemplate="%{x}: %{y:+.4g}<extra>signed mean</extra>"),
        *signed_legend("signed mean"),
    ])
    fig.update_xaxes(type="category", title="period")
    fig.update_yaxes(title="attribution (summed over features)", zeroline=True, zerolinecolor="#444",
                     gridcolor="#eee")
    fig = _layout(fig, title, height=340, legend=dict(orientation="h", yanchor="bottom", y=1.02, x=1, xanchor="right"))
    fig.update_layout(margin_t=95)  # room for the title above the two-line legend
    return fig


def risk_histogram(predictions, bands=None, *, title: str | None = None, x_title: str = "predicted score") -> go.Figure:
    """Histogram of predicted scores, with the risk band edges as dashed lines."""
    fig = go.Figure(go.Histogram(x=np.asarray(predictions, np.float64), nbinsx=40, marker_color="#888",
                                 hovertemplate="%{x}: %{y} customers<extra></extra>"))
    for edge in bands or ():
        fig.add_vline(x=float(edge), line_dash="dash", line_color="#444")
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title="customers", gridcolor="#eee")
    return _layout(fig, title, height=240)


def whatif_figures(periods, features, original, edited, *, changed=None, values=(None, None), units=None,
                   names=("Original", "What-if"), padding=None,
                   plan: Plan | None = None) -> tuple[go.Figure, go.Figure, go.Figure]:
    """The original's and the edited customer's heatmaps on ONE shared symmetric scale, and the
    change (edited minus original) on its own; ``changed`` (T, F) bool outlines the edited cells.

    original, edited: (T, F) attributions; values: their raw values (T, F) for the hover text;
    ``padding`` (T,) bool: the customer's padded periods (never edited), grey "no data" in all three.
    ``plan``: the three's one plan (``explain.plots.periods.compare_plan(periods, features, edited,
    original, padding=(padding, padding), view=...)``); without one: their default plan.
    """
    if plan is None:  # arrays alone (a notebook): their default plan
        plan = periods_display.compare_plan(periods, features, edited, original, padding=(padding, padding))
    fig_edited, fig_original, fig_change = compare_figures(
        periods, features, edited, original, names=(names[1], names[0]), values=(values[1], values[0]),
        padding=(padding, padding), units=units, plan=plan)
    fig_original.update_traces(showscale=False)
    fig_edited.update_traces(showscale=True, selector=lambda trace: trace.name != "no data")
    fig_change.update_layout(title_text=esc(f"Change: {names[1]} minus {names[0]} (own scale)"))
    fig_change.update_traces(colorbar_title_text="Change<br>red: the edit<br>raised the effect<br>"
                                                 "blue: lowered it", selector=dict(type="heatmap"))
    if changed is not None and np.asarray(changed).any():
        rows, cols = np.nonzero(np.asarray(changed, bool))  # (period, feature) of each edited cell
        cells = sorted({(int(plan.which[i]), plan.row_of(int(j))) for i, j in zip(rows, cols) if plan.which[i] >= 0})
        names_shown = plan.row_names(features)
        for fig in (fig_edited, fig_change):
            fig.add_trace(go.Scatter(
                x=[esc(plan.labels[b]) for b, _ in cells], y=[esc(names_shown[r]) for _, r in cells], mode="markers",
                marker=dict(symbol="square-open", size=13, color="#111", line=dict(width=2)),
                hovertemplate="edited: %{x}, %{y}<extra></extra>", showlegend=False))
    return fig_original, fig_edited, fig_change
