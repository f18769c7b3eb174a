"""Long tables read with pyarrow (issue 26): rows in any order, padded histories, Parquet column types
(integer ids, date periods, categorical ids, a pandas index), CSV through pyarrow's parser and through
the record-by-record reader: the arrays equal a reference built here cell by cell, and the problems are
reported as before (file, column, rows)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from explain.bundle import load as B
from explain.bundle.load import load_bundle, validate_bundle

keras = pytest.importorskip("keras")

T, F, S = 6, 3, 2
LENGTHS = [6, 4, 1, 6, 3, 6, 2]          # real periods per customer; the model pads at the start with -1
PERIODS = pd.date_range("2024-01-01", periods=T, freq="D")
MASK = -1.0


def masked_model():
    """Masking(-1) -> LSTM; a Dense on the static input; history first (an unusual input order)."""
    keras.utils.set_random_seed(5)
    t_in, s_in = keras.Input((T, F), name="days"), keras.Input((S,), name="profile")
    h = keras.layers.LSTM(3)(keras.layers.Masking(MASK)(t_in))
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Concatenate()([h, keras.layers.Dense(2)(s_in)]))
    return keras.Model([t_in, s_in], out)


def tables(seed=0):
    """(static frame, long frame in shuffled row order, reference (n, T, F) array built cell by cell)."""
    rng = np.random.default_rng(seed)
    ids = [100 + 7 * i for i in range(len(LENGTHS))]              # integer ids: text "100", "107", ...
    static = pd.DataFrame({"customer_id": ids, "x": rng.normal(size=len(ids)), "y": rng.normal(size=len(ids))})
    rows, reference = [], np.full((len(ids), T, F), MASK, dtype=np.float32)
    for i, (cid, length) in enumerate(zip(ids, LENGTHS)):
        for t in range(T - length, T):                             # only the real days are written
            values = rng.uniform(0.5, 3.0, size=F)
            reference[i, t] = values.astype(np.float32)
            rows.append({"customer_id": cid, "day": PERIODS[t].date(), **{f"f{j}": values[j] for j in range(F)}})
    long = pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)
    return static, long, reference


def write(folder, static, long, fmt):
    folder.mkdir()
    masked_model().save(folder / "model.keras")
    (folder / "bundle.json").write_text(json.dumps({"period_column": "day"}))
    for name, frame in (("static", static), ("temporal", long)):
        if fmt == "csv":
            frame.to_csv(folder / f"{name}.csv", index=False)
        else:
            frame.to_parquet(folder / f"{name}.parquet", index=False)
    return folder


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_shuffled_padded_long_table_gives_the_reference_array(tmp_path, fmt):
    static, long, reference = tables()
    bundle = load_bundle(write(tmp_path / fmt, static, long, fmt))
    assert bundle.ids.tolist() == [str(i) for i in static["customer_id"]]
    np.testing.assert_array_equal(bundle.temporal, reference)
    np.testing.assert_array_equal(bundle.static, static[["x", "y"]].to_numpy(np.float32))
    assert bundle.periods == [str(p.date()) for p in PERIODS]
    assert any("were not in period order" in note for note in bundle.notes)
    assert any("4 customer(s) have fewer than 6 periods" in note for note in bundle.notes)


def test_categorical_ids_and_a_pandas_index_read_like_pandas(tmp_path):
    static, long, reference = tables(seed=1)
    folder = write(tmp_path / "b", static, long, "parquet")
    long = long.assign(customer_id=long["customer_id"].astype(str).astype("category"))
    long.index = [f"row{k}" for k in long.index]   # not a RangeIndex: pandas stores it as a column
    long.to_parquet(folder / "temporal.parquet")
    assert "__index_level_0__" in pq.read_schema(folder / "temporal.parquet").names
    bundle = load_bundle(folder)
    assert bundle.temporal_features == ["f0", "f1", "f2"]
    np.testing.assert_array_equal(bundle.temporal, reference)


def test_problems_of_a_long_parquet_table_are_all_listed_with_their_rows(tmp_path):
    static, long, _ = tables(seed=2)
    long.loc[3, "f1"] = np.nan
    long.loc[5, "f2"] = np.inf
    long = pd.concat([long, long.iloc[[7]]], ignore_index=True)                 # a duplicated (customer, day)
    folder = write(tmp_path / "b", static, long, "parquet")
    report = validate_bundle(folder)
    found = {(p.column, p.rows) for p in report.problems}
    duplicate = tuple(int(r) + 1 for r in np.flatnonzero(
        (long["customer_id"] == long.loc[7, "customer_id"]) & (long["day"] == long.loc[7, "day"])))
    assert found == {("f1", (4,)), ("f2", (6,)), ("day", duplicate)}, report.format()
    text = report.format()
    cid, day = long.loc[3, "customer_id"], long.loc[3, "day"]
    assert f"row 4 ({cid}, {day}) of temporal.parquet" in text
    assert f"'{long.loc[7, 'customer_id']}' '{long.loc[7, 'day']}'" in text


def test_text_cells_with_spaces_and_tokens_read_as_pandas_reads_them(tmp_path):
    static, long, reference = tables(seed=3)
    folder = write(tmp_path / "b", static, long, "parquet")
    as_text = long.astype({"f0": str})
    as_text.loc[0, "f0"] = f"  {float(long.loc[0, 'f0'])!r} "   # spaces around a number: read
    as_text.to_parquet(folder / "temporal.parquet", index=False)
    np.testing.assert_array_equal(load_bundle(folder).temporal, reference)
    as_text.loc[1, "f0"] = "1_000"                               # Python reads it, pandas does not: refused
    as_text.loc[2, "f0"] = "n/a"                                 # a missing-value token
    as_text.to_parquet(folder / "temporal.parquet", index=False)
    messages = [p.message for p in validate_bundle(folder).problems]
    assert len(messages) == 2 and "'1_000'" in messages[0] and "1 missing value(s)" in messages[1], messages


def test_a_damaged_parquet_page_is_one_clear_problem(tmp_path):
    static, long, _ = tables(seed=4)
    folder = write(tmp_path / "b", static, long, "parquet")
    path = folder / "temporal.parquet"
    pq.write_table(pa.Table.from_pandas(long, preserve_index=False), path, compression="none")
    column = pq.ParquetFile(path).metadata.row_group(0).column(3)      # f1's pages
    data = bytearray(path.read_bytes())
    start = column.data_page_offset
    data[start:start + 16] = b"\xff" * 16                               # its page header is garbage
    path.write_bytes(bytes(data))
    report = validate_bundle(folder)
    assert [p.file for p in report.problems] == ["temporal.parquet"], report.format()
    assert B.UNREADABLE_PARQUET.split("{reason}")[0].format(file="temporal.parquet") in str(report.problems[0])
