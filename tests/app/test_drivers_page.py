"""The What drives churn page through AppTest: words first, charts of the store's numbers, segment
cards that open a customer, the store computed in the background for a small bundle, the command
for a large one, drift against an earlier store, escaped names, no labels."""

import json
import shutil
import time

import numpy as np
import pytest

import explain
from explain.batch.local import run_batch_job
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support.apptest import DEMO, app, array, charts, plain
from tests.support.hostile import small_bundle
from ui import stores

PAGE = "pages/drivers.py"
EVIL = "<img src=x onerror=alert(1)>"
SMALL = 300  # customers of the demo cut for the pages that compute a store in the background: what they show and say
# does not depend on the bundle's size below the dashboard's limit (stores.AUTO_LIMIT), the computing time does

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A private copy of the demo with a store of every customer (the page's default settings)."""
    folder = tmp_path_factory.mktemp("drivers") / "demo"
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("attributions"))
    run_batch_job(load_bundle(folder), folder / "attributions" / "june", Settings(), progress=False)
    return folder


@pytest.fixture
def demo(stored, monkeypatch, tmp_path):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(stored))
    monkeypatch.setenv(stores.ENV, str(tmp_path / "stores"))
    return stored


def wait_for_charts(at, seconds=120):
    """Rerun until the page draws (the background job's progress fragment reruns it in a browser)."""
    deadline = time.monotonic() + seconds
    while not at.get("plotly_chart") and time.monotonic() < deadline:
        assert not at.exception, [e.value for e in at.exception]
        time.sleep(0.5)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return charts(at)


def test_words_first_then_charts_of_the_stores_numbers(demo):
    at = app(page=PAGE)
    assert at.title[0].value == "What drives churn"
    d = explain.drivers(demo, demo / "attributions" / "june")
    assert d.groups  # the demo's related features (bill and monthly charge, age and app logins, ...) are found
    assert at.toggle(key="w_drivers_grouped").value is True  # "Group related features": on by default
    assert plain(at.info[0].value) == d.group_sentence  # the first thing said, at group level
    assert "relative to the average customer (the baseline)" in d.group_sentence
    shown = charts(at)
    assert list(shown) == ["drivers_ranking", "drivers_beeswarm", "drivers_segments", "drivers_dependence",
                           "drivers_time_0"]
    size = shown["drivers_ranking"]["data"][0]
    grouped = d.grouped_ranking
    assert np.allclose(array(size["x"])[::-1], [r.mean_abs for r in grouped[:15]])
    first = d.groups[0]
    row = next(k for k, r in enumerate(grouped) if r.feature.name == first.name)
    assert size["y"][::-1][row] == f"{first.name} (group of {len(first.members)})"
    assert grouped[row].mean_abs == pytest.approx(sum(r.mean_abs for r in d.ranking if r.feature in first.members))
    assert "relative to the average customer" in shown["drivers_ranking"]["layout"]["title"]["text"]
    # the members one click away
    (listing,) = [e for e in at.expander if e.label.startswith("Groups of related features")]
    texts = [plain(m.value) for m in listing.markdown]
    for g in d.groups:
        line = next(t for t in texts if t.startswith(f"**{g.name}**"))
        assert all(f.label in line for f in g.members) and f"{g.share:.0%} of all attribution together" in line
    # the time profile: each period's share of the history's effect, what its words count
    assert np.allclose(array(shown["drivers_time_0"]["data"][0]["y"]), 100 * d.time_profiles[0].shares)
    # the toggle off: every feature on its own
    at.toggle(key="w_drivers_grouped").set_value(False).run()
    assert not at.exception and plain(at.info[0].value) == d.sentence
    size = charts(at)["drivers_ranking"]["data"][0]
    assert np.allclose(array(size["x"])[::-1], [r.mean_abs for r in d.ranking[:15]])
    assert size["y"][-1] == d.ranking[0].feature.label + " (history)"
    assert any("June" in c.value or "june" in c.value for c in at.caption)  # which store, said
    assert not at.get("selectbox") or all(s.label != "Drift: compare with an earlier store of the same settings"
                                          for s in at.selectbox)  # one store: no drift


def test_segment_cards_open_their_highest_risk_customer(demo):
    at = app(page=PAGE)
    d = explain.drivers(demo, demo / "attributions" / "june")
    links = [link for link in at.get("page_link") if link.proto.label.startswith("Highest risk")]
    assert len(links) == len(d.segments) >= 2
    for link, segment in zip(links, d.segments):
        assert segment.highest_risk in link.proto.label
        query = dict(pair.split("=", 1) for pair in link.proto.query_string.split("&"))
        assert query["customer"] == segment.highest_risk and query["baseline"] == "mean"  # the other settings kept
    names = [plain(m.value).strip("*") for m in at.markdown if m.value.startswith("**")]
    assert [n for n in names if n in {s.name for s in d.segments}] == [s.name for s in d.segments]
    # each card: its main effects in the user's units, what raises its risk apart from what lowers it
    from explain.analysis.drivers import reason_text

    texts = [plain(m.value) for m in at.markdown]
    for segment in d.segments:
        assert segment.drivers
        for x in segment.drivers:
            card = next(t for t in texts if reason_text(x) in t)
            heading = "Raises its risk:" if x.raises else "Lowers its risk:"
            assert card.startswith(heading) and ("raises the risk" if x.raises else "lowers the risk") in reason_text(x)
            assert "on average here against" in reason_text(x) or "of this segment have it" in reason_text(x)
        largest = max(abs(x) for x in segment.mean_attributions)
        assert all(abs(x.mean_attribution) >= 0.25 * largest for x in segment.drivers)  # never a negligible one
    # the link's query opens that customer: the sidebar reads it
    query = dict(pair.split("=", 1) for pair in links[0].proto.query_string.split("&"))
    customer = app(params=query)
    assert customer.session_state["customer"] == d.segments[0].highest_risk


def test_window_and_feature_pickers_change_the_charts(demo):
    at = app(page=PAGE)
    before = charts(at)["drivers_ranking"]["data"][0]
    at.segmented_control(key="w_drivers_window").set_value("recent").run()
    assert not at.exception
    assert "summed over the last 3 period(s)" in plain(at.info[0].value)
    recent = explain.drivers(demo, demo / "attributions" / "june", window=3)
    after = charts(at)["drivers_ranking"]["data"][0]
    assert np.allclose(array(after["x"])[::-1], [r.mean_abs for r in recent.grouped_ranking[:15]])
    assert not np.allclose(array(after["x"]), array(before["x"]))
    at.selectbox(key="w_drivers_feature").set_value("tenure_months").run()
    assert "How Tenure (months) drives" in charts(at)["drivers_dependence"]["layout"]["title"]["text"]


def test_an_earlier_store_shows_drift(demo):
    earlier = demo / "attributions" / "may"
    shutil.copytree(demo / "attributions" / "june", earlier)
    manifest = json.loads((earlier / "_manifest.json").read_text())
    manifest["completed"] = "2026-05-31T23:00:00+00:00"
    (earlier / "_manifest.json").write_text(json.dumps(manifest))
    try:
        at = app(page=PAGE)
        assert at.selectbox(key="w_drivers_against").value.startswith("may (finished 2026-05-31 23:00 UTC")
        assert "drivers_drift" in charts(at)
        assert any("No driver's weight changed beyond noise" in plain(m.value) for m in at.markdown)
        at.selectbox(key="w_drivers_against").set_value("none (no drift)").run()
        assert not at.exception and "drivers_drift" not in charts(at)
    finally:
        shutil.rmtree(earlier)


def test_without_a_store_the_page_computes_it_in_the_background(tmp_path, monkeypatch):
    folder = small_bundle(DEMO, tmp_path / "demo", SMALL)  # the background job's store of every customer: 300
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    monkeypatch.setenv(stores.ENV, str(tmp_path / "stores"))
    at = app(page=PAGE)
    assert any("in the background" in plain(i.value) for i in at.info)
    shown = wait_for_charts(at)
    assert "drivers_ranking" in shown
    (store,) = [p for p in (tmp_path / "stores").glob("*/dashboard-*") if p.is_dir()]  # where EXPLAIN_STORES says
    assert (store / "_SUCCESS").is_file()
    (summary,) = store.parent.glob(f"{store.name}.drivers-*.npz")  # the page's summary, written next to it
    assert explain.drivers(folder, store, cache=False).words(grouped=True) == plain(at.info[0].value)


def test_a_bundle_too_large_for_the_dashboard_gets_the_command(tmp_path, monkeypatch):
    folder = tmp_path / "demo"
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("attributions"))
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    monkeypatch.setenv(stores.ENV, str(tmp_path / "stores"))
    monkeypatch.setattr(stores, "AUTO_LIMIT", 1000)
    at = app(page=PAGE)
    assert not at.get("plotly_chart")
    assert any("too large for the dashboard to compute" in plain(i.value) for i in at.info)
    (code,) = at.code
    assert code.value.startswith("python -m explain batch --bundle ") and "/attributions/all" in code.value
    assert not (tmp_path / "stores").exists() or not any((tmp_path / "stores").rglob("_manifest.json"))


def test_escaped_names_and_no_labels(tmp_path, monkeypatch):
    from tests.unit.batch.test_drivers import build

    path, _ = build(tmp_path / "evil", n=(60, 60, 60))
    config = json.loads((path / "bundle.json").read_text())
    config["display_names"]["price_hike"] = EVIL
    config.pop("label_column", None)
    (path / "bundle.json").write_text(json.dumps(config))
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(path))
    monkeypatch.setenv(stores.ENV, str(tmp_path / "stores"))
    at = app(page=PAGE)
    shown = wait_for_charts(at)
    assert EVIL not in json.dumps(shown) and "&lt;img" in json.dumps(shown)
    assert all(EVIL not in m.value for m in [*at.markdown, *at.info, *at.caption])
    assert not any("churn rate" in c.value for c in at.caption)  # no labels: no churn rate


def test_a_failed_background_job_says_why_and_tries_again(tmp_path, monkeypatch):
    from explain.core.errors import ExplainError

    # a failed job's words and its retry do not depend on the bundle's size: 100 customers, a third of the store
    # that the retry computes for SMALL
    folder = small_bundle(DEMO, tmp_path / "demo", 100)
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    monkeypatch.setenv(stores.ENV, str(tmp_path / "stores"))
    real = stores.run_batch_job

    def broken(*args, **kwargs):
        raise ExplainError("The disk is full (a test).")

    monkeypatch.setattr(stores, "run_batch_job", broken)
    at = app(page=PAGE)
    deadline = time.monotonic() + 60
    while not at.error and time.monotonic() < deadline:
        time.sleep(0.3)
        at.run()
    assert "Computing the store failed: The disk is full (a test)." in plain(at.error[0].value)
    monkeypatch.setattr(stores, "run_batch_job", real)
    next(b for b in at.button if b.label == "Try again").click().run()
    assert "drivers_ranking" in wait_for_charts(at)


def test_the_page_on_a_real_padded_bundle(tmp_path_factory, monkeypatch):
    """Rossi (tests/support/real_data.py: 52 weeks padded at the end, Masking + LSTM, a store made with
    adaptive steps): the words say what they are relative to, the employment features are one group
    (on by default), the cards speak the bundle's units, the time profile draws the shares its title counts."""
    from explain.analysis.drivers import reason_text
    from tests.support import real_data

    folder = real_data.rossi(tmp_path_factory)
    bundle = load_bundle(folder)
    run_batch_job(bundle, folder / "attributions" / "auto", Settings(steps="auto"), progress=False)
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    monkeypatch.setenv(stores.ENV, str(tmp_path_factory.mktemp("rossi-stores")))
    at = app(page=PAGE)
    shown = wait_for_charts(at)
    d = explain.drivers(folder, folder / "attributions" / "auto")
    assert plain(at.info[0].value) == d.group_sentence
    assert "relative to the average customer (the baseline)" in d.group_sentence
    assert any({f.name for f in g.members} >= {"employed", "employed_share"} for g in d.groups)
    texts = [plain(m.value) for m in at.markdown]
    for segment in d.segments:
        for x in segment.drivers:
            assert any(reason_text(x) in t for t in texts)
    aged = [x for s in d.segments for x in s.drivers if x.feature.name == "age"]
    assert all(f"{x.segment_value:.3g} years on average here against {x.everyone_value:.3g} years" in reason_text(x)
               for x in aged)  # bundle.json's unit
    (profile,) = d.time_profiles
    bars = shown["drivers_time_0"]["data"][0]
    assert np.allclose(array(bars["y"]), 100 * profile.shares)
    title = shown["drivers_time_0"]["layout"]["title"]["text"]
    assert f"The last {profile.recent_periods} of 52 periods hold 90 %" in title
