"""The batch store on a bundle with a text input (bundles/demo-embedding: a `plan` text through a
StringLookup, integer `contract` ids, a padded history that is not the last model input): the
command succeeds, the store reopens, every value is written as the input holds it, the arrays read
back equal the engine's; a chunk whose long file fails leaves no file of that chunk behind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from explain import cli
from explain.analysis.explainer import explain_customers
from explain.batch import format as store_format
from explain.batch.local import run_batch_job
from explain.batch.store import open_store, read_store
from explain.bundle.load import load_bundle
from explain.core.errors import ExplainError
from explain.core.settings import Settings
from tests.support.apptest import ROOT

EMBEDDING = ROOT / "bundles" / "demo-embedding"
_TENURE = pd.read_csv(EMBEDDING / "static.csv", dtype={"customer_id": str}).set_index("customer_id")["tenure_months"]
IDS = sorted(list(_TENURE.index[_TENURE >= 12][:4]) + list(_TENURE.index[_TENURE < 12][:3]))  # 3 padded histories


@pytest.fixture(scope="module")
def bundle():
    return load_bundle(EMBEDDING)


def test_batch_on_the_embedding_demo_succeeds_and_its_store_reopens(tmp_path, capsys):
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("\n".join(IDS))
    out = tmp_path / "store"
    code = cli.main(["batch", "--bundle", str(EMBEDDING), "--out", str(out), "--customers-file", str(ids_file),
                     "--batch-size", "3", "--steps", "16"])
    assert code == 0, capsys.readouterr().err
    store = open_store(out)
    assert store.complete and store.customer_ids() == IDS
    long, summary = read_store(out)
    static = pd.read_csv(EMBEDDING / "static.csv", dtype=str).set_index("customer_id")
    rows = long[(long["customer_id"] == IDS[1]) & (long["input"] != "history")].set_index("feature")["value"]
    assert rows["plan"] == static.loc[IDS[1], "plan"] and rows["plan"] in {"basic", "plus", "premium"}
    for column in ("contract", "tenure_months", "age"):
        assert float(rows[column]) == float(static.loc[IDS[1], column]), column
    assert rows["contract"] == static.loc[IDS[1], "contract"]  # an integer id stays "2", not "2.0"
    assert rows["monthly_charge"] == str(np.float32(static.loc[IDS[1], "monthly_charge"]))  # 34.2, not 34.2000007


def test_stored_arrays_equal_the_engines_whatever_the_input_order(bundle, tmp_path):
    settings = Settings(steps=16)
    run_batch_job(bundle, tmp_path / "store", settings, chunk_size=4, ids=IDS, progress=False)
    stored = open_store(tmp_path / "store").arrays(bundle, IDS[::-1])
    direct = explain_customers(bundle, IDS[::-1], settings)
    # the model's inputs are contract, customer, history, plan: the history is not the last one
    assert [spec.key for spec in bundle.layout.specs] == ["contract", "customer", "history", "plan"]
    np.testing.assert_allclose(stored.static, direct.static, rtol=1e-12)
    pad = direct.padding["history"]
    assert pad.any() and np.array_equal(stored.padding["history"], pad)
    np.testing.assert_allclose(stored.temporal[~pad], direct.temporal[~pad], rtol=1e-12)
    assert np.isnan(stored.temporal[pad]).all()


def test_a_chunk_that_cannot_be_written_leaves_nothing_of_itself(bundle, tmp_path, monkeypatch):
    real_write = store_format._write_table

    def failing(path, table):
        if path.name.startswith("part-00001"):
            raise OSError("disk full")
        real_write(path, table)

    monkeypatch.setattr(store_format, "_write_table", failing)
    out = tmp_path / "store"
    with pytest.raises(OSError, match="disk full"):
        run_batch_job(bundle, out, Settings(steps=8), chunk_size=3, ids=IDS, progress=False)
    long_0, summary_0 = store_format.chunk_paths(out, 0)
    long_1, summary_1 = store_format.chunk_paths(out, 1)
    assert long_0.exists() and summary_0.exists()
    assert not long_1.exists() and not summary_1.exists()  # the summary written first was taken back
    assert not [p for p in out.rglob(".*.part")]
    monkeypatch.setattr(store_format, "_write_table", real_write)
    result = run_batch_job(bundle, out, Settings(steps=8), chunk_size=3, ids=IDS, progress=False)
    assert result.reused_chunks == 1 and result.computed_chunks == 2 and open_store(out).complete


def test_a_table_arrow_cannot_convert_is_a_message_and_no_file(tmp_path):
    manifest = {"n_chunks": 1, "chunk_size": 1, "settings": {}, "bundle": {"content_hash": "x"},
                "customers": {"sha256": "y"}, "format_version": store_format.FORMAT_VERSION, "rows_per_customer": 2,
                "inputs": [{"key": "static", "role": "static", "features": ["f", "g"], "periods": None, "width": 2}]}
    arrays = {"static": np.array([["not a number", 1.0]], dtype=object)}
    summary = pd.DataFrame({"customer_id": ["a"], "prediction": [0.5], "baseline_prediction": [0.4],
                            "delta": [0.0], "steps": [8], "gradient_points": [8], "forward_points": [2]})
    (tmp_path / store_format.SUMMARY_DIR).mkdir()
    with pytest.raises(ExplainError, match="Chunk 0's arrays table cannot be written as Parquet"):
        store_format.write_chunk(tmp_path, manifest, 0, arrays, summary)
    with pytest.raises(ExplainError, match="Chunk 0's arrays table cannot be written as Parquet"):
        store_format.write_chunk(tmp_path, manifest, 0, {"static": np.zeros((1, 3))}, summary)  # 3 cells, not 2
    assert not any(p.is_file() for p in tmp_path.rglob("*"))
