"""Legacy HDF5 (.h5) models and trusted code (--trust-code): explain.modelfile.h5 and explain.modelfile.trust.

The .h5 files are written here: by Keras 3 (``model.save("m.h5")``) and, for the layout
TensorFlow 2's tf.keras writes (no "module" keys, dtypes as text, inbound nodes as
``[[["name", 0, 0, {}]]]``, ``batch_input_shape``), by rewriting that file's
``model_config`` (:func:`tf2_layout`); Keras 3's legacy loader reads both. Attributions are
compared with an independent Integrated Gradients computed here with a GradientTape and
a fine midpoint rule, and with the ``.keras`` copy of the same model.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from explain.bundle.load import load_bundle
from explain.bundle.save import save_bundle
from explain.cli import main
from explain.core.errors import UnsafeModelError
from explain.core.ig import ABSOLUTE_TOLERANCE, DEFAULT_TOLERANCE, integrated_gradients
from explain.core.inputs import input_layout
from explain.modelfile import h5 as legacy
from explain.modelfile import safe_load as sl
from explain.modelfile import trust
from tests.unit.modelfile.test_safe_load import assert_refused, template_regex, why_prefix

DEMO = Path(__file__).resolve().parents[3] / "bundles" / "demo"

# --------------------------------------------------------------------------- helpers


def tf2_layout(node):
    """A Keras 3 legacy ``model_config`` rewritten the way tf.keras (TensorFlow 2) wrote it."""
    if isinstance(node, list):
        return [tf2_layout(v) for v in node]
    if not isinstance(node, dict):
        return node
    if node.get("class_name") == "DTypePolicy":
        return node["config"]["name"]
    out = {}
    for key, value in node.items():
        if key in ("module", "registered_name", "build_config"):
            continue
        if key == "inbound_nodes" and value and isinstance(value[0], dict):
            calls = []
            for call in value:
                args = call["args"][0] if isinstance(call["args"][0], list) else call["args"]
                calls.append([[*a["config"]["keras_history"], {}] for a in args])
            out[key] = calls
        elif key == "batch_shape":
            out["batch_input_shape"] = value
        else:
            out[key] = tf2_layout(value)
    return out


def edit_model_config(src: Path, dst: Path, edit) -> Path:
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        f.attrs["model_config"] = json.dumps(edit(config) or config)
    return dst


def reference_ig(model, inputs: dict, baseline: dict, points: int = 512) -> dict:
    """IG by the midpoint rule with ``points`` points, computed with a plain GradientTape."""
    xs, xt = (np.asarray(inputs[k], np.float64) for k in ("static", "temporal"))
    bs = np.broadcast_to(np.asarray(baseline["static"], np.float64), xs.shape)
    bt = np.broadcast_to(np.asarray(baseline["temporal"], np.float64), xt.shape)
    a = (np.arange(points) + 0.5) / points
    ps = (bs[:, None] + a[None, :, None] * (xs - bs)[:, None]).reshape(-1, xs.shape[1])
    pt = (bt[:, None] + a[None, :, None, None] * (xt - bt)[:, None]).reshape(-1, *xt.shape[1:])
    ps, pt = tf.constant(ps.astype(np.float32)), tf.constant(pt.astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch([ps, pt])
        out = model(input_layout(model).feed({"static": ps, "temporal": pt}), training=False)[:, 0]
    gs, gt = tape.gradient(out, [ps, pt])
    mean_s = gs.numpy().reshape(len(xs), points, -1).mean(axis=1)
    mean_t = gt.numpy().reshape(len(xs), points, *xt.shape[1:]).mean(axis=1)
    return {"static": (xs - bs) * mean_s, "temporal": (xt - bt) * mean_t}


def assert_complete(result) -> None:
    """|delta| within the engine's usual tolerance (relative to |f(x) - f(b)|, with a floor)."""
    gap = np.abs(result.prediction - result.baseline_prediction)
    assert np.all(np.abs(result.delta) <= np.maximum(DEFAULT_TOLERANCE * gap, ABSOLUTE_TOLERANCE)), (
        result.delta, gap)
    np.testing.assert_allclose(result.total() + result.delta,
                               result.prediction - result.baseline_prediction, atol=1e-9)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo bundle, its model as .keras, as a Keras 3 .h5 and in TensorFlow 2's layout."""
    folder = tmp_path_factory.mktemp("legacy")
    bundle = load_bundle(DEMO)
    keras_path = DEMO / "model.keras"
    h5_path = folder / "demo.h5"
    bundle.model.save(h5_path)
    tf2_path = edit_model_config(h5_path, folder / "demo-tf2.h5", tf2_layout)
    return {"bundle": bundle, "keras": keras_path, "h5": h5_path, "tf2": tf2_path, "folder": folder}


# --------------------------------------------------------------------------- clean .h5 files


@pytest.mark.parametrize("layout", ["h5", "tf2"])
def test_h5_copy_of_the_demo_model_gives_the_same_attributions(demo, layout):
    bundle = demo["bundle"]
    with h5py.File(demo[layout]) as f:  # the layouts really differ
        text = f.attrs["model_config"]
    assert ('"module"' in text) == (layout == "h5") and ("batch_input_shape" in text) == (layout == "tf2")

    report = legacy.check_hdf5_file(demo[layout])
    assert report.estimated_params == pytest.approx(bundle.model.count_params(), rel=0.05)
    model = legacy.load_hdf5_model(demo[layout])
    assert [tuple(t.shape) for t in model.inputs] == [tuple(t.shape) for t in bundle.model.inputs]

    ids = list(bundle.ids[[0, 17, 2999]])
    inputs = bundle.inputs_for(ids)
    baseline = {k: v.mean(axis=0, keepdims=True) for k, v in bundle.data().items()}
    from_h5 = integrated_gradients(model, inputs, baseline, steps=256)
    from_keras = integrated_gradients(bundle.model, inputs, baseline, steps=256)
    np.testing.assert_allclose(from_h5.static, from_keras.static, atol=1e-7)
    np.testing.assert_allclose(from_h5.temporal, from_keras.temporal, atol=1e-7)
    # completeness, and an independent reference
    assert_complete(from_h5)
    expected = reference_ig(model, inputs, baseline)
    np.testing.assert_allclose(from_h5.static, expected["static"], atol=5e-4)
    np.testing.assert_allclose(from_h5.temporal, expected["temporal"], atol=5e-4)


# --------------------------------------------------------------------------- hostile .h5 files


@keras.saving.register_keras_serializable(package="evil_h5")
class RegisteredLayer(keras.layers.Layer):
    def call(self, x):
        return x


class PlainCustomLayer(keras.layers.Layer):
    def call(self, x):
        return x


def own_activation(x):
    return x


def test_hostile_h5_is_refused_with_the_same_words_as_the_keras_file(tmp_path):
    marker = str(tmp_path / "pwned")
    inp = keras.Input((3,))
    x = keras.layers.Lambda(lambda v: (open(marker, "w").close(), v)[1], name="evil")(inp)
    x = RegisteredLayer(name="registered")(x)
    x = keras.layers.Dense(2, activation=own_activation, name="dense")(x)
    model = keras.Model(inp, x, name="outer")
    model.save(tmp_path / "hostile.keras")
    model.save(tmp_path / "hostile.h5")
    os.remove(marker)

    problems = {}
    for suffix in ("keras", "h5"):
        path = tmp_path / f"hostile.{suffix}"
        check = sl.check_model_file if suffix == "keras" else legacy.check_hdf5_file
        load = sl.load_model if suffix == "keras" else legacy.load_hdf5_model
        for call in (check, load):
            with pytest.raises(UnsafeModelError) as excinfo:
                call(path)
            assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "3 part(s)", "layer 'evil' (Lambda)",
                           "registered as 'evil_h5>RegisteredLayer'", "builtins.own_activation",
                           why_prefix(sl.REASON_LAMBDA))
            problems[suffix] = excinfo.value.problems
        assert not os.path.exists(marker), "the Lambda layer's code ran"
    assert problems["h5"] == problems["keras"]
    # The .h5 file is really hostile: Keras without safe mode runs the lambda.
    keras.saving.load_model(tmp_path / "hostile.h5", safe_mode=False, compile=False,
                            custom_objects={"own_activation": own_activation})
    assert os.path.exists(marker)


def test_unregistered_custom_class_is_refused_in_both_formats(tmp_path):
    # A .keras file names the class's module (refused as code outside Keras); a legacy .h5
    # file names no module (refused as a lookup among custom objects).
    inp = keras.Input((3,))
    model = keras.Model(inp, PlainCustomLayer(name="plain")(inp), name="outer")
    for suffix, reason in (("keras", sl.REASON_MODULE), ("h5", sl.REASON_NO_MODULE)):
        path = tmp_path / f"plain.{suffix}"
        model.save(path)
        load = sl.load_model if suffix == "keras" else legacy.load_hdf5_model
        with pytest.raises(UnsafeModelError) as excinfo:
            load(path)
        assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "1 part(s)", "layer 'plain' (PlainCustomLayer)",
                       why_prefix(reason))


def test_tf2_layout_lambda_and_custom_classes_are_refused(tmp_path):
    inp = keras.Input((3,))
    x = keras.layers.Lambda(lambda v: v * 2, name="double")(inp)
    x = RegisteredLayer(name="registered")(x)
    keras.Model(inp, keras.layers.Dense(1)(x), name="tf2").save(tmp_path / "k3.h5")
    path = edit_model_config(tmp_path / "k3.h5", tmp_path / "tf2.h5", tf2_layout)
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.load_hdf5_model(path)
    assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "2 part(s)", "layer 'double' (Lambda)",
                   "layer 'registered' (RegisteredLayer)", "'evil_h5>RegisteredLayer'")


@pytest.fixture(scope="module")
def tiny_h5(tmp_path_factory) -> Path:
    """Input(5) -> Dense(3) in TensorFlow 2's layout: the base that tampering tests edit."""
    folder = tmp_path_factory.mktemp("tiny_h5")
    inp = keras.Input((5,), name="x")
    keras.Model(inp, keras.layers.Dense(3, name="dense")(inp), name="tiny").save(folder / "k3.h5")
    return edit_model_config(folder / "k3.h5", folder / "tiny.h5", tf2_layout)


def _dense(config):
    return config["config"]["layers"][1]


def test_h5_layer_from_a_module_outside_keras_is_refused(tiny_h5, tmp_path):
    def edit(config):
        _dense(config).update(class_name="system", module="os")

    path = edit_model_config(tiny_h5, tmp_path / "os.h5", edit)
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.load_hdf5_model(path)
    assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "'os'", why_prefix(sl.REASON_MODULE))


@pytest.mark.parametrize("where, name", [("layer", "deserialize"), ("initializer", "eval")])
def test_h5_module_less_names_that_are_not_keras_classes_are_refused(tiny_h5, tmp_path, where, name):
    # "deserialize" is a function in keras.layers, which legacy loading would call by name.
    def edit(config):
        if where == "layer":
            _dense(config)["class_name"] = name
        else:
            _dense(config)["config"]["kernel_initializer"] = {"class_name": name, "config": {}}

    path = edit_model_config(tiny_h5, tmp_path / "names.h5", edit)
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.check_hdf5_file(path)
    assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "1 part(s)", f"{name!r}",
                   why_prefix(sl.REASON_NO_MODULE))


def test_h5_huge_layer_is_refused_from_its_config_without_building_it(tiny_h5, tmp_path):
    def edit(config):
        config["config"]["layers"][0]["config"]["batch_input_shape"] = [None, 100_000]
        _dense(config)["config"]["units"] = 100_000

    path = edit_model_config(tiny_h5, tmp_path / "huge.h5", edit)
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.load_hdf5_model(path)
    assert_refused(excinfo, sl.TOO_MANY_PARAMS, path, "10,000,100,000 weights", "dense (Dense)")


@pytest.mark.parametrize("kind", ["external-link", "soft-link", "external-storage"])
def test_h5_datasets_reading_other_files_are_refused(tiny_h5, tmp_path, kind):
    path = shutil.copyfile(tiny_h5, tmp_path / f"{kind}.h5")
    with h5py.File(path, "r+") as f:
        if kind == "external-link":
            f["model_weights/evil"] = h5py.ExternalLink(str(tmp_path / "other.h5"), "/x")
        elif kind == "soft-link":
            f["model_weights/evil"] = h5py.SoftLink("/model_weights/dense")
        else:
            (tmp_path / "raw.bin").write_bytes(bytes(64))
            f.create_dataset("model_weights/evil", shape=(16,), dtype="f4",
                             external=[(str(tmp_path / "raw.bin"), 0, 64)])
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.load_hdf5_model(path)
    assert_refused(excinfo, legacy.BAD_DATASETS, path, "'model_weights/evil'")


def test_h5_declaring_huge_datasets_is_refused(tiny_h5, tmp_path):
    path = shutil.copyfile(tiny_h5, tmp_path / "bomb.h5")
    with h5py.File(path, "r+") as f:  # chunked and never written: a few KB on disk
        f.create_dataset("model_weights/bomb", shape=(2**28,), dtype="f8", chunks=(2**16,))
    assert path.stat().st_size < 1_000_000
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.load_hdf5_model(path)
    assert_refused(excinfo, legacy.DATASETS_TOO_LARGE, path, "2,147,483,", "1,073,741,824")


def test_weights_only_h5_says_how_to_make_a_model_file(tmp_path):
    inp = keras.Input((3,))
    path = tmp_path / "only.weights.h5"
    keras.Model(inp, keras.layers.Dense(1)(inp)).save_weights(path)
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.check_hdf5_file(path)
    assert_refused(excinfo, legacy.WEIGHTS_ONLY, path, "model.load_weights(\"only.weights.h5\")")


@pytest.mark.parametrize("content, detail", [(b"PK\x03\x04" + bytes(60), "a Keras 3 .keras zip"),
                                             (b"hello\n", "a text file")])
def test_file_named_h5_that_is_not_hdf5_is_refused(tmp_path, content, detail):
    path = tmp_path / "model.h5"
    path.write_bytes(content)
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.check_hdf5_file(path)
    assert_refused(excinfo, legacy.NOT_HDF5, path, detail)


def test_bad_model_config_is_refused(tiny_h5, tmp_path):
    path = shutil.copyfile(tiny_h5, tmp_path / "bad.h5")
    with h5py.File(path, "r+") as f:
        f.attrs["model_config"] = "{not json"
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.check_hdf5_file(path)
    assert_refused(excinfo, legacy.BAD_MODEL_CONFIG, path, "JSONDecodeError")


def test_savedmodel_folder_is_refused_with_the_conversion_recipe(tmp_path):
    folder = tmp_path / "exported"
    folder.mkdir()
    (folder / "saved_model.pb").write_bytes(b"\x08\x01")
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.check_hdf5_file(folder)
    assert_refused(excinfo, sl.SAVEDMODEL, folder, "tf.keras.models.load_model",
                   'model.save("model.keras")')


def test_every_h5_template_names_the_file_and_says_how_to_fix_it():
    for name in ("NOT_HDF5", "UNREADABLE_HDF5", "WEIGHTS_ONLY", "BAD_MODEL_CONFIG", "BAD_DATASETS",
                 "DATASETS_TOO_LARGE"):
        template = getattr(legacy, name)
        assert "{path}" in template and "To fix:" in template, name
        assert template_regex(template).fullmatch(template.replace("{path}", "x")), name


# --------------------------------------------------------------------------- trusted code

LAYERS_PY = textwrap.dedent('''
    """The owner's custom layers: softmax attention over the periods of a history."""
    import keras
    from keras import ops


    @keras.saving.register_keras_serializable(package="churn_test")
    class PeriodAttention(keras.layers.Layer):
        """sum_t softmax_t(h_t . w) h_t"""

        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], 1), initializer="glorot_uniform",
                                     name="w")

        def call(self, h):
            scores = ops.softmax(ops.matmul(h, self.w), axis=1)
            return ops.sum(scores * h, axis=1)


    class Gate(keras.layers.Layer):
        """Not registered: a model file names it by its class name only."""

        def call(self, x):
            return x * ops.sigmoid(x)
    ''')


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    """A churn model with custom layers from layers.py, saved as .keras and .h5."""
    folder = tmp_path_factory.mktemp("trusted")
    code = folder / "layers.py"
    code.write_text(LAYERS_PY)
    trusted = trust.load_trusted_code(code)
    attention_cls, gate_cls = trusted.objects["churn_test>PeriodAttention"], trusted.objects["Gate"]
    keras.utils.set_random_seed(3)
    s_in = keras.Input((4,), name="static")
    t_in = keras.Input((6, 3), name="temporal")
    h = keras.layers.LSTM(5, return_sequences=True)(t_in)
    z = keras.layers.Concatenate()([gate_cls(name="gate")(keras.layers.Dense(3)(s_in)),
                                    attention_cls(name="attention")(h)])
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(z))
    model.save(folder / "model.h5")
    rng = np.random.default_rng(5)
    inputs = {"static": rng.normal(size=(3, 4)).astype("f4"),
              "temporal": rng.normal(size=(3, 6, 3)).astype("f4")}
    return {"code": code, "trusted": trusted, "model": model, "folder": folder, "inputs": inputs}


def test_trusted_code_collects_registered_and_defined_objects(attention):
    trusted = attention["trusted"]
    assert trusted.name == "layers.py" and trusted.badge == "trusted code loaded: layers.py"
    assert {"churn_test>PeriodAttention", "PeriodAttention", "Gate"} <= trusted.names()
    assert trust.load_trusted_code(attention["code"]) is trusted  # imported once


def test_custom_layer_h5_is_refused_without_trust_and_exact_with_it(attention):
    path = attention["folder"] / "model.h5"
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.load_hdf5_model(path)
    assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "2 part(s)", "'churn_test>PeriodAttention'",
                   "layer 'gate' (Gate)")

    model = legacy.load_hdf5_model(path, trusted=attention["trusted"])
    inputs = attention["inputs"]
    baseline = {"static": np.zeros((1, 4)), "temporal": np.zeros((1, 6, 3))}
    result = integrated_gradients(model, inputs, baseline, steps=256)
    assert_complete(result)
    expected = reference_ig(attention["model"], inputs, baseline)  # the model as built
    np.testing.assert_allclose(result.static, expected["static"], atol=5e-4)
    np.testing.assert_allclose(result.temporal, expected["temporal"], atol=5e-4)


def test_trust_does_not_let_anything_else_through(attention, tmp_path):
    inp = keras.Input((3,))
    x = attention["trusted"].objects["Gate"](name="gate")(inp)
    x = keras.layers.Lambda(lambda v: v, name="lam")(x)
    keras.Model(inp, RegisteredLayer(name="other")(x)).save(tmp_path / "mixed.h5")
    with pytest.raises(UnsafeModelError) as excinfo:
        legacy.load_hdf5_model(tmp_path / "mixed.h5", trusted=attention["trusted"])
    message = assert_refused(excinfo, sl.UNSAFE_CONFIG, tmp_path / "mixed.h5", "2 part(s)",
                             "layer 'lam' (Lambda)", "'evil_h5>RegisteredLayer'")
    assert "(Gate)" not in message


@pytest.mark.parametrize("name, content, template, detail", [
    ("missing.py", None, trust.TRUST_NOT_FOUND, ""),
    ("layers.txt", "x = 1\n", trust.TRUST_NOT_PYTHON, ""),
    ("broken.py", "import no_such_module_here\n", trust.TRUST_IMPORT_FAILED,
     "ModuleNotFoundError: No module named 'no_such_module_here'"),
    ("exits.py", "raise SystemExit(3)\n", trust.TRUST_IMPORT_FAILED, "SystemExit: 3"),
    ("empty.py", "VALUE = 1\n", trust.TRUST_NOTHING, ""),
])
def test_unusable_trusted_code_is_refused_with_a_message(tmp_path, name, content, template, detail):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(trust.TrustError) as excinfo:
        trust.load_trusted_code(path)
    message = str(excinfo.value)
    assert template_regex(template).fullmatch(message), message
    assert str(path) in message and "To fix:" in message and detail in message


# --------------------------------------------------------------------------- bundles, CLI, dashboard


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def attribute_json(capsys, bundle: Path, ids, *extra, baseline: str = "zero", out_dir: Path) -> dict:
    out = out_dir / f"{bundle.name}-{len(extra)}.json"
    args = ["attribute", "--bundle", bundle, *[a for i in ids for a in ("--customer", i)],
            "--baseline", baseline, "--steps", "256", "--out", out, *extra]
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    return json.loads(out.read_text())


def arrays(doc: dict) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([c["static"]["values"] for c in doc["customers"]]),
            np.array([c["temporal"]["values"] for c in doc["customers"]]))


def assert_doc_complete(doc: dict) -> None:
    for c in doc["customers"]:
        total = np.sum(c["static"]["values"]) + np.sum(c["temporal"]["values"])
        gap = c["prediction"] - c["baseline_prediction"]
        assert total + c["delta"] == pytest.approx(gap, abs=1e-9)
        assert abs(c["delta"]) <= max(DEFAULT_TOLERANCE * abs(gap), ABSOLUTE_TOLERANCE), c


def test_bundle_with_model_h5_checks_and_explains_like_the_keras_bundle(demo, capsys):
    folder = demo["folder"] / "h5-bundle"
    folder.mkdir()
    for name in ("static.csv", "temporal.csv", "bundle.json"):
        shutil.copyfile(DEMO / name, folder / name)
    shutil.copyfile(demo["tf2"], folder / "model.h5")  # TensorFlow 2's layout, no model.keras
    code, out, _ = cli(capsys, "check", "--bundle", folder)
    assert code == 0, out
    ids = ["C00001", "C00017", "C03000"]
    from_h5 = attribute_json(capsys, folder, ids, baseline="mean", out_dir=demo["folder"])
    from_keras = attribute_json(capsys, DEMO, ids, baseline="mean", out_dir=demo["folder"])
    for a, b in zip(arrays(from_h5), arrays(from_keras)):
        np.testing.assert_allclose(a, b, atol=1e-7)
    assert_doc_complete(from_h5)
    bundle = load_bundle(folder)
    inputs = bundle.inputs_for(ids)
    static, temporal = (np.asarray(v, np.float64) for v in (bundle.data()["static"], bundle.data()["temporal"]))
    mean = {"static": static.mean(axis=0, keepdims=True),  # the "mean" baseline: per feature, every period alike
            "temporal": np.broadcast_to(temporal.mean(axis=(0, 1)), (1, *temporal.shape[1:]))}
    expected = reference_ig(bundle.model, inputs, mean)
    np.testing.assert_allclose(arrays(from_h5)[0], expected["static"], atol=5e-4)
    np.testing.assert_allclose(arrays(from_h5)[1], expected["temporal"], atol=5e-4)


@pytest.fixture(scope="module")
def custom_bundles(attention):
    """Bundles of the attention model: its tables, and the model as model.keras or as model.h5."""
    s_in, t_in = keras.Input((4,), name="static"), keras.Input((6, 3), name="temporal")
    stand_in = keras.Model([s_in, t_in], keras.layers.Dense(1)(keras.layers.Concatenate()(
        [s_in, keras.layers.Flatten()(t_in)])))  # save_bundle checks the bundle: a built-in model first
    rng = np.random.default_rng(8)
    static, temporal = rng.normal(size=(10, 4)).astype("f4"), rng.normal(size=(10, 6, 3)).astype("f4")
    folders = {}
    for kind in ("keras", "h5"):
        folder = save_bundle(attention["folder"] / f"bundle-{kind}", stand_in, static, temporal,
                             ids=[f"K{i}" for i in range(10)])
        (folder / "model.keras").unlink()
        attention["model"].save(folder / f"model.{kind}")
        folders[kind] = folder
    return {"folders": folders, "static": static, "temporal": temporal}


@pytest.mark.parametrize("kind", ["keras", "h5"])
def test_custom_layer_bundle_is_refused_without_trust_code_and_exact_with_it(attention, custom_bundles, capsys, kind):
    folder = custom_bundles["folders"][kind]
    code, out, _ = cli(capsys, "check", "--bundle", folder)
    assert code == 1 and "PeriodAttention" in out and "could run code" in out, out
    code, _, err = cli(capsys, "attribute", "--bundle", folder, "--customer", "K1", "--out", folder.parent / "x.json")
    assert code == 2 and "PeriodAttention" in err, err

    code, out, err = cli(capsys, "check", "--bundle", folder, "--trust-code", attention["code"])
    assert code == 0, out
    assert "trusted code loaded: layers.py" in err
    ids = ["K0", "K3", "K9"]
    doc = attribute_json(capsys, folder, ids, "--trust-code", attention["code"], out_dir=folder.parent)
    assert_doc_complete(doc)
    rows = [0, 3, 9]
    inputs = {"static": custom_bundles["static"][rows], "temporal": custom_bundles["temporal"][rows]}
    expected = reference_ig(attention["model"], inputs, {"static": np.zeros((1, 4)), "temporal": np.zeros((1, 6, 3))})
    static, temporal = arrays(doc)
    np.testing.assert_allclose(static, expected["static"], atol=5e-4)
    np.testing.assert_allclose(temporal, expected["temporal"], atol=5e-4)


def test_dashboard_with_trust_code_shows_the_badge_and_never_trusts_uploads(attention, custom_bundles, monkeypatch):
    from tests.support.apptest import app, bundle_files, errors, upload

    folder = custom_bundles["folders"]["keras"]
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)
    monkeypatch.setattr(sys, "argv", ["app.py", "--bundle", str(folder), "--trust-code", str(attention["code"])])
    at = app()
    badges = [m.value for m in at.sidebar.markdown if "badge[" in m.value]  # st.badge is markdown
    assert any("trusted code loaded: layers.py" in b for b in badges), badges
    assert not errors(at), errors(at)
    assert str(at.session_state["customer"]).startswith("K"), "the custom-layer bundle is not the one open"

    # The same model uploaded is refused: uploads never get the trusted code.
    at = upload(at.switch_page("pages/data.py").run(), bundle_files(folder))
    shown = " ".join(errors(at))
    assert "PeriodAttention" in shown and "could run code" in shown, shown

    # Without --trust-code the same bundle (another copy: the startup cache is per folder) is refused.
    plain = folder.parent / "bundle-untrusted"
    shutil.copytree(folder, plain)
    monkeypatch.setattr(sys, "argv", ["app.py", "--bundle", str(plain)])
    at = app()
    assert not [m.value for m in at.sidebar.markdown if "trusted code" in m.value]
    shown = " ".join(errors(at))
    assert "PeriodAttention" in shown and "could run code" in shown, shown


def test_serve_passes_trust_code_to_the_dashboard_which_reads_it_back(attention, custom_bundles):
    from explain import serve
    from ui import startup

    folder = custom_bundles["folders"]["keras"]
    argv = serve.command(folder, trust_code=attention["code"])
    app_args = argv[argv.index("--") + 1:]
    assert startup.bundle_path(app_args) == folder.resolve()
    assert startup.trusted_code(app_args) is attention["trusted"]  # imported once per process
    assert startup.trusted_badge(app_args) == "trusted code loaded: layers.py"
    assert startup.trusted_code(["--bundle", str(folder)]) is None and startup.model_loader([]) is None
    with pytest.raises(trust.TrustError) as excinfo:
        serve.command(folder, trust_code=folder / "missing.py")
    assert template_regex(trust.TRUST_NOT_FOUND).fullmatch(str(excinfo.value))
