"""A model that does not use one of its inputs, in the dashboard: the Customer page says so in a note
and draws that input's attributions as exact zeros (IG's dummy axiom); the Diagnostics page draws the
path and its points (the history alone moves the prediction)."""

import keras
import numpy as np
import pytest

from explain.bundle.save import save_bundle
from explain.core import engine
from tests.support.apptest import app, array, charts, errors, plain

N, S, T, F = 12, 3, 5, 2


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    keras.utils.set_random_seed(3)
    s_in, t_in = keras.Input((S,), name="side"), keras.Input((T, F), name="history")
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(keras.layers.LSTM(4)(t_in)))
    rng = np.random.default_rng(0)
    static, temporal = rng.normal(1.0, 1.0, (N, S)).astype("f4"), rng.normal(1.0, 1.0, (N, T, F)).astype("f4")
    return save_bundle(tmp_path_factory.mktemp("ignored") / "bundle", model, static, temporal)


def test_the_customer_page_notes_the_unused_input_and_draws_zeros(folder, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    at = app()
    assert not at.exception and not errors(at), errors(at)
    note = engine.IGNORED_INPUT.format(role="static", name="side")
    assert any(plain(i.value) == note for i in at.info), [i.value for i in at.info]
    bars = next(t for t in charts(at)["static_bars"]["data"] if t["type"] == "bar")
    assert len(array(bars["x"])) == S and np.all(array(bars["x"]) == 0.0)  # every static attribution exactly 0
    at.switch_page("pages/diagnostics.py").run()
    assert not at.exception and not errors(at), errors(at)
    line = charts(at)["diag_points"]["data"][0]
    assert np.isfinite(array(line["y"])).all() and len(array(line["x"])) == 257
