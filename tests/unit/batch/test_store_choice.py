"""Where a bundle's stores live (``store_dirs``, one place) and which one is read: ``find_store`` (exactly
these settings: the Cohort page) and ``best_store`` (the same baseline, target, space and path, the most
exact: ``explain.drivers`` and the What drives churn page): adaptive steps over a fixed number, more steps
over fewer, fewer customers outside the tolerance, then the newest; a store of another baseline is never
chosen for this one, and stores of several other kinds are not chosen among silently.

Real stores of a small bundle (tests/unit/batch/test_drivers.py's two-mechanism churn model), each written
by the batch job; their finishing times are set so that the newest is never the most exact."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

import explain
from explain.batch.format import MANIFEST
from explain.batch.local import run_batch_job
from explain.batch.store import open_store
from explain.batch.stores import (
    SEVERAL_MEANINGS,
    STORES_DIR,
    STORES_ENV,
    best_store,
    find_store,
    store_dirs,
    stores_of,
)
from explain.bundle.load import load_bundle
from explain.core.errors import ExplainError
from explain.core.settings import ABSOLUTE_TOLERANCE, Settings
from tests.unit.batch.test_drivers import build

# name: (settings, finished): the most exact (auto) is the oldest, the least exact the newest
STORES = {
    "auto": (Settings(steps="auto"), "2026-01-01T00:00:00+00:00"),
    "steps64": (Settings(steps=64), "2026-01-02T00:00:00+00:00"),
    "gl16": (Settings(steps=16), "2026-01-03T00:00:00+00:00"),
    "left16": (Settings(steps=16, method="left"), "2026-01-04T00:00:00+00:00"),
    "steps2": (Settings(steps=2), "2026-01-05T00:00:00+00:00"),
    "zero": (Settings(baseline="zero"), "2026-01-06T00:00:00+00:00"),
}


def finished_at(folder, when: str) -> None:
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["completed"] = when
    (folder / MANIFEST).write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """(bundle, {name: store folder}) with every store of STORES under <bundle>/attributions/."""
    path, _ = build(tmp_path_factory.mktemp("choice") / "bundle", n=(20, 20, 20))
    bundle = load_bundle(path)
    folders = {}
    for name, (settings, when) in STORES.items():
        folders[name] = path / STORES_DIR / name
        run_batch_job(bundle, folders[name], settings, chunk_size=32, progress=False)
        finished_at(folders[name], when)
    return bundle, folders


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(STORES_ENV, raising=False)


def outside_by_hand(store) -> int:
    """Customers whose |delta| exceeds the store's tolerance of |f(x) - f(b)| (at least the absolute floor)."""
    summary = store.summary()
    gap = np.abs(summary["prediction"].to_numpy() - summary["baseline_prediction"].to_numpy())
    limit = np.maximum(float(store.settings["tolerance"]) * gap, ABSOLUTE_TOLERANCE)
    return int((np.abs(summary["delta"].to_numpy()) > limit).sum())


def test_store_dirs_is_the_bundle_folder_then_explain_stores(stored, monkeypatch, tmp_path):
    bundle, _ = stored
    monkeypatch.delenv(STORES_ENV, raising=False)
    assert store_dirs(bundle) == [bundle.path / "attributions"]
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "shared"))
    assert store_dirs(bundle) == [bundle.path / "attributions", tmp_path / "shared" / bundle.content_hash[:16]]
    unsaved = dataclasses.replace(bundle, path=None)  # made in Python: only $EXPLAIN_STORES
    assert store_dirs(unsaved) == [tmp_path / "shared" / bundle.content_hash[:16]]
    monkeypatch.delenv(STORES_ENV)
    assert store_dirs(unsaved) == []
    assert best_store(unsaved, Settings()) is None and find_store(unsaved, Settings()) is None


def test_the_stores_record_how_many_customers_miss_the_tolerance(stored, no_env):
    bundle, folders = stored
    counts = {name: open_store(folder).outside_tolerance for name, folder in folders.items()}
    assert counts == {name: outside_by_hand(open_store(folder)) for name, folder in folders.items()}
    assert counts["auto"] == 0 and counts["gl16"] == 0  # adaptive steps and 16 Gauss-Legendre points add up
    assert counts["left16"] > 10 and counts["steps2"] > 5  # a left rule and two points do not
    assert {s.path.name for s in stores_of(bundle).finished()} == set(STORES)
    assert [s.path.name for s in stores_of(bundle).finished()] == list(STORES)[::-1]  # newest first


def test_the_most_exact_store_of_the_baseline_is_read_whatever_the_steps_asked(stored, no_env):
    bundle, folders = stored
    for asked in (Settings(), Settings(steps=64), Settings(steps=2, method="left"), Settings(steps="auto"),
                  Settings(target="output"), Settings(target=0), None):
        assert best_store(bundle, asked).path == folders["auto"], asked
    d = explain.drivers(bundle)  # the CLI's `drivers` without --store
    assert d.source["store"] == str(folders["auto"]) and d.source["settings"]["steps"] == "auto"
    assert explain.drivers(bundle.path, settings=Settings(steps=8)).source["store"] == str(folders["auto"])
    # the exact settings (the Cohort page) still find exactly those
    assert find_store(bundle, Settings()) == folders["steps64"]
    assert find_store(bundle, Settings(steps=16, method="left")) == folders["left16"]
    assert find_store(bundle, Settings(steps=32)) is None
    # another baseline: only its own store, never the mean baseline's
    assert best_store(bundle, Settings(baseline="zero")).path == folders["zero"]
    assert best_store(bundle, Settings(baseline="median")) is None
    assert best_store(bundle, Settings(space="logit")) is None


def test_without_adaptive_steps_more_steps_then_fewer_outside_then_newest(stored, no_env, tmp_path):
    bundle, folders = stored
    search = tmp_path / "stores"
    for name in ("steps64", "gl16", "left16", "steps2"):
        shutil.copytree(folders[name], search / name)
    assert best_store(bundle, Settings(), [search]).path == search / "steps64"  # older than the 16s and the 2
    shutil.rmtree(search / "steps64")
    # 16 steps each: Gauss-Legendre (nobody outside the tolerance) over the newer left rule
    assert open_store(search / "left16").completed > open_store(search / "gl16").completed
    assert best_store(bundle, Settings(), [search]).path == search / "gl16"
    shutil.copytree(search / "gl16", search / "gl16-again")  # as exact, finished later: the newest wins
    finished_at(search / "gl16-again", "2026-02-01T00:00:00+00:00")
    assert best_store(bundle, Settings(), [search]).path == search / "gl16-again"
    shutil.rmtree(search / "gl16")
    shutil.rmtree(search / "gl16-again")
    assert best_store(bundle, Settings(), [search]).path == search / "left16"  # 16 steps over 2
    # a store that does not record its count comes after one that does (same steps)
    shutil.copytree(search / "left16", search / "left16-unknown")
    manifest = json.loads((search / "left16-unknown" / MANIFEST).read_text())
    del manifest["outside_tolerance"]
    manifest["completed"] = "2026-03-01T00:00:00+00:00"
    (search / "left16-unknown" / MANIFEST).write_text(json.dumps(manifest))
    assert open_store(search / "left16-unknown").outside_tolerance is None
    assert best_store(bundle, Settings(), [search]).path == search / "left16"


def test_stores_of_other_kinds_only_are_not_chosen_among_silently(stored, no_env, tmp_path):
    bundle, folders = stored
    search = tmp_path / "stores"
    shutil.copytree(folders["zero"], search / "zero")
    assert best_store(bundle, None, [search]).path == search / "zero"  # the only kind there is: read
    assert best_store(bundle, Settings(), [search]) is None            # but not for the mean baseline
    run_batch_job(bundle, search / "median", Settings(baseline="median", steps=8), chunk_size=64, progress=False)
    with pytest.raises(ExplainError) as error:
        best_store(bundle, None, [search])
    text = str(error.value)
    assert text.startswith(SEVERAL_MEANINGS.split("{stores}")[0].format(count=2))
    assert "baseline zero" in text and "baseline median" in text and "--store" in text


def test_stores_under_explain_stores_are_found_by_the_cohorts_and_the_drivers_function(tmp_path, monkeypatch):
    path, _ = build(tmp_path / "bundle", n=(10, 10, 10))
    bundle = load_bundle(path)
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "shared"))
    shared = tmp_path / "shared" / bundle.content_hash[:16] / "nightly"
    run_batch_job(bundle, shared, Settings(), chunk_size=16, progress=False)
    assert not (path / STORES_DIR).exists()
    ids = [str(i) for i in bundle.ids[:5]]
    assert find_store(bundle, Settings(), ids=ids) == shared  # what the Cohort page reads
    assert best_store(bundle, Settings()).path == shared      # what What drives churn reads
    assert explain.drivers(bundle).source["store"] == str(shared)
    other = load_bundle(build(tmp_path / "other", n=(10, 10, 11))[0])  # another bundle: not its store
    assert find_store(other, Settings()) is None and best_store(other, Settings()) is None
    monkeypatch.delenv(STORES_ENV)
    assert find_store(bundle, Settings()) is None and best_store(bundle, Settings()) is None


def test_one_listing_answers_every_question_and_opens_each_store_once(stored, no_env, monkeypatch, tmp_path):
    """``stores_of`` lists the store folders once (issue 39): the best store, the exact one, the others and
    the earlier ones of the same settings come from that listing, each manifest read once; ``mark`` opens none."""
    from explain.batch import stores as batch_stores

    bundle, folders = stored
    opened = []
    real = batch_stores.open_store
    monkeypatch.setattr(batch_stores, "open_store", lambda folder: opened.append(folder) or real(folder))
    found = stores_of(bundle)
    marks = found.mark()
    assert not opened and [folder for folder, _ in marks] == [str(bundle.path / STORES_DIR)]
    assert any(name.endswith("_manifest.json") for name, _, _ in marks[0][1])
    best = found.best(Settings())
    assert best.path == folders["auto"] and found.exact(Settings()).path == folders["steps64"]
    less, other = found.others(Settings(), best)
    assert {s.path.name for s in less} == set(STORES) - {"auto", "zero"} and [s.path.name for s in other] == ["zero"]
    assert found.earlier(best) == []  # no other store of its settings
    assert sorted(map(str, opened)) == sorted(str(f) for f in folders.values())  # each manifest once
    import shutil

    for name, when in (("may", "2025-05-01T00:00:00+00:00"), ("june", "2025-06-01T00:00:00+00:00")):
        shutil.copytree(folders["gl16"], tmp_path / "runs" / name)  # last months' runs of the same settings
        finished_at(tmp_path / "runs" / name, when)
    more = stores_of(bundle, [bundle.path / STORES_DIR, tmp_path / "runs"])
    assert [s.path.name for s in more.earlier(more.exact(Settings(steps=16)))] == ["june", "may"]  # newest first
