"""The Customer page's figure dicts (explain.plots.figures.*_spec) against the graph-object builders
they replace (a copy of the old code below): the same figure, key for key; and the compact dict
ui.speed sends for them, with the template ui.speed.spec trims for a go.Figure."""

import base64
import math

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

import explain
from explain.analysis.diagnostics import shown_baseline
from explain.analysis.explainer import explain_customers
from explain.core.settings import Settings
from explain.core.text import unit_after
from explain.plots import figures
from explain.plots.periods import history_span, history_ticks
from explain.plots.style import (
    ATTRIBUTION_TITLE,
    DIVERGING,
    FONT,
    GREY,
    esc,
    esc_all,
    fmt,
    signed_colours,
    symmetric_limit,
    units_for,
)
from tests.conftest import DEMO
from ui import cache, speed

NO_DATA, NO_DATA_TEXT = figures.NO_DATA, figures.NO_DATA_TEXT
_signed_colours, _units_for = signed_colours, units_for  # the old code's names


# ----------------------------------------------------------------------------- the old builders (reference)


def old_layout(fig: go.Figure, title: str | None, height: int, **extra) -> go.Figure:
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    fig.update_layout(
        title=dict(text=esc(title) if title else None, x=0, xanchor="left", font=dict(size=15)),
        height=height, margin=dict(l=10, r=10, t=50 if title else 20, b=10), font=FONT,
        plot_bgcolor="white", hoverlabel=dict(align="left"), **extra,
    )
    return fig
def old_static_bars(labels, attributions, values, *, units=None, baseline=None, title=None,
                x_title: str = "Effect on the prediction") -> go.Figure:
    """Signed horizontal bars sorted by value: the largest raise at the top, the largest cut at the bottom.

    labels: (S,) display names; attributions, values, baseline: (S,); units: (S,) or None.
    The tick of each bar shows the customer's raw value; hover adds the baseline value.
    """
    attributions = np.asarray(attributions, np.float64)
    values = [v if isinstance(v, str) else float(v) for v in values]  # a category may be text
    base = np.full(len(values), np.nan) if baseline is None else np.asarray(baseline, np.float64)
    units = _units_for(labels, units)
    order = np.argsort(attributions, kind="stable")  # ascending: plotly draws the first at the bottom
    ticks, hover = [], []
    for j in order:
        name = esc(labels[j])
        shown = esc(values[j]) if isinstance(values[j], str) else fmt(values[j], units[j])
        tick = esc(values[j]) if isinstance(values[j], str) else fmt(values[j], unit_after(labels[j], units[j]))
        ticks.append(f"{name} = {tick}")
        hover.append(f"<b>{name}</b><br>customer: {shown}"
                     f"<br>baseline: {fmt(base[j], units[j])}<br>attribution: {attributions[j]:+.4g}")
    fig = go.Figure(go.Bar(
        x=attributions[order], y=ticks, orientation="h", marker_color=_signed_colours(attributions[order]),
        text=[f"{a:+.3f}" for a in attributions[order]], textposition="outside", cliponaxis=False,
        customdata=hover, hovertemplate="%{customdata}<extra></extra>",
    ))
    m = symmetric_limit(attributions)
    fig.update_xaxes(title=x_title, range=[-1.5 * m, 1.5 * m], zeroline=True, zerolinecolor="#444",
                     gridcolor="#eee")
    fig.update_yaxes(automargin=True)
    fig = old_layout(fig, title, height=max(260, 34 * len(ticks) + 90), showlegend=False)
    fig.update_layout(margin_r=30)
    return fig


def old__cell_hover(features, values, baseline, units):
    """The cells' hover as the browser builds it (issue 42: no text per cell): customdata (F, T, k) float32 of
    the value and baseline given, one template, each row's unit after its numbers (the cells' text when the
    rows' units differ)."""
    shown = [u if u and u != "0/1" else "" for u in units]
    unit = (f" {esc(shown[0])}" if shown and shown[0] else "") if len(set(shown)) <= 1 else " %{text}"
    given = [(name, x) for name, x in (("value", values), ("baseline", baseline)) if x is not None]
    lines = ["period: %{x}", "feature: <b>%{y}</b>"]
    lines += [f"{name}: %{{customdata[{k}]:.4g}}{unit}" for k, (name, _) in enumerate(given)]
    out = dict(hovertemplate="<br>".join(lines + ["attribution: %{z:+.4g}"]) + "<extra></extra>")
    if given:
        out["customdata"] = np.stack([np.asarray(x, np.float32).T for _, x in given], axis=-1)
    if len(set(shown)) > 1:
        out["text"] = [[esc(u) for _ in range(len(given[0][1]))] for u in shown]
    return out


def old_heatmap_trace(periods, features, attributions, *, values=None, baseline=None, units=None,
                  zmax: float | None = None, colorbar_title: str = ATTRIBUTION_TITLE,
                  colorscale: str = DIVERGING, zmin: float | None = None, colorbar: dict | None = None,
                  padding=None) -> go.Heatmap:
    """A period x feature heatmap trace (periods on x, features on y) of ``attributions`` (T, F).

    Diverging (the default): centred on zero, limits [-zmax, zmax] (zmax defaults to the
    largest |attribution|; pass one zmax to every figure that is compared). ``padding`` (T,)
    bool: padded periods are left empty here (``no_data_trace`` draws them grey).
    """
    attributions = np.asarray(attributions, np.float64)
    padding = None if padding is None or not np.any(padding) else np.asarray(padding, bool)
    values = None if values is None else np.asarray(values, np.float64)
    baseline = None if baseline is None else np.asarray(baseline, np.float64)
    units = _units_for(features, units)
    m = float(zmax) if zmax is not None else symmetric_limit(attributions)
    low = -m if zmin is None else float(zmin)
    bar = dict(title=dict(text=colorbar_title, side="top"), thickness=14, len=0.9)
    bar.update(colorbar or {})
    scale = dict(zmin=low, zmax=m, zmid=0.0) if colorscale == DIVERGING else dict(zmin=low, zmax=m)
    z = attributions.T if padding is None else np.where(padding[None, :], np.nan, attributions.T)
    return go.Heatmap(
        z=z, x=esc_all(periods), y=esc_all(features), colorscale=colorscale, **scale,
        colorbar=bar, xgap=1, ygap=1, hoverongaps=False, **old__cell_hover(features, values, baseline, units),
    )


def old_no_data_trace(periods, features, padding) -> go.Heatmap | None:
    """Grey cells at the padded periods (T,) bool of a history, drawn under its heatmap; None
    when nothing is padded."""
    if padding is None or not np.any(padding):
        return None
    pad = np.asarray(padding, bool)
    z = np.where(np.broadcast_to(pad[None, :], (len(features), len(pad))), 1.0, np.nan)
    return go.Heatmap(z=z, x=esc_all(periods), y=esc_all(features), zmin=0.0, zmax=1.0, showscale=False,
                      colorscale=[[0.0, NO_DATA], [1.0, NO_DATA]], name="no data", xgap=1, ygap=1,
                      hovertemplate=f"period: %{{x}}<br>%{{y}}<br>{NO_DATA_TEXT}<extra></extra>", hoverongaps=False)


def old_temporal_panel(periods, features, attributions, *, values=None, baseline=None, units=None,
                   zmax: float | None = None, title: str | None = None, padding=None) -> go.Figure:
    """The heatmap with its totals beside it: per period above, per feature on the right.

    The totals are sums of the signed attributions (same colours: red raises, blue lowers).
    Padded periods (``padding`` (T,) bool) are grey, "no data".
    """
    attributions = np.asarray(attributions, np.float64)
    px, fy = esc_all(periods), esc_all(features)
    fig = make_subplots(rows=2, cols=2, column_widths=[0.8, 0.2], row_heights=[0.24, 0.76],
                        shared_xaxes=True, shared_yaxes=True, horizontal_spacing=0.015, vertical_spacing=0.03,
                        subplot_titles=("total per period", "", "", "total per feature"))
    grey = old_no_data_trace(periods, features, padding)
    if grey is not None:
        fig.add_trace(grey, row=2, col=1)
    fig.add_trace(old_heatmap_trace(periods, features, attributions, values=values, baseline=baseline, units=units,
                                zmax=zmax, colorbar=dict(x=1.02, y=0.38, len=0.76, yanchor="middle"),
                                padding=padding), row=2, col=1)
    per_period = attributions.sum(axis=1)
    per_feature = attributions.sum(axis=0)
    fig.add_trace(go.Bar(x=px, y=per_period, marker_color=_signed_colours(per_period),
                         hovertemplate="period %{x}<br>total: %{y:+.4g}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=per_feature, y=fy, orientation="h", marker_color=_signed_colours(per_feature),
                         hovertemplate="%{y}<br>total: %{x:+.4g}<extra></extra>"), row=2, col=2)
    fig.update_yaxes(autorange="reversed", automargin=True, row=2)
    fig.update_xaxes(type="category", row=2, col=1, title="period", tickangle=-90)  # upright: no overlap on a phone
    fig.update_xaxes(type="category", row=1, col=1)
    fig.update_yaxes(zeroline=True, zerolinecolor="#444", gridcolor="#eee", row=1, col=1)
    fig.update_xaxes(zeroline=True, zerolinecolor="#444", gridcolor="#eee", row=2, col=2)
    fig.update_annotations(font=dict(size=12, color="#555"))
    return old_layout(fig, title, height=max(380, 44 * len(features) + 230), showlegend=False)


def old_history_figure(periods, labels, values, *, baseline=None, units=None, title: str | None = None,
                   columns: int = 3) -> go.Figure:
    """The customer's raw monthly history, one small chart per feature (each in its own unit).

    values, baseline: (T, F). The baseline, when given, is drawn dashed in grey.
    """
    values = np.asarray(values, np.float64)
    f = values.shape[1]
    units = _units_for(labels, units)
    cols = min(columns, f)
    rows = int(math.ceil(f / cols))
    names = [f"{esc(labels[j])}" + (f" ({esc(units[j])})" if units[j] and units[j] not in str(labels[j]) else "")
             for j in range(f)]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=names, horizontal_spacing=0.08,
                        vertical_spacing=min(0.12, 0.3 / rows) if rows > 1 else 0.1)
    x = esc_all(periods)
    mode = "lines+markers" if len(x) <= 60 else "lines"  # since issue 38: lines only past 60 periods
    for j in range(f):
        r, c = j // cols + 1, j % cols + 1
        fig.add_trace(go.Scatter(x0=x[0], dx=1, y=values[:, j], mode=mode, line=dict(color="#333"),
                                 name="customer", showlegend=j == 0, legendgroup="customer",
                                 hovertemplate=f"{names[j]}<br>%{{x}}: %{{y:.4g}}<extra>customer</extra>"),
                      row=r, col=c)
        if baseline is not None:
            fig.add_trace(go.Scatter(x0=x[0], dx=1, y=np.asarray(baseline, np.float64)[:, j], mode="lines",
                                     line=dict(color=GREY, dash="dash"), name="baseline", showlegend=j == 0,
                                     legendgroup="baseline",
                                     hovertemplate=f"{names[j]}<br>%{{x}}: %{{y:.4g}}<extra>baseline</extra>"),
                          row=r, col=c)
    # since issue 38: a few short ticks fitting a narrow chart, written under the last chart of each column;
    # empty cells hidden; long chart names and titles wrapped; the history's span once under the charts
    chart_px = figures.HISTORY_PX * (1 - 0.08 * (cols - 1)) / cols
    ticks = history_ticks(periods, chart_px)
    for j in range(rows * cols):
        r, c = j // cols + 1, j % cols + 1
        if j >= f:
            fig.update_xaxes(visible=False, row=r, col=c)
            fig.update_yaxes(visible=False, row=r, col=c)
            continue
        # since issue 42: the periods once, the first chart's categories, which the other charts' axes match
        fig.update_xaxes(**(dict(categoryorder="array", categoryarray=x) if j == 0 else dict(matches="x")),
                         row=r, col=c)
        fig.update_xaxes(type="category", tickmode="array", tickvals=[x[i] for i in ticks.indices],
                         ticktext=esc_all(ticks.texts), tickangle=0, tickfont=dict(size=10),
                         ticklabelposition="outside right", ticks="outside", ticklen=4, showticklabels=j + cols >= f,
                         showgrid=True, gridcolor="#f2f2f2", row=r, col=c)
        fig.update_yaxes(gridcolor="#eee", rangemode="tozero", automargin=True, row=r, col=c)
    more = 0
    for note in fig.layout.annotations:
        parts = figures.wrapped(note.text, max(8, int(chart_px // 6.8)))
        note.update(text="<br>".join(parts), font=dict(size=12))
        more = max(more, 15 * (len(parts) - 1))
    heading = figures.wrapped(title) if title else []
    height = 170 * rows + 80 + more + 20 * max(0, len(heading) - 1) + 24
    old_layout(fig, title, height=height, showlegend=False)
    fig.add_annotation(text=esc(history_span(periods)), xref="paper", yref="paper", x=0.5, y=0, xanchor="center",
                       yanchor="top", yshift=-20, showarrow=False, font=dict(size=11, color="#555"))
    if heading:
        fig.update_layout(title=dict(text="<br>".join(esc(line) for line in heading), yref="container",
                                     y=1 - 28 / height, yanchor="bottom"))
    fig.update_layout(margin=dict(b=34, t=(8 + 20 * len(heading) + 6 if heading else 10) + more + 20))
    return fig




# ----------------------------------------------------------------------------- comparing figure dicts


def decoded(value):
    """A figure dict with Plotly's typed arrays ({"dtype", "bdata", "shape"}) as numpy arrays."""
    if isinstance(value, dict) and "bdata" in value and "dtype" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        return flat.reshape([int(n) for n in str(value.get("shape", len(flat))).split(",")])
    if isinstance(value, dict):
        return {k: decoded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [decoded(v) for v in value]
    return value


def assert_same(mine, theirs, where="figure", rtol=1e-12):
    """Equal key for key and item for item: numbers in arrays within ``rtol`` (NaN where NaN),
    everything else exactly (same type too)."""
    if isinstance(theirs, np.ndarray) or isinstance(mine, np.ndarray):
        assert isinstance(mine, np.ndarray) and isinstance(theirs, np.ndarray), where
        assert mine.shape == theirs.shape, where
        np.testing.assert_allclose(mine.astype(np.float64), theirs.astype(np.float64), rtol=rtol, atol=0,
                                   equal_nan=True, err_msg=where)
    elif isinstance(theirs, dict):
        assert isinstance(mine, dict), where
        assert set(mine) == set(theirs), f"{where}: {sorted(set(mine) ^ set(theirs))}"
        for key in theirs:
            assert_same(mine[key], theirs[key], f"{where}.{key}", rtol)
    elif isinstance(theirs, list):
        assert isinstance(mine, list) and len(mine) == len(theirs), where
        for k, (a, b) in enumerate(zip(mine, theirs)):
            assert_same(a, b, f"{where}[{k}]", rtol)
    else:
        assert type(mine) is type(theirs) and mine == theirs, f"{where}: {mine!r} != {theirs!r}"


def without_template(figure: dict) -> dict:
    return {"data": figure["data"], "layout": {k: v for k, v in figure["layout"].items() if k != "template"}}


def check(spec: dict, old: go.Figure) -> None:
    """``spec`` is the old figure's dict (no template); go.Figure(spec) is the old figure."""
    expected = decoded(old.to_dict())
    assert "template" not in spec["layout"]
    assert all("type" in trace for trace in spec["data"])
    assert_same(decoded(spec), without_template(expected), "spec")
    assert_same(decoded(go.Figure(spec).to_dict()), expected, "go.Figure(spec)")


def check_speed(spec: dict) -> None:
    """The compact dict of ``spec``: the template ui.speed.spec trims for the go.Figure, the same
    traces (float32 numbers), typed arrays, the spec itself untouched."""
    before = decoded(spec)
    sent, reference = speed.spec(spec), speed.spec(go.Figure(spec))
    assert sent["layout"]["template"] == reference["layout"]["template"]
    assert_same(decoded(sent), decoded(reference), "sent", rtol=1e-6)
    assert not any(isinstance(v, np.ndarray) for trace in sent["data"] for v in trace.values())
    assert_same(decoded(spec), before, "the spec after speed.spec")


# ----------------------------------------------------------------------------- cases


@pytest.fixture(scope="module")
def demo():
    bundle = explain.load_bundle(DEMO)
    cid = str(bundle.ids[3])
    settings = Settings()
    a = explain_customers(bundle, [cid], settings)
    return bundle, cid, a, bundle.inputs_for([cid]), shown_baseline(bundle, cid, settings.resolved(bundle.output_names))


def demo_args(demo, with_baseline: bool):
    bundle, cid, a, inputs, base = demo
    units_s = [bundle.units.get(c) for c in bundle.static_features]
    units_t = [bundle.units.get(c) for c in bundle.temporal_features]
    panel = ((bundle.periods, bundle.temporal_labels, a.temporal[0]),
             dict(values=inputs["temporal"][0], baseline=base["temporal"] if with_baseline else None, units=units_t,
                  title="Monthly features: effect of each feature in each period"))
    bars = ((bundle.static_labels, a.static[0], inputs["static"][0]),
            dict(units=units_s, baseline=base["static"] if with_baseline else None,
                 title="Static features (label: the customer's value)"))
    history = ((bundle.periods, bundle.temporal_labels, inputs["temporal"][0]),
               dict(baseline=base["temporal"] if with_baseline else None, units=units_t, columns=2,
                    title="The customer's monthly history (dashed: the baseline)"))
    return panel, bars, history


def synthetic_args(seed: int, t: int, f: int, s: int, *, padded: int, with_baseline: bool, columns: int,
                   title, units_as: str):
    """Unlike the demo: other sizes, names and units with HTML special characters, padded periods."""
    rng = np.random.default_rng(seed)
    periods = [f"w<{k}>&{k}" for k in range(t)]
    features = [f"<b>&f{j}</b>" if j % 2 == 0 else f"$f{j}$ 'q' \"d\"" for j in range(f)]
    statics = [f"s{j} <i>&</i>" for j in range(s)]
    attr = rng.normal(size=(t, f)) * 0.1
    attr[:, 0] = 0.0  # an all-zero feature: grey bars
    values = rng.uniform(0, 100, size=(t, f))
    base = rng.uniform(0, 100, size=(t, f)) if with_baseline else None
    s_attr = rng.normal(size=s) * 0.2
    s_values = [float(v) for v in rng.uniform(0, 5, size=s)]
    s_values[0] = "<cat> & dog"  # a category shown by its text
    s_base = rng.uniform(0, 5, size=s) if with_baseline else None
    unit_t = [["GB", "<u>", None, "0/1", "calls"][j % 5] for j in range(f)]
    unit_s = [["months", None, "€ & <b>"][j % 3] for j in range(s)]
    if units_as == "dict":
        unit_t, unit_s = dict(zip(features, unit_t)), dict(zip(statics, unit_s))
    elif units_as == "none":
        unit_t = unit_s = None
    padding = np.arange(t) < padded
    panel = ((periods, features, attr),
             dict(values=values, baseline=base, units=unit_t, title=title, padding=padding,
                  zmax=None if seed % 2 else 0.5))
    bars = ((statics, s_attr, s_values), dict(units=unit_s, baseline=s_base, title=title))
    history = ((periods, features, values), dict(baseline=base, units=unit_t, columns=columns, title=title))
    return panel, bars, history


SYNTHETIC = {
    "7x5, 2 padded, baseline, units": dict(seed=1, t=7, f=5, s=4, padded=2, with_baseline=True, columns=3,
                                           title="<b>Title</b> & $x$", units_as="list"),
    "7x5, no baseline, units by name": dict(seed=2, t=7, f=5, s=4, padded=0, with_baseline=False, columns=2,
                                            title=None, units_as="dict"),
    "24x8, 1 padded, no units": dict(seed=3, t=24, f=8, s=12, padded=1, with_baseline=True, columns=3,
                                     title="t", units_as="none"),
    "2x1, all padded": dict(seed=4, t=2, f=1, s=1, padded=2, with_baseline=False, columns=3, title="", units_as="list"),
}


def cases(demo):
    out = {f"demo, baseline {given}": demo_args(demo, given) for given in (True, False)}
    out.update({name: synthetic_args(**kw) for name, kw in SYNTHETIC.items()})
    return out


BUILDERS = {
    "temporal_panel": (0, figures.temporal_panel_spec, old_temporal_panel, figures.temporal_panel),
    "static_bars": (1, figures.static_bars_spec, old_static_bars, figures.static_bars),
    "history": (2, figures.history_spec, old_history_figure, figures.history_figure),
}


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_figure_spec_is_the_old_figure(demo, builder):
    index, new_spec, old, new = BUILDERS[builder]
    for name, args in cases(demo).items():
        positional, keywords = args[index]
        spec = new_spec(*positional, **keywords)
        try:
            check(spec, old(*positional, **keywords))
            assert_same(decoded(new(*positional, **keywords).to_dict()),
                        decoded(old(*positional, **keywords).to_dict()))
        except AssertionError as error:
            raise AssertionError(f"{builder}, {name}: {error}") from error


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_figure_spec_speed_dict_has_the_trimmed_template(demo, builder):
    index, new_spec, _, _ = BUILDERS[builder]
    for name, args in cases(demo).items():
        positional, keywords = args[index]
        try:
            check_speed(new_spec(*positional, **keywords))
        except AssertionError as error:
            raise AssertionError(f"{builder}, {name}: {error}") from error


def test_figure_spec_each_call_is_a_fresh_dict():
    """The cached subplot grid is copied: changing one figure's dict changes no other."""
    first = figures.temporal_panel_spec(["a", "b"], ["x"], np.ones((2, 1)))
    first["layout"]["xaxis"]["domain"][0] = 0.5
    first["layout"]["annotations"][0]["text"] = "changed"
    second = figures.temporal_panel_spec(["a", "b"], ["x"], np.ones((2, 1)))
    assert second["layout"]["xaxis"]["domain"][0] == 0.0
    assert second["layout"]["annotations"][0]["text"] == "total per period"


def test_figure_trace_dicts_are_the_old_traces():
    rng = np.random.default_rng(5)
    a, pad = rng.normal(size=(4, 3)), [True, False, True, False]
    new = figures.heatmap_trace(list("abcd"), ["<x>", "y", "z"], a, values=a, padding=pad, colorscale="Purples",
                                zmin=0.0, zmax=2.0)
    old = old_heatmap_trace(list("abcd"), ["<x>", "y", "z"], a, values=a, padding=pad, colorscale="Purples",
                            zmin=0.0, zmax=2.0)
    assert_same(decoded(new.to_plotly_json()), decoded(old.to_plotly_json()))
    assert_same(decoded(figures.no_data_trace(list("abcd"), ["x"], pad).to_plotly_json()),
                decoded(old_no_data_trace(list("abcd"), ["x"], pad).to_plotly_json()))
    assert figures.no_data_trace(list("ab"), ["x"], [False, False]) is None


def test_figure_speed_figures_takes_dicts(demo, monkeypatch):
    bundle, cid, a, inputs, base = demo
    settings = Settings().resolved(bundle.output_names)
    panel, bars, history = demo_args(demo, True)
    specs = (figures.temporal_panel_spec(*panel[0], **panel[1]), figures.static_bars_spec(*bars[0], **bars[1]),
             figures.history_spec(*history[0], **history[1]))
    built, shown = cache.figures(bundle, "test-specs", cid, settings, lambda: specs)
    assert all(isinstance(b, dict) for b in built)  # downloads: go.Figure(d)
    for spec, sent in zip(specs, shown):
        assert isinstance(sent, speed.Spec)
        assert sent.to_dict()["layout"]["template"] == speed.spec(go.Figure(spec))["layout"]["template"]
    monkeypatch.setenv(speed.SPEED_ENV, "off")  # the old path: what Plotly makes
    built, shown = cache.figures(bundle, "test-specs", cid, settings, lambda: specs)
    assert shown == built and all(type(f) is go.Figure for f in built)
    for spec, fig in zip(specs, built):
        assert_same(decoded(fig.to_dict()), decoded(go.Figure(spec).to_dict()))


def test_figure_speed_typed_arrays_are_plotlys():
    from _plotly_utils.utils import convert_to_base64

    rng = np.random.default_rng(6)
    trace = {"type": "heatmap", "z": rng.normal(size=(3, 4)), "x": rng.normal(size=5).astype(np.float32),
             "ids": np.arange(4, dtype=np.int64), "customdata": np.arange(3, dtype=np.int32), "y": np.zeros(0),
             "marker": {"color": rng.normal(size=2)}, "text": [["a", "b"]], "range": np.ones(2)}
    expected = speed._compact(trace)
    convert_to_base64(expected)
    assert_same(speed._compact(trace, typed=True), expected)


def changed_keys(before: dict, after: dict) -> set:
    return {k for k in set(before) | set(after) if k not in before or k not in after
            or repr(before[k]) != repr(after[k])}


@pytest.mark.parametrize("builder", ["temporal_panel", "history"])
def test_figure_go_builders_keep_the_subplot_grid(demo, builder):
    """temporal_panel / history_figure carry make_subplots' grid: update_xaxes(row=, col=),
    get_subplot and add_trace(row=, col=) do on them what they do on the old make_subplots figure."""
    index, new_spec, old, new = BUILDERS[builder]
    for name, args in cases(demo).items():
        positional, keywords = args[index]
        mine, theirs = new(*positional, **keywords), old(*positional, **keywords)
        try:
            assert mine._grid_str == theirs._grid_str and mine._grid_ref == theirs._grid_ref
            rows, cols = len(theirs._grid_ref), len(theirs._grid_ref[0])
            for r in range(1, rows + 1):
                for c in range(1, cols + 1):
                    got, expected = mine.get_subplot(r, c), theirs.get_subplot(r, c)
                    assert (got.xaxis.plotly_name, got.yaxis.plotly_name) == \
                           (expected.xaxis.plotly_name, expected.yaxis.plotly_name)
                    assert got == expected
            row = min(2, rows)
            changed = []
            for fig in (mine, theirs):
                before = decoded(fig.to_dict()["layout"])
                fig.update_xaxes(title="x", row=row, col=1)
                changed.append(changed_keys(before, decoded(fig.to_dict()["layout"])))
            assert changed[0] == changed[1] and len(changed[0]) == 1, changed
            assert mine.layout[changed[0].pop()].title.text == "x"
            for fig in (mine, theirs):
                fig.add_trace(go.Scatter(x=[0, 1], y=[1, 2], name="added"), row=1, col=1)
            assert (mine.data[-1].xaxis, mine.data[-1].yaxis) == (theirs.data[-1].xaxis, theirs.data[-1].yaxis)
            assert_same(decoded(mine.to_dict()), decoded(theirs.to_dict()))
            assert "_grid_ref" not in new_spec(*positional, **keywords)  # the dashboard's dict: no grid
        except AssertionError as error:
            raise AssertionError(f"{builder}, {name}: {error}") from error
    # the cached grid is shared, never changed: a fresh figure still has the old one's
    fresh, reference = new(*positional, **keywords), old(*positional, **keywords)
    assert fresh._grid_ref == reference._grid_ref and fresh._grid_str == reference._grid_str
