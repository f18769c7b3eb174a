"""The tests never read a store someone left in bundles/demo/attributions/ (a manual ``streamlit run``
on the demo writes its store there): the dashboard's startup bundle in the tests is a private copy
without attributions/ (tests/conftest.py's ``startup_demo``). Shown here with a store left in a
temporary copy of the demo, standing for bundles/demo: the test setup's copy of it does not have the
store, so the Cohort page computes; opened directly (as the tests did before) the page reads the store."""

import pytest

from explain.batch.local import run_batch_job
from explain.batch.stores import find_store, stores_of
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.conftest import private_copy
from tests.support.apptest import DEMO, app, plain
from ui import startup, stores

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


def test_the_session_opens_a_private_copy_of_the_demo(startup_demo):
    assert startup.bundle_path([], environ={}) == startup_demo != DEMO
    assert not (startup_demo / "attributions").exists()
    # the bundle's own files (a test in another worker may write bundles/demo's array cache meanwhile)
    own = {"attributions", ".explain-cache"}
    assert sorted(p.name for p in startup_demo.iterdir() if p.name not in own) == sorted(
        p.name for p in DEMO.iterdir() if p.name not in own and not p.name.startswith(".building-"))


def test_a_store_left_in_the_demo_folder_is_not_read_by_the_cohort_page(tmp_path, monkeypatch):
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)
    monkeypatch.setenv(stores.ENV, str(tmp_path / "stores"))  # no store another test's background job wrote
    demo = private_copy(DEMO, tmp_path / "checkout")  # stands for bundles/demo
    left = demo / "attributions" / "dashboard-manual"  # where a manual streamlit run writes its store
    run_batch_job(load_bundle(demo), left, Settings(), progress=False)
    assert find_store(load_bundle(demo), Settings()) == left == stores_of(load_bundle(demo)).best(Settings()).path

    monkeypatch.setattr(startup, "DEMO_DIR", private_copy(demo, tmp_path / "tests"))  # what the test setup does
    at = app(page="pages/cohort.py")
    assert at.session_state["cohort_job"]["parts"] and not at.success  # computed here, the store not found
    assert any("No precomputed batch store matches" in plain(c.value) for c in at.caption)
    assert stores_of(load_bundle(startup.DEMO_DIR)).best(Settings()) is None  # nor by What drives churn

    monkeypatch.setattr(startup, "DEMO_DIR", demo)  # the folder itself, as before the fix: the store is read
    at = app(page="pages/cohort.py")
    assert "cohort_job" not in at.session_state
    assert any("precomputed batch store dashboard-manual" in plain(m.value) for m in at.success)
