"""The What-if page through AppTest on the demo bundle: edits, deep links, bad links, the search."""

import numpy as np
import pytest

from explain.analysis import whatif
from explain.bundle.load import load_bundle
from tests.support.apptest import DEMO, app, chart_places, charts, errors, heatmap, plain

PAGE = "pages/whatif.py"

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


@pytest.fixture(autouse=True)
def _demo_bundle(monkeypatch):
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)


@pytest.fixture(scope="module")
def demo():
    return load_bundle(DEMO)


def predictions(at) -> tuple[float, float]:
    values = {m.label.split(":")[0]: float(m.value) for m in at.metric if ": predicted" in m.label}
    return values["Original"], values["What-if"]


def independent(demo, cid, static=None, temporal=None) -> float:
    """The model's own prediction for ``cid`` with some values replaced (no what-if code involved)."""
    inputs = demo.inputs_for([cid])
    for (role, index), value in {**(static or {}), **(temporal or {})}.items():
        inputs[role][(0, *index)] = value
    return float(demo.predict(inputs)[0, 0])


def check_figures(at):
    """Both heatmaps on one symmetric scale; the change heatmap is what-if minus original."""
    figs = charts(at)
    original, edited = heatmap(figs["whatif_original"]), heatmap(figs["whatif_edited"])
    change = heatmap(figs["whatif_difference"])
    m = max(np.abs(original["z"]).max(), np.abs(edited["z"]).max())
    for h in (original, edited):
        assert h["zmax"] == pytest.approx(m) and h["zmin"] == pytest.approx(-m) and h["zmid"] == 0
    np.testing.assert_allclose(change["z"], edited["z"] - original["z"], atol=1e-9)
    return change["z"]  # (F, T)


def test_a_one_click_edit_shows_both_predictions_and_the_difference(demo):
    at = app(params={"customer": "C00002", "steps": "32"}, page=PAGE)
    assert not errors(at)
    before = predictions(at)
    assert before[0] == before[1]  # no edit yet: no change anywhere, not even in the last bits
    assert np.all(check_figures(at) == 0)
    next(b for b in at.button if b.label == "Apply this edit").click().run()  # data usage, last 3 months -> baseline
    assert not at.exception and not errors(at)
    assert at.query_params["whatif"] == "t0@9-11=b"
    original, edited = predictions(at)
    mean_usage = float(np.asarray(demo.temporal[:, :, 0], np.float64).mean())
    want = independent(demo, "C00002", temporal={("temporal", (t, 0)): mean_usage for t in (9, 10, 11)})
    assert original == pytest.approx(float(demo.predict(demo.inputs_for(["C00002"]))[0, 0]), abs=1e-3)
    assert edited == pytest.approx(want, abs=1e-3) and edited != original
    change = check_figures(at)
    assert np.abs(change[0, 9:]).max() > 0  # the edited cells' own effects changed
    assert any("Data usage (GB), 2025-10 to 2025-12: set to the baseline" in plain(m.value) for m in at.markdown)


def test_a_static_edit_through_its_input(demo):
    at = app(params={"customer": "C00002", "steps": "32"}, page=PAGE)
    box = next(n for n in at.number_input if plain(n.label) == "Tenure (months)")  # labels are escaped
    box.set_value(40).run()
    assert not errors(at)
    assert at.query_params["whatif"] == "s0=40"
    assert predictions(at)[1] == pytest.approx(independent(demo, "C00002", static={("static", (0,)): 40.0}), abs=1e-3)
    check_figures(at)


def test_a_deep_link_with_a_scenario_reopens_it(demo):
    at = app(params={"customer": "C00010", "steps": "32", "whatif": "s0=36,t1@9-11=med"}, page=PAGE)
    assert not errors(at) and not at.warning
    edits = next(m for m in at.metric if m.label == "Edits")
    assert edits.value == "2"
    median_calls = np.median(np.asarray(demo.temporal[:, 9:12, 1], np.float64), axis=0)
    want = independent(demo, "C00010", static={("static", (0,)): 36.0},
                       temporal={("temporal", (9 + k, 1)): float(v) for k, v in enumerate(median_calls)})
    assert predictions(at)[1] == pytest.approx(want, abs=1e-3)
    check_figures(at)


@pytest.mark.parametrize("bad, named", [
    ("t1@9-99=b", "names periods 9 to 99"),
    ("s0=5000", "outside the range observed in the data"),
    ("s1=0.5", "not one of the values observed"),
    ("nonsense", "is not of the form"),
])
def test_a_bad_scenario_in_the_link_is_dropped_with_a_warning_naming_it(bad, named):
    at = app(params={"customer": "C00002", "steps": "32", "whatif": bad}, page=PAGE)
    assert not at.exception and not errors(at)
    warnings = [plain(w.value) for w in at.warning]
    assert any(f"whatif={bad!r}" in w and named in w for w in warnings), warnings
    assert "whatif" not in at.query_params
    original, edited = predictions(at)
    assert original == edited


def test_the_search_finds_edits_with_its_caution_and_can_show_them():
    at = app(params={"customer": "C00002", "steps": "32"}, page=PAGE)
    next(b for b in at.button if b.label == "Search").click().run()
    assert not errors(at)
    assert any("bring the prediction from" in plain(s.value) for s in at.success)
    assert any("not what the customer will do" in plain(w.value) for w in at.warning)
    next(b for b in at.button if b.label == "Show these edits above").click().run()
    assert not errors(at)
    assert whatif.parse_scenario(at.query_params["whatif"], load_bundle(DEMO))  # the found edits, now the scenario
    assert predictions(at)[1] < 0.5 <= predictions(at)[0]


def test_the_quick_edit_asks_for_k_only_when_it_scales():
    at = app({"customer": "C00002", "steps": "16"}, page=PAGE)
    assert not [n for n in at.number_input if n.label == "k"]  # default: set to the baseline
    at.selectbox(key="wi_q_action").set_value("scale").run()
    assert [n for n in at.number_input if n.label == "k"]
    at.number_input(key="wi_q_k").set_value(2.0)
    at.button[[b.label for b in at.button].index("Apply this edit")].click().run()
    assert not errors(at)
    original, edited = predictions(at)
    assert edited != original  # months of a feature doubled: the model's score moved


def test_the_charts_keep_their_places_when_a_note_comes_with_an_edit():
    """An edit whose values the data's range clips brings a note above the charts: the charts stay where they were
    (the browser then updates them instead of drawing them anew)."""
    plain_edit = app(params={"customer": "C00002", "steps": "32", "whatif": "s0=36"}, page=PAGE)
    clipped = app(params={"customer": "C00002", "steps": "32", "whatif": "t1@9-11*50"}, page=PAGE)
    assert not errors(plain_edit) and not errors(clipped)
    assert not plain_edit.info and any("moved into" in plain(i.value) for i in clipped.info)
    assert len(chart_places(clipped.main)) >= 4 and chart_places(clipped.main) == chart_places(plain_edit.main)
