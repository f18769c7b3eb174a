"""Bundle loading and validation: a small clean bundle, then one mutation per bad input.

The fixture bundle: S=4 static features, T=6 periods, F=3 temporal features, 5 customers
whose ids include "007" and "NA" (both must stay text).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explain.bundle import load as B
from explain.bundle import tables
from explain.bundle.load import load_bundle, load_bundle_from_uploads, validate_bundle
from explain.core.errors import BundleError, ExplainError
from tests.support.hostile import (
    PNG_BYTES,
    as_parquet_bytes,
    both,
    delete,
    drop_column,
    edit_config,
    edit_rows,
    rename_column,
    set_cell,
    write_bytes,
)
from tests.support.hostile import read_csv as _read_csv
from tests.support.hostile import write_csv as _write_csv

keras = pytest.importorskip("keras")

IDS = ["007", "NA", "C03", "C04", "C05"]
STATIC = ["tenure", "charge", "age", "autopay"]
TEMPORAL = ["usage", "calls", "late"]
PERIODS = [f"2025-{m:02d}" for m in range(1, 7)]
CONFIG = {
    "id_column": "customer_id",
    "period_column": "period",
    "static_features": STATIC,
    "temporal_features": TEMPORAL,
    "display_names": {"tenure": "Tenure (months)", "usage": "Data usage (GB)"},
    "units": {"tenure": "months", "charge": "USD", "usage": "GB"},
    "output_names": ["churn"],
    "label_column": "churned",
    "positive_label": 1,
}


def literal(template: str) -> str:
    """The longest fixed piece of a message template (the text between its {fields})."""
    return max(re.split(r"\{[^{}]*\}", template), key=len).strip()


def _tiny_models():
    """Two models computing the same function: inputs (static, temporal) and reversed."""
    keras.utils.set_random_seed(0)
    flatten = keras.layers.Flatten()
    concat = keras.layers.Concatenate()
    hidden = keras.layers.Dense(5, activation="tanh")
    out = keras.layers.Dense(1, activation="sigmoid", name="churn")

    def head(s, t):
        return out(hidden(concat([s, flatten(t)])))

    s_in = keras.Input((len(STATIC),), name="static")
    t_in = keras.Input((len(PERIODS), len(TEMPORAL)), name="temporal")
    forward = keras.Model([s_in, t_in], head(s_in, t_in))
    t_in2 = keras.Input((len(PERIODS), len(TEMPORAL)), name="history")
    s_in2 = keras.Input((len(STATIC),), name="profile")
    reversed_ = keras.Model([t_in2, s_in2], head(s_in2, t_in2))
    x = keras.Input((len(STATIC),), name="only")
    single = keras.Model(x, keras.layers.Dense(1)(x))
    return forward, reversed_, single


@pytest.fixture(scope="session")
def base_dirs(tmp_path_factory):
    """{"clean": folder, "reversed": same tables + reversed model, "single": 1-input model}."""
    root = tmp_path_factory.mktemp("bundles")
    rng = np.random.default_rng(3)
    forward, reversed_, single = _tiny_models()
    clean = root / "clean"
    clean.mkdir()
    forward.save(clean / "model.keras")
    static_rows = [[cid, int(rng.integers(1, 60)), f"{rng.uniform(20, 90):.2f}",
                    int(rng.integers(18, 80)), int(rng.integers(0, 2)), k % 2]
                   for k, cid in enumerate(IDS)]
    _write_csv(clean / "static.csv", ["customer_id", *STATIC, "churned"], static_rows)
    temporal_rows = [[cid, p, f"{rng.uniform(0, 20):.2f}", int(rng.poisson(1)),
                      int(rng.integers(0, 2))] for cid in IDS for p in PERIODS]
    _write_csv(clean / "temporal.csv", ["customer_id", "period", *TEMPORAL], temporal_rows)
    (clean / "bundle.json").write_text(json.dumps(CONFIG, indent=2))

    other = root / "reversed"
    shutil.copytree(clean, other)
    (other / "model.keras").unlink()
    reversed_.save(other / "model.keras")
    bad_model = root / "single"
    shutil.copytree(clean, bad_model)
    (bad_model / "model.keras").unlink()
    single.save(bad_model / "model.keras")
    return {"clean": clean, "reversed": other, "single": bad_model}


@pytest.fixture
def folder(base_dirs, tmp_path) -> Path:
    """A fresh copy of the clean bundle to mutate."""
    target = tmp_path / "bundle"
    shutil.copytree(base_dirs["clean"], target)
    return target


@pytest.fixture(scope="session")
def clean_bundle(base_dirs):
    return load_bundle(base_dirs["clean"])


# ---- mutations (builders in tests/support/hostile.py) -------------------------------------------

def _drop_config_key(key):
    return edit_config(lambda c: c.pop(key))


# (case id, mutation, template, file, column, fragments that the problem's text must contain)
BAD_CASES = [
    ("missing static", delete("static.csv"), B.MISSING_FILE, "static.csv", None,
     ["static.csv or static.parquet"]),
    ("missing temporal", delete("temporal.csv"), B.MISSING_FILE, "temporal.csv", None,
     ["temporal.csv or temporal.parquet"]),
    ("missing model", delete("model.keras"), B.MISSING_FILE, "model.keras", None, ["model.keras"]),
    ("both csv and parquet", as_parquet_bytes("static.parquet"), B.AMBIGUOUS_FILE, "static.csv",
     None, ["static.parquet"]),
    ("empty file", write_bytes("static.csv", b""), tables.EMPTY_FILE, "static.csv", None, []),
    ("header only", write_bytes("temporal.csv", b"customer_id,period,usage,calls,late\n"),
     tables.NO_DATA_ROWS, "temporal.csv", None, []),
    ("binary renamed csv", write_bytes("static.csv", PNG_BYTES), tables.BINARY_CSV, "static.csv", None,
     ["not text"]),
    ("parquet renamed csv", both(as_parquet_bytes("x.parquet"),
                                 lambda f: (f / "x.parquet").replace(f / "temporal.csv")),
     tables.BINARY_CSV, "temporal.csv", None, ["temporal.parquet"]),
    ("semicolons", write_bytes("static.csv", b"customer_id;tenure;charge;age;autopay;churned\n"
                                             b"007;1;2;3;4;0\n"),
     tables.WRONG_SEPARATOR, "static.csv", None, ["semicolons"]),
    ("ragged row", edit_rows("static.csv", lambda h, r: (h, r[:2] + [r[2] + ["9"]] + r[3:])),
     tables.RAGGED_ROWS, "static.csv", None, ["row 3", "7 values"]),
    ("duplicate column", edit_rows("static.csv", lambda h, r: (h[:-1] + ["age"], r)),
     tables.DUPLICATE_COLUMN, "static.csv", "age", ["2 times"]),
    ("missing static feature", edit_rows("static.csv", drop_column("charge")), B.MISSING_COLUMN,
     "static.csv", "charge", ["static_features"]),
    ("missing temporal feature", edit_rows("temporal.csv", drop_column("late")), B.MISSING_COLUMN,
     "temporal.csv", "late", ["temporal_features"]),
    ("missing id column", edit_rows("static.csv", rename_column("customer_id", "Customer_ID")),
     B.MISSING_COLUMN, "static.csv", "customer_id", ["'Customer_ID'", "id_column"]),
    ("missing period column", edit_rows("temporal.csv", rename_column("period", "month")),
     B.MISSING_COLUMN, "temporal.csv", "period", ["period_column"]),
    ("missing label column", edit_rows("static.csv", drop_column("churned")), B.MISSING_COLUMN,
     "static.csv", "churned", ["label_column"]),
    ("decimal comma", set_cell("static.csv", 3, "charge", "12,5"), B.NON_NUMERIC, "static.csv",
     "charge", ["row 3", "'12,5'", "line 4 counting the header", "point"]),
    ("text in temporal", set_cell("temporal.csv", 8, "usage", "abc"), B.NON_NUMERIC,
     "temporal.csv", "usage", ["row 8", "'abc'", "NA, 2025-02"]),
    ("empty cell", set_cell("static.csv", 2, "age", ""), B.MISSING_VALUES, "static.csv", "age",
     ["row 2"]),
    ("NaN cell", set_cell("temporal.csv", 1, "calls", "NaN"), B.MISSING_VALUES, "temporal.csv",
     "calls", ["row 1", "007, 2025-01"]),
    ("inf cell", set_cell("static.csv", 5, "tenure", "inf"), B.INFINITE_VALUES, "static.csv",
     "tenure", ["row 5"]),
    ("duplicate id", set_cell("static.csv", 4, "customer_id", "C03"), B.DUPLICATE_IDS,
     "static.csv", "customer_id", ["'C03'", "rows 3, 4"]),
    ("empty id", set_cell("static.csv", 4, "customer_id", ""), B.EMPTY_KEYS, "static.csv",
     "customer_id", ["row 4"]),
    ("id only in static", set_cell("static.csv", 5, "customer_id", "C99"), B.IDS_MISSING_FROM,
     "temporal.csv", "customer_id", ["'C99'", "static.csv"]),
    ("id only in temporal", edit_rows("temporal.csv", lambda h, r: (
        h, r + [["C77", p, "1.0", "0", "0"] for p in PERIODS])), B.IDS_MISSING_FROM,
     "static.csv", "customer_id", ["'C77'"]),
    ("customer lacks a period", edit_rows("temporal.csv", lambda h, r: (h, r[:9] + r[10:])),
     B.WRONG_PERIOD_COUNT, "temporal.csv", "period", ["'NA' has 5", "T=6"]),
    ("customer has an extra period", edit_rows("temporal.csv", lambda h, r: (
        h, r + [["C05", "2025-07", "1.0", "0", "0"]])), B.WRONG_PERIOD_COUNT, "temporal.csv",
     "period", ["'C05' has 7"]),
    ("duplicate customer period", edit_rows("temporal.csv", lambda h, r: (h, r + [r[13]])),
     B.DUPLICATE_PERIODS, "temporal.csv", "period", ["'C03' '2025-02'", "rows 14, 31"]),
    ("invalid json", write_bytes("bundle.json", b'{"id_column": "customer_id",}'),
     B.INVALID_JSON, "bundle.json", None, ["line 1"]),
    ("json not an object", write_bytes("bundle.json", b'["customer_id"]'), B.JSON_NOT_OBJECT,
     "bundle.json", None, []),
    ("json wrong type", edit_config(lambda c: c.update(static_features="tenure")),
     B.JSON_BAD_TYPE, "bundle.json", "static_features", []),
    ("json unknown display column", edit_config(lambda c: c["display_names"].update(tenur="T")),
     B.JSON_UNKNOWN_COLUMN, "bundle.json", "display_names", ["'tenur'"]),
    ("json unknown feature", edit_config(lambda c: c.update(static_features=STATIC[:3] + ["x1"])),
     B.MISSING_COLUMN, "static.csv", "x1", ["bundle.json"]),
    ("json too few features", edit_config(lambda c: c.update(static_features=STATIC[:3])),
     B.FEATURE_COUNT_MISMATCH, "static.csv", None, ["S=4", "gives 3"]),
    ("no json, label is not a feature", delete("bundle.json"), B.FEATURE_COUNT_MISMATCH,
     "static.csv", None, ["S=4", "gives 5", "'churned'", "label_column"]),
    ("output names count", edit_config(lambda c: c.update(output_names=["a", "b"])),
     B.OUTPUT_NAMES_COUNT, "bundle.json", None, ["2 name(s)"]),
    ("model garbage", write_bytes("model.keras", b"not a zip file"), B.MODEL_REFUSED,
     "model.keras", None, ["To fix"]),
]


@pytest.mark.parametrize("mutate, template, file, column, fragments",
                         [case[1:] for case in BAD_CASES], ids=[case[0] for case in BAD_CASES])
def test_bad_bundle_names_file_and_column(folder, mutate, template, file, column, fragments):
    mutate(folder)
    report = validate_bundle(folder)
    assert not report.ok
    matching = [p for p in report.problems
                if p.file == file and literal(template) in p.message
                and (column is None or p.column == column)]
    assert matching, report.format()
    text = str(matching[0])
    assert text.startswith(file)
    for fragment in fragments:
        assert fragment in text, text
    with pytest.raises(BundleError, match=re.escape(literal(template))) as caught:
        load_bundle(folder)
    assert [str(p) for p in caught.value.problems] == [str(p) for p in report.problems]


def test_model_with_wrong_inputs(base_dirs):
    report = validate_bundle(base_dirs["single"])
    assert [p.file for p in report.problems] == ["model.keras"]
    assert literal(B.MODEL_INPUTS) in report.problems[0].message
    assert "(None, 4)" in report.problems[0].message


def test_clean_bundle_loads(base_dirs, clean_bundle):
    report = validate_bundle(base_dirs["clean"])
    assert report.ok, report.format()
    assert report.notes == []
    assert "5 customers, 4 static features, 6 periods x 3 temporal features" in report.format()
    b = clean_bundle
    assert (b.n_customers, b.n_static, b.n_periods, b.n_temporal) == (5, 4, 6, 3)
    assert b.static.dtype == np.float32 and b.static.shape == (5, 4)
    assert b.temporal.dtype == np.float32 and b.temporal.shape == (5, 6, 3)
    assert b.static_features == STATIC and b.temporal_features == TEMPORAL
    assert b.static_labels == ["Tenure (months)", "charge", "age", "autopay"]
    assert b.temporal_labels == ["Data usage (GB)", "calls", "late"]
    assert b.units == CONFIG["units"]
    assert b.periods == PERIODS
    assert b.output_names == ["churn"]
    assert b.label_name == "churned" and b.labels.tolist() == [0, 1, 0, 1, 0]
    assert re.fullmatch(r"[0-9a-f]{64}", b.content_hash)
    # the arrays hold the table values, customer by customer, period by period
    static = pd.read_csv(base_dirs["clean"] / "static.csv", dtype={"customer_id": str},
                         keep_default_na=False)
    temporal = pd.read_csv(base_dirs["clean"] / "temporal.csv", dtype={"customer_id": str},
                           keep_default_na=False)
    np.testing.assert_array_equal(b.static, static[STATIC].to_numpy(np.float32))
    np.testing.assert_array_equal(b.temporal, temporal[TEMPORAL].to_numpy(np.float32).reshape(5, 6, 3))
    assert b.predict().shape == (5, 1)


def test_ids_stay_text(clean_bundle):
    assert clean_bundle.ids.tolist() == IDS
    assert all(isinstance(i, str) for i in clean_bundle.ids)
    assert clean_bundle.index_of("007") == 0 and clean_bundle.index_of("NA") == 1
    got = clean_bundle.inputs_for(["NA", "007"])
    assert got["static"].shape == (2, 4) and got["temporal"].shape == (2, 6, 3)
    np.testing.assert_array_equal(got["static"][1], clean_bundle.static[0])
    np.testing.assert_array_equal(clean_bundle.inputs_for("C04")["temporal"][0],
                                  clean_bundle.temporal[3])
    assert clean_bundle.data()["static"] is clean_bundle.static


def test_unknown_id_names_it_and_gives_examples(clean_bundle):
    with pytest.raises(ExplainError, match=re.escape(literal(B.UNKNOWN_ID))) as caught:
        clean_bundle.inputs_for(["C04", "7", "nope"])
    message = str(caught.value)
    assert "'7'" in message and "'nope'" in message and "'007'" in message
    with pytest.raises(ExplainError, match="'C4'"):
        clean_bundle.index_of("C4")


def test_parquet_works_like_csv(base_dirs, folder, clean_bundle):
    for name in ("static", "temporal"):
        frame = pd.read_csv(folder / f"{name}.csv", dtype={"customer_id": str},
                            keep_default_na=False)
        frame.to_parquet(folder / f"{name}.parquet")
        (folder / f"{name}.csv").unlink()
    b = load_bundle(folder)
    assert b.ids.tolist() == IDS
    np.testing.assert_array_equal(b.static, clean_bundle.static)
    np.testing.assert_array_equal(b.temporal, clean_bundle.temporal)
    assert b.labels.tolist() == clean_bundle.labels.tolist()


def test_parquet_problems_use_row_numbers(folder):
    frame = pd.read_csv(folder / "static.csv", dtype={"customer_id": str}, keep_default_na=False)
    frame.loc[2, "charge"] = np.nan
    frame.to_parquet(folder / "static.parquet")
    (folder / "static.csv").unlink()
    problems = validate_bundle(folder).problems
    assert len(problems) == 1 and problems[0].column == "charge"
    assert problems[0].rows == (3,) and "row 3 of static.parquet" in str(problems[0])


def test_parquet_integer_ids_become_text(folder):
    for name in ("static", "temporal"):
        frame = pd.read_csv(folder / f"{name}.csv", dtype={"customer_id": str},
                            keep_default_na=False)
        frame["customer_id"] = frame["customer_id"].map({i: k + 100 for k, i in enumerate(IDS)})
        frame.to_parquet(folder / f"{name}.parquet")
        (folder / f"{name}.csv").unlink()
    assert load_bundle(folder).ids.tolist() == ["100", "101", "102", "103", "104"]


def test_reversed_model_inputs_give_the_same_bundle(base_dirs, clean_bundle):
    b = load_bundle(base_dirs["reversed"])
    assert [t.name for t in b.model.inputs] == ["history", "profile"]
    assert b.input_roles == ("temporal", "static")
    np.testing.assert_array_equal(b.static, clean_bundle.static)
    np.testing.assert_array_equal(b.temporal, clean_bundle.temporal)
    np.testing.assert_allclose(b.predict(), clean_bundle.predict(), rtol=0, atol=1e-6)


def _quote_first_id(text: str) -> str:
    lines = text.split("\n")
    lines[1] = '"' + lines[1].replace(",", '",', 1)          # "007",...
    return "\n".join(lines)


@pytest.mark.parametrize("variant, rewrite", [
    ("CRLF line endings", lambda text: text.replace("\n", "\r\n")),
    ("byte-order mark", lambda text: "\ufeff" + text),
    ("quoted cells", _quote_first_id),
    ("blank lines", lambda text: text.replace("\n", "\n\n", 3)),
])
def test_csv_dialects_read_the_same(folder, clean_bundle, variant, rewrite):
    for name in ("static.csv", "temporal.csv"):
        path = folder / name
        path.write_bytes(rewrite(path.read_text()).encode("utf-8"))
    b = load_bundle(folder)
    assert b.ids.tolist() == IDS
    np.testing.assert_array_equal(b.static, clean_bundle.static)
    np.testing.assert_array_equal(b.temporal, clean_bundle.temporal)


def test_row_numbers_count_blank_lines_like_a_text_editor(folder):
    header, rows = _read_csv(folder / "static.csv")
    rows[3][header.index("age")] = "old"
    text = "\n".join([",".join(header), *[",".join(r) for r in rows[:2]], "",
                      *[",".join(r) for r in rows[2:]]]) + "\n"
    (folder / "static.csv").write_text(text)          # line 4 is blank; 'old' is on line 6
    problem = validate_bundle(folder).problems[0]
    assert problem.rows == (5,) and "row 5 ('old') of static.csv (line 6" in str(problem)


def test_reordered_columns_map_by_name(folder, clean_bundle):
    def shuffle(header, rows):
        order = [header.index(c) for c in reversed(header)]
        return [header[k] for k in order], [[r[k] for k in order] for r in rows]
    edit_rows("static.csv", shuffle)(folder)
    edit_rows("temporal.csv", shuffle)(folder)
    b = load_bundle(folder)
    assert b.static_features == STATIC and b.temporal_features == TEMPORAL
    np.testing.assert_array_equal(b.static, clean_bundle.static)
    np.testing.assert_array_equal(b.temporal, clean_bundle.temporal)


def test_unsorted_periods_are_sorted_with_a_note(folder, clean_bundle):
    edit_rows("temporal.csv", lambda h, r: (h, r[::-1]))(folder)
    report = validate_bundle(folder)
    assert report.ok, report.format()
    assert any(literal(B.PERIODS_SORTED_NOTE) in note for note in report.notes)
    b = load_bundle(folder)
    assert b.periods == PERIODS and b.notes
    np.testing.assert_array_equal(b.temporal, clean_bundle.temporal)
    # ids keep the static table's order, whatever the temporal table's order
    assert b.ids.tolist() == IDS


def test_extra_columns_are_a_note(folder, clean_bundle):
    edit_rows("static.csv", lambda h, r: (h + ["notes"], [row + ["vip"] for row in r]))(folder)
    report = validate_bundle(folder)
    assert report.ok, report.format()
    assert any("'notes'" in note and literal(B.EXTRA_COLUMNS_NOTE) in note
               for note in report.notes)
    np.testing.assert_array_equal(load_bundle(folder).static, clean_bundle.static)


def test_defaults_without_bundle_json(folder, clean_bundle):
    (folder / "bundle.json").unlink()
    edit_rows("static.csv", drop_column("churned"))(folder)
    b = load_bundle(folder)
    assert b.static_features == STATIC and b.temporal_features == TEMPORAL
    assert b.static_labels == STATIC and b.units == {}
    assert b.output_names == ["output"] and b.labels is None and b.label_name is None
    np.testing.assert_array_equal(b.static, clean_bundle.static)


def test_many_problems_reported_at_once(folder):
    set_cell("static.csv", 3, "charge", "12,5")(folder)
    set_cell("static.csv", 4, "age", "abc")(folder)
    set_cell("static.csv", 5, "customer_id", "C03")(folder)
    edit_rows("temporal.csv", lambda h, r: (h, r[:20] + r[21:]))(folder)
    write_bytes("model.keras", b"garbage")(folder)
    problems = validate_bundle(folder).problems
    seen = {(p.file, p.column) for p in problems}
    assert {("static.csv", "charge"), ("static.csv", "age"), ("static.csv", "customer_id"),
            ("temporal.csv", "period"), ("model.keras", None)} <= seen
    with pytest.raises(BundleError) as caught:
        load_bundle(folder)
    text = str(caught.value)
    assert f"has {len(problems)} problems" in text
    assert "'12,5'" in text and "'abc'" in text and "'C03'" in text and "model.keras" in text


def test_model_that_fails_to_load(folder, monkeypatch):
    from explain.modelfile import safe_load

    def broken(path, **options):
        raise RuntimeError("Unknown layer: 'MyLayer'\nlong traceback text")
    monkeypatch.setattr(safe_load, "load_model", broken)
    problems = validate_bundle(folder).problems
    assert len(problems) == 1 and problems[0].file == "model.keras"
    assert literal(B.MODEL_UNREADABLE) in problems[0].message
    assert "RuntimeError: Unknown layer: 'MyLayer'" in problems[0].message
    assert "traceback" not in problems[0].message


def test_tables_checked_when_model_is_missing(folder):
    delete("model.keras")(folder)
    set_cell("temporal.csv", 2, "late", "x")(folder)
    files = {p.file for p in validate_bundle(folder).problems}
    assert files == {"model.keras", "temporal.csv"}


def test_content_hash_follows_the_bytes(base_dirs, folder, clean_bundle):
    assert load_bundle(folder).content_hash == clean_bundle.content_hash
    set_cell("static.csv", 1, "charge", "1.00")(folder)
    assert load_bundle(folder).content_hash != clean_bundle.content_hash


def test_uploads_are_renamed_and_loaded(base_dirs, tmp_path, clean_bundle):
    src = base_dirs["clean"]
    files = {"churn_model.keras": (src / "model.keras").read_bytes(),
             "My Static.CSV": (src / "static.csv").read_bytes(),
             "temporal_2025.csv": (src / "temporal.csv").read_bytes(),
             "bundle.json": (src / "bundle.json").read_bytes()}
    b = load_bundle_from_uploads(files, tmp_path / "up")
    assert sorted(p.name for p in (tmp_path / "up").iterdir()) == [
        "bundle.json", "model.keras", "static.csv", "temporal.csv"]
    np.testing.assert_array_equal(b.temporal, clean_bundle.temporal)
    assert b.content_hash == clean_bundle.content_hash


def test_uploads_with_unknown_names_are_refused(base_dirs, tmp_path):
    src = base_dirs["clean"]
    files = {"model.keras": (src / "model.keras").read_bytes(),
             "data.csv": b"a,b\n1,2\n", "static.csv": (src / "static.csv").read_bytes(),
             "../evil.sh": b"rm -rf /"}
    with pytest.raises(BundleError, match=re.escape(literal(B.UNKNOWN_UPLOAD))) as caught:
        load_bundle_from_uploads(files, tmp_path / "up")
    assert {p.file for p in caught.value.problems} == {"data.csv", "evil.sh"}
    assert not (tmp_path / "up").exists()


def test_report_format_lists_problems_and_notes(folder):
    edit_rows("temporal.csv", lambda h, r: (h, r[::-1]))(folder)
    set_cell("static.csv", 1, "age", "old")(folder)
    text = validate_bundle(folder).format()
    assert text.splitlines()[0].endswith("has 1 problem:")
    assert "  1. static.csv: column 'age'" in text
    assert "Notes:" in text and literal(B.PERIODS_SORTED_NOTE) in text


def test_not_a_folder(tmp_path):
    report = validate_bundle(tmp_path / "nowhere")
    assert not report.ok and literal(B.NOT_A_FOLDER) in report.problems[0].message


def test_in_memory_bundle_from_arrays(clean_bundle, base_dirs):
    reversed_model = load_bundle(base_dirs["reversed"]).model
    b = B.Bundle.from_arrays(reversed_model, clean_bundle.static, clean_bundle.temporal)
    assert b.ids.tolist() == ["0", "1", "2", "3", "4"] and b.input_roles == ("temporal", "static")
    assert b.static_features == ["static_0", "static_1", "static_2", "static_3"]
    assert b.periods == ["t1", "t2", "t3", "t4", "t5", "t6"] and b.output_names == ["output"]
    np.testing.assert_allclose(b.predict(), clean_bundle.predict(), atol=1e-6)
    with pytest.raises(ExplainError, match="do not fit the model"):
        B.Bundle.from_arrays(reversed_model, clean_bundle.static[:, :3], clean_bundle.temporal)


def test_the_model_loader_can_be_chosen(base_dirs, tmp_path, clean_bundle):
    from explain.modelfile import safe_load

    opened = []

    def loader(path):
        opened.append(Path(path).name)
        return safe_load.load_model(path)

    assert load_bundle(base_dirs["clean"], loader=loader).content_hash == clean_bundle.content_hash
    files = {name: (base_dirs["clean"] / name).read_bytes()
             for name in ("model.keras", "static.csv", "temporal.csv", "bundle.json")}
    assert load_bundle_from_uploads(files, tmp_path / "up", loader=loader).content_hash == clean_bundle.content_hash
    assert opened == ["model.keras", "model.keras"]
