"""The change since an earlier time on a bundle (issue 40): ``explain_customers`` with ``previous`` and with
``bundle:DIR``, an earlier snapshot of the same customers written with ``save_bundle``.

On a linear model f(s, t) = s . ws + sum(t * wt) + c Integrated Gradients is exactly (x - b) * w, so every
attribution is known here: against a snapshot read by customer id (its rows in another order) a static change is
attributed to the static features it changed, and the baseline prediction is the model's own score (called here)
on the snapshot's rows of those customers. On a Masking model the snapshot that holds each history one period
earlier gives the attributions of ``previous``. A snapshot without a customer, with another feature count or other
columns, and ``previous`` on a bundle padded at the end are refused in words that say what to do.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from explain.analysis.explainer import (
    PREVIOUS_NEEDS_END_ALIGNED,
    SNAPSHOT_DIFFERS,
    SNAPSHOT_MISSING,
    explain_customers,
    open_snapshot,
)
from explain.bundle.load import load_bundle
from explain.bundle.save import save_bundle
from explain.core.errors import ExplainError
from explain.core.settings import Baseline, Settings
from tests.support import padded
from tests.support.models import F, S, T, linear_model

N = 6
IDS = [f"C{i:02d}" for i in range(N)]
ORDER = [4, 1, 5, 0, 3, 2]  # the snapshot's rows: another order


def earlier(values: np.ndarray, pad=None) -> np.ndarray:
    """Each history one period earlier, period by period: period t holds t - 1, period 0 ``pad`` (or itself)."""
    out = values.copy()
    for t in range(values.shape[1] - 1, 0, -1):
        out[:, t] = values[:, t - 1]
    out[:, 0] = values[:, 0] if pad is None else pad
    return out


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    """(model, ws, wt, now arrays, then arrays, folder): 'now' and 'then' bundles of the same six customers;
    the snapshot 'then' has other static values (columns 1 and 3) and other histories, its rows reordered."""
    folder = tmp_path_factory.mktemp("change")
    model, ws, wt = linear_model(seed=3)
    rng = np.random.default_rng(3)
    now = {"static": rng.normal(size=(N, S)).astype("float32"),
           "temporal": rng.normal(size=(N, T, F)).astype("float32")}
    then = {"static": now["static"].copy(), "temporal": rng.normal(size=(N, T, F)).astype("float32")}
    then["static"][:, [1, 3]] += rng.normal(0, 2.0, size=(N, 2)).astype("float32")
    names = {"static_features": [f"s{j}" for j in range(S)], "temporal_features": [f"t{j}" for j in range(F)]}
    save_bundle(folder / "now", model, now["static"], now["temporal"], ids=IDS, **names)
    save_bundle(folder / "then", model, then["static"][ORDER], then["temporal"][ORDER],
                ids=[IDS[i] for i in ORDER], **names)
    save_bundle(folder / "partial", model, then["static"][:4], then["temporal"][:4], ids=IDS[:4], **names)
    renamed = dict(names, temporal_features=["calls", "usage", "spend"])
    save_bundle(folder / "renamed", model, then["static"], then["temporal"], ids=IDS, **renamed)
    return model, ws, wt, now, then, folder


def predict(model, arrays) -> np.ndarray:
    return np.asarray(model([arrays["static"], arrays["temporal"]], training=False), np.float64)[:, 0]


def test_against_an_earlier_snapshot_every_feature_gets_exactly_its_change_matched_by_id(linear):
    model, ws, wt, now, then, folder = linear
    bundle = load_bundle(folder / "now")
    asked = ["C03", "C00", "C05"]
    a = explain_customers(bundle, asked, Settings(baseline=f"bundle:{folder / 'then'}", steps=16))
    rows = [IDS.index(i) for i in asked]
    x = {key: value[rows].astype(np.float64) for key, value in now.items()}
    b = {key: value[rows].astype(np.float64) for key, value in then.items()}  # by id, not by row of the snapshot
    np.testing.assert_allclose(a.baseline_prediction, predict(model, b), atol=1e-5)
    np.testing.assert_allclose(a.prediction, predict(model, x), atol=1e-5)
    np.testing.assert_allclose(a.static, (x["static"] - b["static"]) * ws, atol=1e-5)
    np.testing.assert_allclose(a.temporal, (x["temporal"] - b["temporal"]) * wt, atol=1e-5)
    assert (a.static[:, [0, 2, 4]] == 0).all()  # the static features that did not change: exactly nothing
    assert (np.abs(a.static[:, [1, 3]]) > 1e-3).all()  # the ones that did: their change
    np.testing.assert_allclose(a.total(), a.prediction - a.baseline_prediction, atol=1e-5)


def test_previous_on_a_bundle_is_the_model_one_period_earlier(linear):
    model, ws, wt, now, _, folder = linear
    bundle = load_bundle(folder / "now")
    a = explain_customers(bundle, IDS, Settings(baseline="previous", steps=16))
    b = {"static": now["static"].astype(np.float64), "temporal": earlier(now["temporal"].astype(np.float64))}
    np.testing.assert_allclose(a.baseline_prediction, predict(model, b), atol=1e-5)
    np.testing.assert_allclose(a.temporal, (now["temporal"] - b["temporal"]) * wt, atol=1e-5)
    assert (a.static == 0).all()  # previous keeps the static features: a static change is not seen
    np.testing.assert_allclose(a.total(), a.prediction - a.baseline_prediction, atol=1e-5)


def test_a_customer_missing_from_the_snapshot_is_named(linear):
    *_, folder = linear
    bundle = load_bundle(folder / "now")
    snapshot = open_snapshot(folder / "partial")
    with pytest.raises(ExplainError) as caught:
        explain_customers(bundle, ["C01", "C05", "C04"], Settings(baseline=f"bundle:{folder / 'partial'}", steps=16))
    assert str(caught.value) == SNAPSHOT_MISSING.format(count=2, path=snapshot.path, examples="C05, C04")


def test_a_snapshot_of_other_columns_says_what_differs(linear):
    *_, folder = linear
    bundle = load_bundle(folder / "now")
    with pytest.raises(ExplainError) as caught:
        explain_customers(bundle, ["C01"], Settings(baseline=f"bundle:{folder / 'renamed'}", steps=16))
    assert str(caught.value) == SNAPSHOT_DIFFERS.format(path=open_snapshot(folder / "renamed").path,
                                                        bundle=bundle.path, what="the feature columns differ")


def test_a_snapshot_with_another_feature_count_says_which_input_and_both_shapes(linear, tmp_path):
    *_, folder = linear
    keras.utils.set_random_seed(0)
    s_in, t_in = keras.Input((S,), name="features"), keras.Input((T, F + 1), name="history")
    wider = keras.Model([s_in, t_in], keras.layers.Dense(1)(keras.layers.Concatenate()(
        [s_in, keras.layers.Flatten()(t_in)])))
    rng = np.random.default_rng(0)
    save_bundle(tmp_path / "wider", wider, rng.normal(size=(N, S)), rng.normal(size=(N, T, F + 1)), ids=IDS)
    bundle = load_bundle(folder / "now")
    with pytest.raises(ExplainError) as caught:
        explain_customers(bundle, ["C01"], Settings(baseline=f"bundle:{tmp_path / 'wider'}", steps=16))
    assert str(caught.value) == SNAPSHOT_DIFFERS.format(
        path=open_snapshot(tmp_path / "wider").path, bundle=bundle.path,
        what=f"input 'temporal' has shape {(T, F + 1)} instead of {(T, F)}")


def masking_model():
    keras.utils.set_random_seed(6)
    s_in, t_in = keras.Input((2,), name="account"), keras.Input((7, 2), name="weeks")
    lstm = keras.layers.LSTM(4)
    h = keras.layers.Concatenate()([keras.layers.Dense(2, activation="tanh")(s_in),
                                    lstm(keras.layers.Masking(0.0)(t_in))])
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(h))
    kernel, recurrent, bias = lstm.get_weights()  # biases off zero: an arriving week moves the score
    lstm.set_weights([kernel, recurrent, np.random.default_rng(6).normal(0, 0.8, size=bias.shape)])
    return model


def test_a_snapshot_one_week_earlier_gives_the_attributions_of_previous_on_a_padded_model(tmp_path):
    model = masking_model()
    rng = np.random.default_rng(7)
    static = rng.normal(size=(N, 2)).astype("float32")
    weeks = rng.uniform(0.2, 2.0, size=(N, 7, 2)).astype("float32")
    weeks[1, :3] = 0.0  # padded at the start
    weeks[4, :5] = 0.0
    save_bundle(tmp_path / "now", model, static, weeks, ids=IDS)
    then = earlier(weeks, pad=0.0)
    save_bundle(tmp_path / "then", model, static[ORDER], then[ORDER], ids=[IDS[i] for i in ORDER])
    bundle = load_bundle(tmp_path / "now")
    settings = Settings(baseline="previous", steps=64)
    a = explain_customers(bundle, IDS, settings)
    b = explain_customers(bundle, IDS, settings.replace(baseline=Baseline.parse(f"bundle:{tmp_path / 'then'}")))
    expected = predict(model, {"static": static, "temporal": then})
    for result in (a, b):
        np.testing.assert_allclose(result.baseline_prediction, expected, atol=1e-6)
        assert result.arrival is not None and (result.arrival != 0).all()  # every customer had a week arrive
        np.testing.assert_allclose(result.total(), result.prediction - result.baseline_prediction,
                                   rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(b.temporal, a.temporal, atol=1e-7)
    np.testing.assert_allclose(b.arrival, a.arrival, atol=1e-9)
    assert (a.temporal[4, :5] == 0).all() and (a.temporal[1, :3] == 0).all()  # padding now: nothing


def test_previous_is_refused_on_a_bundle_padded_at_the_end(tmp_path):
    bundle = load_bundle(padded.write(tmp_path / "end", n=6, extra={"temporal_padding": "end"}))
    with pytest.raises(ExplainError) as caught:
        explain_customers(bundle, bundle.ids[:2].tolist(), Settings(baseline="previous:2", steps=16))
    assert str(caught.value) == PREVIOUS_NEEDS_END_ALIGNED.format(spec="previous:2")
