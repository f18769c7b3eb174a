"""The What drives churn page reads its stores once: the first open reads the stores' chunks and keeps what it
computed beside them (the drivers summary, each run's shares, the movers); a second open by a fresh server (the
dashboard's caches cleared) reads those files only, no chunk of any store; a bumped ``PARTS_VERSION`` makes the
summary unreadable, so the page reads the chunks again and writes a new one, with the same numbers. Every read of a
store's chunk files goes through ``explain.batch.store._read_table``, counted here."""

from __future__ import annotations

import streamlit as st
from streamlit.testing.v1 import AppTest

import explain
from explain.batch import drivers as batch_drivers
from explain.batch import store as batch_store
from explain.batch import summary as batch_summary
from tests.app.test_drivers_over_runs import PAGE, open_bundle
from tests.support.apptest import APP, charts, plain


def counting(monkeypatch) -> list:
    """The paths of every chunk file read from now on (the store module's reader, and the movers' own import)."""
    reads, read = [], batch_store._read_table

    def counted(path, *args, **kwargs):
        reads.append(str(path))
        return read(path, *args, **kwargs)

    monkeypatch.setattr(batch_store, "_read_table", counted)
    monkeypatch.setattr(batch_drivers, "_read_table", counted)
    return reads


def fresh_open(reads: list):
    """The page as a fresh server opens it: the dashboard's caches emptied first. ``reads`` counts the page's own
    run: the Customer page a session opens first reads its customer from a store of exactly its settings."""
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    reads.clear()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_second_open_reads_the_summaries_only_and_a_new_parts_version_rebuilds_them(tmp_path, monkeypatch):
    bundle = open_bundle(tmp_path, monkeypatch, runs=3, previous=True)
    folder = bundle.path / "attributions"
    reads = counting(monkeypatch)
    first = fresh_open(reads)
    assert reads, "the first open computes from the stores' chunks"
    assert {p.split("/attributions/")[1].split("/")[0] for p in reads} >= {"run0", "run1", "run2", "previous"}
    kept = set(folder.glob("*.drivers-*.npz"))
    assert kept and set(folder.glob("*.shares-*.npz")) and set(folder.glob("*.movers-*.json"))
    shown = charts(first)

    second = fresh_open(reads)
    assert reads == [], f"a second open read {len(reads)} chunk file(s): {reads[:3]}"
    assert charts(second) == shown
    assert [plain(i.value) for i in second.info] == [plain(i.value) for i in first.info]

    monkeypatch.setattr(batch_summary, "PARTS_VERSION", batch_summary.PARTS_VERSION + 1)
    for old in kept:  # a summary of the previous version cannot be read as this one...
        assert batch_summary.read_summary(old) is None
    third = fresh_open(reads)
    read_again = {p.split("/attributions/")[1].split("/")[0] for p in reads}
    assert "run2" in read_again, reads  # ...so the page's store (the newest run) is read again
    assert set(folder.glob("*.drivers-*.npz")) - kept, "a summary of the new version is written beside the store"
    d = explain.drivers(bundle, cache=False)
    assert plain(third.info[0].value) == plain(first.info[0].value) == (d.group_sentence or d.sentence)
    assert charts(third) == shown


def test_the_pages_listing_of_finished_stores_is_kept_until_a_store_folder_changes(tmp_path, monkeypatch):
    """The page's finished stores of every customer equal ``BundleStores.finished`` of a fresh listing, are found
    once (no digest of the customers again while the folders are unchanged), and a store finished later is found."""
    from explain.batch import stores as batch_stores
    from tests.support.planted_stores import planted_attributions, write_store
    from ui import drivers as page_parts

    bundle = open_bundle(tmp_path, monkeypatch, runs=2, previous=False)
    listed = page_parts._Listed(bundle, batch_stores.stores_of(bundle).dirs)
    assert [s.path for s in listed.finished()] == [s.path for s in batch_stores.stores_of(bundle).finished()]
    assert [s.path.name for s in listed.finished()] == ["run1", "run0"]  # newest first
    digests, digest = [], batch_stores.customers_hash
    monkeypatch.setattr(batch_stores, "customers_hash", lambda ids: digests.append(1) or digest(ids))
    again = page_parts._Listed(bundle, batch_stores.stores_of(bundle).dirs)
    assert [s.path for s in again.finished()] == [s.path for s in listed.finished()] and digests == []
    write_store(bundle, bundle.path / "attributions" / "run9", planted_attributions(bundle, 9),
                completed="2026-09-01T08:00:00Z", chunk_size=50)
    later = page_parts._Listed(bundle, batch_stores.stores_of(bundle).dirs)
    assert [s.path.name for s in later.finished()] == ["run9", "run1", "run0"] and digests
