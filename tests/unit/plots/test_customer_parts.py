"""The Customer page's figures made in two parts (explain.figures.customer_figures(part=...): the heatmaps first,
then the rest) are the figures made at once, for a plain bundle (the demo) and one of three inputs (two histories)."""

import json

import numpy as np
import pytest
from plotly.utils import PlotlyJSONEncoder

from explain import figures
from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.bundle.save import save_bundle
from explain.core.settings import Settings
from tests.support.apptest import DEMO
from tests.unit.bundle.test_save_many import MONTHS, QUARTERS, three_input_model, three_inputs


def text(shown) -> list[tuple[str, str, str]]:
    return [(s.heading, s.kind, json.dumps(s.figure, cls=PlotlyJSONEncoder, sort_keys=True)) for s in shown]


def assert_parts_make_the_whole(a, bundle, ids, spec):
    for row in range(len(ids)):
        whole = figures.customer_figures(a, bundle, row, ids=ids, spec=spec)
        first = figures.customer_figures(a, bundle, row, ids=ids, spec=spec, part="heatmaps")
        rest = figures.customer_figures(a, bundle, row, ids=ids, spec=spec, part="rest")
        assert [s.kind for s in first] == ["heatmap"] * len(first) and first
        assert "heatmap" not in [s.kind for s in rest] and rest
        assert text(first) + text(rest) == text(whole)


@pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")
@pytest.mark.parametrize("spec", [True, False])
def test_the_demos_figures_in_two_parts_are_the_figures_at_once(spec):
    bundle = load_bundle(DEMO)
    ids = [str(i) for i in bundle.ids[:2]]
    a = explain_customers(bundle, ids, Settings(steps=16))
    assert_parts_make_the_whole(a, bundle, ids, spec)
    with pytest.raises(ValueError, match="part must be one of"):
        figures.customer_figures(a, bundle, 0, ids=ids, part="bars")


def test_three_inputs_figures_in_two_parts_are_the_figures_at_once(tmp_path):
    given, ids = three_inputs(), [f"M{k}" for k in range(9)]
    path = save_bundle(tmp_path / "three", three_input_model(), given, ids=ids,
                       periods={"monthly": MONTHS, "quarterly": QUARTERS},
                       features={"profile": ["age", "tenure", "spend"], "monthly": ["calls", "usage"],
                                 "quarterly": ["bill"]}, output_names=["churn"], period_unit="month")
    bundle = load_bundle(path)
    a = explain_customers(bundle, ["M0", "M4"], Settings(steps=16))
    assert not getattr(bundle, "plain", True) and np.isfinite(a.prediction).all()
    assert_parts_make_the_whole(a, bundle, ["M0", "M4"], spec=True)
    assert len(figures.customer_figures(a, bundle, 0, ids=["M0", "M4"], part="heatmaps")) == 2  # one per history
