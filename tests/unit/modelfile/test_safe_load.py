"""Tests of explain.modelfile.safe_load: every hostile file is built here, in tmp folders.

Each refusal is matched against the message template it must come from, names the
file and says how to fix it.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import string
import subprocess
import sys
import zipfile
from pathlib import Path

import h5py
import keras
import numpy as np
import psutil
import pytest

from explain.core.errors import UnsafeModelError
from explain.modelfile import common, trial
from explain.modelfile import safe_load as sl
from explain.modelfile.trial import PROJECT_ROOT
from tests.support.hostile import (
    DELETE,
    SAVEDMODEL_ZIPS,
    archive_with,
    dense_file,
    hdf5_file,
    huge_dense_file,
    lambda_file,
    lookup_file,
    nested_lambda_file,
    rewrite_config,
    tiny_model_file,
    write_zip,
)
from tests.support.hostile import replace_dense as _replace_dense
from tests.support.hostile import set_dense_config as _set_dense_config

# --------------------------------------------------------------------------- helpers


def template_regex(template: str) -> re.Pattern:
    """A regex matching any message formatted from ``template``."""
    parts = []
    for literal, field, _spec, _conv in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append("(?s:.*?)")
    return re.compile("".join(parts), re.DOTALL)


def why_prefix(reason, **fields) -> str:
    """The fixed start of a reason's 'why' text (up to its first field)."""
    why = reason[0]
    return why.split("{", 1)[0] if "{" in why else why


def assert_refused(excinfo, template: str, path, *contains: str) -> str:
    message = str(excinfo.value)
    assert isinstance(excinfo.value, UnsafeModelError)
    assert isinstance(excinfo.value, ValueError)
    assert template_regex(template).fullmatch(message), message
    assert str(path) in message, f"the message does not name the file:\n{message}"
    assert "To fix:" in message, f"the message does not say how to fix it:\n{message}"
    for text in contains:
        assert text in message, f"{text!r} not in:\n{message}"
    return message


def rss() -> int:
    return psutil.Process().memory_info().rss


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def safe_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("safe_load")


@pytest.fixture(scope="module")
def safe_clean(safe_dir):
    """The project's two-input shape: static (None, 5) and temporal (None, 12, 4)."""
    rng = np.random.default_rng(0)
    static = keras.Input((5,), name="static")
    temporal = keras.Input((12, 4), name="temporal")
    norm = keras.layers.Normalization(name="norm")
    norm.adapt(rng.normal(3.0, 2.0, size=(64, 5)).astype("float32"))
    s = keras.layers.Dense(8, activation="relu", name="static_dense")(norm(static))
    t = keras.layers.LSTM(8, name="lstm")(temporal)
    out = keras.layers.Dense(1, activation="sigmoid", name="out")(
        keras.layers.Concatenate(name="concat")([s, t])
    )
    model = keras.Model([static, temporal], out, name="churn")
    path = safe_dir / "clean.keras"
    model.save(path)
    x = [rng.normal(size=(7, 5)).astype("float32"), rng.normal(size=(7, 12, 4)).astype("float32")]
    return model, path, x, model.predict(x, verbose=0)


@pytest.fixture(scope="module")
def safe_tiny(safe_dir) -> Path:
    """Input(5) -> Dense(3): the base that config-editing tests tamper with."""
    return tiny_model_file(safe_dir / "tiny.keras")


@pytest.fixture(scope="module")
def safe_huge(safe_dir, safe_tiny) -> Path:
    """A tiny file declaring Dense(100_000) after 100_000 features: 10**10 weights, 40 GB."""
    return huge_dense_file(safe_tiny, safe_dir / "huge.keras")


# --------------------------------------------------------------------------- clean files


def test_clean_two_input_model_loads_and_predicts_identically(safe_clean):
    model, path, x, expected = safe_clean
    report = sl.check_model_file(path)
    assert report.estimated_params == pytest.approx(model.count_params(), rel=0.05)
    assert set(report.members) == {"config.json", "metadata.json", "model.weights.h5"}
    loaded = sl.load_model(path)
    assert isinstance(loaded, keras.Model)
    assert [tuple(i.shape) for i in loaded.inputs] == [(None, 5), (None, 12, 4)]
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), expected)


def test_clean_model_loads_from_a_name_without_the_keras_suffix(safe_clean, tmp_path):
    _, path, x, expected = safe_clean
    upload = shutil.copyfile(path, tmp_path / "upload.bin")
    np.testing.assert_array_equal(sl.load_model(upload).predict(x, verbose=0), expected)


def test_clean_model_loads_isolated(safe_clean):
    _, path, x, expected = safe_clean
    loaded = sl.load_model_isolated(path)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), expected)


# --------------------------------------------------------------------------- code in config


def test_lambda_that_writes_a_marker_is_refused_and_never_runs(tmp_path):
    marker = str(tmp_path / "pwned")
    path = lambda_file(tmp_path / "lambda.keras", marker)

    for load in (sl.check_model_file, sl.load_model, sl.load_model_isolated):
        with pytest.raises(UnsafeModelError) as excinfo:
            load(path)
        assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "outer > layers[1]",
                       "layer 'evil' (Lambda)", why_prefix(sl.REASON_LAMBDA))
        assert not os.path.exists(marker)
    # The file is really hostile: Keras without safe mode runs the lambda.
    keras.saving.load_model(path, safe_mode=False, compile=False)
    assert os.path.exists(marker)


def test_nested_model_hiding_a_lambda_is_refused_with_its_path(tmp_path):
    path = nested_lambda_file(tmp_path / "nested.keras")
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "functional > inner_model > layers[2]",
                   "(Lambda)", "keras.layers.Normalization")


@keras.saving.register_keras_serializable(package="evil")
class EvilLayer(keras.layers.Layer):
    def call(self, x):
        return x


def test_every_offending_layer_is_listed_not_only_the_first(tmp_path):
    inp = keras.Input((4,))
    x = keras.layers.Lambda(lambda t: t + 1, name="first_lambda")(inp)
    x = EvilLayer(name="custom")(x)
    x = keras.layers.TimeDistributed(keras.layers.Lambda(lambda t: t, name="inner_lambda"),
                                     name="td")(keras.layers.Reshape((2, 2))(x))
    path = tmp_path / "many.keras"
    keras.Model(inp, x, name="m").save(path)
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    message = assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "3 part(s)",
                             "layer 'first_lambda' (Lambda)", "m > td > layer",
                             why_prefix(sl.REASON_REGISTERED), "'evil>EvilLayer'")
    assert len(excinfo.value.problems) == 3
    for line in excinfo.value.problems:
        assert template_regex(sl.UNSAFE_ITEM).fullmatch(line), line
        assert line in message


def test_custom_registered_layer_is_refused(tmp_path):
    inp = keras.Input((4,))
    path = tmp_path / "custom.keras"
    keras.Model(inp, EvilLayer(name="sneaky")(inp)).save(path)
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "layer 'sneaky' (EvilLayer)",
                   "registered as 'evil>EvilLayer'", "custom layers cannot be uploaded")


_LAMBDA_CODE = {"class_name": "__lambda__",
                "config": {"code": "4wEAAAAA", "defaults": None, "closure": None}}

EDITED_CONFIGS = [
    ("module-os", _replace_dense(module="os", class_name="system"),
     sl.REASON_MODULE, "'os'"),
    ("module-builtins", _replace_dense(module="builtins", class_name="eval"),
     sl.REASON_MODULE, "'builtins'"),
    ("module-lookalike", _replace_dense(module="keras_evil.layers"),
     sl.REASON_MODULE, "'keras_evil.layers'"),
    ("no-module", _replace_dense(module=DELETE), sl.REASON_NO_MODULE, "'Dense'"),
    ("registered-name", _replace_dense(registered_name="evil>Dense"),
     sl.REASON_REGISTERED, "'evil>Dense'"),
    ("tfsm-layer", _replace_dense(class_name="TFSMLayer"),
     sl.REASON_DENIED_CLASS["TFSMLayer"], "(TFSMLayer)"),
    ("torch-wrapper", _replace_dense(class_name="TorchModuleWrapper"),
     sl.REASON_DENIED_CLASS["TorchModuleWrapper"], "(TorchModuleWrapper)"),
    ("jax-layer", _replace_dense(class_name="JaxLayer"),
     sl.REASON_DENIED_CLASS["JaxLayer"], "(JaxLayer)"),
    ("flax-layer", _replace_dense(class_name="FlaxLayer"),
     sl.REASON_DENIED_CLASS["FlaxLayer"], "(FlaxLayer)"),
    ("keras-utility", _replace_dense(module="keras.utils", class_name="get_file"),
     sl.REASON_NOT_MODELING, "keras.utils.get_file"),
    ("lambda-layer", _replace_dense(class_name="Lambda"), sl.REASON_LAMBDA, "(Lambda)"),
    ("activation-os-system",
     _set_dense_config("activation", {"module": "os", "class_name": "function",
                                      "config": "system", "registered_name": None}),
     sl.REASON_FUNCTION, "os.system"),
    ("activation-builtins-eval",
     _set_dense_config("activation", {"module": "builtins", "class_name": "function",
                                      "config": "eval", "registered_name": "function"}),
     sl.REASON_FUNCTION, "builtins.eval"),
    ("activation-lambda", _set_dense_config("activation", _LAMBDA_CODE),
     sl.REASON_PY_LAMBDA, "tiny > dense > activation"),
    ("initializer-outside-keras",
     _set_dense_config("kernel_initializer", {"module": "subprocess", "class_name": "Popen",
                                              "config": {}, "registered_name": None}),
     sl.REASON_MODULE, "tiny > dense > kernel_initializer"),
    ("malformed-class-name", _replace_dense(class_name=["Dense"]), sl.REASON_MALFORMED, ""),
]


@pytest.mark.parametrize("edit, reason, detail", [c[1:] for c in EDITED_CONFIGS],
                         ids=[c[0] for c in EDITED_CONFIGS])
def test_tampered_config_is_refused(safe_tiny, tmp_path, edit, reason, detail):
    path = rewrite_config(safe_tiny, tmp_path / "tampered.keras", edit)
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.UNSAFE_CONFIG, path, "1 part(s)", why_prefix(reason), detail)


def test_builtin_function_references_are_accepted(safe_tiny, tmp_path):
    edit = _set_dense_config("activation", {"module": "builtins", "class_name": "function",
                                            "config": "relu", "registered_name": "function"})
    path = rewrite_config(safe_tiny, tmp_path / "relu.keras", edit)
    assert sl.load_model(path).get_layer("dense").activation is keras.activations.relu


@pytest.mark.parametrize("class_name", ["StringLookup", "IntegerLookup", "TextVectorization"])
def test_lookup_vocabulary_read_from_a_local_file_is_refused(safe_tiny, tmp_path, class_name):
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    path = lookup_file(safe_tiny, tmp_path / "vocab.keras", secret, class_name)
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.UNSAFE_CONFIG, path, f"layer 'lookup' ({class_name})",
                   why_prefix(sl.REASON_VOCAB_FILE), str(secret), "vocabulary=[...]")


def test_lookup_with_a_stored_vocabulary_loads(tmp_path):
    model = keras.Sequential([keras.Input((1,), dtype="string"),
                              keras.layers.StringLookup(vocabulary=["a", "b"])])
    path = tmp_path / "lookup.keras"
    model.save(path)
    loaded = sl.load_model(path)
    assert loaded.layers[-1].get_vocabulary() == ["[UNK]", "a", "b"]


def test_top_level_compile_config_is_not_checked_because_it_is_never_read(safe_tiny, tmp_path):
    def edit(config):
        config["compile_config"] = {"loss": {"module": "my_pkg.losses", "class_name": "MyLoss",
                                             "config": {}, "registered_name": "my_pkg>MyLoss"}}

    path = rewrite_config(safe_tiny, tmp_path / "compiled.keras", edit)
    assert isinstance(sl.load_model(path), keras.Model)


# --------------------------------------------------------------------------- other formats


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_hdf5_model_is_refused_with_how_to_convert(tmp_path, suffix):
    path = hdf5_file(tmp_path / f"renamed{suffix}")
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.HDF5, path, 'model.save("model.keras")')


@pytest.mark.parametrize("members", SAVEDMODEL_ZIPS.values(), ids=SAVEDMODEL_ZIPS.keys())
def test_zipped_savedmodel_is_refused(tmp_path, members):
    path = write_zip(tmp_path / "savedmodel.keras", members)
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.SAVEDMODEL, path, "saved_model.pb", 'model.save("model.keras")')


def test_savedmodel_folder_is_refused(tmp_path):
    folder = tmp_path / "exported"
    folder.mkdir()
    (folder / "saved_model.pb").write_bytes(b"\x08\x01")
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(folder)
    assert_refused(excinfo, sl.SAVEDMODEL, folder, "a folder with saved_model.pb")


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(tmp_path)
    assert_refused(excinfo, sl.IS_DIRECTORY, tmp_path)


# --------------------------------------------------------------------------- the archive


@pytest.mark.parametrize("name, why", [
    ("../evil", "'..' component"),
    ("assets/../../evil.py", "'..' component"),
    ("/etc/cron.d/evil", "absolute path"),
    ("C:/Windows/evil.dll", "absolute path"),
    ("\\\\server\\evil", "absolute path"),
])
def test_zip_slip_members_are_refused(safe_tiny, tmp_path, name, why):
    path = write_zip(tmp_path / "slip.keras", archive_with(safe_tiny, {name: b"evil"}))
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.UNSAFE_MEMBER, path, repr(name), why)


def test_duplicate_members_are_refused(safe_tiny, tmp_path):
    path = write_zip(tmp_path / "dup.keras", archive_with(safe_tiny, {}))
    with pytest.warns(UserWarning, match="Duplicate name"):
        with zipfile.ZipFile(path, "a") as zf:
            zf.writestr("config.json", b"{}")
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.UNSAFE_MEMBER, path, "'config.json'", "appears twice")


def test_declared_uncompressed_size_over_the_cap_is_refused(safe_tiny, tmp_path):
    members = archive_with(safe_tiny, {"model.weights.h5": bytes(4 * 1024**2)})
    path = write_zip(tmp_path / "bomb.keras", members, zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < 64 * 1024
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path, limits=sl.Limits(max_uncompressed_bytes=1024**2))
    assert_refused(excinfo, sl.UNCOMPRESSED_TOO_LARGE, path, "1,048,576",
                   "max_uncompressed_bytes")


def test_too_many_members_are_refused_before_the_archive_is_opened(safe_tiny, tmp_path):
    extra = {f"assets/file_{i}.txt": b"x" for i in range(20)}
    path = write_zip(tmp_path / "many.keras", archive_with(safe_tiny, extra))
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path, limits=sl.Limits(max_members=10))
    assert_refused(excinfo, sl.TOO_MANY_MEMBERS, path, "23 files", "limit of 10")
    # The same archive with a cap that allows it: assets are expected members.
    assert sl.check_model_file(path, limits=sl.Limits(max_members=100)).members[-1] == "assets/file_19.txt"


def test_unexpected_members_are_refused(safe_tiny, tmp_path):
    path = write_zip(tmp_path / "extra.keras", archive_with(safe_tiny, {"run_me.py": b"x"}))
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.UNEXPECTED_MEMBERS, path, "'run_me.py'")


def test_zip_without_config_is_refused(tmp_path):
    path = write_zip(tmp_path / "photos.keras", {"cat.jpg": b"\xff\xd8"})
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.MISSING_CONFIG, path, "'cat.jpg'")


@pytest.mark.parametrize("config, reason", [
    (b"{not json", "JSONDecodeError"),
    (b"[1, 2]", "does not describe a Keras object"),
    (b"\xff\xfe", "UnicodeDecodeError"),
])
def test_unreadable_config_is_refused(safe_tiny, tmp_path, config, reason):
    path = write_zip(tmp_path / "bad.keras", archive_with(safe_tiny, {"config.json": config}))
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.BAD_CONFIG, path, reason)


# --------------------------------------------------------------------------- bad files


def _truncated(safe_tiny, tmp_path):
    data = safe_tiny.read_bytes()
    return data[: len(data) // 2]


def _random_bytes(*_):
    return np.random.default_rng(1).integers(128, 256, 4096).astype("u1").tobytes()


RAW_FILES = [
    ("empty", lambda *_: b"", common.EMPTY_FILE, ""),
    ("random-bytes", _random_bytes, sl.NOT_A_ZIP, "binary data"),
    ("text", lambda *_: b"hello, this is not a model\n", sl.NOT_A_ZIP, "a text file"),
    ("json", lambda *_: b'{"class_name": "Functional"}', sl.NOT_A_ZIP, "JSON text"),
    ("pickle", lambda *_: b"\x80\x04\x95\x00\x00", sl.NOT_A_ZIP, "Python pickle"),
    ("empty-zip", lambda *_: b"PK\x05\x06" + bytes(18), sl.NOT_A_ZIP, "an empty zip archive"),
    ("truncated-zip", _truncated, sl.CORRUPT_ZIP, "truncated"),
    ("zip-header-only", lambda *_: b"PK\x03\x04" + bytes(100), sl.CORRUPT_ZIP, ""),
    ("hdf5-with-user-block", lambda *_: bytes(512) + b"\x89HDF\r\n\x1a\n" + bytes(64),
     sl.HDF5, ""),
]


@pytest.mark.parametrize("make, template, detail", [r[1:] for r in RAW_FILES],
                         ids=[r[0] for r in RAW_FILES])
def test_files_that_are_not_keras_archives_are_refused(safe_tiny, tmp_path, make, template,
                                                      detail):
    path = tmp_path / "model.keras"
    path.write_bytes(make(safe_tiny, tmp_path))
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, template, path, detail)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(tmp_path / "nope.keras")
    assert_refused(excinfo, sl.NOT_FOUND, tmp_path / "nope.keras")


def test_file_over_the_size_cap_is_refused(safe_tiny):
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(safe_tiny, limits=sl.Limits(max_file_bytes=1000))
    assert_refused(excinfo, sl.FILE_TOO_LARGE, safe_tiny, "limit of 1,000 bytes", "max_file_bytes")


def test_display_name_replaces_the_temporary_path(tmp_path):
    path = tmp_path / "tmp1234.keras"
    path.write_bytes(b"")
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path, display_name="churn_model.keras")
    assert str(excinfo.value).startswith("churn_model.keras is empty")


# --------------------------------------------------------------------------- the weights


def _weights_zip(safe_tiny, tmp_path, build) -> Path:
    h5_path = tmp_path / "w.h5"
    with h5py.File(h5_path, "w") as h5:
        build(h5)
    members = archive_with(safe_tiny, {"model.weights.h5": h5_path.read_bytes()})
    return write_zip(tmp_path / "weights.keras", members)


def test_weights_declaring_a_huge_compressed_dataset_are_refused(safe_tiny, tmp_path):
    def build(h5):  # 4 GB declared, a few KB stored (chunked, gzip, never written)
        h5.create_dataset("layers/dense/vars/0", shape=(100_000, 10_000), dtype="f4",
                          chunks=(1000, 1000), compression="gzip")

    path = _weights_zip(safe_tiny, tmp_path, build)
    assert path.stat().st_size < 100_000
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.WEIGHTS_TOO_LARGE, path, "4,000,000,000 bytes")


@pytest.mark.parametrize("kind", ["external-link", "external-storage"])
def test_weights_reading_other_files_are_refused(safe_tiny, tmp_path, kind):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(bytes(60))

    def build(h5):
        if kind == "external-link":
            h5["layers/dense/vars/0"] = h5py.ExternalLink(str(tmp_path / "other.h5"), "/x")
        else:
            h5.create_dataset("layers/dense/vars/0", shape=(5, 3), dtype="f4",
                              external=[(str(secret), 0, 60)])

    path = _weights_zip(safe_tiny, tmp_path, build)
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.BAD_WEIGHTS, path, "layers/dense/vars/0")


def test_weights_that_are_not_hdf5_are_refused(safe_tiny, tmp_path):
    members = archive_with(safe_tiny, {"model.weights.h5": b"not hdf5 at all"})
    path = write_zip(tmp_path / "w.keras", members)
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    assert_refused(excinfo, sl.BAD_WEIGHTS, path, "is not a valid HDF5 file")


# --------------------------------------------------------------------------- Keras errors


def test_keras_errors_are_wrapped_with_the_file_and_the_original_summary(safe_tiny, tmp_path):
    path = rewrite_config(safe_tiny, tmp_path / "broken.keras",
                          _set_dense_config("units", "three"))
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(path)
    message = assert_refused(excinfo, sl.LOAD_FAILED, path)
    assert excinfo.value.__cause__ is not None
    assert type(excinfo.value.__cause__).__name__ in message
    assert "\n" not in message


# --------------------------------------------------------------------------- too large


def test_huge_layer_is_refused_from_the_config_without_using_memory(safe_huge):
    before_rss, before_peak = rss(), peak_rss()
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model(safe_huge)
    assert_refused(excinfo, sl.TOO_MANY_PARAMS, safe_huge, "10,000,100,000 weights",
                   "dense (Dense)", "max_params")
    assert rss() - before_rss < 500 * 1024**2
    assert peak_rss() - before_peak < 500 * 1024**2


def test_huge_layer_is_stopped_by_the_child_process_when_the_estimate_is_off(safe_huge):
    before_rss, before_peak = rss(), peak_rss()
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model_isolated(safe_huge, limits=sl.Limits(max_params=None))
    assert_refused(excinfo, trial.ISOLATED_TOO_LARGE, safe_huge, "8 GiB", "memory_limit_bytes")
    assert rss() - before_rss < 500 * 1024**2
    assert peak_rss() - before_peak < 500 * 1024**2


def test_the_memory_limit_is_enforced_in_the_child(safe_tiny, tmp_path):
    # 5 * 10**8 weights = 2 GB: would fit in this machine, not in 3 GiB next to TensorFlow.
    path = dense_file(safe_tiny, tmp_path / "big.keras", 20_000, 25_000)
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model_isolated(path, limits=sl.Limits(max_params=None, memory_limit_bytes=3 * 1024**3))
    assert_refused(excinfo, trial.ISOLATED_TOO_LARGE, path, "3 GiB")


def test_slow_load_is_stopped(safe_clean):
    _, path, _, _ = safe_clean
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model_isolated(path, limits=sl.Limits(timeout_s=0.2))
    assert_refused(excinfo, trial.ISOLATED_TIMEOUT, path, "0.2 s", "timeout_s")


def test_memory_limit_too_small_for_tensorflow_says_so(safe_clean):
    _, path, _, _ = safe_clean
    with pytest.raises(UnsafeModelError) as excinfo:
        sl.load_model_isolated(path, limits=sl.Limits(memory_limit_bytes=300 * 1024**2))
    assert_refused(excinfo, trial.ISOLATED_FAILED, path, "memory_limit_bytes")


# --------------------------------------------------------------------------- the templates


def test_every_template_names_the_file_and_says_how_to_fix_it():
    templates = {name: value for name, value in vars(sl).items()
                 if name.isupper() and isinstance(value, str) and "{" in value
                 and not name.startswith(("_", "REASON_", "DEFAULT_"))}
    assert len(templates) >= 20
    for name, template in templates.items():
        if name == "UNSAFE_ITEM":
            assert "To fix: {fix}" in template
            continue
        assert template.startswith("{path}"), name
        if name != "UNSAFE_CONFIG":  # its items each carry their own "To fix:"
            assert "To fix:" in template, name
    reasons = [v for k, v in vars(sl).items() if k.startswith("REASON_") and isinstance(v, tuple)]
    reasons += list(sl.REASON_DENIED_CLASS.values())
    for why, fix in reasons:
        assert why.endswith(".") and fix.endswith("."), (why, fix)



def test_the_trial_child_imports_nothing_heavy_before_its_memory_cap():
    """The child imports ``explain.modelfile.safe_load`` first: that must not pull in TensorFlow or Keras."""
    code = ("import sys; import explain.modelfile.safe_load; heavy = [m for m in ('tensorflow', 'keras', 'numpy') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "[]"
