"""save_bundle and Bundle.from_objects for any model: several inputs (two histories, one padded behind Masking),
categories as integer ids and as texts into Embeddings, inputs by name or in the model's order, and a model
with a custom layer saved with ``trust_code=``. Each saved folder passes ``explain check`` and reads back
the arrays given (padding as padding); the model's predictions on the read-back arrays equal its
predictions on the arrays given; bad arguments are named, and nothing is left behind."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pandas as pd
import pytest

from explain import cli
from explain.analysis.explainer import explain_customers
from explain.bundle import many
from explain.bundle.load import Bundle, load_bundle, load_bundle_from_uploads
from explain.bundle.save import save_bundle
from explain.core.errors import BundleError
from explain.core.settings import Settings
from explain.modelfile.config import TRUST_CODE_HINT

keras = pytest.importorskip("keras")

N = 9
MONTHS = [f"2024-{m:02d}" for m in range(1, 9)]
QUARTERS = ["2023-Q3", "2023-Q4", "2024-Q1"]
SHORT = {0: 3, 4: 5}  # customers with a short monthly history: real months at the end


def three_input_model():
    """profile (None, 3), monthly (None, 8, 2) behind Masking(0) + LSTM, quarterly (None, 3, 1) + GRU."""
    keras.utils.set_random_seed(2)
    profile = keras.Input((3,), name="profile")
    monthly = keras.Input((8, 2), name="monthly")
    quarterly = keras.Input((3, 1), name="quarterly")
    h = keras.layers.Concatenate()([keras.layers.Dense(3, activation="tanh")(profile),
                                    keras.layers.LSTM(4)(keras.layers.Masking(0.0)(monthly)),
                                    keras.layers.GRU(2)(quarterly)])
    return keras.Model([quarterly, profile, monthly], keras.layers.Dense(1, activation="sigmoid")(h))  # odd order


def three_inputs(seed=0):
    rng = np.random.default_rng(seed)
    monthly = rng.uniform(0.1, 2.0, size=(N, 8, 2)).astype("float32")
    for row, real in SHORT.items():
        monthly[row, :8 - real] = 0.0  # padded at the start
    return {"profile": rng.normal(size=(N, 3)).astype("float32"), "monthly": monthly,
            "quarterly": rng.normal(size=(N, 3, 1)).astype("float32")}


def predict(model, inputs):
    return model.predict([inputs["quarterly"], inputs["profile"], inputs["monthly"]], verbose=0)


def test_three_inputs_two_histories_one_padded_round_trip(tmp_path, capsys):
    model, given = three_input_model(), three_inputs()
    ids = [f"M{k}" for k in range(N)]
    path = save_bundle(tmp_path / "three", model, given, ids=ids, periods={"monthly": MONTHS, "quarterly": QUARTERS},
                       features={"profile": ["age", "tenure", "spend"], "monthly": ["calls", "usage"],
                                 "quarterly": ["bill"]},
                       labels=np.arange(N) % 2, display_names={"calls": "Support calls"}, output_names=["churn"],
                       period_unit="month")
    assert cli.main(["check", "--bundle", str(path)]) == 0, capsys.readouterr().out
    temporal = pd.read_parquet(path / "temporal_monthly.parquet")
    assert len(temporal) == N * 8 - sum(8 - real for real in SHORT.values())  # padding left out of the table
    bundle = load_bundle(path)
    assert bundle.ids.tolist() == ids and bundle.input_periods["monthly"] == MONTHS
    for key, values in given.items():
        np.testing.assert_array_equal(bundle.arrays[key], values)  # padding read back as padding (zeros)
    assert bundle.feature_labels["calls"] == "Support calls" and bundle.labels.tolist() == (np.arange(N) % 2).tolist()
    np.testing.assert_allclose(bundle.predict()[:, 0], predict(model, given)[:, 0], rtol=1e-6)
    a = explain_customers(bundle, ["M0", "M1"], Settings(steps=16))
    assert a.padding["monthly"][0].tolist() == [True] * 5 + [False] * 3
    # the same from a list in the model's order, in memory, holding the model itself
    same = Bundle.from_objects(model, [given["quarterly"], given["profile"], given["monthly"]], ids=ids,
                               periods={"monthly": MONTHS, "quarterly": QUARTERS})
    assert same.model is model and same.path is None and same.content_hash == ""
    for key, values in given.items():
        np.testing.assert_array_equal(same.arrays[key], values)
    b = explain_customers(same, ["M0", "M1"], Settings(steps=16))
    np.testing.assert_allclose(b.inputs["monthly"], a.inputs["monthly"], atol=1e-7)


def embedding_model():
    """contract id (None, 1) int -> Embedding; plan text (None, 1) -> StringLookup -> Embedding;
    numbers (None, 2); a history (None, 4, 2) behind Masking."""
    keras.utils.set_random_seed(5)
    contract = keras.Input((1,), name="contract", dtype="int32")
    plan = keras.Input((1,), name="plan", dtype="string")
    numbers = keras.Input((2,), name="numbers")
    history = keras.Input((4, 2), name="history")
    lookup = keras.layers.StringLookup(vocabulary=["basic", "plus", "premium"])
    parts = [keras.layers.Flatten()(keras.layers.Embedding(3, 2)(contract)),
             keras.layers.Flatten()(keras.layers.Embedding(4, 2)(lookup(plan))),
             keras.layers.Dense(2)(numbers), keras.layers.LSTM(3)(keras.layers.Masking(0.0)(history))]
    out = keras.layers.Dense(2, activation="softmax")(keras.layers.Concatenate()(parts))
    return keras.Model([contract, plan, numbers, history], out)


def test_categories_as_ids_and_texts_with_a_dataframe_and_a_target(tmp_path, capsys):
    model = embedding_model()
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"customer_id": [f"E{k}" for k in range(N)], "tenure": rng.integers(1, 60, N),
                          "charge": rng.uniform(10, 90, N).round(2)})
    plans = np.array(["basic", "plus", "premium"], dtype=object)[rng.integers(0, 3, N)]
    history = rng.uniform(0.1, 1.0, size=(N, 4, 2))
    history[2, :2] = 0.0
    inputs = {"contract": rng.integers(0, 3, N), "plan": plans, "numbers": frame, "history": history}
    path = save_bundle(tmp_path / "emb", model, inputs, output_names=["stay", "churn"], target="churn",
                       categories={"contract": {"0": "monthly", "1": "yearly", "2": "two years"}}, tables="csv")
    assert cli.main(["check", "--bundle", str(path)]) == 0, capsys.readouterr().out
    bundle = load_bundle(path)
    assert bundle.ids.tolist() == frame["customer_id"].tolist() and bundle.target == 1
    assert bundle.static_features == ["contract", "plan", "tenure", "charge"]
    assert bundle.arrays["plan"][:, 0].tolist() == plans.tolist()
    np.testing.assert_array_equal(bundle.arrays["contract"][:, 0], inputs["contract"])
    np.testing.assert_allclose(bundle.arrays["numbers"], frame[["tenure", "charge"]].to_numpy(), rtol=1e-6)
    assert bundle.categories["contract"]["2"] == "two years"
    import tensorflow as tf

    expected = model([tf.constant(inputs["contract"].reshape(-1, 1), tf.int32),
                      tf.constant(plans.reshape(-1, 1).tolist(), tf.string),
                      tf.constant(frame[["tenure", "charge"]].to_numpy("float32")),
                      tf.constant(history.astype("float32"))], training=False).numpy()
    np.testing.assert_allclose(bundle.predict(), expected, rtol=1e-5, atol=1e-6)
    assert json.loads((path / "bundle.json").read_text())["target"] == "churn"


@pytest.mark.parametrize("change, argument, message", [
    (lambda i: {**i, "extra": i["profile"]}, "inputs", "inputs names 'extra', which the model does not have"),
    (lambda i: {k: v for k, v in i.items() if k != "quarterly"}, "inputs",
     "inputs lacks the model's input(s) 'quarterly'"),
    (lambda i: [i["profile"], i["monthly"]], "inputs", "inputs has 2 entries, but the model has 3 inputs"),
    (lambda i: {**i, "monthly": i["monthly"][:, :6]}, "inputs['monthly']",
     "inputs['monthly'] has shape (9, 6, 2), but the model's input 'monthly' (None, 8, 2) expects (n, 8, 2)"),
    (lambda i: {**i, "profile": i["profile"].astype(str)}, "inputs['profile']",
     "inputs['profile'] holds text values, but the model's input 'profile' reads numbers"),
    (lambda i: {**i, "profile": i["profile"][:5]}, "inputs['profile']",
     "inputs['profile'] has 5 customers (rows), but inputs['quarterly'] has 9"),
    (lambda i: {**i, "monthly": np.concatenate([i["monthly"][:, 4:], i["monthly"][:, :4]], axis=1)},
     "inputs['monthly']", "customer(s) have padding (Masking(0)) that is not at the start of their history"),
])
def test_bad_inputs_are_named_and_nothing_is_written(tmp_path, change, argument, message):
    model, given = three_input_model(), three_inputs()
    with pytest.raises(BundleError) as caught:
        save_bundle(tmp_path / "bad", model, change(given))
    assert message in str(caught.value) and argument in str(caught.value)
    assert not list(tmp_path.iterdir())  # no folder, no staging left


LAYERS = textwrap.dedent('''
    import keras

    @keras.saving.register_keras_serializable(package="i23_test")
    class Doubling(keras.layers.Layer):
        def call(self, x):
            return 2.0 * x
    ''')


def test_a_custom_layer_model_saves_with_trust_code_and_the_cli_names_the_flag(tmp_path, capsys):
    from explain.modelfile import trust

    code = tmp_path / "layers.py"
    code.write_text(LAYERS)
    doubling = trust.load_trusted_code(code).objects["i23_test>Doubling"]
    s_in, t_in = keras.Input((2,), name="s"), keras.Input((3, 2), name="t")
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(keras.layers.Concatenate()(
        [doubling()(s_in), keras.layers.GRU(2)(t_in)])))
    rng = np.random.default_rng(0)
    static, temporal = rng.normal(size=(5, 2)), rng.normal(size=(5, 3, 2))
    with pytest.raises(BundleError, match="Doubling"):
        save_bundle(tmp_path / "refused", model, static, temporal)
    assert not (tmp_path / "refused").exists()
    path = save_bundle(tmp_path / "trusted", model, static, temporal, trust_code=code)
    assert cli.main(["check", "--bundle", str(path), "--trust-code", str(code)]) == 0
    capsys.readouterr()
    assert cli.main(["check", "--bundle", str(path)]) == 1
    assert TRUST_CODE_HINT in capsys.readouterr().out  # the refusal names --trust-code
    assert cli.main(["attribute", "--bundle", str(path), "--customer", "1", "--out", str(tmp_path / "a.json")]) == 2
    assert TRUST_CODE_HINT in capsys.readouterr().err
    files = {name: (path / name).read_bytes() for name in ("model.keras", "static.parquet", "temporal.parquet",
                                                              "bundle.json")}
    with pytest.raises(BundleError) as caught:  # an upload: refused, and never told to run code
        load_bundle_from_uploads(files, tmp_path / "upload")
    assert "Doubling" in str(caught.value) and "--trust-code" not in str(caught.value)
    same = Bundle.from_objects(model, {"s": static, "t": temporal}, trust_code=code)
    np.testing.assert_allclose(same.predict(), model.predict([static, temporal], verbose=0), rtol=1e-6)


def test_is_inputs():
    assert many.is_inputs({"a": np.zeros(2)}) and many.is_inputs([np.zeros((2, 1)), np.zeros((2, 3, 1))])
    assert not many.is_inputs(np.zeros((2, 3))) and not many.is_inputs(pd.DataFrame({"a": [1]}))
