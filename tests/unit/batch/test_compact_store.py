"""The compact store (format 3, issue 26): one row per customer, each input's attributions as an array.

Its arrays are the engine's bit for bit; its long view is the long format of the stores written
before (format 1 and 2, made here by the old writer kept in tests/support/old_store.py) row for row;
those old stores still open for the Cohort page's arrays, ``rows`` (drivers) and ``find_store``.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import explain
from explain.analysis.explainer import explain_customers
from explain.batch.format import MANIFEST, StoreError
from explain.batch.local import run_batch_job
from explain.batch.store import open_store, read_store
from explain.batch.stores import find_store
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support.old_store import write_old_store

REQUEST = Settings(steps=8)
CHUNK = 7


@pytest.fixture(scope="module")
def bundle(bundle_dir):
    return load_bundle(bundle_dir)


@pytest.fixture(scope="module")
def ids(bundle):
    return [str(i) for i in bundle.ids[5::97]][:30]  # 30 customers spread over the data set


@pytest.fixture(scope="module")
def api(bundle, ids):
    return explain_customers(bundle, ids, REQUEST)


@pytest.fixture(scope="module")
def stores(tmp_path_factory, bundle, ids):
    """{"compact": the store this tree writes, "format 1"/"format 2": the old writer's} of the same run."""
    base = tmp_path_factory.mktemp("stores")
    run_batch_job(bundle, base / "compact", REQUEST, chunk_size=CHUNK, ids=ids, progress=False)
    return {"compact": base / "compact",
            **{f"format {v}": write_old_store(bundle, base / f"v{v}", REQUEST, ids, CHUNK, version=v) for v in (1, 2)}}


def test_the_compact_store_holds_the_engines_attributions_bit_for_bit(stores, bundle, ids, api):
    folder = stores["compact"]
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["format_version"] == 3
    assert [(s["key"], s["role"], s["width"]) for s in manifest["inputs"]] == [
        ("static", "static", bundle.n_static), ("temporal", "temporal", bundle.n_periods * bundle.n_temporal)]
    part = pq.read_table(folder / "part-00001.parquet")
    assert part.num_rows == CHUNK and part["customer_id"].to_pylist() == ids[CHUNK:2 * CHUNK]
    assert part.schema.field("temporal").type == pa.list_(pa.float64(), bundle.n_periods * bundle.n_temporal)
    # read back in any order, across chunks: the engine's numbers exactly (no tolerance)
    order = random.Random(0).sample(range(len(ids)), len(ids))
    stored = open_store(folder).arrays(bundle, [ids[k] for k in order])
    for name in ("static", "temporal", "prediction", "baseline_prediction", "delta"):
        np.testing.assert_array_equal(getattr(stored, name), getattr(api, name)[order], err_msg=name)
    arrays, summary = read_store(folder, long=False)
    assert summary["customer_id"].tolist() == ids
    np.testing.assert_array_equal(arrays["temporal"], api.temporal)
    np.testing.assert_array_equal(arrays["static"], api.static)
    some, _ = read_store(folder, [ids[20], ids[2]], long=False)
    np.testing.assert_array_equal(some["temporal"], api.temporal[[20, 2]])


def test_the_long_view_is_the_old_long_format_row_for_row(stores, bundle, ids):
    new_long, new_summary = read_store(stores["compact"])
    old_long, old_summary = read_store(stores["format 2"])
    assert len(new_long) == len(ids) * (bundle.n_static + bundle.n_periods * bundle.n_temporal)
    pd.testing.assert_frame_equal(new_long, old_long, check_exact=True)
    pd.testing.assert_frame_equal(new_summary, old_summary, check_exact=True)
    wanted = [ids[25], ids[0], ids[9]]  # three chunks, out of order
    pd.testing.assert_frame_equal(read_store(stores["compact"], wanted)[0], read_store(stores["format 2"], wanted)[0],
                                  check_exact=True)
    columns = ["feature", "attribution"]
    pd.testing.assert_frame_equal(open_store(stores["compact"]).long(wanted, columns),
                                  open_store(stores["format 2"]).long(wanted, columns), check_exact=True)
    size = {name: sum(p.stat().st_size for p in folder.glob("part-*.parquet")) for name, folder in stores.items()}
    assert size["compact"] < size["format 2"]  # (7 customers a file here; bench/batch_store.py measures real sizes)


@pytest.mark.parametrize("version", ["format 1", "format 2"])
def test_old_stores_still_open_for_the_cohort_page_drivers_and_find_store(version, stores, bundle, ids, api):
    old, new = open_store(stores[version]), open_store(stores["compact"])
    assert not old.compact and new.compact and old.complete
    stored = old.arrays(bundle, ids[::-1])
    for name in ("static", "temporal", "prediction", "delta"):
        np.testing.assert_array_equal(getattr(stored, name), getattr(api, name)[::-1], err_msg=name)
    assert (stored.gradient_points is None) == (version == "format 1")
    for a, b in zip(old.rows(bundle), new.rows(bundle), strict=True):
        assert a.ids.tolist() == b.ids.tolist()
        np.testing.assert_array_equal(a.prediction, b.prediction)
        for key in ("static", "temporal"):
            np.testing.assert_array_equal(a.attributions[key], b.attributions[key])
            np.testing.assert_array_equal(a.values[key], b.values[key])  # the old store's values, the bundle's
    assert find_store(bundle, REQUEST, [stores[version]], ids=ids[:3]) == stores[version]
    with pytest.raises(StoreError, match=r"is of format \d \(the long format\).*long=False.*compact stores"):
        read_store(stores[version], long=False)


def test_drivers_read_a_compact_store_as_they_read_an_old_one(stores, bundle):
    new, old = explain.drivers(bundle, stores["compact"]), explain.drivers(bundle, stores["format 2"])
    assert new.customers.tolist() == old.customers.tolist()
    np.testing.assert_array_equal(new.attributions, old.attributions)
    np.testing.assert_array_equal(new.values, old.values)
    assert [r.feature.name for r in new.ranking] == [r.feature.name for r in old.ranking]
    assert new.sentence == old.sentence


def test_the_long_view_needs_the_bundle_the_store_was_computed_from(stores, bundle, bundle_dir, tmp_path, ids):
    import dataclasses
    import shutil

    moved = tmp_path / "moved"
    shutil.copytree(stores["compact"], moved)
    manifest = json.loads((moved / MANIFEST).read_text())
    manifest["bundle"]["path"] = str(tmp_path / "gone")
    (moved / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=r"compact store: it keeps the attributions, not the input values.*"
                                         r"manifest names .*gone.*Pass bundle="):
        read_store(moved)
    other = dataclasses.replace(bundle, content_hash="0" * 64)
    with pytest.raises(StoreError, match=r"the bundle given has content hash 000000000000\.\.\., the store was"):
        read_store(moved, bundle=other)
    pd.testing.assert_frame_equal(read_store(moved, ids[:2], bundle=bundle_dir)[0],
                                  read_store(stores["compact"], ids[:2])[0], check_exact=True)
    arrays, _ = read_store(moved, long=False)  # the arrays need no bundle
    assert arrays["temporal"].shape == (len(ids), bundle.n_periods, bundle.n_temporal)


def test_padded_periods_are_nulls_in_the_file_and_nan_in_the_arrays(tmp_path):
    from tests.support import padded

    bundle = load_bundle(padded.write(tmp_path / "padded", n=24))
    ids = [str(i) for i in bundle.ids]
    api = explain_customers(bundle, ids, REQUEST)
    pad = next(iter(api.padding.values()))  # (n, T) True at the padded weeks
    assert pad.any() and not pad.all()
    run_batch_job(bundle, tmp_path / "store", REQUEST, chunk_size=10, progress=False)
    cells = pq.read_table(tmp_path / "store", columns=["temporal"])["temporal"].combine_chunks().flatten()
    assert cells.null_count == int(pad.sum()) * bundle.n_temporal  # no data: null, never a 0 effect
    arrays, _ = read_store(tmp_path / "store", long=False)
    assert np.isnan(arrays["temporal"][pad]).all()
    # the batch's calls on this padded Masking bundle are cut and compiled (XLA): equal within float rounding
    scale = np.abs(api.temporal[~pad]).max()
    np.testing.assert_allclose(arrays["temporal"][~pad], api.temporal[~pad], rtol=1e-5, atol=1e-6 * scale)
    old = write_old_store(bundle, tmp_path / "old", REQUEST, ids, 10)
    # the old store was written from the graph calls: the same NaN cells, the same numbers within float rounding
    np.testing.assert_allclose(open_store(old).arrays(bundle, ids).temporal,
                               open_store(tmp_path / "store").arrays(bundle, ids).temporal,
                               rtol=1e-5, atol=1e-6 * scale, equal_nan=True)
    pd.testing.assert_frame_equal(read_store(tmp_path / "store")[0], read_store(old)[0], rtol=1e-5, atol=1e-6 * scale)
