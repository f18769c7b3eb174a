"""Figures of ``explain.drivers``: a finished ``Drivers`` in, Plotly figures out. They draw; they
never compute (the numbers come from ``explain.analysis.drivers``).

    d = explain.drivers(bundle)
    explain.plots.drivers.ranking(d).show()
    explain.plots.drivers.beeswarm(d).show()
    explain.plots.drivers.dependence(d, "support_calls").show()
    explain.plots.drivers.time_profile(d.time_profiles[0]).show()
    explain.plots.drivers.segments(d).show()
    explain.plots.drivers.drift(d.drift).show()

Scatter plots draw a bounded, seeded sample of customers (``max_points``; the title says how many
of how many), so a store of millions of customers stays a few thousand dots in the browser.
Colours: attributions on the diverging scale of every figure (red raises the prediction, blue
lowers it); a feature's value on a separate sequential scale (Viridis, by its rank among the
customers drawn: dark low, yellow high), so that a value is never read as an effect.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go

from explain.plots.figures import feature_ranking, heatmap_trace
from explain.plots.style import BLUE, GREY, RED, esc, esc_all, layout, symmetric_limit

# Dots drawn (issue 42): a sidebar click's browser time is mostly plotly.js styling SVG dots one by one (a CPU
# profile in headless Chromium, 2026-12-06: two thirds of it in PlotlyChart's chunk and the DOM's setProperty /
# setAttribute), so the scatter plots draw bounded, seeded samples: the dependence plot 1,000 customers (was 1,500),
# the beeswarm 250 a row, 10 rows, 2,500 dots as SVG, about 75 KB sent (was 800 a row in WebGL, 250 KB, 0.6 to 1.3 s
# to draw without a GPU, 0.4 s of it WebGL's start alone; see docs/performance.md).
MAX_POINTS = 1_000      # customers drawn in a scatter plot
SWARM_POINTS = 250      # customers drawn in each row of the beeswarm
TOP_FEATURES = 10       # rows of the beeswarm
TOP_RANKING = 15        # bars of the ranking
VALUE_SCALE = "Viridis"
SWARM_BINS = 60         # bins along x in which the beeswarm stacks its dots
SWARM_HEIGHT = 0.4      # half the height of a beeswarm row, in row units
SHADES = 255            # the beeswarm's colour: a value's rank as 0..SHADES (uint8)


def ranking(d, top: int | None = TOP_RANKING, *, grouped: bool = False, title: str | None = None) -> go.Figure:
    """The global ranking: mean |attribution| (size) and mean attribution (direction, relative to
    the baseline: ``d.reference``) per feature, the largest at the top; more than ``top`` features
    are cut to the ``top - 1`` largest and one pair of bars, "the other K features" (their sums);
    the title says so. ``top`` None: every feature. ``grouped``: each group of related features as
    one row (``d.grouped_ranking``: its members' sums)."""
    rows = d.grouped_ranking if grouped and getattr(d, "groups", ()) else d.ranking
    cut = top is not None and len(rows) > top
    reference = getattr(d, "reference", "the baseline")
    title = title or (f"Effects relative to {reference}: size and direction"
                      + (f", top {top - 1} of {len(rows)} (the others together)" if cut else ""))
    return feature_ranking([_label(r.feature, d) for r in rows], [r.mean_abs for r in rows],
                           [r.mean_signed for r in rows], title=title, top=top)


def _label(feature, d=None) -> str:
    """A feature's name in a figure: temporal ones say that they are a history, groups how many
    features they hold."""
    if feature.role == "group":
        group = next((g for g in getattr(d, "groups", ()) if g.name == feature.name), None)
        return feature.label if group is None else f"{feature.label} (group of {len(group.members)})"
    return feature.label if feature.role == "static" else f"{feature.label} (history)"


def _swarm(x: np.ndarray, bins: int = SWARM_BINS) -> np.ndarray:
    """Vertical offsets (-SWARM_HEIGHT..SWARM_HEIGHT) that stack the dots of one beeswarm row: the
    dots of each bin along x alternate above and below the line, the densest bin filling the row."""
    offsets = np.zeros(x.shape[0])
    finite = np.isfinite(x)
    if not finite.any():
        return offsets
    low, high = float(np.min(x[finite])), float(np.max(x[finite]))
    which = np.zeros(x.shape[0], np.int64) if high == low else np.minimum(
        ((x - low) / (high - low) * bins).astype(np.int64, copy=False), bins - 1)
    rank = np.zeros(x.shape[0])
    for b in np.unique(which[finite]):
        members = np.flatnonzero((which == b) & finite)
        k = np.arange(members.size)
        rank[members] = np.where(k % 2 == 0, k // 2, -(k // 2 + 1))  # 0, -1, 1, -2, 2, ...
    largest = max(1.0, float(np.abs(rank).max()))
    return rank / largest * SWARM_HEIGHT


def _value_colour(values: np.ndarray) -> np.ndarray:
    """Each value's rank among the finite ones, 0 (lowest) to 1 (highest); NaN stays NaN."""
    out = np.full(values.shape[0], np.nan)
    finite = np.isfinite(values)
    if finite.sum() > 1:
        order = values[finite].argsort(kind="stable").argsort(kind="stable")
        out[finite] = order / (finite.sum() - 1)
    elif finite.any():
        out[finite] = 0.5
    return out


def beeswarm(d, top: int = TOP_FEATURES, *, max_points: int = SWARM_POINTS, seed: int = 0,
             title: str | None = None) -> go.Figure:
    """One row per feature (the ``top`` of the ranking, the largest at the top), one dot per
    customer of a seeded sample: x its attribution, colour its value (rank among the dots).

    Sent small and drawn fast (issue 42): SVG (WebGL's start alone cost more than drawing 2,500 SVG
    dots in a browser without a GPU), float32 positions and values, the colour as a rank 0..255
    (uint8: 256 shades of the scale, more than the eye tells apart), the hover built in the browser
    from the numbers (the feature's label in each row's template); only the customer ids are text."""
    rows = d.sample(max_points, seed)
    shown = d.ranking[:top]
    data = []
    for position, r in enumerate(shown):
        j = d.column(r.feature)
        x = d.attributions[rows, j]
        keep = np.isfinite(x)
        x, ids, raw = x[keep], d.customers[rows][keep], d.values[rows, j][keep]
        y = len(shown) - 1 - position + _swarm(x)
        colour = _value_colour(raw)
        names = np.asarray(esc_all(ids), dtype=object)
        hover = (f"customer %{{text}}<br>{_template_text(r.feature.label)}: %{{customdata:.4g}}"
                 "<br>attribution: %{x:+.4g}")
        known = np.isfinite(colour)
        x, y, raw = (np.asarray(a, np.float32) for a in (x, y, raw))  # half the bytes sent
        shade = np.round(colour[known] * SHADES).astype(np.uint8)
        data.append(go.Scatter(
            x=x[known], y=y[known], mode="markers", showlegend=False, text=names[known], customdata=raw[known],
            hovertemplate=hover + "<extra></extra>",
            marker=dict(size=4, color=shade, colorscale=VALUE_SCALE, cmin=0, cmax=SHADES, opacity=0.8,
                        showscale=position == 0,
                        colorbar=dict(title=dict(text="feature<br>value<br>(rank)", side="top"), thickness=12,
                                      tickvals=[0, SHADES], ticktext=["low", "high"], len=0.6))))
        if (~known).any():
            data.append(go.Scatter(x=x[~known], y=y[~known], mode="markers", showlegend=False, text=names[~known],
                                   customdata=raw[~known], hovertemplate=hover + "<extra>value not numeric</extra>",
                                   marker=dict(size=4, color=GREY, opacity=0.6)))
    fig = go.Figure(data)
    n = len(rows)
    title = title or f"Every customer's attribution per feature ({n:,} of {d.n_customers:,}, a seeded sample)"
    fig.update_yaxes(tickvals=list(range(len(shown))), ticktext=esc_all(_label(r.feature) for r in shown[::-1]),
                     range=[-0.6, len(shown) - 0.4], showgrid=False, zeroline=False)
    fig.update_xaxes(title="attribution (right: raises the prediction, left: lowers it)", zeroline=True,
                     zerolinecolor="#444", gridcolor="#eee")
    return layout(fig, title, height=max(320, 44 * len(shown) + 120))


def dependence(d, feature, *, max_points: int = MAX_POINTS, seed: int = 0, title: str | None = None) -> go.Figure:
    """A feature's value (x) against its attribution (y), one dot per customer of a seeded sample,
    coloured by the customer's prediction."""
    j = d.column(feature)
    f = d.features[j]
    rows = d.sample(max_points, seed)
    x, y, risk = d.values[rows, j], d.attributions[rows, j], d.prediction[rows]
    keep = np.isfinite(x) & np.isfinite(y)
    x, y, risk, ids = x[keep], y[keep], risk[keep], d.customers[rows][keep]
    x, y, risk = (np.asarray(a, np.float32) for a in (x, y, risk))  # half the bytes sent
    what = "value" if f.role == "static" else f"mean over {d.window_text}"
    hover = (f"customer %{{text}}<br>{_template_text(f.label)}: %{{x:.4g}}<br>attribution: %{{y:+.4g}}"
             "<br>prediction: %{marker.color:.3f}<extra></extra>")
    fig = go.Figure(go.Scatter(  # SVG: faster to draw than WebGL for a few thousand dots
        x=x, y=y, mode="markers", text=esc_all(ids), hovertemplate=hover,
        marker=dict(size=5, color=risk, colorscale="Cividis", cmin=0, cmax=max(1e-9, float(np.max(risk, initial=1))),
                    opacity=0.75, colorbar=dict(title=dict(text="prediction", side="top"), thickness=12))))
    fig.add_hline(y=0, line_color="#444", line_width=1)
    fig.update_xaxes(title=f"{esc(f.label)} ({what})", gridcolor="#eee")
    fig.update_yaxes(title="its attribution", gridcolor="#eee")
    title = title or f"How {f.label} drives the prediction ({keep.sum():,} of {d.n_customers:,} customers)"
    return layout(fig, title, height=380)


def _template_text(text) -> str:
    """Escaped ``text`` that a hover template shows as it is (a "%" would start a placeholder)."""
    return esc(text).replace("%", "&#37;")


def time_profile(profile, *, title: str | None = None) -> go.Figure:
    """Each period's share of the history's total |attribution| over every customer
    (``profile.shares``, padding: no data), oldest first; the last ``recent_periods`` periods,
    which hold 90 % of it, in the darker colour. The bars are the quantity the words count, so the
    colours agree with them: the dark bars add up to 90 % (a period where few customers have data
    is short, however large their effects; its mean per customer is in the hover)."""
    t = len(profile.periods)
    recent = profile.recent
    x = esc_all(profile.periods)
    before = profile.before_last
    shares = profile.shares
    hover = [f"{p} ({b} before the last)<br>share of the history's effect: {100 * h:.2f} %"
             f"<br>{'one of the recent periods holding 90 %' if r else 'before the recent periods holding 90 %'}"
             f"<br>mean |attribution| per customer with data: {m:.4g}<br>mean attribution: {s:+.4g}"
             f"<br>customers with data: {c:,}"
             for p, b, h, r, m, s, c in zip(x, before, shares, recent, np.nan_to_num(profile.mean_abs),
                                            np.nan_to_num(profile.mean_signed), profile.customers)]
    fig = go.Figure(go.Bar(x=x, y=100 * shares, marker_color=np.where(recent, "#54278f", "#cbc9e2").tolist(),
                           customdata=hover, hovertemplate="%{customdata}<extra></extra>", marker_line_width=0))
    fig.update_xaxes(type="category", title="period (dark: the recent periods holding 90 % of the effect)",
                     tickangle=-90 if t > 12 else 0, nticks=min(t, 24))
    fig.update_yaxes(title="% of the history's effect (all customers)", gridcolor="#eee", ticksuffix=" %")
    fig.update_layout(bargap=0 if t > 60 else 0.15)
    title = title or (f"The last {profile.recent_periods} of {t} periods hold 90 % of the history's effect"
                      + ("" if recent[profile.peak] else f"; the tallest bar, {profile.periods[profile.peak]}, "
                                                         "is before them"))
    return layout(fig, title, height=340)


def segments(d, top: int = TOP_RANKING, *, grouped: bool = False, title: str | None = None) -> go.Figure:
    """One column per segment (highest risk on the left), one row per feature (the ``top`` of the
    ranking, the largest at the top; ``grouped``: groups of related features as one row, their
    members' sums): the segment's mean attribution, on one symmetric diverging scale."""
    shown, z = d.segment_effects(grouped and bool(d.groups), top)  # z: (segments, rows)
    names = [f"{_wrap(s.name)}<br>{s.size:,} ({100 * s.share:.0f} %)" for s in d.segments]
    trace = heatmap_trace(names, [_label(f, d) for f in shown], z, zmax=symmetric_limit(z),
                          colorbar_title="Mean effect<br>in the segment<br>red: raises<br>blue: lowers")
    trace.update(hovertemplate="%{y}<br>segment: %{x}<br>mean attribution: %{z:+.4g}<extra></extra>", text=None)
    trace.update(x=names)  # already escaped, with line breaks
    fig = go.Figure(trace)
    fig.update_xaxes(tickangle=0, tickfont=dict(size=11))
    fig.update_yaxes(autorange="reversed")
    title = title or f"Churn-reason segments: each one's mean attribution per feature ({len(d.segments)} segments)"
    lines = max((name.count("<br>") + 1 for name in names), default=1)
    return layout(fig, title, height=max(320, 28 * len(shown) + 110 + 15 * lines))


def _wrap(text: str, width: int = 14) -> str:
    """Escaped ``text`` broken into lines of about ``width`` characters (at spaces) with <br>."""
    lines, line = [], ""
    for word in str(text).split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return "<br>".join(esc(x) for x in lines)


def segment_sizes(d, *, title: str | None = None) -> go.Figure:
    """Each segment's size (bars) and mean prediction (text, and the colour's darkness)."""
    names = [esc(s.name) for s in d.segments][::-1]
    sizes = [s.size for s in d.segments][::-1]
    risk = [s.mean_prediction for s in d.segments][::-1]
    churn = [s.churn_rate for s in d.segments][::-1]
    text = [f"mean prediction {r:.2f}" + (f" · churn rate {c:.0%}" if c is not None else "")
            for r, c in zip(risk, churn)]
    fig = go.Figure(go.Bar(x=sizes, y=names, orientation="h", text=text, textposition="auto",
                           marker=dict(color=risk, colorscale="Reds", cmin=0, cmax=1),
                           hovertemplate="%{y}<br>%{x:,} customers<br>%{text}<extra></extra>"))
    fig.update_xaxes(title="customers", gridcolor="#eee")
    return layout(fig, title or "Segment sizes (colour: mean prediction)", height=max(240, 46 * len(names) + 90))


def drift(result, top: int = TOP_RANKING, *, title: str | None = None) -> go.Figure:
    """The change of each feature's mean |attribution| since the earlier store (largest first),
    with its interval; red gained weight, blue lost it, grey within noise."""
    rows = result.rows[:top][::-1]
    change = np.array([r.change for r in rows])
    colours = [RED if r.low > 0 else BLUE if r.high < 0 else GREY for r in rows]
    fig = go.Figure(go.Bar(
        x=change, y=esc_all(_label(r.feature) for r in rows), orientation="h", marker_color=colours,
        error_x=dict(type="data", symmetric=False, array=[r.high - r.change for r in rows],
                     arrayminus=[r.change - r.low for r in rows], color="#444", thickness=1.2),
        customdata=[f"before {r.before:.4g}, now {r.after:.4g}<br>interval {r.low:+.4g} to {r.high:+.4g}"
                    + ("" if r.changed else "<br>within noise") for r in rows],
        hovertemplate="%{y}: %{x:+.4g}<br>%{customdata}<extra></extra>"))
    fig.add_vline(x=0, line_color="#444", line_width=1)
    fig.update_xaxes(title="change of mean |attribution| (now minus before)", gridcolor="#eee")
    title = title or (f"Drift: which drivers gained (red) or lost (blue) weight; grey: within noise "
                      f"({100 * result.level:.0f} % intervals over all features)")
    return layout(fig, title, height=max(300, 30 * len(rows) + 120))


class DriversFigures(NamedTuple):
    """The page's figures, in its order (``drift`` None without an earlier store)."""

    ranking: go.Figure
    beeswarm: go.Figure
    time_profiles: tuple
    segments: go.Figure
    segment_sizes: go.Figure
    drift: go.Figure | None


def figures(d, *, max_points: int = MAX_POINTS, seed: int = 0, grouped: bool = True) -> DriversFigures:
    """Every figure of a ``Drivers`` (what the page and the HTML report draw); ``grouped``: the
    ranking and the segments with groups of related features as one row (when there are groups)."""
    return DriversFigures(ranking(d, grouped=grouped), beeswarm(d, max_points=min(max_points, SWARM_POINTS), seed=seed),
                          tuple(time_profile(p) for p in d.time_profiles), segments(d, grouped=grouped),
                          segment_sizes(d), None if d.drift is None else drift(d.drift))
