"""The Customer page tells one story for every kind of bundle (issue 38), through AppTest: the answer with a
feature, a number and its reference above the first chart, the known outcome beside the verdict, the model's
misses in the sidebar, "What would keep this customer?" on a padded bundle too, and no engineers' words."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from tests.support import padded
from tests.support.apptest import DEMO, app, errors, plain

EMBEDDING = DEMO.parent / "demo-embedding"
JARGON = ("mask", "logit", "delta", "gausslegendre", "offset", "1e-06")
POPOVER = ("**Gap left over", "**Steps**", "**Points spent**")  # the badge's popover: the engineers' details


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return padded.write(tmp_path_factory.mktemp("story") / "padded")


def scores_of(folder) -> dict[str, float]:
    from explain.bundle.load import load_bundle

    bundle = load_bundle(folder)
    scores = np.asarray(bundle.predict())[:, 0]
    return dict(zip([str(i) for i in bundle.ids], scores.astype(float).tolist()))


def main_text(at) -> list[str]:
    """The analyst's words in the main area (markdown, captions, info and warnings), the popover left out."""
    texts = [plain(str(n.value)) for n in at.main if n.type in ("markdown", "caption", "info", "warning")]
    return [t for t in texts if not t.startswith(POPOVER)]


def order_of(at) -> list[str]:
    out = []
    for node in at.main:
        if node.type == "markdown" and "mainly because" in str(node.value):
            out.append("answer")
        elif node.type == "plotly_chart" and not any(o.startswith("chart") for o in out):
            out.append("chart")
    return out


def test_padded_bundle_answer_outcome_reasons_and_no_jargon(folder, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    cid = padded.short_customers(folder)[1]
    at = app({"customer": cid, "baseline": "mean"})
    assert not errors(at), errors(at)
    texts = main_text(at)
    answer = next(t for t in texts if "mainly because" in t)
    assert re.search(r"likely to churn \(\d+ % of customers churn\): (higher|lower) than for the average customer "
                     r"\(\d+ %\), mainly because .*\d.*\(the average customer: [\d.]+\), (raising|lowering) the risk "
                     r"by \d", answer), answer
    assert order_of(at)[:2] == ["answer", "chart"]  # the answer above the first chart
    labels = pd.read_csv(folder / "static.csv", dtype={"customer_id": str}).set_index("customer_id")["churned"]
    outcome = "churned" if labels[cid] == 1 else "stayed"
    assert any(f"Known outcome: {outcome}." in t for t in texts), texts
    assert any(t.startswith("A short history: ") and "no data yet" in t for t in texts), texts
    reasons = next(t for t in texts if t.startswith("**The largest effects**"))
    assert reasons.count("\n- ") >= 2 and re.search(r"- (raises|lowers) the risk by \d", reasons), reasons
    found = [w for t in texts for w in JARGON if w in t.lower()]
    assert not found, found
    assert not any("Largest effects:" in t for t in texts)  # the old summary is gone


def test_padded_bundle_high_risk_customer_gets_what_would_keep_them(folder, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    scores = scores_of(folder)
    high = max(scores, key=scores.get)
    assert scores[high] >= 0.5
    at = app({"customer": high})
    assert not errors(at), errors(at)
    card = [plain(m.value) for m in at.markdown if "What would keep this customer?" in m.value]
    assert card and ("would bring the churn score from" in card[0] or "No change of a few values" in card[0]), card


def test_embedding_bundle_says_why_the_keep_search_does_not_run(monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(EMBEDDING))
    static = pd.read_csv(EMBEDDING / "static.csv", dtype={"customer_id": str})
    at = app()  # the default customer: the highest score
    assert not errors(at), errors(at)
    texts = main_text(at)
    assert any("mainly because" in t and "(the average customer: " in t for t in texts), texts
    note = [t for t in texts if t.startswith("**What would keep this customer?**")]
    assert note and "not searched here" in note[0] and "Contract and Plan" in note[0], texts
    cid = at.session_state["customer"]
    outcome = "churned" if int(static.set_index("customer_id").loc[cid, "churned"]) == 1 else "stayed"
    assert any(f"Known outcome: {outcome}" in t for t in texts)
    assert not [w for t in texts for w in JARGON if w in t.lower()]


def test_the_models_misses_picker_opens_a_miss_and_the_page_says_so():
    at = app()
    box = at.selectbox(key="_miss_pick")
    assert box.options, "the demo model misses some customers"
    static = pd.read_csv(DEMO / "static.csv", dtype={"customer_id": str}).set_index("customer_id")["churned"]
    first = box.options[0]
    cid = first.split()[0]
    assert first.endswith("· stayed") and static[cid] == 0  # high risk first, most wrong first
    box.set_value(cid).run()
    assert at.session_state["customer"] == cid and not at.exception
    said = [plain(m.value) for m in at.markdown if "Known outcome" in m.value]
    assert said and ("Known outcome: stayed. The model missed this one: it scores them high risk (0.6 and above), "
                     "but they stayed.") in said[0], said
    last = at.selectbox(key="_miss_pick").options[-1]
    assert last.endswith("· churned") and static[last.split()[0]] == 1  # then low risk who churned


def test_without_labels_no_outcome_and_no_misses_picker(tmp_path, monkeypatch):
    import json
    import shutil

    folder = tmp_path / "nolabels"
    folder.mkdir()
    for name in ("model.keras", "temporal.csv"):
        shutil.copy(DEMO / name, folder / name)
    pd.read_csv(DEMO / "static.csv", dtype={"customer_id": str}).drop(columns="churned").to_csv(
        folder / "static.csv", index=False)
    config = json.loads((DEMO / "bundle.json").read_text())
    config.pop("label_column"), config.pop("positive_label", None)
    (folder / "bundle.json").write_text(json.dumps(config))
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    at = app()
    assert not errors(at)
    texts = main_text(at)
    answer = next(t for t in texts if "mainly because" in t)
    assert re.search(r"\(customers score \d+ % on average\)", answer)  # what is usual without labels: the mean score
    assert "the average customer scores" not in answer  # that name is the mean baseline's (its values, its score)
    assert not any("Known outcome" in t for t in texts)
    assert "_miss_pick" not in [s.key for s in at.sidebar.selectbox]


def test_in_log_odds_the_answer_says_log_odds_and_no_percentage():
    at = app({"customer": "C00877", "space": "logit"})
    assert not errors(at)
    answer = next(t for t in main_text(at) if "mainly because" in t)
    assert re.match(r"C00877 scores -?\d+\.\d\d for churn \(log-odds\) \(26 % of customers churn\): higher than for "
                    r"the average customer \(-?\d+\.\d\d\), mainly because", answer), answer  # log-odds, no percentage
    assert re.search(r"(raising|lowering) the log-odds by \d", answer), answer


def test_rossi_r414_correlated_employment_features_are_one_reason_and_listed_one_by_one(tmp_path_factory,
                                                                                        monkeypatch):
    from tests.support import real_data

    folder = real_data.rossi(tmp_path_factory)
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    at = app({"customer": "R414", "baseline": "mean"})
    assert not errors(at), errors(at)
    texts = main_text(at)
    answer = next(t for t in texts if "mainly because" in t)
    group = "employed and share of weeks employed so far, which move together: "
    assert answer.count(group) == 1, answer
    assert re.search(re.escape(group) + r"employed: no in .*\(the average customer: \d+ % yes\) and share of "
                     r"weeks employed so far averaged .*\(the average customer: [\d.]+\), raising the risk by "
                     r"[\d.]+ in all", answer), answer
    total = float(re.search(r"raising the risk by ([\d.]+) in all", answer).group(1))
    reasons = next(t for t in texts if t.startswith("**The largest effects**"))
    members = [line for line in reasons.split("\n") if "(they move together): raises the risk by" in line]
    assert len(members) == 2 and members[0].startswith("- Employed: no") and "Share of weeks" in members[1], reasons
    own = [float(re.search(r" - raises the risk by ([\d.]+)\.", line).group(1)) for line in members]
    assert sum(own) == pytest.approx(total, abs=0.011)  # each said to 2 decimals: their sum is the group's
    assert all(line.endswith(f"raises the risk by {total:.2f}.") for line in members)
    assert not [w for t in texts for w in JARGON if w in t.lower()]
    assert at.button(key="_random").label == "…or a random customer with arrest"  # not "churner": an arrest label
