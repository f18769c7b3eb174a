"""The risk curve of a model with a prediction per period: a line over the periods, the explained period marked.
It draws a finished ``explain.analysis.risk_curve.RiskCurve``; it computes nothing."""

from __future__ import annotations

import plotly.graph_objects as go

from explain.plots.style import esc, layout

LINE = "#5e3c99"
MARK = "#e66101"


def risk_curve_figure(curve, height: int = 240) -> go.Figure:
    """The line of ``curve.values`` over ``curve.periods``, the explained period as a larger marker and a dotted
    vertical line; each point's hover says its period and value (clicking a point picks it: ``customdata`` is the
    period number, 1 the first)."""
    labels = [esc(p) for p in curve.periods]
    numbers = list(range(1, len(labels) + 1))
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=labels, y=[float(v) for v in curve.values], mode="lines+markers", name=esc(curve.target_name),
        line=dict(color=LINE, width=2), marker=dict(size=7, color=LINE), customdata=numbers,
        hovertemplate="%{x}: %{y:.3f}<extra>period %{customdata}</extra>"))
    at = curve.explained - 1
    fig.add_trace(go.Scatter(
        x=[labels[at]], y=[float(curve.values[at])], mode="markers", name="explained",
        marker=dict(size=15, color=MARK, symbol="diamond", line=dict(color="white", width=1)),
        customdata=[curve.explained], hovertemplate="%{x}: %{y:.3f}<extra>explained</extra>"))
    fig.add_vline(x=at, line=dict(color=MARK, dash="dot", width=1))
    layout(fig, None, height, showlegend=False, xaxis=dict(type="category", title=None),
           yaxis=dict(title=esc(f"Predicted {curve.target_name}")))
    return fig
