"""Models that are not two plain float inputs: categorical ids into embeddings, three inputs
(two histories), padded histories behind a Masking layer.

Every expected number comes from an independent reference computed here: a per-customer
``tf.GradientTape`` loop over Gauss-Legendre nodes taken from numpy (not from
``explain.core.quadrature``), run on a "twin" model that shares the tested model's layers but
takes the embedding vectors (or only the real months) as its input; or an exact answer for
linear models.
"""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

import explain
from explain.core import baselines, ig
from explain.core.errors import AttributionError
from explain.core.inputs import MeanEmbedding, input_layout

T, F = 5, 2


def tape_ig(fn, x_list, b_list, steps=64):
    """IG of ``fn`` (a list of (k, ...) float arrays -> (k, 1), each row on its own) along b -> x for one
    customer: the ``steps`` Gauss-Legendre nodes stacked as k rows of one tape (row j's gradient is that of
    output j alone, since no row sees another), summed with their weights."""
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    alphas, weights = (nodes + 1) / 2, weights / 2
    points = [tf.constant(b + alphas.reshape(-1, *[1] * (np.ndim(x) - 1)) * (x - b), tf.float32)
              for x, b in zip(x_list, b_list)]  # (steps, ...) from the (1, ...) ends
    with tf.GradientTape() as tape:
        tape.watch(points)
        out = tf.reduce_sum(fn(points)[:, 0])
    grads = [np.einsum("k,k...->...", weights, g.numpy().astype(np.float64))[None]
             for g in tape.gradient(out, points)]
    return [(np.asarray(x, np.float64) - b) * g for x, b, g in zip(x_list, b_list, grads)]


def tolerance(a):
    """The engine's own completeness tolerance (the one steps="auto" aims for)."""
    return np.maximum(ig.DEFAULT_TOLERANCE * np.abs(a.prediction - a.baseline_prediction), ig.ABSOLUTE_TOLERANCE)


# --------------------------------------------------------------------------- categorical


@functools.cache
def embedding_model(lookup=False):
    """Ids (or text through a StringLookup) into an Embedding, a float static input and a history.

    Returns the model, its twin taking the embedding vectors (None, 1, 3) instead of the ids,
    and the index function id -> embedding row. Built once per module (the same seed gives the same weights;
    no test changes them): the tests share the model's engine and its traced functions.
    """
    keras.utils.set_random_seed(11)
    if lookup:
        plan = keras.Input((1,), dtype="string", name="plan")
        look = keras.layers.StringLookup(vocabulary=["basic", "plus", "premium"], name="plan_lookup")
        rows = look
    else:
        plan = keras.Input((1,), dtype="int32", name="plan")
        look = None
    num, hist = keras.Input((2,), name="num"), keras.Input((T, F), name="hist")
    emb = keras.layers.Embedding(5, 3, name="plan_embedding")
    flat, dense = keras.layers.Flatten(), keras.layers.Dense(4, activation="tanh")
    lstm, concat = keras.layers.LSTM(3), keras.layers.Concatenate()
    head = keras.layers.Dense(1, activation="sigmoid")

    def tail(e, n, h):
        return head(concat([flat(e), dense(n), lstm(h)]))

    model = keras.Model([plan, num, hist], tail(emb(rows(plan) if lookup else plan), num, hist))
    e_in, n_in, h_in = keras.Input((1, 3)), keras.Input((2,)), keras.Input((T, F))
    twin = keras.Model([e_in, n_in, h_in], tail(e_in, n_in, h_in))
    table = emb.embeddings.numpy()

    def embed(values):  # (n, 1) ids or text -> (n, 1, 3)
        index = np.asarray(look(values)) if lookup else np.asarray(values)
        return table[index]

    return model, twin, embed


def categorical_data(n=4, lookup=False, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 5, size=(n, 1))
    plan = np.array(["basic", "plus", "premium", "gold"], dtype=object)[ids % 4] if lookup else ids.astype("int32")
    return {"plan": plan, "num": rng.normal(size=(n, 2)).astype("float32"),
            "hist": rng.normal(size=(n, T, F)).astype("float32")}


@pytest.mark.parametrize("lookup", [False, True], ids=["ids", "text-lookup"])
def test_embedding_input_matches_layer_ig_reference(lookup):
    model, twin, embed = embedding_model(lookup)
    x = categorical_data(4, lookup)
    b_plan = np.array([["plus"]], dtype=object) if lookup else np.array([[2]], "int32")
    b = {"plan": b_plan, "num": np.full((1, 2), 0.2), "hist": np.full((1, T, F), -0.3)}
    assert ig.model_problems(model, x, b) == []  # what check runs: nothing to report
    a = explain.integrated_gradients(model, x, b, steps=64)
    assert set(a.inputs) == {"plan", "num", "hist"}
    for i in range(4):
        e_x, e_b = embed(x["plan"][i:i + 1]), embed(b_plan)
        ref_e, ref_n, ref_h = tape_ig(twin, [e_x, x["num"][i:i + 1], x["hist"][i:i + 1]],
                                      [e_b, b["num"], b["hist"]])
        # layer IG: the embedding's attribution summed over the embedding dimension, per feature
        np.testing.assert_allclose(a.inputs["plan"][i], ref_e[0].sum(axis=-1), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(a.inputs["num"][i], ref_n[0], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(a.inputs["hist"][i], ref_h[0], rtol=1e-4, atol=1e-6)
        f_b = float(twin([e_b, b["num"], b["hist"]])[0, 0])
        np.testing.assert_allclose(a.baseline_prediction[i], f_b, rtol=1e-5)
    np.testing.assert_allclose(a.prediction, np.asarray(model([x["plan"], x["num"], x["hist"]]))[:, 0], rtol=1e-5)
    assert np.all(np.abs(a.delta) <= tolerance(a))
    # the static field holds every static-like input's features (numeric, then categorical, in input order)
    assert a.static.shape == (4, 3) and a.temporal.shape == (4, T, F)


def test_categorical_baselines_mode_chosen_and_mean_embedding():
    model, twin, embed = embedding_model(False)
    data = categorical_data(40, seed=3)
    layout = input_layout(model)
    counts = np.bincount(data["plan"][:, 0], minlength=5)
    mode = int(np.argmax(counts))
    rows = np.concatenate([np.flatnonzero(data["plan"][:, 0] == mode)[:2],
                           np.flatnonzero(data["plan"][:, 0] != mode)[:4]])
    x = {key: value[rows] for key, value in data.items()}

    b = baselines.from_spec("mean", data, x, layout=layout)  # categorical: most frequent category
    np.testing.assert_array_equal(b["plan"], [[mode]])
    a = explain.integrated_gradients(model, x, b, steps=64)
    same = x["plan"][:, 0] == mode
    assert same.any() and np.all(a.inputs["plan"][same] == 0.0)  # same category as the baseline: no effect
    assert np.all(a.inputs["plan"][~same] != 0.0)

    chosen = baselines.from_spec("mean", data, x, layout=layout, categorical="category:plan=4")
    np.testing.assert_array_equal(chosen["plan"], [[4]])

    mean_b = baselines.from_spec("mean", data, x, layout=layout, categorical="mean-embedding")
    assert isinstance(mean_b["plan"], MeanEmbedding)
    a = explain.integrated_gradients(model, x, mean_b, steps=64)
    e_mean = (counts[:, None] * embed(np.arange(5)[:, None])[:, 0]).sum(0) / counts.sum()  # frequency-weighted
    f_b = np.asarray(twin([np.broadcast_to(e_mean, (6, 1, 3)), np.broadcast_to(mean_b["num"], (6, 2)),
                           np.broadcast_to(mean_b["hist"], (6, T, F))]))[:, 0]
    np.testing.assert_allclose(a.baseline_prediction, f_b, rtol=1e-5)
    assert np.all(np.abs(a.delta) <= tolerance(a))
    words = baselines.describe("mean", layout=layout, categorical="mean-embedding")
    assert "mean embedding" in words and "frequency" in words


def test_integer_input_without_embedding_is_refused():
    ids = keras.Input((2,), dtype="int32", name="codes")
    hist = keras.Input((T, F), name="hist")
    h = keras.layers.Concatenate()([keras.ops.cast(ids, "float32"), keras.layers.LSTM(2)(hist)])
    model = keras.Model([ids, hist], keras.layers.Dense(1)(h))
    x = {"static": np.ones((2, 2), "int32"), "temporal": np.ones((2, T, F), "float32")}
    with pytest.raises(AttributionError,
                       match="static input 'codes' has dtype int32; Integrated Gradients needs a float"):
        explain.integrated_gradients(model, x, x, steps=4)
    assert any("'codes' has dtype int32" in p for p in ig.model_problems(model))


# --------------------------------------------------------------------------- three inputs


@functools.cache
def three_input_model(linear=False):
    """A static input and two histories of different lengths (months and quarters). Built once per module
    (shared, read only)."""
    keras.utils.set_random_seed(5)
    s_in = keras.Input((3,), name="profile")
    m_in = keras.Input((6, 2), name="monthly")
    q_in = keras.Input((3, 1), name="quarterly")
    if linear:
        parts = [keras.layers.Dense(1)(s_in), keras.layers.Dense(1, use_bias=False)(keras.layers.Flatten()(m_in)),
                 keras.layers.Dense(1, use_bias=False)(keras.layers.Flatten()(q_in))]
        return keras.Model([m_in, s_in, q_in], keras.layers.Add()(parts))
    h = keras.layers.Concatenate()([keras.layers.Dense(4, activation="tanh")(s_in), keras.layers.LSTM(4)(m_in),
                                    keras.layers.GRU(2)(q_in)])
    return keras.Model({"profile": s_in, "monthly": m_in, "quarterly": q_in},
                       keras.layers.Dense(1, activation="sigmoid")(h))


def three_data(n=3, seed=2):
    rng = np.random.default_rng(seed)
    return {"profile": rng.normal(size=(n, 3)).astype("float32"),
            "monthly": rng.normal(size=(n, 6, 2)).astype("float32"),
            "quarterly": rng.normal(size=(n, 3, 1)).astype("float32")}


def test_three_inputs_exact_on_linear_model():
    model = three_input_model(linear=True)
    dense_s, dense_m, dense_q = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    w = {"profile": dense_s.kernel.numpy()[:, 0], "monthly": dense_m.kernel.numpy()[:, 0].reshape(6, 2),
         "quarterly": dense_q.kernel.numpy()[:, 0].reshape(3, 1)}
    x = three_data(4)
    b = {key: np.full((1, *value.shape[1:]), 0.5) for key, value in x.items()}
    for path in ("joint", "per-input"):
        a = explain.integrated_gradients(model, x, b, steps=3, path=path)
        for key in x:
            np.testing.assert_allclose(a.inputs[key], (x[key] - 0.5) * w[key], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.delta, 0.0, atol=1e-5)
    layout = input_layout(model)
    assert [spec.role for spec in layout.specs] == ["temporal", "static", "temporal"]  # model.inputs order


def test_three_inputs_joint_and_per_input_match_reference():
    model = three_input_model()
    x = three_data(2)
    b = {"profile": np.full((1, 3), 0.3), "monthly": np.full((1, 6, 2), -0.2), "quarterly": np.full((1, 3, 1), 0.1)}
    keys = ["profile", "monthly", "quarterly"]

    def fn(points):
        return model({key: tf.convert_to_tensor(p, tf.float32) for key, p in zip(keys, points)})

    assert ig.model_problems(model, x, b) == []
    joint = explain.integrated_gradients(model, x, b, steps=48)
    per = explain.integrated_gradients(model, x, b, steps="auto", path="per-input")
    for i in range(2):
        xi = [x[k][i:i + 1] for k in keys]
        refs = tape_ig(fn, xi, [b[k] for k in keys], steps=48)
        for k, ref in zip(keys, refs):
            np.testing.assert_allclose(joint.inputs[k][i], ref[0], rtol=1e-4, atol=1e-6)
        for j, k in enumerate(keys):  # per input: that input moves, the others stay at the customer's values
            moving = tape_ig(lambda p, j=j: fn([*(np.repeat(v, len(p[0]), 0) for v in xi[:j]), p[0],
                                                *(np.repeat(v, len(p[0]), 0) for v in xi[j + 1:])]), [xi[j]], [b[k]],
                             steps=int(per.per_input[k]["steps"][i]))
            np.testing.assert_allclose(per.inputs[k][i], moving[0][0], rtol=1e-3, atol=1e-5)
    assert np.all(np.abs(joint.delta) <= tolerance(joint))
    for k in keys:  # each input's completeness against the model with only that input at its baseline
        info = per.per_input[k]
        np.testing.assert_allclose(info["delta"], per.prediction - info["reference_prediction"]
                                   - per.inputs[k].reshape(2, -1).sum(1), atol=1e-12)
        assert info["steps"].shape == (2,) and np.all(info["steps"] >= ig.AUTO_START_STEPS)
    np.testing.assert_array_equal(per.steps, np.max([per.per_input[k]["steps"] for k in keys], axis=0))
    assert joint.temporal is None  # two histories: no single temporal array; use a.inputs


# --------------------------------------------------------------------------- padded histories

LENGTHS = [8, 5, 2, 1]


def masked_model(where="start"):
    """Masking(0) -> LSTM with biases; a static input; and the same layers on real months only. Built once per
    module (the same seed, the same weights whatever ``where``; no test changes them): the padding tests share the
    model's engine and its traced functions, each with its own data and baselines."""
    return _masked_model()


@functools.cache
def _masked_model():
    keras.utils.set_random_seed(21)
    s_in, t_in = keras.Input((2,), name="s"), keras.Input((8, F), name="t")
    lstm = keras.layers.LSTM(4, bias_initializer="random_normal", unit_forget_bias=False)
    dense, concat = keras.layers.Dense(3, activation="tanh"), keras.layers.Concatenate()
    head = keras.layers.Dense(1, activation="sigmoid", bias_initializer="random_normal")
    model = keras.Model([s_in, t_in], head(concat([dense(s_in), lstm(keras.layers.Masking(0.0)(t_in))])))
    s2, t2 = keras.Input((2,)), keras.Input((None, F))
    real_only = keras.Model([s2, t2], head(concat([dense(s2), lstm(t2)])))  # variable T, no padding
    return model, real_only


def padded_data(where="start", seed=4):
    rng = np.random.default_rng(seed)
    n = len(LENGTHS)
    temporal = (rng.uniform(0.5, 2.0, size=(n, 8, F)) * rng.choice([-1, 1], size=(n, 8, F))).astype("float32")
    for i, length in enumerate(LENGTHS):
        if where == "start":
            temporal[i, :8 - length] = 0.0
        else:
            temporal[i, length:] = 0.0
    return {"static": rng.normal(size=(n, 2)).astype("float32"), "temporal": temporal}


def real_months(where, i):
    return slice(8 - LENGTHS[i], 8) if where == "start" else slice(0, LENGTHS[i])


@pytest.mark.parametrize("where", ["start", "end"])
@pytest.mark.parametrize("spec", ["zero", "mean", "cohort:1"])
def test_masked_lstm_completeness_and_reference(where, spec):
    model, real_only = masked_model()
    data = padded_data(where)
    labels = np.array([1, 0, 1, 0])
    layout = input_layout(model)
    assert layout.specs[1].mask_value == 0.0
    b = baselines.from_spec(spec, data, data, labels=labels, layout=layout)
    assert ig.model_problems(model, data, b) == []  # no real baseline month at the mask value
    a = explain.integrated_gradients(model, data, b, steps=64)
    assert np.all(np.abs(a.delta) <= tolerance(a)), (spec, a.delta)
    for i in range(len(LENGTHS)):
        real = real_months(where, i)
        padded = np.ones(8, bool)
        padded[real] = False
        np.testing.assert_array_equal(a.padding["temporal"][i], padded)
        assert np.all(a.temporal[i][padded] == 0.0)  # padding gets no attribution
        # the reference never sees the padded months: an LSTM on the real months alone
        b_t = np.broadcast_to(b["temporal"], data["temporal"].shape)[i:i + 1, real]
        b_s = np.broadcast_to(b["static"], data["static"].shape)[i:i + 1]
        assert np.all(np.any(b_t != 0.0, axis=-1))  # no real month of the baseline equals the mask value
        ref_s, ref_t = tape_ig(real_only, [data["static"][i:i + 1], data["temporal"][i:i + 1, real]], [b_s, b_t])
        np.testing.assert_allclose(a.static[i], ref_s[0], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(a.temporal[i][real], ref_t[0], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(a.baseline_prediction[i], float(real_only([b_s, b_t])[0, 0]), rtol=1e-5)
    assert "mask value" in baselines.describe(spec, layout=layout)


def test_masked_auto_steps_stay_low_and_raw_zero_baseline_is_refused():
    model, _ = masked_model()
    data = padded_data()
    layout = input_layout(model)
    a = explain.integrated_gradients(model, data, baselines.from_spec("zero", data, data, layout=layout), steps="auto")
    assert np.all(np.abs(a.delta) <= tolerance(a)) and a.steps.max() < ig.AUTO_MAX_STEPS
    raw_zero = {"static": np.zeros((1, 2)), "temporal": np.zeros((1, 8, F))}
    with pytest.raises(AttributionError, match="equals the Masking layer's mask value 0.0"):
        explain.integrated_gradients(model, data, raw_zero, steps=8, ids=["A", "B", "C", "D"])
    assert any("mask value" in p for p in ig.model_problems(model, data, raw_zero))


def test_mask_zero_embedding_history():
    """A sequence of category ids, 0 = padding, through Embedding(mask_zero=True) into an LSTM."""
    keras.utils.set_random_seed(8)
    s_in, ids_in = keras.Input((2,), name="s"), keras.Input((6,), dtype="int32", name="events")
    emb = keras.layers.Embedding(7, 3, mask_zero=True)
    lstm, dense = keras.layers.LSTM(3, bias_initializer="random_normal"), keras.layers.Dense(2, activation="tanh")
    head = keras.layers.Dense(1, activation="sigmoid")
    model = keras.Model([s_in, ids_in], head(keras.layers.Concatenate()([dense(s_in), lstm(emb(ids_in))])))
    s2, e2 = keras.Input((2,)), keras.Input((None, 3))
    real_only = keras.Model([s2, e2], head(keras.layers.Concatenate()([dense(s2), lstm(e2)])))
    table = emb.embeddings.numpy()
    events = np.array([[0, 0, 3, 1, 5, 2], [0, 0, 0, 0, 6, 6], [4, 1, 1, 2, 3, 6]], "int32")
    # two inputs, one static-like and one temporal-like: keyed "static" and "temporal"
    x = {"static": np.random.default_rng(1).normal(size=(3, 2)).astype("float32"), "temporal": events}
    layout = input_layout(model)
    assert layout.specs[1].role == "temporal" and layout.specs[1].kind == "categorical"
    b = baselines.from_spec("mean", x, x, layout=layout)
    assert np.all(b["temporal"] != 0)  # the most frequent real category, never the padding id
    a = explain.integrated_gradients(model, x, b, steps=64)
    assert np.all(np.abs(a.delta) <= tolerance(a))
    for i in range(3):
        real = events[i] != 0
        np.testing.assert_array_equal(a.padding["temporal"][i], ~real)
        assert np.all(a.inputs["temporal"][i][~real] == 0.0)
        b_ids = np.broadcast_to(b["temporal"], events.shape)[i]
        ref_s, ref_e = tape_ig(real_only, [x["static"][i:i + 1], table[events[i][real]][None]],
                               [np.broadcast_to(b["static"], (3, 2))[i:i + 1], table[b_ids[real]][None]])
        np.testing.assert_allclose(a.inputs["temporal"][i][real], ref_e[0].sum(-1), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(a.inputs["static"][i], ref_s[0], rtol=1e-4, atol=1e-6)


def test_unused_third_input_is_a_note_and_gets_exact_zeros():
    s_in, t_in, q_in = (keras.Input((3,), name="profile"), keras.Input((4, 2), name="monthly"),
                        keras.Input((2, 1), name="unused"))
    model = keras.Model([s_in, t_in, q_in],
                        keras.layers.Dense(1)(keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])))
    assert ig.model_problems(model) == []
    assert ig.model_notes(model) == ["The model does not use its temporal input 'unused' (its graph does not "
                                     "connect it to the output): every attribution of that input is 0."]
    rng = np.random.default_rng(0)
    x = {"profile": rng.normal(size=(2, 3)), "monthly": rng.normal(size=(2, 4, 2)),
         "unused": rng.normal(size=(2, 2, 1))}
    a = explain.integrated_gradients(model, x, {k: np.zeros((1, *v.shape[1:])) for k, v in x.items()}, steps=2)
    assert a.ignored_inputs == ("unused",) and np.all(a.inputs["unused"] == 0.0)
    np.testing.assert_allclose(a.delta, 0.0, atol=1e-5)  # a linear model: exact at 2 points


# --------------------------------------------------------------------------- bundles with these models


def write_bundle(folder, model, static_rows, temporal_tables, config):
    """model.keras, static.csv (rows as dicts), one long CSV per history ({file: rows}) and bundle.json."""
    import json

    import pandas as pd

    folder.mkdir()
    model.save(folder / "model.keras")
    pd.DataFrame(static_rows).to_csv(folder / "static.csv", index=False)
    for name, rows in temporal_tables.items():
        pd.DataFrame(rows).to_csv(folder / name, index=False)
    (folder / "bundle.json").write_text(json.dumps(config))
    return folder


def long_rows(ids, values, periods, features, keep=None):
    """Long-format rows of (n, T, F) ``values``; ``keep(i)`` picks the periods written for customer i."""
    rows = []
    for i, cid in enumerate(ids):
        for t in (keep(i) if keep else range(len(periods))):
            rows.append({"customer_id": cid, "period": periods[t],
                         **{f: float(values[i, t, j]) for j, f in enumerate(features)}})
    return rows


def test_three_input_bundle_one_table_per_history(tmp_path):
    from explain.analysis.explainer import explain_customers
    from explain.bundle.load import load_bundle, validate_bundle
    from explain.core.settings import Settings

    model = three_input_model()
    n = 6
    x = three_data(n, seed=9)
    ids = [f"K{i}" for i in range(n)]
    static_rows = [{"customer_id": cid, **{f"p{j}": float(x["profile"][i, j]) for j in range(3)}, "label": i % 2}
                   for i, cid in enumerate(ids)]
    tables = {"temporal_monthly.csv": long_rows(ids, x["monthly"], [f"m{t + 1:02d}" for t in range(6)],
                                                ["calls", "usage"]),
              "temporal_quarterly.csv": long_rows(ids, x["quarterly"], ["q1", "q2", "q3"], ["spend"])}
    config = {"label_column": "label", "inputs": {
        "profile": {"features": ["p0", "p1", "p2"], "display_name": "Profile"},
        "monthly": {"features": ["calls", "usage"], "display_name": "Monthly usage"},
        "quarterly": {"features": ["spend"], "display_name": "Quarterly spend"}}}
    folder = write_bundle(tmp_path / "three", model, static_rows, tables, config)
    report = validate_bundle(folder)
    assert report.ok, report.format()
    bundle = load_bundle(folder)
    assert set(bundle.arrays) == {"profile", "monthly", "quarterly"}
    assert bundle.input_labels["quarterly"] == "Quarterly spend"
    assert bundle.input_periods["quarterly"] == ["q1", "q2", "q3"]
    for key in x:  # the tables' values, in the model's shapes
        np.testing.assert_allclose(bundle.arrays[key], x[key], rtol=1e-6)
    assert ig.model_problems(model, bundle.inputs_for(ids[:2]), {k: v[:1] for k, v in x.items()}) == []
    a = explain_customers(bundle, ids, Settings(baseline="mean", steps=48))
    mean = {key: value.astype(np.float64).mean(axis=0, keepdims=True) for key, value in x.items()}
    mean["monthly"] = np.broadcast_to(x["monthly"].reshape(-1, 2).mean(0), (1, 6, 2))
    mean["quarterly"] = np.broadcast_to(x["quarterly"].reshape(-1, 1).mean(0), (1, 3, 1))
    keys = ["profile", "monthly", "quarterly"]
    for i in (0, 3):  # an independent reference: the tape on the model with the mean baseline
        refs = tape_ig(lambda p: model({k: tf.convert_to_tensor(v, tf.float32) for k, v in zip(keys, p)}),
                       [x[k][i:i + 1] for k in keys], [mean[k] for k in keys], steps=48)
        for k, ref in zip(keys, refs):
            np.testing.assert_allclose(a.inputs[k][i], ref[0], rtol=1e-4, atol=1e-6)
    assert np.all(np.abs(a.delta) <= tolerance(a))


def test_padded_history_bundle_with_fewer_rows_per_customer(tmp_path):
    from explain.analysis.explainer import explain_customers
    from explain.bundle.load import PERIODS_PADDED_NOTE, load_bundle
    from explain.core.settings import Settings

    model, real_only = masked_model()
    for where in ("start", "end"):
        data = padded_data(where)
        ids = [f"P{i}" for i in range(len(LENGTHS))]
        periods = [f"2025-{m:02d}" for m in range(1, 9)]
        static_rows = [{"customer_id": cid, "s0": float(data["static"][i, 0]), "s1": float(data["static"][i, 1]),
                        "label": i % 2} for i, cid in enumerate(ids)]
        rows = long_rows(ids, data["temporal"], periods, ["a", "b"],
                         keep=lambda i: range(8)[real_months(where, i)])  # only the real months are written
        assert len(rows) == sum(LENGTHS)
        folder = write_bundle(tmp_path / where, model, static_rows, {"temporal.csv": rows},
                              {"label_column": "label", "temporal_padding": where,
                               "static_features": ["s0", "s1"], "temporal_features": ["a", "b"]})
        bundle = load_bundle(folder)
        np.testing.assert_array_equal(bundle.temporal, data["temporal"])  # padded with the mask value, at `where`
        assert any(note.startswith("temporal.csv: 3 customer(s) have fewer than 8 periods") for note in bundle.notes)
        assert "padded at the" in PERIODS_PADDED_NOTE
        a = explain_customers(bundle, ids, Settings(baseline="cohort:1", steps=64))
        assert np.all(np.abs(a.delta) <= tolerance(a))
        for i in range(len(LENGTHS)):
            real = real_months(where, i)
            assert not a.padding["temporal"][i][real].any() and a.padding["temporal"][i].sum() == 8 - LENGTHS[i]
            assert np.all(a.temporal[i][a.padding["temporal"][i]] == 0.0)


def test_float64_model_input_stays_float64(tmp_path):
    from explain.bundle.load import load_bundle

    keras.utils.set_random_seed(3)
    s_in = keras.Input((2,), dtype="float64", name="s")
    t_in = keras.Input((3, 1), dtype="float64", name="t")
    h = keras.layers.Concatenate(dtype="float64")([s_in, keras.layers.Flatten(dtype="float64")(t_in)])
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, dtype="float64")(h))  # float64 all along
    ids = ["a", "b"]
    fine = 1.0 + 2.0 ** -40  # not representable in float32
    static_rows = [{"customer_id": cid, "x0": fine * (i + 1), "x1": -fine} for i, cid in enumerate(ids)]
    temporal = np.full((2, 3, 1), fine)
    folder = write_bundle(tmp_path / "f64", model, static_rows,
                          {"temporal.csv": long_rows(ids, temporal, ["t1", "t2", "t3"], ["v"])}, {})
    bundle = load_bundle(folder)
    assert bundle.arrays["static"].dtype == np.float64 and bundle.arrays["temporal"].dtype == np.float64
    assert bundle.arrays["static"][0, 0] == fine  # not rounded through float32
    a = explain.integrated_gradients(model, bundle.data(),
                                     {"static": np.zeros((1, 2)), "temporal": np.zeros((1, 3, 1))}, steps=2)
    w = model.layers[-1].kernel.numpy()[:, 0]
    np.testing.assert_allclose(a.static[0], bundle.arrays["static"][0] * w[:2], rtol=1e-12)


def test_cli_check_and_per_input_auto_steps_on_the_embedding_demo(tmp_path, capsys):
    import json
    from pathlib import Path

    from explain.bundle.load import load_bundle
    from explain.cli import main

    folder = Path(__file__).resolve().parents[3] / "bundles" / "demo-embedding"
    assert main(["check", "--bundle", str(folder)]) == 0, capsys.readouterr().out
    bundle = load_bundle(folder)
    padded = [str(cid) for cid, pad in zip(bundle.ids, bundle.padding("history")) if pad.any()][:2]
    out = tmp_path / "a.json"
    customers = [word for cid in padded for word in ("--customer", cid)]
    assert main(["attribute", "--bundle", str(folder), *customers, "--steps", "auto", "--path", "per-input",
                 "--categorical", "mean-embedding", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["settings"]["categorical"] == "mean-embedding"
    for entry in data["customers"]:
        assert set(entry["per_input"]) == {"customer", "contract", "plan", "history"}
        steps = {key: v["steps"] for key, v in entry["per_input"].items()}
        assert all(s >= ig.AUTO_START_STEPS for s in steps.values()) and entry["steps"] == max(steps.values())
        history = entry["inputs"]["history"]
        assert history["values"][0] == [None] * 3 and history["inputs"][0] == [None] * 3  # padded month: no data
        assert isinstance(entry["inputs"]["plan"]["inputs"][0], str)  # a category written as text
    long = tmp_path / "a.csv"
    assert main(["attribute", "--bundle", str(folder), "--customer", padded[0], "--out", str(long)]) == 0
    import pandas as pd

    frame = pd.read_csv(long)
    assert set(frame["input"]) == {"customer", "contract", "plan", "history"}
    first = frame[(frame["input"] == "history") & (frame["period"] == bundle.input_periods["history"][0])]
    assert first["attribution"].isna().all() and first["value"].isna().all()  # padded month: empty cells
