"""The Diagnostics page's points chart (explain.plots.diagnostics.integration_points_figure): the
figure's spec holds the finished result's numbers exactly: f(alpha) as a line, the gradient points
as markers with their weights and panels in the hover, every other panel shaded."""

import numpy as np

from explain.core.points import PathLeg, PathPoints
from explain.plots.diagnostics import integration_points_figure
from tests.support.apptest import array

EVIL = "<img src=x onerror=alert(1)>"


def leg(name="joint", edges=(0.0, 0.3, 0.35, 0.4, 1.0), per_panel=4):
    edges = np.asarray(edges)
    alphas = np.linspace(0, 1, 17)
    lo, hi = edges[:-1, None], edges[1:, None]
    nodes = (np.arange(per_panel) + 0.5) / per_panel
    point_alphas = (lo + (hi - lo) * nodes).ravel()
    point_weights = np.repeat(np.diff(edges) / per_panel, per_panel)
    f = np.tanh  # any f: the figure draws what it is given
    return PathLeg(name=name, alphas=alphas, values=f(alphas), point_alphas=point_alphas, point_weights=point_weights,
                   point_values=f(point_alphas), point_panels=np.repeat(np.arange(len(edges) - 1), per_panel),
                   edges=edges, start=0.0, end=float(f(1.0)), delta=1e-5, limit=1e-4, gradient_points=40,
                   forward_points=30)


def result(legs):
    return PathPoints(legs={leg.name: leg for leg in legs}, steps="auto", method="gausslegendre", space_used="output",
                      target=0, tolerance=0.005, max_points=2048, samples=1)


def test_the_line_the_markers_and_the_panels_are_the_results_numbers():
    found = result([leg()])
    spec = integration_points_figure(found, y_title="churn (output)").to_plotly_json()
    line, markers = spec["data"]
    one = found.legs["joint"]
    assert line["mode"] == "lines" and markers["mode"] == "markers"
    np.testing.assert_array_equal(array(line["x"]), one.alphas)
    np.testing.assert_array_equal(array(line["y"]), one.values)
    np.testing.assert_array_equal(array(markers["x"]), one.point_alphas)
    np.testing.assert_array_equal(array(markers["y"]), one.point_values)
    custom = array(markers["customdata"])
    np.testing.assert_array_equal(custom[:, 0], one.point_weights)
    np.testing.assert_array_equal(custom[:, 1], one.point_panels + 1)
    assert all(word in markers["hovertemplate"] for word in ("alpha", "weight", "panel", "f %{y"))
    assert "(16 in 4 panels)" in markers["name"]
    shaded = [s for s in spec["layout"]["shapes"] if s["type"] == "rect"]
    assert [(s["x0"], s["x1"]) for s in shaded] == [(0.3, 0.35), (0.4, 1.0)]  # panels 2 and 4: every other one
    assert "alpha" in spec["layout"]["xaxis"]["title"]["text"]


def test_one_panel_is_not_shaded_and_per_input_legs_get_a_row_each():
    found = result([leg("static", edges=(0.0, 1.0), per_panel=8), leg(EVIL, edges=(0.0, 0.5, 1.0))])
    spec = integration_points_figure(found).to_plotly_json()
    assert len(spec["data"]) == 4
    titles = [a["text"] for a in spec["layout"]["annotations"]]
    assert titles[0] == "static moves (the other inputs at the customer's values): 8 gradient points in 1 panel"
    assert titles[1].endswith(": 8 gradient points in 2 panels")
    assert [t["showlegend"] for t in spec["data"]] == [True, True, False, False]
    assert [t["xaxis"] for t in spec["data"]] == ["x", "x", "x2", "x2"]
    shaded = [s for s in spec["layout"]["shapes"] if s["type"] == "rect"]
    assert [(s["x0"], s["x1"], s["xref"]) for s in shaded] == [(0.5, 1.0, "x2")]  # the second leg's second panel
    text = str(spec)
    assert EVIL not in text and "&lt;img" in text  # an input's name is escaped
