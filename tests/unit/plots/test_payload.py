"""What a 365-day customer switch sends (issue 42): the Customer page's heatmap panel and history of a padded
year of days x 24 features, as the browser gets them (``ui.speed.spec``), stay within a byte budget; the hover
is built in the browser from the numbers (no text per cell); the numbers sent are the ones computed here."""

import json

import numpy as np
import pandas as pd

from explain.plots import figures
from explain.plots import periods as P
from tests.support.apptest import array
from tests.support.plotly_x import drawn_x
from ui import speed

DAYS = [d.strftime("%Y-%m-%d") for d in pd.date_range("2024-01-01", periods=365)]
FEATURES = [f"daily_{j:02d}" for j in range(24)]
BUDGET_KB = {"panel": 40, "history": 35}  # measured 22.3 and 23.8 KB (2026-12-06); 87.8 and 36.2 KB before


def _year():
    rng = np.random.default_rng(3)
    pad = np.arange(365) < 100  # a customer who joined in April: padded at the start
    a = np.where(pad[:, None], 0.0, rng.normal(0, 0.01, size=(365, 24)))
    values = np.where(pad[:, None], np.nan, rng.uniform(0, 50, size=(365, 24)))
    base = np.where(pad[:, None], np.nan, rng.uniform(0, 50, size=(365, 24)))
    return a, values, base, pad


def _sent(fig) -> tuple[dict, float]:
    wire = json.loads(json.dumps(speed.spec(fig), default=str))
    return wire, len(json.dumps(wire, separators=(",", ":"))) / 1024


def test_a_year_of_days_is_sent_small_with_its_numbers():
    a, values, base, pad = _year()
    plan = P.heatmap_plan(DAYS, FEATURES, a, padding=pad)
    panel, panel_kb = _sent(figures.temporal_panel_spec(DAYS, FEATURES, a, values=values, baseline=base,
                                                        plan=plan, title="t"))
    history, history_kb = _sent(figures.history_spec(DAYS, FEATURES, values, baseline=base, plan=plan, title="h"))
    assert panel_kb < BUDGET_KB["panel"] and history_kb < BUDGET_KB["history"], (panel_kb, history_kb)
    cells = 53 * 12  # weeks x rows shown
    for trace in panel["data"] + history["data"]:
        for key in ("text", "hovertext"):  # no text per cell or point: the hover is a template
            assert key not in trace or np.size(trace[key]) < cells, (trace["type"], key)
    heat = next(t for t in panel["data"] if t["type"] == "heatmap" and t.get("name") != "no data")
    assert "text" not in heat and "value: %{customdata[0]:.4g}" in heat["hovertemplate"]
    assert heat["hovertemplate"].startswith("period: %{x}<br>")  # the week's label, from the axis
    # the numbers sent (float32): each bin's mean of its days with data and its sum of attributions, computed here
    weeks = pd.to_datetime(pd.Series(DAYS)).dt.strftime("%G-W%V").to_numpy()
    rows = [FEATURES.index(name) for name in heat["y"][:-1]]
    real = lambda x: pd.DataFrame(np.where(pad[:, None], np.nan, x)).groupby(weeks, sort=False)  # noqa: E731
    custom = array(heat["customdata"])
    np.testing.assert_allclose(custom[:-1, :, 0], real(values).mean().to_numpy()[:, rows].T, rtol=1e-6)
    np.testing.assert_allclose(custom[:-1, :, 1], real(base).mean().to_numpy()[:, rows].T, rtol=1e-6)
    z = array(heat["z"])
    padded_weeks = real(a).count().to_numpy()[:, 0] == 0
    np.testing.assert_allclose(z[:-1][:, ~padded_weeks], real(a).sum().to_numpy()[~padded_weeks][:, rows].T,
                               rtol=1e-5, atol=1e-7)
    lines = [t for t in history["data"] if t["name"] == "customer"]
    for line, j in zip(lines, rows):  # the history: the same bins and rows, each point the mean of its days
        assert drawn_x(history, line) == list(dict.fromkeys(weeks)) and "x" not in line
        np.testing.assert_allclose(array(line["y"]), real(values).mean().to_numpy()[:, j], rtol=1e-6,
                                   equal_nan=True)
