"""The style every figure shares: one diverging scale for attributions (reversed RdBu, centred
on zero: red raises the prediction, blue lowers it), a sequential one for sizes of effect,
escaping of untrusted names (Plotly renders a subset of HTML), number format and layout.
No streamlit."""

from __future__ import annotations

import html
import math
import re

import numpy as np
import plotly.graph_objects as go

DIVERGING = "RdBu_r"  # reversed: red = raises the prediction, blue = lowers it
SEQUENTIAL = "Purples"
RED, BLUE, GREY = "#b2182b", "#2166ac", "#9e9e9e"
ATTRIBUTION_TITLE = "Effect on the<br>prediction<br>red: raises<br>blue: lowers"
MAGNITUDE_TITLE = "Size of<br>effect<br>(either<br>direction)"
FONT = dict(size=13)
RULE_COLOURS = {"gausslegendre": "#1b9e77", "trapezoid": "#d95f02", "left": "#7570b3",
                "right": "#e7298a", "middle": "#66a61e"}
AXIS = re.compile(r"^[xy]axis\d*$")  # a layout's axis keys: xaxis, xaxis2, ..., yaxis, ...


# ----------------------------------------------------------------------------- helpers


def esc(text) -> str:
    """``text`` as Plotly-safe text: HTML special characters escaped (Plotly shows them literally),
    and ``$`` as ``&#36;`` so that no name is taken for LaTeX (``$...$``) where MathJax is loaded."""
    return html.escape(str(text), quote=True).replace("$", "&#36;")


def esc_all(names) -> list[str]:
    return [esc(name) for name in names]


def symmetric_limit(*arrays) -> float:
    """The largest |value| over ``arrays`` (the colour limit m of [-m, m]); 1.0 when all are 0."""
    m = 0.0
    for a in arrays:
        a = np.asarray(a, dtype=np.float64)
        if a.size:
            finite = np.abs(a[np.isfinite(a)])
            if finite.size:
                m = max(m, float(finite.max()))
    return m if m > 0 else 1.0


def fmt(value, unit: str | None = None) -> str:
    """A raw value with its unit, as escaped text: '3 months', '12.5 GB', '0.8'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = f"{float(value):.4g}"
    if unit and unit not in ("0/1",):
        text = f"{text} {unit}"
    return esc(text)


def signed_colours(values) -> list[str]:
    return [RED if v > 0 else BLUE if v < 0 else GREY for v in np.asarray(values, np.float64)]


def units_for(names, units) -> list[str | None]:
    if units is None:
        return [None] * len(names)
    if isinstance(units, dict):
        return [units.get(n) for n in names]
    return list(units)


def merge(target: dict, update: dict) -> dict:
    """``update`` merged into ``target`` (returned) as Plotly's ``update`` merges: nested dicts key
    by key, anything else replaced; the dicts it inserts are copies."""
    for key, value in update.items():
        if isinstance(value, dict):
            if not isinstance(target.get(key), dict):
                target[key] = {}
            merge(target[key], value)
        else:
            target[key] = value
    return target


def shared_layout(title: str | None, height: int, **extra) -> dict:
    """The layout every figure shares (title, height, margins, font, white plot, hover text) and
    ``extra``, as one ``update_layout`` dict; no title text when ``title`` is empty."""
    heading = dict(text=esc(title)) if title else {}
    return dict(title=dict(heading, x=0, xanchor="left", font=dict(size=15)), height=height,
                margin=dict(l=10, r=10, t=50 if title else 20, b=10), font=dict(FONT),
                plot_bgcolor="white", hoverlabel=dict(align="left"), **extra)


def styled(layout: dict, title: str | None, height: int, **extra) -> dict:
    """A figure dict's ``layout`` (returned) with automargin on every axis (an "xaxis" and a
    "yaxis" at least, as ``update_xaxes`` makes) and :func:`shared_layout` merged in."""
    for key in ["xaxis", "yaxis", *(k for k in layout if AXIS.match(k))]:
        layout.setdefault(key, {})["automargin"] = True
    return merge(layout, shared_layout(title, height, **extra))


def layout(fig: go.Figure, title: str | None, height: int, **extra) -> go.Figure:
    """``fig`` with automargin on every axis and :func:`shared_layout`."""
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    fig.update_layout(shared_layout(title, height, **extra))
    return fig
