"""Reading one customer after another from a finished store (the dashboard's Customer page, issue 42): a ``Store``
object reads its summary files once, then only the chunk that holds each customer; the numbers are those a fresh
``Store`` reads, and a customer the store does not hold is still named."""

import numpy as np
import pytest

from explain.batch import store as batch_store
from explain.batch.local import run_batch_job
from explain.batch.store import StoreError, open_store
from explain.batch.stores import stores_of
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support.apptest import DEMO

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    bundle = load_bundle(DEMO)
    ids = [str(i) for i in bundle.ids[:60]]
    folder = tmp_path_factory.mktemp("stores") / "run"
    run_batch_job(bundle, folder, Settings(steps=8), chunk_size=10, ids=ids, progress=False)
    return bundle, ids, folder


def test_one_customer_after_another_reads_the_summaries_once(finished, monkeypatch):
    bundle, ids, folder = finished
    reads, read = [], batch_store._read_table

    def counted(path, *args, **kwargs):
        reads.append(path.name)
        return read(path, *args, **kwargs)

    monkeypatch.setattr(batch_store, "_read_table", counted)
    store = open_store(folder)
    for cid in (ids[3], ids[25], ids[59]):
        got = store.arrays(bundle, [cid])
        assert store.holds([cid]) and store.summary([cid])["customer_id"].tolist() == [cid]
        monkeypatch.setattr(batch_store, "_read_table", read)  # the reference: a fresh Store of the same folder
        want = open_store(folder).arrays(bundle, [cid])
        monkeypatch.setattr(batch_store, "_read_table", counted)
        np.testing.assert_array_equal(got.static, want.static)
        np.testing.assert_array_equal(got.temporal, want.temporal)
    summaries = [name for name in reads if name.startswith("summary")]
    assert len(summaries) == 6 == len(set(summaries))  # every chunk's summary once, for the three customers
    assert len(reads) - len(summaries) == 3  # and one chunk of attributions per customer
    assert store.customer_ids() == ids
    assert not store.holds(["nobody"])
    with pytest.raises(StoreError, match="nobody"):
        store.arrays(bundle, ["nobody"])


def test_the_listing_finds_a_customer_by_the_kept_map(finished):
    bundle, ids, folder = finished
    found = stores_of(bundle, folder.parent)
    assert found.exact(Settings(steps=8), ids=[ids[42]]).path == folder
    assert found.exact(Settings(steps=8), ids=[ids[42], "nobody"]) is None
    assert found.exact(Settings(steps=16), ids=[ids[42]]) is None
