"""Figures of a champion-against-challenger comparison (``explain.analysis.models.ModelComparison``): a finished
comparison in, Plotly figures out. They draw; they never compute.

    result = explain.notebook.compare_models(bundle, challenger)
    explain.plots.models.shares(result).show()
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explain.plots.style import esc, layout

CHAMPION_COLOUR, CHALLENGER_COLOUR = "#6a51a3", "#e6550d"
TOP = 15  # features drawn (those whose share changed most)


def _label(feature) -> str:
    return feature.label if feature.role == "static" else f"{feature.label} (history)"


def shares(result, top: int = TOP, *, title: str | None = None) -> go.Figure:
    """Each feature's share of the attribution (mean |attribution| / the sum over features) under the champion
    and the challenger side by side, the ``top`` features whose share changed most, in the champion's order
    (largest at the top); hover says both shares and the change."""
    rows = sorted(result.changed[:top], key=lambda c: c.champion_share)  # Plotly draws the first row lowest
    y = [esc(_label(c.feature)) for c in rows]
    champion = 100 * np.array([c.champion_share for c in rows], np.float64)
    challenger = 100 * np.array([c.challenger_share for c in rows], np.float64)
    change = challenger - champion
    hover = "%{y}<br>%{fullData.name}: %{x:.1f} %<br>change: %{customdata:+.1f} points<extra></extra>"
    fig = go.Figure([
        go.Bar(x=challenger, y=y, orientation="h", name="challenger", marker_color=CHALLENGER_COLOUR,
               customdata=change, hovertemplate=hover),
        go.Bar(x=champion, y=y, orientation="h", name="champion (the bundle's model)", marker_color=CHAMPION_COLOUR,
               customdata=change, hovertemplate=hover),
    ])
    fig.update_xaxes(title="share of all attribution (%)", rangemode="tozero", gridcolor="#eee")
    cut = len(result.changed) > top
    title = title or ("Share of each feature under each model"
                      + (f": the {top} that changed most of {len(result.changed)}" if cut else ""))
    return layout(fig, title, height=max(300, 40 * len(y) + 120), barmode="group",
                  legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right", traceorder="reversed"))
