"""The What drives churn page's "Drivers over runs" and "Biggest movers" through AppTest: with three finished
stores of one settings and layout the words, then the chart of each feature's share per run with its interval
band; with fewer, the command that makes more; with a store of the baseline previous the movers' words and
table (each id a link to the Customer page); without one, the command that computes it. The stores hold
attributions and scores planted here (tests/support/planted_stores.py); the bundle is the small two-mechanism
churn bundle of tests/unit/batch/test_drivers.py."""

from __future__ import annotations

import numpy as np
import pytest

import explain
from explain.batch import drivers as batch_drivers
from explain.batch.stores import STORES_ENV
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support.apptest import app, array, charts, plain
from tests.support.planted_stores import planted_attributions, write_store
from tests.unit.batch.test_drivers import build

PAGE = "pages/drivers.py"


def open_bundle(tmp_path, monkeypatch, runs: int, previous: bool, related: bool = False):
    """A bundle with ``runs`` planted monthly stores of the default settings (the first static feature grows run
    by run), and with ``previous`` a planted store of the baseline previous; ``related``: age follows app logins
    (a group found from the data); the dashboard opens it."""
    path, _ = build(tmp_path / "bundle", n=(40, 40, 40), age_from_logins=related)
    bundle = load_bundle(path)
    for k in range(runs):
        write_store(bundle, path / "attributions" / f"run{k}", planted_attributions(bundle, 10 + k, {0: 1 + k}),
                    completed=f"2026-0{k + 3}-01T08:00:00Z", chunk_size=50)
    if previous:
        rng = np.random.default_rng(4)
        then = rng.uniform(0.1, 0.5, bundle.n_customers)
        write_store(bundle, path / "attributions" / "previous", planted_attributions(bundle, 3),
                    settings=Settings(baseline="previous"), prediction=then + rng.normal(0.05, 0.2, then.size),
                    baseline_prediction=then, chunk_size=50)
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "stores"))
    return bundle


def texts(at) -> list[str]:
    return [plain(m.value) for m in at.markdown] + [plain(c.value) for c in at.caption]


def test_three_runs_draw_the_shares_after_the_words_and_a_previous_store_lists_the_movers(tmp_path, monkeypatch):
    bundle = open_bundle(tmp_path, monkeypatch, runs=3, previous=True)
    at = app(page=PAGE)
    assert not at.exception, [e.value for e in at.exception]
    headings = [h.value for h in at.subheader]
    assert "Drivers over runs" in headings and "Biggest movers since the previous period" in headings
    d = explain.drivers(bundle)
    runs = [bundle.path / "attributions" / f"run{k}" for k in range(3)]
    series = batch_drivers.over_runs(bundle, runs, groups=[(g.name, g.columns) for g in d.groups])
    assert series.sentence in texts(at)
    assert series.sentence.startswith("Price hike rose from"), series.sentence
    spec = charts(at)["drivers_over_runs"]
    lines = [t for t in spec["data"] if t.get("mode") == "lines+markers"]
    bands = [t for t in spec["data"] if t.get("fill") == "toself"]
    assert len(lines) == len(bands) >= 3
    first = next(t for t in lines if t["name"] == "Price hike")
    j = next(k for k, f in enumerate(series.rows) if f.name == "price_hike")
    assert np.allclose(array(first["y"]), [100 * r.share[j] for r in series.runs])
    assert first["x"] == [r.label for r in series.runs]

    movers = batch_drivers.movers(bundle)
    assert movers.sentence in texts(at)
    ids = {m.customer for m in movers.rows}
    links = [link for link in at.get("page_link") if plain(link.proto.label) in ids]
    assert [plain(link.proto.label) for link in links] == [m.customer for m in movers.rows] and movers.rows
    (customer_page,) = {link.proto.page_script_hash for link in at.get("page_link")  # the segment cards' page
                        if link.proto.label.startswith("Highest risk")}
    for link, m in zip(links, movers.rows):  # each opens its customer on the Customer page, the settings kept
        query = dict(pair.split("=", 1) for pair in link.proto.query_string.split("&"))
        assert link.proto.page_script_hash == customer_page and query["customer"] == m.customer
        assert query["baseline"] == "mean"
    assert all(f"{m.rise:+.2f}" in texts(at) for m in movers.rows[:3])


def test_fewer_runs_and_no_previous_store_say_the_commands(tmp_path, monkeypatch):
    open_bundle(tmp_path, monkeypatch, runs=2, previous=False)
    at = app(page=PAGE)
    assert not at.exception, [e.value for e in at.exception]
    assert "drivers_over_runs" not in charts(at)
    said = " ".join(texts(at))
    assert "hold 2 finished store(s) of these settings and layout; with 3 or more" in said
    assert "python -m explain drivers --bundle" in said and "--over-all" in said
    assert "No store of this bundle was computed with the baseline previous" in said
    (command,) = [c.value for c in at.code if "--baseline previous" in c.value]
    assert command.startswith("python -m explain batch --bundle ") and command.endswith("/previous")


def test_with_groups_on_the_chart_draws_a_group_in_place_of_its_members(tmp_path, monkeypatch):
    bundle = open_bundle(tmp_path, monkeypatch, runs=3, previous=False, related=True)
    at = app(page=PAGE)
    assert not at.exception, [e.value for e in at.exception]
    (group,) = explain.drivers(bundle).groups
    assert at.toggle(key="w_drivers_grouped").value is True
    names = [t["name"] for t in charts(at)["drivers_over_runs"]["data"] if t.get("mode") == "lines+markers"]
    assert group.name in names and not {f.label for f in group.members} & set(names), names
    at.toggle(key="w_drivers_grouped").set_value(False).run()
    names = [t["name"] for t in charts(at)["drivers_over_runs"]["data"] if t.get("mode") == "lines+markers"]
    assert group.name not in names and "Price hike" in names


@pytest.fixture(autouse=True)
def _no_background_jobs(monkeypatch):
    """The page finds its stores: nothing is computed in the background (a failure would show as a job)."""
    from ui import stores

    monkeypatch.setattr(stores, "start", lambda *a, **k: pytest.fail("the page started a background store"))
