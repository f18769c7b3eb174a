"""TensorFlow SavedModel bundles (``savedmodel/``): opened only with trust_model, never from an upload, TensorFlow
only, under the model limits; the attributions are the Keras model's, and a linear tf.Module's IG is exact."""

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import explain
from explain.analysis.explainer import explain_customers
from explain.bundle import load as bundle_io
from explain.core.errors import BundleError, ExplainError
from explain.core.settings import Settings
from explain.modelfile import savedmodel as saved
from explain.modelfile.limits import DEFAULT_LIMITS
from tests.support.savedmodel import demo_pair

IDS = ["C00001", "C00002", "C00007"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(the demo bundle with model.keras, the same bundle with the model exported by model.export into savedmodel/
    and model.keras removed)."""
    return demo_pair(tmp_path_factory.mktemp("savedmodel"))


def test_refused_without_trust_model_naming_the_flag(folders):
    _, sm_dir = folders
    report = bundle_io.validate_bundle(sm_dir)
    assert [p.message for p in report.problems] == [saved.NOT_TRUSTED]
    assert "--trust-model" in saved.NOT_TRUSTED and "savedmodel/" in saved.NOT_TRUSTED
    with pytest.raises(BundleError, match="pass --trust-model if you trust it"):
        explain.load_bundle(sm_dir)


def test_attributions_equal_the_keras_bundles(folders):
    keras_dir, sm_dir = folders
    reference = explain.load_bundle(keras_dir)
    bundle = explain.load_bundle(sm_dir, trust_model=True)
    assert [t.name for t in bundle.model.inputs] == ["static", "temporal"]  # the signature's names, sorted
    assert bundle.layout.engine_keys == ("static", "temporal") and bundle.output_names == reference.output_names
    np.testing.assert_array_equal(bundle.static, reference.static)
    for baseline in ("mean", "zero"):
        settings = Settings(baseline=baseline, steps=32)
        want = explain_customers(reference, IDS, settings)
        got = explain_customers(bundle, IDS, settings)
        np.testing.assert_allclose(got.prediction, want.prediction, atol=1e-6, rtol=0)
        difference = max(np.abs(got.static - want.static).max(), np.abs(got.temporal - want.temporal).max())
        print(f"baseline {baseline}: max |savedmodel - keras| attribution = {difference:.3g}")
        assert difference <= 1e-5
        assert np.abs(want.temporal).max() > 1e-3  # not all zero


def test_gradients_flow_through_the_loaded_function(folders):
    keras_dir, sm_dir = folders
    reference = explain.load_bundle(keras_dir)
    model = saved.open_savedmodel(sm_dir / "savedmodel")
    x = reference.inputs_for(IDS)
    feeds = {key: tf.constant(value) for key, value in x.items()}
    with tf.GradientTape() as tape:
        tape.watch(list(feeds.values()))
        out = model(feeds)
    got = tape.gradient(out, feeds)
    plain = [tf.constant(x["static"]), tf.constant(x["temporal"])]
    with tf.GradientTape() as tape:
        tape.watch(plain)
        expected = reference.model(plain)
    want = tape.gradient(expected, plain)
    np.testing.assert_allclose(got["static"].numpy(), want[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(got["temporal"].numpy(), want[1].numpy(), atol=1e-6)
    assert np.abs(want[1].numpy()).max() > 0


class Linear(tf.Module):
    """f(profile, usage) = profile . w_s + sum(usage * w_t) + c, one value per customer (shape (None,))."""

    def __init__(self, w_s, w_t, c):
        super().__init__()
        self.w_s, self.w_t, self.c = tf.Variable(w_s), tf.Variable(w_t), tf.Variable(c)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="profile"),
                                  tf.TensorSpec([None, 4, 2], tf.float32, name="usage")])
    def score(self, profile, usage):
        value = tf.reduce_sum(profile * self.w_s, axis=1) + tf.reduce_sum(usage * self.w_t, axis=[1, 2]) + self.c
        return {"score": value}


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    rng = np.random.default_rng(3)
    w_s = rng.normal(size=3).astype(np.float32)
    w_t = rng.normal(size=(4, 2)).astype(np.float32)
    module = Linear(w_s, w_t, np.float32(0.25))
    folder = tmp_path_factory.mktemp("linear") / "module"
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.score})
    static = rng.normal(size=(5, 3)).astype(np.float32)
    temporal = rng.normal(size=(5, 4, 2)).astype(np.float32)
    return folder, w_s, w_t, static, temporal


def test_tf_module_saved_with_save_bundle_gives_exact_ig(linear, tmp_path):
    folder, w_s, w_t, static, temporal = linear
    with pytest.raises(ExplainError, match="trust_model=True"):
        explain.save_bundle(tmp_path / "refused", str(folder), static, temporal)
    assert not (tmp_path / "refused").exists()
    path = explain.save_bundle(tmp_path / "b", str(folder), static, temporal, trust_model=True,
                               ids=[f"K{i}" for i in range(5)])
    assert (path / "savedmodel" / "saved_model.pb").is_file() and not (path / "model.keras").exists()
    bundle = explain.load_bundle(path, trust_model=True)
    assert [t.name for t in bundle.model.inputs] == ["profile", "usage"] and bundle.output_names == ["output"]
    ids = list(bundle.ids)
    expected = static @ w_s + (temporal * w_t).sum(axis=(1, 2)) + 0.25
    np.testing.assert_allclose(bundle.predict()[:, 0], expected, atol=1e-5)
    zero = explain_customers(bundle, ids, Settings(baseline="zero", steps=8))
    np.testing.assert_allclose(zero.static, static * w_s, atol=1e-5)
    np.testing.assert_allclose(zero.temporal, temporal * w_t, atol=1e-5)
    other = explain_customers(bundle, ids, Settings(baseline="customer:K4", steps=8))  # IG = (x - b) * w
    np.testing.assert_allclose(other.static, (static - static[4]) * w_s, atol=1e-5)
    np.testing.assert_allclose(other.temporal, (temporal - temporal[4]) * w_t, atol=1e-5)


def test_an_upload_holding_a_savedmodel_is_refused(folders, tmp_path):
    _, sm_dir = folders
    files = {"savedmodel/saved_model.pb": (sm_dir / "savedmodel" / "saved_model.pb").read_bytes(),
             "static.csv": (sm_dir / "static.csv").read_bytes(), "temporal.csv": (sm_dir / "temporal.csv").read_bytes()}
    for loader in (None, saved.TrustModel()):  # never from an upload, whatever the loader
        with pytest.raises(BundleError) as caught:
            bundle_io.load_bundle_from_uploads(files, tmp_path / "upload", loader=loader)
        assert saved.FROM_UPLOAD.format(name="savedmodel/saved_model.pb") in str(caught.value)
    assert not (tmp_path / "upload").exists()  # refused before anything was written
    from ui import uploads

    with pytest.raises(BundleError) as caught:  # the dashboard's upload: refused before any folder is made
        uploads.open_upload({"model/saved_model.pb": b"x", "static.csv": files["static.csv"]})
    assert str(caught.value) == saved.FROM_UPLOAD.format(name="model/saved_model.pb")
    for name in ("saved_model.pb", "variables/variables.index", "variables.data-00000-of-00001", "sm/fingerprint.pb"):
        assert saved.is_savedmodel_part(name)
    assert not saved.is_savedmodel_part("static.csv") and not saved.is_savedmodel_part("model.keras")


def test_under_jax_a_clear_message(folders, monkeypatch):
    _, sm_dir = folders
    from explain.core import backend

    monkeypatch.setattr(backend, "name", lambda: "jax")
    report = bundle_io.validate_bundle(sm_dir, trust_model=True)
    assert [p.message for p in report.problems] == [saved.NOT_TENSORFLOW.format(backend="jax")]
    assert "KERAS_BACKEND=tensorflow" in report.problems[0].message


def _files(folder: Path) -> dict:
    return {Path(d, n).relative_to(folder).as_posix(): Path(d, n).stat().st_size
            for d, _, names in os.walk(folder) for n in names}


def test_limits_apply_to_the_folders_files(folders, tmp_path):
    keras_dir, sm_dir = folders
    folder = sm_dir / "savedmodel"
    sizes = _files(folder)
    measured = saved.check_folder(folder)
    assert measured.files == tuple(f"savedmodel/{n}" for n in sorted(sizes))
    assert measured.total_bytes == sum(sizes.values())
    reader = tf.train.load_checkpoint(str(folder / "variables" / "variables"))  # the stored tensors themselves
    stored = sum(reader.get_tensor(name).size for name in reader.get_variable_to_shape_map()
                 if name != saved.OBJECT_GRAPH)
    assert measured.params == stored
    assert stored == 2 * explain.load_bundle(keras_dir).model.count_params() + 2  # Keras' export: each weight twice
    largest = max(sizes, key=sizes.get)
    refusals = {
        "max_file_bytes": (DEFAULT_LIMITS.but(max_file_bytes=sizes[largest] - 1), saved.FILE_TOO_LARGE.format(
            name=largest, size=sizes[largest], limit=sizes[largest] - 1)),
        "max_uncompressed_bytes": (DEFAULT_LIMITS.but(max_uncompressed_bytes=sum(sizes.values()) - 1),
                                   saved.TOTAL_TOO_LARGE.format(size=sum(sizes.values()),
                                                                limit=sum(sizes.values()) - 1)),
        "max_members": (DEFAULT_LIMITS.but(max_members=len(sizes) - 1),
                        saved.TOO_MANY_FILES.format(limit=len(sizes) - 1)),
        "max_params": (DEFAULT_LIMITS.but(max_params=measured.params - 1),
                       saved.TOO_MANY_PARAMS.format(params=measured.params, limit=measured.params - 1)),
    }
    for field, (limits, message) in refusals.items():
        report = bundle_io.validate_bundle(sm_dir, trust_model=True, limits=limits)
        assert [p.message for p in report.problems] == [message], field
        assert field in message
    assert bundle_io.validate_bundle(sm_dir, trust_model=True, limits=DEFAULT_LIMITS.but(max_params=None)).ok


def test_a_link_inside_and_two_models_are_refused(folders, tmp_path):
    keras_dir, sm_dir = folders
    linked = tmp_path / "linked"
    shutil.copytree(sm_dir, linked)
    (linked / "savedmodel" / "assets").mkdir(exist_ok=True)
    (linked / "savedmodel" / "assets" / "vocabulary.txt").symlink_to("/etc/hostname")
    report = bundle_io.validate_bundle(linked, trust_model=True)
    assert [p.message for p in report.problems] == [saved.NOT_PLAIN.format(name="assets/vocabulary.txt",
                                                                           what="a link")]
    both = tmp_path / "both"
    shutil.copytree(sm_dir, both)
    shutil.copyfile(keras_dir / "model.keras", both / "model.keras")
    report = bundle_io.validate_bundle(both, trust_model=True)
    assert [p.message for p in report.problems] == [saved.BOTH_MODELS.format(file="model.keras")]


class TwoHeads(tf.Module):
    """Two heads of t = sum(a) + sum(b): spend = 2 t (linear), churn = sigmoid(t)."""

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="a"),
                                  tf.TensorSpec([None, 3, 1], tf.float32, name="b")])
    def heads(self, a, b):
        total = tf.reduce_sum(a, axis=1, keepdims=True) + tf.reduce_sum(b, axis=[1, 2])[:, None]
        return {"spend": total * 2.0, "churn": tf.sigmoid(total)}


def test_several_outputs_are_heads_chosen_by_name(tmp_path):
    module = TwoHeads()
    folder = tmp_path / "bundle"
    tf.saved_model.save(module, str(folder / "savedmodel"), signatures={"serving_default": module.heads})
    static = np.array([[1.0, 0.0], [2.0, 1.0]])
    usage = np.arange(6.0).reshape(2, 3)
    pd.DataFrame({"customer_id": ["A", "B"], "x0": static[:, 0], "x1": static[:, 1]}).to_csv(
        folder / "static.csv", index=False)
    pd.DataFrame({"customer_id": np.repeat(["A", "B"], 3), "period": ["p1", "p2", "p3"] * 2,
                  "u": usage.ravel()}).to_csv(folder / "temporal.csv", index=False)
    assert saved.open_savedmodel(folder / "savedmodel").output_names == ["churn", "spend"]  # the names, sorted
    bundle = explain.load_bundle(folder, trust_model=True)
    total = static.sum(axis=1) + usage.sum(axis=1)
    spend = explain_customers(bundle, ["A", "B"], Settings(baseline="zero", steps=8, output="spend"))
    np.testing.assert_allclose(spend.prediction, 2 * total, atol=1e-5)
    np.testing.assert_allclose(spend.static, 2 * static, atol=1e-5)  # linear: IG = (x - 0) * 2
    np.testing.assert_allclose(spend.temporal[..., 0], 2 * usage, atol=1e-5)
    churn = explain_customers(bundle, ["A", "B"], Settings(baseline="zero", steps=8))  # the first head by default
    np.testing.assert_allclose(churn.prediction, 1 / (1 + np.exp(-total)), atol=1e-6)


class NoSignature(tf.Module):
    @tf.function
    def score(self, x):
        return x * 2.0


class FixedBatch(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32, name="profile"),
                                  tf.TensorSpec([None, 4, 2], tf.float32, name="usage")])
    def score(self, profile, usage):
        return {"score": tf.reduce_sum(profile, axis=1) + tf.reduce_sum(usage, axis=[1, 2])}


def test_a_signature_missing_or_of_a_fixed_batch_is_said(tmp_path):
    module = NoSignature()
    module.score(tf.ones((2, 3)))
    tf.saved_model.save(module, str(tmp_path / "none"), signatures={})
    with pytest.raises(saved.SavedModelError) as caught:
        saved.open_savedmodel(tmp_path / "none")
    assert str(caught.value) == saved.NO_SIGNATURE.format(found="[]")
    fixed = FixedBatch()
    tf.saved_model.save(fixed, str(tmp_path / "fixed"), signatures={"serving_default": fixed.score})
    with pytest.raises(saved.SavedModelError) as caught:
        saved.open_savedmodel(tmp_path / "fixed")
    assert str(caught.value) == saved.FIXED_BATCH.format(name="profile", shape=(1, 3))


class ThreeInputs(tf.Module):
    """Linear in three inputs whose names sort otherwise than their signature order: z (None, 2), a (None, 1),
    m (None, 4, 2)."""

    def __init__(self, weights):
        super().__init__()
        self.weights = {key: tf.Variable(value) for key, value in weights.items()}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="z"),
                                  tf.TensorSpec([None, 1], tf.float32, name="a"),
                                  tf.TensorSpec([None, 4, 2], tf.float32, name="m")])
    def score(self, z, a, m):
        value = (tf.reduce_sum(z * self.weights["z"], axis=1) + tf.reduce_sum(a * self.weights["a"], axis=1)
                 + tf.reduce_sum(m * self.weights["m"], axis=[1, 2]))
        return {"score": value[:, None]}


def test_the_tables_are_matched_to_the_signatures_inputs_by_name(tmp_path):
    rng = np.random.default_rng(5)
    weights = {"z": rng.normal(size=2), "a": rng.normal(size=1), "m": rng.normal(size=(4, 2))}
    weights = {key: value.astype(np.float32) for key, value in weights.items()}
    module = ThreeInputs(weights)
    tf.saved_model.save(module, str(tmp_path / "three"), signatures={"serving_default": module.score})
    inputs = {"m": rng.normal(size=(4, 4, 2)).astype(np.float32), "z": rng.normal(size=(4, 2)).astype(np.float32),
              "a": rng.normal(size=(4, 1)).astype(np.float32)}
    path = explain.save_bundle(tmp_path / "b", str(tmp_path / "three"), inputs, trust_model=True)
    bundle = explain.load_bundle(path, trust_model=True)
    assert [t.name for t in bundle.model.inputs] == ["a", "m", "z"]  # the order of their names
    got = explain_customers(bundle, list(bundle.ids), Settings(baseline="zero", steps=8))
    for key in ("a", "m", "z"):
        np.testing.assert_allclose(got.inputs[key], inputs[key] * weights[key], atol=1e-5, err_msg=key)
