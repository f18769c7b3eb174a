"""The what-if search given the customer's attribution it would compute first (``counterfactual.search(first=...)``,
what the Customer page's card passes: its own cached attribution): the same answer as the search alone, one IG call
fewer; an attribution of other inputs is not used. On the demo and on a padded weekly bundle unlike it (Masking +
an LSTM with weights set by hand, highest-risk customer padded at the start)."""

import numpy as np
import pytest

from explain.analysis import counterfactual, whatif
from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support import padded
from tests.support.apptest import DEMO


@pytest.fixture(scope="module")
def weekly(tmp_path_factory):
    return load_bundle(padded.write(tmp_path_factory.mktemp("weekly") / "weekly", n=30))


def counted(monkeypatch) -> list:
    """The calls of ``explain_inputs`` the search makes (one per round, and the first round's unless given)."""
    calls = []
    real = counterfactual.explain_inputs

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(counterfactual, "explain_inputs", spy)
    return calls


def same(a, b) -> None:
    assert a.scenario.text() == b.scenario.text() and a.reached == b.reached and a.rounds == b.rounds
    assert a.evaluated == b.evaluated and a.stopped == b.stopped
    np.testing.assert_allclose([a.original_prediction, a.prediction], [b.original_prediction, b.prediction],
                               rtol=0, atol=1e-6)


def highest(bundle, padded_only: bool = False) -> str:
    scores = bundle.predict()[:, 0]
    if padded_only:  # the highest-scored customer with a short history (padded at the start)
        short = set(padded.short_customers(bundle.path))
        scores = np.where([str(i) in short for i in bundle.ids], scores, -1.0)
    return str(bundle.ids[int(np.argmax(scores))])


@pytest.mark.parametrize("which", ["demo", "weekly padded"])
def test_the_pages_attribution_gives_the_same_search_with_one_ig_call_fewer(which, weekly, monkeypatch):
    if which == "demo" and not (DEMO / "model.keras").is_file():
        pytest.skip("the demo bundle is not built")
    bundle = load_bundle(DEMO) if which == "demo" else weekly
    cid = highest(bundle, padded_only=which != "demo")
    settings = Settings(steps=32)
    threshold = 0.5 if which == "demo" else float(bundle.predict(bundle.inputs_for([cid]))[0, 0]) - 0.02
    page = explain_customers(bundle, [cid], settings)  # what the Customer page has computed already
    ctx = whatif.context(bundle, cid, settings)
    calls = counted(monkeypatch)
    alone = counterfactual.search(ctx, threshold=threshold, max_edits=3, time_limit=60)
    computed = len(calls)
    given = counterfactual.search(ctx, threshold=threshold, max_edits=3, time_limit=60, first=page)
    assert alone.rounds >= 1 and computed == alone.rounds
    assert len(calls) - computed == alone.rounds - 1  # the first round ranked by the page's attribution
    same(given, alone)


def test_an_attribution_of_other_inputs_is_not_used(weekly, monkeypatch):
    cid = highest(weekly, padded_only=True)
    other = next(str(i) for i in weekly.ids if str(i) != cid)
    settings = Settings(steps=32)
    threshold = float(weekly.predict(weekly.inputs_for([cid]))[0, 0]) - 0.02
    ctx = whatif.context(weekly, cid, settings)
    calls = counted(monkeypatch)
    alone = counterfactual.search(ctx, threshold=threshold, max_edits=2, time_limit=60)
    computed = len(calls)
    wrong = counterfactual.search(ctx, threshold=threshold, max_edits=2, time_limit=60,
                                  first=explain_customers(weekly, [other], settings))
    assert len(calls) - computed == computed  # its own first round computed again
    same(wrong, alone)
