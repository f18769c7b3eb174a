"""The figure of drivers over runs: a finished ``Series`` (``explain.analysis.over_runs``) in, a Plotly figure out.
It draws; it never computes.

    s = explain.batch.drivers.over_runs(bundle, ["runs/may", "runs/june", "runs/july"])
    explain.plots.over_runs.shares(s).show()

x: the runs, oldest first (their labels); y: each feature's share of the total mean |attribution| (%), one line per
feature of the largest shares, each with its interval as a band of the same colour, light.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from explain.plots.style import esc, layout

TOP_LINES = 6  # features drawn (the largest share in any run)
PALETTE = qualitative.D3


def _rgba(colour: str, alpha: float) -> str:
    colour = colour.lstrip("#")
    r, g, b = (int(colour[k:k + 2], 16) for k in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def shares(result, top: int = TOP_LINES, *, grouped: bool = False, title: str | None = None) -> go.Figure:
    """Each run's share (%) of the ``top`` features (with ``grouped``: groups) of the largest shares, one line
    each, its interval a band around it; a dashed line where the move from the first run to the last is within
    the intervals (no claim), solid where it is claimed."""
    x = [esc(r.label) for r in result.runs]
    claimed = {m.feature.name: m.changed for m in result.moves}
    fig = go.Figure()
    for k, j in enumerate(result.top(top, grouped)):
        feature, colour = result.rows[j], PALETTE[k % len(PALETTE)]
        name = esc(feature.label)
        share = [100 * r.share[j] for r in result.runs]
        low, high = [100 * r.low[j] for r in result.runs], [100 * r.high[j] for r in result.runs]
        fig.add_trace(go.Scatter(x=x + x[::-1], y=high + low[::-1], fill="toself", fillcolor=_rgba(colour, 0.15),
                                 line=dict(width=0), hoverinfo="skip", showlegend=False, legendgroup=name))
        fig.add_trace(go.Scatter(
            x=x, y=share, mode="lines+markers", name=name, legendgroup=name,
            line=dict(color=colour, width=2, dash="solid" if claimed.get(feature.name) else "dash"),
            customdata=[[lo, hi] for lo, hi in zip(low, high)],
            hovertemplate=f"{name}<br>%{{x}}: %{{y:.1f}} %<br>interval %{{customdata[0]:.1f}} to "
                          f"%{{customdata[1]:.1f}} %<extra></extra>"))
    fig.update_xaxes(title="run", type="category", gridcolor="#eee")
    fig.update_yaxes(title="share of the effect (%)", rangemode="tozero", gridcolor="#eee")
    title = title or (f"Drivers over {len(result.runs)} runs: each feature's share of the effect, with "
                      f"{100 * result.level:.0f} % intervals (dashed: no move beyond them)")
    return layout(fig, title, height=420, legend=dict(orientation="h", y=-0.2))
