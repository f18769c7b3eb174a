"""The x values a Plotly trace draws on a category axis, read as plotly.js reads them (issue 42: the history's
lines carry no x; their periods are the categories of the first chart's axis, which the others match)."""

from __future__ import annotations

from tests.support.apptest import array


def axis_of(layout: dict, trace: dict) -> dict:
    """The layout's x axis of ``trace`` ("x2" -> layout["xaxis2"])."""
    name = trace.get("xaxis", "x")
    return layout.get("xaxis" + name[1:], {})


def categories(layout: dict, trace: dict) -> list:
    """The categories of the trace's x axis, in order: its ``categoryarray``, or that of the axis it matches."""
    axis = axis_of(layout, trace)
    if "matches" in axis:
        axis = layout["xaxis" + axis["matches"][1:]]
    assert axis.get("categoryorder") == "array", "the axis holding the periods keeps them in the order given"
    return list(axis["categoryarray"])


def drawn_x(spec: dict, trace: dict) -> list:
    """The x of each point of ``trace``: its ``x`` when it has one, else (``x0``, ``dx``) counted along the
    categories of its axis, one per y value (plotly.js: calc positions x0's index + i * dx)."""
    if "x" in trace:
        return list(trace["x"])
    cats = categories(spec["layout"], trace)
    start, step = cats.index(trace["x0"]), trace.get("dx", 1)
    return [cats[start + i * step] for i in range(len(array(trace["y"])))]
