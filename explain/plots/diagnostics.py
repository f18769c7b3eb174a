"""The Diagnostics page's figures: convergence of the integral, the path from the baseline, where
the engine placed its integration points on it, and the faithfulness checks (deletion/insertion
curves, model randomisation, occlusion). Arrays and finished results in, ``go.Figure`` out;
``explain.figures.diagnostics(bundle, customer)`` draws the page's two for one customer. No streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explain.plots.style import GREY, RULE_COLOURS, esc, esc_all, layout, symmetric_limit

# ----------------------------------------------------------------------------- diagnostics


def delta_by_steps(steps, deltas: dict, *, tolerance: float | None = None, title: str | None = None) -> go.Figure:
    """|delta| against steps for each rule (log-log). deltas: {rule: (len(steps),)}.

    ``tolerance``, when given, is drawn as the 'fine' line (1 % of |f(x) - f(b)|).
    """
    fig = go.Figure()
    for rule, values in deltas.items():
        values = np.abs(np.asarray(values, np.float64))
        fig.add_trace(go.Scatter(x=list(steps), y=np.maximum(values, 1e-12), mode="lines+markers", name=esc(rule),
                                 line=dict(color=RULE_COLOURS.get(rule)),
                                 hovertemplate="%{x} steps: |delta| %{y:.3g}<extra>" + esc(rule) + "</extra>"))
    if tolerance:
        fig.add_hline(y=tolerance, line_dash="dash", line_color="#444",
                      annotation_text="fine below this line (1% of the gap)", annotation_position="top left")
    fig.update_xaxes(type="log", title="steps (gradient evaluations)", gridcolor="#eee",
                     tickvals=list(steps), ticktext=[str(s) for s in steps])
    fig.update_yaxes(type="log", title="|delta| (gap left over)", gridcolor="#eee", exponentformat="e")
    return layout(fig, title, height=400, legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))


def path_figure(profile: dict, *, title: str | None = None, y_title: str = "prediction") -> go.Figure:
    """Prediction and gradient size (L2 norm per input) along the path from baseline (0) to customer (1)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=(f"{esc(y_title)} along the path", "gradient size along the path"))
    a = np.asarray(profile["alphas"], np.float64)
    fig.add_trace(go.Scatter(x=a, y=profile["prediction"], mode="lines+markers", name=esc(y_title),
                             line=dict(color="#333")), row=1, col=1)
    fig.add_trace(go.Scatter(x=a, y=profile["grad_norm_static"], mode="lines", name="|gradient| static",
                             line=dict(color="#d95f02")), row=2, col=1)
    fig.add_trace(go.Scatter(x=a, y=profile["grad_norm_temporal"], mode="lines", name="|gradient| temporal",
                             line=dict(color="#7570b3")), row=2, col=1)
    fig.update_xaxes(title="alpha (0 = baseline, 1 = customer)", row=2, col=1)
    fig.update_xaxes(gridcolor="#eee")
    fig.update_yaxes(gridcolor="#eee")
    return layout(fig, title, height=480, legend=dict(orientation="h", yanchor="top", y=-0.15, x=0))


POINTS_COLOUR = "#1b9e77"
PANEL_FILL = "rgba(117,112,179,0.12)"


def integration_points_figure(result, *, title: str | None = None, y_title: str = "prediction") -> go.Figure:
    """f(alpha) along the path from the baseline (0) to the customer (1) as a line, the final rule's
    points on it as dots (hover: alpha, f, weight, panel) and every other panel shaded; one row per
    leg (``explain.core.points.PathPoints``: the joint path, or one per input with path="per-input")."""
    legs = list(result.legs.values())
    names = [f"{esc(y_title)} along the path" if leg.name == "joint" else
             f"{esc(leg.name)} moves (the other inputs at the customer's values): {leg.final_points} gradient "
             f"points in {leg.panels} panel{'s' if leg.panels != 1 else ''}"
             for leg in legs]
    fig = make_subplots(rows=len(legs), cols=1, shared_xaxes=True, vertical_spacing=0.12 / max(1, len(legs) - 1),
                        subplot_titles=names)
    for row, leg in enumerate(legs, start=1):
        joint = leg.name == "joint"
        fig.add_trace(go.Scatter(x=leg.alphas, y=leg.values, mode="lines", name=esc(y_title),
                                 line=dict(color="#333", width=2), legendgroup=f"leg{row}", showlegend=row == 1,
                                 hovertemplate="alpha %{x:.4f}: %{y:.4g}<extra></extra>"), row=row, col=1)
        custom = np.stack([leg.point_weights, leg.point_panels + 1], axis=1)
        fig.add_trace(go.Scatter(
            x=leg.point_alphas, y=leg.point_values, mode="markers", legendgroup=f"leg{row}", showlegend=row == 1,
            name=(f"gradient points ({leg.final_points} in {leg.panels} panel{'s' if leg.panels != 1 else ''})"
                  if joint else "gradient points"),
            marker=dict(color=POINTS_COLOUR, size=7, line=dict(color="white", width=1)), customdata=custom,
            hovertemplate=("alpha %{x:.5f}<br>f %{y:.4g}<br>weight %{customdata[0]:.3g}<br>"
                           "panel %{customdata[1]:.0f}<extra>gradient point</extra>")), row=row, col=1)
        edges = np.asarray(leg.edges, np.float64)
        for lo, hi in zip(edges[1::2], edges[2::2]):  # every other panel shaded: the panels are the bands
            fig.add_vrect(x0=float(lo), x1=float(hi), fillcolor=PANEL_FILL, line_width=0, layer="below",
                          row=row, col=1)  # after the traces: plotly leaves out shapes of empty subplots
        fig.update_yaxes(title=esc(y_title), gridcolor="#eee", row=row, col=1)
    fig.update_xaxes(range=[-0.01, 1.01], gridcolor="#eee")
    fig.update_xaxes(title="alpha (0 = baseline, 1 = customer)", row=len(legs), col=1)
    return layout(fig, title, height=260 + 160 * len(legs), legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))


# ----------------------------------------------------------------------------- faithfulness

RANKING_STYLES = {"ig": ("Integrated Gradients", "#1b9e77"),
                  "gradient_x_input": ("gradient x (input - baseline)", "#7570b3"),
                  "random": ("random orders", GREY)}


def perturbation_curves_figure(fractions, shares: dict, *, kind: str = "deletion", aopc: dict | None = None,
                               title: str | None = None) -> go.Figure:
    """Deletion or insertion curves: the share of the prediction gap against the fraction of cells replaced.

    shares: {ranking: (m,)}, or (R, m) for several random orders (drawn as their mean and range).
    aopc: {ranking: float} for the legend.
    """
    x = np.asarray(fractions, np.float64) * 100
    fig = go.Figure()
    for ranking, share in shares.items():
        name, colour = RANKING_STYLES.get(ranking, (ranking, "#333"))
        share = np.asarray(share, np.float64)
        if share.ndim == 2:  # several orders: a band from the lowest to the highest, and the mean
            fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]),
                                     y=np.concatenate([share.max(axis=0), share.min(axis=0)[::-1]]),
                                     fill="toself", fillcolor="rgba(158,158,158,0.25)", line=dict(width=0),
                                     hoverinfo="skip", showlegend=False))
            share = share.mean(axis=0)
        label = esc(name) + (f" (AOPC {aopc[ranking]:.3f})" if aopc and ranking in aopc else "")
        fig.add_trace(go.Scatter(x=x, y=share, mode="lines", name=label, line=dict(color=colour, width=2.5),
                                 hovertemplate="%{x:.0f}% of cells: %{y:.3f}<extra>" + esc(name) + "</extra>"))
    what = "left (1 = f(x), 0 = f(baseline))" if kind == "deletion" else "recovered (0 = f(baseline), 1 = f(x))"
    fig.update_xaxes(title=f"cells {'set to the baseline' if kind == 'deletion' else 'taken from the customer'}, "
                           "most important first (%)", gridcolor="#eee", range=[0, 100])
    fig.update_yaxes(title=f"share of the prediction gap {what}", gridcolor="#eee", zeroline=True, zerolinecolor="#bbb")
    return layout(fig, title, height=400, legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))


def randomisation_figure(layers, spearman, spearman_abs, *, threshold: float = 0.5, input_only: float | None = None,
                         title: str | None = None) -> go.Figure:
    """Rank correlation with the original attributions as the layers are re-initialised from the top."""
    steps = ["none (trained)"] + [f"+ {esc(name)}" for name in layers]
    fig = go.Figure()
    for values, name, colour in ((spearman, "signed attributions", "#1b9e77"),
                                 (spearman_abs, "|attributions|", "#d95f02")):
        y = [1.0, *np.asarray(values, np.float64).tolist()]
        fig.add_trace(go.Scatter(x=steps, y=y, mode="lines+markers", name=name, line=dict(color=colour, width=2.5),
                                 hovertemplate="re-initialised down to %{x}: %{y:.3f}<extra>" + name + "</extra>"))
    fig.add_hline(y=threshold, line_dash="dash", line_color="#444", annotation_position="top right",
                  annotation_text=f"{threshold}: it should fall below")
    if input_only is not None and np.isfinite(input_only):
        fig.add_hline(y=float(input_only), line_dash="dot", line_color="#d95f02", annotation_position="bottom right",
                      annotation_text="|x - b| alone")
    fig.update_xaxes(title="layers re-initialised (cumulative, from the output down)", gridcolor="#eee")
    fig.update_yaxes(title="Spearman rank correlation", range=[-1.05, 1.05], gridcolor="#eee",
                     zeroline=True, zerolinecolor="#bbb")
    return layout(fig, title, height=400, legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))


def occlusion_scatter(ig_totals, changes, groups, *, by: str = "period", spearman: float | None = None,
                      title: str | None = None) -> go.Figure:
    """Each (customer, group): IG's total for the group against the prediction change when it is set to the baseline.

    ig_totals, changes: (n, G); groups: the G names (periods or features). Points on the diagonal agree.
    """
    ig_totals, changes = np.asarray(ig_totals, np.float64), np.asarray(changes, np.float64)
    names = np.array(esc_all(groups), dtype=object)
    fig = go.Figure()
    fig.add_trace(go.Scattergl(
        x=ig_totals.ravel(), y=changes.ravel(), mode="markers", name=by,
        marker=dict(size=5, color="#2166ac", opacity=0.45), text=np.tile(names, ig_totals.shape[0]),
        hovertemplate="%{text}: IG total %{x:.4f}, occlusion change %{y:.4f}<extra></extra>"))
    m = symmetric_limit(ig_totals, changes)
    fig.add_trace(go.Scatter(x=[-m, m], y=[-m, m], mode="lines", name="equal", line=dict(color="#888", dash="dash"),
                             hoverinfo="skip"))
    label = f" (rank correlation {spearman:.3f})" if spearman is not None and np.isfinite(spearman) else ""
    fig.update_xaxes(title=f"IG total of the {by}", gridcolor="#eee", zeroline=True, zerolinecolor="#bbb")
    fig.update_yaxes(title=f"f(x) - f(x with the {by} at the baseline){label}", gridcolor="#eee",
                     zeroline=True, zerolinecolor="#bbb")
    return layout(fig, title, height=420, showlegend=False)
