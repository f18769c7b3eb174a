"""What the What drives churn page sends for 100,000 customers (issue 42): its figures, as the browser gets them
(``ui.speed.spec``), stay within a byte budget; the beeswarm is drawn as SVG with its hover built in the browser
from the numbers; the numbers sent (attributions, values, colour ranks, customer ids) are the ones computed here
from the result's arrays."""

import json

import numpy as np
import plotly.io as pio
import pytest

from explain.analysis import drivers as D
from explain.batch.store import Rows
from explain.plots import drivers as plots
from tests.support.apptest import array
from ui import speed

N = 100_000
PERIODS = tuple(f"2024-{m:02d}" for m in range(1, 13))
LAYOUT = D.Layout((("profile", "static", tuple(f"s{j}" for j in range(9)), tuple(f"Static {j} %" for j in range(9)),
                    None),
                   ("months", "temporal", tuple(f"h{j}" for j in range(6)), tuple(f"History {j}" for j in range(6)),
                    PERIODS)))
# measured here 2026-12-06: beeswarm 86 KB (2,500 SVG dots; 8,000 WebGL dots: about 275 KB), dependence 32 KB (1,000
# dots; was 1,500), ranking 3.7, segments 3.5; bench/drivers_payload.py on bench/drivers.py's 100,000: 324.1 -> 122.6 KB
BUDGET_KB = {"beeswarm": 100, "dependence": 40, "ranking": 8, "segments": 8, "time": 8, "total": 160}


@pytest.fixture(scope="module")
def result():
    rng = np.random.default_rng(4)
    sa, ha = rng.normal(size=(N, 9)), rng.normal(0, 0.05, size=(N, 12, 6))
    sa[: N // 2, 0] += 2  # two reasons
    ha[N // 2:, -3:, 1] += 0.5
    sv, hv = rng.normal(size=(N, 9)), rng.poisson(2.0, size=(N, 12, 6)).astype(float)
    sv[rng.uniform(size=N) < 0.01, 3] = np.nan  # a text value here and there: no colour, drawn grey
    ids = np.array([f"C{i:06d}" for i in range(N)], dtype=object)
    return D.compute(None, Rows(ids, rng.uniform(size=N), {"profile": sv, "months": hv}, {"profile": sa, "months": ha}),
                     layout=LAYOUT)


def _sent(fig) -> tuple[dict, float]:
    text = pio.to_json(speed.spec(fig), validate=False)  # what Streamlit sends (st.plotly_chart)
    return json.loads(text), len(text) / 1024


def test_the_pages_figures_for_100000_customers_are_sent_within_budget(result):
    shown = {"beeswarm": plots.beeswarm(result), "dependence": plots.dependence(result, result.ranking[0].feature.name),
             "ranking": plots.ranking(result, grouped=True), "segments": plots.segments(result, grouped=True),
             "time": plots.time_profile(result.time_profiles[0])}
    sizes = {name: _sent(fig)[1] for name, fig in shown.items()}
    sizes["total"] = sum(sizes.values())
    assert all(sizes[name] < BUDGET_KB[name] for name in sizes), sizes
    wire, _ = _sent(shown["beeswarm"])
    assert {t["type"] for t in wire["data"]} == {"scatter"}  # SVG: no WebGL context to start


def test_the_beeswarm_sends_the_numbers_computed_here(result):
    wire, _ = _sent(plots.beeswarm(result))
    rows = result.sample(plots.SWARM_POINTS, 0)  # the seeded sample, in row order
    assert len(rows) == plots.SWARM_POINTS
    assert f"({plots.SWARM_POINTS:,} of {N:,}, a seeded sample)" in wire["layout"]["title"]["text"]
    shown = result.ranking[:plots.TOP_FEATURES]
    traces = wire["data"]
    for position, r in enumerate(shown):
        row = len(shown) - 1 - position
        mine = [t for t in traces if np.all(np.abs(array(t["y"]) - row) <= plots.SWARM_HEIGHT + 1e-6)]
        j = result.column(r.feature)
        x_ref, v_ref, ids_ref = result.attributions[rows, j], result.values[rows, j], result.customers[rows]
        numeric = np.isfinite(v_ref)
        order = v_ref[numeric].argsort(kind="stable").argsort(kind="stable")  # rank among the numeric values
        shade_ref = np.round(order / (numeric.sum() - 1) * 255)
        coloured, grey = mine[0], mine[1:]
        assert coloured["marker"]["color"]["dtype"] == "u1" and coloured["marker"]["cmax"] == 255
        assert "text" in coloured and len(coloured["text"]) == numeric.sum()  # the ids, the only text per dot
        assert list(coloured["text"]) == list(ids_ref[numeric])
        np.testing.assert_allclose(array(coloured["x"]), x_ref[numeric], rtol=1e-6)  # float32
        np.testing.assert_allclose(array(coloured["customdata"]), v_ref[numeric], rtol=1e-6)
        np.testing.assert_array_equal(array(coloured["marker"]["color"]), shade_ref)
        assert coloured["hovertemplate"].startswith("customer %{text}<br>") and \
            f"{r.feature.label.replace('%', '&#37;')}: %{{customdata:.4g}}" in coloured["hovertemplate"]
        assert len(grey) == (not numeric.all()) and all(list(g["text"]) == list(ids_ref[~numeric]) for g in grey)
