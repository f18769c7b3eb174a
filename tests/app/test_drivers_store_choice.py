"""Which store the What drives churn page reads, and that it says so (issue 38, item 7): the bundle's most
exact finished store of the page's baseline (adaptive steps over 64 steps, even when the 64-step one is
newer), named in words with its settings, finishing time and customers, the other stores named as not
used; no store computed in the background while one exists; a store under $EXPLAIN_STORES found by the
Cohort page and this page alike; the background store, when there is none, made with adaptive steps.

The bundle is tests/unit/batch/test_drivers.py's small two-mechanism churn model (real stores written
by the batch job, a few seconds each)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explain
from explain.batch.format import MANIFEST
from explain.batch.local import run_batch_job
from explain.batch.store import open_store
from explain.batch.stores import STORES_ENV
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support.apptest import APP, app, array, charts, plain
from tests.unit.batch.test_drivers import build
from ui import cache, stores

PAGE = "pages/drivers.py"
AUTO_WORDS = "adaptive steps (each customer's effects add up within 0.5 %)"


def finished_at(folder, when: str) -> None:
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["completed"] = when
    (folder / MANIFEST).write_text(json.dumps(manifest))


def dashboard_stores(*folders) -> list:
    """The stores the dashboard computed itself (``dashboard-<digest>``) under ``folders``."""
    return [p for folder in folders if folder.exists() for p in folder.rglob("dashboard-*") if p.is_dir()]


def caption_with(at, text: str) -> str:
    found = [plain(c.value) for c in at.caption if text in plain(c.value)]
    assert found, [plain(c.value) for c in at.caption]
    return found[0]


@pytest.fixture
def two_stores(tmp_path, monkeypatch):
    """A bundle with a store made with adaptive steps (finished first), one with 64 steps (finished
    later) and one of another baseline; the dashboard opens it."""
    path, _ = build(tmp_path / "bundle", n=(30, 30, 30))
    bundle = load_bundle(path)
    made = {}
    for name, settings, when in (("careful", Settings(steps="auto"), "2026-06-01T08:00:00+00:00"),
                                 ("quick", Settings(steps=64), "2026-06-02T09:30:00+00:00"),
                                 ("from-zero", Settings(baseline="zero"), "2026-06-03T10:00:00+00:00")):
        made[name] = path / "attributions" / name
        run_batch_job(bundle, made[name], settings, chunk_size=32, progress=False)
        finished_at(made[name], when)
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "stores"))
    return bundle, made


def test_the_page_reads_the_adaptive_store_and_names_it(two_stores, tmp_path):
    bundle, made = two_stores
    at = app(page=PAGE)
    assert not at.exception, [e.value for e in at.exception]
    d = explain.drivers(bundle)  # the command line's choice: the same store
    assert d.source["store"] == str(made["careful"])
    assert plain(at.info[0].value) == d.sentence
    ranking = charts(at)["drivers_ranking"]["data"][0]
    assert np.allclose(array(ranking["x"])[::-1], [r.mean_abs for r in d.ranking[:15]])

    text = caption_with(at, "Read from the store")
    assert text.startswith(f"Read from the store careful (finished 2026-06-01 08:00 UTC): 90 customers, {AUTO_WORDS}, "
                           "baseline mean; every customer's effects add up to their score within the tolerance")
    quick = open_store(made["quick"])
    assert ("The most exact of 2 finished stores with this baseline, target and path (also: quick: 64 steps, "
            "baseline mean)") in text
    assert "Not used: 1 store(s) of this bundle made with another baseline, target or path (from-zero: 64 steps, " \
           "baseline zero)" in text
    assert quick.completed > open_store(made["careful"]).completed  # the newer store was not the one read
    # a finished store exists: nothing computed in the background, by the page or the launcher
    cache.warm_up(bundle)
    assert stores.job(bundle, stores.background(Settings().for_bundle(bundle))) is None
    assert stores.job(bundle, Settings().for_bundle(bundle)) is None
    assert dashboard_stores(tmp_path / "stores", bundle.path / "attributions") == []


def test_the_64_step_store_says_how_many_miss_the_tolerance(tmp_path, monkeypatch):
    path, _ = build(tmp_path / "bundle", n=(30, 30, 30))
    bundle = load_bundle(path)
    rough = path / "attributions" / "rough"
    run_batch_job(bundle, rough, Settings(steps=16, method="left"), chunk_size=32, progress=False)
    outside = open_store(rough).outside_tolerance
    assert outside > 10
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "stores"))
    at = app(page=PAGE)
    text = caption_with(at, "Read from the store rough")
    assert (f"90 customers, 16 steps, baseline mean; {outside} of 90 customers' effects do not add up within the "
            "tolerance") in text
    assert "most exact" not in text and "Not used" not in text
    assert dashboard_stores(tmp_path / "stores", path / "attributions") == []  # it exists: none computed


def test_a_store_under_explain_stores_is_read_by_the_cohort_page_and_this_page(tmp_path, monkeypatch):
    path, _ = build(tmp_path / "bundle", n=(30, 30, 30))
    bundle = load_bundle(path)
    shared = tmp_path / "stores" / bundle.content_hash[:16] / "nightly"  # a read-only bundle's stores
    run_batch_job(bundle, shared, Settings(), chunk_size=32, progress=False)
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "stores"))
    assert not (path / "attributions").exists()

    cohort = app(page="pages/cohort.py")
    assert "cohort_job" not in cohort.session_state  # nothing computed on the page
    assert any("precomputed batch store nightly" in plain(m.value) for m in cohort.success)
    drivers = app(page=PAGE)
    assert caption_with(drivers, "Read from the store nightly").startswith(
        "Read from the store nightly (finished ")
    assert explain.drivers(bundle).source["store"] == str(shared)
    assert [p.name for p in dashboard_stores(tmp_path / "stores")] == []


def test_without_a_store_the_background_store_uses_adaptive_steps(tmp_path, monkeypatch):
    path, _ = build(tmp_path / "bundle", n=(30, 30, 30))
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "stores"))
    at = app(page=PAGE)
    computing = [plain(i.value) for i in at.info if "in the background" in plain(i.value)]
    assert computing and f"({AUTO_WORDS}, baseline mean)" in computing[0]
    deadline = time.monotonic() + 120
    while not at.get("plotly_chart") and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    (made,) = dashboard_stores(tmp_path / "stores")
    store = open_store(made)
    assert store.complete and store.settings["steps"] == "auto" and store.settings["baseline"] == "mean"
    assert store.outside_tolerance == 0
    assert caption_with(at, f"Read from the store {made.name}").startswith(
        f"Read from the store {made.name} (finished {store.completed.replace('T', ' ')[:16]} UTC): 90 customers, "
        f"{AUTO_WORDS}, baseline mean; every customer's effects add up")


def test_the_page_lists_the_bundles_stores_once_per_run(two_stores, monkeypatch):
    """The store read, the earlier stores and the words about the others come from one listing of the store
    folders per run (issue 39), and the result with its charts from one cache entry."""
    from explain.batch import stores as batch_stores

    listed = []
    real = batch_stores.stores_in
    monkeypatch.setattr(batch_stores, "stores_in", lambda dirs: listed.append(dirs) or real(dirs))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()  # the Customer page a session opens first: one listing (is its customer in a store of its settings?)
    assert len(listed) == 1
    listed.clear()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(listed) == 1
    at.run()
    assert len(listed) == 2 and caption_with(at, "Read from the store careful")
