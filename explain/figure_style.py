"""The style every figure shares: one diverging scale for attributions (reversed RdBu, centred
on zero: red raises the prediction, blue lowers it), a sequential one for sizes of effect,
escaping of untrusted names (Plotly renders a subset of HTML), number format and layout.
No streamlit."""

from __future__ import annotations

import html
import math

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


def layout(fig: go.Figure, title: str | None, height: int, **extra) -> go.Figure:
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    fig.update_layout(
        title=dict(text=esc(title) if title else None, x=0, xanchor="left", font=dict(size=15)),
        height=height, margin=dict(l=10, r=10, t=50 if title else 20, b=10), font=FONT,
        plot_bgcolor="white", hoverlabel=dict(align="left"), **extra,
    )
    return fig
