"""One story for every kind of bundle (issue 38): the Customer page's words on a padded bundle (64 weeks behind
Masking, tests/support/padded.py), on the embedding demo (categories into embeddings, padded months), on a model
with three inputs (two histories) and on real data padded at the end (carData's Rossi, tests/support/real_data.py).

The values and references the words say are checked against the bundle's own CSV tables (pandas, not the
engine): a customer's value over a window is the mean of their rows there, the average customer's the mean of
every customer's rows that exist (padding is no data)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explain import figures
from explain.analysis import words
from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core import baselines
from explain.core.settings import Settings
from tests.support import padded, real_data

ROOT = Path(__file__).resolve().parents[3]
EMBEDDING = ROOT / "bundles" / "demo-embedding"
JARGON = ("mask", "logit", "delta", "gausslegendre", "offset", "padding", "1e-06", "attribution", "embedding")
REASON = re.compile(r"^[A-Z].* \((the average customer|compared with [^)]*|against [^)]*)(: [^)]+)?\) - "
                    r"(raises|lowers) the risk by \d+(\.\d+)?(e-\d+)?\.$")


@pytest.fixture(scope="module")
def padded_folder(tmp_path_factory):
    return padded.write(tmp_path_factory.mktemp("story") / "padded")


def no_jargon(text: str) -> list[str]:
    return [w for w in JARGON if w in text.lower()]


def test_padded_weeks_are_never_in_a_window_nor_averaged_into_a_value_or_a_reference(padded_folder):
    bundle = load_bundle(padded_folder)
    table = pd.read_csv(padded_folder / "temporal.csv", dtype={"customer_id": str})
    everyone = table[padded.TEMPORAL].mean()  # the average customer: every real week of every customer
    shorts = padded.short_customers(padded_folder)[:4]
    settings = Settings(baseline="mean")
    a = explain_customers(bundle, shorts, settings)
    checked = 0
    for i, cid in enumerate(shorts):
        story = words.story(a, bundle, i, cid, settings=settings)
        rows = table[table.customer_id == cid].set_index("week")
        first = rows.index.min()
        assert story.history == (f"A short history: {len(rows)} weeks of data from {first} on; the "
                                 f"{padded.T - len(rows)} weeks before the customer's first week are no data yet "
                                 "and count for nothing.")
        assert not no_jargon(story.text()), (no_jargon(story.text()), story.text())
        for driver in story.drivers:
            if driver.periods is None:
                continue
            a_, b_ = driver.periods
            assert a_ >= first, (cid, driver)  # the window starts at the customer's first week at the earliest
            column = padded.TEMPORAL[bundle.temporal_labels.index(driver.label)]
            own = rows.loc[a_:b_, column]
            assert driver.count == len(own)
            np.testing.assert_allclose(driver.value, own.mean(), rtol=1e-5)
            np.testing.assert_allclose(driver.reference, everyone[column], rtol=1e-4)
            checked += 1
        for text in story.reasons:
            assert REASON.match(text), text
    assert checked >= 4


def test_against_zero_a_padded_bundle_says_0_not_the_tiny_offset(padded_folder):
    bundle = load_bundle(padded_folder)
    cid = padded.short_customers(padded_folder)[0]
    settings = Settings(baseline="zero")
    a = explain_customers(bundle, [cid], settings)
    story = words.story(a, bundle, 0, cid, settings=settings)
    assert "(against 0)" in story.headline and "e-0" not in story.text(), story.text()


def test_the_first_sentence_has_a_feature_a_number_and_its_reference_for_every_kind_of_bundle(padded_folder):
    for folder in (padded_folder, EMBEDDING):
        bundle = load_bundle(folder)
        for spec in ("mean", "median", f"customer:{bundle.ids[1]}", "cohort:0", "sample:4"):
            settings = Settings(baseline=spec)
            cid = str(bundle.ids[0])
            a = explain_customers(bundle, [cid], settings)
            story = words.story(a, bundle, 0, cid, settings=settings)
            named = words.reference_name(settings.baseline, bundle, "churn")
            head = story.headline
            assert re.search(r"mainly because .*\d.*\((" + re.escape(named) + r"|compared with " + re.escape(named)
                             + r")", head), (folder, spec, head)
            assert re.search(r"(raising|lowering) the risk by \d", head), head
            assert not no_jargon(head), (no_jargon(head), head)


def test_embedding_bundle_names_categories_and_says_why_the_keep_search_does_not_run():
    bundle = load_bundle(EMBEDDING)
    static = pd.read_csv(EMBEDDING / "static.csv", dtype={"customer_id": str})
    mode = bundle.categories["contract"][str(int(static["contract"].mode()[0]))]  # the mode rule's category
    settings = Settings(baseline="mean")
    cids = [str(c) for c in bundle.ids[:6]]
    a = explain_customers(bundle, cids, settings)
    said = [words.story(a, bundle, i, cid, settings=settings) for i, cid in enumerate(cids)]
    contract = [r for s in said for r in s.reasons if r.startswith("Contract is ")]
    assert contract and all(f"(the average customer: {mode})" in r for r in contract), contract
    for story in said:
        assert story.keep is not None and "Contract and Plan" in story.keep and not no_jargon(story.keep)
        assert story.outcome in ("Known outcome: churned.", "Known outcome: stayed.") or "missed this one" in (
            story.outcome or "")


def test_three_inputs_two_histories_one_story(tmp_path_factory):
    from tests.app.test_app_inputs import three_bundle  # the AppTest's bundle: a static input and two histories

    folder = three_bundle.__wrapped__(tmp_path_factory)
    bundle = load_bundle(folder)
    settings = Settings(baseline="mean")
    a = explain_customers(bundle, ["K1"], settings)
    view = figures.customer(a, bundle, "K1", ids=["K1"], settings=settings)
    story = view.story
    assert story.history == ("A short history: 2 months of data from 2025-05 on; the 4 months before the "
                             "customer's first month are no data yet and count for nothing.")
    assert "mainly because" in story.headline and "(the average customer: " in story.headline
    labels = {d.label for d in story.drivers}
    assert {"Support calls", "Spend"} & labels  # features of both histories are read
    assert all(d.periods is None or d.periods[0] >= "2025-05" for d in story.drivers if d.label == "Support calls")
    assert story.keep is not None and "3 inputs" in story.keep
    assert [s.kind for s in view.figures] == ["heatmap", "heatmap", "static"]  # two histories: no single history


def test_real_data_padded_at_the_end(tmp_path_factory):
    folder = real_data.rossi(tmp_path_factory)
    bundle = load_bundle(folder)
    static = pd.read_csv(folder / "static.csv", dtype={"person_id": str}).set_index("person_id")
    table = pd.read_csv(folder / "temporal.csv", dtype={"person_id": str})
    weeks = table.groupby("person_id").size()
    arrested = [c for c in weeks.index if weeks[c] < real_data.T][:3]
    settings = Settings(baseline="mean")
    a = explain_customers(bundle, arrested, settings)
    for i, cid in enumerate(arrested):
        story = words.story(a, bundle, i, cid, settings=settings)
        last = table[table.person_id == cid].week.max()
        assert story.history == (f"A short history: {weeks[cid]} weeks of data up to {last}; the weeks after it "
                                 "are no data and count for nothing.")
        assert story.outcome.startswith("Known outcome: arrest.") and static.loc[cid, "arrest"] == 1
        assert not no_jargon(story.text()), story.text()
        for d in story.drivers:
            assert d.periods is None or d.periods[1] <= last  # never a week after the arrest
        assert re.search(r"\(the average customer: [\d.]+", story.headline), story.headline


def test_figures_customer_and_the_html_report_say_the_same_story(padded_folder):
    bundle = load_bundle(padded_folder)
    cid = padded.short_customers(padded_folder)[0]
    a = explain_customers(bundle, [cid], Settings(baseline="median"))
    view = figures.customer(a, bundle, cid, ids=[cid])
    assert [s.kind for s in view.figures] == ["heatmap", "static", "history"]
    assert "(the median customer: " in view.story.headline
    page = figures.html(a, bundle, cid, ids=[cid])
    from html import escape

    assert escape(view.story.headline) in page and escape(view.story.history) in page
    assert all(escape(r) in page for r in view.story.reasons)
    assert "being explained" not in page and "Largest effects" not in page


def test_the_analysts_baseline_words_say_no_data_yet_and_the_engineers_keep_the_mask(padded_folder):
    bundle = load_bundle(padded_folder)
    for spec in ("mean", "zero", "cohort:1"):
        analyst = baselines.describe(spec, layout=bundle.layout, unit="week", analyst=True)
        assert "Weeks before a customer's first week are no data yet" in analyst
        assert not [w for w in ("mask", "offset", "padding", "1e-06") if w in analyst.lower()], analyst
        assert "mask value" in baselines.describe(spec, layout=bundle.layout, unit="week")
    embedding = load_bundle(EMBEDDING)  # categories and months padded behind Masking(0)
    words_ = baselines.describe("mean", layout=embedding.layout, categorical="mode", analyst=True)
    assert "most frequent category" in words_ and "Months before a customer's first month are no data yet" in words_
    assert not [w for w in ("mask", "offset", "padding") if w in words_.lower()], words_


def test_a_notebooks_explanation_gets_the_same_story():
    import explain

    bundle = load_bundle(ROOT / "bundles" / "demo")
    ids = [str(i) for i in bundle.ids[:6]]
    x = bundle.inputs_for(ids)
    a = explain.explain(bundle.model, [x["static"], x["temporal"]], baseline="mean")
    view = figures.customer(a.attribution, a.bundle, 0)
    mean = x["temporal"].astype(np.float64).mean(axis=(0, 1))  # the in-memory bundle's average customer
    story = view.story
    assert story.headline.startswith("Customer 0 is ") and story.reference == "the average customer"
    d = next(d for d in story.drivers if d.periods is not None)
    column = a.bundle.temporal_labels.index(d.label)
    np.testing.assert_allclose(d.reference, mean[column], rtol=1e-5)
    assert [s.kind for s in view.figures] == ["heatmap", "static", "history"]


def _window_sum(a, bundle, i: int, driver) -> float:
    """A history feature's effect over its window, summed from the attribution array itself (periods by label)."""
    first, last = (list(bundle.periods).index(p) for p in driver.periods)
    column = bundle.temporal_labels.index(driver.label)
    return float(np.sum(np.asarray(a.temporal[i], np.float64)[first:last + 1, column]))


def test_rossi_r414s_employment_is_one_reason_with_its_members_summed_and_listed(tmp_path_factory):
    folder = real_data.rossi(tmp_path_factory)
    bundle = load_bundle(folder)
    settings = Settings(baseline="mean")
    a = explain_customers(bundle, ["R414"], settings)
    story = figures.customer_story(a, bundle, "R414", ids=["R414"], settings=settings)
    named = "employed and share of weeks employed so far, which move together: "
    assert story.headline.count(named) == 1, story.headline  # found from the data: named by its members, once
    (group,) = story.groups
    assert {m.label for m in group.members} == {"Employed", "Share of weeks employed so far"}
    sums = [_window_sum(a, bundle, 0, m) for m in group.members]  # independently, from the attribution array
    np.testing.assert_allclose([m.effect for m in group.members], sums, rtol=1e-9)
    np.testing.assert_allclose(group.effect, sum(sums), rtol=1e-9)
    assert all(s > 0 for s in sums)  # both raise R414's risk
    said = re.search(re.escape(named) + r"(.*), raising the risk by ([\d.]+) in all", story.headline)
    assert said and float(said.group(2)) == pytest.approx(sum(sums), abs=0.005), story.headline
    for m in group.members:  # each member keeps its value, reference and window in the sentence
        assert f"{words.phrase(m, 'the average customer')}" in said.group(1)
        assert "(the average customer: " in words.phrase(m, "the average customer")
    # the reasons list keeps the members, each with its own effect, marked with the group, side by side
    marked = [r for r in story.reasons if "(they move together): raises the risk by" in r]
    assert len(marked) == 2 and story.reasons.index(marked[1]) == story.reasons.index(marked[0]) + 1
    for m, line in zip(group.members, marked):
        assert line.startswith(m.label) and f"- raises the risk by {m.effect:.2f}." in line
        assert line.endswith(f"raises the risk by {sum(sums):.2f}.")
    assert not no_jargon(story.text()), story.text()


def test_rossi_with_a_declared_group_names_it_once(tmp_path_factory, tmp_path):
    import json
    import shutil

    folder = tmp_path / "rossi"
    shutil.copytree(real_data.rossi(tmp_path_factory), folder)
    config = json.loads((folder / "bundle.json").read_text())
    (folder / "bundle.json").write_text(json.dumps({**config, "groups": {"Employment": ["employed",
                                                                                      "employed_share"]}}))
    bundle = load_bundle(folder)
    settings = Settings(baseline="mean")
    a = explain_customers(bundle, ["R414"], settings)
    story = words.story(a, bundle, 0, "R414", settings=settings)
    assert story.headline.count("employment") == 1 and "which move together" not in story.headline
    assert re.search(r"mainly because employment \(employed and share of weeks employed so far\): employed: no in "
                     r"[\d-]+ to [\d-]+ \(the average customer: \d+ % yes\) and share of weeks employed so far "
                     r"averaged [\d.]+ .*\(the average customer: [\d.]+\), raising the risk by [\d.]+ in all",
                     story.headline), story.headline
    assert sum("(the group Employment): raises the risk by" in r for r in story.reasons) == 2, story.reasons
