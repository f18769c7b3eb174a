"""Bundles from Python objects: save_bundle / Bundle.from_objects round-trip through load_bundle,
and every bad object is reported at once, naming its argument.

The model reads its temporal input first (unlike the demo) and has S=5, T=6, F=3.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import explain
from explain.bundle import objects as O
from explain.bundle.load import MODEL_OUTPUT, OUTPUT_NAMES_COUNT, load_bundle, validate_bundle
from explain.core.errors import BundleError, ExplainError
from tests.support.models import F, S, T, data, linear_model

keras = pytest.importorskip("keras")

ROOT = Path(__file__).resolve().parents[3]
N = 6
IDS = ["007", "NA", "C3", "C4", "C5", "C6"]  # text ids that a CSV reader would turn into numbers / NaN
PERIODS = [f"2025-{m:02d}" for m in range(1, T + 1)]
STATIC = ["tenure", "charge", "age", "autopay", "products"]
TEMPORAL = ["usage", "calls", "late"]
NAMES = dict(ids=IDS, periods=PERIODS, static_features=STATIC, temporal_features=TEMPORAL,
             labels=np.array([1, 0, 0, 1, 0, 1]), display_names={"tenure": "Tenure (months)", "usage": "Data (GB)"},
             units={"tenure": "months", "usage": "GB"}, output_names=["churn"])


def literal(template: str) -> str:
    """The longest fixed piece of a message template (the text between its {fields})."""
    return max(re.split(r"\{[^{}]*\}", template), key=len).strip()


@pytest.fixture(scope="module")
def model():
    return linear_model(seed=3, temporal_first=True)[0]


@pytest.fixture(scope="module")
def arrays():
    return data(N, seed=5)


def assert_same_bundle(loaded, expected):
    np.testing.assert_array_equal(loaded.ids, expected.ids)
    assert loaded.ids.tolist() == expected.ids.tolist()
    assert loaded.static.dtype == expected.static.dtype == np.float32
    np.testing.assert_array_equal(loaded.static, expected.static)
    np.testing.assert_array_equal(loaded.temporal, expected.temporal)
    for name in ("static_features", "temporal_features", "static_labels", "temporal_labels", "periods",
                 "output_names", "units", "label_name", "input_roles"):
        assert getattr(loaded, name) == getattr(expected, name), name
    if expected.labels is None:
        assert loaded.labels is None
    else:
        assert loaded.labels.dtype == expected.labels.dtype
        np.testing.assert_array_equal(loaded.labels, expected.labels)


@pytest.mark.parametrize("tables", ["parquet", "csv"])
def test_arrays_round_trip(model, arrays, tmp_path, tables):
    path = explain.save_bundle(tmp_path / "b", model, arrays["static"], arrays["temporal"], tables=tables, **NAMES)
    assert sorted(p.name for p in path.iterdir()) == sorted(
        ["model.keras", f"static.{tables}", f"temporal.{tables}", "bundle.json"])
    assert validate_bundle(path).ok
    loaded = load_bundle(path)
    expected = explain.Bundle.from_objects(model, arrays["static"], arrays["temporal"], **NAMES)
    assert_same_bundle(loaded, expected)
    np.testing.assert_array_equal(loaded.static, arrays["static"])      # the caller's arrays, exactly
    np.testing.assert_array_equal(loaded.temporal, arrays["temporal"])
    assert loaded.ids.tolist() == IDS and loaded.periods == PERIODS
    assert loaded.static_labels[0] == "Tenure (months)" and loaded.temporal_labels[0] == "Data (GB)"
    # the reloaded model computes what the original does
    np.testing.assert_allclose(loaded.predict(), expected.predict(), rtol=1e-6)


def test_defaults_round_trip(model, arrays, tmp_path):
    """No names at all: ids 0..n-1, static_0.., temporal_0.., periods t1..tT, one output."""
    bundle = explain.Bundle.from_objects(model, arrays["static"].astype(np.float64), arrays["temporal"])
    assert bundle.ids.tolist() == [str(i) for i in range(N)]
    assert bundle.static_features == [f"static_{j}" for j in range(S)]
    assert bundle.temporal_features == [f"temporal_{j}" for j in range(F)]
    assert bundle.periods == [f"t{i + 1}" for i in range(T)] and bundle.output_names == ["output"]
    assert bundle.input_roles == ("temporal", "static") and bundle.path is None
    assert_same_bundle(load_bundle(explain.save_bundle(tmp_path / "d", model, arrays["static"], arrays["temporal"])),
                       bundle)


def test_dataframes_round_trip(model, arrays, tmp_path):
    """A static DataFrame with an id and a label column, a long temporal table in shuffled row order."""
    rng = np.random.default_rng(0)
    static = pd.DataFrame(arrays["static"], columns=STATIC)
    static.insert(2, "customer_id", IDS)
    static["churned"] = ["yes", "no", "no", "yes", "no", "yes"]
    rows = [{"customer_id": IDS[i], "period": PERIODS[p], **dict(zip(TEMPORAL, arrays["temporal"][i, p]))}
            for i in range(N) for p in range(T)]
    long = pd.DataFrame(rows).iloc[rng.permutation(N * T)]
    long = long[["usage", "period", "late", "customer_id", "calls"]]  # columns out of order too
    bundle = explain.Bundle.from_objects(model, static, long, labels="churned", temporal_features=TEMPORAL)
    assert bundle.ids.tolist() == IDS and bundle.static_features == STATIC and bundle.periods == PERIODS
    np.testing.assert_array_equal(bundle.static, arrays["static"])
    np.testing.assert_array_equal(bundle.temporal, arrays["temporal"])  # rebuilt from the shuffled rows
    assert bundle.label_name == "churned" and bundle.labels.tolist() == static["churned"].tolist()
    path = explain.save_bundle(tmp_path / "f", model, static, long, labels="churned", temporal_features=TEMPORAL)
    assert_same_bundle(load_bundle(path), bundle)


def test_numeric_periods_and_integer_labels_round_trip(model, arrays, tmp_path):
    names = dict(periods=list(range(1, T + 1)), labels=[1.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    bundle = explain.Bundle.from_objects(model, arrays["static"], arrays["temporal"], **names)
    assert bundle.periods == [str(p) for p in range(1, T + 1)] and bundle.labels.dtype == np.int64
    assert_same_bundle(load_bundle(explain.save_bundle(tmp_path / "n", model, arrays["static"], arrays["temporal"],
                                                       **names)), bundle)


def test_check_command_passes(model, arrays, tmp_path):
    path = explain.save_bundle(tmp_path / "c", model, arrays["static"], arrays["temporal"], **NAMES)
    result = subprocess.run([sys.executable, "-m", "explain", "check", "--bundle", str(path)], capture_output=True,
                            text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{N} customers, {S} static features, {T} periods x {F} temporal features" in result.stdout


def _with(arrays, **changes):
    """(static, temporal, names) for the error table: the good objects with ``changes`` applied."""
    args = {"static": arrays["static"].copy(), "temporal": arrays["temporal"].copy(), **NAMES}
    for key, change in changes.items():
        args[key] = change(args[key]) if callable(change) else change
    return args.pop("static"), args.pop("temporal"), args


def _set(index, value):
    def change(array):
        array[index] = value
        return array
    return change


def _long(arrays):
    return pd.DataFrame([{"customer_id": IDS[i], "period": PERIODS[p], **dict(zip(TEMPORAL, arrays["temporal"][i, p]))}
                         for i in range(N) for p in range(T)])


BAD = [  # (id, changes(arrays) -> dict, argument named, template, a detail the message must carry)
    ("static 3-D", lambda a: dict(static=a["static"][:, :, None]), "static", O.WRONG_RANK, "(6, 5, 1)"),
    ("temporal 2-D", lambda a: dict(temporal=a["temporal"][:, 0]), "temporal", O.WRONG_RANK, "(6, 3)"),
    ("static text", lambda a: dict(static=a["static"].astype(str)), "static", O.NOT_NUMERIC_ARRAY, "<U"),
    ("static S", lambda a: dict(static=a["static"][:, :4], static_features=STATIC[:4]), "static",
     O.MODEL_MISMATCH, "S=4"),
    ("temporal F", lambda a: dict(temporal=a["temporal"][:, :, :2], temporal_features=TEMPORAL[:2]), "temporal",
     O.MODEL_MISMATCH, "F=2"),
    ("temporal T", lambda a: dict(temporal=a["temporal"][:, :5], periods=PERIODS[:5]), "temporal",
     O.MODEL_MISMATCH, "T=5"),
    ("customer counts", lambda a: dict(temporal=a["temporal"][:5]), "temporal", O.COUNT_MISMATCH, "5 customers"),
    ("NaN static", lambda a: dict(static=_set((2, 1), np.nan)), "static", O.NOT_FINITE_VALUES,
     "customer 'C3' feature 'charge'"),
    ("inf temporal", lambda a: dict(temporal=_set((1, 4, 2), np.inf)), "temporal", O.NOT_FINITE_VALUES,
     "customer 'NA' period '2025-05' feature 'late'"),
    ("duplicate ids", lambda a: dict(ids=["007", "NA", "C3", "C3", "C5", "007"]), "ids", O.DUPLICATE_VALUES,
     "'007', 'C3'"),
    ("ids count", lambda a: dict(ids=IDS[:4]), "ids", O.COUNT_MISMATCH, "4 ids"),
    ("empty id", lambda a: dict(ids=["", *IDS[1:]]), "ids", O.EMPTY_VALUES, "0"),
    ("static names count", lambda a: dict(static_features=STATIC[:3]), "static_features", O.COUNT_MISMATCH, "3"),
    ("temporal names twice", lambda a: dict(temporal_features=["usage", "usage", "late"]), "temporal_features",
     O.DUPLICATE_VALUES, "'usage'"),
    ("reserved name", lambda a: dict(temporal_features=["usage", "period", "late"]), "temporal_features",
     O.RESERVED_NAMES, "'period'"),
    ("periods count", lambda a: dict(periods=PERIODS[:4]), "periods", O.COUNT_MISMATCH, "4 period labels"),
    ("periods unordered", lambda a: dict(periods=["b", "a", "c", "d", "e", "f"]), "periods", O.UNORDERED_PERIODS,
     "'a', 'b'"),
    ("labels count", lambda a: dict(labels=[0, 1]), "labels", O.COUNT_MISMATCH, "2 labels"),
    ("display name unknown", lambda a: dict(display_names={"tenur": "Tenure"}), "display_names",
     O.UNKNOWN_FEATURES, "'tenur'"),
    ("units unknown", lambda a: dict(units={"GB": "usage"}), "units", O.UNKNOWN_FEATURES, "'GB'"),
    ("output names count", lambda a: dict(output_names=["stay", "churn"]), "output_names", OUTPUT_NAMES_COUNT,
     "2 name(s)"),
    ("text column", lambda a: dict(static=pd.DataFrame(a["static"], columns=STATIC).assign(charge="high"),
                                   static_features=None), "static", O.NOT_NUMERIC_COLUMNS, "'charge'"),
    ("ids twice", lambda a: dict(static=pd.DataFrame(a["static"], columns=STATIC).assign(customer_id=IDS),
                                 static_features=None), "ids", O.IDS_TWICE, "customer_id"),
    ("label column missing", lambda a: dict(static=pd.DataFrame(a["static"], columns=STATIC), static_features=None,
                                            labels="churned"), "labels", O.LABEL_COLUMN_MISSING, "'churned'"),
    ("long: customer without rows", lambda a: dict(temporal=_long(a).query("customer_id != 'C5'"), periods=None,
                                                   temporal_features=None), "temporal",
     O.LONG_MISSING_CUSTOMERS, "'C5'"),
    ("long: unknown customer", lambda a: dict(temporal=pd.concat([_long(a), _long(a).assign(customer_id="X9")]),
                                              periods=None, temporal_features=None), "temporal",
     O.LONG_EXTRA_CUSTOMERS, "'X9'"),
    ("long: duplicate rows", lambda a: dict(temporal=pd.concat([_long(a), _long(a).iloc[[7]]]), periods=None,
                                            temporal_features=None), "temporal", O.LONG_DUPLICATE_ROWS,
     "('NA', '2025-02')"),
    ("long: a period missing", lambda a: dict(temporal=_long(a).drop(index=[8]), periods=None,
                                              temporal_features=None), "temporal", O.LONG_OTHER_PERIODS, "'NA'"),
    ("long: no period column", lambda a: dict(temporal=_long(a).drop(columns="period"), periods=None,
                                              temporal_features=None), "temporal", O.MISSING_COLUMNS, "'period'"),
]


@pytest.mark.parametrize("changes, argument, template, detail", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_objects_name_the_argument(model, arrays, tmp_path, changes, argument, template, detail):
    static, temporal, names = _with(arrays, **changes(arrays))
    for build in (lambda: explain.Bundle.from_objects(model, static, temporal, **names),
                  lambda: explain.save_bundle(tmp_path / "bad", model, static, temporal, **names)):
        with pytest.raises(BundleError) as caught:
            build()
        problems = [p for p in caught.value.problems if p.file == argument]
        assert problems, str(caught.value)
        text = str(caught.value)
        assert literal(template) in text and detail in text, text
        assert text.startswith("Bundle has ")  # the report format of load_bundle
    assert not (tmp_path / "bad").exists() and not list(tmp_path.iterdir())  # nothing written


def test_every_problem_at_once(model, arrays):
    static = arrays["static"].copy()
    static[0, 0] = np.nan
    with pytest.raises(BundleError) as caught:
        explain.Bundle.from_objects(model, static, arrays["temporal"][:, :, :2], ids=["a"] * N, output_names=["x", "y"])
    assert sorted(p.file for p in caught.value.problems) == ["ids", "output_names", "static", "temporal"]


def test_model_problems(arrays):
    single = keras.Model(i := keras.Input((S,)), keras.layers.Dense(1)(i))
    with pytest.raises(BundleError, match=re.escape(literal("exactly two inputs, one (None, S) and one"))):
        explain.Bundle.from_objects(single, arrays["static"], arrays["temporal"])
    s_in, t_in = keras.Input((S,)), keras.Input((T, F))
    wide = keras.Model([s_in, t_in], keras.layers.Reshape((2, 1))(keras.layers.Dense(2)(s_in)))
    with pytest.raises(BundleError) as caught:
        explain.Bundle.from_objects(wide, arrays["static"], arrays["temporal"])
    # a prediction per period must have the history's periods (issue 41): both counts named
    assert "a prediction for each of 2 periods" in str(caught.value) and f"has {T} periods" in str(caught.value)
    assert caught.value.problems[0].file == "model"
    cube = keras.Model([s_in, t_in], keras.layers.Reshape((2, 1, 1))(keras.layers.Dense(2)(s_in)))
    with pytest.raises(BundleError) as caught:
        explain.Bundle.from_objects(cube, arrays["static"], arrays["temporal"])
    assert literal(MODEL_OUTPUT) in str(caught.value) and caught.value.problems[0].file == "model"


def test_existing_folder_refused_unless_overwrite(model, arrays, tmp_path):
    target = tmp_path / "b"
    explain.save_bundle(target, model, arrays["static"], arrays["temporal"])
    with pytest.raises(ExplainError, match=re.escape(literal(O.PATH_IN_USE))):
        explain.save_bundle(target, model, arrays["static"], arrays["temporal"], ids=IDS)
    explain.save_bundle(target, model, arrays["static"], arrays["temporal"], ids=IDS, overwrite=True)
    assert load_bundle(target).ids.tolist() == IDS
    (target / "notes.txt").write_text("mine")
    with pytest.raises(ExplainError, match=re.escape(literal(O.NOT_A_BUNDLE_FOLDER))):
        explain.save_bundle(target, model, arrays["static"], arrays["temporal"], overwrite=True)
    assert (target / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]  # no staging folders left


def test_a_model_check_refuses_leaves_nothing(arrays, tmp_path):
    """A Lambda layer is code: safe_load refuses it, so save_bundle raises and writes nothing."""
    s_in, t_in = keras.Input((S,)), keras.Input((T, F))
    h = keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])
    lam = keras.Model([s_in, t_in], keras.layers.Dense(1)(keras.layers.Lambda(lambda x: x * 2.0)(h)))
    with pytest.raises(BundleError) as caught:
        explain.save_bundle(tmp_path / "lam", lam, arrays["static"], arrays["temporal"])
    assert literal(O.SAVED_BUT_INVALID) in str(caught.value) and "Lambda" in str(caught.value)
    assert not list(tmp_path.iterdir())
