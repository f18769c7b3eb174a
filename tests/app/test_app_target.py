"""The dashboard on a softmax ["stay", "churn"] bundle with ``"target": "churn"`` (tests/support/softmax.py):
it opens on churn everywhere (the verdict, the customer box's scores, the highest-risk list, the first
customer shown, the Cohort page's risk), and the sidebar's target moves all of them together (AppTest)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.apptest import app, array, charts, errors, plain
from tests.support.softmax import softmax_bundle


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return softmax_bundle(tmp_path_factory.mktemp("softmax") / "bundle", target="churn")[0]


@pytest.fixture(scope="module")
def scores(folder):
    from explain.bundle.load import load_bundle

    bundle = load_bundle(folder)
    out = bundle.predict()
    return {"stay": dict(zip(bundle.ids.tolist(), out[:, 0])), "churn": dict(zip(bundle.ids.tolist(), out[:, 1]))}


def headline(at) -> str:
    return next(plain(m.value) for m in at.markdown if m.value.startswith("### :"))


def box_label(at, cid) -> str:
    return at.selectbox(key="customer").format_func(cid)


def test_opens_on_churn_everywhere_and_the_sidebar_target_moves_everything(folder, scores, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    churn, stay = scores["churn"], scores["stay"]
    riskiest = max(churn, key=churn.get)
    at = app()
    assert not errors(at), errors(at)
    assert at.selectbox(key="target").value == "churn"
    assert at.session_state["customer"] == riskiest  # the first customer shown: the highest churn
    assert headline(at).endswith("[High risk: likely to churn]") and churn[riskiest] >= 0.6
    assert box_label(at, riskiest) == f"{riskiest}  ·  churn {churn[riskiest]:.2f}"
    top = [option.split()[0] for option in at.selectbox(key="_top_pick").options]
    assert top[:5] == sorted(churn, key=lambda c: -churn[c])[:5]
    metric = next(m for m in at.metric if m.label.startswith("Predicted"))
    assert "churn" in metric.label and float(metric.value) == pytest.approx(churn[riskiest], abs=1e-3)

    safest = min(churn, key=churn.get)
    at = app({"customer": safest})
    assert headline(at).endswith("[Low risk: unlikely to churn]")

    at.selectbox(key="target").set_value("stay").run()  # every view follows the sidebar's target
    assert not at.exception and at.query_params["target"] == "stay"
    assert box_label(at, safest) == f"{safest}  ·  stay {stay[safest]:.2f}"
    top = [option.split()[0] for option in at.selectbox(key="_top_pick").options]
    assert top[:5] == sorted(stay, key=lambda c: -stay[c])[:5]
    assert headline(at).endswith("[High risk: likely to stay]")


def test_cohort_risk_bands_use_the_bundles_target(folder, scores, monkeypatch):
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    at = app({"sample": "all"}, page="pages/cohort.py")
    assert not errors(at), errors(at)
    x = np.sort(array(charts(at)["cohort_risk"]["data"][0]["x"]))
    np.testing.assert_allclose(x, np.sort(list(scores["churn"].values())), atol=1e-6)
