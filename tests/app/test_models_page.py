"""The Champion against challenger page through AppTest: only in the navigation when the server was started with
--challenger MODEL; the answer in words first (tau in plain words, what changed, the disagreements), then the
shares chart and the customers the models disagree on, as explain.analysis.models computes them; a challenger that
cannot be opened or that reads other inputs is a message on the page, never a traceback."""

import json
import sys

import keras
import pytest
from streamlit.testing.v1 import AppTest

from explain.analysis import models
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support.apptest import APP, DEMO, array, errors, plain
from tests.support.challenger import cut_static

PAGE = "pages/models.py"

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


@pytest.fixture(scope="module")
def cut_file(tmp_path_factory):
    """The demo model with the Dense layer that reads the static input zeroed (its static branch cut)."""
    return cut_static(DEMO / "model.keras", tmp_path_factory.mktemp("challenger"))


def started_with(monkeypatch, *args) -> AppTest:
    monkeypatch.setattr(sys, "argv", [sys.argv[0], *args])
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_page_says_the_answer_then_draws_the_shares_and_the_disagreements(monkeypatch, cut_file,
                                                                              startup_demo):
    at = started_with(monkeypatch, "--challenger", str(cut_file))
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Champion against challenger"
    bundle = load_bundle(startup_demo)
    expected = models.compare_models(bundle, keras.saving.load_model(cut_file, compile=False), customers=200,
                                     settings=Settings().for_bundle(bundle))
    said = plain(at.info[0].value)
    assert said.startswith("The two models do not agree on the order of the drivers")
    assert f"Kendall's tau {expected.kendall_tau.value:.2f}" in said
    what_changed = plain(at.markdown[0].value)
    assert "Tenure (months) no longer matters" in what_changed and expected.change_words[0] in what_changed
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Customers flagged by one model only"] == f"{len(expected.disagreements)} of 200"
    assert metrics["Kendall's tau of the rankings"] == f"{expected.kendall_tau.value:.2f}"
    # the chart: each model's shares, as computed
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = {trace["name"]: dict(zip(trace["y"], array(trace["x"]))) for trace in spec["data"]}
    tenure = next(c for c in expected.changed if c.feature.name == "tenure_months")
    assert bars["challenger"]["Tenure (months)"] == 0.0
    assert bars["champion (the bundle's model)"]["Tenure (months)"] == pytest.approx(100 * tenure.champion_share)
    # the table: every customer one model flags, both models' reasons side by side
    table = at.dataframe[0].value
    assert list(table["customer"]) == [d.customer for d in expected.disagreements]
    first = expected.disagreements[0]
    row = table.iloc[0]
    assert row["champion score"] == pytest.approx(first.champion_score)
    assert row["champion's top reasons"].startswith(f"{first.champion_reasons[0].label} ")
    assert row["challenger's top reasons"].startswith(f"{first.challenger_reasons[0].label} ")


def test_without_a_challenger_the_page_is_not_in_the_navigation(monkeypatch):
    at = started_with(monkeypatch)
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page(PAGE)


def other_shape_file(folder):
    static, temporal = keras.Input(shape=(8,), name="static"), keras.Input(shape=(12, 6), name="temporal")
    out = keras.layers.Dense(1, activation="sigmoid")(
        keras.layers.Concatenate()([static, keras.layers.Flatten()(temporal)]))
    path = folder / "other.keras"
    keras.Model({"static": static, "temporal": temporal}, out).save(path)
    return path


@pytest.mark.parametrize("make, words", [
    (lambda folder: (folder / "broken.keras").write_bytes(b"not a model") and folder / "broken.keras",
     "was refused before loading"),
    (other_shape_file, "does not take the inputs of the bundle's model"),
])
def test_a_bad_challenger_is_a_message_not_a_traceback(monkeypatch, tmp_path, make, words):
    path = make(tmp_path)
    at = started_with(monkeypatch, "--challenger", str(path))
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = errors(at)
    assert len(shown) == 1 and words in shown[0] and path.name in shown[0], shown
    assert "Traceback" not in shown[0] and str(tmp_path) not in shown[0]  # no server path either
