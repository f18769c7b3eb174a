"""The Customer page with the baseline "themselves, earlier" (previous:K, issue 40): the answer says how the risk
changed since when and why, with both values of the reason; on a padded (Masking) bundle the periods that arrived
since then are said; a link cannot name an earlier snapshot folder on the server."""

from __future__ import annotations

import re

import pytest

from tests.support import padded
from tests.support.apptest import app, errors, plain


def answer_of(at) -> str:
    texts = [plain(str(n.value)) for n in at.main if n.type in ("markdown", "caption", "info", "warning")]
    return next(t for t in texts if "mainly because" in t or "stayed at" in t)


def test_demo_customer_change_since_last_month():
    at = app({"customer": "C00013", "baseline": "previous"})
    assert not errors(at), errors(at)
    answer = answer_of(at)
    assert re.search(r"C00013's risk rose from 73 % to 87 % since 2025-11 .*mainly because support calls went from 0 "
                     r"to 4 in 2025-10, raising the risk by 0\.1\d", answer), answer
    assert at.sidebar.selectbox(key="baseline_kind").value == "previous"
    assert at.sidebar.select_slider(key="previous_k").value == 1
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Prediction a month earlier"] == "0.729" and metrics["Difference explained"] == "+0.142"


def test_three_months_back_from_the_slider():
    at = app({"customer": "C00013", "baseline": "previous:3"})
    assert not errors(at), errors(at)
    assert at.sidebar.select_slider(key="previous_k").value == 3
    assert "since 2025-09" in answer_of(at)


@pytest.mark.parametrize("value", ["bundle:/etc", "previous:500"])
def test_a_link_cannot_name_a_snapshot_folder_or_too_many_periods(value):
    at = app({"customer": "C00013", "baseline": value})
    assert not errors(at), errors(at)
    assert at.sidebar.selectbox(key="baseline_kind").value == "mean"
    shown = " ".join(plain(str(w.value)) for w in at.sidebar.warning)
    assert "Ignored the link's baseline" in shown, shown


def test_padded_bundle_says_the_periods_that_arrived(tmp_path, monkeypatch):
    folder = padded.write(tmp_path / "padded")
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    cid = padded.short_customers(folder)[0]
    at = app({"customer": cid, "baseline": "previous"})
    assert not errors(at), errors(at)
    texts = " ".join(plain(str(n.value)) for n in at.main if n.type in ("markdown", "caption", "info", "warning"))
    assert f"{cid}'s risk " in texts and "since" in texts
    assert re.search(r"hold data now and held none then .*: their arrival (raises|lowers) the risk by", texts), texts
