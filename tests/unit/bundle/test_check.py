"""``python -m explain check`` reports up front what makes every attribution fail or meaningless,
with the words ``attribute`` uses; label values compare as text and as numbers.

Models unlike the demo are built here: one whose output ignores its temporal input, one with an
integer static input, one whose temporal input goes through a ``Masking`` layer.
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from explain.bundle.load import POSITIVE_LABEL_NOTE, load_bundle, validate_bundle
from explain.bundle.save import save_bundle
from explain.cli import main
from explain.core import engine, ig, inputs, labels
from explain.core.errors import AttributionError
from explain.core.ig import integrated_gradients
from tests.unit.modelfile.test_safe_load import template_regex

N, S, T, F = 12, 3, 5, 2


def data(seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.normal(1.0, 1.0, (N, S)).astype("f4"), rng.normal(1.0, 1.0, (N, T, F)).astype("f4"))


def two_inputs(static_dtype="float32"):
    return keras.Input((S,), name="static", dtype=static_dtype), keras.Input((T, F), name="temporal")


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("check")


@pytest.fixture(scope="module")
def ignores_temporal(folder):
    """The output reads the static input only: the temporal input is an input of the model, unused."""
    keras.utils.set_random_seed(1)
    s_in, t_in = two_inputs()
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(s_in))
    static, temporal = data()
    return save_bundle(folder / "ignores", model, static, temporal)


def test_check_warns_about_an_input_the_model_does_not_use_and_attribute_gives_it_zeros(
        ignores_temporal, capsys, tmp_path):
    note = engine.IGNORED_INPUT.format(role="temporal", name="temporal")
    code, out, _ = cli(capsys, "check", "--bundle", str(ignores_temporal))
    assert code == 0 and f"Warning: {note}" in out, out  # a warning, not a problem
    out_file = tmp_path / "x.json"
    code, out, _ = cli(capsys, "attribute", "--bundle", str(ignores_temporal), "--customer", "0", "--customer", "1",
                       "--steps", "16", "--out", str(out_file))
    assert code == 0 and f"note: {note}" in out, out
    doc = json.loads(out_file.read_text())
    assert doc["notes"] == [note] and doc["ignored_inputs"] == ["temporal"]
    for entry in doc["customers"]:
        assert all(v == 0.0 for row in entry["temporal"]["values"] for v in row)
        total = sum(entry["static"]["values"])
        assert abs(entry["prediction"] - entry["baseline_prediction"] - total) < 1e-4  # the static input alone adds up


def test_check_reports_an_integer_input_in_the_words_of_attribute(folder, capsys, tmp_path):
    keras.utils.set_random_seed(2)
    s_in, t_in = two_inputs("int32")
    z = keras.layers.Concatenate()([keras.layers.Dense(2)(keras.ops.cast(s_in, "float32")),
                                    keras.layers.LSTM(2)(t_in)])
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(z))
    static, temporal = data()
    path = save_bundle(folder / "integer", model, np.round(static), temporal)
    code, out, _ = cli(capsys, "check", "--bundle", str(path))
    expected = inputs.NON_FLOAT_INPUT.format(role="static", name="static", dtype="int32")
    assert code == 1 and expected in out, out
    code, _, err = cli(capsys, "attribute", "--bundle", str(path), "--customer", "0",
                       "--out", str(tmp_path / "x.json"))
    assert code == 2 and expected in " ".join(err.split()), err


def test_check_reports_a_baseline_that_is_all_mask_value(folder, capsys):
    keras.utils.set_random_seed(3)
    s_in, t_in = two_inputs()
    h = keras.layers.LSTM(3)(keras.layers.Masking(mask_value=0.0, name="pad")(t_in))
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(
        keras.layers.Concatenate()([keras.layers.Dense(2)(s_in), h])))
    static, temporal = data()
    temporal[:4, :2] = 0.0  # four customers with a shorter, zero-padded history
    path = save_bundle(folder / "masked", model, static, temporal)
    # the zero baseline as attribute builds it (explain.core.baselines) never has a real month at the
    # mask value, so check has nothing to report; a raw all-zero baseline is reported up front
    # in the words attribute raises (ig.model_problems, issue 11)
    code, out, _ = cli(capsys, "check", "--bundle", str(path))
    assert code == 0, out
    inputs = {"static": static[:4], "temporal": temporal[:4]}
    raw_zero = {"static": 0 * static[:1], "temporal": 0 * temporal[:1]}
    problems = ig.model_problems(model, inputs=inputs, baselines={"zero": raw_zero})
    with pytest.raises(AttributionError) as excinfo:
        integrated_gradients(model, inputs, raw_zero, steps=8)
    assert problems == [f"zero baseline: {excinfo.value}"] and "mask value 0.0" in problems[0]
    # the same model and data with a mask value no period takes: nothing to report
    problems = ig.model_problems(model, inputs={"static": static, "temporal": temporal},
                                 baselines={"zero": {"static": 0 * static, "temporal": 0 * temporal + 7}})
    assert problems == []


def test_check_finds_nothing_in_a_connected_float_model(folder, capsys):
    keras.utils.set_random_seed(4)
    s_in, t_in = two_inputs()
    z = keras.layers.Concatenate()([keras.layers.Dense(2)(s_in), keras.layers.GRU(2)(t_in)])
    model = keras.Model([s_in, t_in], keras.layers.Dense(2, activation="softmax")(z))
    static, temporal = data()
    path = save_bundle(folder / "clean", model, static, temporal)
    code, out, _ = cli(capsys, "check", "--bundle", str(path))
    assert code == 0, out


def test_model_problems_agrees_with_the_engine_on_a_stop_gradient():
    # The temporal branch reaches the output through stop_gradient only: its gradient is None, which
    # is what the engine refuses; model_problems says so before any attribution, with its words.
    s_in, t_in = two_inputs()
    t = keras.ops.stop_gradient(keras.layers.Dense(1)(keras.layers.Flatten()(t_in)))
    model = keras.Model([s_in, t_in], keras.layers.Add()([keras.layers.Dense(1)(s_in), t]))
    static, temporal = data()
    inputs = {"static": static[:2], "temporal": temporal[:2]}
    problems = ig.model_problems(model, inputs=inputs)
    assert problems == [engine.DISCONNECTED_INPUT.format(target="column 0", role="temporal", name="temporal")]
    with pytest.raises(AttributionError) as excinfo:
        integrated_gradients(model, inputs, {"static": 0 * static[:1], "temporal": 0 * temporal[:1]}, steps=8)
    assert str(excinfo.value) == problems[0]


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize("stored, given, note", [
    ([0, 1], "1", False), ([0, 1], 1, False), ([0, 1], "1.0", False), (["no", "yes"], "yes", False),
    ([0.0, 1.0], "1", False), ([0, 1], "2", True), (["0", "1"], 1, False), ([0, 1], True, True),
])
def test_positive_label_compares_as_text_and_as_numbers(folder, stored, given, note, tmp_path):
    keras.utils.set_random_seed(5)
    s_in, t_in = two_inputs()
    z = keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(z))
    static, temporal = data()
    values = [stored[i % 2] for i in range(N)]
    path = save_bundle(tmp_path / "labels", model, static, temporal, labels=values, tables="csv")
    config = json.loads((path / "bundle.json").read_text())
    (path / "bundle.json").write_text(json.dumps({**config, "positive_label": given}))
    report = validate_bundle(path)
    assert report.ok, report.format()
    noted = [n for n in report.notes if template_regex(POSITIVE_LABEL_NOTE).fullmatch(n)]
    assert bool(noted) == note, report.notes
    if not note:
        bundle = load_bundle(path)
        positive = labels.positive(bundle)
        assert labels.values(bundle)[-1] == positive  # the positive label is listed last
        assert labels.mask(bundle.labels, positive).sum() == N // 2  # and names half of the customers
